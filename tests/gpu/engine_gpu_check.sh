#!/bin/bash
# On a machine with a GPU and PyTorch (CUDA) in its python3: builds the engine against that
# PyTorch (deploy/build-gpu-engine.sh) and checks it, in about 10 minutes:
#   1. the engine's CUDA tests (engine_cuda_test: bf16 autocast, fused attention with ALiBi
#      against the explicit one, FULL_SHARD on one GPU, the mixture of experts);
#   2. the machine's bf16 matmul bound (torch.matmul 8192^3) and a GPT of 1.3B parameters
#      trained in bf16 for --steps steps: tokens/s, MFU against the GPU's dense bf16 peak (target
#      at least 0.40) and the ratio to the matmul bound;
#   3. a checkpoint written on the GPU resumed on 2 CPU ranks, and theirs resumed on the GPU,
#      each with the GPU run's losses to bf16's tolerance (2e-2 relative);
#   4. the canary: NCCL initialised and an all-reduce on the GPU, and its bf16 compute check
#      against the matmul bound.
# Prints PASS/FAIL lines and the figures; exit status: the failures. Output and logs in
# $OUT/engine-gpu (or /tmp/engine-gpu).
#
#   tests/gpu/engine_gpu_check.sh [--debs DIR] [--steps N]
#
# --debs: the Debian packages deploy/gpu-debs.sh downloaded, where the machine has none of them.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
debs="" steps=300
while [ $# -gt 0 ]; do
  case $1 in
    --debs) debs=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    *) echo "engine_gpu_check: unknown argument $1" >&2; exit 2 ;;
  esac
done
out=${OUT:-/tmp}/engine-gpu
mkdir -p "$out"
failures=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1${2:+: $2}"; failures=$((failures + 1)); }

start=$(date +%s)
build_args=(--build "$root/build-gpu")
[ -n "$debs" ] && build_args+=(--debs "$debs")
if ! "$root/deploy/build-gpu-engine.sh" "${build_args[@]}" >"$out/build.log" 2>&1; then
  tail -40 "$out/build.log"
  fail "build against $(python3 -c 'import torch; print("PyTorch", torch.__version__)' 2>&1)"
  exit 1
fi
echo "built in $(($(date +%s) - start)) s"
# shellcheck disable=SC1091
source "$root/build-gpu/env.sh"
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
export TESSERA_GPU_NAME=$gpu_name
echo "GPU: $gpu_name"

# 1. The engine's CUDA tests.
if "$root/build-gpu/tests/engine_cuda_test" >"$out/cuda_test.log" 2>&1; then
  pass "engine_cuda_test ($(tail -1 "$out/cuda_test.log"))"
else
  tail -40 "$out/cuda_test.log"
  fail "engine_cuda_test"
fi

# 2. The matmul bound, then the 1.3B GPT.
bound=$(python3 - <<'PY'
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
for _ in range(3): a @ b
torch.cuda.synchronize()
n, t = 20, time.perf_counter()
for _ in range(n): a @ b
torch.cuda.synchronize()
print(f"{2 * 8192**3 * n / (time.perf_counter() - t) / 1e12:.1f}")
PY
)
echo "matmul bound (torch.matmul 8192^3 bf16): $bound TFLOPS"

corpus=/usr/share/common-licenses
[ -d "$corpus" ] || corpus=$(python3 -c 'import os; print(os.path.dirname(os.__file__))')
tessera-data convert --input "$corpus" --output "$out/data-2048" --tokenizer byte --seq-len 2048 \
  >"$out/data.log" 2>&1 || fail "tessera-data convert (2048)" "$(tail -3 "$out/data.log")"
tessera-data convert --input "$corpus" --output "$out/data-128" --tokenizer byte --seq-len 128 \
  >>"$out/data.log" 2>&1 || fail "tessera-data convert (128)" "$(tail -3 "$out/data.log")"

port=29610
# run NAME WORLD DEVICE CONFIG [ENV...]: tessera-train's ranks as processes, each its own
# progress file and log under $out/NAME; waits for them.
run() {
  local name=$1 world=$2 device=$3 config=$4
  shift 4
  mkdir -p "$out/$name"
  port=$((port + 1))
  local pids=() r
  for r in $(seq 0 $((world - 1))); do
    env "$@" WORLD_SIZE="$world" RANK="$r" LOCAL_RANK="$r" LOCAL_WORLD_SIZE="$world" \
      MASTER_ADDR=127.0.0.1 MASTER_PORT=$port TESSERA_PROGRESS_FILE="$out/$name/progress-$r" \
      tessera-train --config <(sed "s/DEVICE/$device/" "$config") >"$out/$name/log-$r" 2>&1 &
    pids+=($!)
  done
  local failed=0
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  return $failed
}

cat >"$out/big.yaml" <<YAML
model: {preset: 1b, vocab_size: 50304}
data: {path: $out/data-2048}
max_duration: ${steps}ba
global_train_batch_size: 8
precision: amp_bf16
log_interval: 10
device: DEVICE
YAML
big_start=$(date +%s)
if run big 1 cuda "$out/big.yaml"; then
  python3 - "$out/big/progress-0" "$bound" "$gpu_name" <<'PY' | tee "$out/big.txt"
import json, statistics, sys
records = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
late = [r for r in records if r["step"] > 20 and r.get("mfu", 0) > 0] or records[-3:]
mfu = statistics.median(r["mfu"] for r in late)
tps = statistics.median(r["tokens_per_second"] for r in late)
bound = float(sys.argv[2])
print(f"1.3B GPT, bf16, {records[-1]['step']} steps on {sys.argv[3]}: {tps:.0f} tokens/s, "
      f"MFU {mfu:.3f} (target >= 0.40; dense bf16 peak), {mfu * 989 / bound:.2f} of the matmul bound")
print("RESULT", "PASS" if mfu >= 0.40 else "FAIL", f"{mfu:.3f}")
PY
  grep -q "RESULT PASS" "$out/big.txt" && pass "MFU of the 1.3B GPT" || fail "MFU of the 1.3B GPT"
else
  tail -20 "$out/big/log-0"
  fail "the 1.3B GPT's run"
fi
echo "1.3B run: $(($(date +%s) - big_start)) s"
grep -m1 "parameters;" "$out/big/log-0" || true

# 3. GPU -> CPU -> GPU through checkpoints: the GPU run saves every 10 steps; 2 CPU ranks resume
# its step 20; the GPU resumes their step 30. Every run is 40 steps long (the learning rate's
# schedule depends on it).
small() {  # small FOLDER
  cat <<YAML
model: {preset: tiny}
data: {path: $out/data-128}
max_duration: 40ba
global_train_batch_size: 8
precision: amp_bf16
save_folder: $1
save_interval: 10ba
num_checkpoints_to_keep: 10
log_interval: 1
device: DEVICE
YAML
}
small "$out/ck-gpu" >"$out/gpu.yaml"
run gpu 1 cuda "$out/gpu.yaml" || fail "the GPU run" "$(tail -3 "$out/gpu/log-0")"
cp -r "$out/ck-gpu" "$out/ck-cpu"
rm -rf "$out/ck-cpu/step-00000030" "$out/ck-cpu/step-00000040"
small "$out/ck-cpu" >"$out/cpu.yaml"
run cpu 2 cpu "$out/cpu.yaml" || fail "the CPU ranks' resumption" "$(tail -3 "$out/cpu/log-0")"
cp -r "$out/ck-cpu" "$out/ck-back"
rm -rf "$out/ck-back/step-00000040"
small "$out/ck-back" >"$out/back.yaml"
run back 1 cuda "$out/back.yaml" || fail "the GPU's resumption" "$(tail -3 "$out/back/log-0")"
resumptions=$(python3 - "$out" <<'PY'
import json, sys
def losses(name):
    return {r["step"]: r["loss"] for r in map(json.loads, open(f"{sys.argv[1]}/{name}/progress-0"))}
gpu, cpu, back = losses("gpu"), losses("cpu"), losses("back")
for name, got, steps in (("CPU ranks from the GPU's step 20", cpu, range(21, 41)),
                         ("GPU from the CPU ranks' step 30", back, range(31, 41))):
    worst = max(abs(got[s] - gpu[s]) / gpu[s] for s in steps) if all(s in got for s in steps) else 1
    print(("PASS" if worst < 2e-2 else "FAIL"), f"{name}: worst relative loss difference {worst:.2e}")
PY
)
echo "$resumptions"
failures=$((failures + $(grep -c "^FAIL" <<<"$resumptions")))
[ -n "$resumptions" ] || fail "reading the resumptions' losses"

# 4. The canary.
canary_out=$(tessera-canary allreduce --rank 0 --world 1 --master-addr 127.0.0.1 \
  --master-port $((port + 1)) --backend nccl --local-rank 0 --timeout 60 2>&1)
echo "canary allreduce: $canary_out"
grep -q '"HEALTH_VERDICT_PASSED"' <<<"$canary_out" && pass "canary NCCL all-reduce" ||
  fail "canary NCCL all-reduce"
canary_out=$(tessera-canary compute --seconds 3 --timeout 60 2>&1)
echo "canary compute: $canary_out"
tflops=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["compute_tflops"])' \
  "$(tail -1 <<<"$canary_out")" 2>/dev/null || echo 0)
python3 -c "import sys; r = float('$tflops') / float('$bound'); print(f'canary compute {float(\"$tflops\"):.1f} TFLOPS: {r:.2f} of the matmul bound'); sys.exit(0 if r > 0.5 else 1)" &&
  pass "canary compute" || fail "canary compute"

echo "engine_gpu_check: $failures failures in $(($(date +%s) - start)) s"
exit $failures
