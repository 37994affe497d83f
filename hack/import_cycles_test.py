#!/usr/bin/env python3
"""Tests of hack/import-cycles.py: each feeds it a small workspace with the case it must catch
(or must not report), so the lint `make test` relies on cannot pass by reading less.

Run: python3 hack/import_cycles_test.py (make test and make lint run it).
"""
import contextlib
import importlib.util
import io
import os
import shutil
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("import_cycles", os.path.join(HERE, "import-cycles.py"))
lint = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lint)


_roots = []


def tearDownModule():
    for root in _roots:
        shutil.rmtree(root, ignore_errors=True)


def workspace(files):
    """A temporary workspace holding `files` (path -> text), removed when the tests end;
    returns its root."""
    root = tempfile.mkdtemp(prefix="import-cycles-test-")
    _roots.append(root)
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(textwrap.dedent(text))
    return root


def crate(name, files, deps=""):
    """The files of a crate crates/<name> with the given sources and [dependencies] lines."""
    out = {f"crates/{name}/Cargo.toml": f'[package]\nname = "{name}"\n\n[dependencies]\n{deps}\n'}
    out.update({f"crates/{name}/src/{p}": t for p, t in files.items()})
    return out


class StripComments(unittest.TestCase):
    def test_a_glob_in_a_string_is_not_a_block_comment(self):
        code = 'const G: &str = "/data/cache/**";\nuse crate::policy::Policy;\n'
        stripped = lint.strip_comments(code)
        self.assertIn("use crate::policy::Policy;", stripped)
        self.assertEqual(stripped.count("\n"), code.count("\n"))

    def test_block_comments_nest(self):
        stripped = lint.strip_comments("/* a /* b */ use crate::x; */ use crate::y;")
        self.assertNotIn("crate::x", stripped)
        self.assertIn("use crate::y;", stripped)

    def test_raw_strings_end_at_their_own_hashes(self):
        stripped = lint.strip_comments('let s = r#"a "quoted" /* b"#; use crate::z;')
        self.assertIn("use crate::z;", stripped)
        self.assertNotIn("quoted", stripped)

    def test_escaped_quotes_and_char_literals(self):
        stripped = lint.strip_comments(r"""let a = "\"/*"; let b = '"'; let c = b'{'; use crate::w;""")
        self.assertIn("use crate::w;", stripped)

    def test_a_lifetime_is_not_a_char_literal(self):
        stripped = lint.strip_comments("fn f<'a>(x: &'a str) -> &'a str { x } use crate::v;")
        self.assertIn("fn f<'a>(x: &'a str)", stripped)
        self.assertIn("use crate::v;", stripped)

    def test_line_comments_go(self):
        self.assertNotIn("crate::u", lint.strip_comments("// use crate::u;\nfn main() {}"))


class Cycles(unittest.TestCase):
    def test_the_string_literal_case_finds_the_circle_behind_it(self):
        # What crates/gate/src/compiled.rs and policy.rs looked like: the glob in a string once
        # hid the rest of compiled.rs from the lint.
        root = workspace(
            crate(
                "gate",
                {
                    "lib.rs": "pub mod compiled;\npub mod policy;\n",
                    "compiled.rs": """
                        //! Matches `/data/cache/**` the way the supervisor sees paths.
                        pub const DIRS: &[&str] = &["/data/**", "/tmp/**"];
                        use crate::policy::Policy;
                        pub fn glob(p: &str) -> bool { p.ends_with("**") }
                    """,
                    "policy.rs": """
                        pub struct Policy;
                        pub fn check(p: &str) -> bool { crate::compiled::glob(p) }
                    """,
                },
            )
        )
        lines, _ = lint.find_cycles(root)
        self.assertIn("crates/gate: cycle between files: compiled <-> policy", lines)

    def test_no_cycle_is_reported_where_there_is_none(self):
        root = workspace(
            crate(
                "a",
                {
                    "lib.rs": "pub mod x;\npub mod y;\n",
                    "x.rs": "use crate::y::Y;\npub struct X(Y);\n",
                    "y.rs": 'pub struct Y;\nconst S: &str = "use crate::x::X;";\n',
                },
            )
        )
        lines, (files, modules, crates) = lint.find_cycles(root)
        self.assertEqual(lines, [])
        self.assertEqual((files, modules, crates), (3, 2, 1))

    def test_a_cycle_between_top_level_modules_through_their_children(self):
        root = workspace(
            crate(
                "a",
                {
                    "lib.rs": "pub mod p;\npub mod q;\n",
                    "p/mod.rs": "pub mod inner;\n",
                    "p/inner.rs": "use crate::q::Q;\n",
                    "q.rs": "pub struct Q;\nfn f() { crate::p::inner::g() }\n",
                },
            )
        )
        lines, _ = lint.find_cycles(root)
        self.assertIn("crates/a: cycle between modules: p <-> q", lines)

    def test_test_code_is_left_out(self):
        root = workspace(
            crate(
                "a",
                {
                    "lib.rs": "pub mod x;\npub mod y;\n",
                    "x.rs": "use crate::y::Y;\n",
                    "y.rs": "pub struct Y;\n#[cfg(test)]\nmod tests {\n    use crate::x;\n}\n",
                },
            )
        )
        self.assertEqual(lint.find_cycles(root)[0], [])

    def test_a_cycle_between_crates_through_a_dev_dependency(self):
        files = {}
        files.update(crate("one", {"lib.rs": ""}, deps='two = { path = "../two" }'))
        files.update(crate("two", {"lib.rs": ""}))
        files["crates/two/Cargo.toml"] += '\n[dev-dependencies]\none = { path = "../one" }\n'
        lines, _ = lint.find_cycles(workspace(files))
        self.assertIn("workspace: cycle between crates: one <-> two", lines)

    def test_the_root_package_is_read_with_workspace_aliases(self):
        files = {
            "Cargo.toml": textwrap.dedent(
                """
                [package]
                name = "top"
                [dependencies]
                lib = { workspace = true }
                [workspace.dependencies]
                lib = { package = "the-lib", path = "crates/lib" }
                """
            ),
            "src/main.rs": "mod a;\nmod b;\n",
            "src/a.rs": "use crate::b::B;\n",
            "src/b.rs": "pub struct B;\nfn f() { crate::a::g() }\n",
        }
        files.update(crate("lib", {"lib.rs": ""}, deps="top = { workspace = true }"))
        files["crates/lib/Cargo.toml"] = files["crates/lib/Cargo.toml"].replace('name = "lib"', 'name = "the-lib"')
        files["Cargo.toml"] += '\ntop = { package = "top", path = "." }\n'
        lines, _ = lint.find_cycles(workspace(files))
        self.assertIn(".: cycle between files: a <-> b", lines)
        self.assertIn("workspace: cycle between crates: the-lib <-> top", lines)



def toured(crates, tour, readme=None):
    """A workspace of `crates` (name -> dependency lines) whose root Cargo.toml's tour lists
    `tour`, with a README.md whose table lists `readme` when given."""
    files = {}
    for name, deps in crates.items():
        files.update(crate(name, {"lib.rs": ""}, deps=deps))
    lines = "".join(f"#   crates/{name}  what it does\n" for name in tour)
    files["Cargo.toml"] = f"# The tour:\n{lines}[workspace]\nmembers = []\n"
    if readme is not None:
        rows = "".join(f"| `crates/{name}` | what it does |\n" for name in readme)
        files["README.md"] = f"| crate | what |\n|---|---|\n{rows}| `examples/` | samples |\n"
    return workspace(files)


class Order(unittest.TestCase):
    def test_a_crate_importing_one_below_it_in_the_tour_fails(self):
        root = toured({"low": 'high = { path = "../high" }', "high": ""}, ["low", "high"])
        self.assertIn(
            "Cargo.toml tour: crates/low imports crates/high, which is not above it",
            lint.order_problems(root),
        )
        with contextlib.redirect_stdout(io.StringIO()) as out:
            self.assertEqual(lint.main(["import-cycles.py", root]), 1)
        self.assertIn("crates/low imports crates/high", out.getvalue())

    def test_a_dev_dependency_counts(self):
        files = {}
        files.update(crate("low", {"lib.rs": ""}))
        files["crates/low/Cargo.toml"] += '\n[dev-dependencies]\nhigh = { path = "../high" }\n'
        files.update(crate("high", {"lib.rs": ""}))
        files["Cargo.toml"] = "#   crates/low  l\n#   crates/high  h\n[workspace]\n"
        self.assertIn(
            "Cargo.toml tour: crates/low imports crates/high, which is not above it",
            lint.order_problems(workspace(files)),
        )

    def test_an_order_that_holds_passes(self):
        root = toured(
            {"low": 'high = { path = "../high" }', "high": ""},
            ["high", "low"],
            readme=["high", "low"],
        )
        self.assertEqual(lint.order_problems(root), [])
        with contextlib.redirect_stdout(io.StringIO()):
            self.assertEqual(lint.main(["import-cycles.py", root]), 0)

    def test_the_tour_lists_every_crate_once_and_the_readme_agrees(self):
        root = toured({"a": "", "b": ""}, ["a", "a", "gone"], readme=["b", "a"])
        problems = lint.order_problems(root)
        self.assertIn("Cargo.toml tour: lists crates/a 2 times, not once", problems)
        self.assertIn("Cargo.toml tour: lists crates/b 0 times, not once", problems)
        self.assertIn("Cargo.toml tour: lists crates/gone, which is not a crate here", problems)
        self.assertTrue(
            any(p.startswith("README.md: its table of the crates is not the Cargo.toml tour") for p in problems),
            problems,
        )


if __name__ == "__main__":
    unittest.main()
