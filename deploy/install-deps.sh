#!/usr/bin/env bash
# Installs every build, test and run-time dependency of Tessera from Debian 12's packages.
# Idempotent: packages already present are skipped, so a second run is fast and changes nothing.
# libopenblas0-pthread becomes the system BLAS (update-alternatives): Debian's LibTorch calls the
# generic libblas.so.3, which is otherwise the reference BLAS, 25 times slower.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git clang clang-format libclang-rt-14-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  libpqxx-dev libpq-dev libboost-dev libboost-system-dev libyaml-cpp-dev libcli11-dev
  libspdlog-dev libfmt-dev nlohmann-json3-dev catch2 libssl-dev
  libcurl4-openssl-dev zlib1g-dev libre2-dev libjemalloc-dev
  libtorch-dev libgloo-dev python3-torch libxxhash-dev libopenblas0-pthread
  postgresql postgresql-contrib procps iproute2 util-linux curl
  libfaketime
  bubblewrap skopeo umoci docker-registry busybox-static
  prometheus
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
# The postgresql package starts a cluster on port 5432 through its service; Tessera manages
# its own private instances and needs nothing from that one.
echo "install-deps: done"
