#!/usr/bin/env bash
# deploy/systemd: every unit passes `systemd-analyze verify` (pointed at BIN_DIR's binaries),
# the control plane's units are hardened, the worker's keeps what its sandboxes need, and every
# flag the example environment files give is one its binary takes.
#
#   tests/integration/scripts/deploy_units_test.sh BIN_DIR
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
BIN="$(cd "${1:?usage: $(basename "$0") BIN_DIR}" && pwd)"
UNITS="$ROOT/deploy/systemd"
tmp="$(mktemp -d /tmp/tessera-units.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v systemd-analyze >/dev/null || fail "systemd-analyze is not installed"

# Copies of the units whose ExecStart is this build's binaries (verify checks they exist).
for unit in "$UNITS"/*.service; do
  sed "s|/usr/local/bin/|$BIN/|g" "$unit" >"$tmp/$(basename "$unit")"
done
checked=0
verify() {
  local output
  if ! output="$(cd "$tmp" && systemd-analyze verify --man=no "./$1" 2>&1)" || [ -n "$output" ]; then
    fail "systemd-analyze verify $1: ${output:-failed}"
  fi
  checked=$((checked + 1))
}
verify tessera-server.service
verify tessera-worker.service
for service in runs scheduler cordon logs health gateway; do
  [ -x "$BIN/tessera-$service" ] || fail "tessera@$service runs $BIN/tessera-$service, which is not built"
  verify "tessera@$service.service"
done

# The control plane needs no privilege: each of these is in its units.
for unit in tessera-server.service tessera@.service; do
  for directive in NoNewPrivileges=yes CapabilityBoundingSet= ProtectSystem=strict ProtectHome=yes \
      PrivateDevices=yes RestrictNamespaces=yes SystemCallFilter=@system-service User=tessera \
      MemoryDenyWriteExecute=yes; do
    grep -qx "$directive" "$UNITS/$unit" || fail "$unit lacks $directive"
  done
done
# The worker makes namespaces, mounts, cgroups and seccomp filters, reaches the GPUs' devices and
# changes to each user's uid: none of what would stop that, and its cgroup delegated to it.
for directive in RestrictNamespaces PrivateDevices ProtectControlGroups SystemCallFilter \
    NoNewPrivileges DevicePolicy DeviceAllow ProtectClock PrivateUsers CapabilityBoundingSet \
    RestrictSUIDSGID User DynamicUser; do
  if grep -q "^$directive=" "$UNITS/tessera-worker.service"; then
    fail "tessera-worker.service sets $directive, which would break its sandboxes"
  fi
done
grep -qx "Delegate=yes" "$UNITS/tessera-worker.service" || fail "the worker's cgroup is not delegated"

# Every flag of the example environment files is one its binary takes.
for env in "$UNITS"/env/*.env; do
  binary="$(basename "$env" .env)"
  help="$("$BIN/$binary" --help 2>&1)"
  flags="$(sed -n 's/^TESSERA_FLAGS="\(.*\)"$/\1/p' "$env")"
  [ -n "$flags" ] || fail "$env has no TESSERA_FLAGS line"
  for flag in $(tr ' ' '\n' <<<"$flags" | grep '^--'); do
    grep -q -- "$flag\b" <<<"$help" || fail "$env: $binary has no flag $flag"
    checked=$((checked + 1))
  done
done
echo "deploy_units_test: ok ($checked checks)"
