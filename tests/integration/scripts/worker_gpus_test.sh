#!/usr/bin/env bash
# `tessera-worker gpus`, an operator's first look at a node: simulated GPUs are listed with a
# clean probe; a machine without NVML says so and fails; a wrong call is a usage error.
# (On a GPU machine, tests/gpu/worker_gpus_check.sh compares it with nvidia-smi.)
set -euo pipefail
BIN="${1:?usage: worker_gpus_test.sh BIN_DIR}"
fail() { echo "FAIL: $*" >&2; exit 1; }

out="$("$BIN/tessera-worker" gpus --simulate-gpus 2)" || fail "simulated: exit $?"
python3 - "$out" <<'PY' || fail "simulated: $out"
import json, sys
d = json.loads(sys.argv[1])
assert d["source"] == "simulated", d
assert [g["index"] for g in d["gpus"]] == [0, 1], d
assert all(g["uuid"] for g in d["gpus"]), d
assert d["probe"] == [], d
PY

if command -v nvidia-smi >/dev/null 2>&1; then
  echo "worker_gpus_test: this machine has a GPU; tests/gpu/worker_gpus_check.sh checks it"
else
  set +e
  out="$("$BIN/tessera-worker" gpus)"
  rc=$?
  set -e
  [ "$rc" = 1 ] || fail "no NVML: exit $rc, wanted 1"
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["source"].startswith("none"), d; assert d["gpus"] == [], d' \
    "$out" || fail "no NVML: $out"
fi

set +e
"$BIN/tessera-worker" gpus --bogus >/dev/null 2>"${TMPDIR:-/tmp}/worker_gpus_usage.$$"
rc=$?
set -e
grep -q "usage: tessera-worker gpus" "${TMPDIR:-/tmp}/worker_gpus_usage.$$" || fail "no usage line"
rm -f "${TMPDIR:-/tmp}/worker_gpus_usage.$$"
[ "$rc" = 2 ] || fail "a wrong call: exit $rc, wanted 2"
echo "worker_gpus_test: ok"
