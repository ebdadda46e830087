//! bosun-forge's integration tests, in one test binary so that it is linked
//! once, not once per file. A new test file goes in `tests/it/` with a `mod`
//! line here (a file directly in `tests/` would be a binary of its own). Run
//! one module's tests with `cargo test -p bosun-forge --test it MODULE::`.
//!
//! The repository tests run real git against real remotes: bare
//! repositories served over HTTP by `git http-backend` on 127.0.0.1
//! (`bosun_git::testing`, the `test-support` feature), and, for SSH, a
//! stand-in `ssh` command in a re-executed copy of this binary (see
//! `follow::ssh_process`). The webhook tests send requests as each forge
//! sends them (`requests`), every GitHub payload validated against GitHub's
//! webhook description first. `github_api` drives the fake GitHub REST API
//! (`bosun_forge::testing::github_api`) over HTTP with `ureq`.
//! The forge client's tests (`client`) run it
//! against a small HTTP server on loopback that records every request.

mod client;
mod common;
mod events;
mod follow;
mod github_api;
mod github_schema;
mod intake;
mod pull_events;
mod pulls;
use bosun_forge::testing as requests;
mod secret_levels;
mod tree;
