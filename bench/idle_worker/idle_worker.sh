#!/usr/bin/env bash
# What an idle worker costs: a local cluster (deploy/cluster.sh) of N workers with simulated
# GPUs and no runs; after a settling pause, every worker's CPU time (every thread's run time
# from /proc/PID/task/TID/schedstat, the daemon's and its fence watchdog's) over a window. Prints millicores per idle worker against issue 14's bound of
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

mapfile -t daemons < <(pgrep -f "$PWD/build/bin/tessera-worker")
[ "${#daemons[@]}" -gt 0 ] || { echo "idle_worker.sh: no tessera-worker is running" >&2; exit 1; }
# Each daemon's fence watchdog is a process of its own (tessera-worker fence-watchdog, a child
# of the daemon): part of what a node costs.
watchdogs=()
for d in "${daemons[@]}"; do
  mapfile -t -O "${#watchdogs[@]}" watchdogs < <(pgrep -P "$d" -f "fence-watchdog")
done
pids=("${daemons[@]}" "${watchdogs[@]}")
# Nanoseconds a task has run (the first field of schedstat): exact, where utime + stime from
# /proc/PID/stat are sampled at the 10 ms clock tick and miss most of a worker's short
# wake-ups (they read about half of the true figure here).
run_ns() { # $1: a /proc/PID/task/TID folder
  local ns _
  read -r ns _ <"$1/schedstat" 2>/dev/null || ns=0
  echo "$ns"
}
declare -A before
for p in "${pids[@]}"; do
  for t in /proc/"$p"/task/*; do before[$t]=$(run_ns "$t"); done
done
sleep "$seconds"
total=0
declare -A spent
for p in "${pids[@]}"; do
  for t in /proc/"$p"/task/*; do
    d=$(($(run_ns "$t") - ${before[$t]:-0}))
    spent[$t]=$d
    total=$((total + d))
  done
done
echo "threads of one worker that ran (microseconds over ${seconds} s):"
one_worker=(/proc/"${daemons[0]}"/task/*)
[ "${#watchdogs[@]}" -eq 0 ] || one_worker+=(/proc/"${watchdogs[0]}"/task/*)
for t in "${one_worker[@]}"; do
  d=${spent[$t]:-0}
  if [ "$d" -gt 0 ]; then echo "  $((d / 1000)) us: tid $(basename "$t") ($(cat "$t/comm"), waits in $(cat "$t/wchan"))"; fi
done | sort -n -r -k1 | head -8
python3 - "$total" "$seconds" "${#daemons[@]}" "${#watchdogs[@]}" <<'PY'
import sys
ns, secs, n, w = (float(x) for x in sys.argv[1:])
mc = ns / 1e9 / secs / n * 1000
print(f"idle worker: {mc:.2f} millicores ({int(n)} workers and {int(w)} fence watchdogs, {secs:.0f} s)   "
      f"bound 2 millicores: ratio {mc / 2:.2f} (at most 1 meets it)")
PY
