//! What every bosun process shares with its host: where the configuration
//! comes from (`args`: the command-line arguments, kubeconfig files and
//! contexts), the configuration as bosun judges it (`load`: the loader plus
//! the pipeline jobs' checks, one judgement for `bosun check`, `bosun serve`
//! and every reload), configuration files watched for changes (`watch`), and
//! the logs' set-up (`logging`).
//!
//! It knows nothing of the daemon's state, the dispatcher's service or HTTP:
//! `bosun-daemon`, `bosun-dispatcher` and the `bosun` binary build on it.

#![forbid(unsafe_code)]

pub mod args;
pub mod load;
pub mod logging;
pub mod watch;
