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
own folder, and what a file reaches through the headers it includes is checked against the
file's own rules too (reported once per rule, with the chain of includes that gets there).
tests/, bench/ and fuzz/ have no rule: they may include anything.

The same files (every file a rule is about) also keep to one concurrency kit (docs/style.md):
none includes a standard header of KIT_HEADERS; each is reported with what to use instead.
"""

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Rule:
    files: object      # the rule is about the files under this folder (sub-folders included),
                       # or under each name of this list
    only: list = None  # if set: they include nothing of the project but their folder and these
    never: list = field(default_factory=list)  # those files include none of these
    why: str = ""      # printed with each violation


# A name that ends in "/" is a folder (and everything under it); any other name is one file.
# tessera/v1/ holds the headers generated from proto/tessera/v1/*.proto (x.pb.h, x.grpc.pb.h).
SHARED = ["base/", "runspec/", "proto/policy/", "transport/", "services/common/",
          "services/store/", "tessera/v1/"]
API_LAYER = ["base/", "runspec/", "proto/policy/", "tessera/v1/"]
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
    Rule("transport/",        only=["base/", "tessera/v1/"],
         why="the transport layer (TLS, metrics, endpoints, gRPC limits and status, the service "
             "host, periodic work) is below every service: nothing of the service kit or the "
             "store"),
    Rule("worker/",           only=API_LAYER + ["transport/"],
         why="the worker talks to the control plane through the API and the transport layer: "
             "nothing of a service, the service kit or the store"),
    Rule("worker/logship/",   never=["worker/daemon/"],
         why="the daemon owns the log shipper, not the other way round"),
    Rule("cli/",              only=API_LAYER + ["transport/"],
         why="mcli talks to the cluster through the API and the transport layer: nothing of a "
             "service, the service kit or the store"),
    Rule("services/runs/",    only=SHARED, why=ONE_SERVICE),
    Rule("services/logs/",    only=SHARED, why=ONE_SERVICE),
    Rule("services/cordon/",  only=SHARED, why=ONE_SERVICE),
    Rule("services/admin/",   only=SHARED, why=ONE_SERVICE),
    Rule("services/notify/",  only=SHARED, why=ONE_SERVICE),
    Rule("scheduler/",        only=SHARED, why=ONE_SERVICE + " (placement/ + service/ are one)"),
    Rule("healthcheck/",      only=SHARED, why=ONE_SERVICE),
    Rule("services/gateway/", only=["base/", "runspec/", "proto/policy/", "transport/",
                                    "services/common/", "tessera/v1/"],
         why="the gateway reaches each service through its gRPC stub (upstream.h) and has no "
             "database: no service, no store (it reads run YAML bodies with runspec/, and "
             "packed log lines with proto/policy/)"),
    Rule("services/common/",  only=["base/", "transport/", "services/store/", "tessera/v1/"],
         why="the service kit (auth, idempotency, leader election, rpc.h, system clients) "
             "includes no service"),
    Rule("services/store/",   only=["base/", "proto/policy/", "tessera/v1/"],
         why="the store includes no service, nothing of the service kit and no transport"),
    Rule("server/",           only=SHARED + SERVICES + ["services/gateway/"],
         why="the control plane's mains wire the services and the gateway, and nothing else"),
    # The composition root is above everything it wires; nothing includes it.
    Rule(["base/", "runspec/", "proto/", "transport/", "services/", "scheduler/",
          "healthcheck/", "worker/", "cli/", "sdk/"], never=["server/"],
         why="server/ is the composition root: it wires the folders, none of them includes it"),
]

# The standard library's locks and waits, which the project's code does not use: one kit for
# every process (absl's, which carry thread-safety annotations and wait on conditions).
KIT_HEADERS = {
    "mutex": "absl::Mutex (absl/synchronization/mutex.h), absl::call_once",
    "shared_mutex": "absl::Mutex (ReaderLock)",
    "condition_variable": "absl::Mutex::Await with an absl::Condition, or absl::CondVar",
    "future": "absl::Notification, or a std::thread that is joined",
}

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
SYSTEM_INCLUDE = re.compile(r'^\s*#\s*include\s*<([^>]+)>')
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
    if name.endswith("/"):
        return path.startswith(name)
    return path == name or (name.endswith(".h") and path == name[:-2] + ".cc")


def rule_files(rule):
    """The names a rule is about: one folder, or a list of folders and files."""
    return list(rule.files) if isinstance(rule.files, list) else [rule.files]


def rule_label(rule):
    return rule.files if isinstance(rule.files, str) else "every folder below server/"


def breaks(rule, target):
    allowed = rule.only is None or any(
        under(target, name) for name in rule_files(rule) + rule.only)
    return not allowed or any(under(target, name) for name in rule.never)


def project_includes(path, root, top_folders, cache):
    """(line number, include as written, path from the root) of each of the project's includes."""
    if path not in cache:
        found = []
        file = root / path
        if file.is_file():
            lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
            for number, line in enumerate(lines, start=1):
                match = INCLUDE.match(line)
                target = match and project_include(match.group(1), path, root, top_folders)
                if target:
                    found.append((number, match.group(1), target))
        cache[path] = found
    return cache[path]


def kit_breaches(path, root):
    """(line number, header, what to use) of each standard lock or wait header `path` includes."""
    lines = (root / path).read_text(encoding="utf-8", errors="replace").splitlines()
    for number, line in enumerate(lines, start=1):
        match = SYSTEM_INCLUDE.match(line)
        if match and match.group(1) in KIT_HEADERS:
            yield number, match.group(1), KIT_HEADERS[match.group(1)]


def reached(path, root, top_folders, cache):
    """Each header `path` reaches only through other headers, with the chain that gets there
    (shortest first): {header: [first include, ..., header]}."""
    direct = [target for _, _, target in project_includes(path, root, top_folders, cache)]
    chains = {}
    queue = [[target] for target in direct]
    seen = set(direct) | {path}
    while queue:
        chain = queue.pop(0)
        for _, _, target in project_includes(chain[-1], root, top_folders, cache):
            if target in seen:
                continue
            seen.add(target)
            chains[target] = chain + [target]
            queue.append(chain + [target])
    return chains


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
        for name in rule_files(rule) + (rule.only or []) + rule.never:
            if not (root / source_of(name)).exists():
                print(f"{Path(__file__).name}: the rule for {rule_label(rule)} names {name}, "
                      f"but there is no {source_of(name)} under {root}: update the rule")
                problems += 1

    files = list(source_files(root))
    if not files:
        print(f"{Path(__file__).name}: no *.cc or *.h files under {root}")
        return 1
    top_folders = {p.name for p in root.iterdir() if p.is_dir()}

    cache = {}
    for path in files:
        rules = [r for r in RULES if any(under(path, name) for name in rule_files(r))]
        if not rules:
            continue
        for number, header, instead in kit_breaches(path, root):
            print(f"{path}:{number}: includes <{header}> (the concurrency kit, docs/style.md: "
                  f"use {instead})")
            problems += 1
        for number, written, target in project_includes(path, root, top_folders, cache):
            for rule in rules:
                if breaks(rule, target):
                    print(f"{path}:{number}: includes {written} "
                          f"(rule: {rule_label(rule)}: {rule.why})")
                    problems += 1
                    break  # one report per line: the first rule it breaks
        # What the file reaches through headers: the first breach of each rule (a header's own
        # direct includes are reported above, for that header).
        chains = reached(path, root, top_folders, cache)
        for rule in rules:
            for target, chain in chains.items():
                if breaks(rule, target):
                    print(f"{path}: reaches {target} through {' -> '.join(chain[:-1])} "
                          f"(rule: {rule_label(rule)}: {rule.why})")
                    problems += 1
                    break

    if problems:
        print(f"{problems} include boundary problem(s); the rules are at the top of {__file__}")
        return 1
    print(f"include boundaries: {len(files)} files, {len(RULES)} rules, no violation")
    return 0


if __name__ == "__main__":
    sys.exit(main())
