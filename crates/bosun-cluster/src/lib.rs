//! bosun's build clusters: which exist ([`registry`]), which runs may start
//! ([`admit`], [`trust`]), and the executors that run them, all behind the
//! [`executor::Executor`] trait and its vocabulary ([`executor`]):
//!
//! - the local executor ([`local`]), which runs a job's single container
//!   command as a process on this machine under a supervisor (`bosun
//!   run-shim`, [`shim`], one per local cluster), so a restarted daemon can
//!   find its runs again. It gives **no isolation**: the image is not used,
//!   and the job runs as the daemon's user (or `run_as`) with full access to
//!   this machine;
//! - the Kubernetes executor ([`kube`]), one pod per run (built by
//!   [`kube::pod`]), followed through a watch, its log copied into the run's
//!   log file;
//! - a simulated executor ([`executor::SimulatedExecutor`]) for simulations.
//!
//! `local` and `kube` depend on `executor`, never on each other. This crate
//! runs processes and pods; it decides nothing about scheduling or placement
//! (the daemon's controller does).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod admit;
pub mod executor;
pub mod kube;
pub mod local;
pub mod registry;
pub mod shim;
pub mod trust;
pub mod workload;
