//! bosun's side of the forge (GitHub and the like): what a repository says
//! and what its events start.
//!
//! Here now:
//! - [`repos`]: **repositories as the source of truth**: a repository
//!   followed from its git remote (its branch's head by `git ls-remote`, a
//!   bare mirror per repository fetched with that branch only, credentials
//!   through git's environment only), and its `.prow.yaml`/`.prow/` and
//!   `.lighthouse/*/triggers.yaml` loaded at a commit by bosun-config's
//!   loader without a checkout, so that the daemon can register, change or
//!   retire the jobs and periodics each pushed commit defines.
//!
//! What comes here next:
//! - **webhooks**: the forge's events (push, pull request, issue comment),
//!   their signatures checked, each delivery recorded once;
//! - **triggering**: which presubmits and postsubmits an event starts, with
//!   Prow's trigger rules (trusted users, `/test`, `/retest`, `/ok-to-test`,
//!   `run_if_changed`, branches);
//! - **reporting**: runs' states back to the forge as Prow's crier reports
//!   them (commit statuses, the summary comment).
//!
//! It depends on no daemon, no cluster client and no HTTP server: the daemon
//! mounts its handlers and hands it the store; what it decides is plain data.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod repos;
