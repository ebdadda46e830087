//! bosun-injob's integration tests, one test binary (a module per former
//! binary: linking one is cheaper than linking each). Run one module with
//! `cargo test -p bosun-injob --test it MODULE::`.
//!
//! `entrypoint_local` and `pipeline_local` re-execute this binary to run a
//! wrapped process or a pipeline in a process of its own, running only
//! their ignored helper test (named with its module's path).

mod clone_local;
mod entrypoint_local;
mod pipeline_local;
