#!/usr/bin/env bash
# Builds the OCI images of Tessera's own processes from BIN_DIR (build/bin), with the tools the
# training image is built with (deploy/image-lib.sh: umoci and skopeo, from this machine's files;
# nothing is downloaded):
#   PREFIX/control-plane:TAG  tessera-server, the per-service binaries (tessera-runs,
#                             -scheduler, -cordon, -logs, -health, -gateway) and mcli; it runs
#                             as uid 10001, not root
#   PREFIX/worker:TAG         tessera-worker and what it runs: tessera-sandbox-init,
#                             tessera-sandbox-run, tessera-canary, bubblewrap, iptables (with its
#                             match modules), skopeo (and this machine's policy.json), the
#                             system's CA certificates
# deploy/kubernetes runs them.
#
#   deploy/service-images.sh PREFIX [TAG] [BIN_DIR]
#       deploy/service-images.sh registry.example.com/tessera v1 build/bin    (pushed)
#       deploy/service-images.sh 127.0.0.1:5000/tessera                       (plain HTTP)
#       deploy/service-images.sh oci:/tmp/images                              (OCI layouts,
#           /tmp/images/control-plane and /tmp/images/worker)
set -euo pipefail
prefix="${1:?usage: deploy/service-images.sh PREFIX [TAG] [BIN_DIR]}"
tag="${2:-latest}"
bin="$(cd "${3:-$(dirname "$0")/../build/bin}" && pwd)"
source "$(dirname "$0")/image-lib.sh"

control_plane=(tessera-server tessera-runs tessera-scheduler tessera-cordon tessera-logs
               tessera-health tessera-gateway mcli)
worker=(tessera-worker tessera-sandbox-init tessera-sandbox-run tessera-canary)
for p in "${control_plane[@]}" "${worker[@]}"; do
  [ -x "$bin/$p" ] || { echo "service-images: $bin/$p is missing: run deploy/build.sh" >&2; exit 2; }
done
for tool in /usr/bin/bwrap /usr/sbin/iptables /usr/bin/skopeo; do
  [ -x "$tool" ] || { echo "service-images: $tool is missing: run deploy/install-deps.sh" >&2; exit 2; }
done

destination() {  # NAME: where image NAME goes
  case "$prefix" in
    oci:*) mkdir -p "${prefix#oci:}" && echo "oci:${prefix#oci:}/$1:$tag" ;;
    *) echo "docker://$prefix/$1:$tag" ;;
  esac
}

base_files() {  # what every image has: a passwd naming its users, the CA certificates
  mkdir -p "$image_root/etc/ssl/certs" "$image_root/tmp"
  chmod 1777 "$image_root/tmp"
  cp -L /etc/ssl/certs/ca-certificates.crt "$image_root/etc/ssl/certs/"
  printf 'root:x:0:0:root:/root:/bin/sh\ntessera:x:10001:10001:tessera:/var/lib/tessera:/bin/sh\n' \
    >"$image_root/etc/passwd"
  printf 'root:x:0:\ntessera:x:10001:\n' >"$image_root/etc/group"
  mkdir -p "$image_root/bin" && cp /bin/busybox "$image_root/bin/" && ln -s busybox "$image_root/bin/sh"
}

image_start
trap 'rm -rf "$image_work"' EXIT
base_files
image_add_programs "$bin" "${control_plane[@]/#/$bin/}"
mkdir -p "$image_root/var/lib/tessera" && chown 10001:10001 "$image_root/var/lib/tessera"
echo "Tessera control plane" >"$image_root/etc/issue"
image_push "$(destination control-plane)" --config.env PATH=/usr/local/bin:/bin \
  --config.user 10001:10001 --config.workingdir /var/lib/tessera \
  --config.entrypoint /usr/local/bin/tessera-server
echo "service-images: $(destination control-plane)"

image_start
base_files
iptables="$(readlink -f /usr/sbin/iptables)"
image_add_programs "$bin" "${worker[@]/#/$bin/}" /usr/bin/bwrap "$iptables" /usr/bin/skopeo \
  /usr/lib/*/xtables/*.so
for name in iptables iptables-save iptables-restore ip6tables; do
  [ -e "/usr/sbin/$name" ] && ln -sf "$iptables" "$image_root/usr/sbin/$name"
done
mkdir -p "$image_root/etc/containers"
cp /etc/containers/policy.json "$image_root/etc/containers/"  # skopeo's, as on a node
echo "Tessera node daemon" >"$image_root/etc/issue"
image_push "$(destination worker)" --config.env PATH=/usr/local/bin:/usr/sbin:/usr/bin:/bin \
  --config.workingdir / --config.entrypoint /usr/local/bin/tessera-worker
echo "service-images: $(destination worker)"
