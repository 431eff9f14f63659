# Unity builds of the production code: each library's and binary's .cc files are compiled in
# batches of TESSERA_UNITY_BATCH, one translation unit per batch, so the heavy headers every unit
# includes (gRPC, protobuf, CLI11, nlohmann-json, spdlog) are parsed and their inline code
# generated once per batch instead of once per file. Measured on 2 cores (2026-12-06, cold
# cache): 8 of mcli's files took 95 s one by one and 24 s as one unit; 8 of the store's 19 s and
# 8 s. Each test binary's files are batched too (tessera_add_test): a test file's helpers and
# fixtures are named for what they hold, or shared through a header, never the same name in two
# files of one binary.
#
# CMake's own UNITY_BUILD includes each file by its absolute path, which makes the unit's text
# differ between two checkouts, so ccache could never reuse a fresh clone's (CI's) objects. The
# batches written here include each file relative to the source root (found through the
# -I${CMAKE_SOURCE_DIR} every target has), so a clone elsewhere hits the cache as before.
#
# A file whose names clash with another's in its batch (two anonymous-namespace helpers of the
# same name) is a compile error; rename one, or list the file in TESSERA_UNITY_EXCLUDE.

set(TESSERA_UNITY_BATCH 8 CACHE STRING
  "Production .cc files compiled together as one unit (1: a unit per file, no unity build)")
set(TESSERA_UNITY_GRPC_BATCH 16 CACHE STRING
  "gRPC's generated .grpc.pb.cc files compiled together as one unit")
# Compiled on their own: their classes keep members of types from their anonymous namespace
# (OpenSSL deleters, Beast's router), which GCC refuses (-Wsubobject-linkage) once the file is
# included by another; tls_flags.cc's OpenSSL helpers also share names with its neighbours'.
set(TESSERA_UNITY_EXCLUDE
  transport/tls/certificate_authority.cc
  transport/tls/tls_flags.cc
  transport/metrics/http_endpoint.cc
  # Data, not code: the console's files as arrays; nothing to share, and no edit of its
  # neighbours should recompile them.
  services/gateway/console_assets.cc)

# The targets defined in `dir` and its subdirectories.
function(_tessera_targets_under dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _tessera_targets_under(${sub} more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# Writes `files` (paths relative to an include directory of the target) in batches of `size` to
# ${CMAKE_BINARY_DIR}/unity/<name>_<n>.cc; the units written go to `out`.
function(_tessera_write_batches name files size out)
  set(units)
  set(index 0)
  set(text "")
  set(in_batch 0)
  list(LENGTH files count)
  foreach(relative IN LISTS files)
    string(APPEND text "#include \"${relative}\"\n")
    math(EXPR in_batch "${in_batch} + 1")
    math(EXPR count "${count} - 1")
    if(in_batch EQUAL size OR count EQUAL 0)
      set(unit ${CMAKE_BINARY_DIR}/unity/${name}_${index}.cc)
      file(CONFIGURE OUTPUT ${unit} CONTENT "${text}")
      list(APPEND units ${unit})
      math(EXPR index "${index} + 1")
      set(text "")
      set(in_batch 0)
    endif()
  endforeach()
  set(${out} ${units} PARENT_SCOPE)
endfunction()

# Replaces the .cc sources of `target` with batches (a target of fewer than two is left alone).
# gRPC's generated .grpc.pb.cc files are batched apart from the hand-written ones, in batches of
# TESSERA_UNITY_GRPC_BATCH: each repeats the parse of gRPC's and protobuf's headers, and the
# templates they instantiate, for a few lines of its own, and the plugin names everything after
# its service (measured on 2 cores, 2026-12-07: the API's 14 files 138 s one by one, 49 s as one
# unit). protoc's .pb.cc files cannot be: each defines `schemas` and `file_default_instances` at
# file scope. The batched files stay sources of the target, marked not to be compiled, so that
# the target still runs the code generators before its units.
function(tessera_unity_batch_target target)
  if(TESSERA_UNITY_BATCH LESS_EQUAL 1)
    return()
  endif()
  get_target_property(type ${target} TYPE)
  if(NOT type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
    return()
  endif()
  get_target_property(sources ${target} SOURCES)
  get_target_property(source_dir ${target} SOURCE_DIR)
  set(batched)
  set(grpc_batched)
  set(kept)
  foreach(source IN LISTS sources)
    cmake_path(ABSOLUTE_PATH source BASE_DIRECTORY ${source_dir} OUTPUT_VARIABLE path)
    cmake_path(RELATIVE_PATH path BASE_DIRECTORY ${CMAKE_SOURCE_DIR} OUTPUT_VARIABLE relative)
    cmake_path(IS_PREFIX CMAKE_SOURCE_DIR ${path} NORMALIZE in_tree)
    cmake_path(IS_PREFIX CMAKE_BINARY_DIR ${path} NORMALIZE generated)
    if(source MATCHES "\\.cc$" AND in_tree AND NOT generated
       AND NOT relative IN_LIST TESSERA_UNITY_EXCLUDE)
      list(APPEND batched ${relative})
    elseif(path MATCHES "\\.grpc\\.pb\\.cc$" AND generated)
      cmake_path(RELATIVE_PATH path BASE_DIRECTORY ${CMAKE_BINARY_DIR} OUTPUT_VARIABLE from_build)
      list(APPEND grpc_batched ${from_build})
      list(APPEND kept ${source})
    else()
      list(APPEND kept ${source})
    endif()
  endforeach()
  list(LENGTH batched count)
  list(LENGTH grpc_batched grpc_count)
  if(count LESS 2 AND grpc_count LESS 2)
    return()
  endif()
  if(count GREATER_EQUAL 2)
    list(SORT batched)
    _tessera_write_batches(${target} "${batched}" ${TESSERA_UNITY_BATCH} units)
    list(APPEND kept ${units})
    target_include_directories(${target} PRIVATE ${CMAKE_SOURCE_DIR})
  else()
    list(TRANSFORM batched PREPEND ${CMAKE_SOURCE_DIR}/)
    list(APPEND kept ${batched})
  endif()
  if(grpc_count GREATER_EQUAL 2)
    foreach(relative IN LISTS grpc_batched)
      set_source_files_properties(${CMAKE_BINARY_DIR}/${relative} TARGET_DIRECTORY ${target}
                                  PROPERTIES HEADER_FILE_ONLY ON)
    endforeach()
    list(SORT grpc_batched)
    _tessera_write_batches(${target}_grpc "${grpc_batched}" ${TESSERA_UNITY_GRPC_BATCH} units)
    list(APPEND kept ${units})
    target_include_directories(${target} PRIVATE ${CMAKE_BINARY_DIR})
  endif()
  set_property(TARGET ${target} PROPERTY SOURCES ${kept})
endfunction()

# Batches every compiled target under the given directories.
function(tessera_unity_build)
  set(targets)
  foreach(dir IN LISTS ARGN)
    _tessera_targets_under(${CMAKE_SOURCE_DIR}/${dir} found)
    list(APPEND targets ${found})
  endforeach()
  foreach(target IN LISTS targets)
    tessera_unity_batch_target(${target})
  endforeach()
endfunction()
