//! Commands that reach a remote with credentials bosun holds: what such a
//! command gets besides the scrubbed environment ([`RemoteEnv`]), and how it
//! is shown (its record, its errors) with every secret left out.
//!
//! Credentials never go into a URL or an argument: git gets them through its
//! environment, as configuration (`GIT_CONFIG_COUNT`, `GIT_CONFIG_KEY_n`,
//! `GIT_CONFIG_VALUE_n`, numbered after any the process already has) or as
//! variables (`GIT_SSH_COMMAND`). A secret value is written
//! `NAME=<redacted>` in the command's record, and every secret (and every
//! string [`RemoteEnv::hide`] names) is replaced by `<redacted>` in what git
//! wrote before it reaches a record or an error. URLs are shown without
//! their user information ([`display_url`]). git's tracing variables
//! (`GIT_TRACE*`, `GIT_CURL_VERBOSE`), which would copy headers and
//! configuration to standard error, are removed from such commands.
//!
//! [`ls_remote`] asks a remote for its refs without any repository;
//! [`crate::repo::Repo::fetch_with`] fetches into one.

use std::path::Path;
use std::process::{Command as Process, Output, Stdio};
use std::time::Instant;

use crate::error::GitError;
use crate::runner::{exit_error, scrub, Command, Scope};

/// What [`RemoteEnv`] writes in place of a secret.
pub const REDACTED: &str = "<redacted>";

/// Variables that make git copy what it sends (headers, configuration) to
/// standard error; never passed to a command reaching a remote.
const TRACING: &[&str] = &[
    "GIT_TRACE",
    "GIT_TRACE_CURL",
    "GIT_TRACE_CURL_NO_DATA",
    "GIT_TRACE_PACKET",
    "GIT_TRACE_PACKFILE",
    "GIT_TRACE_PERFORMANCE",
    "GIT_TRACE_SETUP",
    "GIT_TRACE_SHALLOW",
    "GIT_TRACE2",
    "GIT_TRACE2_EVENT",
    "GIT_TRACE2_PERF",
    "GIT_TRACE_REDACT",
    "GIT_CURL_VERBOSE",
];

/// One setting or variable: name, value, whether the value is secret.
#[derive(Clone)]
struct Item {
    name: String,
    value: String,
    secret: bool,
}

/// The environment of a command reaching a remote, besides the scrubbed
/// one (see the module's doc). Its `Debug` form shows no secret.
#[derive(Clone, Default)]
pub struct RemoteEnv {
    config: Vec<Item>,
    vars: Vec<Item>,
    hidden: Vec<String>,
}

impl std::fmt::Debug for RemoteEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteEnv")
            .field("env", &self.describe())
            .finish()
    }
}

impl RemoteEnv {
    /// No setting, no variable.
    pub fn new() -> Self {
        RemoteEnv::default()
    }

    /// Adds the git setting `key` = `value` (shown in records).
    pub fn config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.config.push(Item {
            name: key.into(),
            value: value.into(),
            secret: false,
        });
        self
    }

    /// Adds the git setting `key` = `value`, the value secret.
    pub fn secret_config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.config.push(Item {
            name: key.into(),
            value: value.into(),
            secret: true,
        });
        self
    }

    /// Adds the variable `name` = `value` (shown in records).
    pub fn var(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.vars.push(Item {
            name: name.into(),
            value: value.into(),
            secret: false,
        });
        self
    }

    /// Also replaces `secret` wherever git's output shows it (a token the
    /// secret setting only holds encoded, say). Empty strings are ignored.
    pub fn hide(mut self, secret: impl Into<String>) -> Self {
        let secret = secret.into();
        if !secret.is_empty() {
            self.hidden.push(secret);
        }
        self
    }

    /// `text` with every secret replaced by [`REDACTED`].
    pub fn redact(&self, text: &str) -> String {
        let mut secrets: Vec<&str> = self
            .config
            .iter()
            .chain(&self.vars)
            .filter(|i| i.secret && !i.value.is_empty())
            .map(|i| i.value.as_str())
            .chain(self.hidden.iter().map(String::as_str))
            .collect();
        // The longest first, so a secret containing another goes whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        let mut out = text.to_string();
        for s in secrets {
            if out.contains(s) {
                out = out.replace(s, REDACTED);
            }
        }
        out
    }

    /// The variables as given to the process: `(name, value)`, the
    /// configuration numbered from `first` (the count the process already
    /// has).
    fn pairs(&self, first: usize) -> Vec<(String, &Item)> {
        let mut out = Vec::new();
        for (i, item) in self.config.iter().enumerate() {
            out.push((format!("GIT_CONFIG_KEY_{}", first + i), item));
        }
        out
    }

    /// Sets this environment on `cmd`.
    fn apply(&self, cmd: &mut Process) {
        for name in TRACING {
            cmd.env_remove(name);
        }
        let first = inherited_config_count();
        if !self.config.is_empty() {
            for (key_var, item) in self.pairs(first) {
                let n = &key_var["GIT_CONFIG_KEY_".len()..];
                cmd.env(&key_var, &item.name);
                cmd.env(format!("GIT_CONFIG_VALUE_{n}"), &item.value);
            }
            cmd.env("GIT_CONFIG_COUNT", (first + self.config.len()).to_string());
        }
        for item in &self.vars {
            cmd.env(&item.name, &item.value);
        }
    }

    /// How the environment is recorded: `NAME=VALUE ...`, secrets as
    /// `NAME=<redacted>`.
    fn describe(&self) -> String {
        let first = inherited_config_count();
        let mut parts = Vec::new();
        if !self.config.is_empty() {
            parts.push(format!("GIT_CONFIG_COUNT={}", first + self.config.len()));
        }
        for (key_var, item) in self.pairs(first) {
            let n = &key_var["GIT_CONFIG_KEY_".len()..];
            parts.push(format!("{key_var}={}", item.name));
            let value = if item.secret { REDACTED } else { &item.value };
            parts.push(format!("GIT_CONFIG_VALUE_{n}={value}"));
        }
        for item in &self.vars {
            let value = if item.secret { REDACTED } else { &item.value };
            parts.push(format!("{}={value}", item.name));
        }
        parts.join(" ")
    }
}

/// How many settings the process's own `GIT_CONFIG_COUNT` gives git (kept:
/// a command's settings are numbered after them).
fn inherited_config_count() -> usize {
    std::env::var("GIT_CONFIG_COUNT")
        .ok()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// `url` without its user information (`https://user:secret@host/x` is
/// `https://host/x`); other forms (`git@host:org/repo`, a path) unchanged,
/// their user being no secret.
pub fn display_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    match authority.rsplit_once('@') {
        Some((_, host)) => format!("{scheme}://{host}{path}"),
        None => url.to_string(),
    }
}

/// The password of `url`'s user information, when it has one (hidden in
/// what git writes).
fn url_password(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (userinfo, _) = rest[..end].rsplit_once('@')?;
    userinfo
        .split_once(':')
        .map(|(_, p)| p)
        .filter(|p| !p.is_empty())
}

/// A command reaching the remote `url`: `git [--git-dir DIR] BEFORE URL
/// AFTER`.
pub(crate) struct RemoteCall<'a> {
    /// The repository, if the command works in one.
    pub git_dir: Option<&'a Path>,
    /// The arguments before the URL (`fetch --quiet --`).
    pub before: &'a [&'a str],
    /// The remote.
    pub url: &'a str,
    /// The arguments after the URL (refspecs, patterns).
    pub after: &'a [&'a str],
    /// Its environment.
    pub env: &'a RemoteEnv,
}

impl RemoteCall<'_> {
    /// The arguments as shown: the URL without its user information.
    fn shown_args(&self) -> String {
        let url = display_url(self.url);
        let mut args: Vec<&str> = self.before.to_vec();
        args.push(&url);
        args.extend_from_slice(self.after);
        args.join(" ")
    }

    /// Runs it; its standard output and its record, or the failure (the
    /// record's text, secrets redacted).
    pub(crate) fn run(&self) -> Result<(Vec<u8>, Command), GitError> {
        let env = match url_password(self.url) {
            Some(p) => self.env.clone().hide(p),
            None => self.env.clone(),
        };
        // With no repository, the command runs in `/`, not in whatever
        // repository the process's directory may be in.
        let dir = self.git_dir.unwrap_or(Path::new("/"));
        let shown_dir = dir.display().to_string();
        let mut cmd = Process::new("git");
        if let Some(d) = self.git_dir {
            cmd.arg("--git-dir").arg(d);
        }
        cmd.args(self.before)
            .arg(self.url)
            .args(self.after)
            .current_dir(dir)
            .stdin(Stdio::null());
        scrub(&mut cmd, Scope::Remote);
        env.apply(&mut cmd);
        let start = Instant::now();
        let shown_args = self.shown_args();
        let out: Output = cmd.output().map_err(|e| GitError {
            args: shown_args.clone(),
            dir: shown_dir.clone(),
            error: e.to_string(),
            stderr: String::new(),
        })?;
        let stderr = env.redact(String::from_utf8_lossy(&out.stderr).trim());
        let described = env.describe();
        let record = Command {
            command: format!(
                "PWD={shown_dir} {described}{}git {shown_args}",
                if described.is_empty() { "" } else { " " }
            ),
            output: stderr.clone(),
            error: exit_error(out.status),
            duration: start.elapsed(),
        };
        if out.status.success() {
            Ok((out.stdout, record))
        } else {
            Err(GitError {
                args: shown_args,
                dir: shown_dir,
                error: record.error,
                stderr,
            })
        }
    }
}

/// `git ls-remote ARGS URL PATTERNS`, in no repository: its standard output
/// (`SHA<TAB>REF` lines; with `--symref`, `ref: TARGET<TAB>NAME` lines too)
/// and its record.
pub fn ls_remote(
    url: &str,
    args: &[&str],
    patterns: &[&str],
    env: &RemoteEnv,
) -> Result<(String, Command), GitError> {
    let mut before = vec!["ls-remote"];
    before.extend_from_slice(args);
    before.push("--");
    let (out, record) = RemoteCall {
        git_dir: None,
        before: &before,
        url,
        after: patterns,
        env,
    }
    .run()?;
    Ok((String::from_utf8_lossy(&out).into_owned(), record))
}

/// A `git ls-remote --symref URL HEAD` answer: the branch the remote's
/// `HEAD` names (`main`, without `refs/heads/`) and its commit; `None` when
/// the remote has no `HEAD` (an empty repository) or it names no branch.
pub fn parse_symref_head(out: &str) -> Option<(String, String)> {
    let mut branch = None;
    let mut commit = None;
    for line in out.lines() {
        if let Some(rest) = line.strip_prefix("ref: ") {
            let (target, name) = rest.split_once('\t')?;
            if name == "HEAD" {
                branch = target.strip_prefix("refs/heads/").map(str::to_string);
            }
        } else if let Some((sha, name)) = line.split_once('\t') {
            if name == "HEAD" {
                commit = Some(sha.to_string());
            }
        }
    }
    Some((branch?, commit?))
}

/// The commit `ref_name` (a full name) has in a `git ls-remote` answer.
pub fn find_ref(out: &str, ref_name: &str) -> Option<String> {
    out.lines().find_map(|line| {
        let (sha, name) = line.split_once('\t')?;
        (name == ref_name).then(|| sha.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_shown_without_user_information() {
        assert_eq!(
            display_url("https://x-access-token:s3cret@github.com/o/r.git"),
            "https://github.com/o/r.git"
        );
        assert_eq!(
            display_url("https://bot@example.com:8443/o/r?x=a@b"),
            "https://example.com:8443/o/r?x=a@b"
        );
        assert_eq!(
            display_url("http://127.0.0.1:9/o/r.git"),
            "http://127.0.0.1:9/o/r.git"
        );
        assert_eq!(
            display_url("git@github.com:o/r.git"),
            "git@github.com:o/r.git"
        );
        assert_eq!(display_url("/srv/git/r.git"), "/srv/git/r.git");
        assert_eq!(url_password("https://u:p%40ss@h/x"), Some("p%40ss"));
        assert_eq!(url_password("https://u@h/x"), None);
    }

    #[test]
    fn secrets_are_redacted_and_recorded_by_name_only() {
        let env = RemoteEnv::new()
            .config("http.lowSpeedTime", "30")
            .secret_config("http.https://h/.extraHeader", "Authorization: Basic QUJD")
            .var("GIT_SSH_COMMAND", "ssh -i /k")
            .hide("ABC");
        let text = env.redact("sent Authorization: Basic QUJD, token ABC, again ABC");
        assert_eq!(text, "sent <redacted>, token <redacted>, again <redacted>");
        let shown = env.describe();
        assert!(!shown.contains("QUJD"), "{shown}");
        assert!(shown.contains("GIT_CONFIG_VALUE_"), "{shown}");
        assert!(shown.contains("=<redacted>"), "{shown}");
        assert!(shown.contains("GIT_SSH_COMMAND=ssh -i /k"), "{shown}");
        let debug = format!("{env:?}");
        assert!(!debug.contains("QUJD") && !debug.contains("ABC"), "{debug}");
    }

    #[test]
    fn ls_remote_answers_are_read() {
        let out = "ref: refs/heads/trunk\tHEAD\n0123abcd\tHEAD\n";
        assert_eq!(
            parse_symref_head(out),
            Some(("trunk".to_string(), "0123abcd".to_string()))
        );
        assert_eq!(parse_symref_head(""), None);
        assert_eq!(parse_symref_head("0123abcd\tHEAD\n"), None, "detached");
        let out = "aa\trefs/heads/main\nbb\trefs/heads/x/refs/heads/main\n";
        assert_eq!(find_ref(out, "refs/heads/main").as_deref(), Some("aa"));
        assert_eq!(find_ref(out, "refs/heads/other"), None);
    }
}
