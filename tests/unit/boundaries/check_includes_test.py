#!/usr/bin/env python3
"""The include-boundary check itself: it must fail on each kind of forbidden include, pass a
clean tree, and fail when a rule names a folder that is gone. Runs check_includes.py on small
trees made in a temporary folder."""

import subprocess
import sys
import tempfile
from pathlib import Path

import check_includes

CHECKER = Path(__file__).with_name("check_includes.py")


def make_tree(root, files):
    # Every folder and file the rules name, so that only the includes decide.
    for rule in check_includes.RULES:
        for name in check_includes.rule_files(rule) + (rule.only or []) + rule.never:
            path = root / check_includes.source_of(name)
            if name.endswith("/"):
                path.mkdir(parents=True, exist_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.touch()
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def check(files, remove=None):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_tree(root, files)
        if remove:
            (root / remove).rmdir()
        run = subprocess.run([sys.executable, str(CHECKER), str(root)], capture_output=True,
                             text=True)
        return run.returncode, run.stdout


FAILURES = 0


def expect(what, condition, output):
    global FAILURES
    if not condition:
        FAILURES += 1
        print(f"FAILED: {what}\n{output}")
    else:
        print(f"ok: {what}")


def main():
    code, out = check({
        "base/a.h": "#include <vector>\n#include \"absl/status/status.h\"\n",
        "worker/engine/t.cc": '#include "base/a.h"\n#include "worker/progress/p.h"\n',
        "services/runs/r.cc": '#include "services/store/s.h"\n#include "tessera/v1/runs.pb.h"\n',
        "cli/c.cc": '#include "transport/endpoints.h"\n',
        "worker/daemon/d.cc": '#include "transport/grpc_status.h"\n',
        "transport/grpc_status.h": '#include "base/a.h"\n',
    })
    expect("a clean tree passes", code == 0 and "no violation" in out, out)

    cases = {
        "the engine includes the control plane":
            ("worker/engine/t.cc", '#include "services/common/rpc.h"\n'),
        "the worker includes a store": ("worker/daemon/d.cc", '#include "services/store/s.h"\n'),
        "the CLI includes a store": ("cli/c.cc", '#include "services/store/postgres/pg.h"\n'),
        "a service includes another service":
            ("services/logs/l.cc", '#include "services/runs/run_manager.h"\n'),
        "the scheduler includes the health API":
            ("scheduler/service/s.cc", '#include "healthcheck/anomaly.h"\n'),
        "the store includes a service": ("services/store/s.cc", '#include "services/runs/r.h"\n'),
        "the log shipper includes the daemon":
            ("worker/logship/l.cc", '#include "worker/daemon/worker_daemon.h"\n'),
        "base includes anything of the project": ("base/b.h", '#include "services/common/x.h"\n'),
        "the worker includes a service":
            ("worker/daemon/d.cc", '#include "services/runs/run_manager.h"\n'),
        "the worker includes the service kit":
            ("worker/daemon/d.cc", '#include "services/common/rpc.h"\n'),
        "mcli includes a service": ("cli/c.cc", '#include "scheduler/service/s.h"\n'),
        "the transport layer includes the store":
            ("transport/grpc_status.h", '#include "services/store/store_error.h"\n'),
        "the transport layer's .cc includes the service kit":
            ("transport/tls/tls_flags.cc", '#include "services/common/auth/api_keys.h"\n'),
        "the service kit includes a service":
            ("services/common/c.cc", '#include "services/runs/run_manager.h"\n'),
        "a service includes the composition root":
            ("services/runs/r.cc", '#include "server/components.h"\n'),
        "the worker includes the composition root":
            ("worker/daemon/d.cc", '#include "server/serve.h"\n'),
    }
    for what, (name, text) in cases.items():
        code, out = check({name: "// a comment\n" + text})
        expect(what + " fails, naming the file and line",
               code == 1 and f"{name}:2: includes" in out, out)

    # Every include allowed on its own, but a header leads where the file may not go.
    code, out = check({
        "worker/logship/l.cc": '#include "worker/common/c.h"\n',
        "worker/common/c.h": '#include "worker/common/d.h"\n',
        "worker/common/d.h": '#include "worker/daemon/worker_daemon.h"\n',
    })
    expect("a file that reaches a forbidden header through others fails, naming the chain",
           code == 1 and "worker/logship/l.cc: reaches worker/daemon/worker_daemon.h through "
           "worker/common/c.h -> worker/common/d.h" in out, out)
    code, out = check({
        "worker/daemon/d.cc": '#include "transport/grpc_status.h"\n',
        "transport/grpc_status.h": '#include "services/store/store_error.h"\n',
    })
    expect("the worker reaching the store through the transport layer fails for both",
           code == 1 and "transport/grpc_status.h:1: includes" in out
           and "worker/daemon/d.cc: reaches services/store/store_error.h" in out, out)

    for header in ("mutex", "condition_variable", "future"):
        code, out = check({"worker/daemon/d.cc": f"// a comment\n#include <{header}>\n"})
        expect(f"production code including <{header}> fails, saying what to use instead",
               code == 1 and f"worker/daemon/d.cc:2: includes <{header}> (the concurrency kit"
               in out and "absl::" in out, out)
    code, out = check({"tests/unit/t.cc": "#include <mutex>\n#include <future>\n"})
    expect("tests may use the standard library's locks", code == 0, out)

    code, out = check({}, remove="worker/progress")
    expect("a rule naming a missing folder fails", code == 1 and "update the rule" in out, out)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
