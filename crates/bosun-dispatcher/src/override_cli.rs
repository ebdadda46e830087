//! `bosun dispatch override`: operators' overrides of a running dispatcher
//! (`bosun dispatcher`, or `bosun serve` at `URL/api/v1/dispatch`) over its
//! HTTP API: create, list, cancel.
//!
//! ```text
//! bosun dispatch override create --server URL [--token-file F]
//!     (--job NAME | --file PATH | --drain CLUSTER) [--cluster CLUSTER]
//!     --ttl 2h --reason TEXT [--actor NAME]
//! bosun dispatch override list   --server URL
//! bosun dispatch override cancel --server URL [--token-file F] ID
//! ```

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use bosun_base::command::{Failed, Outcome};
use clap::{Args, Subcommand};

/// Where the dispatcher is, and the token its mutations need.
#[derive(Args, Debug, Clone)]
pub struct Server {
    /// The dispatcher's base URL: `http://HOST:8081` (`bosun dispatcher`) or
    /// `http://HOST:8080/api/v1/dispatch` (`bosun serve`).
    #[arg(long)]
    pub server: String,
    /// A file holding the API token (creating and cancelling need it).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

/// `bosun dispatch override` subcommands.
#[derive(Subcommand, Debug, Clone)]
pub enum OverrideCommand {
    /// Force a job or a job-config file onto a cluster, or drain a cluster,
    /// for a while (at most 24h).
    Create {
        #[command(flatten)]
        server: Server,
        /// A job: all jobs of that name.
        #[arg(long, conflicts_with_all = ["file", "drain"])]
        job: Option<String>,
        /// A job-config file (relative to its job-config directory).
        #[arg(long, conflicts_with = "drain")]
        file: Option<String>,
        /// A cluster whose relocatable jobs move off it.
        #[arg(long)]
        drain: Option<String>,
        /// Where the job or file goes.
        #[arg(long)]
        cluster: Option<String>,
        /// How long (a Go duration: `2h`, `90m`).
        #[arg(long)]
        ttl: String,
        /// Why.
        #[arg(long)]
        reason: String,
        /// Who (default: `$USER`, else `$LOGNAME`).
        #[arg(long)]
        actor: Option<String>,
    },
    /// The overrides in force.
    List {
        #[command(flatten)]
        server: Server,
    },
    /// Cancel an override: back to the plan.
    Cancel {
        #[command(flatten)]
        server: Server,
        /// Its id (`ov-N`).
        id: String,
    },
}

/// `bosun dispatch override` arguments.
#[derive(Args, Debug, Clone)]
pub struct OverrideArgs {
    #[command(subcommand)]
    pub command: OverrideCommand,
}

fn token(server: &Server) -> Result<Option<String>, String> {
    server
        .token_file
        .as_ref()
        .map(|p| {
            std::fs::read_to_string(p)
                .map(|t| t.trim().to_string())
                .map_err(|e| format!("{}: {e}", p.display()))
        })
        .transpose()
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

/// Status and body of an answer.
fn answer(
    r: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
) -> Result<(u16, String), String> {
    let mut r = r.map_err(|e| e.to_string())?;
    let status = r.status().as_u16();
    let body = r.body_mut().read_to_string().map_err(|e| e.to_string())?;
    Ok((status, body))
}

/// Runs `bosun dispatch override`, printing to `out`.
pub fn command(args: &OverrideArgs, out: &mut dyn Write) -> Outcome {
    run(args, out).map_err(|e| Failed::with_line(1, format!("bosun dispatch override: {e}")))
}

fn run(args: &OverrideArgs, out: &mut dyn Write) -> Result<(), String> {
    let base = |s: &Server| s.server.trim_end_matches('/').to_string();
    let with_token =
        |req: ureq::RequestBuilder<ureq::typestate::WithBody>, t: &Option<String>| match t {
            Some(t) => req.header("Authorization", &format!("Bearer {t}")),
            None => req,
        };
    let (status, body) = match &args.command {
        OverrideCommand::Create {
            server,
            job,
            file,
            drain,
            cluster,
            ttl,
            reason,
            actor,
        } => {
            let actor = actor
                .clone()
                .or_else(|| std::env::var("USER").ok())
                .or_else(|| std::env::var("LOGNAME").ok())
                .ok_or("who makes it? give --actor (no $USER or $LOGNAME)")?;
            let body = serde_json::json!({
                "job": job, "file": file, "drain": drain, "cluster": cluster,
                "ttl": ttl, "reason": reason, "actor": actor,
            });
            let req = agent()
                .post(format!("{}/overrides", base(server)))
                .header("Content-Type", "application/json");
            answer(with_token(req, &token(server)?).send(body.to_string()))?
        }
        OverrideCommand::List { server } => {
            answer(agent().get(format!("{}/overrides", base(server))).call())?
        }
        OverrideCommand::Cancel { server, id } => {
            let mut req = agent().delete(format!("{}/overrides/{id}", base(server)));
            if let Some(t) = token(server)? {
                req = req.header("Authorization", &format!("Bearer {t}"));
            }
            answer(req.call())?
        }
    };
    match status {
        200 | 201 => {
            let _ = writeln!(out, "{}", body.trim_end());
            Ok(())
        }
        204 => {
            let _ = writeln!(out, "cancelled");
            Ok(())
        }
        _ => Err(format!("{status}: {}", body.trim_end())),
    }
}
