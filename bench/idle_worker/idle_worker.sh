#!/usr/bin/env bash
# What an idle worker costs: a local cluster (deploy/cluster.sh) of N workers with simulated
# GPUs and no runs; after a settling pause, every worker's CPU time (utime + stime from
# /proc/PID/stat) over a window. Prints millicores per idle worker against issue 14's bound of
# 2 millicores, and the busiest threads of one worker (to see what still wakes).
#
#   bench/idle_worker/idle_worker.sh [--workers 4] [--seconds 60]
#
# Uses (and stops at the end) the cluster of deploy/cluster.sh: run it where none is up.
set -euo pipefail
cd "$(dirname "$0")/../.."
workers=4
seconds=60
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) workers=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    *) echo "idle_worker.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

deploy/cluster.sh up --workers "$workers" >/dev/null
trap 'deploy/cluster.sh down >/dev/null 2>&1 || true' EXIT
sleep 10  # registration, first probes and heartbeats

mapfile -t pids < <(pgrep -f "$PWD/build/bin/tessera-worker")
[ "${#pids[@]}" -gt 0 ] || { echo "idle_worker.sh: no tessera-worker is running" >&2; exit 1; }
ticks() { # $1: a /proc/PID or /proc/PID/task/TID folder
  local f
  read -r -a f <"$1/stat"
  echo $((f[13] + f[14]))
}
declare -A before
for p in "${pids[@]}"; do before[$p]=$(ticks "/proc/$p"); done
for t in /proc/"${pids[0]}"/task/*; do before[$t]=$(ticks "$t"); done
sleep "$seconds"
total=0
for p in "${pids[@]}"; do total=$((total + $(ticks "/proc/$p") - before[$p])); done
echo "threads of one worker that ran (ticks of $(getconf CLK_TCK)/s, over ${seconds} s):"
for t in /proc/"${pids[0]}"/task/*; do
  d=$(($(ticks "$t") - ${before[$t]:-0}))
  if [ "$d" -gt 0 ]; then echo "  tid $(basename "$t"): $d"; fi
done | sort -t: -k2 -n -r | head -8
python3 - "$total" "$(getconf CLK_TCK)" "$seconds" "${#pids[@]}" <<'PY'
import sys
ticks, hz, secs, n = (float(x) for x in sys.argv[1:])
mc = ticks / hz / secs / n * 1000
print(f"idle worker: {mc:.2f} millicores ({int(n)} workers, {secs:.0f} s)   "
      f"bound 2 millicores: ratio {mc / 2:.2f} (at most 1 meets it)")
PY
