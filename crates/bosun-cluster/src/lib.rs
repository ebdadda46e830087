//! bosun's build clusters. Today: the local executor, which runs a job's single
//! container command as a process on this machine under a supervisor
//! (`bosun run-shim`, one per local cluster), so a restarted daemon can find its runs again.
//!
//! The local executor gives **no isolation**: the image is not used, and the job
//! runs as the daemon's user (or `run_as`) with full access to this machine.
//!
//! This crate runs processes; it decides nothing about scheduling or placement.

#![warn(missing_docs)]

pub mod admit;
pub mod executor;
pub mod kube;
pub mod kube_pod;
pub mod local;
pub mod registry;
pub mod shim;
pub mod trust;
