# Compiler cache, warnings and the optional CUDA toolkit.

find_program(CCACHE_PROGRAM ccache)
if(CCACHE_PROGRAM)
  set(CMAKE_C_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
  message(STATUS "ccache: ${CCACHE_PROGRAM}")
endif()

# Linking: LLVM's lld links tessera-server in about 5 s where GNU ld takes 26 s (2 cores), and
# links are about half of a build whose objects come from the compiler cache. The link flag is
# not a compile flag, so switching linkers keeps every cached object. GNU ld where lld is absent.
find_program(TESSERA_LLD ld.lld)
if(TESSERA_LLD AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  add_link_options(-fuse-ld=lld)
  message(STATUS "linker: lld (${TESSERA_LLD})")
endif()

# Disk: the build's debug information is most of its size (about 12 GB of binaries and archives
# uncompressed, where a CI machine may have little room). The linker compresses it in every binary
# (gdb reads it as before), and archives are thin: they name their object files instead of
# copying them. Both are link steps only, so the compiler cache still holds every object.
if(CMAKE_SYSTEM_NAME STREQUAL "Linux" AND NOT APPLE)
  add_link_options(LINKER:--compress-debug-sections=zlib)
  set(CMAKE_C_ARCHIVE_CREATE "<CMAKE_AR> qcT <TARGET> <LINK_FLAGS> <OBJECTS>")
  set(CMAKE_CXX_ARCHIVE_CREATE "<CMAKE_AR> qcT <TARGET> <LINK_FLAGS> <OBJECTS>")
  set(CMAKE_C_ARCHIVE_APPEND "<CMAKE_AR> qT <TARGET> <LINK_FLAGS> <OBJECTS>")
  set(CMAKE_CXX_ARCHIVE_APPEND "<CMAKE_AR> qT <TARGET> <LINK_FLAGS> <OBJECTS>")
endif()

# Debug information: line tables (-g1) by default, not full (-g). A backtrace, a sanitizer's
# report and perf still name every function, file and line (inlined frames too); what -g1 drops
# is variables and types, which only a debugger needs. Full debug info was about 40% of a heavy
# unit's compile time (the gateway's first batch: 170 s at -O2 -g, 99 s at -O2 -g1, 2 cores,
# 2026-12-07), so an empty-cache build spent much of its time on it. Someone about to step
# through the code in gdb configures -DTESSERA_DEBUG_INFO=full. Tests' own units are -g1 either way.
set(TESSERA_DEBUG_INFO "lines" CACHE STRING
  "Debug information in RelWithDebInfo and Debug builds: lines (-g1) or full (-g, for gdb)")
set_property(CACHE TESSERA_DEBUG_INFO PROPERTY STRINGS lines full)
if(NOT TESSERA_DEBUG_INFO MATCHES "^(lines|full)$")
  message(FATAL_ERROR "TESSERA_DEBUG_INFO is '${TESSERA_DEBUG_INFO}': it must be lines or full")
endif()
if(TESSERA_DEBUG_INFO STREQUAL "lines")
  foreach(lang C CXX)
    foreach(config RELWITHDEBINFO DEBUG)
      string(REGEX REPLACE "(^| )-g( |$)" "\\1-g1\\2" CMAKE_${lang}_FLAGS_${config}
             "${CMAKE_${lang}_FLAGS_${config}}")
    endforeach()
  endforeach()
endif()

# Warnings for our own code only; generated protobuf code gets them relaxed in proto/.
set(TESSERA_WARNINGS -Wall -Wextra -Wno-unused-parameter)
# GCC 12 reports impossible overlaps in inlined std::string assignments at -O2 (GCC bug 105329:
# "accessing 9223372036854775810 or more bytes"); the warning is noise there, so it is off.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  list(APPEND TESSERA_WARNINGS -Wno-restrict)
endif()
if(TESSERA_WERROR)
  list(APPEND TESSERA_WARNINGS -Werror)
endif()

# Precompiles `headers` for `target`'s units. Under ccache, -fpch-preprocess lets it cache units
# that use the header (deploy/build.sh sets the sloppiness ccache needs for that).
function(tessera_precompile_headers target)
  target_precompile_headers(${target} PRIVATE ${ARGN})
  if(CCACHE_PROGRAM)
    target_compile_options(${target} PRIVATE -fpch-preprocess)
  endif()
endfunction()

# Applies the project's warning flags to a target of ours.
function(tessera_target_warnings target)
  target_compile_options(${target} PRIVATE ${TESSERA_WARNINGS})
endfunction()

# CUDA and NCCL are optional: GPU code paths compile when /usr/local/cuda is there.
if(NOT TESSERA_FUZZ_ONLY)
  find_package(CUDAToolkit QUIET)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS /usr/local/cuda/include ${CUDAToolkit_INCLUDE_DIRS})
  find_library(NCCL_LIBRARY nccl HINTS /usr/local/cuda/lib64 /usr/local/cuda/lib ${CUDAToolkit_LIBRARY_DIR})
  if(CUDAToolkit_FOUND AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(TESSERA_HAVE_CUDA ON)
    message(STATUS "CUDA ${CUDAToolkit_VERSION} and NCCL found: GPU code paths are built")
  else()
    set(TESSERA_HAVE_CUDA OFF)
    message(STATUS "CUDA/NCCL not found: GPU code paths are skipped")
  endif()
endif()
