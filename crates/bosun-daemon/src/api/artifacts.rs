//! `/api/v1/runs/{id}/artifacts[/{*path}]`: the files a run left on this
//! machine (a decorated local run's `started.json`, `finished.json`,
//! `build-log.txt` and `artifacts/`, in the directory its executor names,
//! [`Executor::artifacts_dir`](bosun_cluster::executor::Executor::artifacts_dir)).
//!
//! Those files are written by the job, so they are untrusted, names and all:
//! - a path is checked before the filesystem is touched: no `..` or `.`, no
//!   absolute path, no empty component in the middle, no NUL;
//! - it is walked one component at a time from the artifacts directory's
//!   descriptor, each opened with `O_NOFOLLOW` (`openat`): a symbolic link
//!   anywhere below the run's directory, the artifacts directory itself
//!   included, is never followed (it is listed as a link and answers 404),
//!   and nothing is resolved first and compared after (a job could swap a
//!   directory for a link in between);
//! - only directories (a JSON listing) and regular files (their bytes) are
//!   served; FIFOs, sockets and devices are opened without blocking and
//!   refused;
//! - no answer is ever `text/html`: text and JSON are served as such, anything
//!   else as `application/octet-stream` to download (`Content-Disposition:
//!   attachment`), and every answer, errors included, carries `nosniff`, a
//!   sandboxing `Content-Security-Policy` and `Cache-Control: no-store`.

use std::ffi::OsStr;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, MethodRouter};
use axum::Json;
use bosun_cluster::registry::ClusterDef;
use bosun_store::Run;
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};
use serde::Serialize;
use tokio::io::AsyncReadExt;

use super::error::{ApiError, ApiResult};
use super::runs::find;
use crate::daemon::Daemon;
use crate::runs::blocking;

/// At most this many entries in a directory listing (the first by name);
/// a listing cut short says `"truncated": true`.
const LISTING_LIMIT: usize = 50_000;

/// The size of the chunks a file is streamed in.
const CHUNK: usize = 64 * 1024;

/// `GET /api/v1/runs/{id}/artifacts` (and `.../artifacts/`): the listing of
/// the run's artifacts directory.
pub fn root() -> MethodRouter<Arc<Daemon>> {
    get(
        |State(daemon): State<Arc<Daemon>>, Path(id): Path<String>| async move {
            answer(&daemon, id, String::new()).await
        },
    )
    .layer(middleware::map_response(harden))
}

/// `GET /api/v1/runs/{id}/artifacts/{*path}`: a directory's listing or a
/// file's bytes.
pub fn at_path() -> MethodRouter<Arc<Daemon>> {
    get(
        |State(daemon): State<Arc<Daemon>>, Path((id, path)): Path<(String, String)>| async move {
            answer(&daemon, id, path).await
        },
    )
    .layer(middleware::map_response(harden))
}

/// The headers every answer of these routes carries, whatever it is (an
/// extractor's rejection and a 405 included): the browser must never sniff a
/// type, run a script or keep a copy.
async fn harden(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox; default-src 'none'"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

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
enum Found {
    /// A directory: its listing.
    Dir(Listing),
    /// A regular file, open, with its size when opened.
    File(OwnedFd, u64),
}

/// A directory's listing, as answered.
#[derive(Debug, Serialize)]
struct Listing {
    /// Sorted by name (bytewise).
    entries: Vec<Entry>,
    /// Whether entries past [`LISTING_LIMIT`] were left out.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    truncated: bool,
}

/// One entry of a listing.
#[derive(Debug, Serialize)]
struct Entry {
    /// The name (a name that is not UTF-8 is shown lossily).
    name: String,
    /// `file`, `dir`, `symlink` (listed, never followed) or `other`.
    #[serde(rename = "type")]
    kind: &'static str,
    /// A regular file's size in bytes (none for anything else).
    size: Option<u64>,
    /// The last modification, RFC 3339.
    modified: Option<String>,
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
fn open_root(root: &FsPath) -> Result<OwnedFd, WalkError> {
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
fn walk(root: &FsPath, names: &[String]) -> Result<Found, WalkError> {
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
        FileType::RegularFile => Ok(Found::File(fd, stat.st_size.max(0) as u64)),
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
        let modified = jiff::Timestamp::new(stat.st_mtime as i64, stat.st_mtime_nsec as i32)
            .ok()
            .map(|t| t.to_string());
        entries.push(Entry {
            name: OsStr::from_bytes(&name).to_string_lossy().into_owned(),
            kind,
            size,
            modified,
        });
    }
    Ok(Listing { entries, truncated })
}

/// How a file is served, by its name's extension: text and JSON as such;
/// anything else (HTML, SVG, XML, scripts, archives, unknown) as bytes to
/// download, never rendered on bosun's origin. A name without an extension
/// is text (`nosniff` keeps a browser from taking it for anything else).
fn content_type(name: &str) -> (&'static str, bool) {
    const TEXT: (&str, bool) = ("text/plain; charset=utf-8", false);
    let Some((_, ext)) = name.rsplit_once('.') else {
        return TEXT;
    };
    match ext.to_ascii_lowercase().as_str() {
        "txt" | "log" => TEXT,
        "json" => ("application/json", false),
        _ => ("application/octet-stream", true),
    }
}

/// The run's artifacts directory on this machine.
fn artifacts_dir(daemon: &Daemon, run: &Run) -> ApiResult<PathBuf> {
    let alias = run
        .cluster
        .clone()
        .unwrap_or_else(|| run.configured_cluster.clone());
    let clusters = daemon.shared.clusters();
    if let Some(ClusterDef::Kubernetes { .. }) = clusters.defs.get(&alias) {
        return Err(ApiError::NotFound(format!(
            "run {} is on the Kubernetes cluster {alias}: bosun keeps no artifacts of \
             Kubernetes runs; the pod's sidecar uploads them to the job's bucket",
            run.id
        )));
    }
    clusters
        .executors
        .get(&alias)
        .and_then(|exec| exec.artifacts_dir(&run.id))
        .ok_or_else(|| {
            ApiError::NotFound(format!(
                "run {} has no local artifacts (its cluster {alias} keeps none on this machine)",
                run.id
            ))
        })
}

/// The answer to a request for `path` among the artifacts of run `id`.
async fn answer(daemon: &Daemon, id: String, path: String) -> ApiResult {
    let names: Vec<String> = components(&path)
        .map_err(|e| ApiError::BadRequest(format!("bad artifact path {path:?}: {e}")))?
        .into_iter()
        .map(str::to_string)
        .collect();
    let run = find(daemon, id).await?;
    let root = artifacts_dir(daemon, &run)?;
    let last = names.last().cloned();
    let found = blocking(move || walk(&root, &names)).await;
    let shown = if path.is_empty() { "/" } else { &path };
    let found = match found {
        Ok(found) => found,
        Err(e) => {
            let refusal = match e {
                WalkError::NoRoot if run.state.is_final() => {
                    ApiError::NotFound(format!("run {} has no artifacts", run.id))
                }
                WalkError::NoRoot => {
                    ApiError::NotFound(format!("run {} has no artifacts yet", run.id))
                }
                WalkError::RootIsLink => ApiError::NotFound(format!(
                    "the artifacts directory of run {} is a symbolic link, which is not followed",
                    run.id
                )),
                WalkError::Missing => ApiError::NotFound(format!("no artifact {shown}")),
                WalkError::Link => ApiError::NotFound(format!(
                    "{shown} is (or goes through) a symbolic link: links are listed, never followed"
                )),
                WalkError::Special => ApiError::NotFound(format!(
                    "{shown} is neither a regular file nor a directory: not served"
                )),
                WalkError::Denied => ApiError::Forbidden(format!("bosun may not read {shown}")),
                WalkError::Io(e) => {
                    tracing::warn!(run = %run.id, path = %shown, error = %e, "reading artifacts");
                    let body =
                        Json(serde_json::json!({ "error": format!("reading {shown}: {e}") }));
                    return Ok((StatusCode::INTERNAL_SERVER_ERROR, body).into_response());
                }
            };
            return Err(refusal);
        }
    };
    match found {
        Found::Dir(listing) => Ok(Json(listing).into_response()),
        Found::File(fd, size) => {
            let (kind, attachment) = content_type(last.as_deref().unwrap_or_default());
            // What the file holds now: a file still being written is not
            // followed past the size it had when opened.
            let file = tokio::fs::File::from_std(std::fs::File::from(fd)).take(size);
            let stream = futures_util::stream::unfold(Some(file), |file| async move {
                let mut file = file?;
                let mut buf = vec![0u8; CHUNK];
                match file.read(&mut buf).await {
                    Ok(0) => None,
                    Ok(n) => {
                        buf.truncate(n);
                        Some((Ok(Bytes::from(buf)), Some(file)))
                    }
                    Err(e) => Some((Err::<Bytes, io::Error>(e), None)),
                }
            });
            let mut response =
                ([(header::CONTENT_TYPE, kind)], Body::from_stream(stream)).into_response();
            if attachment {
                response.headers_mut().insert(
                    header::CONTENT_DISPOSITION,
                    HeaderValue::from_static("attachment"),
                );
            }
            Ok(response)
        }
    }
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

    #[test]
    fn only_text_and_json_are_served_inline() {
        let text = ("text/plain; charset=utf-8", false);
        assert_eq!(content_type("build-log.txt"), text);
        assert_eq!(content_type("BUILD.LOG"), text);
        assert_eq!(content_type("stdout"), text);
        assert_eq!(content_type("finished.json"), ("application/json", false));
        for name in [
            "index.html",
            "a.HTM",
            "x.svg",
            "junit.xml",
            "app.js",
            "page.xhtml",
            "a.tar.gz",
            ".hidden",
            "trailing.",
        ] {
            assert_eq!(
                content_type(name),
                ("application/octet-stream", true),
                "{name}"
            );
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
}
