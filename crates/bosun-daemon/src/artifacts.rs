//! A run's artifacts on this machine: the files a decorated local run left
//! (`started.json`, `finished.json`, `build-log.txt` and `artifacts/`) in the
//! directory its executor names,
//! [`Executor::artifacts_dir`](bosun_cluster::executor::Executor::artifacts_dir).
//! [`open`] answers what a path below that directory is: a directory's
//! listing, a regular file (open), or why not ([`ArtifactError`]). The API
//! serves its answers (`http::api::artifacts`), the dashboard lists them on a
//! run's page; both call it, neither through the other. It knows nothing of
//! HTTP.
//!
//! Those files are written by the job, so they are untrusted, names and all:
//! - a path is checked before the filesystem is touched ([`ArtifactPath`]):
//!   no `..` or `.`, no absolute path, no empty component in the middle, no
//!   NUL;
//! - it is walked one component at a time from the artifacts directory's
//!   descriptor, each opened with `O_NOFOLLOW` (`openat`): a symbolic link
//!   anywhere below the run's directory, the artifacts directory itself
//!   included, is never followed (it is listed as a link, and opening it is
//!   refused), and nothing is resolved first and compared after (a job could
//!   swap a directory for a link in between);
//! - only directories and regular files are answered; FIFOs, sockets and
//!   devices are opened without blocking and refused.
//!
//! Kubernetes runs have no artifacts here: their pod's sidecar uploads them
//! to the job's bucket.
//!
//! Replicas on a shared store: the leader runs the local runs, and once one
//! has ended puts its files in the store ([`collect`], walked by the same
//! rules: regular files only, no link followed); on a replica where the
//! run's directory is not, [`find`] answers from the store
//! ([`from_store`]).

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use bosun_cluster::registry::ClusterDef;
use bosun_store::{Run, RunFile, RunFiles, Store};
use jiff::Timestamp;
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};
use serde::Serialize;

use crate::clusters::Clusters;

/// At most this many entries in a directory listing (the first by name);
/// a listing cut short says `"truncated": true`.
pub const LISTING_LIMIT: usize = 50_000;

/// Why a path is refused before the filesystem is touched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadPath {
    /// It starts with `/`.
    #[error("an absolute path is not allowed")]
    Absolute,
    /// It holds a NUL byte.
    #[error("a NUL byte is not allowed")]
    Nul,
    /// `a//b`.
    #[error("an empty path component is not allowed")]
    Empty,
    /// `.` or `..`.
    #[error("`.` and `..` are not allowed")]
    Dots,
}

/// The components of an artifact path (as decoded from the URL): `""` is
/// the artifacts directory itself, one trailing `/` is allowed (`dir/`).
pub fn components(path: &str) -> Result<Vec<&str>, BadPath> {
    if path.starts_with('/') {
        return Err(BadPath::Absolute);
    }
    if path.contains('\0') {
        return Err(BadPath::Nul);
    }
    let path = path.strip_suffix('/').unwrap_or(path);
    if path.is_empty() {
        return Ok(Vec::new());
    }
    path.split('/')
        .map(|c| match c {
            "" => Err(BadPath::Empty),
            "." | ".." => Err(BadPath::Dots),
            c => Ok(c),
        })
        .collect()
}

/// What a path turned out to be.
#[derive(Debug)]
pub enum Found {
    /// A directory: its listing.
    Dir(Listing),
    /// A regular file, open, with its size when opened (what a reader
    /// should stop at: a file still being written is not followed past it).
    File(File, u64),
    /// A file the store keeps (the run ran on another replica): its bytes.
    Stored(Vec<u8>),
}

/// A directory's listing (the API answers it as JSON as it is).
#[derive(Debug, Default, Serialize)]
pub struct Listing {
    /// Sorted by name (bytewise).
    pub entries: Vec<Entry>,
    /// Whether entries past [`LISTING_LIMIT`] were left out.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// One entry of a listing.
#[derive(Debug, Serialize)]
pub struct Entry {
    /// The name (a name that is not UTF-8 is shown lossily).
    pub name: String,
    /// `file`, `dir`, `symlink` (listed, never followed) or `other`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// A regular file's size in bytes (none for anything else).
    pub size: Option<u64>,
    /// The last modification (RFC 3339 in JSON).
    #[serde(serialize_with = "rfc3339")]
    pub modified: Option<Timestamp>,
}

/// A time as RFC 3339 text.
fn rfc3339<S: serde::Serializer>(t: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
    t.map(|t| t.to_string()).serialize(s)
}

/// Why the walk stopped.
#[derive(Debug)]
enum WalkError {
    /// The artifacts directory does not exist (yet).
    NoRoot,
    /// The artifacts directory itself is a symbolic link.
    RootIsLink,
    /// A component does not exist (or is not a directory where one is
    /// needed).
    Missing,
    /// A component is a symbolic link.
    Link,
    /// Neither a regular file nor a directory (a FIFO, a socket, ...).
    Special,
    /// bosun may not read it.
    Denied,
    /// Anything else.
    Io(io::Error),
}

impl From<rustix::io::Errno> for WalkError {
    fn from(e: rustix::io::Errno) -> Self {
        use rustix::io::Errno;
        match e {
            Errno::NOENT | Errno::NOTDIR | Errno::NAMETOOLONG => WalkError::Missing,
            Errno::LOOP => WalkError::Link,
            Errno::ACCESS | Errno::PERM => WalkError::Denied,
            e => WalkError::Io(e.into()),
        }
    }
}

/// Opens the artifacts directory `root` without following a link in its
/// last component: the directory above it is bosun's (the run's directory),
/// the artifacts directory may have been made, or replaced, by the job.
fn open_root(root: &Path) -> Result<OwnedFd, WalkError> {
    let dir_flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let (parent, name) = match (root.parent(), root.file_name()) {
        (Some(p), Some(n)) => (p, n),
        _ => return Err(WalkError::Io(io::Error::other("bad artifacts directory"))),
    };
    let parent = rustix::fs::open(parent, dir_flags, Mode::empty()).map_err(|e| match e {
        rustix::io::Errno::NOENT => WalkError::NoRoot,
        e => WalkError::from(e),
    })?;
    open_dir(&parent, name).map_err(|e| match e {
        WalkError::Missing => WalkError::NoRoot,
        WalkError::Link => WalkError::RootIsLink,
        other => other,
    })
}

/// Opens the directory `name` in `dir`, unless it is a link (or not a
/// directory).
fn open_dir(dir: &OwnedFd, name: impl rustix::path::Arg + Copy) -> Result<OwnedFd, WalkError> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => Ok(fd),
        // A link opened with `O_DIRECTORY` is "not a directory": say which,
        // looking at the entry itself, not following it.
        Err(rustix::io::Errno::NOTDIR) => {
            let link = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::Symlink);
            Err(if link {
                WalkError::Link
            } else {
                WalkError::Missing
            })
        }
        Err(e) => Err(e.into()),
    }
}

/// Walks `names` down from `root`, never following a link, and answers what
/// the last one is.
fn walk(root: &Path, names: &[String]) -> Result<Found, WalkError> {
    let mut dir = open_root(root)?;
    let Some((last, parents)) = names.split_last() else {
        return Ok(Found::Dir(list(dir)?));
    };
    for name in parents {
        dir = open_dir(&dir, name.as_str())?;
    }
    // Not knowing yet what it is: without blocking (a FIFO would wait for a
    // writer) and without becoming a controlling terminal.
    let fd = rustix::fs::openat(
        &dir,
        last.as_str(),
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
        Mode::empty(),
    )?;
    let stat = rustix::fs::fstat(&fd)?;
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::Directory => Ok(Found::Dir(list(fd)?)),
        FileType::RegularFile => Ok(Found::File(File::from(fd), stat.st_size.max(0) as u64)),
        _ => Err(WalkError::Special),
    }
}

/// The listing of the open directory `fd`: every entry as it is, links not
/// followed.
fn list(fd: OwnedFd) -> Result<Listing, WalkError> {
    let mut dir = Dir::new(fd)?;
    let mut names = Vec::new();
    for entry in dir.by_ref() {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(name.to_vec());
        }
    }
    names.sort();
    let truncated = names.len() > LISTING_LIMIT;
    names.truncate(LISTING_LIMIT);
    let fd = dir.fd()?;
    let mut entries = Vec::with_capacity(names.len());
    for name in names {
        let stat = match rustix::fs::statat(fd, name.as_slice(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            // Gone since it was read.
            Err(rustix::io::Errno::NOENT) => continue,
            Err(e) => return Err(e.into()),
        };
        let (kind, size) = match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => ("file", Some(stat.st_size.max(0) as u64)),
            FileType::Directory => ("dir", None),
            FileType::Symlink => ("symlink", None),
            _ => ("other", None),
        };
        let modified = Timestamp::new(stat.st_mtime as i64, stat.st_mtime_nsec as i32).ok();
        entries.push(Entry {
            name: OsStr::from_bytes(&name).to_string_lossy().into_owned(),
            kind,
            size,
            modified,
        });
    }
    Ok(Listing { entries, truncated })
}

/// A path below a run's artifacts directory, checked ([`components`]): `""`
/// is the directory itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactPath {
    /// As given.
    path: String,
    /// Its components, each a plain name.
    names: Vec<String>,
}

impl ArtifactPath {
    /// Checks `path` (as decoded from a URL) without touching the
    /// filesystem.
    pub fn parse(path: &str) -> Result<ArtifactPath, ArtifactError> {
        let names = components(path)
            .map_err(|why| ArtifactError::BadPath {
                path: path.to_string(),
                why,
            })?
            .into_iter()
            .map(str::to_string)
            .collect();
        Ok(ArtifactPath {
            path: path.to_string(),
            names,
        })
    }

    /// Its last component (none for the artifacts directory itself).
    pub fn file_name(&self) -> Option<&str> {
        self.names.last().map(String::as_str)
    }

    /// The path as errors show it: as given, `/` for the directory itself.
    fn shown(&self) -> String {
        if self.path.is_empty() {
            "/".into()
        } else {
            self.path.clone()
        }
    }
}

/// Why a run's artifacts, or one of them, cannot be had. Each says why in
/// words (its `Display`), naming the run or the path.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    /// The path is refused before the filesystem is touched.
    #[error("bad artifact path {path:?}: {why}")]
    BadPath {
        /// The path as given.
        path: String,
        /// Why.
        why: BadPath,
    },
    /// The run is on a Kubernetes cluster: its artifacts are in a bucket.
    #[error(
        "run {run} is on the Kubernetes cluster {cluster}: bosun keeps no artifacts of \
         Kubernetes runs; the pod's sidecar uploads them to the job's bucket"
    )]
    Kubernetes {
        /// The run's id.
        run: String,
        /// The cluster's alias.
        cluster: String,
    },
    /// The run's cluster keeps no artifacts on this machine.
    #[error("run {run} has no local artifacts (its cluster {cluster} keeps none on this machine)")]
    NotLocal {
        /// The run's id.
        run: String,
        /// The cluster's alias.
        cluster: String,
    },
    /// The artifacts directory does not exist (yet, while the run has not
    /// ended).
    #[error("run {run} has no artifacts{}", if *.ended { "" } else { " yet" })]
    NoArtifacts {
        /// The run's id.
        run: String,
        /// Whether the run has ended.
        ended: bool,
    },
    /// The artifacts directory itself is a symbolic link.
    #[error("the artifacts directory of run {run} is a symbolic link, which is not followed")]
    RootIsLink {
        /// The run's id.
        run: String,
    },
    /// No such file or directory (or a file where a directory is needed).
    #[error("no artifact {path}")]
    Missing {
        /// The path, `/` for the directory itself.
        path: String,
    },
    /// The path is, or goes through, a symbolic link.
    #[error("{path} is (or goes through) a symbolic link: links are listed, never followed")]
    Link {
        /// The path.
        path: String,
    },
    /// Neither a regular file nor a directory (a FIFO, a socket, ...).
    #[error("{path} is neither a regular file nor a directory: not served")]
    Special {
        /// The path.
        path: String,
    },
    /// bosun may not read it.
    #[error("bosun may not read {path}")]
    Denied {
        /// The path, `/` for the directory itself.
        path: String,
    },
    /// Reading failed otherwise.
    #[error("reading {path}: {source}")]
    Io {
        /// The path, `/` for the directory itself.
        path: String,
        /// What failed.
        source: io::Error,
    },
}

/// The artifacts directory of `run` on this machine, by its cluster's
/// executor among `clusters` (those in force).
pub fn dir(clusters: &Clusters, run: &Run) -> Result<PathBuf, ArtifactError> {
    let alias = run
        .cluster
        .clone()
        .unwrap_or_else(|| run.configured_cluster.clone());
    if let Some(ClusterDef::Kubernetes { .. }) = clusters.defs.get(&alias) {
        return Err(ArtifactError::Kubernetes {
            run: run.id.clone(),
            cluster: alias,
        });
    }
    clusters
        .executors
        .get(&alias)
        .and_then(|exec| exec.artifacts_dir(&run.id))
        .ok_or_else(|| ArtifactError::NotLocal {
            run: run.id.clone(),
            cluster: alias,
        })
}

/// What `path` is among the artifacts of `run` on this machine (its
/// directory by [`dir`]): a directory's listing or a regular file, open.
/// Blocking: it reads the filesystem.
pub fn open(clusters: &Clusters, run: &Run, path: &ArtifactPath) -> Result<Found, ArtifactError> {
    open_in(&dir(clusters, run)?, run, path)
}

/// As [`open`], and when this machine has no artifacts directory for the
/// run, from `store` if one is given (a store replicas share): the files
/// the replica that ran it put there. Blocking.
pub fn find(
    store: Option<&dyn Store>,
    clusters: &Clusters,
    run: &Run,
    path: &ArtifactPath,
) -> Result<Found, ArtifactError> {
    match (open(clusters, run, path), store) {
        (Err(e @ ArtifactError::NoArtifacts { .. }), Some(store)) => {
            from_store(store, run, path)?.ok_or(e)
        }
        (found, _) => found,
    }
}

/// What `path` is among the files `store` keeps for `run`: a directory's
/// listing (made from the files' paths) or a file's bytes; `None` when it
/// keeps none for the run.
pub fn from_store(
    store: &dyn Store,
    run: &Run,
    path: &ArtifactPath,
) -> Result<Option<Found>, ArtifactError> {
    let io = |e: bosun_store::StoreError| ArtifactError::Io {
        path: path.shown(),
        source: io::Error::other(e.to_string()),
    };
    let Some(files) = store.run_files(&run.id).map_err(io)? else {
        return Ok(None);
    };
    let joined = path.names.join("/");
    if files.files.iter().any(|f| f.path == joined) {
        return match store.run_file(&run.id, &joined).map_err(io)? {
            Some(file) => Ok(Some(Found::Stored(file.data))),
            // Replaced meanwhile.
            None => Err(ArtifactError::Missing { path: path.shown() }),
        };
    }
    let listing = stored_listing(&files, &joined);
    if listing.entries.is_empty() && !joined.is_empty() {
        return Err(ArtifactError::Missing { path: path.shown() });
    }
    Ok(Some(Found::Dir(listing)))
}

/// The listing of directory `dir` (`""`: the top) among stored files:
/// its files and, once each, the directories holding deeper ones.
fn stored_listing(files: &RunFiles, dir: &str) -> Listing {
    let prefix = if dir.is_empty() {
        String::new()
    } else {
        format!("{dir}/")
    };
    let mut entries: Vec<Entry> = Vec::new();
    for f in &files.files {
        let Some(rest) = f.path.strip_prefix(&prefix) else {
            continue;
        };
        match rest.split_once('/') {
            Some((sub, _)) => {
                if entries
                    .last()
                    .is_none_or(|e| e.name != sub || e.kind != "dir")
                {
                    entries.push(Entry {
                        name: sub.to_string(),
                        kind: "dir",
                        size: None,
                        modified: None,
                    });
                }
            }
            None => entries.push(Entry {
                name: rest.to_string(),
                kind: "file",
                size: Some(f.size),
                modified: f.modified,
            }),
        }
    }
    entries.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    entries.dedup_by(|a, b| a.name == b.name && a.kind == b.kind);
    let truncated = files.truncated || entries.len() > LISTING_LIMIT;
    entries.truncate(LISTING_LIMIT);
    Listing { entries, truncated }
}

/// At most this many files are collected from a run's artifacts.
const COLLECT_LIMIT: usize = 100_000;

/// Every regular file below `root` (a run's artifacts directory), walked as
/// [`open_in`] walks (no link followed, nothing but directories and regular
/// files), for a store to keep: their bytes read in path order while the
/// total stays within `limit`; and whether any was left out. `None` when
/// `root` does not exist. Blocking.
pub fn collect(root: &Path, limit: u64) -> Result<Option<(Vec<RunFile>, bool)>, io::Error> {
    let mut found: Vec<(Vec<String>, u64, Option<Timestamp>)> = Vec::new();
    let mut dirs: Vec<Vec<String>> = vec![Vec::new()];
    let mut left_out = false;
    while let Some(names) = dirs.pop() {
        let listing = match walk(root, &names) {
            Ok(Found::Dir(listing)) => listing,
            Err(WalkError::NoRoot) if names.is_empty() => return Ok(None),
            Err(WalkError::Io(e)) => return Err(e),
            // Replaced meanwhile, or not ours to read.
            _ => {
                left_out = true;
                continue;
            }
        };
        left_out |= listing.truncated;
        for e in listing.entries {
            let mut path = names.clone();
            path.push(e.name);
            match e.kind {
                "dir" => dirs.push(path),
                "file" if found.len() < COLLECT_LIMIT => {
                    found.push((path, e.size.unwrap_or(0), e.modified))
                }
                _ => left_out = true,
            }
        }
    }
    found.sort_by_cached_key(|f| f.0.join("/"));
    let mut total = 0u64;
    let mut files = Vec::new();
    for (names, size, modified) in found {
        total += size;
        if total > limit {
            left_out = true;
            break;
        }
        let data = match walk(root, &names) {
            Ok(Found::File(file, size)) => {
                use std::io::Read;
                let mut data = Vec::with_capacity(size as usize);
                file.take(size).read_to_end(&mut data)?;
                data
            }
            Err(WalkError::Io(e)) => return Err(e),
            _ => {
                left_out = true;
                continue;
            }
        };
        files.push(RunFile {
            path: names.join("/"),
            data,
            modified,
        });
    }
    Ok(Some((files, left_out)))
}

/// What `path` is below `root`, the artifacts directory of `run`: walked as
/// the module doc says, never leaving `root`. Blocking.
pub fn open_in(root: &Path, run: &Run, path: &ArtifactPath) -> Result<Found, ArtifactError> {
    walk(root, &path.names).map_err(|e| {
        let path = path.shown();
        match e {
            WalkError::NoRoot => ArtifactError::NoArtifacts {
                run: run.id.clone(),
                ended: run.state.is_final(),
            },
            WalkError::RootIsLink => ArtifactError::RootIsLink {
                run: run.id.clone(),
            },
            WalkError::Missing => ArtifactError::Missing { path },
            WalkError::Link => ArtifactError::Link { path },
            WalkError::Special => ArtifactError::Special { path },
            WalkError::Denied => ArtifactError::Denied { path },
            WalkError::Io(source) => {
                tracing::warn!(run = %run.id, path = %path, error = %source, "reading artifacts");
                ArtifactError::Io { path, source }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_split_into_plain_components() {
        assert_eq!(components(""), Ok(vec![]));
        assert_eq!(components("a"), Ok(vec!["a"]));
        assert_eq!(components("a/"), Ok(vec!["a"]));
        assert_eq!(
            components("artifacts/junit.xml"),
            Ok(vec!["artifacts", "junit.xml"])
        );
        // Only `.` and `..` themselves are dots; names with dots are names.
        assert_eq!(components("..a/b.."), Ok(vec!["..a", "b.."]));
        assert_eq!(components("..."), Ok(vec!["..."]));
        assert_eq!(components("a\\..\\b"), Ok(vec!["a\\..\\b"]));
    }

    #[test]
    fn dots_absolute_empty_and_nul_components_are_refused() {
        for (path, why) in [
            ("..", BadPath::Dots),
            ("../x", BadPath::Dots),
            ("a/../../x", BadPath::Dots),
            ("a/..", BadPath::Dots),
            ("./a", BadPath::Dots),
            ("a/./b", BadPath::Dots),
            ("/", BadPath::Absolute),
            ("/etc/passwd", BadPath::Absolute),
            ("a//b", BadPath::Empty),
            ("a/b//", BadPath::Empty),
            ("a\0b", BadPath::Nul),
            ("a/\0/b", BadPath::Nul),
        ] {
            assert_eq!(components(path), Err(why), "{path:?}");
        }
    }

    /// The walk itself, on real files: links are never followed, at the
    /// root, in the middle or at the end, and a FIFO does not block it.
    #[test]
    fn the_walk_never_follows_a_link_and_refuses_special_files() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("logs");
        let walk_to = |path: &str| {
            let names: Vec<String> = components(path)
                .unwrap()
                .into_iter()
                .map(String::from)
                .collect();
            walk(&root, &names)
        };
        assert!(matches!(walk_to(""), Err(WalkError::NoRoot)));
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/f.txt"), "bytes").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.join("a/passwd")).unwrap();
        std::os::unix::fs::symlink("b", root.join("a/linked")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            root.join("a/fifo"),
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        match walk_to("a/b/f.txt") {
            Ok(Found::File(_, 5)) => {}
            _ => panic!("a/b/f.txt is a file of 5 bytes"),
        }
        let Ok(Found::Dir(listing)) = walk_to("a/") else {
            panic!("a is a directory");
        };
        let kinds: Vec<(&str, &str)> = listing
            .entries
            .iter()
            .map(|e| (e.name.as_str(), e.kind))
            .collect();
        assert_eq!(
            kinds,
            [
                ("b", "dir"),
                ("fifo", "other"),
                ("linked", "symlink"),
                ("passwd", "symlink")
            ]
        );
        assert!(matches!(walk_to("a/passwd"), Err(WalkError::Link)));
        assert!(matches!(walk_to("a/linked"), Err(WalkError::Link)));
        assert!(matches!(walk_to("a/linked/f.txt"), Err(WalkError::Link)));
        assert!(matches!(walk_to("a/fifo"), Err(WalkError::Special)));
        assert!(matches!(walk_to("a/b/f.txt/x"), Err(WalkError::Missing)));
        assert!(matches!(walk_to("nothing"), Err(WalkError::Missing)));
        // The artifacts directory itself replaced by a link.
        std::fs::rename(&root, tmp.path().join("elsewhere")).unwrap();
        std::os::unix::fs::symlink("elsewhere", &root).unwrap();
        assert!(matches!(walk_to(""), Err(WalkError::RootIsLink)));
        assert!(matches!(walk_to("a/b/f.txt"), Err(WalkError::RootIsLink)));
    }

    /// A run as the store keeps it, in `state`.
    fn run(state: &str) -> Run {
        serde_json::from_value(serde_json::json!({
            "id": "3f2a", "build_id": "1700", "job": "unit", "job_type": "periodic",
            "configured_cluster": "default", "labels": {}, "annotations": {},
            "spec_hash": "h", "attempt": 0, "pod_revival_count": 0,
            "created_at": "2026-03-02T10:00:00Z", "state": state, "description": "",
            "extra_refs": []
        }))
        .unwrap()
    }

    /// [`open_in`], the checks and the walk together: no path leaves the
    /// artifacts directory (by `..`, by an absolute path or through a link),
    /// and a nested directory is listed, its files opened.
    #[test]
    fn open_in_never_leaves_the_artifacts_directory_and_lists_nested_ones() {
        use std::io::Read;
        let tmp = tempfile::tempdir().unwrap();
        let run_dir = tmp.path().join("3f2a");
        let root = run_dir.join("logs");
        let pending = run("pending");
        let at = |path: &str| ArtifactPath::parse(path).and_then(|p| open_in(&root, &pending, &p));
        // Before the run made its directory: none yet; once it ended: none.
        let none = at("").unwrap_err().to_string();
        assert_eq!(none, "run 3f2a has no artifacts yet");
        let ended = ArtifactPath::parse("").and_then(|p| open_in(&root, &run("success"), &p));
        assert_eq!(ended.unwrap_err().to_string(), "run 3f2a has no artifacts");

        std::fs::create_dir_all(root.join("artifacts/junit/deep")).unwrap();
        std::fs::write(root.join("artifacts/junit/report.json"), "{}").unwrap();
        std::fs::write(root.join("build-log.txt"), "bytes").unwrap();
        // Beside the artifacts directory and above it: bosun's, not the job's.
        std::fs::write(run_dir.join("secret.txt"), "run dir").unwrap();
        std::fs::write(tmp.path().join("secret.txt"), "above").unwrap();
        std::os::unix::fs::symlink("../../secret.txt", root.join("artifacts/out")).unwrap();
        std::os::unix::fs::symlink("..", root.join("up")).unwrap();

        for path in [
            "../secret.txt",
            "artifacts/../../secret.txt",
            "artifacts/junit/../../../../secret.txt",
            "..",
            "./../secret.txt",
        ] {
            assert!(
                matches!(
                    at(path),
                    Err(ArtifactError::BadPath {
                        why: BadPath::Dots,
                        ..
                    })
                ),
                "{path} is refused before the filesystem is touched"
            );
        }
        let absolute = tmp.path().join("secret.txt");
        assert!(matches!(
            at(absolute.to_str().unwrap()),
            Err(ArtifactError::BadPath {
                why: BadPath::Absolute,
                ..
            })
        ));
        for path in ["artifacts/out", "up/secret.txt", "up"] {
            assert!(
                matches!(at(path), Err(ArtifactError::Link { .. })),
                "{path} goes through a link"
            );
        }
        assert_eq!(
            at("../secret.txt").unwrap_err().to_string(),
            "bad artifact path \"../secret.txt\": `.` and `..` are not allowed"
        );

        let names = |found: Result<Found, ArtifactError>| match found {
            Ok(Found::Dir(listing)) => listing
                .entries
                .iter()
                .map(|e| (e.name.clone(), e.kind, e.size))
                .collect::<Vec<_>>(),
            other => panic!("a directory, not {other:?}"),
        };
        assert_eq!(
            names(at("artifacts/junit")),
            [
                ("deep".to_string(), "dir", None),
                ("report.json".to_string(), "file", Some(2))
            ]
        );
        assert_eq!(names(at("artifacts/junit/")), names(at("artifacts/junit")));
        assert_eq!(names(at("artifacts/junit/deep")), []);
        assert_eq!(
            names(at("")),
            [
                ("artifacts".to_string(), "dir", None),
                ("build-log.txt".to_string(), "file", Some(5)),
                ("up".to_string(), "symlink", None)
            ]
        );
        let Ok(Found::File(mut file, 2)) = at("artifacts/junit/report.json") else {
            panic!("report.json is a file of 2 bytes");
        };
        let mut text = String::new();
        file.read_to_string(&mut text).unwrap();
        assert_eq!(text, "{}");
        assert_eq!(
            at("artifacts/nothing").unwrap_err().to_string(),
            "no artifact artifacts/nothing"
        );
    }
}
