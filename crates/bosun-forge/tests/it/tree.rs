//! A commit's files read without a checkout ([`CommitFiles`]): symlinks
//! followed inside the tree only, submodules, what was read, and how the
//! cost of a load follows what it reads rather than the repository's size.

use std::path::{Path, PathBuf};
use std::time::Instant;

use bosun_config::source::{EntryKind, FileSource};
use bosun_forge::repos::{load_at, CommitFiles};
use bosun_git::repo::Repo;
use bosun_git::testing::{git, WorkRepo};

use crate::common::{lines, y, REPO};

/// A presubmit named `name`, as a `.prow/` file.
fn presubmit(name: &str) -> String {
    y(&format!(
        "
        presubmits:
        - name: {name}
          always_run: true
          spec:
            containers:
            - image: alpine
        "
    ))
}

/// A bare repository at `DIR/bare.git` with the work repository's `main`.
fn bare(dir: &Path, work: &WorkRepo) -> PathBuf {
    let bare = dir.join("bare.git");
    std::fs::create_dir_all(&bare).unwrap();
    git(
        &bare,
        &["init", "--quiet", "--bare", "--initial-branch=main"],
    );
    work.push(&bare, "main:refs/heads/main", true);
    bare
}

#[test]
fn symlinks_are_followed_inside_the_tree_only() {
    let tmp = tempfile::tempdir().unwrap();
    let work = WorkRepo::init(tmp.path().join("work"), "main");
    work.write(".prow/own.yaml", &presubmit("own"))
        .write("ci/jobs.yaml", &presubmit("linked"))
        .write("more/more.yaml", &presubmit("more"))
        .symlink(".prow/linked.yaml", "../ci/jobs.yaml")
        .symlink(".prow/more", "./../more")
        .symlink(".prow/escape.yaml", "../../../../etc/passwd")
        .symlink(".prow/absolute.yaml", "/etc/passwd")
        .symlink(".prow/loop.yaml", "loop.yaml");
    work.commit("one");
    // A submodule's commit in the tree.
    let head = work.git(&["rev-parse", "HEAD"]);
    work.git(&[
        "update-index",
        "--add",
        "--cacheinfo",
        &format!("160000,{head},.prow/vendored"),
    ]);
    work.git(&["commit", "--quiet", "-m", "submodule"]);
    let sha = work.git(&["rev-parse", "HEAD"]);
    let bare = bare(tmp.path(), &work);

    let at = load_at(&bare, "main", REPO, "main").unwrap();
    assert_eq!(at.commit, sha);
    let root = format!("{REPO}@{sha}");
    let lines = lines(&at.loaded);
    // The links leaving the tree, and the loop, are reported and skipped.
    let expect = [
        (
            ".prow/absolute.yaml",
            "symlink .prow/absolute.yaml -> /etc/passwd: it points outside the repository",
        ),
        (
            ".prow/escape.yaml",
            "symlink .prow/escape.yaml -> ../../../../etc/passwd: it points outside the repository",
        ),
        (".prow/loop.yaml", "too many levels of symbolic links"),
    ];
    assert_eq!(lines.len(), expect.len(), "{lines:#?}");
    for ((file, what), line) in expect.iter().zip(&lines) {
        assert!(
            line.starts_with(&format!("{root}/{file}: warning: ")),
            "{line}"
        );
        assert!(line.contains(what), "{line} lacks {what}");
    }
    let snap = at.loaded.snapshot.as_ref().expect("the jobs");
    let names: Vec<&str> = snap.presubmits[REPO].iter().map(|j| j.name()).collect();
    assert_eq!(names, ["linked", "more", "own"]);
    // Files read under the name asked for and the name they resolved to.
    assert_eq!(
        at.files_read,
        [
            ".prow/linked.yaml",
            ".prow/more/more.yaml",
            ".prow/own.yaml",
            "ci/jobs.yaml",
            "more/more.yaml"
        ]
    );
    assert_eq!(at.dirs_listed, [".prow", "more"]);

    // The file source itself.
    let repo = Repo::open(&bare).unwrap();
    let files = CommitFiles::open(&repo, &sha, &root).unwrap();
    let p = |rel: &str| PathBuf::from(format!("{root}/{rel}"));
    assert_eq!(files.stat(&p("")).unwrap(), EntryKind::Dir);
    assert_eq!(
        files.stat(&p(".prow/linked.yaml")).unwrap(),
        EntryKind::File
    );
    assert_eq!(files.stat(&p(".prow/vendored")).unwrap(), EntryKind::Other);
    assert_eq!(files.canonicalize(&p(".prow/more")).unwrap(), p("more"));
    assert_eq!(
        files
            .canonicalize(&p(".prow/./more/../ci/jobs.yaml"))
            .unwrap(),
        p("ci/jobs.yaml"),
        "`..` after a link is taken from where the link leads (more/), not lexically"
    );
    let kinds: Vec<(String, EntryKind)> = files
        .read_dir(&p(".prow"))
        .unwrap()
        .into_iter()
        .map(|e| (e.name.to_string_lossy().into_owned(), e.kind))
        .collect();
    assert!(
        kinds.contains(&("linked.yaml".into(), EntryKind::Symlink)),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&("own.yaml".into(), EntryKind::File)),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&("vendored".into(), EntryKind::Other)),
        "{kinds:?}"
    );
    for outside in [
        ".prow/absolute.yaml",
        ".prow/escape.yaml",
        "../x",
        "ci/../../x",
    ] {
        let e = files.read(&p(outside)).unwrap_err();
        assert!(
            e.to_string().contains("outside the repository"),
            "{outside}: {e}"
        );
    }
    let e = files.read(Path::new("/etc/passwd")).unwrap_err();
    assert_eq!(
        e.kind(),
        std::io::ErrorKind::NotFound,
        "not in the tree: {e}"
    );
    let e = files.read(&p("nowhere.yaml")).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    assert!(e.to_string().contains(&sha), "names the commit: {e}");
    assert!(files.read(&p("ci")).is_err(), "a directory");
    assert!(files.read(&p("ci/jobs.yaml/x")).is_err(), "below a file");

    // An unknown commit is an error, not an empty configuration.
    let e = load_at(
        &bare,
        "0123456789abcdef0123456789abcdef01234567",
        REPO,
        "main",
    )
    .unwrap_err();
    assert!(e.to_string().contains("no such commit"), "{e}");
}

#[test]
fn a_load_reads_what_it_needs_whatever_the_repository_size() {
    let tmp = tempfile::tempdir().unwrap();
    let work = WorkRepo::init(tmp.path().join("work"), "main");
    // 40 job files, a Lighthouse pipeline, and 2000 other files in 40
    // directories.
    for i in 0..40 {
        work.write(
            &format!(".prow/team-{i:02}.yaml"),
            &presubmit(&format!("job-{i:02}")),
        );
    }
    work.write(
        ".lighthouse/jobs/triggers.yaml",
        &crate::common::triggers("0 4 * * *"),
    )
    .write(".lighthouse/jobs/nightly.yaml", &crate::common::nightly());
    for d in 0..40 {
        for f in 0..50 {
            work.write(&format!("src/pkg{d:02}/file{f:02}.go"), "package x\n");
        }
    }
    work.commit("many files");
    let bare = bare(tmp.path(), &work);

    let start = Instant::now();
    let at = load_at(&bare, "main", REPO, "main").unwrap();
    let took = start.elapsed();
    eprintln!(
        "load_at over a commit of 2042 files (42 of them configuration): {took:?}, {} files read",
        at.files_read.len()
    );
    assert_eq!(lines(&at.loaded), Vec::<String>::new());
    let snap = at.loaded.snapshot.as_ref().unwrap();
    assert_eq!(snap.presubmits[REPO].len(), 40);
    assert_eq!(snap.periodics.len(), 1);
    assert_eq!(at.files_read.len(), 42);
    // Only the configuration's directories were listed: src/ never was.
    assert_eq!(at.dirs_listed, [".lighthouse", ".prow"]);
    assert!(took.as_secs() < 10, "{took:?}");
}
