//! A bare mirror per followed repository, `ROOT/ORG/NAME.git`, holding the
//! followed branch and nothing else ([`Mirror::sync`], [`follow`]).
//!
//! - **Targeted**: one `git fetch --no-tags +refs/heads/B:refs/heads/B`
//!   from the remote (credentials as [`super::remote`] gives them), `HEAD`
//!   pointing at that branch; no tags, no other refs. When the mirror's
//!   branch already is at the remote's head, nothing is fetched.
//! - **Kept**: a mirror is re-opened after a restart, not cloned again.
//! - **Whole or absent**: the first fetch (the clone) goes into
//!   `NAME.git.new`, renamed to `NAME.git` only once it succeeded; a clone
//!   that fails is removed, and the caller tries again later with a
//!   [`Backoff`]. A `NAME.git.new` found at the start is what a killed
//!   clone left: removed. A `NAME.git` that is not a repository is moved
//!   aside (`NAME.git.removing`) and removed, and the clone starts over.
//! - **Never wedged**: every sync of a mirror holds an exclusive lock on
//!   `NAME.lock` (an OS file lock, released when its process dies, so
//!   never stale), under which any git lock file in the mirror is what a
//!   killed git left, and is removed before git runs.
//!
//! History is kept whole (no shallow fetch), so a commit applied earlier
//! can be compared with a new head ([`is_ancestor`]): after a force-push
//! the new head does not descend from it.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bosun_git::repo::{is_branch_name, GitError, Repo};
use bosun_git::runner::Command;

use super::remote::{ErrorKind, FollowError, Head, Remote};

/// A repository's mirror.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mirror {
    repo: Repo,
}

/// What a [`Mirror::sync`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Synced {
    /// The mirror.
    pub mirror: Mirror,
    /// The branch followed.
    pub branch: String,
    /// The branch's commit in the mirror now: the head asked for, or a
    /// newer one when the branch moved between `ls-remote` and the fetch.
    pub commit: String,
    /// Whether the mirror was made now (a clone).
    pub cloned: bool,
    /// Whether anything was fetched.
    pub fetched: bool,
    /// The commands that reached the remote, as recorded (secrets
    /// redacted).
    pub commands: Vec<Command>,
}

/// A local failure (the file system) under `root`, as a [`FollowError`].
pub(crate) fn local_error(
    root: &Path,
    remote: &Remote,
    what: String,
    e: &dyn std::fmt::Display,
) -> FollowError {
    remote.error(
        ErrorKind::Local,
        format!("{what}: {e}"),
        format!(
            "that {} is writable by the user bosun runs as and has space",
            root.display()
        ),
    )
}

/// The exclusive lock on `remote`'s mirror under `root` (`ROOT/ORG/NAME.lock`,
/// an OS file lock: released when dropped or when the process dies), with
/// the mirror's parent directory (made if missing) and name.
pub(crate) fn lock_mirror(
    root: &Path,
    remote: &Remote,
) -> Result<(File, PathBuf, String), FollowError> {
    let local = |what: String, e: &dyn std::fmt::Display| local_error(root, remote, what, e);
    let Some((org, name)) = split_repo(&remote.repo) else {
        return Err(remote.error(
            ErrorKind::Local,
            format!("{:?} is not ORG/NAME", remote.repo),
            "the repository's name: ORG/NAME, letters, digits, '.', '_' and '-'",
        ));
    };
    let org_dir = root.join(org);
    fs::create_dir_all(&org_dir)
        .map_err(|e| local(format!("cannot create {}", org_dir.display()), &e))?;
    let lock_path = org_dir.join(format!("{name}.lock"));
    let lock = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(|e| local(format!("cannot open {}", lock_path.display()), &e))?;
    lock.lock()
        .map_err(|e| local(format!("cannot lock {}", lock_path.display()), &e))?;
    Ok((lock, org_dir, name.to_string()))
}

/// `org/name` split, each part a plain directory name (letters, digits,
/// `.`, `_`, `-`; not starting with `.`).
pub(crate) fn split_repo(repo: &str) -> Option<(&str, &str)> {
    let (org, name) = repo.split_once('/')?;
    let plain = |s: &str| {
        !s.is_empty()
            && !s.starts_with('.')
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    };
    (plain(org) && plain(name)).then_some((org, name))
}

/// Removes `path` (a directory or anything else) if it is there, without
/// following a symlink.
fn remove_entry(path: &Path) -> std::io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

impl Mirror {
    /// Where `repo`'s (`org/name`) mirror is under `root`:
    /// `ROOT/ORG/NAME.git`. `None` for a name that is not `org/name` of
    /// plain directory names.
    pub fn path(root: &Path, repo: &str) -> Option<PathBuf> {
        let (org, name) = split_repo(repo)?;
        Some(root.join(org).join(format!("{name}.git")))
    }

    /// The mirror of `repo` under `root` as a previous sync left it, if
    /// there is one (`None` before the first successful clone).
    pub fn open(root: &Path, repo: &str) -> Option<Mirror> {
        let dir = Mirror::path(root, repo)?;
        Repo::open(dir).ok().map(|repo| Mirror { repo })
    }

    /// The mirror in `repo` (crate-internal: a mirror is made by a sync
    /// or a pull request's fetch).
    pub(crate) fn from_repo(repo: Repo) -> Mirror {
        Mirror { repo }
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        self.repo.dir()
    }

    /// Its repository.
    pub fn repo(&self) -> &Repo {
        &self.repo
    }

    /// Whether `older` is `newer` or an ancestor of it (see
    /// [`is_ancestor`]).
    pub fn is_ancestor(&self, older: &str, newer: &str) -> Result<bool, GitError> {
        self.repo.is_ancestor(older, newer)
    }

    /// Brings `remote`'s mirror under `root` to `head` (see the module's
    /// doc): cloned the first time, re-opened after, fetched when its
    /// branch is not at `head.commit`.
    pub fn sync(root: &Path, remote: &Remote, head: &Head) -> Result<Synced, FollowError> {
        if !is_branch_name(&head.branch) {
            return Err(remote.error(
                ErrorKind::NotFound,
                format!("{:?} is not a branch name git accepts", head.branch),
                "the branch configured for the repository",
            ));
        }
        let local = |what: String, e: &dyn std::fmt::Display| local_error(root, remote, what, e);
        let (lock, org_dir, name) = lock_mirror(root, remote)?;
        let dir = org_dir.join(format!("{name}.git"));
        let new = org_dir.join(format!("{name}.git.new"));
        let aside = org_dir.join(format!("{name}.git.removing"));
        for leftover in [&new, &aside] {
            remove_entry(leftover)
                .map_err(|e| local(format!("cannot remove {}", leftover.display()), &e))?;
        }
        let existing = match fs::symlink_metadata(&dir) {
            Ok(_) => match Repo::open(&dir) {
                Ok(repo) => Some(repo),
                Err(_) => {
                    // Not a repository (made by hand, or by something
                    // else): cloned again.
                    fs::rename(&dir, &aside)
                        .and_then(|()| remove_entry(&aside))
                        .map_err(|e| local(format!("cannot remove {}", dir.display()), &e))?;
                    None
                }
            },
            Err(_) => None,
        };
        // Read now (a rotated token is used at once).
        let env = remote.env()?;
        let branch_ref = format!("refs/heads/{}", head.branch);
        let refspec = format!("+{branch_ref}:{branch_ref}");
        let mut commands = Vec::new();
        let git_local = |what: &str, e: &GitError| {
            remote.error(
                ErrorKind::Local,
                format!("{what}: {e}"),
                format!("the mirror {}", dir.display()),
            )
        };

        let (repo, cloned, fetched) = match existing {
            Some(repo) => {
                repo.clear_stale_locks()
                    .map_err(|e| local(format!("cannot clear {}", dir.display()), &e))?;
                let at = repo
                    .resolve(&branch_ref)
                    .map_err(|e| git_local("cannot read the mirror", &e))?;
                let fetched = at.as_deref() != Some(head.commit.as_str());
                if fetched {
                    let record = repo
                        .fetch_with(&remote.clone_uri, &[&refspec], &env)
                        .map_err(|e| {
                            remote.git_error(&format!("fetch branch {}", head.branch), &e)
                        })?;
                    commands.push(record);
                }
                if repo.config("bosun.head").ok().flatten().as_deref() != Some(branch_ref.as_str())
                {
                    // Another branch followed now: it alone is kept.
                    let others = repo
                        .refs()
                        .map_err(|e| git_local("cannot list the mirror's refs", &e))?;
                    for other in others.iter().filter(|r| **r != branch_ref) {
                        repo.delete_ref(other)
                            .map_err(|e| git_local("cannot delete a ref", &e))?;
                    }
                    repo.set_head(&branch_ref)
                        .and_then(|()| repo.set_config("bosun.head", &branch_ref))
                        .map_err(|e| git_local("cannot point HEAD at the branch", &e))?;
                }
                (repo, false, fetched)
            }
            None => {
                let made = (|| {
                    let repo = Repo::open_or_init(&new)
                        .map_err(|e| git_local("cannot create the mirror", &e))?;
                    let record = repo
                        .fetch_with(&remote.clone_uri, &[&refspec], &env)
                        .map_err(|e| {
                            remote.git_error(&format!("clone branch {}", head.branch), &e)
                        })?;
                    commands.push(record);
                    repo.set_head(&branch_ref)
                        .and_then(|()| repo.set_config("bosun.head", &branch_ref))
                        .and_then(|()| repo.set_config("bosun.remote", &remote.url()))
                        .map_err(|e| git_local("cannot set up the mirror", &e))?;
                    fs::rename(&new, &dir)
                        .map_err(|e| local(format!("cannot rename {}", new.display()), &e))?;
                    Repo::open(&dir).map_err(|e| git_local("cannot open the mirror", &e))
                })();
                match made {
                    Ok(repo) => (repo, true, true),
                    Err(e) => {
                        // Nothing half-made stays: the next try starts clean.
                        let _ = remove_entry(&new);
                        return Err(e);
                    }
                }
            }
        };
        let commit = repo
            .resolve(&branch_ref)
            .map_err(|e| git_local("cannot read the mirror", &e))?
            .ok_or_else(|| {
                remote.error(
                    ErrorKind::NotFound,
                    format!("the fetch brought no branch {}", head.branch),
                    "that the branch still exists on the remote",
                )
            })?;
        drop(lock);
        Ok(Synced {
            mirror: Mirror { repo },
            branch: head.branch.clone(),
            commit,
            cloned,
            fetched,
            commands,
        })
    }
}

/// The remote's head (`ls-remote`), then its mirror under `root` brought
/// to it ([`Mirror::sync`]); the records of both commands in
/// [`Synced::commands`].
pub fn follow(root: &Path, remote: &Remote) -> Result<Synced, FollowError> {
    let mut commands = Vec::new();
    let head = remote.head_recorded(&mut commands)?;
    let mut synced = Mirror::sync(root, remote, &head)?;
    commands.append(&mut synced.commands);
    synced.commands = commands;
    Ok(synced)
}

/// Whether `older` is `newer` or one of its ancestors in the bare
/// repository at `repo_dir` (`git merge-base --is-ancestor`): a snapshot at
/// `newer` may replace one applied at `older` when it is; after a
/// force-push it is not. An `older` the mirror does not have is no
/// ancestor (a mirror holds every ancestor of its commits); a `newer` it
/// does not have is an error.
pub fn is_ancestor(repo_dir: &Path, older: &str, newer: &str) -> Result<bool, GitError> {
    Repo::open(repo_dir)?.is_ancestor(older, newer)
}

/// When to try again after failures: a delay from [`Backoff::initial`],
/// doubled at each failure up to [`Backoff::max`], back to none after a
/// success. Plain data: the caller passes the time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff {
    /// The delay after the first failure.
    pub initial: Duration,
    /// The longest delay.
    pub max: Duration,
    failures: u32,
    not_before: Option<Instant>,
}

impl Default for Backoff {
    /// 1 s doubling to 5 min.
    fn default() -> Self {
        Backoff::new(Duration::from_secs(1), Duration::from_secs(300))
    }
}

impl Backoff {
    /// No failure yet; delays from `initial` doubling to `max`.
    pub fn new(initial: Duration, max: Duration) -> Self {
        Backoff {
            initial,
            max,
            failures: 0,
            not_before: None,
        }
    }

    /// When the next attempt may start: `now` unless a failure's delay
    /// runs past it.
    pub fn next_attempt(&self, now: Instant) -> Instant {
        self.not_before.map_or(now, |t| t.max(now))
    }

    /// Whether an attempt may start at `now`.
    pub fn ready(&self, now: Instant) -> bool {
        self.next_attempt(now) <= now
    }

    /// Records a failure at `now`; the delay before the next attempt.
    pub fn failed(&mut self, now: Instant) -> Duration {
        let doublings = self.failures.min(31);
        let delay = self
            .initial
            .checked_mul(1u32 << doublings)
            .unwrap_or(self.max)
            .min(self.max);
        self.failures = self.failures.saturating_add(1);
        self.not_before = Some(now + delay);
        delay
    }

    /// Records a success: the next failure waits [`Backoff::initial`] again.
    pub fn succeeded(&mut self) {
        self.failures = 0;
        self.not_before = None;
    }

    /// Failures since the last success.
    pub fn failures(&self) -> u32 {
        self.failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain_directories() {
        assert_eq!(split_repo("acme/widgets"), Some(("acme", "widgets")));
        assert_eq!(split_repo("a-b/c.d_e"), Some(("a-b", "c.d_e")));
        for bad in [
            "acme", "acme/", "/w", "a/b/c", "../w", "a/..", "a/.git", "a b/c",
        ] {
            assert_eq!(split_repo(bad), None, "{bad}");
        }
        assert_eq!(
            Mirror::path(Path::new("/m"), "acme/widgets"),
            Some(PathBuf::from("/m/acme/widgets.git"))
        );
    }

    #[test]
    fn backoff_doubles_to_its_cap_and_resets() {
        let t0 = Instant::now();
        let mut b = Backoff::default();
        assert!(b.ready(t0));
        assert_eq!(b.next_attempt(t0), t0);
        let delays: Vec<u64> = (0..11).map(|_| b.failed(t0).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        assert_eq!(b.failures(), 11);
        assert_eq!(b.next_attempt(t0), t0 + Duration::from_secs(300));
        assert!(!b.ready(t0 + Duration::from_secs(299)));
        assert!(b.ready(t0 + Duration::from_secs(300)));
        let later = t0 + Duration::from_secs(1000);
        assert_eq!(b.next_attempt(later), later, "never in the past");
        b.succeeded();
        assert_eq!(b.failures(), 0);
        assert!(b.ready(t0));
        assert_eq!(b.failed(t0), Duration::from_secs(1));
        // Many failures never overflow.
        let mut b = Backoff::default();
        for _ in 0..100 {
            b.failed(t0);
        }
        assert_eq!(b.failed(t0), Duration::from_secs(300));
    }
}
