# tessera_add_test(NAME LABEL unit|integration|e2e SOURCES ... [LIBS ...] [WHOLE] [SERIAL] [NO_UNITY]
#                  [TIMEOUT s] [FIXTURES_SETUP f] [FIXTURES_REQUIRED f])
#
# Builds a Catch2 test binary into build/tests. Test cases are registered one CTest test each,
# with TIMEOUT each; WHOLE registers the binary as a single CTest test, for suites that share an
# expensive fixture (a PostgreSQL server, a cluster of processes) across their cases. A fixture
# that several binaries share is a CTest fixture instead: the test that makes it names it in
# FIXTURES_SETUP, the tests that use it in FIXTURES_REQUIRED (ctest runs it first, also for
# ctest -R). SERIAL runs each of its tests alone on the machine (RUN_SERIAL), for tests that
# measure the machine's speed or hold it to a time.
#
# A test binary's files are compiled in unity batches as the production code's are
# (TesseraUnity.cmake): no two of its files may define the same name at file scope. NO_UNITY
# compiles each alone, for files that must see a header first themselves (LibTorch's tests
# #undef glog's CHECK before including Catch, which one batch would include only once).
#
# A test's own units are compiled with -O1 -g1, not the build's -O2: the optimiser and full
# debug info were about a third of their compile time (a test's speed is its subject's, built at
# -O2 in the libraries it links; -g1 keeps file and line in a backtrace, and holds also where
# TESSERA_DEBUG_INFO=full gives the production code -g).
#
# Every LABEL unit binary is also a dependency of the target `unit-tests` (made by
# tessera_add_unit_tests_target, after the tests' folders), which `deploy/test.sh --fast` builds
# alone: the fast tier needs neither the servers nor the integration suites built.
function(tessera_add_test name)
  cmake_parse_arguments(ARG "WHOLE;SERIAL;NO_UNITY" "LABEL;TIMEOUT;FIXTURES_SETUP;FIXTURES_REQUIRED"
    "SOURCES;LIBS" ${ARGN})
  if(NOT ARG_LABEL)
    message(FATAL_ERROR "tessera_add_test(${name}): LABEL is required")
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  if(NOT ARG_NO_UNITY)
    tessera_unity_batch_target(${name})
  endif()
  if(ARG_LABEL STREQUAL "unit")
    set_property(GLOBAL APPEND PROPERTY TESSERA_UNIT_TEST_TARGETS ${name})
  endif()
  target_link_libraries(${name} PRIVATE tessera_catch_main ${ARG_LIBS})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  tessera_target_warnings(${name})
  target_compile_options(${name} PRIVATE -O1 -g1)
  set(properties LABELS ${ARG_LABEL} TIMEOUT ${ARG_TIMEOUT})
  if(ARG_FIXTURES_SETUP)
    list(APPEND properties FIXTURES_SETUP ${ARG_FIXTURES_SETUP})
  endif()
  if(ARG_FIXTURES_REQUIRED)
    list(APPEND properties FIXTURES_REQUIRED ${ARG_FIXTURES_REQUIRED})
  endif()
  if(ARG_SERIAL)
    list(APPEND properties RUN_SERIAL TRUE)
  endif()
  if(ARG_WHOLE)
    add_test(NAME ${ARG_LABEL}:${name} COMMAND ${name} --durations yes)
    set_tests_properties(${ARG_LABEL}:${name} PROPERTIES ${properties})
  else()
    # --warn NoTests: a test name the discovery mangled matches nothing, and that must fail.
    catch_discover_tests(${name} TEST_PREFIX "${ARG_LABEL}:${name}:"
      EXTRA_ARGS --warn NoTests PROPERTIES ${properties})
  endif()
endfunction()

# The target `unit-tests`: every LABEL unit test binary (and what each needs to run).
function(tessera_add_unit_tests_target)
  get_property(unit_tests GLOBAL PROPERTY TESSERA_UNIT_TEST_TARGETS)
  add_custom_target(unit-tests)
  add_dependencies(unit-tests ${unit_tests})
endfunction()
