#!/usr/bin/env bash
# The quick start: installs, builds, and starts the Tessera control plane on this machine with a
# private PostgreSQL in .state/ (under the repository).
#
#   deploy/quickstart.sh          start (or show) it
#   deploy/quickstart.sh down     stop everything it started
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
STATE="${TESSERA_STATE_DIR:-$ROOT/.state}"
mkdir -p "$STATE/logs"

server_pid_file="$STATE/tessera-server.pid"

down() {
  if [ -f "$server_pid_file" ] && kill -0 "$(cat "$server_pid_file")" 2>/dev/null; then
    kill -TERM "$(cat "$server_pid_file")"
    for _ in $(seq 50); do kill -0 "$(cat "$server_pid_file")" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$server_pid_file"
  deploy/pg-instance.sh stop "$STATE/postgres"
  echo "quickstart: stopped"
}

if [ "${1:-up}" = "down" ]; then
  down
  exit 0
fi

deploy/install-deps.sh
deploy/build.sh

url="$(deploy/pg-instance.sh start "$STATE/postgres")"
echo "quickstart: PostgreSQL at $url"

GRPC_PORT="${TESSERA_GRPC_PORT:-50051}"
METRICS_PORT="${TESSERA_METRICS_PORT:-9464}"
HTTP_PORT="${TESSERA_HTTP_PORT:-8080}"
if [ -f "$server_pid_file" ] && kill -0 "$(cat "$server_pid_file")" 2>/dev/null; then
  echo "quickstart: tessera-server already runs (pid $(cat "$server_pid_file"))"
else
  nohup build/bin/tessera-server --database-url "$url" \
    --grpc-listen "127.0.0.1:$GRPC_PORT" --metrics-listen "127.0.0.1:$METRICS_PORT" \
    --http-listen "127.0.0.1:$HTTP_PORT" \
    >"$STATE/logs/tessera-server.log" 2>&1 &
  echo $! > "$server_pid_file"
  for _ in $(seq 100); do
    if curl -fsS "http://127.0.0.1:$METRICS_PORT/healthz" >/dev/null 2>&1; then break; fi
    if ! kill -0 "$(cat "$server_pid_file")" 2>/dev/null; then
      echo "quickstart: tessera-server exited; its log:" >&2
      tail -20 "$STATE/logs/tessera-server.log" >&2
      exit 1
    fi
    sleep 0.1
  done
fi

# An admin key for the local user, saved where mcli looks (~/.tessera/config.yaml), unless mcli
# already has a key that works.
user="$(id -un | tr 'A-Z' 'a-z' | tr -c 'a-z0-9._\n-' '-')"

build/bin/mcli set endpoint "127.0.0.1:$GRPC_PORT" >/dev/null
if ! build/bin/mcli whoami >/dev/null 2>&1; then
  key="$(build/bin/tessera-server --database-url "$url" --log-level warn create-api-key \
          --user "$user" --role admin --description "quickstart admin key")"
  build/bin/mcli set api-key "$key" >/dev/null
  echo "quickstart: created an admin API key for $user (saved in ${TESSERA_CONFIG:-~/.tessera/config.yaml})"
fi

cat <<INFO
quickstart: Tessera is running
  gRPC API      127.0.0.1:$GRPC_PORT
  REST API      http://127.0.0.1:$HTTP_PORT/api/v1/ (OpenAPI: /api/v1/openapi.json)
  metrics       http://127.0.0.1:$METRICS_PORT/metrics
  logs          $STATE/logs/
  database      $url
  you are       $(build/bin/mcli whoami 2>&1 | head -1)
  try           build/bin/mcli get nodes; build/bin/mcli get runs
  stop it with  deploy/quickstart.sh down
INFO
