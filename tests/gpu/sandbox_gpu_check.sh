#!/bin/bash
# On a GPU node: a rank in Tessera's sandbox uses the GPU it was given and no other, both on the
# host's root (`image: host`) and in an image; a node container's processes share GPU memory
# through CUDA IPC and run NCCL; which gets the driver's libraries and tools the
# way the NVIDIA container toolkit gives them. Needs no control plane: it uses
# tessera-sandbox-run, which builds the sandbox with the worker's own code. CI machines have no
# GPU; this runs where one is lent (and on a new cluster's nodes, as a set-up check).
#
#   tests/gpu/sandbox_gpu_check.sh [BIN_DIR]    (tessera-sandbox-run and -init; default build/bin)
#
# Needs nvcc (to build cuda_check.cu) and bubblewrap (BIN_DIR/bwrap or /usr/bin/bwrap); runs
# the ranks as uid 100000, as a root worker runs a user's ranks. Exit status: the failures.
set -u
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "${1:-$here/../../build/bin}" && pwd)
bwrap=/usr/bin/bwrap
[ -x "$bin/bwrap" ] && bwrap=$bin/bwrap
# The node's own library path, as an operator passes it to ranks (tessera-worker --rank-env).
as_root=("$bin/tessera-sandbox-run" --bwrap "$bwrap" --env "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}")
run=("${as_root[@]}" --uid 100000 --gid 100000)
python=$(command -v python3)
failures=0
check() {  # check NAME REGEX... -- COMMAND...: the output must match every REGEX
  local name=$1 wants=() want out ok=1
  shift
  while [ "$1" != "--" ]; do wants+=("$1"); shift; done
  shift
  out=$("$@" 2>&1 | grep -v '^tessera-sandbox-run: /')
  for want in "${wants[@]}"; do grep -Eq "$want" <<<"$out" || ok=0; done
  if [ $ok = 1 ]; then
    echo "PASS $name"
  else
    echo "FAIL $name (wanted /${wants[*]}/)"
    failures=$((failures + 1))
  fi
  sed 's/^/    /' <<<"$out" | head -20
}

echo "== the node"
uname -r
nvidia-smi -L || true
ls -l /dev/nvidia* 2>&1 | head
cat /proc/driver/nvidia/gpus/*/information 2>&1 | grep -E "UUID|Minor|Model" | head
ldconfig -p | grep -E "libcuda.so|libnvidia-ml.so" | head -4
echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
"$bwrap" --version

echo "== building cuda_check into a minimal image (the program and the C library)"
# Like any glibc image: the C library's files, and no trace of the driver.
img=$(mktemp -d /tmp/tessera-gpu-image.XXXXXX)
chmod 755 "$img"
nvcc -O2 -o "$img/cuda_check" "$here/cuda_check.cu" || exit 1
libs=$( (ldd "$img/cuda_check"; ldd "$(command -v nvidia-smi)"; ldd "$(ldconfig -p |
  grep -o '/[^ ]*libcuda.so.1$' | head -1)") | grep -o '/[^ ]*' | grep -v nvidia | sort -u)
for lib in $libs; do cp -L --parents "$lib" "$img/"; done
[ -x "$bin/busybox" ] && mkdir -p "$img/bin" && cp "$bin/busybox" "$img/bin/"
chmod -R a+rX "$img"

echo "== checks"
check "the sandbox starts as root" "^ok$" -- "${as_root[@]}" -- /bin/echo ok
check "the sandbox starts as a user's uid" "^ok$" -- "${run[@]}" -- /bin/echo ok
py='import os, torch; print("visible", os.environ.get("CUDA_VISIBLE_DEVICES"), "count", torch.cuda.device_count()); x = torch.ones(1024, 1024, device="cuda"); print("sum", int((x @ x).sum().item()))'
check "host root, GPU 0: torch sees one device and multiplies on it" \
  "count 1" "sum 1073741824" -- "${run[@]}" --gpu 0 -- "$python" -c "$py"
check "host root, GPU 0: CUDA_VISIBLE_DEVICES names the GPU by UUID" \
  "visible GPU-" -- "${run[@]}" --gpu 0 -- "$python" -c "$py"
check "host root, GPU 0: nvidia-smi lists one GPU" \
  "^GPU 0:" -- "${run[@]}" --gpu 0 -- nvidia-smi -L
check "host root, no GPU: torch sees none" \
  "count 0" -- "${run[@]}" -- "$python" -c 'import torch; print("count", torch.cuda.device_count())'
check "host root, no GPU: no NVIDIA device node" \
  "^none$" -- "${run[@]}" -- /bin/sh -c 'ls /dev/nvidia* 2>/dev/null || echo none'
check "image, GPU 0: the driver is bound in and a kernel runs" \
  "devices: 1" "kernel sum: 496" -- "${run[@]}" --root "$img" --gpu 0 -- /cuda_check
if head -c 4 "$(command -v nvidia-smi)" | grep -q ELF; then
  check "image, GPU 0: the driver's nvidia-smi runs in the image" \
    "^GPU 0:" -- "${run[@]}" --root "$img" --gpu 0 -- /usr/local/nvidia/bin/nvidia-smi -L
else
  echo "SKIP image, GPU 0: the driver's nvidia-smi runs in the image (this node's is a script)"
fi
check "image, no GPU: CUDA finds no device" \
  "devices: 0" -- "${run[@]}" --root "$img" -- /cuda_check
# A node container (launch: node): two processes of one run, in one sandbox, share a GPU's
# memory through CUDA IPC (which needs the shared PID and IPC namespaces and /dev/shm), and NCCL
# initialises and all-reduces inside it (one rank: this machine may have one GPU).
# spawn re-imports the main module, so the script is a file (in a folder the sandbox binds).
scripts=$(mktemp -d /var/tmp/tessera-gpu-scripts.XXXXXX)
chmod 755 "$scripts"
cat >"$scripts/ipc.py" <<'EOF'
import torch, torch.multiprocessing as mp
def child(t, q):
    t.add_(41)
    torch.cuda.synchronize()
    q.put("done")
if __name__ == "__main__":
    mp.set_start_method("spawn")
    t = torch.ones(4, device="cuda")
    q = mp.get_context("spawn").SimpleQueue()
    p = mp.get_context("spawn").Process(target=child, args=(t, q))
    p.start(); print("child", q.get()); p.join()
    print("parent sees", int(t.sum().item()), "exit", p.exitcode)
EOF
chmod 644 "$scripts/ipc.py"
check "node container, GPU 0: two processes share a tensor through CUDA IPC" \
  "child done" "parent sees 168 exit 0" -- "${run[@]}" --bind "$scripts" --gpu 0 -- \
  "$python" "$scripts/ipc.py"
nccl='import os, torch, torch.distributed as dist
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29531", RANK="0", WORLD_SIZE="1")
dist.init_process_group("nccl")
t = torch.full((1024,), 2.0, device="cuda")
dist.all_reduce(t)
torch.cuda.synchronize()
print("nccl", torch.cuda.nccl.version(), "sum", int(t.sum().item()))'
check "node container, GPU 0: NCCL initialises and all-reduces" \
  "nccl .* sum 2048" -- "${run[@]}" --gpu 0 -- "$python" -c "$nccl"
if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ]; then
  check "node container, GPUs 0 and 1: both visible, in order" \
    "count 2" -- "${run[@]}" --gpu 0,1 -- "$python" -c "$py"
else
  echo "SKIP node container, GPUs 0 and 1: this machine has one GPU"
fi
rm -rf "$scripts"
echo "== $failures failed"
exit "$failures"
