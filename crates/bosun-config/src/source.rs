//! Where configuration bytes come from. The loader reads only through
//! [`FileSource`], so tests can inject read errors, FIFOs, loops and dangling links
//! without relying on file permissions (CI runs as root).

use std::collections::HashSet;
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ignore::gitignore::{Gitignore, GitignoreBuilder};

use crate::diag::Diagnostic;

/// What a directory entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (not followed).
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

/// One directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// File name.
    pub name: OsString,
    /// Kind, without following symlinks.
    pub kind: EntryKind,
}

/// Read access to configuration files.
pub trait FileSource: Sync {
    /// Reads a whole file.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Lists a directory.
    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>>;
    /// The kind of `path`, following symlinks.
    fn stat(&self, path: &Path) -> io::Result<EntryKind>;
    /// The canonical path (symlinks resolved), to detect directory loops.
    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf>;
}

/// The real file system.
#[derive(Debug, Clone, Copy, Default)]
pub struct OsFiles;

fn kind_of(ft: std::fs::FileType) -> EntryKind {
    if ft.is_symlink() {
        EntryKind::Symlink
    } else if ft.is_dir() {
        EntryKind::Dir
    } else if ft.is_file() {
        EntryKind::File
    } else {
        EntryKind::Other
    }
}

impl FileSource for OsFiles {
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        std::fs::read_dir(path)?
            .map(|e| {
                let e = e?;
                Ok(DirEntry {
                    name: e.file_name(),
                    kind: kind_of(e.file_type()?),
                })
            })
            .collect()
    }

    fn stat(&self, path: &Path) -> io::Result<EntryKind> {
        Ok(kind_of(std::fs::metadata(path)?.file_type()))
    }

    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        std::fs::canonicalize(path)
    }
}

/// The YAML files found below a directory.
#[derive(Debug, Default)]
pub struct Walk {
    /// `*.yaml` / `*.yml` files, in a stable order (sorted by path).
    pub files: Vec<PathBuf>,
    /// Files skipped because a `.prowignore` lists them.
    pub ignored: usize,
    /// Problems met on the way.
    pub diagnostics: Vec<Diagnostic>,
}

/// True for names Prow loads: `*.yaml` and `*.yml` (case-sensitive, as Prow).
pub fn is_yaml_name(name: &Path) -> bool {
    matches!(
        name.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml")
    )
}

const PROWIGNORE: &str = ".prowignore";

/// Walks `root` recursively as Prow does: `*.yaml`/`*.yml` only, names starting with
/// `..` skipped (Kubernetes ConfigMap internals), `.prowignore` files honoured
/// (gitignore syntax, for their directory and below). Symlinks are followed;
/// directory loops, dangling links and special files are reported and skipped.
pub fn walk(fs: &dyn FileSource, root: &Path) -> Walk {
    let mut walk = Walk::default();
    let mut visited = HashSet::new();
    let mut ignores = Vec::new();
    visit_dir(fs, root, &mut ignores, &mut visited, &mut walk);
    walk.files.sort();
    walk
}

fn path_label(p: &Path) -> Arc<str> {
    Arc::from(p.to_string_lossy().as_ref())
}

fn visit_dir(
    fs: &dyn FileSource,
    dir: &Path,
    ignores: &mut Vec<Gitignore>,
    visited: &mut HashSet<PathBuf>,
    walk: &mut Walk,
) {
    match fs.canonicalize(dir) {
        Ok(canonical) => {
            if !visited.insert(canonical.clone()) {
                walk.diagnostics.push(
                    Diagnostic::warning(format!(
                        "directory {} was already read (symlink loop?); skipped",
                        canonical.display()
                    ))
                    .in_file(&path_label(dir)),
                );
                return;
            }
        }
        Err(e) => {
            walk.diagnostics.push(
                Diagnostic::error(format!("cannot resolve directory: {e}"))
                    .in_file(&path_label(dir)),
            );
            return;
        }
    }
    let mut entries = match fs.read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            walk.diagnostics.push(
                Diagnostic::error(format!("cannot read directory: {e}")).in_file(&path_label(dir)),
            );
            return;
        }
    };
    entries.sort_by(|a, b| a.name.cmp(&b.name));

    let pushed = entries.iter().any(|e| e.name == PROWIGNORE);
    if pushed {
        let path = dir.join(PROWIGNORE);
        let mut builder = GitignoreBuilder::new(dir);
        match fs.read(&path) {
            Ok(bytes) => {
                for line in String::from_utf8_lossy(&bytes).lines() {
                    if let Err(e) = builder.add_line(Some(path.clone()), line) {
                        walk.diagnostics.push(
                            Diagnostic::warning(format!("ignoring bad pattern {line:?}: {e}"))
                                .in_file(&path_label(&path)),
                        );
                    }
                }
            }
            Err(e) => walk
                .diagnostics
                .push(Diagnostic::error(format!("cannot read: {e}")).in_file(&path_label(&path))),
        }
        match builder.build() {
            Ok(gi) => ignores.push(gi),
            Err(e) => {
                walk.diagnostics.push(
                    Diagnostic::warning(format!("cannot use .prowignore: {e}"))
                        .in_file(&path_label(&path)),
                );
                ignores.push(Gitignore::empty());
            }
        }
    }

    for entry in entries {
        if entry.name.to_string_lossy().starts_with("..") {
            continue;
        }
        let path = dir.join(&entry.name);
        let kind = match entry.kind {
            EntryKind::Symlink => match fs.stat(&path) {
                Ok(kind) => kind,
                Err(e) => {
                    if is_yaml_name(&path) || e.kind() != io::ErrorKind::NotFound {
                        walk.diagnostics.push(
                            Diagnostic::warning(format!(
                                "dangling or unreadable symlink: {e}; skipped"
                            ))
                            .in_file(&path_label(&path)),
                        );
                    }
                    continue;
                }
            },
            kind => kind,
        };
        let is_dir = kind == EntryKind::Dir;
        if ignores
            .iter()
            .any(|gi| gi.matched_path_or_any_parents(&path, is_dir).is_ignore())
        {
            if !is_dir && is_yaml_name(&path) {
                walk.ignored += 1;
            }
            continue;
        }
        match kind {
            EntryKind::Dir => visit_dir(fs, &path, ignores, visited, walk),
            EntryKind::File if is_yaml_name(&path) => walk.files.push(path),
            EntryKind::Other if is_yaml_name(&path) => walk.diagnostics.push(
                Diagnostic::warning("not a regular file (FIFO, socket or device); skipped")
                    .in_file(&path_label(&path)),
            ),
            _ => {}
        }
    }
    if pushed {
        ignores.pop();
    }
}

/// One entry of an in-memory file tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemEntry {
    /// A regular file with its bytes.
    File(Vec<u8>),
    /// A directory (its entries are the paths below it).
    Dir,
    /// A symbolic link to another path of the tree (absolute, or relative to the link's directory).
    Symlink(PathBuf),
    /// A FIFO: reading it would block, so the loader must never open it.
    Fifo,
    /// A file whose reads fail with this error kind and message.
    Unreadable(io::ErrorKind, String),
}

/// An in-memory [`FileSource`] for tests and fuzzing: read errors, FIFOs, loops and
/// dangling links can be injected without touching the real file system.
#[derive(Debug, Clone, Default)]
pub struct MemFiles {
    entries: std::collections::BTreeMap<PathBuf, MemEntry>,
}

impl MemFiles {
    /// An empty tree.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an entry, creating its parent directories.
    pub fn insert(&mut self, path: impl Into<PathBuf>, entry: MemEntry) -> &mut Self {
        let path = path.into();
        let mut parent = path.parent();
        while let Some(p) = parent {
            if p.as_os_str().is_empty() {
                break;
            }
            self.entries.entry(p.to_path_buf()).or_insert(MemEntry::Dir);
            parent = p.parent();
        }
        self.entries.insert(path, entry);
        self
    }

    /// Adds a regular file.
    pub fn file(&mut self, path: impl Into<PathBuf>, text: impl AsRef<[u8]>) -> &mut Self {
        self.insert(path, MemEntry::File(text.as_ref().to_vec()))
    }

    /// Resolves symlinks (at most 40, like Linux), returning the final path and entry.
    fn resolve(&self, path: &Path) -> io::Result<(PathBuf, &MemEntry)> {
        let mut current = normalize(path);
        for _ in 0..40 {
            // Resolve links in parent components first.
            let mut resolved = PathBuf::new();
            for comp in current.components() {
                resolved.push(comp);
                if resolved == current {
                    break;
                }
                if let Some(MemEntry::Symlink(target)) = self.entries.get(&resolved) {
                    let base = resolved.parent().map(Path::to_path_buf).unwrap_or_default();
                    let rest = current
                        .strip_prefix(&resolved)
                        .expect("prefix")
                        .to_path_buf();
                    resolved = normalize(&base.join(target)).join(rest);
                    break;
                }
            }
            if resolved != current {
                current = normalize(&resolved);
                continue;
            }
            match self.entries.get(&current) {
                Some(MemEntry::Symlink(target)) => {
                    let base = current.parent().map(Path::to_path_buf).unwrap_or_default();
                    current = normalize(&base.join(target));
                }
                Some(entry) => return Ok((current, entry)),
                None => {
                    return Err(io::Error::new(
                        io::ErrorKind::NotFound,
                        "No such file or directory (os error 2)",
                    ))
                }
            }
        }
        Err(io::Error::other(
            "Too many levels of symbolic links (os error 40)",
        ))
    }
}

fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for comp in path.components() {
        match comp {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

impl FileSource for MemFiles {
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        match self.resolve(path)?.1 {
            MemEntry::File(bytes) => Ok(bytes.clone()),
            MemEntry::Dir => Err(io::Error::other("Is a directory (os error 21)")),
            MemEntry::Fifo => panic!(
                "MemFiles: {} is a FIFO; opening it would block",
                path.display()
            ),
            MemEntry::Unreadable(kind, msg) => Err(io::Error::new(*kind, msg.clone())),
            MemEntry::Symlink(_) => unreachable!("resolved"),
        }
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        let (dir, entry) = self.resolve(path)?;
        if *entry != MemEntry::Dir {
            return Err(io::Error::other("Not a directory (os error 20)"));
        }
        Ok(self
            .entries
            .iter()
            .filter(|(p, _)| p.parent() == Some(dir.as_path()))
            .map(|(p, e)| DirEntry {
                name: p.file_name().expect("named").to_os_string(),
                kind: match e {
                    MemEntry::File(_) | MemEntry::Unreadable(..) => EntryKind::File,
                    MemEntry::Dir => EntryKind::Dir,
                    MemEntry::Symlink(_) => EntryKind::Symlink,
                    MemEntry::Fifo => EntryKind::Other,
                },
            })
            .collect())
    }

    fn stat(&self, path: &Path) -> io::Result<EntryKind> {
        Ok(match self.resolve(path)?.1 {
            MemEntry::File(_) | MemEntry::Unreadable(..) => EntryKind::File,
            MemEntry::Dir => EntryKind::Dir,
            MemEntry::Fifo => EntryKind::Other,
            MemEntry::Symlink(_) => unreachable!("resolved"),
        })
    }

    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        self.resolve(path).map(|(p, _)| p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_files_resolve_links_and_loops() {
        let mut fs = MemFiles::new();
        fs.file("/cfg/jobs/a.yaml", "periodics: []")
            .insert("/cfg/link", MemEntry::Symlink("jobs".into()))
            .insert("/cfg/jobs/loop", MemEntry::Symlink("..".into()))
            .insert(
                "/cfg/jobs/dangling.yaml",
                MemEntry::Symlink("nowhere.yaml".into()),
            );
        assert_eq!(
            fs.read(Path::new("/cfg/link/a.yaml")).unwrap(),
            b"periodics: []"
        );
        assert_eq!(
            fs.canonicalize(Path::new("/cfg/jobs/loop")).unwrap(),
            PathBuf::from("/cfg")
        );
        assert!(fs.stat(Path::new("/cfg/jobs/dangling.yaml")).is_err());
        let w = walk(&fs, Path::new("/cfg"));
        assert_eq!(w.files, vec![PathBuf::from("/cfg/jobs/a.yaml")]);
        // The loop through jobs/loop -> /cfg and the link -> jobs are both reported once.
        assert!(w
            .diagnostics
            .iter()
            .any(|d| d.message.contains("already read")));
        assert!(w.diagnostics.iter().any(|d| d.message.contains("dangling")));
    }
}
