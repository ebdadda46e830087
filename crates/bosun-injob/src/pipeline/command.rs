//! `bosun run-pipeline`: a pipeline run on a local cluster. The local
//! executor's supervisor starts it in the run's directory with its options
//! ([`PipelineOptions`]) as JSON in [`OPTIONS_ENV`]; its stdout and stderr are
//! the run's log; its exit code is [`run_pipeline`]'s.

use super::run::run_pipeline;
use bosun_job::job::take_options;
use bosun_tekton::local::{PipelineOptions, INTERNAL_ERROR};

pub use bosun_tekton::local::OPTIONS_ENV;

/// The `bosun run-pipeline` command.
pub fn main() -> i32 {
    let mut options: PipelineOptions = match take_options(OPTIONS_ENV) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("bosun run-pipeline: {e}");
            return INTERNAL_ERROR;
        }
    };
    if options.dir.as_os_str().is_empty() {
        match std::env::current_dir() {
            Ok(d) => options.dir = d,
            Err(e) => {
                eprintln!("bosun run-pipeline: no working directory: {e}");
                return INTERNAL_ERROR;
            }
        }
    }
    run_pipeline(&options)
}
