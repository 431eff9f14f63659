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
# Each token's terms say what its node is: registering as anything else is refused.
[ "$("$BIN/mcli" admin list-join-tokens -o json | grep -c '"gpu_type": "simulated"')" = 3 ] ||
  fail "join tokens without terms: $("$BIN/mcli" admin list-join-tokens -o json)"

out="$("$BIN/mcli" run -f "$ROOT/deploy/samples/hello.yaml" --follow 2>&1)" || { echo "$out"; fail "the sample run did not complete"; }
for r in 0 1 2 3; do
  echo "$out" | grep -q "rank $r step 5" || { echo "$out"; fail "rank $r's last line is missing"; }
done

# Ranks run as their user's uid (from 100000), not as root or one shared uid: bob's rank, on
# the same node and with image: host (this machine's folders as they are), can read neither
# alice's folder of the shared folder, nor the control plane's log, nor a node's key.
# (TESSERA_API_KEY: bob's key for his commands only.)
probe_yaml() {  # the file alice's rank tries to read
  cat <<YAML
name: probe
image: host
compute: {gpus: 1, nodes: 1}
command: |
  echo "uid=\$(id -u) shared=\$TESSERA_SHARED_DIR"
  echo mine >"\$TESSERA_SHARED_DIR/mine" && echo "wrote mine"
  for f in "$1" "$state/logs/tessera-server.log" "$state/workers/node-0/state/credentials/node-api.key"; do
    if cat "\$f" >/dev/null 2>&1; then echo "READ \$f"; else echo "refused \$f"; fi
  done
YAML
}
bob_key="$("$BIN/mcli" admin create-api-key --user bob --description "probe" 2>/dev/null | awk '/^Secret:/ {print $2}')"
probe_yaml /none >"$state/probe-alice.yaml"
alice_out="$("$BIN/mcli" run -f "$state/probe-alice.yaml" --follow 2>&1)" || { echo "$alice_out"; fail "alice's probe"; }
alice_uid="$(echo "$alice_out" | sed -n 's/.*uid=\([0-9]*\) shared=.*/\1/p' | head -1)"
alice_dir="$(echo "$alice_out" | sed -n 's/.*uid=[0-9]* shared=\(.*\)/\1/p' | head -1)"
[ -n "$alice_uid" ] && [ "$alice_uid" -ge 100000 ] || { echo "$alice_out"; fail "alice's rank ran as uid '$alice_uid'"; }
[ "$(stat -c '%u %a' "$alice_dir")" = "$alice_uid 700" ] || fail "alice's shared folder: $(stat -c '%u %a' "$alice_dir")"
echo "$alice_out" | grep -q "wrote mine" || { echo "$alice_out"; fail "alice cannot write her shared folder"; }
probe_yaml "$alice_dir/mine" >"$state/probe-bob.yaml"
bob_out="$(TESSERA_API_KEY="$bob_key" "$BIN/mcli" run -f "$state/probe-bob.yaml" --follow 2>&1)" ||
  { echo "$bob_out"; fail "bob's probe"; }
bob_uid="$(echo "$bob_out" | sed -n 's/.*uid=\([0-9]*\) shared=.*/\1/p' | head -1)"
[ -n "$bob_uid" ] && [ "$bob_uid" -ge 100000 ] && [ "$bob_uid" != "$alice_uid" ] ||
  { echo "$bob_out"; fail "bob's rank ran as uid '$bob_uid' (alice's: $alice_uid)"; }
if echo "$bob_out" | grep -q "READ "; then echo "$bob_out"; fail "bob's rank read what is not his"; fi
[ "$(echo "$bob_out" | grep -c "refused ")" = 3 ] || { echo "$bob_out"; fail "bob's probe did not try all three"; }
[ "$(cat "$alice_dir/mine")" = mine ] || fail "alice's file changed"

# PostgreSQL asks for a password, and the services' role is no superuser and reaches only its
# database; the URL names a password file (mode 600) instead of holding a password.
pg_url="$("$ROOT/deploy/pg-instance.sh" url "$state/postgres")"
case "$pg_url" in *passfile=*) ;; *) fail "the database URL names no password file: $pg_url" ;; esac
pg_port="$(cat "$state/postgres/port")"
for who in tessera tessera_admin postgres; do
  if PGPASSFILE=/dev/null psql -w -h 127.0.0.1 -p "$pg_port" -U "$who" -d tessera -c "SELECT 1" >/dev/null 2>&1; then
    fail "PostgreSQL let $who in without a password"
  fi
done
[ "$(psql "$pg_url" -tAc "SELECT rolsuper OR rolcreaterole OR rolcreatedb OR rolreplication FROM pg_roles WHERE rolname = current_user")" = f ] ||
  fail "the services' role has more than its database"
if psql "${pg_url/\/tessera?/\/postgres?}" -tAc "SELECT 1" >/dev/null 2>&1; then fail "the services' role reached the database postgres"; fi
[ "$(stat -c %a "$state/postgres/tessera.pgpass")" = 600 ] || fail "the password file's mode"

# The registry: anyone pulls from the workers' registry, no one pushes to it; pushes go to its
# push side, which wants the password in STATE/registry/auth.json.
echo '{}' >"$state/no-auth.json"
push() {  # auth file, destination registry
  REGISTRY_AUTH_FILE="$1" skopeo copy --quiet --src-tls-verify=false --dest-tls-verify=false \
    "docker://127.0.0.1:$TESSERA_REGISTRY_PORT/tessera/train:latest" "docker://$2/probe/pushed:1" 2>&1
}
push_port="$TESSERA_REGISTRY_PUSH_PORT"
out="$(push "$state/no-auth.json" "127.0.0.1:$TESSERA_REGISTRY_PORT")" && fail "a push to the pull side was taken"
echo "$out" | grep -q "405" || fail "the pull side's refusal: $out"
out="$(push "$state/no-auth.json" "127.0.0.1:$push_port")" && fail "an anonymous push was taken"
echo "$out" | grep -q "authentication required" || fail "the push side's refusal: $out"
push "$state/registry/auth.json" "127.0.0.1:$push_port" || fail "the operator's push"
skopeo inspect --tls-verify=false "docker://127.0.0.1:$TESSERA_REGISTRY_PORT/probe/pushed:1" >/dev/null ||
  fail "the pushed image is not served"
[ "$(stat -c %a "$state/registry/auth.json")" = 600 ] || fail "auth.json's mode"

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
# (Its superuser sees the server's own processes; the services' role does not.)
pg_pid="$(PGPASSFILE="$state/postgres/admin.pgpass" psql -h 127.0.0.1 -p "$pg_port" -U tessera_admin -d postgres \
            -tAc "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'")"
grep -q libjemalloc "/proc/$pg_pid/maps" || fail "PostgreSQL (pid $pg_pid) runs without jemalloc"

# A second up is harmless: nothing is started twice, nor built again.
"$ROOT/deploy/cluster.sh" up --workers 3 >"$state/up-again.log" 2>&1 || fail "second up"
if grep -q "building the training image" "$state/up-again.log"; then fail "the image was rebuilt"; fi
# An operator's label outlives the node's own word: node-0's worker registers again after the
# restart below, saying rack=rack-0 (its --label and its token's term), and keeps rack-9.
"$BIN/mcli" label node-0 rack=rack-9 pool=team-b >/dev/null || fail "mcli label"
"$BIN/mcli" label node-0 pool- >/dev/null || fail "mcli label KEY-"
"$BIN/mcli" label node-0 "bad label" >/dev/null 2>&1 && fail "mcli label took a label without ="
out="$("$BIN/mcli" admin remove-node node-0 2>&1)" && fail "an online node was removed"
echo "$out" | grep -q "is online" || fail "remove-node's refusal: $out"
pids="$(cat "$state"/tessera-server.pid "$state"/registry.pid "$state"/push-registry.pid "$state"/workers/*/pid)"
"$ROOT/deploy/cluster.sh" down >/dev/null
# Up again after down: the workers come back with the credentials they joined with.
"$ROOT/deploy/cluster.sh" up --workers 3 >"$state/up2.log" 2>&1 || { cat "$state/up2.log"; fail "up after down"; }
[ "$("$BIN/mcli" admin list-join-tokens | grep -c jt-)" = 3 ] || fail "a restarted worker joined again"
labels="$("$BIN/mcli" get nodes -o json | python3 -c 'import json, sys
print(json.dumps([n for n in json.load(sys.stdin) if n["name"] == "node-0"][0].get("labels", {}), separators=(",", ":")))')"
case "$labels" in *'"rack":"rack-9"'*) ;; *) fail "node-0's operator label was lost at registration: $labels" ;; esac
case "$labels" in *'"pool"'*) fail "node-0 kept a removed label: $labels" ;; esac
pids="$pids $(cat "$state"/tessera-server.pid "$state"/registry.pid "$state"/push-registry.pid "$state"/workers/*/pid)"
"$ROOT/deploy/cluster.sh" down >/dev/null
for p in $pids; do
  if kill -0 "$p" 2>/dev/null; then fail "pid $p still runs after down"; fi
done
if pgrep -f "fence-watchdog $state" >/dev/null; then fail "a fence watchdog outlived down"; fi
"$ROOT/deploy/cluster.sh" up --workers bad >/dev/null 2>&1 && fail "bad --workers accepted"
# Not root: the script refuses (ranks would run as that user), saying why and how.
if [ "$(id -u)" = 0 ] && runuser -u nobody -- test -x "$BIN/mcli" 2>/dev/null; then
  out="$(runuser -u nobody -- env TESSERA_STATE_DIR="$state/nobody" "$ROOT/deploy/cluster.sh" up --workers 1 2>&1)" &&
    fail "cluster.sh up as nobody started"
  echo "$out" | grep -q "ranks need a uid of their own" || fail "refusal as nobody: $out"
fi
echo "cluster_script_test: ok"
