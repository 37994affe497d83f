#!/usr/bin/env python3
"""Finds import cycles in the workspace's Rust code, between files and between top-level modules.

For each crate under crates/ (and examples/), every `.rs` file is a module (`a/mod.rs` and
`a.rs` are module `a`; `lib.rs`/`main.rs` the crate root). An edge A -> B is a path A names
that resolves to module B: `use crate::x::y`, `use super::y`, inline `crate::x::f(..)`,
`super::y::Z`. A parent naming its own child module (`mod child; pub use child::X;`) is not an
edge (a module's children are its parts); a child naming its parent's items is. Test code is
left out: `#[cfg(test)] mod ... { }` blocks, and files under a `tests/` module, which exist only
to test what imports them.

Exit status 1 and the cycles printed when there is one; 0 and a summary otherwise.
"""
import os
import re
import sys
from collections import defaultdict

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def crates():
    for base in ("crates", "examples"):
        d = os.path.join(ROOT, base)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            src = os.path.join(d, name, "src")
            if os.path.isdir(src):
                yield f"{base}/{name}", src


def module_of(src, path):
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return tuple(rel)


def strip_tests(text):
    """Removes `#[cfg(test)]` items (a `mod x { ... }` block or a `mod x;` line)."""
    out, i = [], 0
    pattern = re.compile(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*([;{])")
    while True:
        m = pattern.search(text, i)
        if not m:
            out.append(text[i:])
            break
        out.append(text[i : m.start()])
        if m.group(3) == ";":
            i = m.end()
            continue
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    return "".join(out)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


USE = re.compile(r"\buse\s+([^;]+);")
INLINE = re.compile(r"\b((?:crate|super|self)(?:::\w+)+)")


def expand(tree):
    """`a::{b, c::{d}}` -> [a::b, a::c::d]."""
    tree = re.sub(r"\s+", "", tree)
    m = re.match(r"^(.*?)\{(.*)\}$", tree)
    if not m:
        return [tree]
    prefix, inner = m.groups()
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        cur += ch
    parts.append(cur)
    return [p for part in parts if part for p in expand(prefix + part)]


def resolve(path, here, modules):
    segs = path.split("::")
    if segs[0] == "crate":
        base, rest = (), segs[1:]
    elif segs[0] in ("super", "self"):
        base = list(here)
        k = 0
        while k < len(segs) and segs[k] in ("super", "self"):
            if segs[k] == "super":
                base = base[:-1]
            k += 1
        base, rest = tuple(base), segs[k:]
    else:
        return None
    best = base if base in modules else None
    for n in range(1, len(rest) + 1):
        cand = base + tuple(rest[:n])
        if cand in modules:
            best = cand
    return best


def main():
    found = False
    files = mods = 0
    for name, src in crates():
        modules = {}
        for dirpath, _, names in os.walk(src):
            for n in names:
                if n.endswith(".rs"):
                    p = os.path.join(dirpath, n)
                    modules[module_of(src, p)] = p
        test_only = {m for m in modules if "tests" in m}
        edges = defaultdict(set)
        for mod, path in modules.items():
            if mod in test_only:
                continue
            text = strip_tests(strip_comments(open(path, encoding="utf-8").read()))
            paths = [p for t in USE.findall(text) for p in expand(t)]
            paths += INLINE.findall(text)
            for p in paths:
                target = resolve(p, mod, modules)
                if target is None or target == mod or target in test_only:
                    continue
                # A parent using its own descendants is composition, not a dependency.
                if target[: len(mod)] == mod:
                    continue
                edges[mod].add(target)
        files += len(modules)
        # Top-level module graph: a -> b when a file under a names a file under b.
        top = defaultdict(set)
        for a, bs in edges.items():
            for b in bs:
                if a[:1] != b[:1] and a[:1] and b[:1]:
                    top[a[:1]].add(b[:1])
        mods += len({m[:1] for m in modules if m})
        for label, graph in (("files", edges), ("modules", top)):
            for scc in sccs(graph):
                found = True
                shown = " <-> ".join("::".join(m) or "(root)" for m in sorted(scc))
                print(f"{name}: cycle between {label}: {shown}")
                for a in sorted(scc):
                    for b in sorted(graph[a] & set(scc)):
                        print(f"    {'::'.join(a) or '(root)'} -> {'::'.join(b) or '(root)'}")
    if found:
        return 1
    print(f"import-cycles: no cycle between {files} files or {mods} top-level modules")
    return 0


def sccs(graph):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    nodes = set(graph) | {b for bs in graph.values() for b in bs}

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
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
            if len(comp) > 1:
                out.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


if __name__ == "__main__":
    sys.exit(main())
