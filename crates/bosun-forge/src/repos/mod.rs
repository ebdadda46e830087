//! Following a repository from its git remote, so that the jobs it defines
//! in its own configuration can be registered, changed and retired at each
//! new head of its branch. Plain data in and out, blocking code, no
//! runtime: the daemon drives it.
//!
//! - [`remote`]: the remote ([`Remote`]: clone URI, branch, credentials
//!   given to git through its environment only) and its branch's head
//!   ([`Remote::head`], `git ls-remote`);
//! - [`mirror`]: a bare mirror per repository, `ROOT/ORG/NAME.git`, fetched
//!   with the followed branch only, kept across restarts, never left
//!   half-made or locked ([`Mirror::sync`], [`follow`]); [`Backoff`] for
//!   retries; [`is_ancestor`], to apply a snapshot only when it is the
//!   branch's current head or descends from the one applied (a force-push
//!   does not);
//! - [`pulls`]: a pull request's head and base branch fetched into the
//!   mirror ([`fetch_pull`]), for its changed files and its merge;
//! - [`files`]: a commit's files as bosun-config reads configuration
//!   ([`CommitFiles`]), without a checkout;
//! - [`load_at`]: bosun-config's in-repo loader over those files (Prow's
//!   `.prow.yaml` or `.prow/`, Lighthouse's `.lighthouse/*/triggers.yaml`
//!   and their `source:` files): the jobs, the diagnostics naming the
//!   commit, the files read.
//!
//! git itself runs through `bosun_git` (the one git module).

pub mod files;
mod load;
pub mod mirror;
pub mod pulls;
pub mod remote;

pub use files::CommitFiles;
pub use load::{load_at, load_at_with, AtCommit, LoadError};
pub use mirror::{follow, is_ancestor, Backoff, Mirror, Synced};
pub use pulls::{fetch_pull, fetch_pulls, fetch_ref, PullFetched, Wanted};
pub use remote::{Credentials, ErrorKind, FollowError, Head, Remote};
