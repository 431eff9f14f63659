#!/usr/bin/env bash
# deploy/kubernetes: the manifests render with kubectl kustomize (offline; a client-side dry run
# would need a cluster's API discovery), and what they run holds: every container runs a binary
# of its image with flags that binary takes, the control plane unprivileged with its database
# URL from a Secret and a standby, the worker on GPU nodes with what its sandboxes need.
#
#   tests/integration/scripts/deploy_kubernetes_test.sh BIN_DIR
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
BIN="$(cd "${1:?usage: $(basename "$0") BIN_DIR}" && pwd)"
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v kubectl >/dev/null || fail "kubectl is not installed (deploy/install-deps.sh)"
rendered="$(mktemp /tmp/tessera-kubernetes.XXXXXX)"
trap 'rm -f "$rendered"' EXIT
kubectl kustomize "$ROOT/deploy/kubernetes" >"$rendered" || fail "kubectl kustomize failed"

/usr/bin/python3 - "$BIN" "$rendered" <<'PY' || exit 1
import subprocess, sys, yaml

bin_dir = sys.argv[1]
with open(sys.argv[2]) as f:
    docs = [d for d in yaml.safe_load_all(f) if d]
by_kind = {}
for d in docs:
    by_kind.setdefault(d["kind"], []).append(d)
def fail(message):
    sys.exit(f"FAIL: {message}")
for kind in ("Namespace", "Deployment", "Service", "DaemonSet", "PodDisruptionBudget"):
    if kind not in by_kind:
        fail(f"no {kind} in the manifests")
for d in docs:
    if d["kind"] != "Namespace" and d["metadata"].get("namespace") != "tessera":
        fail(f"{d['kind']} {d['metadata']['name']} is not in the namespace tessera")

images = {"control-plane": {"tessera-server", "tessera-runs", "tessera-scheduler", "tessera-cordon",
                            "tessera-logs", "tessera-health", "tessera-gateway", "mcli"},
          "worker": {"tessera-worker", "tessera-sandbox-init", "tessera-sandbox-run",
                     "tessera-canary"}}
helps = {}
checked = 0
for d in by_kind["Deployment"] + by_kind["DaemonSet"]:
    pod = d["spec"]["template"]["spec"]
    for c in pod["containers"]:
        image = c["image"].rsplit("/", 1)[-1].split(":")[0]
        binary = c["command"][0].rsplit("/", 1)[-1]
        if binary not in images.get(image, ()):
            fail(f"{d['metadata']['name']}: {binary} is not in the {image} image")
        if binary not in helps:
            helps[binary] = subprocess.run([f"{bin_dir}/{binary}", "--help"], capture_output=True,
                                           text=True).stdout
        for arg in c.get("args", []):
            flag = arg.split("=", 1)[0]
            if flag.startswith("--") and flag + " " not in helps[binary] + " " and \
               flag + "," not in helps[binary] and flag + "\n" not in helps[binary]:
                fail(f"{d['metadata']['name']}: {binary} has no flag {flag}")
            checked += 1

server = by_kind["Deployment"][0]
if server["spec"]["replicas"] < 2:
    fail("the control plane has no standby")
pod = server["spec"]["template"]["spec"]
c = pod["containers"][0]
if not pod["securityContext"].get("runAsNonRoot"):
    fail("the control plane may run as root")
sc = c["securityContext"]
if sc.get("allowPrivilegeEscalation") is not False or not sc.get("readOnlyRootFilesystem") or \
   sc.get("capabilities", {}).get("drop") != ["ALL"]:
    fail("the control plane's container is not locked down")
env = {e["name"]: e for e in c.get("env", [])}
if "secretKeyRef" not in env.get("TESSERA_DATABASE_URL", {}).get("valueFrom", {}):
    fail("the database URL does not come from a Secret")
if any("postgresql://" in a for a in c.get("args", [])):
    fail("a database URL is written in the manifest")

worker = by_kind["DaemonSet"][0]["spec"]["template"]["spec"]
w = worker["containers"][0]
if not w["securityContext"].get("privileged"):
    fail("the worker cannot make its sandboxes unprivileged")
if not worker.get("hostNetwork"):
    fail("the worker's ranks need the node's network")
mounts = {m["mountPath"] for m in w["volumeMounts"]}
for path in ("/var/lib/tessera-worker", "/etc/tessera", "/sys/fs/cgroup"):
    if path not in mounts:
        fail(f"the worker does not mount {path}")
print(f"deploy_kubernetes_test: ok ({len(docs)} resources, {checked} flags checked)")
PY
