"""Tests for tools/module-cycles.py, on tiny crates written to a temporary directory."""
import os
import subprocess
import sys
import tempfile
import unittest

TOOLS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(TOOLS, "module-cycles.py")


def write_crate(root, files):
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


class ModuleCyclesTest(unittest.TestCase):
    def run_script(self, files):
        with tempfile.TemporaryDirectory() as d:
            crate = os.path.join(d, "fake")
            write_crate(crate, files)
            p = subprocess.run(
                [sys.executable, SCRIPT, crate],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        return p.returncode, p.stdout, p.stderr

    def test_circle_between_two_files_fails_naming_both(self):
        rc, out, err = self.run_script(
            {
                "src/lib.rs": "pub mod a;\npub mod b;\n",
                "src/a.rs": "use crate::b::X;\npub struct Y;\npub fn f(_: X) {}\n",
                "src/b.rs": "use crate::a::Y;\npub struct X;\npub fn g(_: Y) {}\n",
            }
        )
        self.assertEqual(rc, 1, out + err)
        self.assertIn("fake: circle:", out)
        self.assertIn(os.path.join("src", "a.rs"), out)
        self.assertIn(os.path.join("src", "b.rs"), out)

    def test_one_way_dependency_passes(self):
        rc, out, err = self.run_script(
            {
                "src/lib.rs": "pub mod a;\npub mod b;\npub use a::Y;\n",
                "src/a.rs": "use crate::b::X;\npub struct Y;\npub fn f(_: X) {}\n",
                "src/b.rs": "pub struct X;\n",
            }
        )
        self.assertEqual(rc, 0, out + err)
        self.assertIn("fake: 3 modules", out)
        self.assertIn("no circle", out)

    def test_test_module_may_reach_back(self):
        rc, out, err = self.run_script(
            {
                "src/lib.rs": "pub mod a;\npub mod b;\n",
                "src/a.rs": "use crate::b::X;\npub struct Y;\npub fn f(_: X) {}\n",
                "src/b.rs": "pub struct X;\n#[cfg(test)]\nmod tests {\n    use crate::a::Y;\n}\n",
            }
        )
        self.assertEqual(rc, 0, out + err)


if __name__ == "__main__":
    unittest.main()
