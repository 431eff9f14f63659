#!/usr/bin/env bash
# Installs every build, test and run-time dependency of Tessera from Debian 12's packages, and the
# web console's libraries from the npm registry (pinned by services/gateway/console's
# package-lock.json; bundled into the build, so nothing is fetched at run time).
# Idempotent: packages already present are skipped, so a second run is fast and changes nothing.
# libopenblas0-pthread becomes the system BLAS (update-alternatives): Debian's LibTorch calls the
# generic libblas.so.3, which is otherwise the reference BLAS, 25 times slower.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git clang clang-format libclang-rt-14-dev lld
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  libpqxx-dev libpq-dev libboost-dev libboost-system-dev libyaml-cpp-dev libcli11-dev
  libspdlog-dev libfmt-dev nlohmann-json3-dev catch2 libssl-dev
  libcurl4-openssl-dev zlib1g-dev libre2-dev libjemalloc-dev libseccomp-dev
  libtorch-dev libgloo-dev python3-torch python3-yaml libxxhash-dev libopenblas0-pthread
  python3-grpcio python3-protobuf python3-pytest
  postgresql postgresql-contrib procps iproute2 iptables util-linux curl systemd
  libfaketime
  bubblewrap skopeo umoci docker-registry busybox-static
  prometheus
  nodejs chromium
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# Debian's nodejs comes without npm (NodeSource's has it built in).
command -v npm >/dev/null 2>&1 || missing+=(npm)
# kubectl renders deploy/kubernetes (kubectl kustomize); any kubectl does, Debian's if none.
command -v kubectl >/dev/null 2>&1 || missing+=(kubernetes-client)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages already installed"
else
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  # The postgresql package starts a cluster on port 5432 through its service; Tessera manages
  # its own private instances and needs nothing from that one.
fi

# The web console's npm packages (uPlot for its charts; playwright-core drives Chromium in its
# browser tests), exactly as the lock file pins them, without their install scripts. Skipped
# when node_modules already matches the lock file.
console="$(cd "$(dirname "$0")/.." && pwd)/services/gateway/console"
stamp="$console/node_modules/.tessera-package-lock.sha256"
want="$(sha256sum "$console/package-lock.json" | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "install-deps: npm ci in $console"
  (cd "$console" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  echo "$want" >"$stamp"
else
  echo "install-deps: the console's npm packages are installed"
fi
echo "install-deps: done"
