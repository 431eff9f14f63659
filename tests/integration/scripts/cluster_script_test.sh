#!/usr/bin/env bash
# deploy/cluster.sh as a user runs it: up with 3 workers, a 2-node run followed to the end with
# mcli, status, down; then nothing of it is left running. Private state folder and free ports.
set -euo pipefail
source "$(dirname "$0")/script_env.sh"

"$ROOT/deploy/cluster.sh" up --workers 3 --gpus-per-worker 2 >"$state/up.log" 2>&1 || { cat "$state/up.log"; fail "cluster.sh up"; }
grep -q "cluster: up with 3 worker(s)" "$state/up.log" || fail "no summary line"
nodes="$("$BIN/mcli" get nodes)"
for n in node-0 node-1 node-2; do
  echo "$nodes" | grep "$n" | grep -q ONLINE || fail "$n is not online: $nodes"
done

# Everything over TLS: the REST gateway answers HTTPS with the cluster CA, not plain HTTP; the
# workers joined with tokens and keep their credentials privately.
grep -q "^ca: $state/tls/ca.pem" "$TESSERA_CONFIG" || fail "mcli has no CA: $(cat "$TESSERA_CONFIG")"
key="$(grep '^api_key:' "$TESSERA_CONFIG" | awk '{print $2}')"
curl -fsS --cacert "$state/tls/ca.pem" -H "Authorization: Bearer $key" \
  "https://localhost:$TESSERA_HTTP_PORT/api/v1/whoami" | grep -q '"role":"ROLE_ADMIN"' || fail "HTTPS whoami"
if curl -fsS "http://127.0.0.1:$TESSERA_HTTP_PORT/api/v1/whoami" >/dev/null 2>&1; then fail "plain HTTP answered"; fi
for n in 0 1 2; do
  [ "$(stat -c %a "$state/workers/node-$n/state/credentials/node-api.key")" = 600 ] || fail "node-$n key mode"
  [ -s "$state/workers/node-$n/state/credentials/node.pem" ] || fail "node-$n has no certificate"
done
"$BIN/mcli" admin list-join-tokens | grep -c "used" | grep -q 3 || fail "join tokens: $("$BIN/mcli" admin list-join-tokens)"

out="$("$BIN/mcli" run -f "$ROOT/deploy/samples/hello.yaml" --follow 2>&1)" || { echo "$out"; fail "the sample run did not complete"; }
for r in 0 1 2 3; do
  echo "$out" | grep -q "rank $r step 5" || { echo "$out"; fail "rank $r's last line is missing"; }
done

# The registry serves the image examples/gpt-tiny.yaml names; a second up does not rebuild it.
skopeo inspect --tls-verify=false "docker://127.0.0.1:$TESSERA_REGISTRY_PORT/tessera/train:latest" |
  grep -q '"Digest": "sha256:' || fail "the registry does not serve tessera/train:latest"
grep -q "building the training image" "$state/up.log" || fail "the image was not built"

status="$("$ROOT/deploy/cluster.sh" status)"
echo "$status" | grep -q "^tessera-server  pid" || fail "status: $status"
echo "$status" | grep -q "^registry        pid" || fail "status: $status"
[ "$(echo "$status" | grep -c '^worker node-[0-9]  pid')" = 3 ] || fail "status: $status"

# PostgreSQL runs with jemalloc (deploy/pg-instance.sh): the log ingest's buffers are kept, not
# mapped afresh for every statement.
# Its checkpointer, a child of the server as every backend is, lives as long as the server.
pg_url="$("$ROOT/deploy/pg-instance.sh" url "$state/postgres")"
pg_pid="$(psql "$pg_url" -tAc "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'")"
grep -q libjemalloc "/proc/$pg_pid/maps" || fail "PostgreSQL (pid $pg_pid) runs without jemalloc"

# A second up is harmless: nothing is started twice, nor built again.
"$ROOT/deploy/cluster.sh" up --workers 3 >"$state/up-again.log" 2>&1 || fail "second up"
if grep -q "building the training image" "$state/up-again.log"; then fail "the image was rebuilt"; fi
pids="$(cat "$state"/tessera-server.pid "$state"/registry.pid "$state"/workers/*/pid)"
"$ROOT/deploy/cluster.sh" down >/dev/null
# Up again after down: the workers come back with the credentials they joined with.
"$ROOT/deploy/cluster.sh" up --workers 3 >"$state/up2.log" 2>&1 || { cat "$state/up2.log"; fail "up after down"; }
[ "$("$BIN/mcli" admin list-join-tokens | grep -c jt-)" = 3 ] || fail "a restarted worker joined again"
pids="$pids $(cat "$state"/tessera-server.pid "$state"/registry.pid "$state"/workers/*/pid)"
"$ROOT/deploy/cluster.sh" down >/dev/null
for p in $pids; do
  if kill -0 "$p" 2>/dev/null; then fail "pid $p still runs after down"; fi
done
if pgrep -f "fence-watchdog $state" >/dev/null; then fail "a fence watchdog outlived down"; fi
"$ROOT/deploy/cluster.sh" up --workers bad >/dev/null 2>&1 && fail "bad --workers accepted"
echo "cluster_script_test: ok"
