#!/usr/bin/env bash
# Installs the dependencies, builds, and runs every test: unit, integration (real PostgreSQL
# servers, real processes, real sockets), end-to-end, and a bounded libFuzzer run; then prints
# the slowest tests and warns of any that took more than half its timeout.
# Works as root (CI) and as an ordinary user (sudo is used only to install packages).
# Arguments go to ctest, and then only the tests they choose run, without the fuzzers
# (deploy/test.sh -L unit, deploy/test.sh -R control_plane_faults).
#
#   deploy/test.sh --fast [ctest arguments]   the fast tier: builds only the unit tests
#                                             (target unit-tests) and runs them (ctest -L unit):
#                                             no server, database or network; about half a
#                                             minute of tests on 2 cores
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

fast=0
if [ "${1:-}" = "--fast" ]; then
  fast=1
  shift
  set -- -L unit "$@"
fi

deploy/install-deps.sh
if [ "$fast" = 1 ]; then
  deploy/build.sh unit-tests
else
  deploy/build.sh
fi
built=$(date +%s)
echo "test.sh: build finished in $((built - start)) s"

BUILD_DIR="${BUILD_DIR:-build}"
status=0
# The timeout of a test that sets none; e2e and integration suites set their own.
default_timeout=600
mkdir -p "$BUILD_DIR/Testing"
report="$(cd "$BUILD_DIR/Testing" && pwd)/ctest-junit.xml"
rm -f "$report"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" --timeout "$default_timeout" \
  --output-junit "$report" "$@" || status=$?

# The slowest tests, and any that took more than half its timeout: a creeping test is seen here
# before it fails on a slower machine.
ctest --test-dir "$BUILD_DIR" --show-only=json-v1 >"$BUILD_DIR/Testing/ctest-tests.json" &&
  /usr/bin/python3 deploy/test-times.py "$report" "$BUILD_DIR/Testing/ctest-tests.json" \
    "$default_timeout" || true

# Show which conformance cases ran against which store (ctest hides passing output).
log="$BUILD_DIR/Testing/Temporary/LastTest.log"
if [ -f "$log" ]; then
  echo "Store conformance suite:"
  grep -E "^[0-9.]+ s: (memory|postgres) store conformance:" "$log" | sed 's/^/  /' || true
fi

if [ $# -gt 0 ]; then  # the tests asked for only
  echo "test.sh: everything took $(( $(date +%s) - start )) s"
  exit $status
fi

# The run spec parser's fuzzer, built with clang in its own tree, for a bounded time.
export CCACHE_BASEDIR="$PWD"
export CCACHE_NOHASHDIR=true
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DTESSERA_FUZZ_ONLY=ON >/dev/null
fi
cmake --build build-fuzz -- -j"$(nproc)"
ctest --test-dir build-fuzz --output-on-failure || status=$?

echo "test.sh: everything took $(( $(date +%s) - start )) s"
exit $status
