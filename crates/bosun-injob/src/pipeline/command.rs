//! `bosun run-pipeline`: a pipeline run on a local cluster. The local
//! executor's supervisor starts it in the run's directory with its options
//! ([`PipelineOptions`]) as JSON in [`OPTIONS_ENV`]; its stdout and stderr are
//! the run's log; its exit code is [`run_pipeline`]'s.

use super::run::run_pipeline;
use bosun_base::command::{Failed, Outcome};
use bosun_job::job::take_options;
use bosun_tekton::local::{PipelineOptions, INTERNAL_ERROR};

pub use bosun_tekton::local::OPTIONS_ENV;

/// The `bosun run-pipeline` command: it ends with [`run_pipeline`]'s exit
/// code.
pub fn main() -> Outcome {
    let failed = |e: String| {
        Failed::with_line(
            u8::try_from(INTERNAL_ERROR).unwrap_or(1),
            format!("bosun run-pipeline: {e}"),
        )
    };
    let mut options: PipelineOptions = take_options(OPTIONS_ENV).map_err(failed)?;
    if options.dir.as_os_str().is_empty() {
        options.dir =
            std::env::current_dir().map_err(|e| failed(format!("no working directory: {e}")))?;
    }
    Failed::from_code(run_pipeline(&options))
}
