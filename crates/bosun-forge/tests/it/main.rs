//! bosun-forge's integration tests, in one test binary so that it is linked
//! once, not once per file. A new test file goes in `tests/it/` with a `mod`
//! line here (a file directly in `tests/` would be a binary of its own). Run
//! one module's tests with `cargo test -p bosun-forge --test it intake::`.

mod common;
mod events;
mod github_schema;
mod intake;
mod secret_levels;
