//! `bosun run-decorated`: a decorated run on a local cluster, the pod
//! utilities of a Prow pod in one process. The local executor's supervisor
//! starts it in the run's directory (`ROOT/RUN_ID/`) with its options
//! ([`DecoratedJob`]) in [`OPTIONS_ENV`]; its stdout and stderr are the
//! run's log. In order:
//!
//! 1. `logs/prowjob.json`, then the refs cloned into `go/src/...` as
//!    clonerefs clones them ([`clone`], through the cluster's
//!    clone cache), `logs/clone-records.json` and `logs/clone-log.txt`, then
//!    `logs/started.json` (initupload's files);
//! 2. a failed clone ends the run here as initupload ends it: the clone log
//!    becomes `build-log.txt` (and the run's log), `finished.json` says
//!    `FAILURE`, and the process exits 1, so the run ends `failure`;
//! 3. otherwise the test command runs under entrypoint's rules
//!    ([`entrypoint`]) in the working ref's clone, with
//!    `ARTIFACTS=logs/artifacts` and `GOPATH=go` (absolute paths), its output
//!    in the run's log and `logs/build-log.txt`;
//! 4. `logs/finished.json` (as the sidecar writes it) and `prowjob.json`
//!    with the run's end; the process exits with entrypoint's code (the
//!    test's, 127 after a timeout, 130 when aborted).

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use crate::clone::{self, CloneOptions};
use crate::entrypoint::{self, WrapOptions};
use bosun_base::command::{Failed, Outcome};
use bosun_job::artifacts::{self, Finished, ProwJob, Started};
use bosun_job::job::{take_options, DecoratedJob, GOPATH_DIR, LOGS_DIR, OPTIONS_ENV};
use bosun_job::refs::work_dir;

/// entrypoint's exit code when it could not do its part (no options, an
/// unwritable run directory).
const INTERNAL_ERROR: u8 = 127;

/// The `bosun run-decorated` command: runs the decorated job described by
/// [`OPTIONS_ENV`] in the current directory (the run's); it ends with the
/// test's exit code (entrypoint's). Errors before the test starts are
/// printed to stderr (the run's log), with entrypoint's internal error code.
pub fn main() -> Outcome {
    let failed = |e: String| Failed::with_line(INTERNAL_ERROR, format!("bosun run-decorated: {e}"));
    let job: DecoratedJob = take_options(OPTIONS_ENV).map_err(failed)?;
    let run_dir =
        std::env::current_dir().map_err(|e| failed(format!("no working directory: {e}")))?;
    Failed::from_code(run(&job, &run_dir).map_err(failed)?)
}

/// Runs `job` in `run_dir`; the exit code, or why the job could not be run.
pub fn run(job: &DecoratedJob, run_dir: &Path) -> Result<i32, String> {
    let logs = run_dir.join(LOGS_DIR);
    let gopath = run_dir.join(GOPATH_DIR);
    let artifacts_dir = logs.join("artifacts");
    std::fs::create_dir_all(&artifacts_dir)
        .map_err(|e| format!("cannot create {}: {e}", artifacts_dir.display()))?;
    let file = |name: &str, bytes: &[u8]| {
        artifacts::write_atomic(&logs.join(name), bytes)
            .map_err(|e| format!("cannot write {name}: {e}"))
    };
    let mut prowjob = job.prowjob.clone();
    let write_prowjob = |pj: &Option<ProwJob>| match pj {
        Some(pj) => file("prowjob.json", artifacts::prowjob_json(pj).as_bytes()),
        None => Ok(()),
    };
    write_prowjob(&prowjob)?;
    let revision = artifacts::revision(&job.refs, job.primary);

    let cloning = !job.skip_cloning && !job.refs.is_empty();
    let records = if cloning {
        let records = clone::clone_refs(&CloneOptions {
            mirror_root: job.mirror_root.clone(),
            ..CloneOptions::new(&gopath, job.refs.clone())
        });
        file(
            "clone-records.json",
            artifacts::go_json(&records).as_bytes(),
        )?;
        let log = clone::clone_log_text(&records);
        file("clone-log.txt", log.as_bytes())?;
        if clone::any_failed(&records) {
            // As initupload: the clone log is the build log, the job failed.
            let _ = std::io::stdout().write_all(log.as_bytes());
            file("build-log.txt", log.as_bytes())?;
            let started = started(job, &records);
            file("started.json", started.to_json().as_bytes())?;
            let finished = Finished::from_exit(now(), 1, Default::default(), &revision);
            file("finished.json", finished.to_json().as_bytes())?;
            set_state(&mut prowjob, "failure", "Clone failed.");
            write_prowjob(&prowjob)?;
            return Ok(1);
        }
        records
    } else {
        Vec::new()
    };
    file("started.json", started(job, &records).to_json().as_bytes())?;

    let inside_run_dir = || {
        // As the supervisor takes an undecorated run's `workingDir`: below
        // the run's directory, never above it.
        let rel = Path::new(job.working_dir.as_deref().unwrap_or(""));
        let dir = rel
            .components()
            .filter_map(|c| match c {
                std::path::Component::Normal(c) => Some(c),
                _ => None,
            })
            .fold(run_dir.to_path_buf(), |p, c| p.join(c));
        std::fs::create_dir_all(&dir).map(|()| dir)
    };
    let dir = match work_dir(&gopath, &job.refs).filter(|_| cloning) {
        Some(clone) => clone,
        None => {
            inside_run_dir().map_err(|e| format!("cannot create the working directory: {e}"))?
        }
    };
    let nanos = |n: i64| (n > 0).then(|| Duration::from_nanos(n as u64));
    let code = entrypoint::run_wrapped(&WrapOptions {
        args: job.args.clone(),
        dir,
        env: vec![
            ("ARTIFACTS".into(), path_string(&artifacts_dir)),
            ("GOPATH".into(), path_string(&gopath)),
        ],
        timeout: nanos(job.timeout_ns),
        grace_period: nanos(job.grace_period_ns),
        process_log: logs.join("build-log.txt"),
        marker_file: logs.join("marker-file.txt"),
        artifact_dir: artifacts_dir.clone(),
    });
    let metadata = artifacts::read_metadata(&artifacts_dir.join("metadata.json"), &job.args);
    let finished = Finished::from_exit(now(), code, metadata, &revision);
    file("finished.json", finished.to_json().as_bytes())?;
    let (state, description) = match code {
        0 => ("success", "Job succeeded."),
        artifacts::ABORTED_CODE => ("aborted", "Job aborted."),
        _ => ("failure", "Job failed."),
    };
    set_state(&mut prowjob, state, description);
    write_prowjob(&prowjob)?;
    Ok(code)
}

/// initupload's `started.json`: the refs and the SHAs their clones ended on.
fn started(job: &DecoratedJob, records: &[clone::Record]) -> Started {
    Started::new(
        now(),
        &job.refs,
        job.primary,
        records.iter().map(|r| (&r.refs, r.final_sha.as_str())),
    )
}

fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

fn path_string(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The ProwJob's status at the run's end, as this process sees it (the
/// daemon records the run's own end).
fn set_state(prowjob: &mut Option<ProwJob>, state: &str, description: &str) {
    if let Some(pj) = prowjob {
        pj.status.state = state.into();
        pj.status.description = description.into();
        pj.status.completion_time = Some(artifacts::go_time(jiff::Timestamp::now()));
    }
}
