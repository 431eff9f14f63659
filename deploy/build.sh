#!/usr/bin/env bash
# Configures and builds Tessera into build/ (binaries in build/bin/) with Ninja and ccache.
#
#   deploy/build.sh                  everything but the benchmarks: every binary and test
#   deploy/build.sh benches          the benchmarks (built only when asked)
#   deploy/build.sh TARGET...        only these CMake targets and what they need
#                                    (deploy/build.sh tessera-server mcli)
#
# Before building it prints how long the build should take: the Ninja steps left to run, times
# the mean step of earlier builds in this build folder (its .ninja_log), or on a fresh folder
# TESSERA_STEP_SECONDS (9.4 s: a full build from an empty compiler cache, 400 steps, took 29
# and 34 minutes on a fresh 2-core machine on 2026-12-07 with line-table debug info, 40.6 with
# full debug info; another machine took 13 on 2026-12-06, so the figure is the slower one's),
# shared among the cores.
# Incremental: a second run rebuilds only what changed. CI=true turns warnings into errors.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR="${BUILD_DIR:-build}"
targets=("$@")
jobs="$(nproc)"
werror=OFF
[ "${CI:-}" = "true" ] && werror=ON
export CCACHE_BASEDIR="$PWD"
# Object files carry the source folder in their debug info; without this ccache keys on it, and a
# fresh clone (CI, a second checkout) would rebuild everything instead of reusing the cache.
export CCACHE_NOHASHDIR=true
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"
# Units that use a precompiled header (the engine's torch.h) are cached only with these.
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"

if [ ! -f "$BUILD_DIR/build.ninja" ] || [ "${TESSERA_RECONFIGURE:-0}" = 1 ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DTESSERA_WERROR="$werror" >/dev/null
fi

# What Ninja would run, without running anything: one "[i/n] ..." line per step. Planned from a
# copy of build.ninja: on the file itself a dry run plans only the manifest's own steps (CMake's
# re-check of its globs runs every time, and Ninja stops planning at a manifest it would
# rebuild), and so announced "2 steps" for builds of hundreds.
dry_run() {
  local copy="$BUILD_DIR/.plan.ninja" out status=0
  cp "$BUILD_DIR/build.ninja" "$copy"
  out="$(NINJA_STATUS='[%f/%t] ' ninja -C "$BUILD_DIR" -f .plan.ninja -n \
           ${targets[@]+"${targets[@]}"} 2>&1)" || status=$?
  rm -f "$copy"
  printf '%s\n' "$out"
  return "$status"
}

# Prints the estimate; prints nothing when Ninja cannot plan (an unknown target: the build
# below says so).
estimate() {
  local plan steps per_step basis
  # A dry run cannot see past a build.ninja that is out of date (CMake files changed, or the
  # migrations' glob must be checked again): bring it up to date first, as the build would.
  ninja -C "$BUILD_DIR" build.ninja >/dev/null 2>&1 || return 0
  plan="$(dry_run)" || return 0
  steps="$(grep -c '^\[' <<<"$plan" || true)"
  if [ "$steps" -eq 0 ]; then
    echo "build: ${targets[*]:-everything}: up to date"
    return 0
  fi
  # The mean duration of each output's latest step in earlier builds, once there are enough.
  per_step="$(awk 'NR > 1 { d[$4] = $2 - $1 }
                   END { for (o in d) { n++; s += d[o] }
                         if (n >= 30) printf "%.1f", s / n / 1000 }' \
              "$BUILD_DIR/.ninja_log" 2>/dev/null || true)"
  basis="the mean step of earlier builds in $BUILD_DIR"
  if [ -z "$per_step" ] && [ -n "${TESSERA_STEP_SECONDS:-}" ]; then
    per_step="$TESSERA_STEP_SECONDS" basis="TESSERA_STEP_SECONDS"
  elif [ -z "$per_step" ]; then
    per_step=9.4 basis="a full build from an empty cache: 400 steps in 29-34 minutes on 2 cores"
  fi
  awk -v n="$steps" -v s="$per_step" -v j="$jobs" -v what="${targets[*]:-everything}" \
      -v basis="$basis" 'BEGIN {
    m = int(n * s / j / 60 + 0.5)
    took = m < 1 ? "under a minute" : sprintf("about %d minute%s", m, m > 1 ? "s" : "")
    printf "build: %d steps for %s: %s on %d core(s) (%s s a step, from %s)\n",
           n, what, took, j, s, basis }'
}

estimate
start=$(date +%s)
if [ ${#targets[@]} -gt 0 ]; then
  cmake --build "$BUILD_DIR" --target "${targets[@]}" -- -j"$jobs"
else
  cmake --build "$BUILD_DIR" -- -j"$jobs"
fi
echo "build: finished in $(( $(date +%s) - start )) s"
