//! The local executor's clonerefs (`bosun_injob::clone`, `bosun_git::mirror`)
//! against real git repositories served over `file://` from a temporary
//! directory: Prow's command sequence and record, merges reproducible to the
//! SHA, the per-cluster mirror (reuse, concurrency, same result as a direct
//! clone), and the JSON / text forms of the records.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use bosun_config::types::{Pull, Refs};
use bosun_git::mirror::{mirror_dir, prune, Pruned};
use bosun_injob::clone::{
    any_failed, clone_log_text, clone_refs, records_json, CloneOptions, Record,
};

/// A temporary directory, removed when dropped.
struct Tmp(PathBuf);

impl Tmp {
    fn new(name: &str) -> Tmp {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "bosun-clone-{name}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Tmp(dir.canonicalize().unwrap())
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.0.join(rel)
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs git in `dir` without any system or user configuration; its
/// trimmed stdout. Panics when git fails.
fn git(dir: &Path, args: &[&str]) -> String {
    git_env(dir, args, &[])
}

/// [`git`] with extra environment, committing as `Author`.
fn git_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let mut all = vec![
        ("GIT_AUTHOR_NAME", "Author"),
        ("GIT_AUTHOR_EMAIL", "author@example.com"),
        ("GIT_COMMITTER_NAME", "Author"),
        ("GIT_COMMITTER_EMAIL", "author@example.com"),
    ];
    all.extend_from_slice(env);
    git_as_configured(dir, args, &all)
}

/// Runs git in `dir` with `env` and no system or user configuration (the
/// identity is the repository's `user.name` / `user.email` unless `env`
/// sets one); its trimmed stdout. Panics when git fails.
fn git_as_configured(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env_remove("GIT_AUTHOR_NAME")
        .env_remove("GIT_AUTHOR_EMAIL")
        .env_remove("GIT_COMMITTER_NAME")
        .env_remove("GIT_COMMITTER_EMAIL")
        .envs(env.iter().copied())
        .output()
        .unwrap_or_else(|e| {
            panic!("git could not run ({e}): install it with `apt-get install -y git`, or run the tests with tools/test")
        });
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Commits `file` = `content` in `dir` at Unix time `time`; the commit's SHA.
fn commit(dir: &Path, file: &str, content: &str, time: i64) -> String {
    let path = dir.join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, content).unwrap();
    git(dir, &["add", file]);
    let date = format!("{time} +0000");
    git_env(
        dir,
        &["commit", "-q", "-m", &format!("change {file}")],
        &[("GIT_AUTHOR_DATE", &date), ("GIT_COMMITTER_DATE", &date)],
    );
    git(dir, &["rev-parse", "HEAD"])
}

const BASE_TIME: i64 = 1_700_000_000;

/// An origin repository: `main` with two commits (the first tagged `v1`),
/// and two pull requests branching from the first commit, published as
/// `refs/pull/1/head` and `refs/pull/2/head`.
struct Origin {
    dir: PathBuf,
    uri: String,
    first: String,
    main: String,
    pr1: String,
    pr2: String,
}

fn origin(tmp: &Tmp) -> Origin {
    let dir = tmp.path("origin");
    std::fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q", "-b", "main"]);
    // Clones fetch SHAs and use --filter, as they may from GitHub.
    git(&dir, &["config", "uploadpack.allowAnySHA1InWant", "true"]);
    git(&dir, &["config", "uploadpack.allowFilter", "true"]);
    let first = commit(&dir, "README", "first\n", BASE_TIME - 100);
    git(&dir, &["tag", "v1"]);
    git(&dir, &["checkout", "-q", "-b", "pr1"]);
    let pr1 = commit(&dir, "a.txt", "pull one\n", BASE_TIME - 50);
    git(&dir, &["checkout", "-q", "-b", "pr2", &first]);
    let pr2 = commit(&dir, "b.txt", "pull two\n", BASE_TIME - 40);
    git(&dir, &["checkout", "-q", "main"]);
    let main = commit(&dir, "README", "second\n", BASE_TIME);
    git(&dir, &["update-ref", "refs/pull/1/head", &pr1]);
    git(&dir, &["update-ref", "refs/pull/2/head", &pr2]);
    let uri = format!("file://{}", dir.display());
    Origin {
        dir,
        uri,
        first,
        main,
        pr1,
        pr2,
    }
}

fn refs(o: &Origin, base_ref: &str) -> Refs {
    Refs {
        org: "o".into(),
        repo: "r".into(),
        base_ref: Some(base_ref.into()),
        clone_uri: Some(o.uri.clone()),
        ..Refs::default()
    }
}

fn pull(number: i64, sha: &str) -> Pull {
    Pull {
        number,
        author: "someone".into(),
        sha: sha.into(),
        ..Pull::default()
    }
}

fn options(src_root: PathBuf, refs: Vec<Refs>) -> CloneOptions {
    CloneOptions {
        fetch_backoff: vec![Duration::from_millis(10); 2],
        ..CloneOptions::new(src_root, refs)
    }
}

/// Clones one ref; its record (after Prow's empty environment setup record).
fn clone_one(opts: &CloneOptions) -> Record {
    let mut records = clone_refs(opts);
    assert_eq!(records.len(), 2);
    assert_eq!(
        records[0],
        Record::default(),
        "the setup record comes first"
    );
    records.pop().unwrap()
}

fn commands(record: &Record) -> Vec<&str> {
    record.commands.iter().map(|c| c.command.as_str()).collect()
}

fn assert_ok(record: &Record) {
    assert!(
        !record.failed,
        "clone failed:\n{}",
        clone_log_text(std::slice::from_ref(record))
    );
}

#[test]
fn base_ref_is_cloned_with_prows_commands() {
    let tmp = Tmp::new("base-ref");
    let o = origin(&tmp);
    let src = tmp.path("go");
    let record = clone_one(&options(src.clone(), vec![refs(&o, "main")]));
    assert_ok(&record);
    let dir = src.join("src/github.com/o/r");
    let d = dir.display();
    let uri = &o.uri;
    let want = [
        format!("PWD=/  mkdir -p {d}"),
        format!("PWD={d}  git init"),
        format!("PWD={d}  git config user.name ci-robot"),
        format!("PWD={d}  git config user.email ci-robot@k8s.io"),
        format!("PWD={d}  git fetch {uri} --tags --prune"),
        format!("PWD={d}  git fetch {uri} main"),
        format!("PWD={d}  git checkout FETCH_HEAD"),
        format!("PWD={d}  git branch --force main FETCH_HEAD"),
        format!("PWD={d}  git checkout main"),
        format!("PWD={d}  git submodule update --init --recursive"),
    ];
    assert_eq!(commands(&record), want);
    assert!(record.commands.iter().all(|c| c.error.is_empty()));
    assert_eq!(record.final_sha, o.main);
    assert!(!record.duration.is_zero());
    assert_eq!(git(&dir, &["symbolic-ref", "HEAD"]), "refs/heads/main");
    assert_eq!(git(&dir, &["rev-parse", "v1"]), o.first, "tags are fetched");
    assert_eq!(git(&dir, &["config", "user.name"]), "ci-robot");
    assert!(!any_failed(std::slice::from_ref(&record)));
}

#[test]
fn base_sha_is_checked_out_on_the_base_branch() {
    let tmp = Tmp::new("base-sha");
    let o = origin(&tmp);
    let src = tmp.path("go");
    let mut r = refs(&o, "main");
    r.base_sha = Some(o.first.clone());
    let record = clone_one(&options(src.clone(), vec![r]));
    assert_ok(&record);
    let dir = src.join("src/github.com/o/r");
    let d = dir.display();
    let cmds = commands(&record);
    for want in [
        format!("PWD={d}  git fetch {} {}", o.uri, o.first),
        format!("PWD={d}  git checkout {}", o.first),
        format!("PWD={d}  git branch --force main {}", o.first),
    ] {
        assert!(cmds.contains(&want.as_str()), "{want} not in {cmds:#?}");
    }
    assert_eq!(record.final_sha, o.first);
    assert_eq!(git(&dir, &["rev-parse", "main"]), o.first);
}

/// The pulls of [`pulls_merge_in_order_reproducibly`]: #1 by its pull head
/// (no SHA, merged as FETCH_HEAD), #2 by its SHA.
fn two_pulls(o: &Origin) -> Refs {
    let mut r = refs(o, "main");
    r.pulls = vec![pull(1, ""), pull(2, &o.pr2)];
    r
}

#[test]
fn pulls_merge_in_order_reproducibly() {
    let tmp = Tmp::new("pulls");
    let o = origin(&tmp);
    let first = clone_one(&options(tmp.path("go1"), vec![two_pulls(&o)]));
    assert_ok(&first);
    let second = clone_one(&options(tmp.path("go2"), vec![two_pulls(&o)]));
    assert_ok(&second);
    assert_eq!(first.final_sha, second.final_sha, "merges are reproducible");

    let dir = tmp.path("go1/src/github.com/o/r");
    let d = dir.display();
    let cmds = commands(&first);
    let (t1, t2) = (BASE_TIME + 1, BASE_TIME + 2);
    let tail = [
        format!("PWD={d}  git fetch {} pull/1/head", o.uri),
        format!(
            "PWD={d} GIT_AUTHOR_DATE={t1} GIT_COMMITTER_DATE={t1} git merge --no-ff FETCH_HEAD"
        ),
        format!("PWD={d}  git fetch {} {}", o.uri, o.pr2),
        format!(
            "PWD={d} GIT_AUTHOR_DATE={t2} GIT_COMMITTER_DATE={t2} git merge --no-ff {}",
            o.pr2
        ),
        format!("PWD={d}  git submodule update --init --recursive"),
    ];
    assert_eq!(cmds[cmds.len() - 5..], tail);

    // HEAD = merge(merge(main, pr1), pr2), at base time + 1 and + 2, by ci-robot.
    let head = git(&dir, &["rev-list", "--parents", "-n1", "HEAD"]);
    let parents: Vec<&str> = head.split(' ').skip(1).collect();
    assert_eq!(parents[1], o.pr2);
    let inner = git(&dir, &["rev-list", "--parents", "-n1", parents[0]]);
    assert_eq!(
        inner.split(' ').skip(1).collect::<Vec<_>>(),
        [&o.main, &o.pr1]
    );
    assert_eq!(
        git(&dir, &["log", "-1", "--format=%ct %at %cn", "HEAD"]),
        format!("{t2} {t2} ci-robot")
    );
    assert_eq!(
        git(&dir, &["log", "-1", "--format=%ct", parents[0]]),
        t1.to_string()
    );
    assert!(dir.join("a.txt").is_file() && dir.join("b.txt").is_file());

    // The same SHA as the same git commands typed by hand.
    let hand = tmp.path("hand");
    std::fs::create_dir_all(&hand).unwrap();
    let by_hand = |args: &[&str], time: Option<i64>| {
        let date = time.map(|t| t.to_string()).unwrap_or_default();
        let env: Vec<(&str, &str)> = match time {
            Some(_) => vec![("GIT_AUTHOR_DATE", &date), ("GIT_COMMITTER_DATE", &date)],
            None => vec![],
        };
        git_as_configured(&hand, args, &env)
    };
    by_hand(&["init", "-q"], None);
    by_hand(&["config", "user.name", "ci-robot"], None);
    by_hand(&["config", "user.email", "ci-robot@k8s.io"], None);
    by_hand(&["fetch", "-q", &o.uri, "main"], None);
    by_hand(&["checkout", "-q", "-B", "main", "FETCH_HEAD"], None);
    by_hand(&["fetch", "-q", &o.uri, "pull/1/head"], None);
    by_hand(&["merge", "-q", "--no-ff", "FETCH_HEAD"], Some(t1));
    by_hand(&["fetch", "-q", &o.uri, &o.pr2], None);
    by_hand(&["merge", "-q", "--no-ff", &o.pr2], Some(t2));
    assert_eq!(by_hand(&["rev-parse", "HEAD"], None), first.final_sha);
}

/// The record's commands without those the mirror adds.
fn prow_commands(record: &Record, mirror_root: &Path) -> Vec<String> {
    let root = mirror_root.display().to_string();
    record
        .commands
        .iter()
        .map(|c| c.command.clone())
        .filter(|c| !c.starts_with(&format!("PWD={root}")) && !c.contains(".insteadOf"))
        .collect()
}

#[test]
fn a_mirrored_clone_ends_where_a_direct_clone_ends() {
    let tmp = Tmp::new("mirror-same");
    let o = origin(&tmp);
    let direct = clone_one(&options(tmp.path("direct"), vec![two_pulls(&o)]));
    assert_ok(&direct);
    let mirrors = tmp.path("mirrors");
    let mut opts = options(tmp.path("direct"), vec![two_pulls(&o)]);
    opts.mirror_root = Some(mirrors.clone());
    // Same src root, so the command strings can be compared; start afresh.
    std::fs::remove_dir_all(tmp.path("direct")).unwrap();
    let mirrored = clone_one(&opts);
    assert_ok(&mirrored);
    assert_eq!(mirrored.final_sha, direct.final_sha);
    assert_eq!(
        prow_commands(&mirrored, &mirrors),
        commands(&direct),
        "the mirror leaves Prow's commands as they are"
    );

    let mirror = mirror_dir(&mirrors, &o.uri);
    let m = mirror.display();
    let dir = tmp.path("direct/src/github.com/o/r");
    let d = dir.display();
    let cmds = commands(&mirrored);
    let key = format!("url.file://{m}.insteadOf");
    for want in [
        format!("PWD={}  git init --bare {}", mirrors.display(), mirror.file_name().unwrap().to_string_lossy()),
        format!("PWD={m}  git config uploadpack.allowAnySHA1InWant true"),
        format!("PWD={m}  git fetch --prune {} +HEAD:refs/bosun/HEAD +refs/heads/*:refs/heads/* +refs/tags/*:refs/tags/*", o.uri),
        format!("PWD={m}  git fetch {} main", o.uri),
        format!("PWD={m}  git update-ref refs/heads/main {}", o.main),
        format!("PWD={m}  git fetch {} pull/1/head", o.uri),
        format!("PWD={m}  git update-ref refs/pull/1/head {}", o.pr1),
        format!("PWD={d}  git config {key} {}", o.uri),
        format!("PWD={d}  git config --unset {key}"),
    ] {
        assert!(cmds.contains(&want.as_str()), "{want} not in {cmds:#?}");
    }
    // pr2's SHA is on the origin's branch pr2, which the mirror's branch
    // fetch brought: no fetch by SHA.
    assert!(!cmds
        .iter()
        .any(|c| c.ends_with(&format!("git fetch {} {}", o.uri, o.pr2))
            && c.starts_with(&format!("PWD={m}"))));
    // The merge of FETCH_HEAD names the remote, not the mirror, and the
    // clone no longer points at the mirror.
    let message = git(&dir, &["log", "-1", "--format=%s", "HEAD^1"]);
    assert!(
        message.contains(o.dir.to_str().unwrap()) && !message.contains("mirrors"),
        "{message}"
    );
    assert!(!git(&dir, &["config", "--list", "--local"]).contains("insteadof"));
}

#[test]
fn a_shallow_clone_has_one_commit() {
    let tmp = Tmp::new("depth");
    let o = origin(&tmp);
    for mirror in [false, true] {
        let src = tmp.path(if mirror { "m" } else { "d" });
        let mut r = refs(&o, "main");
        r.clone_depth = 1;
        let mut opts = options(src.clone(), vec![r]);
        opts.mirror_root = mirror.then(|| tmp.path("mirrors"));
        let record = clone_one(&opts);
        assert_ok(&record);
        let dir = src.join("src/github.com/o/r");
        let d = dir.display();
        let cmds = commands(&record);
        for want in [
            format!("PWD={d}  git fetch --depth 1 {} --tags --prune", o.uri),
            format!("PWD={d}  git fetch --depth 1 {} main", o.uri),
        ] {
            assert!(cmds.contains(&want.as_str()), "{want} not in {cmds:#?}");
        }
        assert_eq!(
            git(&dir, &["rev-list", "--count", "HEAD"]),
            "1",
            "mirror: {mirror}"
        );
        assert_eq!(record.final_sha, o.main);
    }
}

#[test]
fn path_alias_and_repo_link_place_the_clone() {
    let tmp = Tmp::new("layout");
    let o = origin(&tmp);
    let src = tmp.path("go");
    let mut aliased = refs(&o, "main");
    aliased.path_alias = Some("k8s.io/thing".into());
    let mut linked = refs(&o, "main");
    linked.org = "a".into();
    linked.repo = "b".into();
    linked.repo_link = Some("https://gerrit.example.org/a/b".into());
    let records = clone_refs(&options(src.clone(), vec![aliased, linked]));
    assert_eq!(records.len(), 3);
    for r in &records {
        assert_ok(r);
    }
    for dir in ["src/k8s.io/thing", "src/gerrit.example.org/a/b"] {
        let dir = src.join(dir);
        assert_eq!(
            git(&dir, &["rev-parse", "HEAD"]),
            o.main,
            "{}",
            dir.display()
        );
    }
    assert!(!src.join("src/github.com").exists());
}

#[test]
fn submodules_are_checked_out_unless_skipped() {
    let tmp = Tmp::new("submodules");
    let o = origin(&tmp);
    let sub = tmp.path("sub");
    std::fs::create_dir_all(&sub).unwrap();
    git(&sub, &["init", "-q", "-b", "main"]);
    commit(&sub, "inside.txt", "in the submodule\n", BASE_TIME);
    let sub_uri = format!("file://{}", sub.display());
    git(
        &o.dir,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            &sub_uri,
            "vendored",
        ],
    );
    let date = format!("{} +0000", BASE_TIME + 10);
    git_env(
        &o.dir,
        &["commit", "-q", "-m", "submodule"],
        &[("GIT_COMMITTER_DATE", &date), ("GIT_AUTHOR_DATE", &date)],
    );
    // git only clones file:// submodules when allowed.
    let allow = vec![
        "GIT_CONFIG_COUNT=1".to_string(),
        "GIT_CONFIG_KEY_0=protocol.file.allow".to_string(),
        "GIT_CONFIG_VALUE_0=always".to_string(),
    ];
    for skip in [false, true] {
        let src = tmp.path(if skip { "skipped" } else { "kept" });
        let mut r = refs(&o, "main");
        r.skip_submodules = skip;
        let mut opts = options(src.clone(), vec![r]);
        opts.env = allow.clone();
        let record = clone_one(&opts);
        assert_ok(&record);
        let dir = src.join("src/github.com/o/r");
        let submodule_cmd = format!(
            "PWD={} {} git submodule update --init --recursive",
            dir.display(),
            allow.join(" ")
        );
        assert_eq!(
            commands(&record).contains(&submodule_cmd.as_str()),
            !skip,
            "{:#?}",
            commands(&record)
        );
        assert_eq!(
            commands(&record)[0],
            format!("PWD=/ {} mkdir -p {}", allow.join(" "), dir.display()),
            "the extra environment is in every command string"
        );
        assert_eq!(
            dir.join("vendored/inside.txt").is_file(),
            !skip,
            "skip: {skip}"
        );
        assert!(dir.join("vendored").is_dir());
    }
}

#[test]
fn a_missing_branch_fails_the_record_and_stops() {
    let tmp = Tmp::new("missing");
    let o = origin(&tmp);
    let src = tmp.path("go");
    let mut opts = options(src.clone(), vec![refs(&o, "nope")]);
    // A repository on this machine is not retried: far less than the
    // delays' 6 s.
    opts.fetch_backoff = vec![Duration::from_secs(2); 3];
    let record = clone_one(&opts);
    assert!(record.failed);
    let d = src.join("src/github.com/o/r");
    let last = record.commands.last().unwrap();
    assert_eq!(
        last.command,
        format!("PWD={}  git fetch {} nope", d.display(), o.uri)
    );
    assert_eq!(last.error, "exit status 128");
    assert!(
        last.output.contains("couldn't find remote ref nope"),
        "{}",
        last.output
    );
    assert!(
        last.duration < Duration::from_secs(6),
        "a local fetch is not retried: {:?}",
        last.duration
    );
    assert!(!commands(&record).iter().any(|c| c.contains("checkout")));
    assert_eq!(record.final_sha, "");
    assert_eq!(record.duration, Duration::ZERO);
    assert!(any_failed(std::slice::from_ref(&record)));

    let log = clone_log_text(std::slice::from_ref(&record));
    assert!(
        log.starts_with("# FAILED\n# Cloning o/r at nope\n$ PWD=/  mkdir -p "),
        "{log}"
    );
    assert!(
        log.contains("couldn't find remote ref nope\n# Error: exit status 128\n"),
        "{log}"
    );
    assert!(
        log.ends_with("# Final SHA: \n# Total runtime: 0s\n"),
        "{log}"
    );
}

#[test]
fn the_mirror_serves_known_commits_without_the_remote() {
    let tmp = Tmp::new("mirror-reuse");
    let o = origin(&tmp);
    let mirrors = tmp.path("mirrors");
    let fixed = || {
        let mut r = refs(&o, "main");
        r.base_sha = Some(o.first.clone());
        r.skip_fetch_head = true;
        r.pulls = vec![pull(1, &o.pr1)];
        r
    };
    let mut opts = options(tmp.path("go1"), vec![fixed()]);
    opts.mirror_root = Some(mirrors.clone());
    let first = clone_one(&opts);
    assert_ok(&first);
    let m = mirror_dir(&mirrors, &o.uri).display().to_string();
    let from_remote = |r: &Record| {
        r.commands
            .iter()
            .filter(|c| {
                c.command
                    .starts_with(&format!("PWD={m}  git fetch {}", o.uri))
            })
            .count()
    };
    assert_eq!(
        from_remote(&first),
        2,
        "base and pull SHAs: {:#?}",
        commands(&first)
    );

    // The remote goes away; the mirror still has both commits.
    std::fs::rename(&o.dir, tmp.path("gone")).unwrap();
    opts.src_root = tmp.path("go2");
    let second = clone_one(&opts);
    assert_ok(&second);
    assert_eq!(from_remote(&second), 0);
    assert!(!commands(&second).iter().any(|c| c.contains("init --bare")));
    assert_eq!(second.final_sha, first.final_sha);

    // A branch needs the remote.
    let mut by_branch = options(tmp.path("go3"), vec![refs(&o, "main")]);
    by_branch.mirror_root = Some(mirrors);
    by_branch.fetch_backoff = vec![];
    let third = clone_one(&by_branch);
    assert!(third.failed);
    assert!(third
        .commands
        .last()
        .unwrap()
        .command
        .starts_with(&format!("PWD={m}  git fetch")));
}

/// Sets the modification time of every file and directory of the mirror
/// of `uri` (and its lock file) `days` days back: a mirror last used then.
fn age_mirror(mirrors: &Path, uri: &str, days: u64) {
    let then = std::time::SystemTime::now() - Duration::from_secs(days * 24 * 3600);
    let dir = mirror_dir(mirrors, uri);
    let lock = dir.with_extension("lock");
    let mut paths = vec![lock, dir.clone()];
    for name in ["FETCH_HEAD", "config"] {
        paths.push(dir.join(name));
    }
    for p in paths.iter().filter(|p| p.exists()) {
        let f = std::fs::File::options()
            .read(true)
            .open(p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        f.set_modified(then).unwrap();
    }
}

/// A mirror no clone has used since the cutoff is removed (its lock file
/// stays); one used since, or one a clone holds locked, is kept; the next
/// clone of a removed mirror's repository makes it again.
#[test]
fn unused_mirrors_are_pruned_and_made_again_when_needed() {
    let tmp = Tmp::new("mirror-prune");
    let a = origin(&tmp);
    let mirrors = tmp.path("mirrors");
    // Two more repositories: copies of the origin under other paths.
    let copy = |name: &str| {
        let dir = tmp.path(name);
        let out = Command::new("cp")
            .arg("-a")
            .arg(&a.dir)
            .arg(&dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        format!("file://{}", dir.display())
    };
    let (b_uri, c_uri) = (copy("b"), copy("c"));
    let clone_of = |uri: &str, into: &str| {
        let mut r = refs(&a, "main");
        r.clone_uri = Some(uri.to_string());
        let mut opts = options(tmp.path(into), vec![r]);
        opts.mirror_root = Some(mirrors.clone());
        let record = clone_one(&opts);
        assert_ok(&record);
        record
    };
    clone_of(&a.uri, "go-a");
    clone_of(&b_uri, "go-b");
    clone_of(&c_uri, "go-c");
    // a and b were last used ten days ago; c just now. b is being used.
    age_mirror(&mirrors, &a.uri, 10);
    age_mirror(&mirrors, &b_uri, 10);
    let b_lock = std::fs::File::options()
        .read(true)
        .write(true)
        .open(mirror_dir(&mirrors, &b_uri).with_extension("lock"))
        .unwrap();
    rustix::fs::flock(&b_lock, rustix::fs::FlockOperation::LockExclusive).unwrap();

    let week_ago = std::time::SystemTime::now() - Duration::from_secs(7 * 24 * 3600);
    let pruned = prune(&mirrors, week_ago).unwrap();
    assert_eq!(
        pruned,
        Pruned {
            removed: vec![mirror_dir(&mirrors, &a.uri)],
            busy: 1,
            kept: 1,
            errors: vec![],
        }
    );
    assert!(!mirror_dir(&mirrors, &a.uri).exists());
    assert!(mirror_dir(&mirrors, &a.uri).with_extension("lock").exists());
    assert!(mirror_dir(&mirrors, &b_uri).join("config").exists());
    // Nothing is left aside.
    let aside: Vec<_> = std::fs::read_dir(&mirrors)
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().to_string_lossy().into_owned();
            n.ends_with(".removing").then_some(n)
        })
        .collect();
    assert!(aside.is_empty(), "{aside:?}");

    // b, once free, goes at the next pass; a is made again by its next clone.
    // Unlocked, not only closed: a child another test forks at this moment
    // would hold the lock until it executes its program.
    rustix::fs::flock(&b_lock, rustix::fs::FlockOperation::Unlock).unwrap();
    drop(b_lock);
    let pruned = prune(&mirrors, week_ago).unwrap();
    assert_eq!(pruned.removed, vec![mirror_dir(&mirrors, &b_uri)]);
    let again = clone_of(&a.uri, "go-a2");
    assert!(
        commands(&again)
            .iter()
            .any(|c| c.contains("git init --bare")),
        "{:#?}",
        commands(&again)
    );
    // A clone marks its mirror used even when it writes nothing there (a
    // SHA the mirror has): aged, then used so, it survives a pass.
    age_mirror(&mirrors, &c_uri, 10);
    let mut by_sha = refs(&a, "main");
    by_sha.clone_uri = Some(c_uri.clone());
    by_sha.base_sha = Some(a.first.clone());
    by_sha.skip_fetch_head = true;
    let mut opts = options(tmp.path("go-c2"), vec![by_sha]);
    opts.mirror_root = Some(mirrors.clone());
    let record = clone_one(&opts);
    assert_ok(&record);
    let in_mirror = format!("PWD={}  git fetch", mirror_dir(&mirrors, &c_uri).display());
    assert!(
        !commands(&record).iter().any(|c| c.starts_with(&in_mirror)),
        "the mirror fetched nothing: {:#?}",
        commands(&record)
    );
    let pruned = prune(&mirrors, week_ago).unwrap();
    assert!(pruned.removed.is_empty(), "{pruned:?}");
    // A mirror a clone is reading (a shared lock on NAME.use, as a clone
    // holds it until done) is busy.
    age_mirror(&mirrors, &c_uri, 10);
    let reading = std::fs::File::open(mirror_dir(&mirrors, &c_uri).with_extension("use")).unwrap();
    rustix::fs::flock(&reading, rustix::fs::FlockOperation::LockShared).unwrap();
    let pruned = prune(&mirrors, week_ago).unwrap();
    assert_eq!((pruned.busy, pruned.removed.len()), (1, 0), "{pruned:?}");
    rustix::fs::flock(&reading, rustix::fs::FlockOperation::Unlock).unwrap();
    drop(reading);
    // An entry that cannot be handled (a lock file that is a symlink) is
    // reported and the pass goes on to the others.
    let odd = mirrors.join("odd.git");
    std::fs::create_dir_all(&odd).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", mirrors.join("odd.lock")).unwrap();
    let pruned = prune(&mirrors, week_ago).unwrap();
    assert_eq!(
        pruned.removed,
        vec![mirror_dir(&mirrors, &c_uri)],
        "{pruned:?}"
    );
    assert_eq!(pruned.errors.len(), 1, "{pruned:?}");
    assert!(pruned.errors[0].contains("odd.git"), "{pruned:?}");
    assert!(odd.exists());
    // A removal cut short (the mirror renamed aside) is finished by the
    // next pass.
    let aside = mirrors.join("leftover.git.removing");
    std::fs::create_dir_all(aside.join("objects")).unwrap();
    let file_aside = mirrors.join("file.git.removing");
    std::fs::write(&file_aside, "").unwrap();
    prune(&mirrors, week_ago).unwrap();
    assert!(!aside.exists() && !file_aside.exists());
}

#[test]
fn concurrent_clones_share_one_mirror() {
    let tmp = Tmp::new("mirror-concurrent");
    let o = origin(&tmp);
    let mirrors = tmp.path("mirrors");
    let n = 4;
    let barrier = Arc::new(Barrier::new(n));
    let records: Vec<Record> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let barrier = barrier.clone();
                let mut opts = options(tmp.path(&format!("go{i}")), vec![two_pulls(&o)]);
                opts.mirror_root = Some(mirrors.clone());
                s.spawn(move || {
                    barrier.wait();
                    clone_one(&opts)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for r in &records {
        assert_ok(r);
        assert_eq!(r.final_sha, records[0].final_sha);
    }
    let created = records
        .iter()
        .filter(|r| commands(r).iter().any(|c| c.contains("git init --bare")))
        .count();
    assert_eq!(created, 1, "the mirror is created once");
}

#[test]
fn sparse_and_blobless_clones_fetch_less() {
    let tmp = Tmp::new("sparse");
    let o = origin(&tmp);
    commit(&o.dir, "docs/guide.md", "guide\n", BASE_TIME + 5);
    let main = commit(&o.dir, "src/lib.rs", "// code\n", BASE_TIME + 6);
    for mirror in [false, true] {
        let tag = if mirror { "m" } else { "d" };
        let mut sparse = refs(&o, "main");
        sparse.sparse_checkout_files = vec!["docs".into()];
        sparse.path_alias = Some("sparse".into());
        let mut blobless = refs(&o, "main");
        blobless.blobless_fetch = Some(true);
        blobless.pulls = vec![pull(1, "")];
        blobless.path_alias = Some("blobless".into());
        let src = tmp.path(tag);
        let mut opts = options(src.clone(), vec![sparse, blobless]);
        opts.mirror_root = mirror.then(|| tmp.path("mirrors"));
        let records = clone_refs(&opts);
        for r in &records {
            assert_ok(r);
        }
        let get = |alias: &str| {
            records
                .iter()
                .find(|r| r.refs.path_alias.as_deref() == Some(alias))
                .unwrap()
        };

        let dir = src.join("src/sparse");
        let d = dir.display();
        let cmds = commands(get("sparse"));
        for want in [
            format!("PWD={d}  git sparse-checkout init"),
            format!(
                "PWD={d}  git fetch --depth 1 --filter=blob:none --no-tags {} main",
                o.uri
            ),
            format!("PWD={d}  git sparse-checkout set docs"),
        ] {
            assert!(cmds.contains(&want.as_str()), "{want} not in {cmds:#?}");
        }
        assert!(!cmds
            .iter()
            .any(|c| c.contains("--tags --prune") || c.contains("submodule")));
        assert_eq!(get("sparse").final_sha, main);
        assert!(dir.join("docs/guide.md").is_file());
        assert!(!dir.join("src/lib.rs").exists(), "mirror: {mirror}");
        assert_eq!(git(&dir, &["rev-list", "--count", "HEAD"]), "1");

        let dir = src.join("src/blobless");
        let d = dir.display();
        let cmds = commands(get("blobless"));
        for want in [
            format!(
                "PWD={d}  git fetch --filter=blob:none {} --tags --prune",
                o.uri
            ),
            format!("PWD={d}  git fetch --filter=blob:none {} main", o.uri),
            format!(
                "PWD={d}  git fetch --filter=blob:none {} pull/1/head",
                o.uri
            ),
        ] {
            assert!(cmds.contains(&want.as_str()), "{want} not in {cmds:#?}");
        }
        assert!(dir.join("src/lib.rs").is_file() && dir.join("a.txt").is_file());
    }
    // Direct and mirrored blobless clones merge to the same commit.
    let sha = |root: &str| git(&tmp.path(root).join("src/blobless"), &["rev-parse", "HEAD"]);
    assert_eq!(sha("d"), sha("m"));
}

#[test]
fn records_are_written_as_prow_writes_them() {
    // From Prow's pkg/pod-utils/clone/types.go: Record{refs; commands,
    // failed, final_sha, duration: omitempty}, Command{command; output,
    // error, duration: omitempty}, durations as integer nanoseconds; and
    // encoding/json's escaping of <, > and &.
    let failed = Record {
        refs: Refs {
            org: "kubernetes".into(),
            repo: "test-infra".into(),
            base_ref: Some("master".into()),
            pulls: vec![pull(1, "abc")],
            ..Refs::default()
        },
        commands: vec![
            bosun_injob::clone::Command {
                command: "PWD=/  mkdir -p /go/src/x".into(),
                duration: Duration::from_nanos(1500),
                ..Default::default()
            },
            bosun_injob::clone::Command {
                command: "PWD=/x  git fetch https://x main".into(),
                output: "fatal: <nope> & more\n".into(),
                error: "exit status 128".into(),
                duration: Duration::from_nanos(2),
            },
        ],
        failed: true,
        ..Record::default()
    };
    let done = Record {
        refs: Refs {
            org: "o".into(),
            repo: "r".into(),
            ..Refs::default()
        },
        final_sha: "deadbeef".into(),
        duration: Duration::from_secs(3),
        ..Record::default()
    };
    let empty = Record::default();
    let records = vec![failed, done, empty];
    let json = records_json(&records);
    let fixture = concat!(
        r#"[{"refs":{"org":"kubernetes","repo":"test-infra","base_ref":"master","pulls":[{"number":1,"author":"someone","sha":"abc"}]},"#,
        r#""commands":[{"command":"PWD=/  mkdir -p /go/src/x","duration":1500},"#,
        r#"{"command":"PWD=/x  git fetch https://x main","output":"fatal: \u003cnope\u003e \u0026 more\n","error":"exit status 128","duration":2}],"failed":true},"#,
        r#"{"refs":{"org":"o","repo":"r"},"final_sha":"deadbeef","duration":3000000000},"#,
        r#"{"refs":{"org":"","repo":""}}]"#
    );
    assert_eq!(json, fixture);
    let back: Vec<Record> = serde_json::from_str(&json).unwrap();
    assert_eq!(back, records);
}

#[test]
fn the_clone_log_reads_as_prows() {
    let record = Record {
        refs: Refs {
            org: "o".into(),
            repo: "r".into(),
            base_ref: Some("main".into()),
            base_sha: Some("b45e".into()),
            pulls: vec![pull(42, "f00d"), pull(13, "")],
            ..Refs::default()
        },
        commands: vec![
            bosun_injob::clone::Command {
                command: "PWD=/  mkdir -p /go/src/x".into(),
                duration: Duration::from_micros(1500),
                ..Default::default()
            },
            bosun_injob::clone::Command {
                command: "PWD=/go/src/x  git init".into(),
                output: "Initialized empty Git repository\n".into(),
                ..Default::default()
            },
        ],
        final_sha: "abc".into(),
        duration: Duration::from_millis(12_500),
        ..Record::default()
    };
    let setup = Record::default();
    assert_eq!(
        clone_log_text(&[record, setup]),
        "# Cloning o/r at main(b45e)\n\
         # Checking out pulls:\n\
         #\t42(f00d)\n\
         #\t13\n\
         $ PWD=/  mkdir -p /go/src/x (runtime: 1.5ms)\n\
         $ PWD=/go/src/x  git init\n\
         Initialized empty Git repository\n\
         # Final SHA: abc\n\
         # Total runtime: 12.5s\n\
         Environment setup\n\
         # Final SHA: \n\
         # Total runtime: 0s\n"
    );
}

#[test]
fn an_unusable_mirror_root_fails_the_clone_visibly() {
    let tmp = Tmp::new("mirror-broken");
    let o = origin(&tmp);
    let not_a_dir = tmp.path("mirrors");
    std::fs::write(&not_a_dir, "a file where the mirrors would go").unwrap();
    let mut opts = options(tmp.path("go"), vec![refs(&o, "main")]);
    opts.mirror_root = Some(not_a_dir.clone());
    let record = clone_one(&opts);
    assert!(record.failed);
    assert_eq!(record.commands.len(), 1, "{:#?}", commands(&record));
    let step = &record.commands[0];
    assert_eq!(
        step.command,
        format!("bosun: create mirror root {}", not_a_dir.display())
    );
    assert!(!step.error.is_empty());
    assert!(!tmp.path("go/src").exists(), "nothing is cloned");
    let log = clone_log_text(&[record]);
    assert!(log.contains("# Error: "), "{log}");
}

#[test]
fn a_remote_fetch_is_retried_after_each_delay() {
    let tmp = Tmp::new("retried");
    let src = tmp.path("go");
    // Nothing listens on port 1: every attempt is refused at once.
    let r = Refs {
        org: "o".into(),
        repo: "r".into(),
        base_ref: Some("main".into()),
        clone_uri: Some("http://127.0.0.1:1/o/r.git".into()),
        ..Refs::default()
    };
    let mut opts = options(src, vec![r]);
    opts.fetch_backoff = vec![Duration::from_millis(60); 3];
    let record = clone_one(&opts);
    assert!(record.failed);
    let last = record.commands.last().unwrap();
    assert!(last.command.contains("git fetch"), "{}", last.command);
    assert!(
        last.duration >= Duration::from_millis(180),
        "retried after each delay: {:?}",
        last.duration
    );
}
