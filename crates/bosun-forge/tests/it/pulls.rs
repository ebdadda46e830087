//! A pull request's commits fetched into the mirror over HTTP (`git
//! http-backend` on loopback): its changed files and its merge into the
//! base read with git, the followed branch untouched.

use bosun_forge::repos::{
    fetch_pull, fetch_pulls, follow, load_at, Credentials, ErrorKind, Wanted,
};
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

#[test]
fn pull_requests_opened_together_are_fetched_in_one_go() {
    let s = Served::new("main");
    s.push_config("main", "0 4 * * *");
    let mut heads = Vec::new();
    for n in 1..=3 {
        s.work
            .git(&["checkout", "--quiet", "-B", &format!("f{n}"), "main"]);
        s.work.write(&format!("src/f{n}.rs"), "x\n");
        heads.push(s.work.commit(&format!("f{n}")));
        s.work
            .push(&s.bare, &format!("f{n}:refs/pull/{n}/head"), false);
    }
    s.work.git(&["checkout", "--quiet", "main"]);
    let remote = s.remote(None, Credentials::None);
    s.server.clear_requests();
    let mut wanted: Vec<Wanted> = (1..=3)
        .map(|n| Wanted {
            base_ref: "main".into(),
            number: n,
            head_sha: heads[n as usize - 1].clone(),
        })
        .collect();
    // Pull request 3 is no longer at the head asked for.
    wanted[2].head_sha = "0123456789abcdef0123456789abcdef01234567".into();
    let answers = fetch_pulls(&s.mirrors, &remote, &wanted).unwrap();
    // One fetch (its negotiation: two requests at most), one answer each.
    let fetches = s.server.requests().iter().filter(|r| r.fetch).count();
    assert!(fetches <= 2, "{:#?}", s.server.requests());
    assert_eq!(answers.len(), 3);
    for (n, a) in answers.iter().take(2).enumerate() {
        let f = a.as_ref().unwrap();
        assert_eq!(f.head_sha, heads[n]);
        assert_eq!(
            f.mirror
                .repo()
                .changed_files(&f.base_sha, &f.head_sha, true)
                .unwrap(),
            [format!("src/f{}.rs", n + 1)]
        );
    }
    let e = answers[2].as_ref().unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound);
}
