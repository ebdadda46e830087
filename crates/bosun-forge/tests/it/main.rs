//! bosun-forge's integration tests, one test binary (a module per subject:
//! linking one is cheaper than linking each). Run one module with `cargo
//! test -p bosun-forge --test it MODULE::`.
//!
//! They run real git against real remotes: bare repositories served over
//! HTTP by `git http-backend` on 127.0.0.1 (`bosun_git::testing`, the
//! `test-support` feature), and, for SSH, a stand-in `ssh` command in a
//! re-executed copy of this binary (see `follow::ssh_process`).

mod common;
mod follow;
mod tree;
