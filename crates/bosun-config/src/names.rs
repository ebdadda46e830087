//! Names and regular expressions: what a job name, a label, an annotation key and
//! a repository name may look like (Prow's and Kubernetes' rules, with their
//! texts), and the syntax check of the Go regular expressions jobs carry.
//!
//! Pure functions over strings; nothing here knows about jobs or files.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;

/// The Prow job name rule.
pub const JOB_NAME_REGEX: &str = "^[A-Za-z0-9-._]+$";
/// The Prow job name rule for Jenkins jobs (which may contain `/`).
pub(crate) const JENKINS_JOB_NAME_REGEX: &str = "^[A-Za-z0-9-._]([A-Za-z0-9-._/]*[A-Za-z0-9-_])?$";
/// Kubernetes label values (and so `prow.k8s.io/job`) are at most this long.
pub const MAX_LABEL_LEN: usize = 63;

/// Labels a job may not set: decoration sets them.
pub(crate) const RESERVED_LABELS: &[&str] =
    &["prow.k8s.io/type", "created-by-prow", "prow.k8s.io/id"];

/// Whether `name` is a valid job name for `agent` ([`JOB_NAME_REGEX`], or
/// [`JENKINS_JOB_NAME_REGEX`] for Jenkins jobs).
pub(crate) fn valid_job_name(name: &str, agent: &str) -> bool {
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_');
    if agent == "jenkins" {
        static RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(JENKINS_JOB_NAME_REGEX).unwrap());
        return RE.is_match(name);
    }
    !name.is_empty() && name.chars().all(ok)
}

/// `ORG/REPO`: two non-empty parts.
pub(crate) fn valid_repo_name(repo: &str) -> bool {
    matches!(repo.split_once('/'), Some((o, r)) if !o.is_empty() && !r.is_empty() && !r.contains('/'))
}

/// A git remote bosun can follow: `https://`, `http://`, `ssh://` or
/// `file://` with something after the scheme, or scp-like `[user@]host:path`
/// (`git@github.com:org/repo.git`); no whitespace or control characters.
pub(crate) fn valid_clone_uri(uri: &str) -> bool {
    if uri.is_empty() || uri.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return false;
    }
    if let Some((scheme, rest)) = uri.split_once("://") {
        return matches!(scheme, "https" | "http" | "ssh" | "file") && !rest.is_empty();
    }
    // scp-like, as git tells it: a `:` before any `/`.
    let Some((host, path)) = uri.split_once(':') else {
        return false;
    };
    let host = host
        .rsplit_once('@')
        .map_or(host, |(user, host)| if user.is_empty() { "" } else { host });
    !host.is_empty() && !host.contains('/') && !path.is_empty()
}

/// A branch name git accepts, simply checked (`git check-ref-format
/// --branch`'s main rules): not empty; no whitespace, control characters,
/// `~ ^ : ? * [ \`, `..`, `@{` or `//`; not starting with `-` or `/`; not
/// ending with `/`, `.` or `.lock`; no part starting with `.`; not `@`.
pub(crate) fn valid_branch_name(branch: &str) -> bool {
    let bad_char = |c: char| {
        c.is_whitespace() || c.is_control() || matches!(c, '~' | '^' | ':' | '?' | '*' | '[' | '\\')
    };
    !branch.is_empty()
        && branch != "@"
        && !branch.chars().any(bad_char)
        && !branch.contains("..")
        && !branch.contains("@{")
        && !branch.contains("//")
        && !branch.starts_with(['-', '/'])
        && !branch.ends_with(['/', '.'])
        && !branch.ends_with(".lock")
        && !branch.split('/').any(|part| part.starts_with('.'))
}

// --- Kubernetes name rules (apimachinery's IsQualifiedName / IsValidLabelValue).

const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";

fn regex_msg(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let mut s = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push_str(&format!("'{e}', "));
    }
    s.push_str(&format!("regex used for validation is '{fmt}')"));
    s
}

fn anchored(fmt: &str) -> Regex {
    Regex::new(&format!("^{fmt}$")).expect("valid")
}

/// Kubernetes' `IsQualifiedName` errors.
pub fn qualified_name_errors(value: &str) -> Vec<String> {
    static NAME: LazyLock<Regex> = LazyLock::new(|| anchored(QUALIFIED_NAME_FMT));
    static SUBDOMAIN: LazyLock<Regex> = LazyLock::new(|| anchored(DNS1123_SUBDOMAIN_FMT));
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                if prefix.len() > 253 {
                    errs.push("prefix part must be no more than 253 characters".to_string());
                }
                if !SUBDOMAIN.is_match(prefix) {
                    errs.push(format!(
                        "prefix part {}",
                        regex_msg(DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, &["example.com"])
                    ));
                }
            }
            name
        }
        _ => {
            return vec![format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_msg(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
            )]
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".to_string());
    }
    if !NAME.is_match(name) {
        errs.push(format!(
            "name part {}",
            regex_msg(
                QUALIFIED_NAME_MSG,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// Kubernetes' `IsValidLabelValue` errors.
pub fn label_value_errors(value: &str) -> Vec<String> {
    static VALUE: LazyLock<Regex> = LazyLock::new(|| anchored(LABEL_VALUE_FMT));
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !VALUE.is_match(value) {
        errs.push(regex_msg(
            LABEL_VALUE_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

// --- Regular expressions written in jobs.

/// Prow joins a list of branch patterns into one alternation.
pub(crate) fn join_alternatives(list: &[String]) -> Option<String> {
    (!list.is_empty()).then(|| list.join("|"))
}

/// Syntax check of a Go regular expression. Parsing is enough here (and far
/// cheaper than compiling thousands of patterns); patterns are compiled where a
/// match is needed.
pub(crate) fn regex_error(pattern: Option<&str>) -> Option<String> {
    let p = pattern?;
    // Real configurations repeat the same few branch patterns thousands of times.
    thread_local! {
        static CHECKED: RefCell<HashMap<String, Option<String>>> = RefCell::new(HashMap::new());
    }
    CHECKED.with(|c| {
        let mut c = c.borrow_mut();
        if let Some(r) = c.get(p) {
            return r.clone();
        }
        let r = regex_syntax::Parser::new().parse(p).err().map(|e| {
            let text = e.to_string();
            let last = text.lines().last().unwrap_or_default().trim();
            last.strip_prefix("error:")
                .unwrap_or(last)
                .trim()
                .to_string()
        });
        if c.len() > 4096 {
            c.clear();
        }
        c.insert(p.to_string(), r.clone());
        r
    })
}

/// The `regex` crate's error without its `error:` prefix and pattern excerpt.
pub(crate) fn short_regex_error(e: &regex::Error) -> String {
    e.to_string()
        .lines()
        .filter(|l| l.starts_with("error:"))
        .map(|l| l.trim_start_matches("error:").trim().to_string())
        .next()
        .unwrap_or_else(|| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names() {
        assert!(qualified_name_errors("preset-service-account").is_empty());
        assert!(qualified_name_errors("testgrid.k8s.io/dashboards").is_empty());
        assert_eq!(
            qualified_name_errors("/x"),
            vec!["prefix part must be non-empty"]
        );
        assert_eq!(qualified_name_errors("a/b/c").len(), 1);
        let e = qualified_name_errors("bad label");
        assert_eq!(e, vec!["name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"]);
        assert_eq!(qualified_name_errors("").len(), 2);
    }

    #[test]
    fn clone_uris() {
        for ok in [
            "https://github.com/org/repo.git",
            "http://git.local/org/repo",
            "ssh://git@github.com/org/repo.git",
            "file:///srv/git/repo.git",
            "git@github.com:org/repo.git",
            "host:org/repo",
        ] {
            assert!(valid_clone_uri(ok), "{ok}");
        }
        for bad in [
            "",
            "github.com/org/repo",
            "ftp://host/repo",
            "https://",
            "https://host/a repo",
            "@host:repo",
            "git@host:",
            "/srv/git/repo.git",
            "./repo:x",
        ] {
            assert!(!valid_clone_uri(bad), "{bad}");
        }
    }

    #[test]
    fn branch_names() {
        for ok in ["main", "release-1.0", "feature/x", "v1@2"] {
            assert!(valid_branch_name(ok), "{ok}");
        }
        for bad in [
            "", "@", "a b", "a..b", "-x", "/x", "x/", "x.", "x.lock", "a//b", "a:b", "a~1", "a^",
            "a?", "a*", "a[", "a\\b", "a@{1}", ".x", "a/.b", "a\tb",
        ] {
            assert!(!valid_branch_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn label_values() {
        assert!(label_value_errors("").is_empty());
        assert!(label_value_errors("true").is_empty());
        assert_eq!(label_value_errors("-x").len(), 1);
        assert_eq!(label_value_errors(&"a".repeat(64)).len(), 1);
    }
}
