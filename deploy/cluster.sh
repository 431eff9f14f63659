#!/usr/bin/env bash
# A local Tessera cluster on this machine: a private PostgreSQL, the control plane
# (tessera-server) and N tessera-worker daemons with simulated GPUs, each with its own node name,
# metrics port and state folder, and a registry on loopback serving the image that
# examples/gpt-tiny.yaml runs in (tessera/train:latest, built by deploy/train-image.sh from
# build/bin whenever tessera-train or tessera-data changed). Writes mcli's config (endpoint and
# an admin key).
#
#   deploy/cluster.sh up [--workers N] [--gpus-per-worker G] [--allow-fault-injection]
#                        [--ranks-as-me]                       start (or extend) it
#   deploy/cluster.sh status                                   what runs, and where
#   deploy/cluster.sh down                                     stop all of it
#
# Ports: TESSERA_GRPC_PORT (50051), TESSERA_HTTP_PORT (8080), TESSERA_METRICS_PORT (9464; workers
# use the ports after it), TESSERA_REGISTRY_PORT (5000; the workers' default registry, so
# `image: tessera/train:latest` is pulled from it; anyone may pull, no one may push) and
# TESSERA_REGISTRY_PUSH_PORT (the next port; pushes, with the password in
# STATE/registry/auth.json: REGISTRY_AUTH_FILE=STATE/registry/auth.json skopeo copy ...).
# State: TESSERA_STATE_DIR (.state/ in the repository). More flags for
# tessera-server: TESSERA_SERVER_FLAGS (e.g. "--stop-grace-seconds 2 --uncordon-after-passes 5").
# TESSERA_NO_TRAIN_IMAGE=1 leaves the training image out (the registry serves nothing): for runs
# with image: host only, such as the Python SDK's tests, it saves building the image.
#
# As production is: everything speaks TLS (the script makes a cluster CA and the services'
# certificate with deploy/tls-certs.sh, in STATE/tls; each worker joins with a one-time join
# token, getting its node key and a certificate signed by the CA, kept in its state folder; mcli
# is given the CA). PostgreSQL asks for passwords, and the services' role owns their database
# only (deploy/pg-instance.sh --password-auth). /metrics wants STATE/metrics.token. Each user's
# ranks run as a uid of that user's own, so the script runs as root; as another user it refuses
# unless --ranks-as-me (every rank runs as you). Each user's ranks get their own folder of
# STATE/shared. TESSERA_PLAINTEXT=1 runs everything in plain text instead (loopback only).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
STATE="${TESSERA_STATE_DIR:-$ROOT/.state}"
BIN="${TESSERA_BIN_DIR:-$ROOT/build/bin}"
GRPC_PORT="${TESSERA_GRPC_PORT:-50051}"
METRICS_PORT="${TESSERA_METRICS_PORT:-9464}"
HTTP_PORT="${TESSERA_HTTP_PORT:-8080}"
REGISTRY="127.0.0.1:${TESSERA_REGISTRY_PORT:-5000}"
PUSH_REGISTRY="127.0.0.1:${TESSERA_REGISTRY_PUSH_PORT:-$((${TESSERA_REGISTRY_PORT:-5000} + 1))}"
server_pid_file="$STATE/tessera-server.pid"
registry_pid_file="$STATE/registry.pid"
push_registry_pid_file="$STATE/push-registry.pid"
TLS_DIR="$STATE/tls"
PLAINTEXT="${TESSERA_PLAINTEXT:-0}"

die() { echo "cluster: $*" >&2; exit 2; }
# A secret of 64 hex digits in FILE (mode 600), made once and kept with the state.
make_secret() { [ -s "$1" ] || (umask 077; openssl rand -hex 32 >"$1"); }
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

stop_pid_file() {  # pid file, name
  if alive "$1"; then
    kill -TERM "$(cat "$1")"
    for _ in $(seq 100); do alive "$1" || break; sleep 0.1; done
    if alive "$1"; then kill -KILL "$(cat "$1")"; fi
  fi
  rm -f "$1"
}

workers() { for w in "$STATE"/workers/*; do [ -d "$w" ] && echo "$w"; done | sort -V; }

down() {
  # A Prometheus of deploy/monitoring/prometheus.sh scrapes this cluster: it goes with it.
  if [ -f "$STATE/prometheus/prometheus.pid" ]; then deploy/monitoring/prometheus.sh down; fi
  for w in $(workers); do stop_pid_file "$w/pid" "worker $(basename "$w")"; done
  stop_pid_file "$server_pid_file" tessera-server
  stop_pid_file "$registry_pid_file" registry
  stop_pid_file "$push_registry_pid_file" "registry (push)"
  if [ -d "$STATE/postgres" ]; then deploy/pg-instance.sh stop "$STATE/postgres"; fi
  echo "cluster: stopped"
}

status() {
  if alive "$server_pid_file"; then
    local scheme=https; [ "$PLAINTEXT" = 1 ] && scheme=http
    echo "tessera-server  pid $(cat "$server_pid_file")  gRPC 127.0.0.1:$GRPC_PORT  REST $scheme://127.0.0.1:$HTTP_PORT/api/v1/  metrics :$METRICS_PORT"
    [ "$PLAINTEXT" = 1 ] || echo "TLS             CA $TLS_DIR/ca.pem (curl --cacert $TLS_DIR/ca.pem https://localhost:$HTTP_PORT/...)"
  else
    echo "tessera-server  not running"
  fi
  if alive "$registry_pid_file"; then
    echo "registry        pid $(cat "$registry_pid_file")  http://$REGISTRY (the workers' default registry; pulls only)"
  fi
  if alive "$push_registry_pid_file"; then
    echo "registry push   pid $(cat "$push_registry_pid_file")  http://$PUSH_REGISTRY (pushes, with REGISTRY_AUTH_FILE=$STATE/registry/auth.json)"
  fi
  if [ -d "$STATE/postgres" ]; then
    if deploy/pg-instance.sh status "$STATE/postgres"; then
      echo "postgres        $(deploy/pg-instance.sh url "$STATE/postgres")  data $STATE/postgres"
    else
      echo "postgres        not running  (data $STATE/postgres)"
    fi
  fi
  for w in $(workers); do
    local name; name="$(basename "$w")"
    if alive "$w/pid"; then
      echo "worker $name  pid $(cat "$w/pid")  metrics :$(cat "$w/metrics_port")  state $w/state  log $w/worker.log"
    else
      echo "worker $name  not running  (log $w/worker.log)"
    fi
  done
}

# GET /healthz of a listener on 127.0.0.1:PORT whose certificate names HOST.
healthz() {  # port, host
  if [ "$PLAINTEXT" = 1 ]; then
    curl -fsS "http://127.0.0.1:$1/healthz" >/dev/null 2>&1
  else
    curl -fsS --cacert "$TLS_DIR/ca.pem" --resolve "$2:$1:127.0.0.1" "https://$2:$1/healthz" \
      >/dev/null 2>&1
  fi
}

wait_healthy() {  # port, pid file, log, name, host its certificate names
  for _ in $(seq 150); do
    if healthz "$1" "${5:-localhost}"; then return 0; fi
    if ! alive "$2"; then
      echo "cluster: $4 exited; the end of its log:" >&2
      tail -20 "$3" >&2
      exit 1
    fi
    sleep 0.1
  done
  die "$4 did not answer on :$1 within 15 s (log: $3)"
}

# The local registry: two docker-registry processes on one storage folder. The workers pull
# from REGISTRY, which serves anyone and takes no push (read-only); pushes go to PUSH_REGISTRY,
# which asks for a password (htpasswd, bcrypt). The operator's credentials are in
# STATE/registry/auth.json (mode 600), for skopeo and podman through REGISTRY_AUTH_FILE.
registry_config() {  # file, address, extra YAML (indented two spaces under the top level)
  (umask 077
   printf 'version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s\n%s\nhttp:\n  addr: %s\n  secret: %s\n' \
     "$STATE/registry/storage" "$3" "$2" "$(openssl rand -hex 16)" >"$1")
}

start_registry_process() {  # pid file, config, log, address, name
  if ! alive "$1"; then
    nohup docker-registry serve "$2" >"$3" 2>&1 &
    echo $! >"$1"
  fi
  for _ in $(seq 100); do
    # 200 from the pull side; 401 (a password wanted) from the push side: both are up.
    case "$(curl -sS -o /dev/null -w '%{http_code}' "http://$4/v2/" 2>/dev/null)" in 200 | 401) return ;; esac
    alive "$1" || die "the $5 did not start: $(tail -5 "$3")"
    sleep 0.1
  done
  die "the $5 did not answer on $4 within 10 s (log: $3)"
}

start_registry() {
  mkdir -p "$STATE/registry"
  local reg="$STATE/registry"
  make_secret "$reg/push.password"
  if [ ! -s "$reg/htpasswd" ]; then
    # bcrypt, the only hash docker-registry takes; the password goes on stdin, never argv.
    (umask 077; python3 -W ignore -c 'import crypt, sys
print("tessera:" + crypt.crypt(sys.stdin.read().strip(), crypt.mksalt(crypt.METHOD_BLOWFISH)))' \
       <"$reg/push.password" >"$reg/htpasswd")
  fi
  (umask 077; printf '{"auths": {"%s": {"auth": "%s"}}}\n' "$PUSH_REGISTRY" \
     "$(printf 'tessera:%s' "$(cat "$reg/push.password")" | base64 -w0)" >"$reg/auth.json")
  if ! alive "$registry_pid_file"; then
    registry_config "$reg/config.yml" "$REGISTRY" \
      "$(printf '  maintenance:\n    readonly:\n      enabled: true\n    uploadpurging:\n      enabled: false')"
  fi
  if ! alive "$push_registry_pid_file"; then
    registry_config "$reg/push-config.yml" "$PUSH_REGISTRY" \
      "$(printf 'auth:\n  htpasswd:\n    realm: tessera-local\n    path: %s' "$reg/htpasswd")"
  fi
  start_registry_process "$registry_pid_file" "$reg/config.yml" "$STATE/logs/registry.log" "$REGISTRY" registry
  start_registry_process "$push_registry_pid_file" "$reg/push-config.yml" "$STATE/logs/push-registry.log" \
    "$PUSH_REGISTRY" "registry's push side"
  if [ "${TESSERA_NO_TRAIN_IMAGE:-0}" = 1 ]; then
    echo "cluster: TESSERA_NO_TRAIN_IMAGE=1: tessera/train:latest is not served"
    return
  fi
  if [ ! -x "$BIN/tessera-train" ] || [ ! -x "$BIN/tessera-data" ]; then
    echo "cluster: tessera-train is not built, so tessera/train:latest is not served" \
         "(deploy/build.sh tessera-train tessera-data)" >&2
    return
  fi
  local stamp; stamp="$(cat "$BIN/tessera-train" "$BIN/tessera-data" | sha256sum | cut -d' ' -f1)"
  if [ "$(cat "$STATE/registry/train.stamp" 2>/dev/null)" != "$stamp" ] ||
     ! skopeo inspect --tls-verify=false --raw "docker://$REGISTRY/tessera/train:latest" >/dev/null 2>&1; then
    echo "cluster: building the training image $REGISTRY/tessera/train:latest (pushed to $PUSH_REGISTRY)"
    REGISTRY_AUTH_FILE="$STATE/registry/auth.json" TMPDIR="$STATE" \
      deploy/train-image.sh "$PUSH_REGISTRY/tessera/train:latest" "$BIN" >"$STATE/logs/train-image.log" 2>&1 ||
      die "building the training image failed: $(tail -5 "$STATE/logs/train-image.log")"
    echo "$stamp" >"$STATE/registry/train.stamp"
  fi
}

up() {
  local n=2 gpus=2 faults=() ranks_as_me=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --workers) n="${2:?--workers needs a number}"; shift 2 ;;
      --gpus-per-worker) gpus="${2:?--gpus-per-worker needs a number}"; shift 2 ;;
      --allow-fault-injection) faults=(--allow-fault-injection); shift ;;
      --ranks-as-me) ranks_as_me=1; shift ;;
      *) die "unknown option \"$1\" (expected --workers N, --gpus-per-worker G, --allow-fault-injection or --ranks-as-me)" ;;
    esac
  done
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -le 64 ] || die "--workers: a number from 0 to 64, not \"$n\""
  [[ "$gpus" =~ ^[0-9]+$ ]] && [ "$gpus" -le 64 ] || die "--gpus-per-worker: a number from 0 to 64, not \"$gpus\""
  for b in tessera-server tessera-worker mcli; do
    [ -x "$BIN/$b" ] || die "$BIN/$b is missing: run deploy/build.sh first"
  done
  # Each user's ranks run as a uid of that user's own (the control plane gives each user one),
  # which only a root worker can switch to; the ranks of two users, or a rank and the workers,
  # then cannot touch each other's files, keys or processes. As another user, the script refuses
  # unless told (--ranks-as-me): every rank would run as you and could read ~/.tessera and STATE.
  local ranks=()
  if [ "$(id -u)" = 0 ]; then
    # Host-image runs (image: host) see this machine's folders with their permissions.
    if ! runuser -u nobody -- test -x "$BIN/tessera-train" 2>/dev/null; then
      echo "cluster: note: $BIN is private (a folder on the way lets no one else through), so" \
           "runs with image: host cannot run its programs; runs in images (tessera/train) can" >&2
    fi
  elif [ "$ranks_as_me" = 1 ]; then
    ranks=(--rank-user "$(id -un)")
    echo "cluster: WARNING: --ranks-as-me: ranks run as $(id -un), and a run can read your" \
         "~/.tessera and $STATE (the cluster's keys)" >&2
  else
    die "ranks need a uid of their own, and only a worker running as root can give them one:" \
        "run this as root (sudo $0 up ...), or pass --ranks-as-me to run them as $(id -un) on a" \
        "machine no one else uses (a run could then read ~/.tessera and $STATE)"
  fi

  mkdir -p "$STATE/logs" "$STATE/workers" "$STATE/shared"
  # Ranks of runs with image: host see this machine's folders with their permissions, and their
  # working folders are in the workers' state folders: they may pass through STATE and workers/
  # (not list them); the logs are the operator's alone, and every key and password is mode 600.
  chmod 711 "$STATE" "$STATE/workers"
  chmod 700 "$STATE/logs"

  # PostgreSQL asks for passwords; the services' role owns their database and nothing more.
  local url; url="$(deploy/pg-instance.sh start "$STATE/postgres" --password-auth)"
  start_registry

  # The cluster CA and the services' certificate; the server signs the nodes' certificates.
  local server_tls=() worker_tls=()
  if [ "$PLAINTEXT" = 1 ]; then
    server_tls=(--plaintext) worker_tls=(--plaintext)
  else
    deploy/tls-certs.sh ca "$TLS_DIR"
    [ -s "$TLS_DIR/services.pem" ] || deploy/tls-certs.sh services "$TLS_DIR"
    server_tls=(--tls-cert "$TLS_DIR/services.pem" --tls-key "$TLS_DIR/services.key"
                --tls-ca "$TLS_DIR/ca.pem" --tls-ca-key "$TLS_DIR/ca.key")
    worker_tls=(--tls-ca "$TLS_DIR/ca.pem")
  fi

  # The key users' secrets are sealed with (mcli create secret); made once, kept with the state.
  make_secret "$STATE/secrets.key"
  # The token every binary asks /metrics' readers for (Prometheus sends it: prometheus.sh).
  make_secret "$STATE/metrics.token"
  local scrape=(--metrics-token-file "$STATE/metrics.token")

  # The workers share this machine: each compute stress test takes one core, not all of them
  # (with all, every other process here swings the figures and the health API's verdicts).
  local health_flags=(--canary-compute-threads 1)
  case " ${TESSERA_SERVER_FLAGS:-} " in *" --canary-compute-threads"*) health_flags=() ;; esac
  # Workers that are not root cannot bind the canaries' default ports (below 1024): give them
  # ports they can (ranks run as you then, so nothing is lost that the default would keep).
  if [ "$(id -u)" != 0 ]; then health_flags+=(--canary-ports 39000-40999); fi

  # --require-node-terms: a node is what its join token says (below), never its own word.
  if ! alive "$server_pid_file"; then
    nohup "$BIN/tessera-server" --database-url "$url" "${server_tls[@]}" \
      --secrets-key-file "$STATE/secrets.key" "${health_flags[@]}" "${scrape[@]}" \
      --grpc-listen "127.0.0.1:$GRPC_PORT" --metrics-listen "127.0.0.1:$METRICS_PORT" \
      --http-listen "127.0.0.1:$HTTP_PORT" --allow-host-image --require-node-terms ${TESSERA_SERVER_FLAGS:-} >"$STATE/logs/tessera-server.log" 2>&1 &
    echo $! >"$server_pid_file"
  fi
  wait_healthy "$METRICS_PORT" "$server_pid_file" "$STATE/logs/tessera-server.log" tessera-server

  local user; user="$(id -un | tr 'A-Z' 'a-z' | tr -c 'a-z0-9._\n-' '-')"
  if [ "$PLAINTEXT" = 1 ]; then
    "$BIN/mcli" set endpoint "http://127.0.0.1:$GRPC_PORT" >/dev/null
  else
    "$BIN/mcli" set endpoint "127.0.0.1:$GRPC_PORT" >/dev/null
    "$BIN/mcli" set ca "$TLS_DIR/ca.pem" >/dev/null
  fi
  if ! "$BIN/mcli" whoami >/dev/null 2>&1; then
    local key
    key="$("$BIN/tessera-server" --database-url "$url" --log-level warn create-api-key \
            --user "$user" --role admin --description "local cluster admin key")"
    printf '%s\n' "$key" | "$BIN/mcli" set api-key >/dev/null  # never on argv
  fi

  for i in $(seq 0 $((n - 1))); do
    local name="node-$i" dir="$STATE/workers/node-$i"
    mkdir -p "$dir/state"
    chmod 711 "$dir"
    (umask 077; : >>"$dir/worker.log")
    if alive "$dir/pid"; then continue; fi
    # Each worker joins once with a one-time token, and keeps the node key and certificate it
    # gets (bound to its node) in its state folder, where only it reads them. The token's terms
    # say what the node is (cluster, GPU type, rack label): whatever its worker later says, it
    # registers as that or not at all.
    local join=()
    if [ ! -s "$dir/state/credentials/node-api.key" ]; then
      (umask 077; "$BIN/mcli" admin create-join-token --node "$name" --expires-in 10m \
         --description "local cluster" --cluster local --gpu-type simulated \
         --label "rack=rack-$((i / 4))" 2>/dev/null | awk '/^Secret:/ {print $2}' >"$dir/join.token")
      [ -s "$dir/join.token" ] || die "no join token for $name: $("$BIN/mcli" admin create-join-token --node "$name" 2>&1 | tail -1)"
      join=(--join-token-file "$dir/join.token")
    fi
    local port=$((METRICS_PORT + 1 + i))
    echo "$port" >"$dir/metrics_port"
    # Its /metrics is served with a server certificate for its name (Prometheus checks that
    # name): the certificate it joins with is a client's, and serves nothing.
    local metrics_tls=()
    if [ "$PLAINTEXT" != 1 ]; then
      [ -s "$TLS_DIR/metrics-$name.pem" ] || deploy/tls-certs.sh metrics "$TLS_DIR" "$name"
      metrics_tls=(--metrics-tls-cert "$TLS_DIR/metrics-$name.pem" --metrics-tls-key "$TLS_DIR/metrics-$name.key")
    fi
    # Ranks find tessera-train and tessera-data on PATH, and in TESSERA_SHARED_DIR their user's
    # folder of STATE/shared (datasets, checkpoints; the same on every node, and only that user's
    # ranks may enter it). The nodes share this machine's disk and /dev/shm, so their pre-flight
    # checks ask for less free space than a real node's defaults.
    PATH="$BIN:$PATH" nohup "$BIN/tessera-worker" "${join[@]}" "${worker_tls[@]}" \
      ${metrics_tls[@]+"${metrics_tls[@]}"} \
      ${ranks[@]+"${ranks[@]}"} \
      --scheduler-endpoint "127.0.0.1:$GRPC_PORT" --node-name "$name" --cluster local \
      --address 127.0.0.1 --simulate-gpus "$gpus" --state-dir "$dir/state" \
      --label "rack=rack-$((i / 4))" --metrics-listen "127.0.0.1:$port" "${scrape[@]}" \
      --shared-dir "$STATE/shared" ${faults[@]+"${faults[@]}"} \
      --preflight-min-free-disk 64MiB --preflight-min-shm 16MiB \
      --default-registry "$REGISTRY" --insecure-registry "$REGISTRY" \
      >"$dir/worker.log" 2>&1 &
    echo $! >"$dir/pid"
  done
  for i in $(seq 0 $((n - 1))); do
    local dir="$STATE/workers/node-$i"
    wait_healthy "$(cat "$dir/metrics_port")" "$dir/pid" "$dir/worker.log" "worker node-$i" "node-$i"
  done
  # Registered and online: the scheduler has seen every worker.
  for _ in $(seq 100); do
    local online; online="$("$BIN/mcli" get nodes -o json 2>/dev/null | grep -c '"NODE_LIVENESS_ONLINE"' || true)"
    [ "$online" -ge "$n" ] && break
    sleep 0.1
  done
  echo "cluster: up with $n worker(s), $gpus simulated GPU(s) each"
  status
  echo "try: $BIN/mcli get nodes; $BIN/mcli run -f deploy/samples/hello.yaml --follow"
}

case "${1:-}" in
  up) shift; up "$@" ;;
  down) down ;;
  status) status ;;
  *) die "usage: deploy/cluster.sh up [--workers N] [--gpus-per-worker G] | status | down" ;;
esac
