//! `bosun run`, `runs`, `logs`, `abort` and `rerun`: a job's runs over the
//! API (`/api/v1/runs...`). `run --follow` and `rerun --follow` follow the
//! new run's log and exit with its result: 0 on `success`, 1 otherwise.

use bosun_base::command::{Failed, Outcome};
use std::io::Write;
use std::time::Duration;

use clap::Args;
use serde_json::Value;

use crate::client::{columns, segment, Api, Format, OutputArgs, ServerArgs};

/// `bosun run` arguments.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// The job's name.
    pub job: String,
    /// Its repository (`org/repo`), when several jobs share the name.
    #[arg(long)]
    pub repo: Option<String>,
    /// Its type (`periodic`, `presubmit`, `postsubmit`), when several jobs share the name.
    #[arg(long = "type")]
    pub job_type: Option<String>,
    /// Refs as JSON (`{"org": ..., "repo": ..., "base_ref": ..., "pulls": [...]}`).
    #[arg(long)]
    pub refs: Option<String>,
    /// Follow the log and exit with the run's result (0 on success, 1 otherwise).
    #[arg(long)]
    pub follow: bool,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// `bosun runs` arguments.
#[derive(Args, Debug, Clone)]
pub struct RunsArgs {
    /// Only this job.
    #[arg(long)]
    pub job: Option<String>,
    /// Only this state.
    #[arg(long)]
    pub state: Option<String>,
    /// Only runs of this repository (their refs, not extra refs).
    #[arg(long, value_name = "ORG/REPO")]
    pub repo: Option<String>,
    /// Only runs of this pull request: its number (with `--repo`), or
    /// `ORG/REPO#N`.
    #[arg(long, value_name = "N|ORG/REPO#N", value_parser = parse_pull)]
    pub pull: Option<PullArg>,
    /// Only runs of the pull request at this head commit.
    #[arg(long, requires = "pull")]
    pub sha: Option<String>,
    /// At most this many.
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// `--pull`: a pull request's number, and its repository when given as
/// `ORG/REPO#N`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullArg {
    /// The repository, `org/repo`, when the value named it.
    pub repo: Option<String>,
    /// The pull request's number (positive).
    pub number: i64,
}

/// Reads `--pull`'s value: `N` or `ORG/REPO#N`.
fn parse_pull(s: &str) -> Result<PullArg, String> {
    let (repo, number) = match s.rsplit_once('#') {
        Some((repo, n)) => (Some(repo), n),
        None => (None, s),
    };
    if let Some(r) = repo {
        if !r
            .split_once('/')
            .is_some_and(|(org, name)| !org.is_empty() && !name.is_empty())
        {
            return Err(format!(
                "{r:?} is not a repository: give ORG/REPO#N, or N with --repo ORG/REPO"
            ));
        }
    }
    match number.parse::<i64>() {
        Ok(n) if n > 0 => Ok(PullArg {
            repo: repo.map(str::to_string),
            number: n,
        }),
        _ => Err(format!(
            "{number:?} is not a pull request's number (a positive integer)"
        )),
    }
}

/// `bosun logs` arguments.
#[derive(Args, Debug, Clone)]
pub struct LogsArgs {
    /// The run's id.
    pub run: String,
    /// Follow the log until the run ends (without it: what the log holds now).
    #[arg(long, short = 'f')]
    pub follow: bool,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// `bosun abort` arguments.
#[derive(Args, Debug, Clone)]
pub struct AbortArgs {
    /// The run's id.
    pub run: String,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// `bosun rerun` arguments.
#[derive(Args, Debug, Clone)]
pub struct RerunArgs {
    /// The id of the run to run again.
    pub run: String,
    /// Follow the new run's log and exit with its result (0 on success, 1 otherwise).
    #[arg(long)]
    pub follow: bool,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// How often a run's end is asked for when its log has ended first.
const POLL: Duration = Duration::from_millis(500);

/// The line a new run is announced with: id, job, state.
fn announce(run: &Value, out: &mut dyn Write) -> Result<String, Failed> {
    let id = run["id"].as_str().unwrap_or_default().to_string();
    writeln!(
        out,
        "{id} {} {}",
        run["job"].as_str().unwrap_or_default(),
        run["state"].as_str().unwrap_or_default()
    )?;
    Ok(id)
}

/// Triggers a run.
pub fn run(args: &RunArgs, out: &mut dyn Write) -> Outcome {
    let mut body = serde_json::json!({"job": args.job});
    if let Some(r) = &args.repo {
        body["repo"] = r.clone().into();
    }
    if let Some(t) = &args.job_type {
        body["type"] = t.clone().into();
    }
    if let Some(r) = &args.refs {
        match serde_json::from_str::<Value>(r) {
            Ok(v) => body["refs"] = v,
            Err(e) => return Err(Failed::error(format!("--refs is not JSON: {e}"))),
        }
    }
    let api = Api::new(&args.server)?;
    let answer = api.post("/api/v1/runs", Some(&body))?;
    let run = api.check(answer, None)?.json()?;
    let id = announce(&run, out)?;
    if args.follow {
        follow(&api, &id, out)
    } else {
        Ok(())
    }
}

/// Runs a run's job again, as a new run.
pub fn rerun(args: &RerunArgs, out: &mut dyn Write) -> Outcome {
    let api = Api::new(&args.server)?;
    let answer = api.post(&format!("/api/v1/runs/{}/rerun", segment(&args.run)), None)?;
    let run = api.check(answer, Some(&args.run))?.json()?;
    let id = announce(&run, out)?;
    if args.follow {
        follow(&api, &id, out)
    } else {
        Ok(())
    }
}

/// Follows run `id`'s log, then prints `ID STATE` once it has ended: 0 on
/// `success`, 1 on any other end.
fn follow(api: &Api, id: &str, out: &mut dyn Write) -> Outcome {
    // The log ends when the run does. A run whose log is not kept on this
    // machine has no log to follow (404): its end is waited for below.
    if let Err(answer) = api.stream(&format!("/api/v1/runs/{}/log", segment(id)), out)? {
        if answer.status != 404 {
            return Err(api.refused(&answer, Some(id)));
        }
    }
    let state = loop {
        let answer = api.get(&format!("/api/v1/runs/{}", segment(id)))?;
        let run = api.check(answer, Some(id))?.json()?;
        let state = run["state"].as_str().unwrap_or_default().to_string();
        if matches!(
            state.as_str(),
            "success" | "failure" | "aborted" | "error" | ""
        ) {
            break state;
        }
        std::thread::sleep(POLL);
    };
    writeln!(out, "{id} {state}")?;
    if state == "success" {
        Ok(())
    } else {
        // The run's state, printed above, says why.
        Err(Failed::status(1))
    }
}

/// Prints a run's log: what it holds now, or followed until the run ends.
pub fn logs(args: &LogsArgs, out: &mut dyn Write) -> Outcome {
    let api = Api::new(&args.server)?;
    let mut path = format!("/api/v1/runs/{}/log", segment(&args.run));
    if !args.follow {
        path.push_str("?follow=false");
    }
    match api.stream(&path, out)? {
        Ok(()) => Ok(()),
        Err(answer) => Err(api.refused(&answer, Some(&args.run))),
    }
}

/// Asks the daemon to abort a run that has not ended.
pub fn abort(args: &AbortArgs, out: &mut dyn Write) -> Outcome {
    let api = Api::new(&args.server)?;
    let answer = api.post(&format!("/api/v1/runs/{}/abort", segment(&args.run)), None)?;
    let run = api.check(answer, Some(&args.run))?.json()?;
    writeln!(
        out,
        "{} {} aborting",
        run["id"].as_str().unwrap_or(&args.run),
        run["job"].as_str().unwrap_or_default()
    )?;
    Ok(())
}

/// Lists runs, newest first.
pub fn runs(args: &RunsArgs, out: &mut dyn Write) -> Outcome {
    let api = Api::new(&args.server)?;
    let mut path = format!("/api/v1/runs?limit={}", args.limit);
    if let Some(j) = &args.job {
        path.push_str(&format!("&job={}", segment(j)));
    }
    if let Some(s) = &args.state {
        path.push_str(&format!("&state={}", segment(s)));
    }
    let repo = match (&args.repo, args.pull.as_ref().and_then(|p| p.repo.as_ref())) {
        (Some(a), Some(b)) if a != b => {
            return Err(Failed::error(format!(
                "--repo {a} and --pull {b}#N name different repositories"
            )))
        }
        (a, b) => a.as_ref().or(b),
    };
    if let Some(r) = repo {
        path.push_str(&format!("&repo={}", segment(r)));
    }
    if let Some(p) = &args.pull {
        if repo.is_none() {
            return Err(Failed::error(format!(
                "--pull {n} needs its repository: add --repo ORG/REPO, or give --pull ORG/REPO#{n}",
                n = p.number
            )));
        }
        path.push_str(&format!("&pull={}", p.number));
    }
    if let Some(s) = &args.sha {
        path.push_str(&format!("&sha={}", segment(s)));
    }
    let answer = api.check(api.get(&path)?, None)?;
    if args.output.output == Format::Json {
        return answer.print(out);
    }
    let v = answer.json()?;
    let mut rows = vec![[
        "ID",
        "JOB",
        "TYPE",
        "STATE",
        "CLUSTER",
        "CREATED",
        "DESCRIPTION",
    ]
    .map(String::from)
    .to_vec()];
    for r in v["runs"].as_array().into_iter().flatten() {
        let s = |k: &str| r[k].as_str().unwrap_or_default().to_string();
        // Where it runs; the configured cluster until it is placed.
        let cluster = r["cluster"]
            .as_str()
            .or(r["configured_cluster"].as_str())
            .unwrap_or_default()
            .to_string();
        rows.push(vec![
            s("id"),
            s("job"),
            s("job_type"),
            s("state"),
            cluster,
            s("created_at"),
            s("description"),
        ]);
    }
    columns(out, &rows)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{parse_pull, PullArg};

    #[test]
    fn pull_is_a_number_or_a_repository_and_a_number() {
        assert_eq!(
            parse_pull("12"),
            Ok(PullArg {
                repo: None,
                number: 12
            })
        );
        assert_eq!(
            parse_pull("org/app#12"),
            Ok(PullArg {
                repo: Some("org/app".into()),
                number: 12
            })
        );
        for bad in ["0", "-1", "x", "app#3", "org/app#", "#4", "org/app#1x"] {
            assert!(parse_pull(bad).is_err(), "{bad}");
        }
    }
}
