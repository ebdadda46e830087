"""Tests for tools/test, the one command that sets up and runs the tests.

With parts missing it names each of them with the command that provides it
and builds nothing; with everything in place (and kube-apiserver, etcd and
tekton-validate built, as CI's `tools/test --setup-only` leaves them) it
only finds the caches, prints the export lines, and hands its arguments to
cargo test.
"""
import os
import shutil
import subprocess
import tempfile
import unittest

TOOLS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(TOOLS)
SCRIPT = os.path.join(TOOLS, "test")


def farm(into, leave_out=(), replace=None):
    """Fills `into` with a symlink to every command on PATH (the first of
    each name) except those in `leave_out`, and with the given scripts in
    place of the commands `replace` names; returns it, to be the whole PATH."""
    replace = replace or {}
    os.makedirs(into, exist_ok=True)
    for name, text in replace.items():
        path = os.path.join(into, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o755)
    for d in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            target = os.path.join(into, name)
            if name in leave_out or os.path.lexists(target):
                continue
            full = os.path.join(d, name)
            if os.path.isfile(full) and os.access(full, os.X_OK):
                os.symlink(full, target)
    return into


def built(script):
    """What `script --check` prints, or None when it is not built."""
    out = subprocess.run(
        ["bash", os.path.join(TOOLS, script), "--check"],
        capture_output=True,
        text=True,
    )
    return out.stdout.strip() if out.returncode == 0 else None


class MissingParts(unittest.TestCase):
    def test_every_missing_part_is_named_with_its_command_and_nothing_is_built(self):
        with tempfile.TemporaryDirectory() as tmp:
            # apt-get and sudo stand-ins that only note they ran: with
            # --no-install nothing may be installed, and a test must not
            # install anything on this machine either.
            apt_log = os.path.join(tmp, "apt.log")
            noted = '#!/bin/sh\necho "$0 $*" >>"$APT_LOG"\nexit 1\n'
            bin_dir = farm(
                os.path.join(tmp, "bin"),
                leave_out={"prometheus", "promtool", "chromedriver", "go"},
                replace={"apt-get": noted, "sudo": noted},
            )
            cache = os.path.join(tmp, "cache")
            target = os.path.join(tmp, "target")
            env = dict(
                os.environ,
                PATH=bin_dir,
                XDG_CACHE_HOME=cache,
                CARGO_TARGET_DIR=target,
                APT_LOG=apt_log,
            )
            out = subprocess.run(
                [SCRIPT, "--no-install", "--setup-only"],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            said = out.stdout + out.stderr
            self.assertNotEqual(out.returncode, 0, said)
            # All three at once, each with what provides it.
            self.assertIn("prometheus (and promtool): ", said)
            self.assertIn("apt-get install -y prometheus\n", said)
            self.assertIn("chromedriver: ", said)
            self.assertIn("apt-get install -y chromium-driver\n", said)
            self.assertIn(
                "go: Go 1.26 is needed to build kube-apiserver and etcd for the tests: "
                "install it from https://go.dev/dl/",
                said,
            )
            named = [l for l in said.splitlines() if l.startswith("  ") and l[2] != " "]
            self.assertEqual(len(named), 3, said)
            self.assertIn("--no-install: nothing was installed", said)
            self.assertFalse(os.path.exists(apt_log), "apt-get or sudo ran")
            # Nothing built: no cache entry, no cargo target, no export lines.
            self.assertFalse(os.path.exists(os.path.join(cache, "bosun")), said)
            self.assertFalse(os.path.exists(target), said)
            self.assertNotIn("building", said)
            self.assertNotIn("export ", said)


class EverythingInPlace(unittest.TestCase):
    def setUp(self):
        self.kube = built("kube/build.sh")
        self.tekton = built("tekton/build.sh")
        if not (self.kube and self.tekton):
            self.fail(
                "kube-apiserver, etcd and tekton-validate are not built for this tree "
                "(this test must not build them): run tools/test --setup-only first"
            )

    def test_setup_only_finds_the_caches_and_prints_the_export_lines(self):
        out = subprocess.run(
            [SCRIPT, "--no-install", "--setup-only"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        lines = out.stdout.splitlines()
        self.assertIn(f"export BOSUN_KUBE_BIN_DIR={self.kube}", lines)
        self.assertIn(f"export BOSUN_TEKTON_VALIDATE={self.tekton}", lines)
        self.assertTrue(any(l.startswith("export RUST_TEST_THREADS=") for l in lines), lines)
        self.assertNotIn("building", out.stderr)

    def test_a_missing_debian_package_is_installed_with_apt_get(self):
        with tempfile.TemporaryDirectory() as tmp:
            bin_dir = os.path.join(tmp, "bin")
            log = os.path.join(tmp, "apt.log")
            # apt-get "installs" coreutils by putting mkfifo back on PATH; sudo
            # (asked when this does not run as root) passes the command on.
            apt_get = (
                "#!/bin/sh\n"
                'echo "$DEBIAN_FRONTEND apt-get $*" >>"$APT_LOG"\n'
                'if [ "$1" = install ]; then ln -s "$MKFIFO" "$FARM/mkfifo"; fi\n'
            )
            sudo = '#!/bin/sh\n[ "$1" = -n ] && shift\nexec "$@"\n'
            farm(bin_dir, leave_out={"mkfifo"}, replace={"apt-get": apt_get, "sudo": sudo})
            env = dict(
                os.environ,
                PATH=bin_dir,
                APT_LOG=log,
                FARM=bin_dir,
                MKFIFO=shutil.which("mkfifo"),
            )
            out = subprocess.run(
                [SCRIPT, "--setup-only"], env=env, capture_output=True, text=True, timeout=60
            )
            self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
            self.assertIn("installing coreutils", out.stderr)
            with open(log) as f:
                ran = f.read().splitlines()
            self.assertEqual(
                ran[-2:],
                [
                    "noninteractive apt-get update -q",
                    "noninteractive apt-get install -y -q coreutils",
                ],
            )
            self.assertIn(f"export BOSUN_KUBE_BIN_DIR={self.kube}", out.stdout.splitlines())

    def cargo_sees(self, *args):
        """What cargo is run with (arguments, then the variables the tests
        read), with a stand-in cargo on PATH that prints them."""
        fake = (
            "#!/bin/sh\n"
            'echo "args: $*"\n'
            'echo "kube: $BOSUN_KUBE_BIN_DIR"\n'
            'echo "tekton: $BOSUN_TEKTON_VALIDATE"\n'
            'echo "threads: $RUST_TEST_THREADS"\n'
        )
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, PATH=farm(tmp, replace={"cargo": fake}))
            env.pop("RUST_TEST_THREADS", None)
            out = subprocess.run(
                [SCRIPT, "--no-install", *args],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        return dict(l.split(": ", 1) for l in out.stdout.splitlines())

    def test_the_workspace_is_tested_with_the_arguments_given(self):
        seen = self.cargo_sees()
        self.assertEqual(seen["args"], "test --workspace")
        self.assertEqual(seen["kube"], self.kube)
        self.assertEqual(seen["tekton"], self.tekton)
        self.assertEqual(seen["threads"], str(4 * len(os.sched_getaffinity(0))))
        seen = self.cargo_sees("dispatch", "--", "--nocapture")
        self.assertEqual(seen["args"], "test --workspace dispatch -- --nocapture")

    def test_a_package_named_is_tested_alone(self):
        # cargo would let `--workspace` win over `-p`.
        self.assertEqual(self.cargo_sees("-p", "bosun-config")["args"], "test -p bosun-config")
        self.assertEqual(
            self.cargo_sees("--package=bosun-git")["args"], "test --package=bosun-git"
        )
        # After `--`, a `-p` is the test binaries'.
        self.assertEqual(self.cargo_sees("x", "--", "-p")["args"], "test --workspace x -- -p")


if __name__ == "__main__":
    unittest.main()
