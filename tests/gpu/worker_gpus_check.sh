#!/bin/bash
# On a GPU node: `tessera-worker gpus` (NVML, loaded at run time) finds every GPU nvidia-smi
# lists, with the same UUIDs, models and driver version, and its probe finds no fault on a
# healthy node. CI machines have no GPU; this runs where one is lent (and on a new cluster's
# nodes, as a set-up check).
#
#   tests/gpu/worker_gpus_check.sh [BIN_DIR]    (default build/bin)
set -u
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "${1:-$here/../../build/bin}" && pwd)
out=$("$bin/tessera-worker" gpus) || { echo "FAIL tessera-worker gpus: exit $?: $out"; exit 1; }
echo "$out"
smi=$(nvidia-smi --query-gpu=index,uuid,name,driver_version --format=csv,noheader) ||
  { echo "FAIL nvidia-smi"; exit 1; }
echo "$smi"
python3 - "$out" "$smi" <<'PY'
import json, sys
d = json.loads(sys.argv[1])
rows = [[f.strip() for f in line.split(",")] for line in sys.argv[2].strip().splitlines()]
failures = 0
def check(name, ok, detail=""):
    global failures
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + detail))
    failures += 0 if ok else 1
check("source is NVML", d["source"] == "nvml", d["source"])
check("every GPU found", len(d["gpus"]) == len(rows), f'{len(d["gpus"])} vs {len(rows)}')
for g, r in zip(d["gpus"], rows):
    check(f'GPU {g["index"]} UUID', g["uuid"] == r[1], f'{g["uuid"]} vs {r[1]}')
    check(f'GPU {g["index"]} model', g["model"] == r[2], f'{g["model"]} vs {r[2]}')
    check(f'GPU {g["index"]} memory', g["memory_bytes"] > 1 << 30, str(g["memory_bytes"]))
check("driver version", d["driver_version"] == rows[0][3], f'{d["driver_version"]} vs {rows[0][3]}')
check("gpu type", d["gpu_type"] != "" and d["gpu_type"] in rows[0][2].lower(), d["gpu_type"])
check("a healthy probe", d["probe"] == [], json.dumps(d["probe"]))
sys.exit(failures)
PY
