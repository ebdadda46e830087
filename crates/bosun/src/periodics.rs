//! `bosun periodics [list|trigger|pause|resume]`: the periodics over the
//! API (`/api/v1/periodics...`).

use bosun_base::command::Outcome;
use std::io::Write;

use clap::Args;

use crate::client::{columns, segment, Api, Format, OutputArgs, ServerArgs};

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
    pub output: OutputArgs,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// Lists or controls periodics.
pub fn periodics(args: &PeriodicsArgs, out: &mut dyn Write) -> Outcome {
    let api = Api::new(&args.server)?;
    let (verb, periodic) = match &args.action {
        None | Some(PeriodicsAction::List) => ("list", None),
        Some(PeriodicsAction::Trigger { periodic }) => ("trigger", Some(periodic)),
        Some(PeriodicsAction::Pause { periodic }) => ("pause", Some(periodic)),
        Some(PeriodicsAction::Resume { periodic }) => ("resume", Some(periodic)),
    };
    let answer = match periodic {
        None => api.get("/api/v1/periodics")?,
        Some(p) => api.post(&format!("/api/v1/periodics/{}/{verb}", segment(p)), None)?,
    };
    let answer = api.check(answer, None)?;
    if args.output.output == Format::Json {
        return answer.print(out);
    }
    let v = answer.json()?;
    match verb {
        "list" => {
            let mut rows = vec![["PERIODIC", "SCHEDULE", "PAUSED", "NEXT FIRE", "LAST RUN"]
                .map(String::from)
                .to_vec()];
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
                let paused = if p["paused"].as_bool() == Some(true) {
                    "yes"
                } else {
                    "no"
                };
                rows.push(vec![
                    s("identity"),
                    s("schedule"),
                    paused.to_string(),
                    s("next_fire"),
                    last,
                ]);
            }
            columns(out, &rows)?;
        }
        "trigger" => {
            writeln!(
                out,
                "{} {}",
                v["id"].as_str().unwrap_or_default(),
                v["state"].as_str().unwrap_or_default()
            )?;
        }
        _ => {
            writeln!(
                out,
                "{} {}",
                v["periodic"].as_str().unwrap_or_default(),
                if v["paused"].as_bool() == Some(true) {
                    "paused"
                } else {
                    "resumed"
                }
            )?;
        }
    }
    Ok(())
}
