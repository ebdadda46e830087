//! The pull request filters of a run listing (`repo`, `pull`, `sha`), read
//! and checked by one rule for the API (`GET /api/v1/runs`) and the
//! dashboard's runs list, with the messages both give for a bad one.

/// A listing's repository, pull request and head commit, checked: a pull
/// number needs its repository (numbers are per repository), a head commit
/// needs its pull (the store finds a pull's runs through an index of pulls;
/// a commit alone would read every run).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PullFilter {
    /// `org/repo`.
    pub repo: Option<String>,
    /// A positive pull request number of `repo`.
    pub pull: Option<i64>,
    /// A head commit of `pull`.
    pub sha: Option<String>,
}

impl PullFilter {
    /// Reads the three values as given (a missing, empty or blank one is
    /// none, as a form's empty field is); the error says what is wrong and
    /// what is wanted.
    pub fn parse(
        repo: Option<&str>,
        pull: Option<&str>,
        sha: Option<&str>,
    ) -> Result<PullFilter, String> {
        fn given(v: Option<&str>) -> Option<&str> {
            v.map(str::trim).filter(|v| !v.is_empty())
        }
        let (repo, pull, sha) = (given(repo), given(pull), given(sha));
        if let Some(r) = repo {
            let well_formed = r
                .split_once('/')
                .is_some_and(|(org, name)| !org.is_empty() && !name.is_empty())
                && !r.chars().any(|c| c.is_whitespace() || c.is_control());
            if !well_formed {
                return Err(format!("repo must be a repository as org/repo, not {r:?}"));
            }
        }
        let pull = match pull {
            None => None,
            Some(p) => match p.parse::<i64>() {
                Ok(n) if n > 0 => Some(n),
                _ => {
                    return Err(format!(
                        "pull must be a pull request's number (a positive integer), not {p:?}"
                    ))
                }
            },
        };
        if pull.is_some() && repo.is_none() {
            return Err(
                "pull needs repo (org/repo): pull request numbers are per repository".into(),
            );
        }
        if let Some(s) = sha {
            if pull.is_none() {
                return Err(
                    "sha (a pull request's head commit) needs pull and repo: give the pull request too"
                        .into(),
                );
            }
            if !s.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(format!("sha must be a commit's hexadecimal id, not {s:?}"));
            }
        }
        Ok(PullFilter {
            repo: repo.map(str::to_string),
            pull,
            sha: sha.map(str::to_string),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::PullFilter;

    #[test]
    fn a_pull_needs_its_repository_and_a_commit_its_pull() {
        let ok = PullFilter::parse(Some("org/app"), Some("12"), Some("abc123")).unwrap();
        assert_eq!(
            ok,
            PullFilter {
                repo: Some("org/app".into()),
                pull: Some(12),
                sha: Some("abc123".into()),
            }
        );
        // Empty form fields are none.
        assert_eq!(
            PullFilter::parse(Some(""), Some(" "), None).unwrap(),
            PullFilter::default()
        );
        assert_eq!(
            PullFilter::parse(Some("org/app"), None, None).unwrap().repo,
            Some("org/app".into())
        );
        for (repo, pull, sha, says) in [
            (None, Some("12"), None, "pull needs repo"),
            (Some("org/app"), Some("0"), None, "positive integer"),
            (Some("org/app"), Some("-3"), None, "positive integer"),
            (Some("org/app"), Some("12x"), None, "not \"12x\""),
            (Some("org/app"), None, Some("abc"), "needs pull"),
            (Some("org/app"), Some("1"), Some("xyz"), "hexadecimal"),
            (Some("app"), None, None, "org/repo"),
            (Some("org/"), None, None, "org/repo"),
            (Some("/app"), None, None, "org/repo"),
            (Some("org/a pp"), None, None, "org/repo"),
        ] {
            let e = PullFilter::parse(repo, pull, sha).unwrap_err();
            assert!(e.contains(says), "{repo:?} {pull:?} {sha:?}: {e}");
        }
    }
}
