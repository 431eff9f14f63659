#!/usr/bin/env bash
# Issue 45's SDK benchmark: the Python SDK's follow_run_logs against `mcli logs --follow` on the
# same run's lines (N, 2,000,000 by default, printed by `seq`), on a local cluster
# (deploy/cluster.sh over TLS, one worker). Once the run has completed, each reader follows its
# attempt from the first line to the end, R rounds (3) in turn, mcli first then the SDK; prints
# lines/s for each and the ratio SDK/mcli per round and their median. Target: ratio >= 0.8.
#
#   bench/sdk/bench_sdk_follow.sh [--lines N] [--rounds R]      (after deploy/build.sh)
set -euo pipefail
lines=2000000 rounds=3
while [ $# -gt 0 ]; do
  case "$1" in
    --lines) lines="${2:?}"; shift 2 ;;
    --rounds) rounds="${2:?}"; shift 2 ;;
    *) echo "usage: $0 [--lines N] [--rounds R]" >&2; exit 2 ;;
  esac
done
root="$(cd "$(dirname "$0")/../.." && pwd)"
set -- "$root/build/bin"
source "$root/tests/integration/scripts/script_env.sh"
SDK="$ROOT/build/sdk/python"
[ -d "$SDK/tessera_sdk/_proto" ] || fail "the SDK is not built: deploy/build.sh"

TESSERA_NO_TRAIN_IMAGE=1 "$ROOT/deploy/cluster.sh" up --workers 1 --gpus-per-worker 1 \
  >"$state/up.log" 2>&1 || { cat "$state/up.log"; fail "cluster.sh up"; }

PYTHONPATH="$SDK" /usr/bin/python3 - "$lines" "$rounds" "$BIN/mcli" <<'PY'
import statistics, subprocess, sys, time
import tessera_sdk
from tessera_sdk import RunConfig, RunStatus

lines, rounds, mcli = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
run = tessera_sdk.create_run(RunConfig(name="bench-lines", image="host",
                                       command=f"seq 1 {lines}", compute={"gpus": 1}))
started = time.monotonic()
tessera_sdk.wait_for_run_status(run, RunStatus.COMPLETED, timeout=1800)
# The rank is done long before its lines are all shipped and stored: a first, untimed follow
# ends only once the attempt's last line is in, so that the timed ones read the same stored run.
stored = sum(1 for _ in tessera_sdk.follow_run_logs(run))
if stored != lines:
    sys.exit(f"bench_sdk_follow: the run has {stored} lines, expected {lines}")
print(f"bench_sdk_follow: {lines} lines printed and stored in {time.monotonic() - started:.1f} s")

def timed(read):
    start = time.perf_counter()
    count = read()
    elapsed = time.perf_counter() - start
    if count != lines:
        sys.exit(f"bench_sdk_follow: read {count} lines, expected {lines}")
    return count / elapsed

def by_mcli():
    proc = subprocess.Popen([mcli, "logs", run.name, "--follow"], stdout=subprocess.PIPE)
    count = 0
    while chunk := proc.stdout.read(1 << 20):
        count += chunk.count(b"\n")
    if proc.wait() != 0:
        sys.exit("bench_sdk_follow: mcli logs failed")
    return count

def by_sdk():
    count = 0
    for line in tessera_sdk.follow_run_logs(run):
        line.text  # each line as a user's loop has it
        count += 1
    return count

ratios = []
for r in range(rounds):
    m = timed(by_mcli)
    s = timed(by_sdk)
    ratios.append(s / m)
    print(f"round {r + 1}: mcli {m:,.0f} lines/s, SDK {s:,.0f} lines/s, ratio {s / m:.2f}")
print(f"bench_sdk_follow: median ratio SDK/mcli {statistics.median(ratios):.2f} (target >= 0.8)")
PY
