//! bosun-config's integration tests, in one test binary so that it is linked once,
//! not once per file. A new test file goes in `tests/it/` with a `mod` line
//! here (a file directly in `tests/` would be a binary of its own). Run one
//! module's tests with `cargo test -p bosun-config --test it bad_input::`.

mod bad_input;
mod common;
mod config_reference;
mod decoration_merge;
mod in_repo;
mod kubeconfig;
mod repo_load;
mod rules;
