#!/usr/bin/env python3
"""Finds import cycles in the workspace's Rust code: between files, between top-level modules and
between crates; and checks the crates' order that the root Cargo.toml's tour claims.

For the root package (src/) and each crate under crates/ (and examples/), every `.rs` file is a module (`a/mod.rs` and
`a.rs` are module `a`; `lib.rs`/`main.rs` the crate root). An edge A -> B is a path A names
that resolves to module B: `use crate::x::y`, `use super::y`, inline `crate::x::f(..)`,
`super::y::Z`. A parent naming its own child module (`mod child; pub use child::X;`) is not an
edge (a module's children are its parts); a child naming its parent's items is. Test code is
left out: `#[cfg(test)] mod ... { }` blocks, and files under a `tests/` module, which exist only
to test what imports them.

Between crates, an edge A -> B is a `[dependencies]`, `[build-dependencies]` or
`[dev-dependencies]` entry of A naming workspace crate B (Cargo refuses the first two kinds of
cycle; a dev-dependency cycle builds, and is still a circle a reader has to untangle).

The crates' order: the root Cargo.toml's tour (its comment lines `#   crates/NAME  what`)
lists every crate under crates/ and examples/, and each crate imports (an edge as above) only
crates listed above it; the root package may import any. README.md's table of the crates
(rows starting `| `crates/NAME` |`) lists the same crates in the same order. Checked where the
root has a Cargo.toml (and the table where it has a README.md).

Comments, strings and char literals are blanked by a small lexer before paths are read (see
`strip_comments`): a glob such as "/data/**" in a string is not a block comment.
hack/import_cycles_test.py feeds it the cases it must catch.

Usage: import-cycles.py [ROOT]. Exit status 1 and the cycles (or the order's breaks) printed
when there is one; 0 and a summary otherwise.
"""
import os
import re
import sys
import tomllib
from collections import defaultdict

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def crate_dirs(root):
    """The root package (when the root Cargo.toml has one) and every crate under crates/ and
    examples/, as (label, folder)."""
    if os.path.isdir(os.path.join(root, "src")):
        yield ".", root
    for base in ("crates", "examples"):
        d = os.path.join(root, base)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if os.path.isfile(os.path.join(d, name, "Cargo.toml")):
                yield f"{base}/{name}", os.path.join(d, name)


def crates(root):
    for label, d in crate_dirs(root):
        src = os.path.join(d, "src")
        if os.path.isdir(src):
            yield label, src


def crate_graph(root):
    """Package name -> the workspace packages it depends on, of every dependency kind; and how
    many packages there are."""
    graph, folders = crate_graph_and_folders(root)
    return graph, len(folders)


def crate_graph_and_folders(root):
    """Package name -> the workspace packages it depends on, of every dependency kind; and
    package name -> its folder's label (`crates/oci`, `.` for the root package)."""
    manifests, folders = {}, {}
    for label, d in crate_dirs(root):
        path = os.path.join(d, "Cargo.toml")
        with open(path, "rb") as f:
            data = tomllib.load(f)
        if "package" in data:
            manifests[data["package"]["name"]] = data
            folders[data["package"]["name"]] = label
    workspace_aliases = {}
    top = os.path.join(root, "Cargo.toml")
    if os.path.isfile(top):
        with open(top, "rb") as f:
            deps = tomllib.load(f).get("workspace", {}).get("dependencies", {})
        for alias, spec in deps.items():
            if isinstance(spec, dict):
                workspace_aliases[alias] = spec.get("package", alias)
    graph = defaultdict(set)
    for name, data in manifests.items():
        for kind in ("dependencies", "build-dependencies", "dev-dependencies"):
            for alias, spec in data.get(kind, {}).items():
                target = alias
                if isinstance(spec, dict):
                    target = spec.get("package", workspace_aliases.get(alias, alias))
                if target in manifests and target != name:
                    graph[name].add(target)
    return graph, folders


TOUR_LINE = re.compile(r"^#\s+((?:crates|examples)/[\w.-]+)(?:\s|$)")
TABLE_ROW = re.compile(r"^\|\s*`((?:crates|examples)/[\w.-]+)`\s*\|")


def listed(path, pattern):
    """The crate folders the lines of `path` name, in order (None when there is no file)."""
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return [m.group(1) for m in map(pattern.match, f) if m]


def order_problems(root):
    """Where the tour's order (the root Cargo.toml) or README's table of the crates does not
    hold, as printable lines."""
    tour = listed(os.path.join(root, "Cargo.toml"), TOUR_LINE)
    if tour is None:
        return []
    graph, folders = crate_graph_and_folders(root)
    crates_here = sorted(label for label in folders.values() if label != ".")
    lines = []
    for label in crates_here:
        if tour.count(label) != 1:
            lines.append(f"Cargo.toml tour: lists {label} {tour.count(label)} times, not once")
    for label in sorted(set(tour) - set(crates_here)):
        lines.append(f"Cargo.toml tour: lists {label}, which is not a crate here")
    table = listed(os.path.join(root, "README.md"), TABLE_ROW)
    if table is not None and table != tour:
        lines.append(
            "README.md: its table of the crates is not the Cargo.toml tour: "
            f"{', '.join(table)} against {', '.join(tour)}"
        )
    place = {label: i for i, label in enumerate(tour)}
    for name, label in sorted(folders.items(), key=lambda item: item[1]):
        if label not in place:
            continue
        for target in sorted(graph.get(name, ()), key=lambda t: folders[t]):
            below = folders[target]
            if place.get(below, len(tour)) > place[label]:
                lines.append(
                    f"Cargo.toml tour: {label} imports {below}, which is not above it"
                )
    return lines


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
    """Blanks out comments, string literals and char literals, keeping the code's line breaks.

    A real lexer, not a regex: `"/data/**"` is a string, not the start of a block comment; block
    comments nest (`/* a /* b */ c */`); raw strings (`r#"..."#`) end only at their own number of
    hashes; a byte or char literal (`b'"'`, `'{'`) is not the start of a string; a lifetime
    (`'a`, `'static`) is not the start of a char literal.
    """
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        nxt = text[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if c == "/" and nxt == "*":
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(" " + "\n" * text.count("\n", i, j))
            i = j
            continue
        raw = re.match(r'(?:b|c)?r(#*)"', text[i:]) if c in "bcr" and not _ident_before(text, i) else None
        if raw:
            close = '"' + raw.group(1)
            j = text.find(close, i + raw.end())
            j = n if j < 0 else j + len(close)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
            continue
        if c == '"' or (c in "bc" and nxt == '"' and not _ident_before(text, i)):
            j = i + (1 if c == '"' else 2)
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
            continue
        if c == "'" or (c == "b" and nxt == "'" and not _ident_before(text, i)):
            start = i + (1 if c == "'" else 2)
            m = re.match(r"(\\(x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]{1,6}\}|.)|[^\\\n])'", text[start:])
            if m:
                out.append("' '")
                i = start + m.end()
                continue
        out.append(c)
        i += 1
    return "".join(out)


def _ident_before(text, i):
    """Whether text[i] continues an identifier (the `r` of `for"` is not a raw string's)."""
    return i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")


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


def find_cycles(root):
    """Every cycle under root, as printable lines, and what was read (files, modules, crates)."""
    lines = []
    files = mods = 0
    for name, src in crates(root):
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
            with open(path, encoding="utf-8") as f:
                text = strip_tests(strip_comments(f.read()))
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
                shown = " <-> ".join("::".join(m) or "(root)" for m in sorted(scc))
                lines.append(f"{name}: cycle between {label}: {shown}")
                for a in sorted(scc):
                    for b in sorted(graph[a] & set(scc)):
                        lines.append(f"    {'::'.join(a) or '(root)'} -> {'::'.join(b) or '(root)'}")
    graph, crate_count = crate_graph(root)
    for scc in sccs(graph):
        lines.append(f"workspace: cycle between crates: {' <-> '.join(sorted(scc))}")
        for a in sorted(scc):
            for b in sorted(graph[a] & set(scc)):
                lines.append(f"    {a} -> {b}")
    return lines, (files, mods, crate_count)


def main(argv):
    root = argv[1] if len(argv) > 1 else ROOT
    lines, (files, mods, crate_count) = find_cycles(root)
    lines += order_problems(root)
    if lines:
        print("\n".join(lines))
        return 1
    print(
        f"import-cycles: no cycle between {files} files, {mods} top-level modules or "
        f"{crate_count} crates, and each crate imports only those above it in the tour"
    )
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
    sys.exit(main(sys.argv))
