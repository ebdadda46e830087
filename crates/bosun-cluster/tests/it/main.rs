//! bosun-cluster's integration tests, one test binary (a module per former
//! binary: linking one is cheaper than linking each). Run one module with
//! `cargo test -p bosun-cluster --test it MODULE::`. The golden files are
//! in `tests/golden/`.

mod corpus_dry_run;
mod pipelinerun_golden;
mod pod_golden;
