#!/usr/bin/env bash
# The web console in a real browser (Debian's Chromium, headless, driven by playwright-core from
# services/gateway/console/node_modules) against a private local cluster: log in, a run submitted
# with mcli shows up live, its logs stream, its charts draw and mark a resumption after an
# injected fault, a cordon shows within 2 s, and another user's key does not see the run.
#
#   tests/e2e/console/console_test.sh BIN_DIR
#
# Env: TESSERA_ARTIFACTS_DIR (screenshots; default: the state folder, which is then kept),
# TESSERA_CONSOLE_VIA=gateway (default: the gateway serves the console, as in production) or dev
# (the console's dev/serve.mjs in front of the gateway, for work on the console), CHROMIUM
# (/usr/bin/chromium).
set -euo pipefail
source "$(dirname "$0")/../../integration/scripts/script_env.sh"

# Absolute: the workers put it on the ranks' PATH, and the ranks run elsewhere.
BIN="$(cd "$BIN" && pwd)"
export TESSERA_BIN_DIR="$BIN"
CONSOLE_DIR="$ROOT/services/gateway/console"
VIA="${TESSERA_CONSOLE_VIA:-gateway}"
ARTIFACTS="${TESSERA_ARTIFACTS_DIR:-$state}"
mkdir -p "$ARTIFACTS"
serve_pid=""
status=1

# Stops what the test started; keeps the screenshots, and the logs when the test failed.
cleanup() {
  if [ -n "$serve_pid" ]; then kill "$serve_pid" 2>/dev/null || true; fi
  "$ROOT/deploy/cluster.sh" down >/dev/null 2>&1 || true
  if [ "$status" != 0 ] && [ -d "$state/logs" ]; then
    for w in "$state"/workers/*/; do
      [ -f "$w/worker.log" ] && cp "$w/worker.log" "$state/logs/worker-$(basename "$w").log"
    done
    if [ "$ARTIFACTS" != "$state" ]; then cp -r "$state/logs" "$ARTIFACTS/logs" 2>/dev/null || true; fi
  fi
  if [ "$ARTIFACTS" = "$state" ]; then
    # The screenshots live in the state folder: keep them (and the logs), drop the rest.
    find "$state" -mindepth 1 -maxdepth 1 ! -name '*.png' ! -name logs ! -name 'serve.log' \
      -exec rm -rf {} + 2>/dev/null || true
    echo "console_test: screenshots in $state"
  else
    rm -rf "$state"
  fi
}

command -v node >/dev/null || fail "node is not installed"
[ -x "${CHROMIUM:-/usr/bin/chromium}" ] || fail "no Chromium at ${CHROMIUM:-/usr/bin/chromium}"
[ -d "$CONSOLE_DIR/node_modules/playwright-core" ] && [ -d "$CONSOLE_DIR/node_modules/uplot" ] ||
  fail "the console's packages are missing: (cd $CONSOLE_DIR && npm ci)"

start=$(date +%s)
# A short stop grace: the test stops its run from the console and waits for STOPPED.
# Streams end within 20 s (as every follow and watch does after its lifetime, 30 minutes by
# default), so that the console's reconnects are exercised: a log follow goes on from its cursor.
export TESSERA_SERVER_FLAGS="${TESSERA_SERVER_FLAGS:-} --stop-grace-seconds 2 --max-stream-lifetime-seconds 20"
"$ROOT/deploy/cluster.sh" up --workers 2 --gpus-per-worker 2 --allow-fault-injection \
  >"$state/up.log" 2>&1 || { cat "$state/up.log"; fail "cluster.sh up"; }
echo "console_test: cluster up in $(($(date +%s) - start)) s"

case "$VIA" in
  gateway)
    CONSOLE_URL="https://localhost:$TESSERA_HTTP_PORT"
    ;;
  dev)
    port="$(free_port)"
    node "$CONSOLE_DIR/dev/serve.mjs" "https://localhost:$TESSERA_HTTP_PORT" \
      --ca "$state/tls/ca.pem" --port "$port" >"$state/serve.log" 2>&1 &
    serve_pid=$!
    for _ in $(seq 50); do
      grep -q "^console: " "$state/serve.log" 2>/dev/null && break
      kill -0 "$serve_pid" 2>/dev/null || { cat "$state/serve.log"; fail "dev/serve.mjs exited"; }
      sleep 0.1
    done
    CONSOLE_URL="http://127.0.0.1:$port"
    ;;
  *) fail "TESSERA_CONSOLE_VIA: dev or gateway, not \"$VIA\"" ;;
esac

export CONSOLE_URL TESSERA_ARTIFACTS_DIR="$ARTIFACTS" MCLI="$BIN/mcli"
export TESSERA_ADMIN_KEY="$(grep '^api_key:' "$TESSERA_CONFIG" | awk '{print $2}')"
export TESSERA_TEST_RUN_YAML="$state/console-run.yaml"
# A run that trains for longer than the test, on one node (of two, so that after a fault it
# resumes on the other), with a checkpoint every 25 steps. In the training image the cluster
# serves: `image: host` would need build/bin visible in the ranks' sandbox, whose /tmp is its own
# (a checkout under /tmp, as CI's may be, is not).
cat >"$TESSERA_TEST_RUN_YAML" <<'EOF'
name: console-train
image: tessera/train:latest
command: |
  DATA="$TESSERA_SHARED_DIR/data/licenses-bpe1024-seq64"
  mkdir -p "$TESSERA_SHARED_DIR/data"
  flock "$TESSERA_SHARED_DIR/data/.lock" sh -c "[ -f '$DATA/index.json' ] || tessera-data convert --input /usr/share/common-licenses --output '$DATA' --tokenizer bpe --vocab-size 1024 --seq-len 64"
  exec tessera-train
compute:
  gpus: 2
  nodes: 1
scheduling:
  retry_on_system_failure: true
  max_retries: 5
parameters:
  model: {preset: tiny}
  data: {path: "${TESSERA_SHARED_DIR}/data/licenses-bpe1024-seq64", shuffle_seed: 17}
  optimizer: {lr: 3.0e-3}
  max_duration: 100000ba
  global_train_batch_size: 16
  save_folder: ${TESSERA_SHARED_DIR}/checkpoints/${RUN_NAME}
  save_interval: 25ba
  num_checkpoints_to_keep: 2
  log_interval: 10ba
EOF

set +e
timeout 240 node "$ROOT/tests/e2e/console/console_test.mjs"
status=$?
set -e
echo "console_test: $( [ "$status" = 0 ] && echo ok || echo FAILED) in $(($(date +%s) - start)) s"
exit "$status"
