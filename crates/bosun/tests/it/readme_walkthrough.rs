//! The README's quickstart, as a reader runs it, so the README cannot drift
//! from what works: the README's first command (the quickstart's script,
//! which makes the git remote the quickstart follows and runs `bosun
//! serve`, here the built one through `$BOSUN`), then every command of the walk-through block (the fenced block
//! after the `<!-- walk-through ... -->` line), one after the other, each
//! checked. Every command of the block must have a check here: a new line
//! in the README without one fails the test.
//!
//! The daemon runs from a copy of the project every user can reach
//! ([`common::reachable_copy`]): as root the quickstart's jobs run as
//! `nobody`. It is started twice when the tests run as root: as root (as CI
//! runs it) and as an ordinary user (`nobody`, through `setpriv`); as
//! another user, once, as that user.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{self, request};

/// The README's text.
fn readme() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    std::fs::read_to_string(&path).unwrap()
}

/// The fenced block after the line starting with `marker`, as lines.
fn block_after<'a>(text: &'a str, marker: &str) -> Vec<&'a str> {
    let mut lines = text
        .lines()
        .skip_while(|l| !l.starts_with(marker))
        .skip(1)
        .skip_while(|l| !l.starts_with("```"));
    assert!(lines.next().is_some(), "no fenced block after {marker:?}");
    lines.take_while(|l| !l.starts_with("```")).collect()
}

/// The commands of a block: its lines without blank and comment-only ones.
fn commands<'a>(block: &[&'a str]) -> Vec<&'a str> {
    block
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// The README's first command: the quickstart's script
/// (`examples/quickstart/serve`, which makes the remote the quickstart
/// follows and runs `bosun serve`), with its arguments.
fn serve_command(readme: &str) -> Vec<String> {
    let block = block_after(readme, "## Two commands");
    let line = commands(&block)
        .into_iter()
        .find(|l| l.starts_with("examples/quickstart/serve"))
        .expect("the README's first command runs the quickstart's serve script");
    line.split_whitespace().map(str::to_string).collect()
}

/// Who the daemon runs as.
#[derive(Clone, Copy, PartialEq)]
enum As {
    /// The user the tests run as.
    Myself,
    /// `nobody`, through `setpriv`, when the tests run as root.
    Nobody,
}

/// What one command gave.
struct Ran {
    code: Option<i32>,
    out: String,
}

fn walk_through(who: As) {
    let text = readme();
    let tmp = tempfile::tempdir().unwrap();
    let copy = common::reachable_copy(tmp.path());
    let checkout = &copy.checkout;
    let bosun = copy.bin.join("bosun");
    if who == As::Nobody {
        let out = Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(checkout)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    // The README's command, from the checkout, on a port of its own.
    let log = tmp.path().join("serve.log");
    let script = serve_command(&text);
    let mut serve = match who {
        As::Myself => Command::new("bash"),
        As::Nobody => {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
                .arg("bash");
            c
        }
    };
    let child = serve
        .args(&script)
        .args(["--listen", "127.0.0.1:0"])
        .env("BOSUN", &bosun)
        .current_dir(checkout)
        .env_remove("KUBECONFIG")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut daemon = common::Serve {
        child,
        port: 0,
        log: log.clone(),
    };
    daemon.port = common::logged_port(
        &mut daemon.child,
        &log,
        Instant::now() + Duration::from_secs(30),
    );
    let port = daemon.port;
    let deadline = Instant::now() + Duration::from_secs(30);
    while request(port, "GET", "/readyz", None, None).0 != 200 {
        assert!(Instant::now() < deadline, "never ready");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The user jobs run as: nobody as root (run_as: unprivileged), the
    // daemon's own user otherwise.
    let user = if who == As::Nobody || rustix::process::geteuid().is_root() {
        "nobody".to_string()
    } else {
        let out = Command::new("id").arg("-un").output().unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };

    let block = block_after(&text, "<!-- walk-through");
    let commands = commands(&block);
    assert!(commands.len() >= 7, "{commands:?}");
    let path = format!(
        "{}:{}",
        copy.bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let address = format!("127.0.0.1:{port}");
    for line in commands {
        let command = line.replace("localhost:8080", &address);
        // A reader runs the commands as the user the daemon runs as (git
        // refuses a repository another user owns).
        let mut shell = match who {
            As::Myself => Command::new("bash"),
            As::Nobody => {
                let mut c = Command::new("setpriv");
                c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
                    .arg("bash")
                    .env("HOME", checkout);
                c
            }
        };
        let out = shell
            .args(["-c", &command])
            .current_dir(checkout)
            .env("PATH", &path)
            .env("BOSUN_SERVER", format!("http://{address}"))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let ran = Ran {
            code: out.status.code(),
            out: format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        };
        check(line, &ran, &user);
    }
    // The dashboard, as the README describes it: the dispatcher's chart and
    // its explanations; the clusters, which is trusted, and the user jobs
    // run as.
    // (The page's list of moves is the last re-plan's: the followed
    // repository's jobs, which arrive after the first plan, may be the last
    // placed. A job's explanation is asked for by name.)
    let (status, page) = request(port, "GET", "/dispatcher?job=post-app-build", None, None);
    assert_eq!(status, 200);
    assert!(page.contains(r#"id="plan-chart""#), "{page}");
    assert!(
        page.contains("moved from default to big to balance load"),
        "{page}"
    );
    let (status, page) = request(port, "GET", "/clusters", None, None);
    assert_eq!(status, 200);
    assert!(
        page.contains("jobs publish-app; repos example/app; types postsubmit"),
        "{page}"
    );
    let runs_as = if rustix::process::geteuid().is_root() && who == As::Myself {
        "runs as nobody (uid 65534; run_as: unprivileged)".to_string()
    } else {
        "runs as bosun&#39;s own user (run_as: unprivileged)".to_string()
    };
    assert!(page.contains(&runs_as), "{runs_as}: {page}");
    drop(daemon);
}

/// Checks what a walk-through command gave; every command has its check.
fn check(line: &str, ran: &Ran, user: &str) {
    let out = &ran.out;
    let ok = || assert_eq!(ran.code, Some(0), "{line}:\n{out}");
    if line.starts_with("bosun clusters") {
        ok();
        for want in ["default", "big", "release", "publish-app", "example/app"] {
            assert!(out.contains(want), "{line}: no {want}:\n{out}");
        }
    } else if line.starts_with("bosun run hello --follow") {
        ok();
        assert!(out.contains("hello from hello, build "), "{line}:\n{out}");
    } else if line.starts_with("curl") && line.contains("/dispatch/explain?job=post-app-build") {
        ok();
        let v = common::json(out);
        assert_eq!(v["job"], "post-app-build", "{out}");
        assert_eq!(v["cluster"], "big", "{out}");
        let reason = v["explanation"].as_str().unwrap();
        assert!(
            reason.starts_with("moved from default to big to balance load"),
            "{reason}"
        );
        assert!(
            v["rule"]
                .as_str()
                .unwrap()
                .contains("not eligible: release (trusted"),
            "{out}"
        );
    } else if line.starts_with("bosun run publish-app") && line.contains("pulls") {
        assert_ne!(ran.code, Some(0), "{line}:\n{out}");
        assert!(
            out.contains(r#"refused: job publish-app runs on trusted cluster "release""#)
                && out.contains("with pull requests are not allowed"),
            "{line}:\n{out}"
        );
    } else if line.starts_with("bosun run publish-app") {
        ok();
        assert!(
            out.contains(&format!("publishing example/app at main as {user}")),
            "{line}:\n{out}"
        );
    } else if line.starts_with("bosun run release-notes --follow") {
        ok();
        for want in [
            "[draft/write] drafted NOTES.md",
            "[publish/show] - example/lighthouse-app at main",
            "[announce/say] release notes pipeline: Succeeded",
        ] {
            assert!(out.contains(want), "{line}: no {want}:\n{out}");
        }
    } else if line.starts_with("git clone -q examples/quickstart/remote/lighthouse-app.git")
        || (line.starts_with("sed -i") && line.contains("lighthouse-work/"))
        || line.starts_with("git -C lighthouse-work")
    {
        // Git's own steps: they succeed; what they did, the next commands
        // check (`bosun repos refresh` loads the pushed commit, `bosun
        // periodics` shows its schedule).
        ok();
    } else if line.starts_with("bosun repos refresh example/lighthouse-app") {
        ok();
        assert!(
            out.contains("example/lighthouse-app: the configuration at ")
                && out.contains(" is in force"),
            "{line}:\n{out}"
        );
    } else if line.starts_with("bosun repos") {
        ok();
        for want in ["example/lighthouse-app", "main", "1 periodic", "following"] {
            assert!(out.contains(want), "{line}: no {want}:\n{out}");
        }
    } else if line.starts_with("bosun periodics") {
        ok();
        for want in [
            "clock",
            "*/5 * * * *",
            "hello",
            "example/lighthouse-app:release-notes",
            "30 * * * *",
        ] {
            assert!(out.contains(want), "{line}: no {want}:\n{out}");
        }
    } else if line.starts_with("bosun runs") {
        ok();
        for want in ["publish-app", "release-notes", "hello"] {
            assert!(out.contains(want), "{line}: no {want}:\n{out}");
        }
        // Each run with its cluster: publish-app on the trusted one.
        let row = |job: &str| {
            out.lines()
                .find(|l| l.split_whitespace().nth(1) == Some(job))
                .unwrap_or_else(|| panic!("{line}: no run of {job}:\n{out}"))
                .split_whitespace()
                .collect::<Vec<_>>()
        };
        assert_eq!(row("publish-app")[4], "release", "{out}");
        assert_eq!(row("release-notes")[4], "default", "{out}");
    } else {
        panic!("the README's walk-through has a command this test does not check: {line}");
    }
}

#[test]
fn the_readmes_walk_through_runs_against_a_real_bosun_serve() {
    walk_through(As::Myself);
}

#[test]
fn the_readmes_walk_through_runs_as_an_ordinary_user() {
    if rustix::process::geteuid().is_root() {
        walk_through(As::Nobody);
    } else {
        // The tests already run as an ordinary user: the other test is this
        // one, and the root case (run_as: unprivileged meaning nobody) is
        // left to a run as root (CI's).
        eprintln!("not root: the walk-through as root is not run here");
        walk_through(As::Myself);
    }
}
