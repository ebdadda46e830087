//! bosun-kubetest's integration tests, in one test binary so that it is linked once,
//! not once per file. A new test file goes in `tests/it/` with a `mod` line
//! here (a file directly in `tests/` would be a binary of its own). Run one
//! module's tests with `cargo test -p bosun-kubetest --test it audit::`.

mod audit;
mod common;
mod control_plane;
