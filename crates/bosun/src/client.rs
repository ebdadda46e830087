//! What the commands over the daemon's API share: where the daemon is and
//! the token ([`ServerArgs`]), the listings' output format ([`OutputArgs`]),
//! the requests ([`Api`]), and errors that say what to do about them. The
//! commands are `runs` (`run`, `runs`, `logs`, `abort`, `rerun`),
//! `periodics`, `clusters` and `config`.

use bosun_base::command::Failed;
use std::io::{Read, Write};
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use serde_json::Value;

/// Where the daemon is, and the token it wants.
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
    /// A file with the token, sent with every request: the API token
    /// (`bosun serve --api-token-file`) for actions, it or the read token
    /// (`--read-token-file`) for reads.
    #[arg(long, value_name = "FILE", env = "BOSUN_TOKEN_FILE", global = true)]
    pub token_file: Option<PathBuf>,
}

/// How a listing is printed.
#[derive(ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Format {
    /// Columns, for people.
    #[default]
    Table,
    /// The API's JSON answer as it is, for scripts.
    Json,
}

/// `--output` (`-o`).
#[derive(Args, Debug, Clone)]
pub struct OutputArgs {
    /// `table` for people, `json` for the API's answer as it is.
    #[arg(
        short = 'o',
        long = "output",
        value_enum,
        default_value_t,
        global = true
    )]
    pub output: Format,
}

/// The daemon's API as the commands use it: its URL and the token, sent with
/// every request when one is given (reads need one too when the daemon has
/// a read token).
pub struct Api {
    base: String,
    token: Option<String>,
    token_file: Option<PathBuf>,
    agent: ureq::Agent,
}

/// An answer of the API: its status and body.
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// The body as text.
    pub body: String,
}

impl Answer {
    /// A 2xx.
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body as JSON.
    pub fn json(&self) -> Result<Value, Failed> {
        serde_json::from_str(&self.body).map_err(|e| {
            Failed::error(format!(
                "the daemon's answer is not JSON ({e}): {}",
                self.body
            ))
        })
    }

    /// Why the API refused: its `error`, else the body as it is.
    pub fn reason(&self) -> String {
        serde_json::from_str::<Value>(&self.body)
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_string))
            .unwrap_or_else(|| self.body.trim().to_string())
    }

    /// Prints the body as it is (a listing's `-o json`).
    pub fn print(&self, out: &mut dyn Write) -> Result<(), Failed> {
        out.write_all(self.body.as_bytes())?;
        if !self.body.ends_with('\n') {
            writeln!(out)?;
        }
        Ok(())
    }
}

impl Api {
    /// The API of the daemon `args` names, with the token of its token file.
    pub fn new(args: &ServerArgs) -> Result<Api, Failed> {
        let token = args
            .token_file
            .as_ref()
            .map(|p| {
                std::fs::read_to_string(p)
                    .map(|t| t.trim().to_string())
                    .map_err(|e| Failed::error(format!("cannot read {}: {e}", p.display())))
            })
            .transpose()?;
        Ok(Api {
            base: args.server.trim_end_matches('/').to_string(),
            token,
            token_file: args.token_file.clone(),
            agent: ureq::Agent::config_builder()
                .http_status_as_error(false)
                .build()
                .into(),
        })
    }

    /// `GET path`: any answer, or why the daemon could not be reached.
    pub fn get(&self, path: &str) -> Result<Answer, Failed> {
        let mut req = self.agent.get(format!("{}{path}", self.base));
        if let Some(t) = &self.token {
            req = req.header("Authorization", &format!("Bearer {t}"));
        }
        answer(req.call().map_err(|e| self.unreachable(e))?)
    }

    /// `POST path` with a JSON body, or none.
    pub fn post(&self, path: &str, body: Option<&Value>) -> Result<Answer, Failed> {
        let mut req = self.agent.post(format!("{}{path}", self.base));
        if let Some(t) = &self.token {
            req = req.header("Authorization", &format!("Bearer {t}"));
        }
        let resp = match body {
            Some(b) => req.send_json(b),
            None => req.send_empty(),
        };
        answer(resp.map_err(|e| self.unreachable(e))?)
    }

    /// `GET path`, its body copied to `out` as it comes (a log followed);
    /// an answer that is not a 2xx is handed back, read whole.
    pub fn stream(&self, path: &str, out: &mut dyn Write) -> Result<Result<(), Answer>, Failed> {
        let mut req = self.agent.get(format!("{}{path}", self.base));
        if let Some(t) = &self.token {
            req = req.header("Authorization", &format!("Bearer {t}"));
        }
        let mut resp = req.call().map_err(|e| self.unreachable(e))?;
        if !resp.status().is_success() {
            return Ok(Err(answer(resp)?));
        }
        let mut reader = resp.body_mut().as_reader();
        let mut buf = [0u8; 8192];
        loop {
            match reader.read(&mut buf) {
                Ok(0) => return Ok(Ok(())),
                Ok(n) => {
                    out.write_all(&buf[..n])?;
                    out.flush()?;
                }
                Err(e) => {
                    return Err(Failed::error(format!(
                        "the daemon at {} stopped answering: {e}",
                        self.base
                    )))
                }
            }
        }
    }

    /// `answer` if it is a 2xx, else why not ([`Api::refused`]).
    pub fn check(&self, answer: Answer, run: Option<&str>) -> Result<Answer, Failed> {
        if answer.ok() {
            Ok(answer)
        } else {
            Err(self.refused(&answer, run))
        }
    }

    /// A refusal as an error that says what to do: a token to pass (401),
    /// the API's reason as it is (403: a trusted cluster's rules, and any
    /// other status), a run that does not exist (a 404 about the run `run`).
    pub fn refused(&self, answer: &Answer, run: Option<&str>) -> Failed {
        let reason = answer.reason();
        match answer.status {
            401 => Failed::error(match &self.token_file {
                None => format!(
                    "the daemon at {} wants a token (401): pass --token-file FILE \
                     (or set BOSUN_TOKEN_FILE) with its API token",
                    self.base
                ),
                Some(f) => format!(
                    "the daemon at {} refused the token in {} (401): pass --token-file FILE \
                     (or set BOSUN_TOKEN_FILE) with its API token",
                    self.base,
                    f.display()
                ),
            }),
            403 => Failed::error(format!("refused: {reason}")),
            404 if run.is_some_and(|id| self.run_is_missing(id)) => Failed::error(format!(
                "no run {}; list runs with `bosun runs`",
                run.unwrap_or_default()
            )),
            409 => {
                let candidates: Vec<String> = serde_json::from_str::<Value>(&answer.body)
                    .ok()
                    .and_then(|v| v["candidates"].as_array().cloned())
                    .unwrap_or_default()
                    .iter()
                    .map(|c| {
                        let mut s = format!("--type {}", c["type"].as_str().unwrap_or_default());
                        if let Some(r) = c["repo"].as_str() {
                            s.push_str(&format!(" --repo {r}"));
                        }
                        s
                    })
                    .collect();
                if candidates.is_empty() {
                    Failed::error(format!("{}: {reason}", answer.status))
                } else {
                    Failed::error(format!("{reason}; one of: {}", candidates.join(" | ")))
                }
            }
            status => Failed::error(format!("{status}: {reason}")),
        }
    }

    /// The daemon says there is no run `id`.
    fn run_is_missing(&self, id: &str) -> bool {
        self.get(&format!("/api/v1/runs/{}", segment(id)))
            .is_ok_and(|a| a.status == 404)
    }

    /// Why the daemon could not be reached, and what to do.
    fn unreachable(&self, e: ureq::Error) -> Failed {
        Failed::error(format!(
            "cannot reach the daemon at {} ({e}): start it with `bosun serve`, \
             or give its URL with --server URL (or set BOSUN_SERVER)",
            self.base
        ))
    }
}

/// A response read whole.
fn answer(mut resp: ureq::http::Response<ureq::Body>) -> Result<Answer, Failed> {
    let status = resp.status().as_u16();
    let body = resp
        .body_mut()
        .with_config()
        .limit(u64::MAX)
        .read_to_string()
        .map_err(|e| Failed::error(format!("cannot read the daemon's answer: {e}")))?;
    Ok(Answer { status, body })
}

/// Percent-encodes a path segment or a query value (an in-repo identity has
/// a `/`).
pub fn segment(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b':' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Rows printed as columns as wide as their widest cell, two spaces apart
/// (the last column as it is).
pub fn columns(out: &mut dyn Write, rows: &[Vec<String>]) -> Result<(), Failed> {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..n)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_as_wide_as_their_widest_cell() {
        let mut out = Vec::new();
        let rows = [
            vec!["ALIAS".to_string(), "KIND".into(), "TRUSTED".into()],
            vec!["default".to_string(), "local".into(), "no".into()],
            vec!["t".to_string(), "kubernetes".into(), "jobs=a".into()],
        ];
        columns(&mut out, &rows).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "ALIAS    KIND        TRUSTED\ndefault  local       no\nt        kubernetes  jobs=a\n"
        );
    }

    #[test]
    fn segments_are_percent_encoded() {
        assert_eq!(segment("org/app:name x"), "org%2Fapp:name%20x");
    }
}
