//! Following a repository from its remote, end to end with real git: its
//! head by `ls-remote`, a mirror fetched over HTTP (`git http-backend` on
//! loopback) or SSH (a stand-in `ssh`), its configuration loaded at each
//! head, its credentials never shown, its failures retried with backoff.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use base64::Engine as _;
use bosun_config::model::Snapshot;
use bosun_forge::repos::{
    follow, is_ancestor, load_at, Backoff, Credentials, ErrorKind, Head, Mirror, Remote,
};
use bosun_git::testing::{git, Requests, WorkRepo};

use crate::common::{lines, triggers, Served, REPO};

/// The `Authorization` header bosun sends for a token file holding `line`.
fn basic(line: &str) -> String {
    let pair = if line.contains(':') {
        line.to_string()
    } else {
        format!("x-access-token:{line}")
    };
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

fn cron(s: &Snapshot) -> &str {
    s.periodics[0].kind.cron.as_deref().expect("a cron")
}

fn names<K>(jobs: Option<&Vec<bosun_config::model::Job<K>>>) -> Vec<&str> {
    jobs.map(|j| j.iter().map(|j| j.name()).collect())
        .unwrap_or_default()
}

#[test]
fn a_repository_is_followed_from_its_remote_over_http() {
    let s = Served::new("main");
    let c1 = s.push_config("main", "0 4 * * *");
    let token = s.tmp.path().join("token");
    std::fs::write(&token, "tok-e2e\n").unwrap();
    s.server.require_authorization(Some(&basic("tok-e2e")));
    let remote = s.remote(Some("main"), Credentials::TokenFile(token));

    // Followed: the branch's head, a mirror holding it, the jobs it defines.
    let synced = follow(&s.mirrors, &remote).unwrap();
    assert!(synced.cloned && synced.fetched);
    assert_eq!(
        (synced.branch.as_str(), synced.commit.as_str()),
        ("main", c1.as_str())
    );
    assert_eq!(synced.mirror.dir(), s.mirror_dir());
    let at = load_at(synced.mirror.dir(), &synced.commit, REPO, "main").unwrap();
    assert_eq!(lines(&at.loaded), Vec::<String>::new());
    assert_eq!(at.commit, c1);
    let snap = at.loaded.snapshot.as_ref().expect("the jobs");
    assert_eq!(snap.periodics.len(), 1);
    assert_eq!(snap.periodics[0].identity(), "acme/widgets:nightly");
    assert_eq!(cron(snap), "0 4 * * *");
    let pipeline = snap.periodics[0]
        .base
        .tekton_pipeline_run_spec
        .as_ref()
        .expect("the source's PipelineRun");
    assert_eq!(
        pipeline["v1"]["pipelineSpec"]["tasks"][0]["taskSpec"]["steps"][0]["script"],
        "make nightly"
    );
    assert_eq!(names(snap.presubmits.get(REPO)), ["unit"]);
    assert_eq!(names(snap.postsubmits.get(REPO)), ["publish"]);
    // Files are named under the repository and the commit.
    let unit = &snap.presubmits[REPO][0];
    assert_eq!(&*unit.origin.file, format!("{REPO}@{c1}/.prow.yaml"));
    assert_eq!(at.in_tree(&unit.origin.file), Some(".prow.yaml"));
    assert_eq!(
        at.files_read,
        [
            ".lighthouse/jobs/nightly.yaml",
            ".lighthouse/jobs/triggers.yaml",
            ".prow.yaml"
        ]
    );

    // A second commit changes the schedule: the new head has it.
    s.work
        .write(".lighthouse/jobs/triggers.yaml", &triggers("30 5 * * 1-5"));
    let c2 = s.work.commit("weekdays only");
    s.push("main");
    let synced = follow(&s.mirrors, &remote).unwrap();
    assert!(!synced.cloned && synced.fetched);
    assert_eq!(synced.commit, c2);
    let at = load_at(synced.mirror.dir(), &c2, REPO, "main").unwrap();
    assert_eq!(cron(at.loaded.snapshot.as_ref().unwrap()), "30 5 * * 1-5");
    assert!(is_ancestor(synced.mirror.dir(), &c1, &c2).unwrap());
    assert!(!is_ancestor(synced.mirror.dir(), &c2, &c1).unwrap());

    // Broken YAML: no jobs, a diagnostic at the file and line, naming the
    // commit.
    s.work.write(
        ".prow.yaml",
        "presubmits:\n- name: unit\n  always_run: true\n  spec: {containers: [\n",
    );
    let c3 = s.work.commit("broken");
    s.push("main");
    let synced = follow(&s.mirrors, &remote).unwrap();
    assert_eq!(synced.commit, c3);
    let at = load_at(synced.mirror.dir(), &c3, REPO, "main").unwrap();
    assert!(at.loaded.snapshot.is_none());
    let errors: Vec<String> = lines(&at.loaded)
        .into_iter()
        .filter(|l| l.contains(": error: "))
        .collect();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    let at_line = format!("{REPO}@{c3}/.prow.yaml:5:1: error: ");
    assert!(
        errors[0].starts_with(&at_line),
        "{} not at {at_line}",
        errors[0]
    );

    // A force-push: the new head does not descend from the one before.
    s.work.git(&["reset", "--quiet", "--hard", &c2]);
    s.work.write("README.md", "rewritten\n");
    let c4 = s.work.commit("rewritten");
    s.force_push("main");
    let synced = follow(&s.mirrors, &remote).unwrap();
    assert_eq!(synced.commit, c4);
    let dir = synced.mirror.dir();
    assert!(!is_ancestor(dir, &c3, &c4).unwrap(), "force-pushed over");
    assert!(is_ancestor(dir, &c2, &c4).unwrap());
    assert!(synced.mirror.is_ancestor(&c4, &c4).unwrap());
    // A commit the mirror never had is no ancestor; an unknown head is an
    // error.
    let never = "0123456789abcdef0123456789abcdef01234567";
    assert!(!is_ancestor(dir, never, &c4).unwrap());
    assert!(is_ancestor(dir, &c4, never).is_err());
}

#[test]
fn the_token_goes_in_a_header_and_nowhere_else() {
    let s = Served::new("main");
    s.push_config("main", "0 4 * * *");
    let file = s.tmp.path().join("token");
    s.server.require_authorization(Some(&basic("right-token")));
    let remote = s.remote(Some("main"), Credentials::TokenFile(file.clone()));
    let url = s.server.url(REPO);

    // Without credentials, then with a wrong token: refused, saying what
    // to check, showing no token.
    let e = follow(&s.mirrors, &s.remote(Some("main"), Credentials::None)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Authentication, "{e}");
    assert!(
        e.to_string().starts_with(&format!("{REPO} ({url}): ")),
        "{e}"
    );
    assert!(e.to_string().contains("needs credentials"), "{e}");
    std::fs::write(&file, "wrong-token\n").unwrap();
    let e = follow(&s.mirrors, &remote).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Authentication, "{e}");
    let text = e.to_string();
    assert!(
        text.contains(&format!("check the token in {}", file.display())),
        "{text}"
    );
    for secret in ["wrong-token", &basic("wrong-token")[6..]] {
        assert!(!text.contains(secret), "{text}");
    }
    assert!(!s.mirror_dir().exists());

    // The clone itself refused (the head known, the token wrong): nothing
    // left, nothing shown.
    let head = s.remote(Some("main"), Credentials::None);
    s.server.require_authorization(None);
    let head = head.head().unwrap();
    s.server.require_authorization(Some(&basic("right-token")));
    let e = Mirror::sync(&s.mirrors, &remote, &head).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Authentication, "{e}");
    assert!(!e.to_string().contains("wrong-token"), "{e}");
    assert!(!s.mirror_dir().exists());
    assert!(!s.mirrors.join("acme/widgets.git.new").exists());

    // The right token: followed; the token is in the header the server
    // got, and in no recorded command.
    std::fs::write(&file, "right-token\n").unwrap();
    s.server.clear_requests();
    let synced = follow(&s.mirrors, &remote).unwrap();
    let seen = s.server.requests();
    assert!(!seen.is_empty());
    for r in &seen {
        assert_eq!(
            r.authorization.as_deref(),
            Some(basic("right-token").as_str()),
            "{r:?}"
        );
        assert_eq!(r.status, 200, "{r:?}");
    }
    assert_eq!(synced.commands.len(), 2, "ls-remote and the fetch");
    for c in &synced.commands {
        let all = format!("{} {} {}", c.command, c.output, c.error);
        for secret in ["right-token", &basic("right-token")[6..]] {
            assert!(!all.contains(secret), "{all}");
        }
        assert!(c.command.contains("=<redacted>"), "{}", c.command);
        assert!(c.command.contains(&url), "{}", c.command);
    }

    // Rotated: the file is read at each use.
    s.server
        .require_authorization(Some(&basic("rotated-token")));
    s.work.write("README.md", "two\n");
    let c2 = s.work.commit("two");
    s.push("main");
    std::fs::write(&file, "rotated-token\n").unwrap();
    assert_eq!(follow(&s.mirrors, &remote).unwrap().commit, c2);

    // USER:PASSWORD is sent as that pair.
    s.server.require_authorization(Some(&basic("oauth2:pat-1")));
    std::fs::write(&file, "oauth2:pat-1\n").unwrap();
    assert_eq!(remote.head().unwrap().commit, c2);

    // A URL's own user information is shown in no error.
    let mut with_user = remote.clone();
    with_user.clone_uri = url.replace("http://", "http://bot:url-secret@");
    with_user.credentials = Credentials::None;
    let e = with_user.head().unwrap_err();
    assert!(!e.to_string().contains("url-secret"), "{e}");
    assert_eq!(e.url, url);
}

#[test]
fn a_clone_that_fails_leaves_nothing_and_is_retried_with_backoff() {
    let s = Served::new("main");
    let c1 = s.push_config("main", "0 4 * * *");
    let remote = s.remote(None, Credentials::None);

    // The server down: the head cannot be read, nothing is made.
    s.server.fail_next(1, 500, Requests::All);
    let e = follow(&s.mirrors, &remote).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unreachable, "{e}");
    assert!(!s.mirrors.join("acme").exists());

    // Then its fetches fail for a while: each clone fails half-way and is
    // removed; the backoff grows until one succeeds.
    s.server.fail_next(3, 500, Requests::Fetches);
    let mut backoff = Backoff::default();
    let mut now = Instant::now();
    let mut delays = Vec::new();
    let synced = loop {
        assert!(backoff.ready(now));
        match follow(&s.mirrors, &remote) {
            Ok(synced) => {
                backoff.succeeded();
                break synced;
            }
            Err(e) => {
                assert_eq!(e.kind, ErrorKind::Unreachable, "{e}");
                assert!(e.to_string().contains("error: 500"), "{e}");
                assert!(e.to_string().contains("cannot clone branch main"), "{e}");
                assert!(!s.mirror_dir().exists(), "no half-made mirror");
                assert!(!s.mirrors.join("acme/widgets.git.new").exists());
                delays.push(backoff.failed(now).as_secs());
                assert!(!backoff.ready(now));
                now = backoff.next_attempt(now);
            }
        }
        assert!(delays.len() <= 3, "still failing after {delays:?}");
    };
    assert_eq!(delays, [1, 2, 4]);
    assert_eq!(backoff.failures(), 0);
    assert!(synced.cloned);
    assert_eq!(synced.commit, c1);
    let fetches: Vec<u16> = s
        .server
        .requests()
        .iter()
        .filter(|r| r.fetch)
        .map(|r| r.status)
        .collect();
    assert_eq!(fetches, [500, 500, 500, 200]);
}

#[test]
fn a_mirror_is_reopened_after_a_restart_and_never_wedged() {
    let s = Served::new("main");
    let c1 = s.push_config("main", "0 4 * * *");
    let remote = s.remote(Some("main"), Credentials::None);
    assert!(Mirror::open(&s.mirrors, REPO).is_none());
    assert!(follow(&s.mirrors, &remote).unwrap().cloned);

    // "Restarted": the mirror is found again; the head has not moved, so
    // nothing is fetched.
    let reopened = Mirror::open(&s.mirrors, REPO).expect("the mirror is kept");
    assert_eq!(reopened.dir(), s.mirror_dir());
    s.server.clear_requests();
    let again = follow(&s.mirrors, &remote).unwrap();
    assert!(!again.cloned && !again.fetched);
    assert_eq!(again.commit, c1);
    assert_eq!(again.commands.len(), 1, "ls-remote only");
    assert!(s.server.requests().iter().all(|r| !r.fetch));

    // A tag and another branch on the remote: not fetched.
    s.work.git(&["tag", "v1"]);
    s.work.push(&s.bare, "refs/tags/v1:refs/tags/v1", false);
    s.work.git(&["branch", "other"]);
    s.push("other");

    // A git killed mid-update left its lock, a bosun killed mid-clone its
    // half-made directory: neither wedges the next sync.
    std::fs::write(s.mirror_dir().join("refs/heads/main.lock"), "").unwrap();
    std::fs::write(s.mirror_dir().join("packed-refs.lock"), "").unwrap();
    let half = s.mirrors.join("acme/widgets.git.new");
    std::fs::create_dir_all(half.join("objects")).unwrap();
    s.work.git(&["checkout", "--quiet", "main"]);
    s.work.write("README.md", "moved\n");
    let c2 = s.work.commit("moved");
    s.push("main");
    let synced = follow(&s.mirrors, &remote).unwrap();
    assert!(synced.fetched && !synced.cloned);
    assert_eq!(synced.commit, c2);
    assert!(!s.mirror_dir().join("refs/heads/main.lock").exists());
    assert!(!half.exists());
    assert_eq!(s.mirror_refs(), ["refs/heads/main"], "the branch only");
    assert_eq!(
        git(&s.mirror_dir(), &["symbolic-ref", "HEAD"]),
        "refs/heads/main"
    );

    // A directory in the mirror's place that is no repository: replaced by
    // a clone.
    std::fs::remove_dir_all(s.mirror_dir()).unwrap();
    std::fs::create_dir_all(s.mirror_dir().join("junk")).unwrap();
    let synced = follow(&s.mirrors, &remote).unwrap();
    assert!(synced.cloned);
    assert_eq!(synced.commit, c2);
    assert!(!s.mirror_dir().join("junk").exists());
}

#[test]
fn the_remotes_head_branch_is_followed_when_no_branch_is_given() {
    let s = Served::new("trunk");
    let trunk = s.push_config("trunk", "0 4 * * *");
    s.work.git(&["checkout", "--quiet", "-b", "main"]);
    s.work.write("README.md", "main\n");
    let main = s.work.commit("main");
    s.push("main");

    let remote = s.remote(None, Credentials::None);
    assert_eq!(
        remote.head().unwrap(),
        Head {
            branch: "trunk".into(),
            commit: trunk.clone()
        }
    );
    let synced = follow(&s.mirrors, &remote).unwrap();
    assert_eq!(
        (synced.branch.as_str(), synced.commit.as_str()),
        ("trunk", trunk.as_str())
    );
    assert_eq!(s.mirror_refs(), ["refs/heads/trunk"]);
    let at = load_at(synced.mirror.dir(), &trunk, REPO, &synced.branch).unwrap();
    let snap = at.loaded.snapshot.unwrap();
    assert_eq!(
        snap.periodics[0].source,
        bosun_config::types::JobSource::InRepo {
            repo: REPO.into(),
            branch: "trunk".into()
        }
    );

    // The remote's default branch changes: followed there, the mirror
    // holding that branch alone.
    git(&s.bare, &["symbolic-ref", "HEAD", "refs/heads/main"]);
    let synced = follow(&s.mirrors, &remote).unwrap();
    assert_eq!(
        (synced.branch.as_str(), synced.commit.as_str()),
        ("main", main.as_str())
    );
    assert_eq!(s.mirror_refs(), ["refs/heads/main"]);
    assert_eq!(
        git(&s.mirror_dir(), &["symbolic-ref", "HEAD"]),
        "refs/heads/main"
    );

    // A configured branch is that one; one the remote lacks is not found.
    let on_trunk = s.remote(Some("trunk"), Credentials::None);
    assert_eq!(on_trunk.head().unwrap().commit, trunk);
    let e = s
        .remote(Some("nope"), Credentials::None)
        .head()
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound);
    assert!(
        e.to_string().contains("the remote has no branch nope"),
        "{e}"
    );
    // A repository the server does not have.
    let mut missing = remote.clone();
    missing.clone_uri = s.server.url("acme/nothing");
    let e = missing.head().unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
}

/// The variable telling [`ssh_process`] where its test's files are.
const SSH_HELPER: &str = "BOSUN_FORGE_TEST_SSH_DIR";

/// A stand-in for `ssh`: it logs its arguments, skips the options and the
/// host, and runs the remote command here.
const FAKE_SSH: &str = r#"#!/bin/sh
printf '%s\n' "$*" >> "$(dirname "$0")/ssh.log"
while [ $# -gt 0 ]; do
  case "$1" in
    -i|-o|-p|-l|-F) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
shift
exec sh -c "$*"
"#;

#[test]
fn an_ssh_key_reaches_git_through_git_ssh_command() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(bin.join("ssh"), FAKE_SSH).unwrap();
    std::fs::set_permissions(bin.join("ssh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let bare = dir.join("srv/acme/widgets.git");
    std::fs::create_dir_all(&bare).unwrap();
    git(
        &bare,
        &["init", "--quiet", "--bare", "--initial-branch=main"],
    );
    let work = WorkRepo::init(dir.join("work"), "main");
    work.write(".prow.yaml", &crate::common::prow_yaml());
    let sha = work.commit("one");
    work.push(&bare, "main:refs/heads/main", false);
    std::fs::write(dir.join("id key"), "not really a key\n").unwrap();

    // This binary again, with the stand-in first on its PATH (a PATH of its
    // own: the other tests' git is not touched).
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "follow::ssh_process",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
            "-q",
        ])
        .env("PATH", path)
        .env(SSH_HELPER, dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let log = std::fs::read_to_string(bin.join("ssh.log")).expect("ssh ran");
    let key = dir.join("id key");
    let want = format!(
        "-i {} -o IdentitiesOnly=yes -o BatchMode=yes",
        key.display()
    );
    assert!(log.lines().count() >= 2, "ls-remote and fetch: {log}");
    for line in log.lines() {
        assert!(line.starts_with(&want), "{line}");
        assert!(line.contains("fake.invalid"), "{line}");
    }
    let mirror = Mirror::open(&dir.join("mirrors"), REPO).expect("a mirror");
    assert_eq!(
        mirror.repo().resolve("refs/heads/main").unwrap().as_deref(),
        Some(sha.as_str())
    );
}

/// The process [`an_ssh_key_reaches_git_through_git_ssh_command`] starts;
/// does nothing when not started by it.
#[test]
#[ignore = "the process an_ssh_key_reaches_git_through_git_ssh_command starts"]
fn ssh_process() {
    let Some(dir) = std::env::var_os(SSH_HELPER) else {
        return;
    };
    let dir = Path::new(&dir);
    let remote = Remote {
        repo: REPO.into(),
        clone_uri: format!("ssh://fake.invalid{}/srv/acme/widgets.git", dir.display()),
        branch: None,
        credentials: Credentials::SshKey(dir.join("id key")),
    };
    let synced = follow(&dir.join("mirrors"), &remote).unwrap();
    assert!(synced.cloned);
    assert!(synced.commands[0]
        .command
        .contains("GIT_SSH_COMMAND=ssh -i '"));
}
