//! The API and the dashboard across replicas on one PostgreSQL database: a
//! run created on a follower is started by the leader at once (the store's
//! notifications), and a login made on one replica aborts it through
//! another (sessions and the CSRF key in the store, the abort request
//! recorded for the leader).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bosun_kubetest::postgres::Postgres;

use crate::common::{serve, Serve};
use crate::web_support::{get, post_form, trigger, wait_state, API_TOKEN};

const CONFIG: &str = "build_clusters:\n  default: {kind: local, max_concurrency: 4}\n";
const JOBS: &str = "periodics:\n- name: slow\n  cron: \"0 0 31 2 *\"\n  spec: {containers: [{image: x, command: [\"sleep\", \"60\"]}]}\n";

fn replica(dir: &std::path::Path, url: &str) -> Serve {
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    std::fs::write(dir.join("config.yaml"), CONFIG).unwrap();
    std::fs::write(dir.join("jobs/jobs.yaml"), JOBS).unwrap();
    std::fs::write(dir.join("api-token"), format!("{API_TOKEN}\n")).unwrap();
    let token: PathBuf = dir.join("api-token");
    let args: Vec<&std::ffi::OsStr> = vec![
        "--store".as_ref(),
        url.as_ref(),
        "--api-token-file".as_ref(),
        token.as_os_str(),
        "--lease-ttl".as_ref(),
        "3s".as_ref(),
        "--lease-renew".as_ref(),
        "1s".as_ref(),
        "--lease-retry".as_ref(),
        "500ms".as_ref(),
        "--lease-margin".as_ref(),
        "1s".as_ref(),
    ];
    serve(dir, &args, &[])
}

fn leads(port: u16) -> bool {
    get(port, "/api/v1/leader", &[]).json()["leader"] == true
}

/// Logs in on `port` with the API token: the session cookie and a CSRF
/// token of the forms it renders.
fn login(port: u16) -> (String, String) {
    let origin = format!("http://127.0.0.1:{port}");
    let page = get(port, "/login", &[]);
    let cookie = format!("bosun_csrf={}", page.set_cookie("bosun_csrf").unwrap());
    let a = post_form(
        port,
        "/login",
        &[("Cookie", &cookie), ("Origin", &origin)],
        &[("csrf", &page.csrf()), ("token", API_TOKEN), ("next", "/")],
    );
    assert_eq!(a.status, 303, "{}", a.body);
    let session = format!("bosun_session={}", a.set_cookie("bosun_session").unwrap());
    let page = get(port, "/", &[("Cookie", &session)]);
    assert_eq!(page.status, 200, "{}", page.body);
    (session, page.csrf())
}

#[test]
fn a_run_made_on_a_follower_starts_and_a_login_on_one_replica_aborts_it_through_another() {
    let d = tempfile::tempdir().unwrap();
    let url = Postgres::shared().database();
    let a = replica(&d.path().join("a"), &url);
    let b = replica(&d.path().join("b"), &url);
    let deadline = Instant::now() + Duration::from_secs(20);
    let (leader, follower) = loop {
        match (leads(a.port), leads(b.port)) {
            (true, false) => break (a.port, b.port),
            (false, true) => break (b.port, a.port),
            _ => {}
        }
        assert!(Instant::now() < deadline, "no single leader");
        std::thread::sleep(Duration::from_millis(50));
    };
    // Created on the follower, started by the leader.
    let started = Instant::now();
    let id = trigger(follower, "slow", Some(API_TOKEN));
    let run = wait_state(follower, &id, "pending", Some(API_TOKEN));
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "the leader heard of the run at once, not at a poll: {took:?}"
    );
    assert!(run["cluster"] == "default", "{run}");
    // A session made on the leader, a form rendered by the leader, posted
    // to the follower: the follower takes both, and records the abort for
    // the leader, which stops the run's process.
    let (session, csrf) = login(leader);
    let origin = format!("http://127.0.0.1:{follower}");
    let answer = post_form(
        follower,
        &format!("/runs/{id}/abort"),
        &[
            ("Cookie", &session),
            ("Origin", &origin),
            ("Sec-Fetch-Site", "same-origin"),
        ],
        &[("csrf", &csrf)],
    );
    assert_eq!(answer.status, 303, "{}", answer.body);
    let run = wait_state(leader, &id, "aborted", Some(API_TOKEN));
    assert!(run["completed_at"].is_string(), "{run}");
    drop((a, b));
}
