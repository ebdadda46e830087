//! A repository's objects read through one `git cat-file --batch` process
//! ([`Objects`]): blobs and trees by name, on demand, without a checkout
//! and without a process per object. Reading a commit's configuration this
//! way costs the objects read, not the size of the commit's tree: a
//! repository of a hundred thousand files costs the same as one of ten.
//!
//! A tree comes back in git's tree object format (for each entry: its mode
//! in octal ASCII, a space, its name, a NUL, its object id in binary;
//! gitformat-tree), parsed by [`parse_tree`]. git has no command that lists
//! a tree by its id through the same process, hence this small parser.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use crate::error::GitError;
use crate::repo::Repo;
use crate::runner::{exit_error, scrub, Scope};

/// What an object is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    /// A file's (or a symlink's) content.
    Blob,
    /// A directory.
    Tree,
    /// A commit.
    Commit,
    /// An annotated tag.
    Tag,
}

impl ObjectKind {
    fn parse(s: &str) -> Option<ObjectKind> {
        Some(match s {
            "blob" => ObjectKind::Blob,
            "tree" => ObjectKind::Tree,
            "commit" => ObjectKind::Commit,
            "tag" => ObjectKind::Tag,
            _ => return None,
        })
    }
}

/// What an entry of a tree is, from its mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryMode {
    /// A regular file (`100644`, `100755`).
    File {
        /// Executable (`100755`).
        executable: bool,
    },
    /// A symbolic link (`120000`): its blob is the link's target.
    Symlink,
    /// A directory (`40000`).
    Tree,
    /// A submodule's commit (`160000`): nothing of it is in this
    /// repository.
    Submodule,
}

impl EntryMode {
    fn from_octal(mode: u32) -> Option<EntryMode> {
        Some(match mode & 0o170000 {
            0o100000 => EntryMode::File {
                executable: mode & 0o111 != 0,
            },
            0o120000 => EntryMode::Symlink,
            0o040000 => EntryMode::Tree,
            0o160000 => EntryMode::Submodule,
            _ => return None,
        })
    }
}

/// One entry of a tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeEntry {
    /// Its name (bytes: git names are not always UTF-8).
    pub name: Vec<u8>,
    /// What it is.
    pub mode: EntryMode,
    /// Its object id, in hex.
    pub oid: String,
}

/// The entries of a tree object's content; `oid_len` is the length of an
/// object id in bytes (20 for SHA-1, 32 for SHA-256). `None` when the
/// content is not a well-formed tree.
pub fn parse_tree(mut data: &[u8], oid_len: usize) -> Option<Vec<TreeEntry>> {
    let mut out = Vec::new();
    while !data.is_empty() {
        let space = data.iter().position(|&b| b == b' ')?;
        let mode = u32::from_str_radix(std::str::from_utf8(&data[..space]).ok()?, 8).ok()?;
        let rest = &data[space + 1..];
        let nul = rest.iter().position(|&b| b == 0)?;
        let name = rest[..nul].to_vec();
        let id = rest.get(nul + 1..nul + 1 + oid_len)?;
        out.push(TreeEntry {
            name,
            mode: EntryMode::from_octal(mode)?,
            oid: id.iter().map(|b| format!("{b:02x}")).collect(),
        });
        data = &rest[nul + 1 + oid_len..];
    }
    Some(out)
}

/// An object read: its kind and content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// Its id, in hex.
    pub oid: String,
    /// What it is.
    pub kind: ObjectKind,
    /// Its content.
    pub data: Vec<u8>,
}

/// What [`Objects::read`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// The object.
    Object(Object),
    /// An object larger than the limit, not read: its kind and size.
    TooLarge(ObjectKind, u64),
    /// No such object (or a name that is not one).
    Missing,
}

/// A running `git cat-file --batch` on a repository (see the module's doc).
/// Ended (its input closed, then waited for) when dropped.
pub struct Objects {
    child: Child,
    input: Option<ChildStdin>,
    output: BufReader<ChildStdout>,
    dir: String,
    limit: u64,
}

impl std::fmt::Debug for Objects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Objects").field("dir", &self.dir).finish()
    }
}

impl Objects {
    /// Starts the process on `repo`; objects larger than `limit` bytes are
    /// not read ([`Found::TooLarge`]).
    pub fn start(repo: &Repo, limit: u64) -> Result<Objects, GitError> {
        let dir = repo.dir().display().to_string();
        let fail = |error: String| GitError {
            args: "cat-file --batch".into(),
            dir: dir.clone(),
            error,
            stderr: String::new(),
        };
        let mut cmd = Command::new("git");
        cmd.arg("--git-dir")
            .arg(repo.dir())
            .args(["cat-file", "--batch"])
            .current_dir(repo.dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        scrub(&mut cmd, Scope::Local);
        let mut child = cmd.spawn().map_err(|e| fail(e.to_string()))?;
        let input = child.stdin.take();
        let output = child.stdout.take().map(BufReader::new);
        match (input, output) {
            (Some(input), Some(output)) => Ok(Objects {
                child,
                input: Some(input),
                output,
                dir,
                limit,
            }),
            _ => Err(fail("no pipe to git cat-file".into())),
        }
    }

    /// Reads the object `name` (an id, or any name git resolves: `SHA^{tree}`).
    pub fn read(&mut self, name: &str) -> Result<Found, GitError> {
        if name.contains(['\n', '\r']) || name.is_empty() {
            return Ok(Found::Missing);
        }
        let result = self.exchange(name);
        result.map_err(|e| {
            // The process's state is unknown after a failed exchange: it is
            // not used again.
            self.input = None;
            let status = self
                .child
                .try_wait()
                .ok()
                .flatten()
                .map(exit_error)
                .unwrap_or_default();
            GitError {
                args: format!("cat-file --batch ({name})"),
                dir: self.dir.clone(),
                error: if status.is_empty() {
                    e.to_string()
                } else {
                    status
                },
                stderr: e.to_string(),
            }
        })
    }

    fn exchange(&mut self, name: &str) -> std::io::Result<Found> {
        let input = self
            .input
            .as_mut()
            .ok_or_else(|| std::io::Error::other("git cat-file is no longer usable"))?;
        input.write_all(format!("{name}\n").as_bytes())?;
        input.flush()?;
        let mut header = String::new();
        if self.output.read_line(&mut header)? == 0 {
            return Err(std::io::Error::other("git cat-file ended"));
        }
        let header = header.trim_end_matches('\n');
        let fields: Vec<&str> = header.split(' ').collect();
        let bad = || std::io::Error::other(format!("unexpected answer {header:?}"));
        match fields.as_slice() {
            [_, "missing"] | [_, "ambiguous"] => Ok(Found::Missing),
            [oid, kind, size] => {
                let kind = ObjectKind::parse(kind).ok_or_else(bad)?;
                let size: u64 = size.parse().map_err(|_| bad())?;
                if size > self.limit {
                    // Skipped, with the newline after the content.
                    std::io::copy(&mut (&mut self.output).take(size + 1), &mut std::io::sink())?;
                    return Ok(Found::TooLarge(kind, size));
                }
                let mut data = vec![0; size as usize + 1];
                self.output.read_exact(&mut data)?;
                if data.pop() != Some(b'\n') {
                    return Err(bad());
                }
                Ok(Found::Object(Object {
                    oid: oid.to_string(),
                    kind,
                    data,
                }))
            }
            _ => Err(bad()),
        }
    }
}

impl Drop for Objects {
    fn drop(&mut self) {
        // Closing its input ends git cat-file; waiting reaps it.
        self.input = None;
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trees_are_parsed() {
        let mut data = b"100644 a.yaml\0".to_vec();
        data.extend([0xab; 20]);
        data.extend(b"40000 dir\0");
        data.extend([0x01; 20]);
        data.extend(b"120000 link\0");
        data.extend([0x02; 20]);
        data.extend(b"160000 sub\0");
        data.extend([0x03; 20]);
        data.extend(b"100755 run.sh\0");
        data.extend([0x04; 20]);
        let entries = parse_tree(&data, 20).unwrap();
        let modes: Vec<(&[u8], EntryMode)> =
            entries.iter().map(|e| (&e.name[..], e.mode)).collect();
        assert_eq!(
            modes,
            vec![
                (&b"a.yaml"[..], EntryMode::File { executable: false }),
                (&b"dir"[..], EntryMode::Tree),
                (&b"link"[..], EntryMode::Symlink),
                (&b"sub"[..], EntryMode::Submodule),
                (&b"run.sh"[..], EntryMode::File { executable: true }),
            ]
        );
        assert_eq!(entries[0].oid, "ab".repeat(20));
        assert_eq!(parse_tree(b"", 20), Some(vec![]));
        assert_eq!(parse_tree(b"100644 cut\0\x01\x02", 20), None, "truncated");
        assert_eq!(parse_tree(b"99x a\0", 20), None);
    }
}
