//! A commit's files as bosun-config reads configuration
//! ([`bosun_config::source::FileSource`]), without a checkout:
//! [`CommitFiles`].
//!
//! The commit's tree appears under a root path of the caller's choosing
//! (`org/name@COMMIT` for [`super::load_at`], so every diagnostic names the
//! repository and the commit); a path outside it does not exist. Trees and
//! blobs are read on demand through one `git cat-file --batch`
//! ([`bosun_git::objects`]), trees cached: a load reads the few
//! directories and files it visits, whatever the size of the repository.
//!
//! Symlinks are followed within the tree only, as the file system would
//! follow them in a checkout (relative to the link's directory, `..`
//! resolved after the links before it): one whose target is absolute or
//! climbs above the root is an error ("points outside the repository"),
//! never read, as is a chain of more than 40 links. A submodule is neither
//! a file nor a directory (its files are in another repository). Files
//! larger than [`MAX_FILE`] are refused.
//!
//! What the loader read is kept: [`CommitFiles::files_read`],
//! [`CommitFiles::dirs_listed`] (paths in the tree).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use bosun_config::source::{DirEntry, EntryKind, FileSource};
use bosun_git::objects::{EntryMode, Found, ObjectKind, Objects, TreeEntry};
use bosun_git::repo::{GitError, Repo};

/// The largest file read (configuration is small; a bigger file is an
/// error rather than memory spent).
pub const MAX_FILE: u64 = 16 << 20;

/// Links followed in one resolution at most, as Linux.
const MAX_LINKS: usize = 40;

/// A tree's entries by name.
type Tree = Arc<BTreeMap<Vec<u8>, TreeEntry>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A commit's files (see the module's doc).
pub struct CommitFiles {
    root: PathBuf,
    commit: String,
    root_tree: String,
    oid_len: usize,
    objects: Mutex<Objects>,
    trees: Mutex<HashMap<String, Tree>>,
    files: Mutex<BTreeSet<String>>,
    dirs: Mutex<BTreeSet<String>>,
}

impl std::fmt::Debug for CommitFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommitFiles")
            .field("root", &self.root)
            .field("commit", &self.commit)
            .finish()
    }
}

/// What a path resolves to.
#[derive(Debug, Clone)]
enum Node {
    Tree(String),
    File(String),
    Symlink,
    Submodule,
}

/// A resolved path: its components in the tree and what is there.
struct Resolved {
    path: Vec<Vec<u8>>,
    node: Node,
}

fn joined(parts: &[Vec<u8>]) -> String {
    let strs: Vec<String> = parts
        .iter()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    strs.join("/")
}

impl CommitFiles {
    /// The files of `commit` (any name git resolves to a commit) in
    /// `repo`, under the path `root`.
    pub fn open(repo: &Repo, commit: &str, root: impl Into<PathBuf>) -> Result<Self, GitError> {
        let unknown = || GitError {
            args: format!("cat-file --batch ({commit}^{{tree}})"),
            dir: repo.dir().display().to_string(),
            error: "exit status 128".into(),
            stderr: format!("fatal: not a commit in this repository: {commit}"),
        };
        let full = repo.resolve(commit)?.ok_or_else(unknown)?;
        let mut objects = bosun_git::objects::Objects::start(repo, MAX_FILE)?;
        let tree = match objects.read(&format!("{full}^{{tree}}"))? {
            Found::Object(o) if o.kind == ObjectKind::Tree => o,
            _ => return Err(unknown()),
        };
        let files = CommitFiles {
            root: root.into(),
            commit: full,
            oid_len: tree.oid.len() / 2,
            root_tree: tree.oid.clone(),
            objects: Mutex::new(objects),
            trees: Mutex::new(HashMap::new()),
            files: Mutex::new(BTreeSet::new()),
            dirs: Mutex::new(BTreeSet::new()),
        };
        let entries = files.parse(&tree.oid, &tree.data)?;
        lock(&files.trees).insert(tree.oid, entries);
        Ok(files)
    }

    /// The root the tree appears under.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The commit (its full id).
    pub fn commit(&self) -> &str {
        &self.commit
    }

    /// Whether `path` is the root or below it.
    pub fn contains(&self, path: &Path) -> bool {
        path.starts_with(&self.root)
    }

    /// The files read so far, as paths in the tree (`.prow.yaml`), sorted;
    /// a file read through symlinks is there under the path asked for and
    /// the path it resolved to.
    pub fn files_read(&self) -> Vec<String> {
        lock(&self.files).iter().cloned().collect()
    }

    /// The directories listed so far, as paths in the tree (`` for the
    /// root), sorted.
    pub fn dirs_listed(&self) -> Vec<String> {
        lock(&self.dirs).iter().cloned().collect()
    }

    fn parse(&self, oid: &str, data: &[u8]) -> Result<Tree, GitError> {
        let entries =
            bosun_git::objects::parse_tree(data, self.oid_len).ok_or_else(|| GitError {
                args: format!("cat-file --batch ({oid})"),
                dir: String::new(),
                error: "a malformed tree".into(),
                stderr: String::new(),
            })?;
        Ok(Arc::new(
            entries.into_iter().map(|e| (e.name.clone(), e)).collect(),
        ))
    }

    /// The object `oid` of kind `kind`.
    fn object(&self, oid: &str, kind: ObjectKind) -> io::Result<Vec<u8>> {
        let found = lock(&self.objects)
            .read(oid)
            .map_err(|e| io::Error::other(e.to_string()))?;
        match found {
            Found::Object(o) if o.kind == kind => Ok(o.data),
            Found::TooLarge(_, size) => Err(io::Error::other(format!(
                "file too large ({size} bytes; bosun reads configuration files of up to {MAX_FILE} bytes)"
            ))),
            _ => Err(io::Error::other(format!(
                "object {oid} is missing from the repository"
            ))),
        }
    }

    fn tree(&self, oid: &str) -> io::Result<Tree> {
        if let Some(t) = lock(&self.trees).get(oid) {
            return Ok(t.clone());
        }
        let data = self.object(oid, ObjectKind::Tree)?;
        let tree = self
            .parse(oid, &data)
            .map_err(|e| io::Error::other(e.to_string()))?;
        lock(&self.trees).insert(oid.to_string(), tree.clone());
        Ok(tree)
    }

    fn not_found(&self, path: &Path) -> io::Error {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "no such file or directory in commit {}: {}",
                self.commit,
                path.display()
            ),
        )
    }

    /// Resolves `path` (below the root), following symlinks within the tree
    /// (the last component's too when `follow_last`).
    fn resolve(&self, path: &Path, follow_last: bool) -> io::Result<Resolved> {
        let rel = path
            .strip_prefix(&self.root)
            .map_err(|_| self.not_found(path))?;
        let mut pending: Vec<Vec<u8>> = Vec::new();
        for c in rel.components().rev() {
            match c {
                Component::Normal(n) => pending.push(n.as_bytes().to_vec()),
                Component::ParentDir => pending.push(b"..".to_vec()),
                Component::CurDir => {}
                Component::RootDir | Component::Prefix(_) => return Err(self.not_found(path)),
            }
        }
        // `pending` is a stack: its last element is the next component.
        let mut dirs: Vec<(Vec<u8>, String)> = Vec::new();
        let mut links = 0;
        let outside = |why: String| {
            io::Error::other(format!(
                "{why}: it points outside the repository; not followed"
            ))
        };
        while let Some(name) = pending.pop() {
            if name == b".." {
                if dirs.pop().is_none() {
                    return Err(outside(format!("{} climbs above the root", path.display())));
                }
                continue;
            }
            let current = dirs
                .last()
                .map_or(self.root_tree.as_str(), |(_, t)| t.as_str());
            let tree = self.tree(current)?;
            let Some(entry) = tree.get(&name) else {
                return Err(self.not_found(path));
            };
            let last = pending.is_empty();
            let here = || {
                let mut p: Vec<Vec<u8>> = dirs.iter().map(|(n, _)| n.clone()).collect();
                p.push(name.clone());
                p
            };
            match entry.mode {
                EntryMode::Tree => dirs.push((name.clone(), entry.oid.clone())),
                EntryMode::Symlink if !last || follow_last => {
                    links += 1;
                    if links > MAX_LINKS {
                        return Err(io::Error::other(format!(
                            "{}: too many levels of symbolic links",
                            path.display()
                        )));
                    }
                    let target = self.object(&entry.oid, ObjectKind::Blob)?;
                    let link = joined(&here());
                    if target.starts_with(b"/") {
                        return Err(outside(format!(
                            "symlink {link} -> {}",
                            String::from_utf8_lossy(&target)
                        )));
                    }
                    let mut depth = dirs.len() as isize;
                    for part in target.split(|&b| b == b'/') {
                        match part {
                            b"" | b"." => {}
                            b".." => depth -= 1,
                            _ => depth += 1,
                        }
                        if depth < 0 {
                            return Err(outside(format!(
                                "symlink {link} -> {}",
                                String::from_utf8_lossy(&target)
                            )));
                        }
                    }
                    for part in target.split(|&b| b == b'/').rev() {
                        if !part.is_empty() && part != b"." {
                            pending.push(part.to_vec());
                        }
                    }
                }
                _ if !last => {
                    return Err(io::Error::other(format!(
                        "{}: {} is not a directory",
                        path.display(),
                        joined(&here())
                    )))
                }
                EntryMode::Symlink => {
                    return Ok(Resolved {
                        path: here(),
                        node: Node::Symlink,
                    })
                }
                EntryMode::File { .. } => {
                    return Ok(Resolved {
                        path: here(),
                        node: Node::File(entry.oid.clone()),
                    })
                }
                EntryMode::Submodule => {
                    return Ok(Resolved {
                        path: here(),
                        node: Node::Submodule,
                    })
                }
            }
        }
        Ok(Resolved {
            path: dirs.iter().map(|(n, _)| n.clone()).collect(),
            node: Node::Tree(
                dirs.last()
                    .map_or(self.root_tree.clone(), |(_, t)| t.clone()),
            ),
        })
    }

    /// `path` as asked, in the tree (`.prow/a.yaml`).
    fn asked(&self, path: &Path) -> String {
        let rel = path.strip_prefix(&self.root).unwrap_or(path);
        let parts: Vec<String> = rel
            .components()
            .filter(|c| !matches!(c, Component::CurDir))
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        parts.join("/")
    }
}

fn kind_of(mode: EntryMode) -> EntryKind {
    match mode {
        EntryMode::File { .. } => EntryKind::File,
        EntryMode::Tree => EntryKind::Dir,
        EntryMode::Symlink => EntryKind::Symlink,
        EntryMode::Submodule => EntryKind::Other,
    }
}

impl FileSource for CommitFiles {
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let r = self.resolve(path, true)?;
        match r.node {
            Node::File(oid) => {
                let data = self.object(&oid, ObjectKind::Blob)?;
                let mut files = lock(&self.files);
                files.insert(self.asked(path));
                files.insert(joined(&r.path));
                Ok(data)
            }
            Node::Tree(_) => Err(io::Error::other(format!(
                "{}: is a directory",
                path.display()
            ))),
            Node::Submodule => Err(io::Error::other(format!(
                "{}: a submodule (its files are in another repository)",
                path.display()
            ))),
            Node::Symlink => unreachable!("followed"),
        }
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        let r = self.resolve(path, true)?;
        let Node::Tree(oid) = r.node else {
            return Err(io::Error::other(format!(
                "{}: not a directory",
                path.display()
            )));
        };
        let tree = self.tree(&oid)?;
        lock(&self.dirs).insert(joined(&r.path));
        Ok(tree
            .values()
            .map(|e| DirEntry {
                name: OsStr::from_bytes(&e.name).to_os_string(),
                kind: kind_of(e.mode),
            })
            .collect())
    }

    fn stat(&self, path: &Path) -> io::Result<EntryKind> {
        Ok(match self.resolve(path, true)?.node {
            Node::Tree(_) => EntryKind::Dir,
            Node::File(_) => EntryKind::File,
            Node::Submodule => EntryKind::Other,
            Node::Symlink => unreachable!("followed"),
        })
    }

    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        let r = self.resolve(path, true)?;
        let mut out = self.root.clone();
        for part in r.path {
            out.push(OsStr::from_bytes(&part));
        }
        Ok(out)
    }
}
