#!/usr/bin/env python3
"""Tests of hack/markdown-links.py: each feeds it a small git repository with the case it must
catch (a path that is not there, an anchor no heading has, a link out of the repository) or
must not report (GitHub's slugs, links in code), so the lint `make lint` relies on cannot pass
by reading less.

Run: python3 hack/markdown_links_test.py (make test and make lint run it).
"""
import contextlib
import importlib.util
import io
import os
import shutil
import subprocess
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("markdown_links", os.path.join(HERE, "markdown-links.py"))
lint = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lint)

_roots = []


def tearDownModule():
    for root in _roots:
        shutil.rmtree(root, ignore_errors=True)


def repository(files):
    """A temporary git repository tracking `files` (path -> text); returns its root."""
    root = tempfile.mkdtemp(prefix="markdown-links-test-")
    _roots.append(root)
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(textwrap.dedent(text))
    subprocess.run(["git", "init", "-q", root], check=True)
    subprocess.run(["git", "-C", root, "add", "-A"], check=True)
    return root


def problems(files):
    return lint.check(repository(files))[1]


class Broken(unittest.TestCase):
    def test_a_path_that_is_not_there(self):
        found = problems({"README.md": "See [the guide](docs/guide.md).\n"})
        self.assertEqual(found, ["README.md:1: docs/guide.md: no such file"])

    def test_an_anchor_no_heading_has(self):
        found = problems({
            "README.md": "See [setup](docs/guide.md#set-up) and [here](#nowhere).\n",
            "docs/guide.md": "# Guide\n\n## Setup\n",
        })
        self.assertEqual(found, [
            "README.md:1: docs/guide.md#set-up: no heading or id #set-up in docs/guide.md",
            "README.md:1: #nowhere: no heading or id #nowhere in README.md",
        ])

    def test_a_link_out_of_the_repository(self):
        found = problems({"README.md": "Read [Loop](../shared/reference/loop-plugins.txt).\n"})
        self.assertEqual(found, ["README.md:1: ../shared/reference/loop-plugins.txt: outside the repository"])

    def test_reference_definitions_and_html_links_are_links(self):
        found = problems({
            "README.md": """\
                [guide]: docs/missing.md
                <a href="docs/gone.md">gone</a>
                """,
        })
        self.assertEqual(found, [
            "README.md:1: docs/missing.md: no such file",
            "README.md:2: docs/gone.md: no such file",
        ])

    def test_an_exit_status_says_so(self):
        root = repository({"README.md": "[x](nope.md)\n"})
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            self.assertEqual(lint.main(["markdown-links.py", root]), 1)
        self.assertIn("README.md:1: nope.md: no such file", printed.getvalue())


class Fine(unittest.TestCase):
    def test_githubs_slugs(self):
        text = """\
            # Checking a plugin: `loop-plugins conformance`

            ## Panels and cards (`--bundle`)

            ## What is checked?

            ## What is checked

            ## What is checked

            Setext heading, with *emphasis*
            -------------------------------

            ## A [linked](https://example.com) heading

            <a id="by-hand"></a>
            """
        self.assertEqual(lint.anchors(textwrap.dedent(text)), {
            "checking-a-plugin-loop-plugins-conformance",
            "panels-and-cards---bundle",
            "what-is-checked",
            "what-is-checked-1",
            "what-is-checked-2",
            "setext-heading-with-emphasis",
            "a-linked-heading",
            "by-hand",
        })

    def test_good_links_and_links_in_code_are_not_reported(self):
        found = problems({
            "README.md": """\
                # Top

                [guide](docs/guide.md#a-step), [up](#top), [dir](docs/), [root](/docs/guide.md),
                [web](https://example.com/x#y), [mail](mailto:a@example.com), `[code](gone.md)`,
                ![image](docs/img.png "a title").

                ```sh
                echo "[not a link](gone.md)"
                ```
                """,
            "docs/guide.md": "## A step\n",
            "docs/img.png": "png",
        })
        self.assertEqual(found, [])

    def test_an_anchor_into_a_file_that_is_not_markdown_is_not_checked(self):
        found = problems({
            "README.md": "[line](src/main.rs#L10)\n",
            "src/main.rs": "fn main() {}\n",
        })
        self.assertEqual(found, [])


if __name__ == "__main__":
    unittest.main()
