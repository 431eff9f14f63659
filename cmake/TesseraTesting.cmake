# tessera_add_test(NAME LABEL unit|integration|e2e SOURCES ... [LIBS ...] [WHOLE] [TIMEOUT s])
#
# Builds a Catch2 test binary into build/tests. Unit tests are registered one CTest test per test
# case; WHOLE registers the binary as a single CTest test, for suites that share an expensive
# fixture (a PostgreSQL server, a cluster of processes) across their cases.
function(tessera_add_test name)
  cmake_parse_arguments(ARG "WHOLE" "LABEL;TIMEOUT" "SOURCES;LIBS" ${ARGN})
  if(NOT ARG_LABEL)
    message(FATAL_ERROR "tessera_add_test(${name}): LABEL is required")
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE tessera_catch_main ${ARG_LIBS})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  tessera_target_warnings(${name})
  if(ARG_WHOLE)
    add_test(NAME ${ARG_LABEL}:${name} COMMAND ${name} --durations yes)
    set_tests_properties(${ARG_LABEL}:${name} PROPERTIES LABELS ${ARG_LABEL} TIMEOUT ${ARG_TIMEOUT})
  else()
    # --warn NoTests: a test name the discovery mangled matches nothing, and that must fail.
    catch_discover_tests(${name} TEST_PREFIX "${ARG_LABEL}:${name}:" EXTRA_ARGS --warn NoTests
      PROPERTIES LABELS ${ARG_LABEL} TIMEOUT ${ARG_TIMEOUT})
  endif()
endfunction()
