//! A pull request's commits fetched into the mirror over HTTP (`git
//! http-backend` on loopback): its changed files and its merge into the
//! base read with git, the followed branch untouched.

use bosun_forge::repos::{fetch_pull, follow, load_at, Credentials, ErrorKind};
use bosun_git::repo::Merge;

use crate::common::{Served, REPO};

#[test]
fn a_pull_request_is_fetched_into_the_mirror_and_merged_into_its_base() {
    let s = Served::new("main");
    let c1 = s.push_config("main", "0 4 * * *");
    // The pull request: a file changed and a presubmit added in .prow.yaml,
    // as GitHub keeps it under refs/pull/7/head.
    s.work.git(&["checkout", "--quiet", "-b", "feature"]);
    let prow = std::fs::read_to_string(s.work.dir().join(".prow.yaml")).unwrap();
    let added = prow.replace(
        "presubmits:\n",
        "presubmits:\n- name: lint\n  always_run: true\n  spec:\n    containers:\n    - image: alpine\n      command: [make, lint]\n",
    );
    s.work
        .write(".prow.yaml", &added)
        .write("src/lib.rs", "fn f() {}\n");
    let head = s.work.commit("feature");
    s.work.push(&s.bare, "feature:refs/pull/7/head", false);
    // The base moves on meanwhile.
    s.work.git(&["checkout", "--quiet", "main"]);
    s.work.write("docs/guide.md", "guide\n");
    let c2 = s.work.commit("docs");
    s.push("main");

    // Not followed yet: the mirror is made for the pull request.
    let remote = s.remote(None, Credentials::None);
    let fetched = fetch_pull(&s.mirrors, &remote, "main", 7, &head).unwrap();
    assert_eq!(fetched.mirror.dir(), s.mirror_dir());
    assert_eq!(
        (fetched.base_sha.as_str(), fetched.head_sha.as_str()),
        (c2.as_str(), head.as_str())
    );
    let repo = fetched.mirror.repo();
    assert_eq!(
        repo.changed_files(&fetched.base_sha, &head, true).unwrap(),
        [".prow.yaml", "src/lib.rs"]
    );
    let Merge::Merged { commit } = repo.merge(&fetched.base_sha, &[&head]).unwrap() else {
        panic!("a clean merge");
    };
    // The merged tree's jobs: the pull request's new presubmit and the base's.
    let at = load_at(fetched.mirror.dir(), &commit, REPO, "main").unwrap();
    let snap = at.loaded.snapshot.expect("jobs");
    let names: Vec<&str> = snap.presubmits[REPO].iter().map(|j| j.name()).collect();
    assert_eq!(names, ["lint", "unit"]);
    assert!(repo.read_file(&commit, "docs/guide.md").unwrap().is_some());

    // Following the repository afterwards uses the same mirror.
    let synced = follow(&s.mirrors, &s.remote(Some("main"), Credentials::None)).unwrap();
    assert!(!synced.cloned);
    assert_eq!(synced.commit, c2);
    assert_ne!(synced.commit, c1);

    // A head the pull request no longer has (force-pushed away): refused.
    s.work.git(&["checkout", "--quiet", "feature"]);
    s.work
        .git(&["commit", "--quiet", "--amend", "-m", "feature, amended"]);
    s.work.push(&s.bare, "feature:refs/pull/7/head", true);
    let gone = "0123456789abcdef0123456789abcdef01234567";
    let e = fetch_pull(&s.mirrors, &remote, "main", 7, gone).unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound, "{e:?}");
    assert!(e.problem.contains("no longer at"), "{e:?}");
}
