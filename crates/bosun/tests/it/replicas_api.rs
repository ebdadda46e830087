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
    replica_of(dir, url, JOBS)
}

fn replica_of(dir: &std::path::Path, url: &str, jobs: &str) -> Serve {
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    std::fs::write(dir.join("config.yaml"), CONFIG).unwrap();
    std::fs::write(dir.join("jobs/jobs.yaml"), jobs).unwrap();
    std::fs::write(dir.join("api-token"), format!("{API_TOKEN}\n")).unwrap();
    let token: PathBuf = dir.join("api-token");
    serve(dir, &args(url, Some(&token)), &[])
}

/// A replica's arguments: the store, the API token file if any, and the
/// shortened lease timings.
fn args<'a>(url: &'a str, token: Option<&'a std::path::Path>) -> Vec<&'a std::ffi::OsStr> {
    let mut args: Vec<&std::ffi::OsStr> = vec!["--store".as_ref(), url.as_ref()];
    if let Some(t) = token {
        args.extend(["--api-token-file".as_ref(), t.as_os_str()]);
    }
    args.extend(crate::replicas::LEASE.map(std::ffi::OsStr::new));
    args
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
    let (leader, follower) = roles(a.port, b.port);
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
    // Both replicas' `prowjobs` gauge counts the run where it is now,
    // though each saw only some of its changes committed.
    for port in [leader, follower] {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let metrics = get(port, "/metrics", &[]).body;
            let slow: Vec<&str> = metrics
                .lines()
                .filter(|l| l.starts_with("prowjobs{") && l.contains("job_name=\"slow\""))
                .collect();
            if slow.len() == 1 && slow[0].contains("state=\"aborted\"") && slow[0].ends_with(" 1") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "replica on port {port} counts {slow:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    drop((a, b));
}

/// The leader and the follower among two replicas, once one leads.
fn roles(a: u16, b: u16) -> (u16, u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match (leads(a), leads(b)) {
            (true, false) => return (a, b),
            (false, true) => return (b, a),
            _ => {}
        }
        assert!(Instant::now() < deadline, "no single leader");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A decorated job that talks for a few seconds, then leaves an artifact.
const TALKING_JOBS: &str = r#"
periodics:
- name: talks
  cron: "0 0 31 2 *"
  decorate: true
  decoration_config: {timeout: 5m, grace_period: 2s}
  spec:
    containers:
    - image: x
      command: [sh, -c, 'for i in 1 2 3 4 5 6 7 8; do echo "line $i"; sleep 0.4; done; mkdir -p "$ARTIFACTS/sub"; echo "<x/>" > "$ARTIFACTS/sub/junit.xml"']
"#;

/// The names of a listing of the artifacts API.
fn names(listing: &serde_json::Value) -> Vec<String> {
    listing["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("not a listing: {listing}"))
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e["type"].as_str().unwrap(),
                e["name"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
fn a_runs_log_and_artifacts_are_read_on_every_replica_and_outlive_the_one_that_ran_it() {
    let d = tempfile::tempdir().unwrap();
    let url = Postgres::shared().database();
    let a = replica_of(&d.path().join("a"), &url, TALKING_JOBS);
    let b = replica_of(&d.path().join("b"), &url, TALKING_JOBS);
    let (leader, follower) = roles(a.port, b.port);
    let id = trigger(follower, "talks", Some(API_TOKEN));
    // The follower follows the log while the leader runs the job.
    let follow = {
        let id = id.clone();
        std::thread::spawn(move || get(follower, &format!("/api/v1/runs/{id}/log"), &[]))
    };
    // Live: the follower shows the first lines while the run still runs.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now = get(
            follower,
            &format!("/api/v1/runs/{id}/log?follow=false"),
            &[],
        );
        if now.body.contains("line 2") {
            let run = get(follower, &format!("/api/v1/runs/{id}"), &[]).json();
            assert_eq!(run["state"], "pending", "seen while it runs: {run}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no line of the log on the follower: {}",
            now.body
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let followed = follow.join().unwrap();
    assert_eq!(followed.status, 200);
    let run = wait_state(follower, &id, "success", Some(API_TOKEN));
    assert!(run["completed_at"].is_string(), "{run}");
    let on_leader = get(leader, &format!("/api/v1/runs/{id}/log?follow=false"), &[]).body;
    assert!(
        on_leader.contains("line 1\n") && on_leader.contains("line 8\n"),
        "{on_leader}"
    );
    assert_eq!(
        followed.body, on_leader,
        "the follower followed the whole log"
    );
    // The artifacts: listed and served alike on both.
    let listing = |port: u16, path: &str| {
        get(port, &format!("/api/v1/runs/{id}/artifacts{path}"), &[]).json()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while listing(follower, "")["entries"].is_null() {
        assert!(Instant::now() < deadline, "{}", listing(follower, ""));
        std::thread::sleep(Duration::from_millis(100));
    }
    let top = names(&listing(leader, ""));
    assert!(top.contains(&"file finished.json".to_string()), "{top:?}");
    assert_eq!(names(&listing(follower, "")), top);
    assert_eq!(
        names(&listing(follower, "/artifacts/sub")),
        ["file junit.xml"]
    );
    let junit = get(
        follower,
        &format!("/api/v1/runs/{id}/artifacts/artifacts/sub/junit.xml"),
        &[],
    );
    assert_eq!((junit.status, junit.body.as_str()), (200, "<x/>\n"));
    let page = get(
        follower,
        &format!("/runs/{id}?artifacts=artifacts/sub"),
        &[],
    );
    assert!(page.body.contains("junit.xml"), "{}", page.body);
    // The replica that ran it gone, the other still serves both.
    let (survivor, gone) = if leader == a.port { (b, a) } else { (a, b) };
    drop(gone);
    let after = get(survivor.port, &format!("/api/v1/runs/{id}/log"), &[]);
    assert_eq!(after.body, on_leader);
    let junit = get(
        survivor.port,
        &format!("/api/v1/runs/{id}/artifacts/artifacts/sub/junit.xml"),
        &[],
    );
    assert_eq!(junit.body, "<x/>\n");
    let finished = get(
        survivor.port,
        &format!("/api/v1/runs/{id}/artifacts/finished.json"),
        &[],
    )
    .json();
    assert_eq!(finished["result"], "SUCCESS", "{finished}");
}

const DISPATCH_CONFIG: &str = "dispatcher:\n  relocatable_clusters: [build-a]\n  unit: job\nbuild_clusters:\n  build-a: {kind: local}\n  build-b: {kind: local}\n  build-c: {kind: local}\n";

fn dispatch_jobs() -> String {
    let mut jobs = String::from("periodics:\n");
    for j in ["r1", "r2", "r3", "r4"] {
        jobs.push_str(&format!(
            "- name: {j}\n  cron: \"0 0 31 2 *\"\n  cluster: build-a\n  spec: {{containers: [{{image: x, command: [\"true\"]}}]}}\n"
        ));
    }
    jobs
}

/// What `port` answers of `path` once it answers 200, as JSON.
fn json_of(port: u16, path: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let a = get(port, path, &[]);
        if a.status == 200 {
            return a.json();
        }
        assert!(Instant::now() < deadline, "{path}: {} {}", a.status, a.body);
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_follower_answers_dispatcher_lookups_by_the_leaders_plan_and_takes_overrides() {
    let d = tempfile::tempdir().unwrap();
    let url = Postgres::shared().database();
    let start = |name: &str| {
        let dir = d.path().join(name);
        std::fs::create_dir_all(dir.join("jobs")).unwrap();
        std::fs::write(dir.join("config.yaml"), DISPATCH_CONFIG).unwrap();
        std::fs::write(dir.join("jobs/jobs.yaml"), dispatch_jobs()).unwrap();
        std::fs::write(dir.join("api-token"), format!("{API_TOKEN}\n")).unwrap();
        let token = dir.join("api-token");
        serve(&dir, &args(&url, Some(&token)), &[])
    };
    let a = start("a");
    let b = start("b");
    let (leader, follower) = roles(a.port, b.port);
    let plan = json_of(leader, "/api/v1/dispatch/plan");
    // The follower serves the plan the leader made (it plans nothing).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let theirs = json_of(follower, "/api/v1/dispatch/plan");
        if theirs["assignments"] == plan["assignments"]
            && theirs["generation"] == plan["generation"]
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the follower's plan: {theirs}, the leader's: {plan}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let r1 = plan["assignments"]["r1"].as_str().unwrap().to_string();
    let answer = crate::web_support::call(
        follower,
        "POST",
        "/api/v1/dispatch",
        &[("Content-Type", "application/json")],
        Some(r#"{"job": "r1"}"#),
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.json()["cluster"], r1.as_str());
    // An override made through the follower moves r1 on the leader too.
    let target = ["build-a", "build-b", "build-c"]
        .into_iter()
        .find(|c| *c != r1)
        .unwrap();
    let bearer = format!("Bearer {API_TOKEN}");
    let created = crate::web_support::call(
        follower,
        "POST",
        "/api/v1/dispatch/overrides",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", &bearer),
        ],
        Some(&format!(
            r#"{{"job": "r1", "cluster": "{target}", "ttl": "1h", "reason": "replicas", "actor": "carol"}}"#
        )),
    );
    assert_eq!(created.status, 201, "{}", created.body);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let explained = json_of(leader, "/api/v1/dispatch/explain?job=r1");
        if explained["cluster"] == target {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the leader never took the override: {explained}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    drop((a, b));
}

/// The `bosun.dev/leader` label of pod `name`.
fn leader_label(plane: &bosun_kubetest::ControlPlane, ns: &str, name: &str) -> Option<String> {
    plane
        .kubelet()
        .pod(ns, name)?
        .metadata
        .labels?
        .get("bosun.dev/leader")
        .cloned()
}

#[test]
fn each_replicas_pod_is_labelled_with_its_leadership() {
    use k8s_openapi::api::core::v1::Pod;
    let plane = bosun_kubetest::ControlPlane::shared();
    let tenant = plane.tenant("replica-labels", "self");
    let ns = tenant.namespace.clone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for name in ["bosun-a", "bosun-b"] {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": ns},
            "spec": {"containers": [{"name": "bosun", "image": "bosun"}]}
        }))
        .unwrap();
        let api: kube::Api<Pod> = kube::Api::namespaced(plane.admin(), &ns);
        rt.block_on(api.create(&kube::api::PostParams::default(), &pod))
            .unwrap();
    }
    let d = tempfile::tempdir().unwrap();
    let url = Postgres::shared().database();
    let kubeconfig = tenant.kubeconfig.to_str().unwrap().to_string();
    let start = |name: &str| {
        let dir = d.path().join(name);
        std::fs::create_dir_all(dir.join("jobs")).unwrap();
        std::fs::write(dir.join("config.yaml"), CONFIG).unwrap();
        std::fs::write(dir.join("jobs/jobs.yaml"), JOBS).unwrap();
        serve(
            &dir,
            &args(&url, None),
            &[
                ("POD_NAME", &format!("bosun-{name}")),
                ("POD_NAMESPACE", &ns),
                ("KUBECONFIG", &kubeconfig),
            ],
        )
    };
    let a = start("a");
    let b = start("b");
    let wait_labels = |want_a: &str, want_b: &str| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let got = (
                leader_label(plane, &ns, "bosun-a"),
                leader_label(plane, &ns, "bosun-b"),
            );
            if got.0.as_deref() == Some(want_a) && got.1.as_deref() == Some(want_b) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "labels {got:?}, not ({want_a}, {want_b})"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let a_leads = roles(a.port, b.port).0 == a.port;
    let (yes, no) = ("true", "false");
    if a_leads {
        wait_labels(yes, no);
    } else {
        wait_labels(no, yes);
    }
    // A graceful stop of the leader: its pod says false, the other's true.
    let (mut leader, follower) = if a_leads { (a, b) } else { (b, a) };
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&leader.child),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let _ = leader.child.wait();
    if a_leads {
        wait_labels(no, yes);
    } else {
        wait_labels(yes, no);
    }
    drop((leader, follower));
}
