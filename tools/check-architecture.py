#!/usr/bin/env python3
r"""Keeps ARCHITECTURE.md's code map true at the level of files.

Under `## Code map`, each crate has a section headed `### \`crates/NAME\``
holding a table whose first column names files or directories of that crate
(in backticks, relative to the crate: `src/lib.rs`, `src/validate/`,
`tests/it/`, `benches/web.rs`) and whose second says what each owns.

A problem is reported (exit status 1) when:
- a crate of the workspace (a directory under `crates/` with a Cargo.toml)
  has no section, or a section names a crate that does not exist;
- a section has no table;
- a table names a path that does not exist;
- a Rust file under a crate's `src/` is covered by no row: a row covers its
  own file, or every file under it when it names a directory (ending in `/`).

    tools/check-architecture.py [--root DIR]
"""
import argparse
import os
import re
import sys

SECTION = re.compile(r"^### `crates/([^`/]+)`")
ROW = re.compile(r"^\|\s*`([^`]+)`")


def code_map(text):
    """The code map's crate sections: {crate: [row paths]} (None: no table)."""
    lines = text.splitlines()
    try:
        start = next(i for i, l in enumerate(lines) if l.strip() == "## Code map")
    except StopIteration:
        return None
    sections = {}
    current = None
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        m = SECTION.match(line)
        if m:
            current = m.group(1)
            sections[current] = None
            continue
        if line.startswith("### "):
            current = None
            continue
        if current is None:
            continue
        if line.startswith("|"):
            if sections[current] is None:
                sections[current] = []
            row = ROW.match(line)
            if row:
                sections[current].append(row.group(1))
    return sections


def crates(root):
    base = os.path.join(root, "crates")
    return sorted(
        d
        for d in os.listdir(base)
        if os.path.isfile(os.path.join(base, d, "Cargo.toml"))
    )


def rust_files(crate_dir):
    out = []
    src = os.path.join(crate_dir, "src")
    for dirpath, _, files in os.walk(src):
        for f in files:
            if f.endswith(".rs"):
                out.append(os.path.relpath(os.path.join(dirpath, f), crate_dir))
    return sorted(out)


def problems(root):
    with open(os.path.join(root, "ARCHITECTURE.md"), encoding="utf-8") as f:
        sections = code_map(f.read())
    if sections is None:
        return ["ARCHITECTURE.md: no `## Code map` section"]
    found = []
    names = crates(root)
    for name in names:
        if name not in sections:
            found.append(f"crates/{name}: no section in the code map")
    for name, rows in sorted(sections.items()):
        if name not in names:
            found.append(f"code map: section for crates/{name}, which does not exist")
            continue
        if rows is None:
            found.append(f"crates/{name}: its section has no file table")
            continue
        crate_dir = os.path.join(root, "crates", name)
        for path in rows:
            if not os.path.exists(os.path.join(crate_dir, path)):
                found.append(f"crates/{name}: the table names {path}, which does not exist")
        dirs = [p for p in rows if p.endswith("/")]
        for f in rust_files(crate_dir):
            if f in rows or any(f.startswith(d) for d in dirs):
                continue
            found.append(f"crates/{name}: {f} is in no row of its table")
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--root",
        default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    )
    args = parser.parse_args()
    found = problems(args.root)
    for p in found:
        print(f"check-architecture: {p}")
    if found:
        print(f"check-architecture: {len(found)} problem(s)", file=sys.stderr)
        return 1
    print(f"architecture: {len(crates(args.root))} crates, every source file in the code map")
    return 0


if __name__ == "__main__":
    sys.exit(main())
