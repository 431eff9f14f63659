#!/usr/bin/env bash
# deploy/cluster.sh as a user runs it: up with 3 workers, a 2-node run followed to the end with
# mcli, status, down; then nothing of it is left running. Private state folder and free ports.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
BIN="${1:?usage: cluster_script_test.sh BIN_DIR}"
state="$(mktemp -d /tmp/tessera-cluster-test.XXXXXX)"
free_port() {
  while true; do
    local p=$((20000 + RANDOM % 30000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
  done
}
export TESSERA_STATE_DIR="$state" TESSERA_BIN_DIR="$BIN" TESSERA_CONFIG="$state/mcli.yaml"
export TESSERA_GRPC_PORT="$(free_port)" TESSERA_HTTP_PORT="$(free_port)"
base="$(free_port)"; export TESSERA_METRICS_PORT="$base"
cleanup() { "$ROOT/deploy/cluster.sh" down >/dev/null 2>&1 || true; rm -rf "$state"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$ROOT/deploy/cluster.sh" up --workers 3 --gpus-per-worker 2 >"$state/up.log" 2>&1 || { cat "$state/up.log"; fail "cluster.sh up"; }
grep -q "cluster: up with 3 worker(s)" "$state/up.log" || fail "no summary line"
nodes="$("$BIN/mcli" get nodes)"
for n in node-0 node-1 node-2; do
  echo "$nodes" | grep "$n" | grep -q ONLINE || fail "$n is not online: $nodes"
done

out="$("$BIN/mcli" run -f "$ROOT/deploy/samples/hello.yaml" --follow 2>&1)" || { echo "$out"; fail "the sample run did not complete"; }
for r in 0 1 2 3; do
  echo "$out" | grep -q "rank $r step 5" || { echo "$out"; fail "rank $r's last line is missing"; }
done

status="$("$ROOT/deploy/cluster.sh" status)"
echo "$status" | grep -q "^tessera-server  pid" || fail "status: $status"
[ "$(echo "$status" | grep -c '^worker node-[0-9]  pid')" = 3 ] || fail "status: $status"

# A second up is harmless: nothing is started twice.
"$ROOT/deploy/cluster.sh" up --workers 3 >/dev/null 2>&1 || fail "second up"
pids="$(cat "$state"/tessera-server.pid "$state"/workers/*/pid)"
"$ROOT/deploy/cluster.sh" down >/dev/null
for p in $pids; do
  if kill -0 "$p" 2>/dev/null; then fail "pid $p still runs after down"; fi
done
if pgrep -f "fence-watchdog $state" >/dev/null; then fail "a fence watchdog outlived down"; fi
"$ROOT/deploy/cluster.sh" up --workers bad >/dev/null 2>&1 && fail "bad --workers accepted"
echo "cluster_script_test: ok"
