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

# Replaces the .cc sources of `target` with batches (a target of fewer than two is left alone).
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
  set(kept)
  foreach(source IN LISTS sources)
    cmake_path(ABSOLUTE_PATH source BASE_DIRECTORY ${source_dir} OUTPUT_VARIABLE path)
    cmake_path(RELATIVE_PATH path BASE_DIRECTORY ${CMAKE_SOURCE_DIR} OUTPUT_VARIABLE relative)
    cmake_path(IS_PREFIX CMAKE_SOURCE_DIR ${path} NORMALIZE in_tree)
    cmake_path(IS_PREFIX CMAKE_BINARY_DIR ${path} NORMALIZE generated)
    if(source MATCHES "\\.cc$" AND in_tree AND NOT generated
       AND NOT relative IN_LIST TESSERA_UNITY_EXCLUDE)
      list(APPEND batched ${relative})
    else()
      list(APPEND kept ${source})
    endif()
  endforeach()
  list(LENGTH batched count)
  if(count LESS 2)
    return()
  endif()
  list(SORT batched)
  set(index 0)
  set(text "")
  set(in_batch 0)
  foreach(relative IN LISTS batched)
    string(APPEND text "#include \"${relative}\"\n")
    math(EXPR in_batch "${in_batch} + 1")
    if(in_batch EQUAL TESSERA_UNITY_BATCH)
      set(unit ${CMAKE_BINARY_DIR}/unity/${target}_${index}.cc)
      file(CONFIGURE OUTPUT ${unit} CONTENT "${text}")
      list(APPEND kept ${unit})
      math(EXPR index "${index} + 1")
      set(text "")
      set(in_batch 0)
    endif()
  endforeach()
  if(in_batch GREATER 0)
    set(unit ${CMAKE_BINARY_DIR}/unity/${target}_${index}.cc)
    file(CONFIGURE OUTPUT ${unit} CONTENT "${text}")
    list(APPEND kept ${unit})
  endif()
  set_property(TARGET ${target} PROPERTY SOURCES ${kept})
  target_include_directories(${target} PRIVATE ${CMAKE_SOURCE_DIR})
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
