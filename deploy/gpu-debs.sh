#!/bin/bash
# Downloads the Debian packages a GPU node needs to build the engine (deploy/build-gpu-engine.sh)
# into a folder, for a node that cannot reach Debian's mirror: Abseil, protobuf, yaml-cpp,
# spdlog/fmt, nlohmann-json, CLI11, Catch2, xxHash, and gRPC with what it needs (the canary's
# result protos). About 21 MB. Run where apt reaches Debian 12's mirror (this project's build
# machines); copy the folder to the node.
#
#   deploy/gpu-debs.sh [DIR]    (default .gpu-debs, which git ignores)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.gpu-debs}
packages=(
  libabsl-dev libabsl20220623 libprotobuf-dev libprotobuf32 protobuf-compiler libprotoc32
  libyaml-cpp-dev libyaml-cpp0.7 libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
  nlohmann-json3-dev libcli11-dev catch2 libxxhash-dev libxxhash0
  libgrpc++-dev libgrpc-dev libgrpc++1.51 libgrpc29 protobuf-compiler-grpc libc-ares-dev
  libc-ares2 libre2-dev libre2-9 libssl-dev libssl3 zlib1g-dev pkgconf pkgconf-bin libpkgconf3
)
mkdir -p "$dir"
cd "$dir"
rm -f ./*.deb
apt-get download "${packages[@]}"
echo "gpu-debs: $(ls ./*.deb | wc -l) packages, $(du -sh . | cut -f1), in $PWD"
