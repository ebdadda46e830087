//! `bosun run`, `bosun runs` and `bosun periodics`: the API from the command line.

use bosun_base::command::{Failed, Outcome};
use std::io::{Read, Write};
use std::path::PathBuf;

use clap::Args;

/// Where the daemon is.
#[derive(Args, Debug, Clone)]
pub struct ServerArgs {
    /// The daemon's URL.
    #[arg(
        long,
        default_value = "http://127.0.0.1:8080",
        env = "BOSUN_SERVER",
        global = true
    )]
    pub server: String,
    /// A file with the API token.
    #[arg(long, value_name = "FILE", env = "BOSUN_TOKEN_FILE", global = true)]
    pub token_file: Option<PathBuf>,
}

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
    /// Follow the log and exit with the run's result (0 on success).
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
    /// At most this many.
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    #[command(flatten)]
    pub server: ServerArgs,
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}

fn token(s: &ServerArgs) -> Result<Option<String>, String> {
    s.token_file
        .as_ref()
        .map(|p| {
            std::fs::read_to_string(p)
                .map(|t| t.trim().to_string())
                .map_err(|e| format!("cannot read {}: {e}", p.display()))
        })
        .transpose()
}

fn fail(msg: impl std::fmt::Display) -> Outcome {
    Err(Failed::error(msg))
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
        match serde_json::from_str::<serde_json::Value>(r) {
            Ok(v) => body["refs"] = v,
            Err(e) => return fail(format!("--refs is not JSON: {e}")),
        }
    }
    let token = match token(&args.server) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    let mut req = agent().post(format!("{}/api/v1/runs", args.server.server));
    if let Some(t) = &token {
        req = req.header("Authorization", &format!("Bearer {t}"));
    }
    let mut resp = match req.send_json(&body) {
        Ok(r) => r,
        Err(e) => return fail(format!("cannot reach {}: {e}", args.server.server)),
    };
    let status = resp.status().as_u16();
    let text = resp.body_mut().read_to_string().unwrap_or_default();
    if status != 201 {
        return fail(format!("{status}: {text}"));
    }
    let run: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let id = run["id"].as_str().unwrap_or_default().to_string();
    let _ = writeln!(
        out,
        "{id} {} {}",
        run["job"].as_str().unwrap_or_default(),
        run["state"].as_str().unwrap_or_default()
    );
    if !args.follow {
        return Ok(());
    }
    let url = format!("{}/api/v1/runs/{id}/log", args.server.server);
    if let Ok(mut resp) = agent().get(&url).call() {
        let mut reader = resp.body_mut().as_reader();
        let mut buf = [0u8; 8192];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            let _ = out.write_all(&buf[..n]);
            let _ = out.flush();
        }
    }
    // The log ends when the run does; its final state decides the exit code.
    let state = agent()
        .get(format!("{}/api/v1/runs/{id}", args.server.server))
        .call()
        .ok()
        .and_then(|mut r| r.body_mut().read_json::<serde_json::Value>().ok())
        .and_then(|v| v["state"].as_str().map(str::to_string))
        .unwrap_or_default();
    let _ = writeln!(out, "{id} {state}");
    if state == "success" {
        Ok(())
    } else {
        // The run's state, printed above, says why.
        Err(Failed::status(1))
    }
}

/// Lists runs.
pub fn runs(args: &RunsArgs, out: &mut dyn Write) -> Outcome {
    let mut url = format!("{}/api/v1/runs?limit={}", args.server.server, args.limit);
    if let Some(j) = &args.job {
        url.push_str(&format!("&job={j}"));
    }
    if let Some(s) = &args.state {
        url.push_str(&format!("&state={s}"));
    }
    let mut resp = match agent().get(&url).call() {
        Ok(r) => r,
        Err(e) => return fail(format!("cannot reach {}: {e}", args.server.server)),
    };
    let status = resp.status().as_u16();
    let v: serde_json::Value = match resp.body_mut().read_json() {
        Ok(v) if status == 200 => v,
        Ok(v) => return fail(format!("{status}: {v}")),
        Err(e) => return fail(e),
    };
    let _ = writeln!(
        out,
        "{:<36}  {:<40}  {:<10}  {:<10}  {:<27}  DESCRIPTION",
        "ID", "JOB", "TYPE", "STATE", "CREATED"
    );
    for r in v["runs"].as_array().into_iter().flatten() {
        let s = |k: &str| r[k].as_str().unwrap_or_default().to_string();
        let _ = writeln!(
            out,
            "{:<36}  {:<40}  {:<10}  {:<10}  {:<27}  {}",
            s("id"),
            s("job"),
            s("job_type"),
            s("state"),
            s("created_at"),
            s("description")
        );
    }
    Ok(())
}

/// What `bosun periodics` does.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum PeriodicsAction {
    /// List the periodics: schedule, next fire, last run, paused (the default).
    List,
    /// Start a run of a periodic now, outside its schedule.
    Trigger {
        /// The periodic's identity (its name, or ORG/REPO:name when in-repo).
        periodic: String,
    },
    /// Pause a periodic: its ticks are recorded as skipped until it is resumed.
    Pause {
        /// The periodic's identity.
        periodic: String,
    },
    /// Resume a paused periodic.
    Resume {
        /// The periodic's identity.
        periodic: String,
    },
}

/// `bosun periodics` arguments.
#[derive(Args, Debug, Clone)]
pub struct PeriodicsArgs {
    #[command(subcommand)]
    pub action: Option<PeriodicsAction>,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// Percent-encodes a path segment (an in-repo identity has a `/`).
fn segment(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b':' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Lists or controls periodics.
pub fn periodics(args: &PeriodicsArgs, out: &mut dyn Write) -> Outcome {
    let base = &args.server.server;
    let (verb, periodic) = match &args.action {
        None | Some(PeriodicsAction::List) => ("list", None),
        Some(PeriodicsAction::Trigger { periodic }) => ("trigger", Some(periodic)),
        Some(PeriodicsAction::Pause { periodic }) => ("pause", Some(periodic)),
        Some(PeriodicsAction::Resume { periodic }) => ("resume", Some(periodic)),
    };
    let resp = match periodic {
        None => agent().get(format!("{base}/api/v1/periodics")).call(),
        Some(p) => {
            let token = match token(&args.server) {
                Ok(t) => t,
                Err(e) => return fail(e),
            };
            let mut req = agent().post(format!("{base}/api/v1/periodics/{}/{verb}", segment(p)));
            if let Some(t) = token {
                req = req.header("Authorization", &format!("Bearer {t}"));
            }
            req.send_empty()
        }
    };
    let mut resp = match resp {
        Ok(r) => r,
        Err(e) => return fail(format!("cannot reach {base}: {e}")),
    };
    let status = resp.status().as_u16();
    let v: serde_json::Value = match resp.body_mut().read_json() {
        Ok(v) if (200..300).contains(&status) => v,
        Ok(v) => {
            return fail(format!(
                "{status}: {}",
                v["error"]
                    .as_str()
                    .map_or_else(|| v.to_string(), str::to_string)
            ))
        }
        Err(e) => return fail(e),
    };
    match verb {
        "list" => {
            let _ = writeln!(
                out,
                "{:<50}  {:<24}  {:<6}  {:<25}  LAST RUN",
                "PERIODIC", "SCHEDULE", "PAUSED", "NEXT FIRE"
            );
            for p in v["periodics"].as_array().into_iter().flatten() {
                let s = |k: &str| p[k].as_str().unwrap_or("-").to_string();
                let last = match &p["last_run"] {
                    serde_json::Value::Null => "-".to_string(),
                    r => format!(
                        "{} {} {}",
                        r["id"].as_str().unwrap_or_default(),
                        r["state"].as_str().unwrap_or_default(),
                        r["created_at"].as_str().unwrap_or_default()
                    ),
                };
                let _ = writeln!(
                    out,
                    "{:<50}  {:<24}  {:<6}  {:<25}  {last}",
                    s("identity"),
                    s("schedule"),
                    if p["paused"].as_bool() == Some(true) {
                        "yes"
                    } else {
                        "no"
                    },
                    s("next_fire"),
                );
            }
        }
        "trigger" => {
            let _ = writeln!(
                out,
                "{} {}",
                v["id"].as_str().unwrap_or_default(),
                v["state"].as_str().unwrap_or_default()
            );
        }
        _ => {
            let _ = writeln!(
                out,
                "{} {}",
                v["periodic"].as_str().unwrap_or_default(),
                if v["paused"].as_bool() == Some(true) {
                    "paused"
                } else {
                    "resumed"
                }
            );
        }
    }
    Ok(())
}
