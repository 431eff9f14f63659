#!/usr/bin/env bash
# Configures and builds Tessera into build/ (binaries in build/bin/) with Ninja and ccache.
# Incremental: a second run rebuilds only what changed. CI=true turns warnings into errors.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR="${BUILD_DIR:-build}"
werror=OFF
[ "${CI:-}" = "true" ] && werror=ON
export CCACHE_BASEDIR="$PWD"
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"

if [ ! -f "$BUILD_DIR/build.ninja" ] || [ "${TESSERA_RECONFIGURE:-0}" = 1 ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DTESSERA_WERROR="$werror" >/dev/null
fi
cmake --build "$BUILD_DIR" -- -j"$(nproc)"
