//! Where refs are cloned and which clone is the working directory, as Prow's
//! `clone.PathForRefs` and `decorate.DetermineWorkDir` decide, and their
//! `PULL_REFS` form ([`refs_string`], the one every executor and the
//! pipeline templates use).

use std::path::{Path, PathBuf};

use bosun_config::types::Refs;

/// The directory (under `base`, the `GOPATH`) that `refs` is cloned into:
/// `src/{path_alias}` when set, else `src/` + the repository link without its
/// scheme, else `src/github.com/ORG/REPO`.
pub fn path_for_refs(base: &Path, refs: &Refs) -> PathBuf {
    // Joined as Go's `path.Join` joins: a leading `/` (a `file:///x/y`
    // link, an absolute alias) stays below `src/`, and `..` cannot climb
    // out of it.
    let mut path = base.join("src");
    for part in relative_path(refs).split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if path.ends_with("src") && path.parent() == Some(base) {
                    continue;
                }
                path.pop();
            }
            part => path.push(part),
        }
    }
    path
}

/// [`path_for_refs`] below `src/`, as a string (`github.com/org/repo`).
pub fn relative_path(refs: &Refs) -> String {
    if let Some(alias) = refs.path_alias.as_deref().filter(|a| !a.is_empty()) {
        return alias.to_string();
    }
    if let Some(link) = refs.repo_link.as_deref().filter(|l| !l.is_empty()) {
        let without_scheme = link.split_once("://").map_or(link, |(_, rest)| rest);
        return without_scheme.to_string();
    }
    format!("github.com/{}/{}", refs.org, refs.repo)
}

/// The working directory of a decorated run's test containers: the clone of
/// the first ref marked `workdir: true`, else of the first ref (`refs` first,
/// then `extra_refs`). `None` when the run has no refs.
pub fn work_dir<'a>(base: &Path, all: impl IntoIterator<Item = &'a Refs>) -> Option<PathBuf> {
    let all: Vec<&Refs> = all.into_iter().collect();
    let chosen = all.iter().find(|r| r.workdir).or(all.first())?;
    Some(path_for_refs(base, chosen))
}

/// The URI a ref is fetched from: its `clone_uri`, else its repository link
/// plus `.git`, else `https://github.com/ORG/REPO.git`.
pub fn clone_uri(refs: &Refs) -> String {
    if let Some(uri) = refs.clone_uri.as_deref().filter(|u| !u.is_empty()) {
        return uri.to_string();
    }
    if let Some(link) = refs.repo_link.as_deref().filter(|l| !l.is_empty()) {
        return format!("{link}.git");
    }
    format!("https://github.com/{}/{}.git", refs.org, refs.repo)
}

/// Prow's `Refs.String()`, the `PULL_REFS` form: `base_ref[:base_sha]`,
/// then `,number:sha[:ref]` per pull; an empty `base_sha` or pull `ref` is
/// left out.
pub fn refs_string(r: &Refs) -> String {
    let mut s = r.base_ref.clone().unwrap_or_default();
    // Prow writes `BASE_REF` alone when the base SHA is empty.
    if let Some(sha) = r.base_sha.as_deref().filter(|s| !s.is_empty()) {
        s.push(':');
        s.push_str(sha);
    }
    for p in &r.pulls {
        s.push_str(&format!(",{}:{}", p.number, p.sha));
        if let Some(rf) = p.ref_.as_deref().filter(|r| !r.is_empty()) {
            s.push(':');
            s.push_str(rf);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use bosun_config::types::Pull;

    fn refs(org: &str, repo: &str) -> Refs {
        Refs {
            org: org.into(),
            repo: repo.into(),
            ..Refs::default()
        }
    }

    #[test]
    fn paths_follow_alias_then_link_then_github() {
        let base = Path::new("/home/prow/go");
        let mut r = refs("kubernetes", "test-infra");
        assert_eq!(
            path_for_refs(base, &r),
            Path::new("/home/prow/go/src/github.com/kubernetes/test-infra")
        );
        r.repo_link = Some("https://gerrit.example.org/a/b".into());
        assert_eq!(relative_path(&r), "gerrit.example.org/a/b");
        assert_eq!(clone_uri(&r), "https://gerrit.example.org/a/b.git");
        r.path_alias = Some("k8s.io/test-infra".into());
        assert_eq!(
            path_for_refs(base, &r),
            Path::new("/home/prow/go/src/k8s.io/test-infra")
        );
        r.path_alias = Some("/../../etc/x".into());
        assert_eq!(
            path_for_refs(base, &r),
            Path::new("/home/prow/go/src/etc/x")
        );
        r.path_alias = None;
        r.repo_link = Some("file:///srv/repos/b".into());
        assert_eq!(
            path_for_refs(base, &r),
            Path::new("/home/prow/go/src/srv/repos/b")
        );
        r.clone_uri = Some("file:///srv/mirror.git".into());
        assert_eq!(clone_uri(&r), "file:///srv/mirror.git");
    }

    #[test]
    fn workdir_is_the_marked_ref_else_the_first() {
        let base = Path::new("/go");
        let a = refs("o", "a");
        let mut b = refs("o", "b");
        assert_eq!(
            work_dir(base, [&a, &b]),
            Some("/go/src/github.com/o/a".into())
        );
        b.workdir = true;
        assert_eq!(
            work_dir(base, [&a, &b]),
            Some("/go/src/github.com/o/b".into())
        );
        assert_eq!(work_dir(base, std::iter::empty()), None);
        assert_eq!(clone_uri(&a), "https://github.com/o/a.git");
    }

    #[test]
    fn pull_refs_leave_empty_parts_out() {
        let mut r = Refs {
            base_ref: Some("main".into()),
            base_sha: Some(String::new()),
            pulls: vec![Pull {
                number: 3,
                sha: "abc".into(),
                ref_: Some(String::new()),
                ..Pull::default()
            }],
            ..Refs::default()
        };
        assert_eq!(refs_string(&r), "main,3:abc");
        r.base_sha = Some("def".into());
        r.pulls[0].ref_ = Some("refs/changes/1".into());
        assert_eq!(refs_string(&r), "main:def,3:abc:refs/changes/1");
    }
}
