#!/usr/bin/env bash
# The web console's first load with N runs (default 1,000): a private deploy/cluster.sh cluster,
# N runs submitted over REST (one GPU each on a one-GPU cluster: one runs, the rest wait),
# then cold loads of the runs page in headless Chromium (console_load.mjs).
#
#   bench/console/console_load.sh BIN_DIR [RUNS]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
source "$ROOT/tests/integration/scripts/script_env.sh"
RUNS="${2:-1000}"
"$ROOT/deploy/cluster.sh" up --workers 1 --gpus-per-worker 1 >"$state/up.log" 2>&1 ||
  { cat "$state/up.log"; fail "cluster.sh up"; }
KEY="$(grep '^api_key:' "$TESSERA_CONFIG" | awk '{print $2}')"
URL="https://localhost:$TESSERA_HTTP_PORT"
start=$(date +%s)
seq "$RUNS" | xargs -P 8 -I{} curl -fsS -o /dev/null --cacert "$state/tls/ca.pem" \
  -H "Authorization: Bearer $KEY" -H "Content-Type: application/json" \
  --data '{"spec": {"name": "load-{}", "image": "host", "command": "sleep 600", "compute": {"gpus": 1}}}' \
  "$URL/api/v1/runs"
echo "console_load: $RUNS runs submitted in $(($(date +%s) - start)) s"
CONSOLE_URL="$URL" TESSERA_ADMIN_KEY="$KEY" RUNS="$RUNS" node "$ROOT/bench/console/console_load.mjs"
