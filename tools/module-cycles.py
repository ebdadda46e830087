#!/usr/bin/env python3
"""Finds import circles between the modules (files) of each crate.

A file is a node. File A depends on file B when A names a path that resolves
into B's module: `use crate::b::X`, `crate::b::f()`, `super::b::X`, `self::b`
in a `use`, and the like. `pub use` lines are re-exports (a facade), not
dependencies, and `mod x;` declarations are not either. Code after a
`#[cfg(test)]` line is left out: test modules may reach anywhere.

Prints every strongly connected component of more than one file, per crate,
and exits 1 when there is one.

    tools/module-cycles.py [CRATE_DIR ...]     (default: every crates/*)
"""
import os
import re
import sys


def module_files(src):
    """Maps module paths (tuples) to files, for a crate's src directory."""
    mods = {}
    for dirpath, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            full = os.path.join(dirpath, f)
            rel = os.path.relpath(full, src)[:-3].split(os.sep)
            if rel[0] == "bin" or rel[0] == "examples":
                continue
            if rel in (["lib"], ["main"]):
                path = ()
            elif rel[-1] == "mod":
                path = tuple(rel[:-1])
            else:
                path = tuple(rel)
            # A binary's main.rs beside lib.rs is its own crate root.
            if rel == ["main"] and os.path.exists(os.path.join(src, "lib.rs")):
                continue
            mods[path] = full
    return mods


def expand_use(text):
    """Expands `a::{b, c::{d, e}}` into ['a::b', 'a::c::d', 'a::c::e']."""
    text = re.sub(r"\s+", "", text)

    def split_top(s):
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        if cur:
            parts.append(cur)
        return parts

    def go(s):
        i = s.find("{")
        if i < 0:
            return [s]
        prefix, inner = s[:i], s[i + 1 : s.rfind("}")]
        out = []
        for part in split_top(inner):
            for e in go(part):
                out.append(prefix + e if e != "self" else prefix.rstrip(":"))
        return out

    return go(text)


def resolve(path, here, mods):
    """The module a path names, as seen from module `here`; None if outside the crate."""
    segs = [s for s in path.split("::") if s]
    if not segs:
        return None
    if segs[0] == "crate":
        base, segs = (), segs[1:]
    elif segs[0] in ("super", "self"):
        base = here
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                base = base[:-1]
            segs = segs[1:]
    else:
        # A name relative to this module (a child module), else extern.
        if here + (segs[0],) in mods:
            base = here
        else:
            return None
    best = base
    cur = base
    for s in segs:
        cur = cur + (s,)
        if cur in mods:
            best = cur
        else:
            break
    return best


def deps(path, file, mods):
    text = open(file, encoding="utf-8").read()
    cut = re.search(r"^\s*#\[cfg\(test\)\]", text, re.M)
    if cut:
        text = text[: cut.start()]
    # Comments say nothing about dependencies.
    text = re.sub(r"//[^\n]*", "", text)
    out = set()
    for m in re.finditer(r"(^|\n)\s*(pub(\([^)]*\))?\s+)?use\s+([^;]+);", text):
        if m.group(2) and not m.group(3):
            continue  # `pub use`: a re-export
        if m.group(3):
            continue  # `pub(crate) use`: a re-export too
        for p in expand_use(m.group(4)):
            p = p.split(" as ")[0]
            t = resolve(p, path, mods)
            if t is not None:
                out.add(t)
    body = re.sub(r"(^|\n)\s*(pub(\([^)]*\))?\s+)?use\s+[^;]+;", "\n", text)
    for m in re.finditer(r"\b((?:crate|super|self)(?:::\w+)+)", body):
        t = resolve(m.group(1), path, mods)
        if t is not None:
            out.add(t)
    # A child module named by a bare path (`child::f()`), not after `::`.
    for m in re.finditer(r"(?<![\w:])([a-z_][a-z0-9_]*)((?:::\w+)+)", body):
        if path + (m.group(1),) in mods:
            t = resolve(m.group(1) + m.group(2), path, mods)
            if t is not None:
                out.add(t)
    out.discard(path)
    return out


def sccs(nodes, edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            strong(v)
    return out


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    crates = sys.argv[1:] or sorted(
        os.path.join(root, "crates", c) for c in os.listdir(os.path.join(root, "crates"))
    )
    bad = 0
    for crate in crates:
        src = os.path.join(crate, "src")
        if not os.path.isdir(src):
            continue
        mods = module_files(src)
        edges = {p: deps(p, f, mods) for p, f in mods.items()}
        name = os.path.basename(crate.rstrip("/"))
        n_edges = sum(len(e) for e in edges.values())
        circles = [c for c in sccs(list(mods), edges) if len(c) > 1]
        if circles:
            bad += 1
            for c in circles:
                files = sorted(os.path.relpath(mods[p], crate) for p in c)
                print(f"{name}: circle: {' <-> '.join(files)}")
        else:
            print(f"{name}: {len(mods)} modules, {n_edges} dependencies, no circle")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
