#!/usr/bin/env bash
# deploy/service-images.sh: the control plane's and the worker's images are built (as OCI
# layouts), and each is whole: every program in it starts inside its own root, with nothing of
# this machine's (bubblewrap: the image's root alone, a fresh /proc and /dev).
#
#   tests/integration/scripts/service_images_test.sh BIN_DIR
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
BIN="$(cd "${1:?usage: $(basename "$0") BIN_DIR}" && pwd)"
tmp="$(mktemp -d /tmp/tessera-service-images.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
start=$(date +%s)

TMPDIR="$tmp" "$ROOT/deploy/service-images.sh" "oci:$tmp/images" test "$BIN" >"$tmp/build.log" 2>&1 ||
  { cat "$tmp/build.log"; fail "service-images.sh"; }

# Runs a command inside an unpacked image's root, as the image's own user would.
inside() {
  local rootfs="$1"
  shift
  bwrap --bind "$rootfs" / --proc /proc --dev /dev --tmpfs /tmp --unshare-all --die-with-parent \
    --clearenv --setenv PATH /usr/local/bin:/usr/sbin:/usr/bin:/bin "$@"
}
checked=0
check() {  # IMAGE PROGRAM ARG...: the program runs in the image and exits 0
  local image="$1"
  shift
  inside "$tmp/$image/rootfs" "$@" >"$tmp/out" 2>&1 ||
    fail "in the $image image, $* failed: $(head -5 "$tmp/out")"
  checked=$((checked + 1))
}

for image in control-plane worker; do
  umoci unpack --image "$tmp/images/$image:test" "$tmp/$image" >/dev/null ||
    fail "umoci unpack $image"
done
for program in tessera-server tessera-runs tessera-scheduler tessera-cordon tessera-logs \
    tessera-health tessera-gateway mcli; do
  check control-plane "/usr/local/bin/$program" --help
done
for program in tessera-worker tessera-sandbox-run tessera-canary; do
  check worker "/usr/local/bin/$program" --help
done
check worker bwrap --version
check worker iptables --version
check worker skopeo --version
# The control plane's image runs as tessera (10001), not root.
config="$(skopeo inspect --config "oci:$tmp/images/control-plane:test")"
grep -q '"User": "10001:10001"' <<<"$config" || fail "the control plane's image runs as: $config"
echo "service_images_test: ok ($checked programs, $(($(date +%s) - start)) s)"
