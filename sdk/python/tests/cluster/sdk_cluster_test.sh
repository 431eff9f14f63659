#!/usr/bin/env bash
# The Python SDK against a real local cluster (deploy/cluster.sh: TLS, PostgreSQL, two workers
# that run ranks in sandboxes): pytest's cases in this folder submit, wait, follow logs across a
# stream the server ends, read metrics and get typed errors, as a CI pipeline would.
#
#   sdk/python/tests/cluster/sdk_cluster_test.sh BIN_DIR PYTHON SDK_DIR
#
# PYTHON is Debian's python3 (python3-grpcio, python3-protobuf, python3-pytest); SDK_DIR is the
# built package (BUILD/sdk/python).
set -euo pipefail
source "$(dirname "$0")/../../../../tests/integration/scripts/script_env.sh"
PYTHON="${2:?usage: $(basename "$0") BIN_DIR PYTHON SDK_DIR}"
SDK="$(cd "${3:?usage: $(basename "$0") BIN_DIR PYTHON SDK_DIR}" && pwd)"
BIN="$(cd "$BIN" && pwd)"
export TESSERA_BIN_DIR="$BIN"

"$PYTHON" -c 'import grpc, google.protobuf, pytest' 2>/dev/null ||
  fail "$PYTHON lacks grpcio, protobuf or pytest (deploy/install-deps.sh installs them)"

start=$(date +%s)
# Short streams: the follow test sees the server end a log follow and goes on from its cursor.
export TESSERA_SERVER_FLAGS="${TESSERA_SERVER_FLAGS:-} --stop-grace-seconds 2 --max-stream-lifetime-seconds 4"
TESSERA_NO_TRAIN_IMAGE=1 "$ROOT/deploy/cluster.sh" up --workers 2 --gpus-per-worker 2 \
  >"$state/up.log" 2>&1 || { cat "$state/up.log"; fail "cluster.sh up"; }
echo "sdk_cluster_test: cluster up in $(($(date +%s) - start)) s"

# The SDK reads mcli's settings: the config cluster.sh wrote (endpoint, CA, an admin key), and a
# user's key from the environment, as a CI job has it.
key_of() {
  "$BIN/mcli" admin create-api-key --user "$1" --description "sdk test" 2>/dev/null |
    awk '/^Secret:/ {print $2}'
}
export TESSERA_SDK_TEST_ALICE_KEY="$(key_of alice)"
export TESSERA_SDK_TEST_BOB_KEY="$(key_of bob)"
[ -n "$TESSERA_SDK_TEST_ALICE_KEY" ] && [ -n "$TESSERA_SDK_TEST_BOB_KEY" ] || fail "no user keys"

set +e
PYTHONPATH="$SDK" PYTHONDONTWRITEBYTECODE=1 timeout 300 \
  "$PYTHON" -m pytest -q -p no:cacheprovider "$(dirname "$0")"
status=$?
set -e
if [ "$status" != 0 ]; then
  tail -n 40 "$state/logs/tessera-server.log" >&2 || true
fi
echo "sdk_cluster_test: $( [ "$status" = 0 ] && echo ok || echo FAILED) in $(($(date +%s) - start)) s"
exit "$status"
