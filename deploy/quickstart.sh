#!/usr/bin/env bash
# The quick start: installs what Tessera needs, builds the binaries it runs, starts a local
# cluster (PostgreSQL, tessera-server and two workers with two simulated GPUs each; see
# deploy/cluster.sh), and trains a tiny GPT on two nodes (examples/gpt-tiny.yaml), following its
# status and logs. deploy/build.sh with no target (or deploy/test.sh) builds everything else:
# the per-service binaries, tessera-gateway, the tests and the benchmarks.
#
#   deploy/quickstart.sh          start (or reuse) the cluster and run the sample job
#   deploy/quickstart.sh down     stop everything it started
#
# TESSERA_WORKERS and TESSERA_GPUS_PER_WORKER change the cluster's size; the ports and the state
# folder are deploy/cluster.sh's (TESSERA_GRPC_PORT, TESSERA_STATE_DIR, ...).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-up}" = "down" ]; then
  exec deploy/cluster.sh down
fi

deploy/install-deps.sh
# Only what runs here: the control plane and the workers (deploy/cluster.sh), mcli, and what the
# workers start: tessera-train and tessera-data (examples/gpt-tiny.yaml's command) and
# tessera-canary (the health checks' canaries, e.g. mcli health sweep).
deploy/build.sh tessera-server tessera-worker mcli tessera-train tessera-data tessera-canary
deploy/cluster.sh up --workers "${TESSERA_WORKERS:-2}" --gpus-per-worker "${TESSERA_GPUS_PER_WORKER:-2}"

echo
echo "quickstart: submitting examples/gpt-tiny.yaml (a GPT trained on 2 nodes x 2 ranks) and following it"
build/bin/mcli run -f examples/gpt-tiny.yaml --follow
echo
echo "quickstart: the cluster keeps running; try build/bin/mcli get runs, build/bin/mcli describe run RUN,"
echo "            build/bin/mcli logs RUN --rank 0, and stop it with deploy/quickstart.sh down"
