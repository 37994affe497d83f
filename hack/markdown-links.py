#!/usr/bin/env python3
"""Checks the links of every Markdown file the repository tracks (`git ls-files '*.md'`).

A link is `[text](target)` or `![alt](target)` (with an optional "title"), a reference
definition `[label]: target`, or an HTML `href="..."`/`src="..."`. Links inside fenced code
blocks and inline code spans are text, not links. For each link:

- a URL with a scheme (`https:`, `mailto:`, ...) is not checked: the lint reads no network;
- a relative path must exist, and must stay inside the repository (a user of the repository has
  nothing outside it); an absolute path (`/docs/x.md`) is from the repository's root, as GitHub
  reads it;
- an `#anchor` (alone: in the same file; after a path: in that file, when it is Markdown) must
  be a heading's slug there, by GitHub's rules (lowercased; every character that is not a
  letter, a digit, `_`, `-` or a space dropped; spaces made `-`; the second heading of the same
  slug gets `-1`, the third `-2`), or an HTML `id`/`name` in that file. A heading's slug is of
  its text as rendered: code spans without their backticks, links as their text, emphasis
  markers and inline HTML tags dropped.

hack/markdown_links_test.py feeds it the cases it must catch (a broken path, a broken anchor)
and those it must not report.

Usage: markdown-links.py [ROOT]. Exit status 1 with one `file:line: problem` line per broken
link; 0 and a summary otherwise.
"""
import os
import re
import subprocess
import sys
import unicodedata
from urllib.parse import unquote

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
# `[text](target)` and `![alt](target)`: the target up to whitespace or `)`, or in `<...>`;
# one level of balanced parentheses inside it, as CommonMark allows.
INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>\n]*>|(?:[^\s()]|\([^\s()]*\))*)(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
REFDEF = re.compile(r"^ {0,3}\[([^\]]+)\]:\s*(<[^>\n]*>|\S+)")
HTML_LINK = re.compile(r"""<(?:a|img|link|source)\b[^>]*?\b(?:href|src)\s*=\s*["']([^"']*)["']""", re.I)
HTML_ID = re.compile(r"""<[a-z][^>]*?\b(?:id|name)\s*=\s*["']([^"']+)["']""", re.I)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def tracked_markdown(root):
    """Every Markdown file git tracks under root, as paths relative to it."""
    out = subprocess.run(
        ["git", "-C", root, "ls-files", "-z", "--", "*.md", "*.markdown"],
        check=True,
        capture_output=True,
    ).stdout.decode()
    return sorted(p for p in out.split("\0") if p)


def strip_code_spans(line):
    """The line with each inline code span blanked (same length, so columns hold)."""
    out = []
    i = 0
    while i < len(line):
        if line[i] == "`":
            run = len(line[i:]) - len(line[i:].lstrip("`"))
            ticks = line[i:i + run]
            end = line.find(ticks, i + run)
            # The closing run must be exactly as long.
            while end != -1 and line[end + run:end + run + 1] == "`":
                end = line.find(ticks, end + run + 1)
            if end == -1:
                out.append(ticks)
                i += run
                continue
            out.append(" " * (end + run - i))
            i = end + run
        else:
            out.append(line[i])
            i += 1
    return "".join(out)


def prose_lines(text):
    """(line number, line) for each line outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence is None:
            if m:
                fence = m.group(1)
                continue
            yield number, line
        elif m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip()[len(m.group(1)):].strip():
            fence = None


def rendered_text(heading):
    """A heading's text as GitHub renders it, before the slug: code spans without their
    backticks, images and links as their text, inline HTML tags and emphasis markers dropped."""
    text = re.sub(r"(`+)(.*?)\1", lambda m: m.group(2).strip(), heading)
    text = re.sub(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\[[^\]]*\]", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    text = re.sub(r"(\*{1,3}|_{1,3})(\S(?:.*?\S)?)\1", r"\2", text)
    return text


def slug(heading):
    """GitHub's slug of a heading (github-slugger): lowercased, each character that is not a
    letter, mark, digit, connector (`_`), `-` or a space dropped, then spaces made `-`."""
    kept = []
    for ch in rendered_text(heading).strip().lower():
        category = unicodedata.category(ch)
        if ch in " -" or category[0] in "LMN" or category == "Pc":
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


def anchors(text):
    """Every anchor a Markdown text has: its headings' slugs (duplicates numbered as GitHub
    numbers them) and the ids and names of its HTML elements."""
    found = set()
    seen = {}
    lines = list(prose_lines(text))
    previous = None
    for number, line in lines:
        heading = None
        m = ATX.match(line)
        if m:
            heading = m.group(2) or ""
        elif (
            previous is not None
            and previous[0] == number - 1
            and previous[1].strip()
            and SETEXT.match(line)
            and not ATX.match(previous[1])
        ):
            # A setext heading: the line before, underlined. (A `---` under a paragraph line;
            # a table's `|---|` row has a `|`, which SETEXT does not match.)
            heading = previous[1].strip()
        if heading is not None:
            base = slug(heading)
            count = seen.get(base, 0)
            found.add(base if count == 0 else f"{base}-{count}")
            seen[base] = count + 1
        for m in HTML_ID.finditer(line):
            found.add(m.group(1))
        previous = (number, line)
    return found


def links(text):
    """(line number, target) of every link of a Markdown text, outside code."""
    for number, line in prose_lines(text):
        prose = strip_code_spans(line)
        m = REFDEF.match(prose)
        if m and not m.group(1).startswith("^"):
            yield number, m.group(2)
            continue
        for m in INLINE.finditer(prose):
            yield number, m.group(1)
        for m in HTML_LINK.finditer(prose):
            yield number, m.group(1)


def check(root):
    """Every broken link of the repository at root, as `file:line: problem`."""
    root = os.path.realpath(root)
    problems = []
    cache = {}

    def anchors_of(path):
        if path not in cache:
            with open(path, encoding="utf-8") as f:
                cache[path] = anchors(f.read())
        return cache[path]

    files = tracked_markdown(root)
    for rel in files:
        source = os.path.join(root, rel)
        with open(source, encoding="utf-8") as f:
            text = f.read()
        for number, target in links(text):
            where = f"{rel}:{number}"
            target = target.strip()
            if target.startswith("<") and target.endswith(">"):
                target = target[1:-1]
            if not target or SCHEME.match(target):
                continue
            path, _, anchor = target.partition("#")
            path = unquote(path.split("?", 1)[0])
            if path:
                if path.startswith("/"):
                    resolved = os.path.join(root, path.lstrip("/"))
                else:
                    resolved = os.path.join(os.path.dirname(source), path)
                resolved = os.path.realpath(resolved)
                if resolved != root and not resolved.startswith(root + os.sep):
                    problems.append(f"{where}: {target}: outside the repository")
                    continue
                if not os.path.exists(resolved):
                    problems.append(f"{where}: {target}: no such file")
                    continue
            else:
                resolved = source
            if not anchor:
                continue
            if not resolved.endswith((".md", ".markdown")) or os.path.isdir(resolved):
                continue
            if unquote(anchor) not in anchors_of(resolved):
                name = os.path.relpath(resolved, root)
                problems.append(f"{where}: {target}: no heading or id #{anchor} in {name}")
    return files, problems


def main(argv):
    root = argv[1] if len(argv) > 1 else ROOT
    files, problems = check(root)
    for problem in problems:
        print(problem)
    if problems:
        print(f"markdown-links: {len(problems)} broken link(s) in {len(files)} Markdown files")
        return 1
    print(f"markdown-links: every link of {len(files)} Markdown files resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
