"""Tests for tools/check-architecture.py, on small trees built here."""
import importlib.util
import os
import tempfile
import unittest

TOOLS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(TOOLS, "check-architecture.py")


def load_script():
    spec = importlib.util.spec_from_file_location("check_architecture", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


GOOD = """# bosun

## Code map

### `crates/a`
What a is for.

| File | Owns |
|---|---|
| `src/lib.rs` | the crate's root |
| `src/deep/` | everything deep |

### `crates/b` (tests only)
| File | Owns |
|---|---|
| `src/lib.rs` | b |

### Elsewhere
- not a crate

## Entry points
### `crates/zzz`
not in the code map
"""


class CheckArchitecture(unittest.TestCase):
    def setUp(self):
        self.mod = load_script()
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        for path in ["a/src/lib.rs", "a/src/deep/x.rs", "a/src/deep/y/z.rs", "b/src/lib.rs"]:
            full = os.path.join(self.root, "crates", path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            open(full, "w").close()
        for c in ["a", "b"]:
            open(os.path.join(self.root, "crates", c, "Cargo.toml"), "w").close()

    def tearDown(self):
        self.tmp.cleanup()

    def check(self, text):
        with open(os.path.join(self.root, "ARCHITECTURE.md"), "w") as f:
            f.write(text)
        return self.mod.problems(self.root)

    def test_a_true_map_has_no_problem(self):
        self.assertEqual(self.check(GOOD), [])

    def test_a_file_in_no_row_is_reported(self):
        open(os.path.join(self.root, "crates/a/src/new.rs"), "w").close()
        self.assertEqual(self.check(GOOD), ["crates/a: src/new.rs is in no row of its table"])

    def test_a_row_naming_nothing_is_reported(self):
        text = GOOD.replace("| `src/deep/` |", "| `src/gone.rs` |")
        found = self.check(text)
        self.assertIn("crates/a: the table names src/gone.rs, which does not exist", found)
        self.assertIn("crates/a: src/deep/x.rs is in no row of its table", found)

    def test_a_crate_without_a_section_or_a_table_is_reported(self):
        os.makedirs(os.path.join(self.root, "crates/c/src"))
        open(os.path.join(self.root, "crates/c/Cargo.toml"), "w").close()
        self.assertEqual(self.check(GOOD), ["crates/c: no section in the code map"])
        text = GOOD.replace("| File | Owns |\n|---|---|\n| `src/lib.rs` | b |\n", "prose only\n")
        self.assertEqual(
            self.check(text),
            ["crates/c: no section in the code map", "crates/b: its section has no file table"],
        )

    def test_a_section_for_a_crate_that_does_not_exist_is_reported(self):
        text = GOOD.replace("### `crates/b` (tests only)", "### `crates/bee`")
        found = self.check(text)
        self.assertIn("code map: section for crates/bee, which does not exist", found)
        self.assertIn("crates/b: no section in the code map", found)


if __name__ == "__main__":
    unittest.main()
