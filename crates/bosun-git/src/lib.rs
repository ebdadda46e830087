//! bosun's one git module, for every place that runs git:
//!
//! - [`runner`]: git (and the few other commands a clone needs) run as
//!   Prow's clonerefs runs them and recorded as its `clone.Command`, fetches
//!   retried with a backoff, the environment scrubbed of what would point
//!   git elsewhere;
//! - [`mirror`]: the bare mirrors clones fetch through, one per clone URI
//!   under a root, each under a `flock`, and their pruning;
//! - [`repo`]: a bare repository fetched with exactly the refs asked for,
//!   whose files are read and listed at a commit without a checkout (a
//!   repository's own job configuration at a pushed commit), and whose
//!   commits are compared (`is_ancestor`);
//! - [`remote`]: commands reaching a remote with credentials given through
//!   git's environment only, recorded and reported with every secret
//!   redacted; `ls-remote` in no repository;
//! - [`objects`]: a repository's trees and blobs read on demand through
//!   one `git cat-file --batch`;
//! - `testing` (feature `test-support`): bare repositories served over HTTP
//!   by `git http-backend` on loopback, and work repositories pushing to
//!   them, for the tests of the crates that follow remotes.
//!
//! Blocking code over `std::process`: no async runtime.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod error;
pub mod mirror;
pub mod objects;
pub mod remote;
pub mod repo;
pub mod runner;
#[cfg(feature = "test-support")]
pub mod testing;
