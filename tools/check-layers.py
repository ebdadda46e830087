#!/usr/bin/env python3
"""Keeps bosun's crate layers: which crates may not reach which packages.

Reads `cargo metadata` and follows each workspace crate's normal dependencies
transitively, through workspace and external packages alike. Dev- and
build-dependencies do not count: a test may start a fake cluster, a build
script may use anything. A dependency for some target only (`[target.'cfg(..)'
.dependencies]`) is still a normal one. The resolve in `cargo metadata` has the
features of the whole workspace unified, so a crate's closure here can be
larger than when it is built alone: a violation may come from a feature another
crate turns on, and the path printed shows through which package.

A rule is broken when a crate reaches a forbidden package by any path; each
violation is printed with the rule's reason and the path of edges that reaches
the package, and the exit status is 1. A rule naming a crate that is nowhere
in the metadata is an error (exit 2), so that renaming a crate cannot turn a
rule off without a word; `--allow-missing` skips such names instead (while the
workspace is being split into the crates below, several do not exist yet) and
lists them in the summary line.

    tools/check-layers.py [--allow-missing] [--metadata FILE]
"""
import argparse
import json
import os
import subprocess
import sys
from collections import deque

# Every crate of the workspace that is not a subject of its own rule.
EVERY_CRATE = "*"

# (crates, packages none of them may reach, why).
RULES = [
    (
        ["bosun-tekton", "bosun-injob", "bosun-job"],
        ["kube", "axum", "bosun-daemon", "bosun-cluster", "tokio"],
        "Tekton's model, Prow's job vocabulary and the programs that run inside a "
        "job are plain synchronous code: no cluster client, no HTTP server, no "
        "async runtime, no daemon",
    ),
    (
        ["bosun-git"],
        ["tokio", "kube", "axum"],
        "git operations run synchronously, inside jobs as well as in the daemon",
    ),
    (
        ["bosun-dispatcher"],
        ["bosun-daemon"],
        "the dispatcher service runs without the daemon",
    ),
    (
        ["bosun-cluster"],
        ["bosun-injob", "axum", "bosun-daemon"],
        "executors start jobs; they do not contain what runs inside one, nor serve HTTP",
    ),
    (
        ["bosun-config", "bosun-schedule", "bosun-dispatch"],
        ["tokio", "kube", "axum", "rusqlite"],
        "configuration, schedules and dispatch decisions are pure: no runtime, "
        "no cluster, no HTTP, no database",
    ),
    (
        ["bosun-forge"],
        ["bosun-daemon", "bosun-cluster", "kube", "axum"],
        "the forge's events, repositories, trigger rules and reports are "
        "decided as plain data: the daemon mounts them, no cluster or HTTP "
        "server in them",
    ),
    (
        ["bosun-store"],
        ["tokio", "kube", "axum"],
        "the store is synchronous SQLite, with no cluster or HTTP in it",
    ),
    (
        [EVERY_CRATE],
        ["bosun-kubetest"],
        "bosun-kubetest is test-only: published crates take it as a dev-dependency at most",
    ),
]


def load_metadata(path):
    if path is not None:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cmd = [
        "cargo", "metadata", "--format-version", "1", "--locked",
        "--manifest-path", os.path.join(root, "Cargo.toml"),
    ]
    try:
        out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"check-layers: {' '.join(cmd)} failed: {e}", file=sys.stderr)
        sys.exit(2)
    return json.loads(out.stdout)


def normal_graph(meta):
    """Package id -> ids of its normal dependencies (any target)."""
    graph = {}
    for node in meta["resolve"]["nodes"]:
        out = []
        for dep in node.get("deps", []):
            kinds = dep.get("dep_kinds")
            if kinds is None:
                sys.exit("check-layers: cargo metadata without dep_kinds (cargo too old)")
            if any(k.get("kind") is None for k in kinds):
                out.append(dep["pkg"])
        graph[node["id"]] = out
    return graph


def reach(graph, start):
    """Breadth-first from `start`: each reached id -> the id it was first reached from."""
    parent = {start: None}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        for w in graph.get(v, ()):
            if w not in parent:
                parent[w] = v
                queue.append(w)
    return parent


def path_to(parent, end):
    path = []
    while end is not None:
        path.append(end)
        end = parent[end]
    return path[::-1]


def check(meta, rules):
    """Returns (violations, unknown names, number of crates checked).

    A violation is (subject, forbidden, why, [package names along the path]).
    """
    name_of = {p["id"]: p["name"] for p in meta["packages"]}
    members = {name_of[i]: i for i in meta["workspace_members"]}
    known = set(name_of.values())
    graph = normal_graph(meta)

    unknown = []
    violations = []
    checked = set()
    for subjects, forbidden, why in rules:
        subjects_here = []
        for s in subjects:
            if s == EVERY_CRATE:
                subjects_here += sorted(members)
            elif s in members:
                subjects_here.append(s)
            elif s not in unknown:
                unknown.append(s)
        for f in forbidden:
            if f not in known and f not in unknown:
                unknown.append(f)
        for s in subjects_here:
            checked.add(s)
            parent = reach(graph, members[s])
            for f in forbidden:
                if f == s:
                    continue
                hits = [i for i in parent if name_of[i] == f]
                if not hits:
                    continue
                # The shortest path to any version of the forbidden package.
                best = min((path_to(parent, i) for i in hits), key=len)
                violations.append((s, f, why, [name_of[i] for i in best]))
    return violations, unknown, len(checked)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--metadata", metavar="FILE", help="read `cargo metadata` JSON from FILE")
    ap.add_argument(
        "--allow-missing",
        action="store_true",
        help="skip rule names that are not crates of this workspace (yet)",
    )
    args = ap.parse_args(argv)

    meta = load_metadata(args.metadata)
    violations, unknown, n_checked = check(meta, RULES)

    for s, f, why, path in violations:
        print(f"violation: {s} must not reach {f} ({why})")
        print(f"  {' -> '.join(path)}")
    if unknown and not args.allow_missing:
        for u in unknown:
            print(f"check-layers: rule names unknown crate {u}", file=sys.stderr)
        return 2
    if violations:
        print(f"layers: {len(violations)} violation(s)")
        return 1
    line = f"layers: {len(RULES)} rules over {n_checked} crates, no violation"
    if unknown:
        line += f" (not in the workspace yet, skipped: {', '.join(unknown)})"
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
