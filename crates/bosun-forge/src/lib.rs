//! bosun's side of the forge (GitHub and the like): where what a repository
//! says and what its events start will live. Empty on purpose: it is the
//! home the next capabilities are built in, so that each has an obvious
//! place and the layer check (`tools/check-layers.py`) keeps it there.
//!
//! What comes here:
//! - **webhooks**: the forge's events (push, pull request, issue comment),
//!   their signatures checked, each delivery recorded once;
//! - **repositories as the source of truth**: a bare mirror per repository
//!   followed from git (`bosun_git::repo`: a targeted fetch, a file read at
//!   a commit), whose `.prow.yaml` and `.lighthouse/*/triggers.yaml` at
//!   each pushed commit register, change or retire the jobs and periodics
//!   the repository defines;
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
