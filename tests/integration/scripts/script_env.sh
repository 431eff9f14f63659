# Sourced by the script tests: a private state folder and free loopback ports for a
# deploy/cluster.sh cluster, mcli's settings in it, and cleanup on exit (the cluster goes down,
# the folder is removed). Sets ROOT, BIN (from $1) and `state`; defines free_port and fail.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
BIN="${1:?usage: $(basename "$0") BIN_DIR}"
state="$(mktemp -d "/tmp/tessera-$(basename "$0" .sh).XXXXXX")"
# A port nothing listens on, and the `${1:-1}` - 1 after it too (the workers' metrics ports
# follow TESSERA_METRICS_PORT). Below the kernel's ephemeral range, so that no connection or
# port-0 listener of a test running beside this one takes it between this check and the bind.
ephemeral_low="$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)"
free_port() {
  local n="${1:-1}" low=10000
  local span=$((ephemeral_low - low - n))
  [ "$span" -gt 1000 ] || { low=20000; span=10000; }
  while true; do
    local p=$((low + (RANDOM * 32768 + RANDOM) % span)) i=0
    # Not in the cluster's block (drawn below), whose ports nothing may hold yet.
    if [ -n "${cluster_ports:-}" ] && [ "$((p + n))" -gt "$cluster_ports" ] &&
       [ "$p" -lt "$((cluster_ports + 13))" ]; then
      continue
    fi
    while [ "$i" -lt "$n" ] && ! (exec 3<>"/dev/tcp/127.0.0.1/$((p + i))") 2>/dev/null; do
      i=$((i + 1))
    done
    if [ "$i" -eq "$n" ]; then echo "$p"; return; fi
  done
}
export TESSERA_STATE_DIR="$state" TESSERA_BIN_DIR="$BIN" TESSERA_CONFIG="$state/mcli.yaml"
# One block of 13 free ports for the cluster, so that no two of its listeners draw the same one
# (a port drawn alone could fall among the workers' metrics ports, which nothing holds yet).
cluster_ports="$(free_port 13)"
export TESSERA_GRPC_PORT="$cluster_ports" TESSERA_HTTP_PORT="$((cluster_ports + 1))"
export TESSERA_REGISTRY_PORT="$((cluster_ports + 2))" TESSERA_REGISTRY_PUSH_PORT="$((cluster_ports + 3))"
export TESSERA_METRICS_PORT="$((cluster_ports + 4))"  # the workers' follow it
cleanup() { "$ROOT/deploy/cluster.sh" down >/dev/null 2>&1 || true; rm -rf "$state"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
