//! The per-cluster git mirrors the local executor's clones read from
//! (`bosun_injob::clone` has how a clone uses one).
//!
//! A mirror is a bare repository, one per clone URI, at
//! `MIRROR_ROOT/NAME.git` ([`mirror_dir`]; NAME is the URI made
//! file-name-safe plus a hash of it). Before a clone, under an exclusive
//! `flock` on `MIRROR_ROOT/NAME.lock` (so runs and threads sharing a mirror
//! take turns), the mirror is
//!
//! - created the first time: `git init --bare`, `uploadpack.allowFilter` and
//!   `uploadpack.allowAnySHA1InWant` (clones fetch with `--filter` and by
//!   SHA), `HEAD` pointing at `refs/bosun/HEAD`, and `bosun.mirrorOf` = the
//!   URI, written last so an interrupted creation is redone;
//! - brought up to date with what the clone will ask for:
//!   - when the clone fetches tags: `git fetch --prune URI
//!     +HEAD:refs/bosun/HEAD +refs/heads/*:refs/heads/*
//!     +refs/tags/*:refs/tags/*` (the remote's `HEAD` becomes the mirror's);
//!   - a SHA (`base_sha`, a pull's `sha`): nothing when the mirror has the
//!     commit, else `git fetch URI SHA` and `git update-ref
//!     refs/bosun/sha/SHA SHA`, which keeps it from garbage collection;
//!   - a name (`base_ref`, `pull/N/head`, a pull's `ref`): `git fetch URI
//!     NAME`, then `git update-ref FULL SHA`, FULL being the ref the remote
//!     resolved NAME to (read from the mirror's `FETCH_HEAD`), so the
//!     clone's `git fetch MIRROR NAME` resolves NAME to the same ref.
//!
//! Those commands are recorded at the head of the clone's record; a step
//! done by bosun itself that fails (creating the root, taking the lock) is
//! recorded as `bosun: WHAT` with its error, as Prow records its own steps
//! (`golang: ...`). A SHA already in the mirror needs no remote at all, so a
//! clone of fixed SHAs (with `skip_fetch_head`) works while the remote is
//! unreachable.
//!
//! The lock is held while the mirror is updated, not while the clone reads
//! it: a branch another run moves in between is fetched at its newer
//! commit, as a direct fetch a moment later would fetch it.
//!
//! A mirror belongs to the OS user that created it: git refuses to serve a
//! repository owned by someone else, and the lock and objects must be
//! writable. Callers that clone as several users give each its own root.
//!
//! Each use marks the mirror used (its lock file's modification time, set
//! under the lock), and a clone reading the mirror holds a shared `flock` on
//! `NAME.use` from before the update's lock is released until it is done.
//! [`prune`] removes the mirrors no clone has used since a cutoff, each only
//! when it gets both locks without waiting (exclusive), so a mirror being
//! updated or read is left for the next pass; the lock files stay (a process
//! waiting on one must find the same file its successor locks).

use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::runner::{fetch_head_lines, Failed, Runner, Scope, Step};

/// The mirror of `uri` under `root`: `root/NAME.git`.
pub fn mirror_dir(root: &Path, uri: &str) -> PathBuf {
    root.join(format!("{}.git", mirror_name(uri)))
}

/// The file name (without `.git`) of `uri`'s mirror: the URI without its
/// scheme and credentials, `[A-Za-z0-9._-]` kept and the rest as `_`, then
/// `-` and a 64-bit FNV-1a hash of the whole URI.
fn mirror_name(uri: &str) -> String {
    let rest = uri.split_once("://").map_or(uri, |(_, r)| r);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    let rest = rest.strip_suffix(".git").unwrap_or(rest);
    let safe: String = rest
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let safe = safe.trim_matches(|c| c == '_' || c == '.');
    let tail: String = {
        let chars: Vec<char> = safe.chars().collect();
        chars[chars.len().saturating_sub(64)..].iter().collect()
    };
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in uri.bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    if tail.is_empty() {
        format!("{hash:016x}")
    } else {
        format!("{tail}-{hash:016x}")
    }
}

/// What a pruning pass did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// The mirrors removed.
    pub removed: Vec<PathBuf>,
    /// Mirrors left because a clone was updating or reading them.
    pub busy: usize,
    /// Mirrors used since the cutoff, kept.
    pub kept: usize,
    /// What could not be done, per entry (the pass goes on past each).
    pub errors: Vec<String>,
}

/// When the mirror `dir` (lock file `lock`) was last used: the latest of
/// its lock file's mark and what a use writes (the mirror directory, its
/// `FETCH_HEAD`), so a mirror made before uses were marked is not taken for
/// an unused one.
fn last_used(dir: &Path, lock: &Path) -> Option<SystemTime> {
    [
        lock.to_path_buf(),
        dir.to_path_buf(),
        dir.join("FETCH_HEAD"),
    ]
    .iter()
    .filter_map(|p| fs::symlink_metadata(p).and_then(|m| m.modified()).ok())
    .max()
}

/// Opens the lock file `path` to lock it: never made here (a lock file this
/// process made could belong to the wrong user: a pass runs as the daemon,
/// clones as `run_as`), never through a symlink, a regular file only.
/// `None` when there is none.
fn open_lock(path: &Path) -> std::io::Result<Option<fs::File>> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = match OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(Some(file))
}

/// A file this process holds an `flock` on, unlocked when dropped.
///
/// Closing the file alone does not always release the lock: an `flock`
/// belongs to the open file, and a child another thread forks at that
/// moment holds a copy of it until it executes its program. Unlocking
/// releases it at once whoever else holds a copy.
struct Locked(fs::File);

impl Locked {
    /// Takes `op` on `file`, waiting if `op` waits.
    fn take(file: fs::File, op: rustix::fs::FlockOperation) -> rustix::io::Result<Self> {
        rustix::fs::flock(&file, op)?;
        Ok(Self(file))
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(&self.0, rustix::fs::FlockOperation::Unlock);
    }
}

/// Takes an exclusive `flock` on `file` without waiting: the lock, or
/// `None` when another holds it.
fn try_lock(file: fs::File) -> std::io::Result<Option<Locked>> {
    match Locked::take(file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(locked) => Ok(Some(locked)),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Removes `path` (a directory, or whatever else was left under its name)
/// without following a symlink.
fn remove_entry(path: &Path) -> std::io::Result<()> {
    if fs::symlink_metadata(path)?.is_dir() {
        fs::remove_dir_all(path)
    } else {
        fs::remove_file(path)
    }
}

/// Removes the mirrors under `root` that no clone has used since
/// `unused_since` (see the module's doc). A mirror is first renamed aside
/// (`NAME.git.removing`), then deleted, so a removal cut short never leaves
/// a half mirror under its name; leftovers are deleted by the next pass. An
/// entry that cannot be handled is reported in [`Pruned::errors`] and the
/// pass goes on.
pub fn prune(root: &Path, unused_since: SystemTime) -> std::io::Result<Pruned> {
    let mut out = Pruned::default();
    let entries = match fs::read_dir(root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    let mut names = Vec::new();
    for entry in entries {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name.ends_with(".git.removing") {
            if let Err(e) = remove_entry(&root.join(&name)) {
                out.errors
                    .push(format!("{}: {e}", root.join(&name).display()));
            }
        } else if let Some(stem) = name.strip_suffix(".git") {
            names.push(stem.to_string());
        }
    }
    names.sort();
    for name in names {
        let dir = root.join(format!("{name}.git"));
        let step = || -> std::io::Result<Option<bool>> {
            let lock_path = root.join(format!("{name}.lock"));
            // A clone always makes the lock file before the mirror: without
            // one, no clone made this; it is left alone.
            let Some(lock) = open_lock(&lock_path)? else {
                return Ok(None);
            };
            let Some(_lock) = try_lock(lock)? else {
                return Ok(Some(false));
            };
            let mut _in_use = None;
            if let Some(file) = open_lock(&root.join(format!("{name}.use")))? {
                match try_lock(file)? {
                    Some(locked) => _in_use = Some(locked),
                    None => return Ok(Some(false)),
                }
            }
            if last_used(&dir, &lock_path).is_some_and(|t| t >= unused_since) {
                return Ok(None);
            }
            let aside = root.join(format!("{name}.git.removing"));
            fs::rename(&dir, &aside)?;
            remove_entry(&aside)?;
            Ok(Some(true))
        };
        match step() {
            Ok(None) => out.kept += 1,
            Ok(Some(false)) => out.busy += 1,
            Ok(Some(true)) => out.removed.push(dir),
            Err(e) => out.errors.push(format!("{}: {e}", dir.display())),
        }
    }
    Ok(out)
}

/// What a clone will fetch from the mirror.
pub struct Want {
    /// The clone fetches the tags (and `HEAD`).
    pub heads_and_tags: bool,
    /// Its base: `base_sha`, else `base_ref`.
    pub base: String,
    /// What each pull's fetch asks for.
    pub pulls: Vec<String>,
}

/// A mirror ready for one clone.
pub struct Prepared {
    /// `file://MIRROR`.
    url: String,
    /// How git names the mirror in `FETCH_HEAD` (the URL without `.git`).
    mirror_text: String,
    /// How git names the remote in `FETCH_HEAD`, once known.
    origin_text: Option<String>,
    /// The shared lock on `NAME.use`, held while the clone reads the mirror
    /// (released when this is dropped): [`prune`] leaves it alone.
    _in_use: Locked,
}

impl Prepared {
    /// The clone's configuration key sending the remote's URI to the
    /// mirror: `url.file://MIRROR.insteadOf`.
    pub fn insteadof_key(&self) -> String {
        format!("url.{}.insteadOf", self.url)
    }

    /// Replaces the mirror's URL by the remote's in a clone's `FETCH_HEAD`,
    /// so that `git merge FETCH_HEAD` writes the message a fetch from the
    /// remote would have given.
    pub fn rewrite_fetch_head(&self, path: &Path) {
        let Some(origin) = &self.origin_text else {
            return;
        };
        let suffix = format!(" of {}", self.mirror_text);
        let mut changed = false;
        let mut text = String::new();
        for (object, flag, desc) in fetch_head_lines(path) {
            let desc = if desc == self.mirror_text {
                changed = true;
                origin.clone()
            } else if let Some(what) = desc.strip_suffix(&suffix) {
                changed = true;
                format!("{what} of {origin}")
            } else {
                desc
            };
            text.push_str(&format!("{object}\t{flag}\t{desc}\n"));
        }
        if changed {
            // A failed write leaves the mirror's URL in the message; the
            // clone itself is unaffected.
            let _ = fs::write(path, text);
        }
    }
}

/// Brings `uri`'s mirror under `root` up to date for a clone wanting
/// `want`, recording the commands in `runner` (see the module's doc).
pub fn prepare(
    root: &Path,
    uri: &str,
    want: &Want,
    runner: &mut Runner,
) -> Result<Prepared, Failed> {
    fs::create_dir_all(root).map_err(|e| {
        runner.fail(
            format!("bosun: create mirror root {}", root.display()),
            e.to_string(),
        )
    })?;
    let root = root.canonicalize().map_err(|e| {
        runner.fail(
            format!("bosun: create mirror root {}", root.display()),
            e.to_string(),
        )
    })?;
    let name = mirror_name(uri);
    let dir = root.join(format!("{name}.git"));
    let lock_path = root.join(format!("{name}.lock"));
    let lock = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(|e| {
            runner.fail(
                format!("bosun: lock {}", lock_path.display()),
                e.to_string(),
            )
        })?;
    let lock = Locked::take(lock, rustix::fs::FlockOperation::LockExclusive).map_err(|e| {
        runner.fail(
            format!("bosun: lock {}", lock_path.display()),
            std::io::Error::from(e).to_string(),
        )
    })?;
    // Used now (see `prune`); a mark that cannot be set only makes the
    // mirror look older.
    let _ = lock.0.set_modified(SystemTime::now());
    // Read from now until the clone is done: taken under the update's lock,
    // which `prune` holds whenever it takes this one, so it never waits.
    let use_path = root.join(format!("{name}.use"));
    let in_use = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&use_path)
        .map_err(|e| runner.fail(format!("bosun: lock {}", use_path.display()), e.to_string()))?;
    let in_use = Locked::take(in_use, rustix::fs::FlockOperation::LockShared).map_err(|e| {
        runner.fail(
            format!("bosun: lock {}", use_path.display()),
            std::io::Error::from(e).to_string(),
        )
    })?;

    let url = format!("file://{}", dir.display());
    let mut mirror = Prepared {
        mirror_text: url.strip_suffix(".git").unwrap_or(&url).to_string(),
        url,
        origin_text: None,
        _in_use: in_use,
    };
    let git = |args: &[&str], scope: Scope, retry: bool| Step {
        dir: dir.clone(),
        env: Vec::new(),
        program: "git",
        args: args.iter().map(|a| a.to_string()).collect(),
        scope,
        retry,
    };

    // Created (completely) before?
    let settings = if dir.is_dir() {
        runner
            .quiet(&git(
                &["config", "--get-regexp", r"^bosun\."],
                Scope::Local,
                false,
            ))
            .unwrap_or_default()
    } else {
        String::new()
    };
    let setting = |key: &str| {
        settings.lines().find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            k.eq_ignore_ascii_case(key).then(|| v.to_string())
        })
    };
    let known_text = setting("bosun.fetchheadurl");
    match setting("bosun.mirrorof") {
        Some(of) if of == uri => {}
        Some(of) => {
            return Err(runner.fail(
                format!("bosun: use mirror {}", dir.display()),
                format!("the mirror is of {of}, not of {uri}"),
            ))
        }
        None => {
            runner.run(Step {
                dir: root.clone(),
                args: vec!["init".into(), "--bare".into(), format!("{name}.git")],
                ..git(&[], Scope::Local, false)
            })?;
            runner.run(git(
                &["config", "uploadpack.allowFilter", "true"],
                Scope::Local,
                false,
            ))?;
            runner.run(git(
                &["config", "uploadpack.allowAnySHA1InWant", "true"],
                Scope::Local,
                false,
            ))?;
            runner.run(git(
                &["symbolic-ref", "HEAD", "refs/bosun/HEAD"],
                Scope::Local,
                false,
            ))?;
            runner.run(git(&["config", "bosun.mirrorOf", uri], Scope::Local, false))?;
        }
    }

    let fetch_head = dir.join("FETCH_HEAD");
    // The first line of the mirror's FETCH_HEAD after a fetch from `uri`.
    let fetched = || fetch_head_lines(&fetch_head).into_iter().next();

    // `git fetch [--upload-pack=...]` from `uri`.
    let upload_pack = root_owned_upload_pack(uri);
    let fetch = |rest: &[&str]| {
        let mut args = vec!["fetch"];
        args.extend(upload_pack.as_deref());
        args.extend(rest);
        git(&args, Scope::Remote, true)
    };
    if want.heads_and_tags {
        runner.run(fetch(&[
            "--prune",
            uri,
            "+HEAD:refs/bosun/HEAD",
            "+refs/heads/*:refs/heads/*",
            "+refs/tags/*:refs/tags/*",
        ]))?;
        if let Some((_, _, desc)) = fetched() {
            learn(&desc, &mut mirror);
        }
    }
    for x in std::iter::once(&want.base).chain(&want.pulls) {
        if is_full_sha(x) {
            let present = runner
                .quiet(&git(
                    &["cat-file", "-e", &format!("{x}^{{commit}}")],
                    Scope::Local,
                    false,
                ))
                .is_ok();
            if present {
                continue;
            }
            runner.run(fetch(&[uri, x]))?;
            if let Some((_, _, desc)) = fetched() {
                learn(&desc, &mut mirror);
            }
            runner.run(git(
                &["update-ref", &format!("refs/bosun/sha/{x}"), x],
                Scope::Local,
                false,
            ))?;
        } else {
            runner.run(fetch(&[uri, x]))?;
            let Some((object, _, desc)) = fetched() else {
                return Err(runner.fail(
                    format!("bosun: read {}", fetch_head.display()),
                    format!("git fetch {uri} {x} wrote nothing"),
                ));
            };
            learn(&desc, &mut mirror);
            let full = resolved_name(&desc)
                .filter(|f| f.starts_with("refs/"))
                .unwrap_or_else(|| format!("refs/bosun/sha/{object}"));
            runner.run(git(&["update-ref", &full, &object], Scope::Local, false))?;
        }
    }

    match (&mirror.origin_text, &known_text) {
        (Some(text), known) if known.as_ref() != Some(text) => {
            runner.run(git(
                &["config", "bosun.fetchHeadUrl", text],
                Scope::Local,
                false,
            ))?;
        }
        (None, Some(known)) => mirror.origin_text = Some(known.clone()),
        _ => {}
    }
    drop(lock);
    Ok(mirror)
}

/// Keeps how git named the remote in a `FETCH_HEAD` description (all of
/// it for the remote's `HEAD`, else what follows `' of `).
fn learn(desc: &str, mirror: &mut Prepared) {
    let text = desc.split_once("' of ").map_or(desc, |(_, url)| url);
    mirror.origin_text = Some(text.to_string());
}

/// Whether `x` is a whole SHA-1 or SHA-256 object name.
fn is_full_sha(x: &str) -> bool {
    matches!(x.len(), 40 | 64) && x.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The full name of the ref a `FETCH_HEAD` description names (`branch 'x'
/// of URL` is `refs/heads/x`); `refs/bosun/HEAD` for the remote's `HEAD`
/// (a description that is only the URL).
fn resolved_name(desc: &str) -> Option<String> {
    let Some((named, _)) = desc.split_once("' of ") else {
        return Some("refs/bosun/HEAD".into());
    };
    for (kind, prefix) in [
        ("branch '", "refs/heads/"),
        ("tag '", "refs/tags/"),
        ("remote-tracking branch '", "refs/remotes/"),
        ("'", ""),
    ] {
        if let Some(what) = named.strip_prefix(kind) {
            return Some(format!("{prefix}{what}"));
        }
    }
    None
}

/// For a fetch from a repository on this machine that root owns, by
/// another user (a local cluster's job under `run_as`, cloning the checkout
/// its configuration names): the `--upload-pack` that lets git serve it.
/// git refuses to read a repository another user owns ("dubious
/// ownership"), so that its configuration cannot run code as the reader;
/// root could run anything as any user anyway, so trusting root's
/// repositories gives nothing away. Only that fetch's upload-pack trusts
/// it (`safe.directory` from its own command line); the user's
/// configuration is untouched. `None` for a remote URL, a repository of
/// another owner, or when running as root.
pub fn root_owned_upload_pack(uri: &str) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    if rustix::process::geteuid().is_root() {
        return None;
    }
    let path = match uri.strip_prefix("file://") {
        Some(p) => p,
        None if !uri.contains("://") && uri.starts_with('/') => uri,
        None => return None,
    };
    let owner = fs::metadata(path).ok()?.uid();
    (owner == 0).then(|| "--upload-pack=git -c safe.directory=* upload-pack".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_readable_stable_and_distinct() {
        let a = mirror_name("https://github.com/kubernetes/test-infra.git");
        assert!(a.starts_with("github.com_kubernetes_test-infra-"), "{a}");
        assert_eq!(
            a,
            mirror_name("https://github.com/kubernetes/test-infra.git")
        );
        assert_ne!(a, mirror_name("https://github.com/kubernetes/test-infra"));
        assert_eq!(
            mirror_name("https://user:secret@example.com/a.git")
                .split('-')
                .next(),
            Some("example.com_a")
        );
        // FNV-1a 64 of the empty string is its offset basis.
        assert_eq!(mirror_name(""), "cbf29ce484222325");
        assert_eq!(
            mirror_dir(Path::new("/m"), "file:///srv/r.git"),
            Path::new(&format!("/m/{}.git", mirror_name("file:///srv/r.git")))
        );
    }

    #[test]
    fn fetch_head_descriptions_name_the_resolved_ref() {
        let cases = [
            (
                "branch 'main' of https://github.com/o/r",
                Some("refs/heads/main"),
            ),
            (
                "tag 'v1.0' of https://github.com/o/r",
                Some("refs/tags/v1.0"),
            ),
            (
                "remote-tracking branch 'x/y' of file:///r",
                Some("refs/remotes/x/y"),
            ),
            ("'refs/pull/1/head' of file:///r", Some("refs/pull/1/head")),
            ("file:///r", Some("refs/bosun/HEAD")),
        ];
        for (desc, want) in cases {
            assert_eq!(resolved_name(desc).as_deref(), want, "{desc}");
        }
        assert!(is_full_sha(&"a".repeat(40)));
        assert!(!is_full_sha("abc123"));
    }
}
