//! Helpers that more than one module uses: [`y`] for YAML written indented in
//! the tests, and [`Tmp`] for tests on the real file system (each module adds
//! the `LoadOptions` it needs in an `impl Tmp` of its own).

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use bosun_config::{load, Diagnostic, LoadOptions, Loaded, OsFiles};

/// Strips the first newline and the common indentation.
pub fn y(s: &str) -> String {
    let s = s.strip_prefix('\n').unwrap_or(s).trim_end_matches(' ');
    let indent = s
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    s.lines()
        .map(|l| l.get(indent..).unwrap_or("").to_string() + "\n")
        .collect()
}

/// A temporary directory, canonical so the paths in diagnostics are predictable.
pub struct Tmp {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
}

impl Tmp {
    pub fn new() -> Tmp {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        Tmp { _dir: dir, root }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    pub fn dir(&self, rel: &str) -> String {
        self.path(rel).to_string_lossy().into_owned()
    }

    pub fn write(&self, rel: &str, text: &str) -> &Self {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
        self
    }

    pub fn symlink(&self, rel: &str, target: &str) {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::os::unix::fs::symlink(target, path).expect("symlink");
    }

    pub fn mkfifo(&self, rel: &str) {
        let status = std::process::Command::new("mkfifo")
            .arg(self.path(rel))
            .status()
            .unwrap_or_else(|e| {
                panic!("mkfifo could not run ({e}): install it with `apt-get install -y coreutils`, or run the tests with tools/test")
            });
        assert!(status.success(), "mkfifo failed");
    }

    /// Loads through [`OsFiles`] on another thread, failing if it takes too long
    /// (a loader that opens a FIFO blocks forever). The diagnostics come back as
    /// `bosun check` prints them, with the directory shown as `$TMP`.
    pub fn load(&self, opts: LoadOptions) -> (Loaded, Vec<String>) {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(load(&opts, &OsFiles));
        });
        let loaded = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the loader finished (did it open a FIFO?)");
        let root = self.root.to_string_lossy().into_owned();
        let lines = loaded
            .diagnostics
            .iter()
            .map(|d| Diagnostic::to_string(d).replace(&root, "$TMP"))
            .collect();
        (loaded, lines)
    }
}
