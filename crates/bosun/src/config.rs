//! `bosun config status` and `bosun config reload`: the daemon's
//! configuration over the API (`GET /api/v1/config/status`, `POST
//! /api/v1/config/reload`). Both exit 1 when the last load failed, after
//! printing its errors (file, line, job).

use bosun_base::command::{Failed, Outcome};
use std::io::Write;

use clap::{Args, Subcommand};
use serde_json::Value;

use crate::client::{Api, Format, OutputArgs, ServerArgs};

/// What `bosun config` does.
#[derive(Subcommand, Debug, Clone)]
pub enum ConfigAction {
    /// Show the configuration in force and the last load's errors and
    /// warnings; exit 1 when the last load failed.
    Status,
    /// Load the configuration again now; print its errors and exit 1 when it
    /// is invalid (the last good one stays in force).
    Reload,
}

/// `bosun config` arguments.
#[derive(Args, Debug, Clone)]
pub struct ConfigArgs {
    #[command(subcommand)]
    pub action: ConfigAction,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// Shows or reloads the daemon's configuration.
pub fn config(args: &ConfigArgs, out: &mut dyn Write) -> Outcome {
    let api = Api::new(&args.server)?;
    let answer = match args.action {
        ConfigAction::Status => api.get("/api/v1/config/status")?,
        ConfigAction::Reload => api.post("/api/v1/config/reload", None)?,
    };
    // A reload of an invalid configuration is a 422 with the status.
    if !answer.ok() && answer.status != 422 {
        return Err(api.refused(&answer, None));
    }
    let status = answer.json()?;
    if args.output.output == Format::Json {
        answer.print(out)?;
    } else {
        report(&status, out)?;
    }
    if status["ok"] == true {
        Ok(())
    } else {
        let errors = status["errors"].as_array().map_or(0, Vec::len);
        Err(Failed::error(format!(
            "the configuration is invalid ({errors} error{}); version {} stays in force",
            if errors == 1 { "" } else { "s" },
            status["version"]
        )))
    }
}

/// The status for people: what is in force, the last load, its errors,
/// warnings and notes one a line.
fn report(s: &Value, out: &mut dyn Write) -> Result<(), Failed> {
    let text = |k: &str| s[k].as_str().unwrap_or("-").to_string();
    let count = |k: &str| s[k].as_u64().unwrap_or(0);
    writeln!(
        out,
        "configuration: {}",
        if s["ok"] == true {
            "valid"
        } else {
            "invalid: the last good one stays in force"
        }
    )?;
    writeln!(
        out,
        "in force: version {}, loaded {}: {} periodics, {} presubmits, {} postsubmits",
        s["version"],
        text("loaded_at"),
        count("periodics"),
        count("presubmits"),
        count("postsubmits")
    )?;
    writeln!(
        out,
        "last load: {} ({})",
        text("last_attempt_at"),
        text("last_attempt_reason")
    )?;
    for (key, title) in [
        ("errors", "errors"),
        ("warning_messages", "warnings"),
        ("notes", "notes"),
    ] {
        let items: Vec<&str> = s[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if !items.is_empty() {
            writeln!(out, "{title}:")?;
            // An item's own lines (a hint under an error) indented under it.
            for i in items {
                writeln!(out, "  {}", i.replace('\n', "\n  "))?;
            }
        }
    }
    Ok(())
}
