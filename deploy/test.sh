#!/usr/bin/env bash
# Installs the dependencies, builds, and runs every test: unit, integration (real PostgreSQL
# servers, real processes, real sockets), end-to-end, and a bounded libFuzzer run.
# Works as root (CI) and as an ordinary user (sudo is used only to install packages).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

deploy/install-deps.sh
deploy/build.sh
built=$(date +%s)
echo "test.sh: build finished in $((built - start)) s"

BUILD_DIR="${BUILD_DIR:-build}"
status=0
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" --timeout 600 || status=$?

# Show which conformance cases ran against which store (ctest hides passing output).
log="$BUILD_DIR/Testing/Temporary/LastTest.log"
if [ -f "$log" ]; then
  echo "Store conformance suite:"
  grep -E "^[0-9.]+ s: (memory|postgres) store conformance:" "$log" | sed 's/^/  /' || true
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
