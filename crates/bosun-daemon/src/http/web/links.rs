//! The links the dashboard gives a pull request its runs test: its page on
//! the forge (as Prow's deck links it) and its page on this dashboard
//! (`pulls`); a run's page lists them for every pull request of its refs.

use bosun_config::types::{Pull, Refs};

use super::fmt;

/// `s` when it is an `http` or `https` URL: a link taken from a run's refs
/// (which whoever created the run wrote) is never another scheme.
fn web_url(s: &str) -> Option<&str> {
    let s = s.trim();
    let lower = s.get(..8).unwrap_or(s).to_ascii_lowercase();
    (lower.starts_with("https://") || lower.starts_with("http://")).then_some(s)
}

/// The page of `pull` on its forge, as Prow's deck links a run's pull
/// request: the pull's own `link` when the refs carry one (runs bosun
/// creates for a forge's events carry it). Without it, deck sends the
/// browser through its `/git-provider-link` to its GitHub host; bosun,
/// which has no such setting, takes the host from the refs: the
/// repository's `repo_link` followed by `/pull/N` when the refs have one;
/// for a Gerrit organisation (a URL, as Prow writes Gerrit's refs)
/// `ORG/c/REPO/+/N`, deck's Gerrit form; otherwise
/// `https://github.com/ORG/REPO/pull/N` (deck's default host). Links that
/// are not `http(s)` are never used.
pub fn forge_link(refs: &Refs, pull: &Pull) -> Option<String> {
    if let Some(link) = pull.link.as_deref().and_then(web_url) {
        return Some(link.to_string());
    }
    if let Some(repo) = refs.repo_link.as_deref().and_then(web_url) {
        return Some(format!(
            "{}/pull/{}",
            repo.trim_end_matches('/'),
            pull.number
        ));
    }
    if let Some(org) = web_url(&refs.org) {
        return Some(format!(
            "{}/c/{}/+/{}",
            org.trim_end_matches('/'),
            refs.repo,
            pull.number
        ));
    }
    if refs.org.contains("://") {
        return None;
    }
    Some(format!(
        "https://github.com/{}/{}/pull/{}",
        fmt::path_escape(&refs.org),
        fmt::path_escape(&refs.repo),
        pull.number
    ))
}

/// The dashboard's page of pull request `number` of `org/repo` (each part
/// one path segment, however many `/` a Gerrit org or repository holds).
pub fn page_href(org: &str, repo: &str, number: i64) -> String {
    format!(
        "/pulls/{}/{}/{number}",
        fmt::query_escape(org),
        fmt::query_escape(repo)
    )
}

/// A pull request a run tests, as the run's page links it.
pub struct PullLink {
    /// `org/repo#N`.
    pub(super) label: String,
    /// Its head commit, short.
    pub(super) short_sha: String,
    pub(super) title: String,
    pub(super) author: String,
    /// Its page on the forge (empty: none that may be linked).
    pub(super) forge: String,
    /// Its page on this dashboard.
    pub(super) page: String,
}

impl PullLink {
    /// Every pull request of `refs`, in their order (one for a presubmit,
    /// each of a batch's).
    pub fn all(refs: &Refs) -> Vec<PullLink> {
        refs.pulls
            .iter()
            .map(|p| PullLink {
                label: format!("{}/{}#{}", refs.org, refs.repo, p.number),
                short_sha: p.sha.chars().take(12).collect(),
                title: p.title.clone().unwrap_or_default(),
                author: p.author.clone(),
                forge: forge_link(refs, p).unwrap_or_default(),
                page: page_href(&refs.org, &refs.repo, p.number),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(org: &str, repo_link: Option<&str>, link: Option<&str>) -> (Refs, Pull) {
        let pull = Pull {
            number: 7,
            link: link.map(str::to_string),
            ..Pull::default()
        };
        let refs = Refs {
            org: org.into(),
            repo: "app".into(),
            repo_link: repo_link.map(str::to_string),
            pulls: vec![pull.clone()],
            ..Refs::default()
        };
        (refs, pull)
    }

    #[test]
    fn the_forge_link_is_the_pulls_own_then_the_repositorys_then_githubs() {
        let cases = [
            // The pull's own link wins (deck's addPRRevision).
            (
                refs(
                    "org",
                    Some("https://ghe.example/org/app"),
                    Some("https://ghe.example/org/app/pull/7"),
                ),
                Some("https://ghe.example/org/app/pull/7"),
            ),
            // The repository's link, on its host.
            (
                refs("org", Some("https://ghe.example/org/app/"), None),
                Some("https://ghe.example/org/app/pull/7"),
            ),
            // Neither: GitHub, deck's default host.
            (
                refs("org", None, None),
                Some("https://github.com/org/app/pull/7"),
            ),
            // A link that is not http(s) is never used.
            (
                refs(
                    "org",
                    Some("javascript:alert(1)"),
                    Some("javascript:alert(1)"),
                ),
                Some("https://github.com/org/app/pull/7"),
            ),
            // A Gerrit organisation: deck's Gerrit form.
            (
                refs("https://review.example", None, None),
                Some("https://review.example/c/app/+/7"),
            ),
            (refs("ssh://review.example", None, None), None),
        ];
        for ((r, p), want) in cases {
            assert_eq!(forge_link(&r, &p).as_deref(), want, "{r:?}");
        }
        assert_eq!(
            page_href("https://review.example", "a/b", 3),
            "/pulls/https%3A%2F%2Freview.example/a%2Fb/3"
        );
    }
}
