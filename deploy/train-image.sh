#!/usr/bin/env bash
# Builds the image examples/gpt-tiny.yaml runs in and pushes it to a registry: tessera-train
# and tessera-data in /usr/local/bin with every library they load, busybox as the shell and the
# tools the example's command uses (sh, mkdir ...; flock from util-linux), and /usr/share/common-licenses (the
# text it trains on). About 700 MB, most of it LibTorch (and NCCL, where CUDA is installed).
# Built with umoci from files of this machine, pushed with skopeo; nothing is downloaded
# (deploy/image-lib.sh).
#
#   deploy/train-image.sh REFERENCE [BIN_DIR]
#       e.g. deploy/train-image.sh 127.0.0.1:5000/tessera/train:latest build/bin
#
# A registry on loopback is spoken to over plain HTTP; any other over HTTPS.
set -euo pipefail
ref="${1:?usage: deploy/train-image.sh REGISTRY/NAME:TAG [BIN_DIR]}"
bin="${2:-$(dirname "$0")/../build/bin}"
for p in tessera-train tessera-data; do
  [ -x "$bin/$p" ] || { echo "train-image: $bin/$p is missing: run deploy/build.sh first" >&2; exit 2; }
done
source "$(dirname "$0")/image-lib.sh"

image_start
trap 'rm -rf "$image_work"' EXIT
root="$image_root"
mkdir -p "$root/bin" "$root/usr/share" "$root/etc"
cp /bin/busybox "$root/bin/"
for applet in sh mkdir cat ls test [ echo sleep env rm mv cp; do
  ln -s busybox "$root/bin/$applet"
done
cp /usr/bin/flock "$root/bin/"  # busybox-static has none
image_add_programs "$bin" "$bin/tessera-train" "$bin/tessera-data"
image_add_libraries /usr/bin/flock
cp -r /usr/share/common-licenses "$root/usr/share/"
echo "Tessera training image (tessera-train, tessera-data)" >"$root/etc/issue"

image_push "docker://$ref" --config.env PATH=/usr/local/bin:/bin --config.workingdir /
echo "train-image: pushed $ref"
