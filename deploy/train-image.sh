#!/usr/bin/env bash
# Builds the image examples/gpt-tiny.yaml runs in and pushes it to a registry: tessera-train
# and tessera-data in /usr/local/bin with every library they load, busybox as the shell and the
# tools the example's command uses (sh, mkdir ...; flock from util-linux), and /usr/share/common-licenses (the
# text it trains on). About 700 MB, most of it LibTorch (and NCCL, where CUDA is installed).
# Built with umoci from files of this machine, pushed with skopeo; nothing is downloaded.
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
tls=true
case "$ref" in 127.0.0.1:* | localhost:*) tls=false ;; esac

work="$(mktemp -d "${TMPDIR:-/tmp}/tessera-train-image.XXXXXX")"
trap 'rm -rf "$work"' EXIT
layout="$work/layout" bundle="$work/bundle" root="$work/bundle/rootfs"
umoci init --layout "$layout"
umoci new --image "$layout:build"
umoci unpack --rootless --image "$layout:build" "$bundle" >/dev/null

mkdir -p "$root/bin" "$root/usr/local/bin" "$root/usr/share" "$root/etc"
cp /bin/busybox "$root/bin/"
for applet in sh mkdir cat ls test [ echo sleep env rm mv cp; do
  ln -s busybox "$root/bin/$applet"
done
cp /usr/bin/flock "$root/bin/"  # busybox-static has none
for p in "$bin/tessera-train" "$bin/tessera-data" /usr/bin/flock; do
  case "$p" in "$bin"/*) cp "$p" "$root/usr/local/bin/" && strip "$root/usr/local/bin/${p##*/}" ;; esac
  # Each library the program loads, and the dynamic loader, where the program looks for them.
  ldd "$p" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'
done | sort -u | while read -r lib; do cp -L --parents "$lib" "$root/"; done
cp -r /usr/share/common-licenses "$root/usr/share/"
echo "Tessera training image (tessera-train, tessera-data)" >"$root/etc/issue"

umoci repack --image "$layout:build" "$bundle"
umoci config --image "$layout:build" --config.env PATH=/usr/local/bin:/bin \
  --config.workingdir / >/dev/null
skopeo copy --quiet --dest-tls-verify="$tls" "oci:$layout:build" "docker://$ref"
echo "train-image: pushed $ref"
