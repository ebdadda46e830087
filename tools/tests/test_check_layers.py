"""Tests for tools/check-layers.py, on small `cargo metadata` graphs built here."""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

TOOLS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(TOOLS, "check-layers.py")


def load_script():
    spec = importlib.util.spec_from_file_location("check_layers", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def pkg_id(name):
    if name.startswith("bosun"):
        return f"path+file:///ws/crates/{name}#0.1.0"
    return f"registry+https://github.com/rust-lang/crates.io-index#{name}@1.0.0"


def metadata(members, externals, edges):
    """`cargo metadata`'s shape: edges are (from, to, kind, target); kind None is normal."""
    names = list(members) + list(externals)
    deps = {n: {} for n in names}
    for a, b, kind, target in edges:
        d = deps[a].setdefault(
            b, {"name": b.replace("-", "_"), "pkg": pkg_id(b), "dep_kinds": []}
        )
        d["dep_kinds"].append({"kind": kind, "target": target})
    return {
        "packages": [{"name": n, "id": pkg_id(n), "version": "0.1.0"} for n in names],
        "workspace_members": [pkg_id(n) for n in members],
        "resolve": {
            "nodes": [
                {
                    "id": pkg_id(n),
                    "dependencies": [d["pkg"] for d in deps[n].values()],
                    "deps": list(deps[n].values()),
                    "features": [],
                }
                for n in names
            ],
            "root": None,
        },
        "version": 1,
    }


# A small bosun: the store pulls a database, the daemon a runtime and a server.
MEMBERS = ["bosun-config", "bosun-store", "bosun-dispatcher", "bosun-daemon", "bosun-kubetest"]
EXTERNALS = ["serde", "rusqlite", "libsqlite3-sys", "tokio", "mio", "axum", "kube"]
CLEAN = [
    ("bosun-config", "serde", None, None),
    ("bosun-store", "bosun-config", None, None),
    ("bosun-store", "rusqlite", None, None),
    ("rusqlite", "libsqlite3-sys", None, None),
    ("tokio", "mio", None, None),
    ("axum", "tokio", None, None),
    ("bosun-dispatcher", "bosun-store", None, None),
    ("bosun-dispatcher", "kube", None, None),
    ("bosun-daemon", "bosun-store", None, None),
    ("bosun-daemon", "axum", None, None),
    ("bosun-daemon", "tokio", None, None),
    ("bosun-kubetest", "kube", None, None),
    ("bosun-kubetest", "tokio", None, None),
    # Test-only crates are fine as dev-dependencies.
    ("bosun-store", "bosun-kubetest", "dev", None),
    ("bosun-daemon", "bosun-kubetest", "dev", None),
]


class CheckLayersTest(unittest.TestCase):
    def run_script(self, meta, *args):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "metadata.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(meta, f)
            p = subprocess.run(
                [sys.executable, SCRIPT, "--metadata", path, *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        return p.returncode, p.stdout, p.stderr

    def test_clean_graph_passes(self):
        rc, out, err = self.run_script(metadata(MEMBERS, EXTERNALS, CLEAN), "--allow-missing")
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(len(out.splitlines()), 1, out)
        self.assertIn("no violation", out)

    def test_forbidden_direct_edge_fails(self):
        edges = CLEAN + [("bosun-dispatcher", "bosun-daemon", None, None)]
        rc, out, _ = self.run_script(metadata(MEMBERS, EXTERNALS, edges), "--allow-missing")
        self.assertEqual(rc, 1, out)
        self.assertIn("bosun-dispatcher must not reach bosun-daemon", out)
        self.assertIn("  bosun-dispatcher -> bosun-daemon\n", out)

    def test_forbidden_transitive_edge_prints_the_whole_path(self):
        # serde pulling an async runtime makes the config and the store reach it.
        edges = CLEAN + [("serde", "axum", None, None)]
        rc, out, _ = self.run_script(metadata(MEMBERS, EXTERNALS, edges), "--allow-missing")
        self.assertEqual(rc, 1, out)
        self.assertIn("  bosun-config -> serde -> axum -> tokio\n", out)
        self.assertIn("  bosun-store -> bosun-config -> serde -> axum -> tokio\n", out)
        self.assertIn("bosun-config must not reach axum", out)
        self.assertIn("  bosun-config -> serde -> axum\n", out)

    def test_target_specific_dependency_is_normal(self):
        edges = CLEAN + [("bosun-config", "tokio", None, "cfg(unix)")]
        rc, out, _ = self.run_script(metadata(MEMBERS, EXTERNALS, edges), "--allow-missing")
        self.assertEqual(rc, 1, out)
        self.assertIn("  bosun-config -> tokio\n", out)

    def test_dev_and_build_dependencies_do_not_count(self):
        edges = CLEAN + [
            ("bosun-config", "tokio", "dev", None),
            ("bosun-config", "rusqlite", "build", None),
            ("bosun-store", "axum", "dev", None),
            ("bosun-config", "bosun-kubetest", "dev", None),
        ]
        rc, out, err = self.run_script(metadata(MEMBERS, EXTERNALS, edges), "--allow-missing")
        self.assertEqual(rc, 0, out + err)

    def test_dependency_both_dev_and_normal_counts(self):
        edges = CLEAN + [
            ("bosun-config", "tokio", "dev", None),
            ("bosun-config", "tokio", None, None),
        ]
        rc, out, _ = self.run_script(metadata(MEMBERS, EXTERNALS, edges), "--allow-missing")
        self.assertEqual(rc, 1, out)
        self.assertIn("  bosun-config -> tokio\n", out)

    def test_published_crate_may_not_depend_on_kubetest(self):
        edges = CLEAN + [("bosun-config", "bosun-kubetest", None, None)]
        rc, out, _ = self.run_script(metadata(MEMBERS, EXTERNALS, edges), "--allow-missing")
        self.assertEqual(rc, 1, out)
        self.assertIn("bosun-config must not reach bosun-kubetest", out)
        self.assertIn("  bosun-store -> bosun-config -> bosun-kubetest\n", out)

    def test_unknown_crate_in_a_rule_is_an_error(self):
        rc, out, err = self.run_script(metadata(MEMBERS, EXTERNALS, CLEAN))
        self.assertEqual(rc, 2, out + err)
        self.assertIn("rule names unknown crate bosun-tekton", err)

    def test_every_rule_name_present_passes_without_allow_missing(self):
        rules = load_script().RULES
        names = {n for subjects, forbidden, _ in rules for n in subjects + forbidden}
        names.discard("*")
        members = sorted(n for n in names if n.startswith("bosun"))
        externals = sorted(n for n in names if not n.startswith("bosun"))
        rc, out, err = self.run_script(metadata(members, externals, []))
        self.assertEqual(rc, 0, out + err)
        self.assertNotIn("skipped", out)
        # Renaming one crate away is caught.
        members.remove("bosun-store")
        rc, out, err = self.run_script(metadata(members, externals, []))
        self.assertEqual(rc, 2, out + err)
        self.assertIn("rule names unknown crate bosun-store", err)


if __name__ == "__main__":
    unittest.main()
