#!/usr/bin/env python3
"""Finds import circles between the source files of each crate (design.md: "No import circles
inside a crate either: a name two files need lives in the lower one").

A file's module path comes from where it lies (`src/a/b.rs` and `src/a/b/mod.rs` are `a::b`;
`lib.rs`/`main.rs` are the crate root). Every `crate::...` and `super::...` path a file names (in
`use` items or inline) is an edge to the deepest module file that path reaches. Not counted as
edges: a file naming the crate root (its re-exports are the crate's surface) or one of its own
ancestors (a child module using its parent's items is how Rust modules nest: the parent declares
the child). Files inside `#[cfg(test)]`-only test modules are read like any other.

Prints each circle found (the files, in order) and exits 1; prints nothing and exits 0 when there
is none. Usage: scripts/check-circles.py [crates/<name> ...] (default: every crate).
"""

import os
import re
import sys

PATH = re.compile(r"\b(crate|super(?:::super)*)::((?:[A-Za-z_][A-Za-z0-9_]*::)*)(\{[^;]*?\}|[A-Za-z_][A-Za-z0-9_]*)", re.S)
COMMENT = re.compile(r"//[^\n]*")


def module_of(src, path):
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] in ("lib", "main") and len(rel) == 1:
        return ()
    if rel[-1] == "mod":
        rel = rel[:-1]
    return tuple(rel)


def expand(prefix, group):
    """`a::{b, c::d}` -> [a::b, a::c::d] (one level of braces is enough to find the modules)."""
    if not group.startswith("{"):
        return [prefix + [group]]
    out = []
    inner = group[1:-1]
    depth, cur = 0, ""
    parts = []
    for ch in inner:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    for p in parts:
        p = p.strip()
        if not p:
            continue
        head = p.split("{")[0]
        names = [n for n in head.split("::") if n and n not in ("self",)]
        names = [n.split(" as ")[0].strip() for n in names]
        out.append(prefix + names)
    return out


def crate_graph(crate):
    src = os.path.join(crate, "src")
    files = {}
    for root, _, names in os.walk(src):
        for n in names:
            if n.endswith(".rs"):
                p = os.path.join(root, n)
                files[module_of(src, p)] = p
    edges = {m: set() for m in files}
    for mod, path in files.items():
        text = COMMENT.sub("", open(path, encoding="utf-8").read())
        for m in PATH.finditer(text):
            base, middle, last = m.group(1), m.group(2), m.group(3)
            if base == "crate":
                start = []
            else:
                ups = base.count("super")
                # `super` of a file `a/b.rs` (module a::b) is `a`; of `a/b/mod.rs` also `a`.
                start = list(mod[: len(mod) - ups])
            prefix = start + [s for s in middle.split("::") if s]
            for full in expand(prefix, last.strip()):
                # The deepest module file this path reaches.
                target = None
                for i in range(len(full), 0, -1):
                    if tuple(full[:i]) in files:
                        target = tuple(full[:i])
                        break
                if target is None or target == () or target == mod:
                    continue
                if mod[: len(target)] == target:  # an ancestor of this file
                    continue
                edges[mod].add(target)
    return files, edges


def cycles(edges):
    """Strongly connected components of more than one file (Tarjan, iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for v0 in edges:
        if v0 in index:
            continue
        work = [(v0, iter(sorted(edges[v0])))]
        index[v0] = low[v0] = counter[0]
        counter[0] += 1
        stack.append(v0)
        on.add(v0)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(comp)
    return out


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    crates = sys.argv[1:] or sorted(
        os.path.join(root, "crates", c) for c in os.listdir(os.path.join(root, "crates"))
    )
    found = 0
    for crate in crates:
        if not os.path.isdir(os.path.join(crate, "src")):
            continue
        files, edges = crate_graph(crate)
        for comp in cycles(edges):
            found += 1
            names = sorted(os.path.relpath(files[m], root) for m in comp)
            print(f"check-circles: {os.path.basename(crate)}: import circle between {', '.join(names)}")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
