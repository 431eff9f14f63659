#!/usr/bin/env python3
"""Include boundaries: fails when a source file includes across a forbidden boundary.

    check_includes.py [SOURCE_ROOT]        (default: the repository this script is in)

Reads every `#include "..."` line of the *.cc and *.h files under SOURCE_ROOT (skipping build*/,
hidden folders and third-party code) and checks it against RULES below. Prints each violation as
`file:line: includes X (rule: ...)` and exits 1 when there is one, or when a rule names a folder
or file that does not exist (so that a rename cannot silently switch a rule off).

An include is the project's when its first folder is a top-level folder of SOURCE_ROOT (base/,
services/, worker/ ...) or when it is a header generated from the API (tessera/v1/..., from
proto/tessera/v1/*.proto); every other include (absl/, grpcpp/, torch/ ...) is ignored. Only
direct includes are checked: what a header includes is checked by the rule for that header's
own folder. tests/, bench/ and fuzz/ have no rule: they may include anything.
"""

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Rule:
    files: str         # the rule is about the files under this folder (sub-folders included)
    only: list = None  # if set: they include nothing of the project but their folder and these
    never: list = field(default_factory=list)  # those files include none of these
    why: str = ""      # printed with each violation


# A name that ends in "/" is a folder (and everything under it); any other name is one file.
# tessera/v1/ holds the headers generated from proto/tessera/v1/*.proto (x.pb.h, x.grpc.pb.h).
SHARED = ["base/", "runspec/", "proto/policy/", "services/common/", "services/store/",
          "tessera/v1/"]
SERVICES = ["services/runs/", "services/logs/", "services/cordon/", "services/admin/",
            "services/notify/", "scheduler/", "healthcheck/"]
ONE_SERVICE = "a service includes no other service's files; services talk through their APIs"

RULES = [
    # files                may include only / never                          why
    Rule("base/",             only=[],
         why="the bottom layer: nothing of the project but base/"),
    Rule("runspec/",          only=["base/", "tessera/v1/run_spec.pb.h"],
         why="the run-spec parser needs base/ and the RunSpec message it fills, nothing else"),
    Rule("proto/policy/",     only=["base/", "tessera/v1/"],
         why="what the API means where services must agree; it includes none of them"),
    Rule("worker/progress/",  only=["base/"],
         why="the rank <-> worker progress-file contract needs only base/"),
    Rule("worker/engine/",    only=["base/", "worker/progress/"],
         why="the engine (tessera-train) needs nothing of the control plane or the daemon"),
    Rule("worker/",           never=["services/store/"],
         why="the worker reaches the database only through the services' APIs"),
    Rule("worker/logship/",   never=["worker/daemon/"],
         why="the daemon owns the log shipper, not the other way round"),
    Rule("cli/",              never=["services/store/"],
         why="mcli reaches the database only through the API"),
    Rule("services/runs/",    only=SHARED, why=ONE_SERVICE),
    Rule("services/logs/",    only=SHARED, why=ONE_SERVICE),
    Rule("services/cordon/",  only=SHARED, why=ONE_SERVICE),
    Rule("services/admin/",   only=SHARED, why=ONE_SERVICE),
    Rule("services/notify/",  only=SHARED, why=ONE_SERVICE),
    Rule("scheduler/",        only=SHARED, why=ONE_SERVICE + " (placement/ + service/ are one)"),
    Rule("healthcheck/",      only=SHARED, why=ONE_SERVICE),
    Rule("services/gateway/", only=["base/", "runspec/", "proto/policy/", "services/common/",
                                    "tessera/v1/"],
         why="the gateway reaches each service through its gRPC stub (upstream.h) and has no "
             "database: no service, no store (it reads run YAML bodies with runspec/, and "
             "packed log lines with proto/policy/)"),
    Rule("services/server/",  only=SHARED + SERVICES + ["services/gateway/"],
         why="the binaries' mains wire the services and the gateway, and nothing else"),
    Rule("services/common/",  only=["base/", "services/store/", "tessera/v1/"],
         why="code the services share includes none of them"),
    Rule("services/store/",   only=["base/", "proto/policy/", "tessera/v1/"],
         why="the store includes no service and nothing of services/common (built on it)"),
]

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
THIRD_PARTY = {"third_party", "third-party", "thirdparty", "external", "vendor", "_deps"}


def source_files(root):
    for folder, subfolders, files in os.walk(root):
        top = Path(folder) == root
        subfolders[:] = sorted(d for d in subfolders if not d.startswith(".")
                               and d not in THIRD_PARTY and not (top and d.startswith("build")))
        for name in sorted(files):
            if name.endswith((".cc", ".h")):
                yield Path(folder, name).relative_to(root).as_posix()


def project_include(include, includer, root, top_folders):
    """The include as a path from the source root, or None when it is not the project's."""
    if "/" not in include and (root / Path(includer).parent / include).is_file():
        return (Path(includer).parent / include).as_posix()  # "foo.h" next to the includer
    first = include.split("/", 1)[0]
    return include if first in top_folders or first == "tessera" else None


def under(path, name):
    return path.startswith(name) if name.endswith("/") else path == name


def source_of(name):
    """Where a name of the rule table lives in the source tree."""
    if name.startswith("tessera/"):  # tessera/v1/x.pb.h is generated from proto/tessera/v1/x.proto
        name = "proto/" + re.sub(r"(\.grpc)?\.pb\.h$", ".proto", name)
    return name


def main():
    default_root = Path(__file__).resolve().parents[3]
    root = Path(sys.argv[1] if len(sys.argv) > 1 else default_root).resolve()
    problems = 0

    for rule in RULES:
        for name in [rule.files] + (rule.only or []) + rule.never:
            if not (root / source_of(name)).exists():
                print(f"{Path(__file__).name}: the rule for {rule.files} names {name}, "
                      f"but there is no {source_of(name)} under {root}: update the rule")
                problems += 1

    files = list(source_files(root))
    if not files:
        print(f"{Path(__file__).name}: no *.cc or *.h files under {root}")
        return 1
    top_folders = {p.name for p in root.iterdir() if p.is_dir()}

    for path in files:
        rules = [r for r in RULES if under(path, r.files)]
        if not rules:
            continue
        lines = (root / path).read_text(encoding="utf-8", errors="replace").splitlines()
        for number, line in enumerate(lines, start=1):
            match = INCLUDE.match(line)
            target = match and project_include(match.group(1), path, root, top_folders)
            if not target:
                continue
            for rule in rules:
                allowed = rule.only is None or any(
                    under(target, name) for name in [rule.files] + rule.only)
                forbidden = any(under(target, name) for name in rule.never)
                if forbidden or not allowed:
                    print(f"{path}:{number}: includes {match.group(1)} "
                          f"(rule: {rule.files}: {rule.why})")
                    problems += 1
                    break  # one report per line: the first rule it breaks

    if problems:
        print(f"{problems} include boundary problem(s); the rules are at the top of {__file__}")
        return 1
    print(f"include boundaries: {len(files)} files, {len(RULES)} rules, no violation")
    return 0


if __name__ == "__main__":
    sys.exit(main())
