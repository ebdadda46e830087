//! A repository's git remote ([`Remote`]): where it is, which branch is
//! followed, the credentials git is given, and the branch's head
//! ([`Remote::head`], `git ls-remote`, no fetch).
//!
//! Credentials reach git through its environment only
//! ([`bosun_git::remote::RemoteEnv`]): never in a URL, an argument, an
//! error or a recorded command, where they show as `<redacted>`.
//!
//! - [`Credentials::TokenFile`]: the file is read at each use, so a rotated
//!   token is taken up by the next command. Its one line is sent as HTTP
//!   Basic credentials in an `Authorization` header (`http.extraHeader`),
//!   scoped to the remote's scheme, host and port (`http.<origin>/`), so a
//!   redirect to another host never carries it. A bare token is sent as
//!   user `x-access-token` with the token as password: GitHub documents
//!   that pair for git over HTTPS with an App installation token, and
//!   takes any user name with a personal access token, as GitLab, Gitea and
//!   Forgejo do with theirs. Basic rather than Bearer: Bearer is what the
//!   forges' REST APIs take, while their git endpoints are documented with
//!   Basic. A line of the form `USER:PASSWORD` is sent as that pair (for a
//!   forge wanting a given user, GitLab's `oauth2` for an OAuth token).
//!   The machine's credential helpers are turned off for the command
//!   (`credential.helper` empty), so the token is the only credential
//!   tried. HTTPS remotes only (plain HTTP to this machine's loopback
//!   too: a token never crosses the network in clear text).
//! - [`Credentials::SshKey`]: `GIT_SSH_COMMAND=ssh -i KEY -o
//!   IdentitiesOnly=yes -o BatchMode=yes` (the key alone, never a prompt).
//!   The forge's host key must be in the `known_hosts` of the user bosun
//!   runs as. SSH remotes only.
//! - [`Credentials::None`]: the machine's git configuration (its helpers,
//!   its proxies) applies as it is.
//!
//! Every failure is a [`FollowError`] naming the repository and the URL
//! (its user information removed), saying what went wrong, of which
//! [`ErrorKind`], and what to check.

use std::path::PathBuf;

use base64::Engine as _;
use bosun_git::remote::{display_url, find_ref, ls_remote, parse_symref_head, RemoteEnv};
use bosun_git::repo::GitError;
use bosun_git::runner::Command;

/// How git authenticates to a remote (see the module's doc).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Credentials {
    /// None of bosun's: the machine's git configuration applies.
    #[default]
    None,
    /// A file holding a token (or `USER:PASSWORD`), for an HTTP(S) remote.
    TokenFile(PathBuf),
    /// An SSH private key file, for an SSH remote.
    SshKey(PathBuf),
}

/// A repository's git remote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remote {
    /// The repository, `org/name`.
    pub repo: String,
    /// Its clone URI (`https://github.com/org/name.git`,
    /// `git@github.com:org/name.git`).
    pub clone_uri: String,
    /// The branch followed; `None`: the remote's `HEAD` branch.
    pub branch: Option<String>,
    /// How git authenticates.
    pub credentials: Credentials,
}

/// A branch's head on the remote.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Head {
    /// The branch (`main`, without `refs/heads/`).
    pub branch: String,
    /// Its commit.
    pub commit: String,
}

/// What kind of failure a [`FollowError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// bosun's credentials could not be used (the token file or key cannot
    /// be read, or does not fit the URL).
    Credentials,
    /// The remote refused the credentials (or needs some).
    Authentication,
    /// No such repository, or no such branch.
    NotFound,
    /// The remote could not be reached, or answered with a server error.
    Unreachable,
    /// Something on this machine: the mirror's directory, a local git
    /// command.
    Local,
    /// Anything else git reported.
    Other,
}

/// Following a repository failed (see the module's doc).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{repo} ({url}): {problem}; check {check}")]
pub struct FollowError {
    /// The repository, `org/name`.
    pub repo: String,
    /// Its URL, without user information.
    pub url: String,
    /// What kind of failure.
    pub kind: ErrorKind,
    /// What went wrong (git's own words included, secrets redacted).
    pub problem: String,
    /// What to check.
    pub check: String,
}

/// Whether `url` is fetched over HTTP(S).
fn is_http(url: &str) -> bool {
    let lower = url.to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

/// Whether `url` is fetched over SSH (`ssh://`, `git+ssh://`, or the
/// `[user@]host:path` form).
fn is_ssh(url: &str) -> bool {
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("ssh://")
        || lower.starts_with("git+ssh://")
        || lower.starts_with("ssh+git://")
    {
        return true;
    }
    // git's scp-like syntax: a colon before any slash, and no scheme.
    !url.contains("://")
        && url
            .find(':')
            .is_some_and(|colon| !url[..colon].contains('/'))
}

/// Whether a header sent to `url` stays private: HTTPS, or plain HTTP to
/// this machine's loopback (a test server, a local proxy).
fn sent_privately(url: &str) -> bool {
    let shown = display_url(url).to_ascii_lowercase();
    if shown.starts_with("https://") {
        return true;
    }
    let Some(rest) = shown.strip_prefix("http://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.split(':').next().unwrap_or_default(),
    };
    host == "localhost" || host == "::1" || host.starts_with("127.")
}

/// `scheme://host[:port]/` of an HTTP(S) URL, user information removed.
fn origin(url: &str) -> String {
    let shown = display_url(url);
    let (scheme, rest) = shown.split_once("://").unwrap_or(("https", &shown));
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    format!("{scheme}://{host}/")
}

/// `s` quoted for the shell that runs `GIT_SSH_COMMAND`.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

impl Remote {
    /// Its URL as errors and records show it (no user information).
    pub fn url(&self) -> String {
        display_url(&self.clone_uri)
    }

    /// A [`FollowError`] about this remote.
    pub(crate) fn error(
        &self,
        kind: ErrorKind,
        problem: impl Into<String>,
        check: impl Into<String>,
    ) -> FollowError {
        FollowError {
            repo: self.repo.clone(),
            url: self.url(),
            kind,
            problem: problem.into(),
            check: check.into(),
        }
    }

    /// The environment giving git this remote's credentials, the token
    /// file read now.
    pub(crate) fn env(&self) -> Result<RemoteEnv, FollowError> {
        match &self.credentials {
            Credentials::None => Ok(RemoteEnv::new()),
            Credentials::TokenFile(path) => {
                if !is_http(&self.clone_uri) {
                    return Err(self.error(
                        ErrorKind::Credentials,
                        format!("a token file ({}) is for HTTP(S) remotes", path.display()),
                        "the clone URI (https://...) or use an SSH key for an SSH remote",
                    ));
                }
                if !sent_privately(&self.clone_uri) {
                    return Err(self.error(
                        ErrorKind::Credentials,
                        "a token is sent over HTTPS only (or over HTTP to this machine)",
                        "the clone URI: https://...",
                    ));
                }
                let text = std::fs::read_to_string(path).map_err(|e| {
                    self.error(
                        ErrorKind::Credentials,
                        format!("cannot read the token file {}: {e}", path.display()),
                        "that the file exists and the user bosun runs as can read it",
                    )
                })?;
                let token = text.trim();
                let bad = if token.is_empty() {
                    Some("is empty")
                } else if token.lines().count() > 1 {
                    Some("holds more than one line")
                } else if token.chars().any(|c| c.is_control()) {
                    Some("holds control characters")
                } else {
                    None
                };
                if let Some(bad) = bad {
                    return Err(self.error(
                        ErrorKind::Credentials,
                        format!("the token file {} {bad}", path.display()),
                        "that it holds one line: the token, or USER:PASSWORD",
                    ));
                }
                let pair = if token.contains(':') {
                    token.to_string()
                } else {
                    format!("x-access-token:{token}")
                };
                let encoded = base64::engine::general_purpose::STANDARD.encode(&pair);
                let mut env = RemoteEnv::new()
                    // An empty helper clears the machine's list: the token
                    // is the only credential tried.
                    .config("credential.helper", "")
                    .secret_config(
                        format!("http.{}.extraHeader", origin(&self.clone_uri)),
                        format!("Authorization: Basic {encoded}"),
                    )
                    .hide(encoded)
                    .hide(token);
                if let Some((_, password)) = token.split_once(':') {
                    env = env.hide(password);
                }
                Ok(env)
            }
            Credentials::SshKey(path) => {
                if !is_ssh(&self.clone_uri) {
                    return Err(self.error(
                        ErrorKind::Credentials,
                        format!("an SSH key ({}) is for SSH remotes", path.display()),
                        "the clone URI (ssh://... or git@host:org/name) or use a token file for an HTTP(S) remote",
                    ));
                }
                std::fs::File::open(path).map_err(|e| {
                    self.error(
                        ErrorKind::Credentials,
                        format!("cannot read the SSH key {}: {e}", path.display()),
                        "that the file exists and the user bosun runs as can read it",
                    )
                })?;
                Ok(RemoteEnv::new().var(
                    "GIT_SSH_COMMAND",
                    format!(
                        "ssh -i {} -o IdentitiesOnly=yes -o BatchMode=yes",
                        shell_quote(&path.to_string_lossy())
                    ),
                ))
            }
        }
    }

    /// What to check when the remote refused the credentials.
    fn check_credentials(&self) -> String {
        match &self.credentials {
            Credentials::None => format!(
                "whether {} needs credentials: give the remote a token file or an SSH key",
                self.repo
            ),
            Credentials::TokenFile(p) => format!(
                "the token in {}: it must be current and allow reading {}",
                p.display(),
                self.repo
            ),
            Credentials::SshKey(p) => format!(
                "that the key {} may read {} (a deploy key or a user's key)",
                p.display(),
                self.repo
            ),
        }
    }

    /// A failed git command as a [`FollowError`]: `what` (`list the
    /// branches`) failed; its kind and what to check read from git's words.
    pub(crate) fn git_error(&self, what: &str, e: &GitError) -> FollowError {
        let text = format!("{} {}", e.error, e.stderr).to_ascii_lowercase();
        let any = |needles: &[&str]| needles.iter().any(|n| text.contains(n));
        let (kind, check) = if any(&[
            "authentication failed",
            "could not read username",
            "could not read password",
            "terminal prompts disabled",
            "returned error: 401",
            "returned error: 403",
            "permission denied (publickey",
            "invalid username or password",
        ]) {
            (ErrorKind::Authentication, self.check_credentials())
        } else if any(&["host key verification failed"]) {
            (
                ErrorKind::Authentication,
                "that the forge's host key is in the known_hosts of the user bosun runs as"
                    .to_string(),
            )
        } else if any(&[
            "returned error: 404",
            "repository not found",
            "does not appear to be a git repository",
            "not found",
        ]) {
            (
                ErrorKind::NotFound,
                format!(
                    "the clone URI and that {} exists (and that the credentials may see it)",
                    self.repo
                ),
            )
        } else if any(&[
            "could not resolve",
            "connection refused",
            "timed out",
            "failed to connect",
            "couldn't connect",
            "connection reset",
            "returned error: 5",
            "hung up unexpectedly",
            "rpc failed",
        ]) {
            (
                ErrorKind::Unreachable,
                "that the forge is reachable from this machine (retried with backoff)".to_string(),
            )
        } else {
            (
                ErrorKind::Other,
                "the clone URI and the credentials".to_string(),
            )
        };
        let stderr = if e.stderr.is_empty() {
            String::new()
        } else {
            format!(": {}", e.stderr.replace('\n', " | "))
        };
        let class = match kind {
            ErrorKind::Authentication => " (the remote refused the credentials)",
            ErrorKind::NotFound => " (not found)",
            ErrorKind::Unreachable => " (the remote is unreachable or failing)",
            _ => "",
        };
        self.error(
            kind,
            format!(
                "cannot {what}{class}: git {} failed ({}){stderr}",
                e.args, e.error
            ),
            check,
        )
    }

    /// The followed branch's head: the configured branch's commit, or the
    /// remote's `HEAD` branch and its commit when no branch is configured
    /// (`git ls-remote`, no fetch).
    pub fn head(&self) -> Result<Head, FollowError> {
        self.head_recorded(&mut Vec::new())
    }

    /// [`Remote::head`], the command's record added to `commands`.
    pub fn head_recorded(&self, commands: &mut Vec<Command>) -> Result<Head, FollowError> {
        let env = self.env()?;
        match &self.branch {
            Some(branch) => {
                let full = format!("refs/heads/{branch}");
                let (out, record) = ls_remote(&self.clone_uri, &["--heads"], &[&full], &env)
                    .map_err(|e| self.git_error(&format!("read branch {branch}"), &e))?;
                commands.push(record);
                let commit = find_ref(&out, &full).ok_or_else(|| {
                    self.error(
                        ErrorKind::NotFound,
                        format!("the remote has no branch {branch}"),
                        "the branch configured for the repository",
                    )
                })?;
                Ok(Head {
                    branch: branch.clone(),
                    commit,
                })
            }
            None => {
                let (out, record) = ls_remote(&self.clone_uri, &["--symref"], &["HEAD"], &env)
                    .map_err(|e| self.git_error("read the remote's HEAD", &e))?;
                commands.push(record);
                let (branch, commit) = parse_symref_head(&out).ok_or_else(|| {
                    self.error(
                        ErrorKind::NotFound,
                        "the remote's HEAD names no branch (an empty repository?)",
                        "that the repository has a default branch, or configure the branch to follow",
                    )
                })?;
                Ok(Head { branch, commit })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(url: &str, credentials: Credentials) -> Remote {
        Remote {
            repo: "acme/widgets".into(),
            clone_uri: url.into(),
            branch: None,
            credentials,
        }
    }

    #[test]
    fn urls_are_told_apart() {
        assert!(is_http("HTTPS://github.com/a/b"));
        assert!(!is_http("git@github.com:a/b"));
        assert!(is_ssh("git@github.com:a/b.git"));
        assert!(is_ssh("ssh://git@github.com/a/b.git"));
        assert!(!is_ssh("https://github.com/a/b"));
        assert!(!is_ssh("/srv/a/b.git"));
        assert!(!is_ssh("./a:b"));
        assert_eq!(
            origin("https://bot:s3cret@github.com:8443/a/b.git"),
            "https://github.com:8443/"
        );
        assert_eq!(shell_quote("/k/it's key"), r"'/k/it'\''s key'");
    }

    #[test]
    fn an_ssh_key_is_given_through_git_ssh_command() {
        let tmp = tempfile::tempdir().unwrap();
        let key = tmp.path().join("id key");
        std::fs::write(&key, "KEY").unwrap();
        let r = remote(
            "git@example.com:acme/widgets.git",
            Credentials::SshKey(key.clone()),
        );
        let shown = format!("{:?}", r.env().unwrap());
        assert!(
            shown.contains(&format!(
                "GIT_SSH_COMMAND=ssh -i '{}' -o IdentitiesOnly=yes -o BatchMode=yes",
                key.display()
            )),
            "{shown}"
        );
        // A key for an HTTPS remote, a missing key: what to check.
        let e = remote("https://example.com/a/b", Credentials::SshKey(key.clone()))
            .env()
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Credentials);
        let e = remote(
            "ssh://example.com/a/b",
            Credentials::SshKey(tmp.path().join("nokey")),
        )
        .env()
        .unwrap_err();
        assert!(e.to_string().contains("cannot read the SSH key"), "{e}");
        assert!(
            e.to_string()
                .starts_with("acme/widgets (ssh://example.com/a/b): "),
            "{e}"
        );
    }

    #[test]
    fn a_token_file_is_checked_and_never_shown() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("token");
        let url = "https://bot:urlpass@example.com/acme/widgets.git";
        let r = remote(url, Credentials::TokenFile(file.clone()));
        // Missing, empty, two lines: said so, with the file and what to check.
        let e = r.env().unwrap_err();
        assert_eq!(e.kind, ErrorKind::Credentials);
        assert!(e.to_string().contains("cannot read the token file"), "{e}");
        assert!(!e.to_string().contains("urlpass"), "{e}");
        std::fs::write(&file, "\n").unwrap();
        assert!(r.env().unwrap_err().to_string().contains("is empty"));
        std::fs::write(&file, "a\nb\n").unwrap();
        assert!(r
            .env()
            .unwrap_err()
            .to_string()
            .contains("more than one line"));
        // Read at each use: a new token is taken up.
        std::fs::write(&file, "tok-one\n").unwrap();
        let one = r.env().unwrap();
        std::fs::write(&file, "tok-two\n").unwrap();
        let two = r.env().unwrap();
        assert_eq!(one.redact("x tok-one"), "x <redacted>");
        assert_eq!(two.redact("x tok-two tok-one"), "x <redacted> tok-one");
        let shown = format!("{two:?}");
        assert!(!shown.contains("tok-two"), "{shown}");
        assert!(
            shown.contains("http.https://example.com/.extraHeader"),
            "{shown}"
        );
        assert!(!shown.contains("urlpass"), "{shown}");
        // Never in clear text over the network; over HTTP to this machine,
        // yes.
        for (url, private) in [
            ("http://example.com/a/b", false),
            ("http://127.0.0.1:8080/a/b", true),
            ("http://[::1]:8080/a/b", true),
            ("http://localhost/a/b", true),
            ("http://localhost.example.com/a/b", false),
            ("HTTPS://example.com/a/b", true),
        ] {
            let r = remote(url, Credentials::TokenFile(file.clone()));
            assert_eq!(r.env().is_ok(), private, "{url}");
        }
        // A token for an SSH remote is refused.
        let e = remote("git@example.com:a/b", Credentials::TokenFile(file))
            .env()
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Credentials);
    }

    #[test]
    fn git_failures_say_what_to_check() {
        let r = remote(
            "https://example.com/a/b",
            Credentials::TokenFile("/t".into()),
        );
        let e = |stderr: &str| GitError {
            args: "ls-remote --heads -- https://example.com/a/b".into(),
            dir: "/".into(),
            error: "exit status 128".into(),
            stderr: stderr.into(),
        };
        let kind = |stderr: &str| r.git_error("list", &e(stderr)).kind;
        assert_eq!(
            kind("fatal: could not read Username for 'https://example.com': terminal prompts disabled"),
            ErrorKind::Authentication
        );
        assert_eq!(
            kind("fatal: unable to access 'https://example.com/a/b/': The requested URL returned error: 500"),
            ErrorKind::Unreachable
        );
        assert_eq!(
            kind("remote: Repository not found.\nfatal: repository 'https://example.com/a/b/' not found"),
            ErrorKind::NotFound
        );
        assert_eq!(kind("fatal: something new"), ErrorKind::Other);
        let shown = r
            .git_error("list", &e("fatal: Authentication failed"))
            .to_string();
        assert!(shown.contains("check the token in /t"), "{shown}");
    }
}
