//! bosun's side of the forge (GitHub, Gitea, GitLab): what a repository
//! says and what its events start.
//!
//! - [`hook`]: **webhook intake**: a delivery's method, headers and raw body
//!   checked as Prow's hook checks them (its order, status codes and texts),
//!   its signature or token against Prow's HMAC secret file, a cap on the
//!   body; the accepted delivery (forge, event, delivery id, repository, raw
//!   body) to record before answering, and its body read as plain data
//!   (pushes, repository changes).
//! - [`repos`]: **repositories as the source of truth**: a repository
//!   followed from its git remote (its branch's head by `git ls-remote`, a
//!   bare mirror per repository fetched with that branch only, credentials
//!   through git's environment only), and its `.prow.yaml`/`.prow/` and
//!   `.lighthouse/*/triggers.yaml` loaded at a commit by bosun-config's
//!   loader without a checkout, so that the daemon can register, change or
//!   retire the jobs and periodics each pushed commit defines.
//!
//! - [`report`]: **reporting back** as Prow's crier reports: which runs
//!   get a commit status and what it says, and the failed-tests comment on
//!   a pull request (which comments to delete, create or edit), decided as
//!   plain data.
//! - [`client`]: a synchronous **forge REST client** (GitHub, GitHub
//!   Enterprise, Gitea's `/api/v1`) for those calls and the few others bosun
//!   makes (labels, pull requests, membership): token files re-read when
//!   they change, GitHub App installation tokens, every failure a
//!   [`client::ForgeError`] saying whether and when to try again.
//! - [`trigger`]: **triggering**: which presubmits and postsubmits an event
//!   starts, with Prow's trigger rules (trusted users, `/test`, `/retest`,
//!   `/ok-to-test`, `run_if_changed`, branches), as plain actions decided
//!   over a host the daemon implements.
//!
//! It depends on no daemon, no cluster client, no async runtime and no
//! HTTP server (`tools/check-layers.py` keeps them out): the daemon mounts
//! its handlers, hands it the store and calls the client from blocking
//! tasks; what it decides is plain data.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod client;
pub mod hook;
pub mod report;
pub mod repos;
#[cfg(feature = "test-support")]
pub mod testing;
pub mod trigger;
