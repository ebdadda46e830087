//! `bosun repos` and `bosun repos refresh ORG/REPO`: the repositories the
//! daemon follows from their remotes, over the API (`GET /api/v1/repos`,
//! `POST /api/v1/repos/{org}/{repo}/refresh`). A repository whose last load
//! failed shows its error (file:line, the commit) under its row; `refresh`
//! exits 1 when the configuration it loaded was refused.

use bosun_base::command::{Failed, Outcome};
use std::io::Write;

use clap::{Args, Subcommand};
use serde_json::Value;

use crate::client::{columns, Api, Format, OutputArgs, ServerArgs};

/// What `bosun repos` does.
#[derive(Subcommand, Debug, Clone)]
pub enum ReposAction {
    /// Ask the remote for the branch's head now and load it when it moved;
    /// wait for the load and say what it did. Exit 1 when the configuration
    /// at the head has errors (the last good snapshot stays in force).
    Refresh {
        /// The repository, `ORG/REPO`.
        repo: String,
    },
}

/// `bosun repos` arguments.
#[derive(Args, Debug, Clone)]
pub struct ReposArgs {
    #[command(subcommand)]
    pub action: Option<ReposAction>,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// Lists the followed repositories, or refreshes one.
pub fn repos(args: &ReposArgs, out: &mut dyn Write) -> Outcome {
    let api = Api::new(&args.server)?;
    match &args.action {
        None => list(&api, args, out),
        Some(ReposAction::Refresh { repo }) => refresh(&api, args, repo, out),
    }
}

fn list(api: &Api, args: &ReposArgs, out: &mut dyn Write) -> Outcome {
    let answer = api.check(api.get("/api/v1/repos")?, None)?;
    if args.output.output == Format::Json {
        return answer.print(out);
    }
    let v = answer.json()?;
    let mut rows = vec![vec![
        "REPO".to_string(),
        "BRANCH".into(),
        "COMMIT".into(),
        "LOADED".into(),
        "JOBS".into(),
        "STATE".into(),
        "LAST WEBHOOK".into(),
    ]];
    let mut notes = Vec::new();
    for r in v["repos"].as_array().into_iter().flatten() {
        let name = text(&r["repo"]);
        rows.push(vec![
            name.clone(),
            text(&r["branch"]),
            short(&r["commit"]),
            text(&r["loaded_at"]),
            jobs(&r["jobs_in_force"]),
            text(&r["state"]),
            text(&r["last_webhook_at"]),
        ]);
        notes.extend(details(&name, r));
    }
    columns(out, &rows)?;
    for n in notes {
        writeln!(out, "{n}")?;
    }
    Ok(())
}

fn refresh(api: &Api, args: &ReposArgs, repo: &str, out: &mut dyn Write) -> Outcome {
    let Some((org, name)) = repo.split_once('/') else {
        return Err(Failed::error(format!("{repo:?} is not ORG/REPO")));
    };
    let path = format!(
        "/api/v1/repos/{}/{}/refresh",
        crate::client::segment(org),
        crate::client::segment(name)
    );
    let answer = api.check(api.post(&path, None)?, None)?;
    let v = answer.json()?;
    if args.output.output == Format::Json {
        answer.print(out)?;
    } else {
        let outcome = text(&v["outcome"]);
        let commit = short(&v["commit"]);
        let said = match outcome.as_str() {
            "applied" => format!("{repo}: the configuration at {commit} is in force"),
            "unchanged" => format!("{repo}: {commit} is in force already"),
            "refused" => format!(
                "{repo}: the configuration at {commit} has errors; the last good snapshot stays in force"
            ),
            "retired" => format!("{repo}: retired; nothing loaded"),
            other => format!("{repo}: {other}"),
        };
        writeln!(out, "{said}")?;
        for n in details(repo, &v["repo"]) {
            writeln!(out, "{n}")?;
        }
    }
    if v["outcome"] == "refused" {
        return Err(Failed::status(1));
    }
    Ok(())
}

/// The lines under a repository's row: its error (with each diagnostic),
/// its retirement.
fn details(name: &str, r: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(e) = r["error"].as_object() {
        out.push(format!(
            "  {name}: {}",
            e.get("message").and_then(Value::as_str).unwrap_or_default()
        ));
        for d in e
            .get("diagnostics")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            out.push(format!("    {}", d.as_str().unwrap_or_default()));
        }
    }
    if let Some(t) = r["retired"].as_object() {
        out.push(format!(
            "  {name}: retired: {}",
            t.get("reason").and_then(Value::as_str).unwrap_or_default()
        ));
    }
    out
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

fn short(v: &Value) -> String {
    v.as_str()
        .map_or_else(|| "-".to_string(), |s| s[..s.len().min(12)].to_string())
}

/// `3 periodics, 1 presubmit` from the jobs in force.
fn jobs(v: &Value) -> String {
    let count = |k: &str| v[k].as_array().map_or(0, Vec::len);
    let parts: Vec<String> = [
        ("periodic", count("periodics")),
        ("presubmit", count("presubmits")),
        ("postsubmit", count("postsubmits")),
    ]
    .iter()
    .filter(|(_, n)| *n > 0)
    .map(|(k, n)| format!("{n} {k}{}", if *n == 1 { "" } else { "s" }))
    .collect();
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_and_details_in_words() {
        let v =
            serde_json::json!({"periodics": ["a", "b"], "presubmits": ["c"], "postsubmits": []});
        assert_eq!(jobs(&v), "2 periodics, 1 presubmit");
        assert_eq!(jobs(&serde_json::json!({})), "none");
        let r = serde_json::json!({
            "error": {"message": "1 error(s)", "diagnostics": ["o/r@abc/.lighthouse/x/triggers.yaml:3:5: error: bad"]},
            "retired": {"reason": "archived (repository webhook)"}
        });
        assert_eq!(
            details("o/r", &r),
            vec![
                "  o/r: 1 error(s)".to_string(),
                "    o/r@abc/.lighthouse/x/triggers.yaml:3:5: error: bad".into(),
                "  o/r: retired: archived (repository webhook)".into(),
            ]
        );
    }
}
