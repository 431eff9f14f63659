#!/bin/bash
# Builds the engine on a GPU node against a CUDA LibTorch: tessera-train, tessera-data,
# tessera-canary and the engine's CUDA test (build-gpu/tests/engine_cuda_test). Debian's
# LibTorch is CPU-only, so the LibTorch is a PyTorch installation's (the python3 on PATH, or
# --torch with a LibTorch's CMake prefix), and NCCL is the one that PyTorch brings (or
# /usr/local/cuda's). The other dependencies are Debian's packages: installed, or unpacked from
# the .deb files deploy/gpu-debs.sh downloads (--debs DIR) into BUILD/deps, no root needed.
#
#   deploy/build-gpu-engine.sh [--debs DIR] [--torch PREFIX] [--build DIR]
#
# Writes BUILD/env.sh, which sets LD_LIBRARY_PATH for the binaries (the unpacked libraries,
# LibTorch's and NCCL's); source it before running them.
set -euo pipefail
cd "$(dirname "$0")/.."
debs="" torch="" build=build-gpu
while [ $# -gt 0 ]; do
  case $1 in
    --debs) debs=$(cd "$2" && pwd); shift 2 ;;
    --torch) torch=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    *) echo "build-gpu-engine: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$build"
build=$(cd "$build" && pwd)
if [ -z "$torch" ]; then
  torch=$(python3 -c 'import torch.utils; print(torch.utils.cmake_prefix_path)') || {
    echo "build-gpu-engine: no PyTorch in python3; name a LibTorch with --torch" >&2
    exit 1
  }
fi
torch_lib=$(cd "$torch/../../lib" 2>/dev/null && pwd || true)  # site-packages/torch/lib

# NCCL: PyTorch's own (the nvidia-nccl wheel), so that the engine and LibTorch load one library.
nccl_args=()
nccl=$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null || true)
if [ -n "$nccl" ] && [ -f "$nccl/include/nccl.h" ]; then
  nccl_lib=$(ls "$nccl"/lib/libnccl.so* | head -1)
  nccl_args=(-DNCCL_INCLUDE_DIR="$nccl/include" -DNCCL_LIBRARY="$nccl_lib")
fi

prefix_args=() lib_path="${torch_lib}"
[ -n "$nccl" ] && lib_path="$lib_path:$nccl/lib"
if [ -n "$debs" ]; then
  deps=$build/deps
  rm -rf "$deps"
  mkdir -p "$deps"
  for deb in "$debs"/*.deb; do dpkg -x "$deb" "$deps"; done
  usr=$deps/usr
  multiarch=$usr/lib/x86_64-linux-gnu
  # The packages' .pc files name /usr: read them under the unpacked root.
  export PKG_CONFIG_PATH="$multiarch/pkgconfig:$usr/share/pkgconfig"
  export PKG_CONFIG_SYSROOT_DIR=$deps
  [ -x "$usr/bin/pkgconf" ] && export PKG_CONFIG="$usr/bin/pkgconf"
  export PATH="$usr/bin:$PATH"  # protoc and the gRPC plugin
  export LD_LIBRARY_PATH="$multiarch:${LD_LIBRARY_PATH:-}"
  prefix_args=(-DCMAKE_PREFIX_PATH="$usr;$multiarch/cmake" -DCMAKE_INCLUDE_PATH="$usr/include"
               -DCMAKE_LIBRARY_PATH="$multiarch" -DCMAKE_CXX_FLAGS="-isystem $usr/include")
  lib_path="$multiarch:$lib_path"
fi

cmake -G Ninja -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_ENGINE_ONLY=ON \
  -DTESSERA_TORCH_DIR="$torch" "${nccl_args[@]}" "${prefix_args[@]}"
targets=(tessera-train tessera-data engine_cuda_test)
ninja -C "$build" -t targets all | grep -q '^tessera-canary:' && targets+=(tessera-canary)
ninja -C "$build" "${targets[@]}"
cat >"$build/env.sh" <<ENV
export LD_LIBRARY_PATH="$lib_path:\${LD_LIBRARY_PATH:-}"
export PATH="$build/bin:\$PATH"
ENV
echo "build-gpu-engine: built ${targets[*]} in $build/bin and $build/tests; source $build/env.sh"
