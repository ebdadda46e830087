//! What a pull request's presubmits check out (Prow's `createRefs` of
//! `pkg/pjutil`).

use bosun_config::types::{Pull, Refs};

use super::PullRequest;

/// The forge's web root (`https://github.com`) and the repository's page,
/// from the pull request's page (`<root>/<org>/<repo>/pull/<n>`); GitHub's
/// when the pull request has no page.
pub(crate) fn web_links(pr: &PullRequest) -> (String, String) {
    let repo_link = pr
        .html_url
        .rsplit_once("/pull/")
        .map(|(repo, _)| repo.to_owned())
        .unwrap_or_else(|| format!("https://github.com/{}", pr.repo));
    let root = repo_link
        .strip_suffix(&format!("/{}", pr.repo))
        .unwrap_or("https://github.com")
        .to_owned();
    (root, repo_link)
}

/// The refs of a pull request's presubmit runs, as Prow makes them: the
/// base repository and branch at `base_sha` (the branch's head when the run
/// is made, not the event's), and the pull request at its head, with links
/// (`<repo>/commit/<base_sha>`, `<repo>/pull/<n>/commits/<head>`, the
/// author's page).
pub fn pull_refs(pr: &PullRequest, base_sha: &str) -> Refs {
    let (org, repo) = super::split_repo(&pr.repo);
    let (root, repo_link) = web_links(pr);
    Refs {
        org: org.into(),
        repo: repo.into(),
        repo_link: Some(repo_link.clone()),
        base_ref: Some(pr.base_ref.clone()),
        base_sha: Some(base_sha.into()),
        base_link: Some(format!("{repo_link}/commit/{base_sha}")),
        pulls: vec![Pull {
            number: pr.number,
            author: pr.author.clone(),
            sha: pr.head_sha.clone(),
            title: Some(pr.title.clone()),
            ref_: None,
            link: Some(pr.html_url.clone()),
            commit_link: Some(format!(
                "{repo_link}/pull/{}/commits/{}",
                pr.number, pr.head_sha
            )),
            author_link: Some(format!("{root}/{}", pr.author)),
        }],
        ..Refs::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_refs_as_prow_makes_them() {
        let pr = PullRequest {
            repo: "org/repo".into(),
            number: 7,
            author: "ada".into(),
            head_sha: "abc".into(),
            base_ref: "main".into(),
            title: "Fix it".into(),
            html_url: "https://github.example.com/org/repo/pull/7".into(),
            ..PullRequest::default()
        };
        let refs = pull_refs(&pr, "def");
        assert_eq!(refs.org, "org");
        assert_eq!(refs.repo, "repo");
        assert_eq!(
            refs.repo_link.as_deref(),
            Some("https://github.example.com/org/repo")
        );
        assert_eq!(refs.base_ref.as_deref(), Some("main"));
        assert_eq!(refs.base_sha.as_deref(), Some("def"));
        assert_eq!(
            refs.base_link.as_deref(),
            Some("https://github.example.com/org/repo/commit/def")
        );
        let p = &refs.pulls[0];
        assert_eq!(
            (p.number, p.author.as_str(), p.sha.as_str()),
            (7, "ada", "abc")
        );
        assert_eq!(p.title.as_deref(), Some("Fix it"));
        assert_eq!(
            p.link.as_deref(),
            Some("https://github.example.com/org/repo/pull/7")
        );
        assert_eq!(
            p.commit_link.as_deref(),
            Some("https://github.example.com/org/repo/pull/7/commits/abc")
        );
        assert_eq!(
            p.author_link.as_deref(),
            Some("https://github.example.com/ada")
        );
        let bare = pull_refs(
            &PullRequest {
                html_url: String::new(),
                ..pr
            },
            "def",
        );
        assert_eq!(
            bare.repo_link.as_deref(),
            Some("https://github.com/org/repo")
        );
    }
}
