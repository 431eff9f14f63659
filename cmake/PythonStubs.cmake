# Generates the Python SDK's protobuf and gRPC modules from the API's .proto files into OUT, with
# their imports of one another made relative ("from tessera.v1 import x_pb2" becomes "from .
# import x_pb2"), so that they live inside the SDK's package (tessera_sdk._proto) rather than as
# a top-level "tessera" package of their own.
#   cmake -DPROTOC=... -DPLUGIN=... -DPROTO_DIR=... -DOUT=... -P PythonStubs.cmake
file(GLOB protos RELATIVE ${PROTO_DIR} ${PROTO_DIR}/tessera/v1/*.proto)
set(tmp ${OUT}.tmp)
file(REMOVE_RECURSE ${tmp})
file(MAKE_DIRECTORY ${tmp})
execute_process(
  COMMAND ${PROTOC} -I ${PROTO_DIR} --python_out=${tmp} --grpc_python_out=${tmp}
          --plugin=protoc-gen-grpc_python=${PLUGIN} ${protos}
  RESULT_VARIABLE result ERROR_VARIABLE errors)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "protoc failed for the Python SDK's stubs: ${errors}")
endif()
file(MAKE_DIRECTORY ${OUT})
file(GLOB generated ${tmp}/tessera/v1/*.py)
foreach(file ${generated})
  get_filename_component(name ${file} NAME)
  file(READ ${file} text)
  string(REGEX REPLACE "(^|\n)from tessera\\.v1 import " "\\1from . import " text "${text}")
  file(WRITE ${OUT}/${name}.new "${text}")
  # Only a changed module is rewritten, so that its timestamp says when it changed.
  execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUT}/${name}.new ${OUT}/${name})
  file(REMOVE ${OUT}/${name}.new)
endforeach()
file(WRITE ${OUT}/__init__.py "\"\"\"Generated from proto/tessera/v1 when Tessera is built.\"\"\"\n")
file(REMOVE_RECURSE ${tmp})
