//! A pull request's commits in its repository's mirror, so that what it
//! changes and what it merges into are read with git, never from the forge
//! (a push payload is truncated, the forge's files API stops at 3,000
//! files): [`fetch_pull`] brings the pull request's head (the forge's
//! `refs/pull/N/head`) and its base branch into the mirror
//! (`ROOT/ORG/NAME.git`, made if the repository is not followed), under
//! `refs/bosun/pulls/N` and `refs/bosun/bases/BRANCH`, refs the followed
//! branch never touches; the mirror's lock is held for the fetch, as for
//! [`super::Mirror::sync`].

use std::fs;

use bosun_git::repo::{is_branch_name, GitError, Repo};
use bosun_git::runner::Command;

use super::mirror::{local_error, lock_mirror};
use super::remote::{ErrorKind, FollowError, Remote};
use super::Mirror;

/// What [`fetch_pull`] brought.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullFetched {
    /// The mirror.
    pub mirror: Mirror,
    /// The base branch's commit as fetched (the commit the pull request's
    /// jobs merge into).
    pub base_sha: String,
    /// The pull request's head as fetched: the head asked for.
    pub head_sha: String,
    /// The commands that reached the remote (secrets redacted).
    pub commands: Vec<Command>,
}

/// Fetches pull request `number` of `remote` (its head, which must be
/// `head_sha`, and its base branch `base_ref`) into the mirror under
/// `root`. The head asked for no longer being the pull request's (a newer
/// push came) is an error of kind [`ErrorKind::NotFound`] unless the
/// mirror has that commit all the same.
pub fn fetch_pull(
    root: &std::path::Path,
    remote: &Remote,
    base_ref: &str,
    number: i64,
    head_sha: &str,
) -> Result<PullFetched, FollowError> {
    let want = Wanted {
        base_ref: base_ref.to_string(),
        number,
        head_sha: head_sha.to_string(),
    };
    fetch_pulls(root, remote, std::slice::from_ref(&want))?
        .pop()
        .expect("one answer per pull request")
}

/// A pull request [`fetch_pulls`] is to fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    /// Its base branch.
    pub base_ref: String,
    /// Its number.
    pub number: i64,
    /// The head it must be at.
    pub head_sha: String,
}

/// [`fetch_pull`] for several pull requests of one repository, in one `git
/// fetch` (one round trip for pull requests opened together): an answer
/// per pull request, in order; the error of the fetch itself for all.
pub fn fetch_pulls(
    root: &std::path::Path,
    remote: &Remote,
    wanted: &[Wanted],
) -> Result<Vec<Result<PullFetched, FollowError>>, FollowError> {
    if let Some(w) = wanted.iter().find(|w| !is_branch_name(&w.base_ref)) {
        return Err(remote.error(
            ErrorKind::NotFound,
            format!("{:?} is not a branch name git accepts", w.base_ref),
            "the pull request's base branch",
        ));
    }
    let (lock, org_dir, name) = lock_mirror(root, remote)?;
    let dir = org_dir.join(format!("{name}.git"));
    let git_local = |what: &str, e: &GitError| {
        remote.error(
            ErrorKind::Local,
            format!("{what}: {e}"),
            format!("the mirror {}", dir.display()),
        )
    };
    if !dir.exists() {
        fs::create_dir_all(&dir).map_err(|e| {
            local_error(root, remote, format!("cannot create {}", dir.display()), &e)
        })?;
    }
    let repo = Repo::open_or_init(&dir).map_err(|e| git_local("cannot open the mirror", &e))?;
    repo.clear_stale_locks()
        .map_err(|e| local_error(root, remote, format!("cannot clear {}", dir.display()), &e))?;
    let env = remote.env()?;
    let mut specs: Vec<String> = Vec::new();
    for w in wanted {
        let base = format!("+refs/heads/{0}:refs/bosun/bases/{0}", w.base_ref);
        if !specs.contains(&base) {
            specs.push(base);
        }
        let pull = format!("+refs/pull/{0}/head:refs/bosun/pulls/{0}", w.number);
        if !specs.contains(&pull) {
            specs.push(pull);
        }
    }
    let spec_refs: Vec<&str> = specs.iter().map(String::as_str).collect();
    let what = match wanted {
        [one] => format!("fetch pull request #{}", one.number),
        _ => format!("fetch {} pull requests", wanted.len()),
    };
    let record = repo
        .fetch_with(&remote.clone_uri, &spec_refs, &env)
        .map_err(|e| remote.git_error(&what, &e))?;
    let mut out = Vec::with_capacity(wanted.len());
    for w in wanted {
        out.push((|| {
            let base_sha = repo
                .resolve(&format!("refs/bosun/bases/{}", w.base_ref))
                .map_err(|e| git_local("cannot read the mirror", &e))?
                .ok_or_else(|| {
                    remote.error(
                        ErrorKind::NotFound,
                        format!("the fetch brought no branch {}", w.base_ref),
                        "that the pull request's base branch exists",
                    )
                })?;
            let head = repo
                .resolve(&w.head_sha)
                .map_err(|e| git_local("cannot read the mirror", &e))?;
            let Some(head_sha) = head else {
                return Err(remote.error(
                    ErrorKind::NotFound,
                    format!("pull request #{} is no longer at {}", w.number, w.head_sha),
                    "nothing: a newer head of the pull request is handled on its own",
                ));
            };
            Ok(PullFetched {
                mirror: Mirror::from_repo(repo.clone()),
                base_sha,
                head_sha,
                commands: vec![record.clone()],
            })
        })());
    }
    drop(lock);
    Ok(out)
}

/// Fetches the ref a push moved (`refs/heads/B`, `refs/tags/T`) into the
/// mirror of `remote` under `root` (made if the repository is not
/// followed), under `refs/bosun/pushed/...`, so that the push's changes can
/// be read (`git diff before after`); `after` must be in the mirror then.
pub fn fetch_ref(
    root: &std::path::Path,
    remote: &Remote,
    git_ref: &str,
    after: &str,
) -> Result<Mirror, FollowError> {
    let name = git_ref
        .strip_prefix("refs/heads/")
        .or_else(|| git_ref.strip_prefix("refs/tags/"))
        .filter(|n| is_branch_name(n))
        .ok_or_else(|| {
            remote.error(
                ErrorKind::NotFound,
                format!("{git_ref:?} is not a branch or tag git accepts"),
                "the pushed ref",
            )
        })?;
    let (lock, org_dir, repo_name) = lock_mirror(root, remote)?;
    let dir = org_dir.join(format!("{repo_name}.git"));
    let repo = Repo::open_or_init(&dir).map_err(|e| {
        remote.error(
            ErrorKind::Local,
            format!("cannot open the mirror: {e}"),
            format!("the mirror {}", dir.display()),
        )
    })?;
    let local = if git_ref.starts_with("refs/tags/") {
        format!("refs/bosun/pushed/tags/{name}")
    } else {
        format!("refs/bosun/pushed/heads/{name}")
    };
    let env = remote.env()?;
    repo.fetch_with(&remote.clone_uri, &[&format!("+{git_ref}:{local}")], &env)
        .map_err(|e| remote.git_error(&format!("fetch {git_ref}"), &e))?;
    let has = repo.resolve(after).ok().flatten().is_some();
    drop(lock);
    if !has {
        return Err(remote.error(
            ErrorKind::NotFound,
            format!("{git_ref} is no longer at {after}"),
            "nothing: a newer push is handled on its own",
        ));
    }
    Ok(Mirror::from_repo(repo))
}
