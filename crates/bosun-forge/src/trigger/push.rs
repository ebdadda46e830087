//! The postsubmits a push starts (Prow's `handlePE`) and what they check
//! out.

use bosun_config::types::Refs;
use bosun_config::Postsubmit;

use super::select::{postsubmit_should_run, ChangedFiles};
use super::Push;

/// The branch (or tag) a push's ref names, as Prow's `PushEvent.Branch`
/// reads it: `refs/heads/` or else `refs/tags/` taken off, so a tag is
/// matched against `branches` and `skip_branches` like a branch.
pub(crate) fn push_branch(git_ref: &str) -> &str {
    let r = git_ref.strip_prefix("refs/heads/").unwrap_or(git_ref);
    r.strip_prefix("refs/tags/").unwrap_or(r)
}

/// The postsubmits of a repository (`postsubmits`, in configuration order)
/// that a push starts, as Prow decides: none for a deletion (or an `after`
/// of zeros); else each whose branches match the pushed branch or tag, and
/// whose `run_if_changed`/`skip_if_only_changed` match the changed files
/// when it has one (else `always_run`, unset meaning yes).
///
/// `changed` gives the changed files; it is called only when a matching job
/// has a change matcher, at most once. Prow uses the payload's lists
/// (`Push::changed_files`), which forges cap; a host may give a complete
/// list instead (a diff of `before..after`).
pub fn on_push<E>(
    push: &Push,
    postsubmits: &[Postsubmit],
    changed: impl FnOnce() -> Result<Vec<String>, E>,
) -> Result<Vec<Postsubmit>, E> {
    if push.deleted || push.after.bytes().all(|b| b == b'0') {
        return Ok(Vec::new());
    }
    let branch = push_branch(&push.git_ref);
    let mut changes = ChangedFiles::new(changed);
    let mut out = Vec::new();
    for job in postsubmits {
        if postsubmit_should_run(job, branch, &mut changes)? {
            out.push(job.clone());
        }
    }
    Ok(out)
}

/// The refs of a push's postsubmit runs, as Prow makes them: the
/// repository at `after` on the pushed branch (or tag), linked to the
/// repository page and the compare page.
pub fn push_refs(push: &Push) -> Refs {
    let (org, repo) = super::split_repo(&push.repo);
    let link = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    Refs {
        org: org.into(),
        repo: repo.into(),
        repo_link: link(&push.repo_link),
        base_ref: Some(push_branch(&push.git_ref).to_owned()),
        base_sha: Some(push.after.clone()),
        base_link: link(&push.compare),
        ..Refs::default()
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use super::*;
    use crate::trigger::fake::postsubmit;

    fn push(repo: &str, git_ref: &str, files: &[&str]) -> Push {
        Push {
            repo: repo.into(),
            git_ref: git_ref.into(),
            before: "1".repeat(40),
            after: "abcdef".into(),
            created: false,
            deleted: false,
            forced: false,
            clone_url: String::new(),
            default_branch: "master".into(),
            pusher: "ada".into(),
            repo_link: String::new(),
            compare: String::new(),
            changed_files: files.iter().map(|f| f.to_string()).collect(),
        }
    }

    /// Prow's TestHandlePE configuration: org/repo `pass-butter`
    /// (`run_if_changed: \.sh$`), org2/repo2 `pass-salt`, org3/repo3
    /// `pass-pepper` (branches `release/v1.14`).
    fn jobs(repo: &str) -> Vec<Postsubmit> {
        match repo {
            "org/repo" => {
                let mut j = postsubmit("pass-butter");
                j.kind.run_if_changed = Some(r"\.sh$".into());
                vec![j]
            }
            "org2/repo2" => vec![postsubmit("pass-salt")],
            _ => {
                let mut j = postsubmit("pass-pepper");
                j.kind.branches = vec!["release/v1.14".into()];
                vec![j]
            }
        }
    }

    fn started(p: &Push) -> usize {
        on_push(p, &jobs(&p.repo), || {
            Ok::<_, Infallible>(p.changed_files.clone())
        })
        .unwrap()
        .len()
    }

    #[test]
    fn handle_pe_branch_deleted() {
        // Prow: TestHandlePE "branch deleted"
        let mut p = push("org/repo", "refs/heads/master", &["hack.sh"]);
        p.deleted = true;
        assert_eq!(started(&p), 0);
    }

    #[test]
    fn handle_pe_null_after_sha() {
        // Prow: TestHandlePE "null after sha"
        let mut p = push("org/repo", "refs/heads/master", &["hack.sh"]);
        p.after = "0".repeat(40);
        assert_eq!(started(&p), 0);
    }

    #[test]
    fn handle_pe_no_matching_files() {
        // Prow: TestHandlePE "no matching files"
        assert_eq!(
            started(&push("org/repo", "refs/heads/master", &["example.txt"])),
            0
        );
    }

    #[test]
    fn handle_pe_one_matching_file() {
        // Prow: TestHandlePE "one matching file"
        let p = push("org/repo", "refs/heads/master", &["example.txt", "hack.sh"]);
        assert_eq!(started(&p), 1);
    }

    #[test]
    fn handle_pe_no_change_matcher() {
        // Prow: TestHandlePE "no change matcher"
        assert_eq!(
            started(&push("org2/repo2", "refs/heads/master", &["example.txt"])),
            1
        );
    }

    #[test]
    fn handle_pe_branch_name_with_a_slash() {
        // Prow: TestHandlePE "branch name with a slash"
        assert_eq!(
            started(&push(
                "org3/repo3",
                "refs/heads/release/v1.14",
                &["hack.sh"]
            )),
            1
        );
    }

    #[test]
    fn a_tag_is_matched_as_a_branch_and_files_are_asked_only_when_needed() {
        let mut anchored = postsubmit("release");
        anchored.kind.branches = vec![r"^v\d".into()];
        let tag = push("org/repo", "refs/tags/v1.0", &[]);
        let started_by_tag = on_push(&tag, &[anchored], || Ok::<_, Infallible>(vec![])).unwrap();
        assert_eq!(started_by_tag.len(), 1);
        assert_eq!(push_refs(&tag).base_ref.as_deref(), Some("v1.0"));
        assert_eq!(
            started(&push("org3/repo3", "refs/tags/release/v1.14", &[])),
            1
        );
        let mut asked = false;
        let p = push("org2/repo2", "refs/heads/master", &[]);
        let jobs = on_push(&p, &jobs("org2/repo2"), || {
            asked = true;
            Ok::<_, Infallible>(vec![])
        })
        .unwrap();
        assert_eq!(jobs.len(), 1);
        assert!(!asked, "no job needed the changed files");
        let err = on_push(
            &push("org/repo", "refs/heads/master", &[]),
            &jobs_of("org/repo"),
            || Err("no files"),
        );
        assert_eq!(err, Err("no files"));
    }

    fn jobs_of(repo: &str) -> Vec<Postsubmit> {
        jobs(repo)
    }

    #[test]
    fn create_refs() {
        // Prow: TestCreateRefs
        let mut p = push("kubernetes/repo", "refs/heads/master", &[]);
        p.repo_link = "https://example.com/kubernetes/repo".into();
        p.compare = "https://example.com/kubernetes/repo/compare/abcdee...abcdef".into();
        let refs = push_refs(&p);
        assert_eq!(
            refs,
            Refs {
                org: "kubernetes".into(),
                repo: "repo".into(),
                repo_link: Some("https://example.com/kubernetes/repo".into()),
                base_ref: Some("master".into()),
                base_sha: Some("abcdef".into()),
                base_link: Some(
                    "https://example.com/kubernetes/repo/compare/abcdee...abcdef".into()
                ),
                ..Refs::default()
            }
        );
    }
}
