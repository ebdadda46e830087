//! The fake API server, spawned as a process, driven through kube-rs over TLS.
//!
//! kube is built with `rustls-tls` + `ring`; rustls then picks the *ring* provider
//! from its crate features, so no provider needs installing.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::time::Duration;

use bosun_fakekube::{ContainerOutcome, DownMode, FakeCluster, PhaseUpdate};
use futures_util::{AsyncBufReadExt, StreamExt, TryStreamExt};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{
    Api, DeleteParams, ListParams, LogParams, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::watcher;
use kube::{Client, Config};

const NS: &str = "default";
const WAIT: Duration = Duration::from_secs(10);

/// A running fake cluster and its directory (removed after the process is killed).
struct Env {
    fake: FakeCluster,
    _dir: tempfile::TempDir,
}

fn start() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeCluster::start_with_binary(
        Path::new(env!("CARGO_BIN_EXE_bosun-fakekube")),
        dir.path(),
        "fake",
    );
    Env { fake, _dir: dir }
}

async fn config(fake: &FakeCluster) -> Config {
    let kubeconfig = Kubeconfig::read_from(fake.kubeconfig_path()).unwrap();
    Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap()
}

async fn client(fake: &FakeCluster) -> Client {
    Client::try_from(config(fake).await).unwrap()
}

async fn pods(fake: &FakeCluster) -> Api<Pod> {
    Api::namespaced(client(fake).await, NS)
}

fn pod(name: &str, labels: &[(&str, &str)]) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "test".to_string(),
                image: Some("busybox".to_string()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, f)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

fn api_status(e: kube::Error) -> Box<kube::core::Status> {
    match e {
        kube::Error::Api(status) => status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

type Watch = futures_util::stream::BoxStream<'static, Result<watcher::Event<Pod>, watcher::Error>>;

/// The next event of a watcher, skipping nothing.
async fn next(stream: &mut Watch) -> Result<watcher::Event<Pod>, watcher::Error> {
    within("a watcher event", stream.next())
        .await
        .expect("the watcher stream ended")
}

/// Reads the watcher's initial list up to `InitDone`; returns the listed pods.
async fn initial_list(stream: &mut Watch) -> Vec<Pod> {
    let mut listed = Vec::new();
    loop {
        match next(stream).await.unwrap() {
            watcher::Event::Init => {}
            watcher::Event::InitApply(p) => listed.push(p),
            watcher::Event::InitDone => return listed,
            other => panic!("unexpected event during the initial list: {other:?}"),
        }
    }
}

async fn next_apply(stream: &mut Watch) -> Pod {
    match next(stream).await.unwrap() {
        watcher::Event::Apply(p) => p,
        other => panic!("expected Apply, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_through_kube() {
    let env = start();
    let info = client(&env.fake).await.apiserver_version().await.unwrap();
    assert_eq!((info.major.as_str(), info.minor.as_str()), ("1", "33"));
    assert!(info.git_version.starts_with("v1.33"));
    let requests = env.fake.requests();
    assert_eq!(requests.last().unwrap().path, "/version");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_get_list_and_conflict() {
    let env = start();
    let api = pods(&env.fake).await;
    let created = api
        .create(
            &PostParams::default(),
            &pod("a", &[("app", "bosun"), ("job", "a")]),
        )
        .await
        .unwrap();
    assert_eq!(phase(&created), "Pending");
    assert!(created.metadata.uid.is_some());
    assert!(created.metadata.creation_timestamp.is_some());
    let rv_a: u64 = created
        .metadata
        .resource_version
        .clone()
        .unwrap()
        .parse()
        .unwrap();
    let other = api
        .create(&PostParams::default(), &pod("b", &[("app", "other")]))
        .await
        .unwrap();
    let rv_b: u64 = other.metadata.resource_version.unwrap().parse().unwrap();
    assert!(
        rv_b > rv_a,
        "resourceVersion must increase: {rv_a} then {rv_b}"
    );

    let got = api.get("a").await.unwrap();
    assert_eq!(got.metadata.uid, created.metadata.uid);

    let names = |list: kube::core::ObjectList<Pod>| -> Vec<String> {
        list.items
            .into_iter()
            .map(|p| p.metadata.name.unwrap())
            .collect()
    };
    let all = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        all.metadata.resource_version.as_deref(),
        Some(rv_b.to_string().as_str())
    );
    assert_eq!(names(all), ["a", "b"]);
    assert_eq!(
        names(
            api.list(&ListParams::default().labels("app=bosun"))
                .await
                .unwrap()
        ),
        ["a"]
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().labels("job"))
                .await
                .unwrap()
        ),
        ["a"]
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().labels("app!=bosun"))
                .await
                .unwrap()
        ),
        ["b"]
    );
    let other_ns: Api<Pod> = Api::namespaced(client(&env.fake).await, "elsewhere");
    assert!(other_ns
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .is_empty());

    let status = api_status(
        api.create(&PostParams::default(), &pod("a", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!(status.code, 409);
    assert!(status.is_already_exists());
    let status = api_status(api.get("missing").await.unwrap_err());
    assert_eq!(status.code, 404);
    assert!(status.is_not_found());

    // A merge patch changes labels and bumps the resourceVersion; status is kept.
    let patch = serde_json::json!({"metadata": {"labels": {"extra": "yes"}}, "status": {"phase": "Running"}});
    let patched = api
        .patch("a", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(
        patched
            .metadata
            .labels
            .as_ref()
            .unwrap()
            .get("extra")
            .map(String::as_str),
        Some("yes")
    );
    assert_eq!(phase(&patched), "Pending");
    let rv_patched: u64 = patched.metadata.resource_version.unwrap().parse().unwrap();
    assert!(rv_patched > rv_b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_follows_phases_with_bookmarks() {
    let env = start();
    let api = pods(&env.fake).await;
    api.create(&PostParams::default(), &pod("w", &[("app", "w")]))
        .await
        .unwrap();
    api.create(&PostParams::default(), &pod("x", &[("app", "x")]))
        .await
        .unwrap();

    let mut stream: Watch =
        watcher(api.clone(), watcher::Config::default().labels("app=w")).boxed();
    let listed = initial_list(&mut stream).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(phase(&listed[0]), "Pending");

    env.fake.run_pod(NS, "w");
    let running = next_apply(&mut stream).await;
    assert_eq!(running.metadata.name.as_deref(), Some("w"));
    assert_eq!(phase(&running), "Running");
    let state = running
        .status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap()[0]
        .state
        .clone()
        .unwrap();
    assert!(state.running.is_some());

    // A change to a pod outside the selector is not seen; the next event is w's.
    env.fake.run_pod(NS, "x");
    env.fake.set_phase(
        NS,
        "w",
        &PhaseUpdate {
            containers: Some(vec![ContainerOutcome {
                name: "test".to_string(),
                exit_code: Some(0),
                reason: None,
            }]),
            ..PhaseUpdate::new("Succeeded")
        },
    );
    let done = next_apply(&mut stream).await;
    assert_eq!(done.metadata.name.as_deref(), Some("w"));
    assert_eq!(phase(&done), "Succeeded");
    let terminated = done
        .status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap()[0]
        .state
        .as_ref()
        .unwrap()
        .terminated
        .clone()
        .unwrap();
    assert_eq!(
        (terminated.exit_code, terminated.reason.as_deref()),
        (0, Some("Completed"))
    );

    // The watcher asked for bookmarks...
    assert!(env
        .fake
        .requests()
        .iter()
        .any(|r| r.query.contains("watch=true") && r.query.contains("allowWatchBookmarks=true")));
    // ...and a raw watch gets them, carrying the current resourceVersion.
    let current = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut raw = api
        .watch(&WatchParams::default(), &current)
        .await
        .unwrap()
        .boxed();
    match within("a bookmark", raw.try_next()).await.unwrap() {
        Some(WatchEvent::Bookmark(b)) => assert_eq!(b.metadata.resource_version, current),
        other => panic!("expected a bookmark, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gone_makes_the_watcher_relist() {
    let env = start();
    let api = pods(&env.fake).await;
    let created = api
        .create(&PostParams::default(), &pod("g", &[]))
        .await
        .unwrap();
    let old_rv = created.metadata.resource_version.unwrap();
    let mut stream: Watch = watcher(api.clone(), watcher::Config::default()).boxed();
    assert_eq!(initial_list(&mut stream).await.len(), 1);
    let lists_before = env
        .fake
        .requests()
        .iter()
        .filter(|r| !r.query.contains("watch="))
        .count();

    env.fake.gone();
    let status = match next(&mut stream).await {
        Err(watcher::Error::WatchError(status)) => status,
        other => panic!("expected a 410 watch error, got {other:?}"),
    };
    assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
    // The watcher re-lists and keeps working.
    assert_eq!(initial_list(&mut stream).await.len(), 1);
    let lists_after = env
        .fake
        .requests()
        .iter()
        .filter(|r| !r.query.contains("watch="))
        .count();
    assert!(
        lists_after > lists_before,
        "the watcher must re-list after 410"
    );
    env.fake.run_pod(NS, "g");
    assert_eq!(phase(&next_apply(&mut stream).await), "Running");

    // A watch from a resourceVersion before the truncation gets 410 at once.
    let mut raw = api
        .watch(&WatchParams::default(), &old_rv)
        .await
        .unwrap()
        .boxed();
    match within("a 410 event", raw.try_next()).await.unwrap() {
        Some(WatchEvent::Error(e)) => assert_eq!(e.code, 410),
        other => panic!("expected a 410 error event, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_follow_streams_until_termination() {
    let env = start();
    let api = pods(&env.fake).await;
    api.create(&PostParams::default(), &pod("l", &[]))
        .await
        .unwrap();

    // Like a real API server: no log before the container starts.
    let status = api_status(api.logs("l", &LogParams::default()).await.unwrap_err());
    assert_eq!(status.code, 400);
    assert!(
        status.message.contains("waiting to start"),
        "{}",
        status.message
    );

    env.fake.run_pod(NS, "l");
    env.fake.append_log(NS, "l", "one\n");
    let follow = LogParams {
        follow: true,
        ..Default::default()
    };
    let mut lines = api.log_stream("l", &follow).await.unwrap().lines();
    assert_eq!(
        within("line one", lines.try_next())
            .await
            .unwrap()
            .as_deref(),
        Some("one")
    );
    env.fake.append_log(NS, "l", "two\n");
    assert_eq!(
        within("line two", lines.try_next())
            .await
            .unwrap()
            .as_deref(),
        Some("two")
    );
    env.fake.append_log(NS, "l", "three\n");
    env.fake.succeed_pod(NS, "l");
    assert_eq!(
        within("line three", lines.try_next())
            .await
            .unwrap()
            .as_deref(),
        Some("three")
    );
    assert_eq!(
        within("the end of the log", lines.try_next())
            .await
            .unwrap(),
        None
    );

    // Without follow: the whole log so far.
    assert_eq!(
        api.logs("l", &LogParams::default()).await.unwrap(),
        "one\ntwo\nthree\n"
    );
    let tail = LogParams {
        tail_lines: Some(1),
        ..Default::default()
    };
    assert_eq!(api.logs("l", &tail).await.unwrap(), "three\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_is_seen_by_watchers_and_recorded() {
    let env = start();
    let api = pods(&env.fake).await;
    api.create(&PostParams::default(), &pod("d", &[]))
        .await
        .unwrap();
    api.create(&PostParams::default(), &pod("lost", &[]))
        .await
        .unwrap();
    let mut stream: Watch = watcher(api.clone(), watcher::Config::default()).boxed();
    assert_eq!(initial_list(&mut stream).await.len(), 2);

    let deleted = api
        .delete("d", &DeleteParams::default().grace_period(30))
        .await
        .unwrap();
    assert!(deleted.is_left(), "the deleted pod is returned");
    match next(&mut stream).await.unwrap() {
        watcher::Event::Delete(p) => assert_eq!(p.metadata.name.as_deref(), Some("d")),
        other => panic!("expected Delete, got {other:?}"),
    }
    assert!(api_status(api.get("d").await.unwrap_err()).is_not_found());
    assert_eq!(
        api_status(api.delete("d", &DeleteParams::default()).await.unwrap_err()).code,
        404
    );

    // A pod that vanishes (node lost) is a DELETED event too.
    env.fake.delete_pod(NS, "lost");
    match next(&mut stream).await.unwrap() {
        watcher::Event::Delete(p) => assert_eq!(p.metadata.name.as_deref(), Some("lost")),
        other => panic!("expected Delete, got {other:?}"),
    }
    let recorded: Vec<(String, String, Option<i64>)> = env
        .fake
        .deleted()
        .into_iter()
        .map(|d| (d.name, d.source, d.grace_period_seconds))
        .collect();
    assert_eq!(
        recorded,
        [
            ("d".to_string(), "api".to_string(), Some(30)),
            ("lost".to_string(), "control".to_string(), None),
        ]
    );
    assert!(env.fake.pods().is_empty());
}

async fn allowed(client: &Client, verb: &str, resource: &str, subresource: Option<&str>) -> bool {
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(NS.to_string()),
                verb: Some(verb.to_string()),
                resource: Some(resource.to_string()),
                subresource: subresource.map(str::to_string),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = api.create(&PostParams::default(), &review).await.unwrap();
    answer.status.expect("the review has a status").allowed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_subject_access_reviews_follow_the_deny_set() {
    let env = start();
    let client = client(&env.fake).await;
    assert!(allowed(&client, "create", "pods", None).await);
    assert!(allowed(&client, "get", "pods", Some("log")).await);

    env.fake.deny(&["create", "delete"], "pods", None);
    env.fake.deny(&["get"], "pods", Some("log"));
    assert!(!allowed(&client, "create", "pods", None).await);
    assert!(!allowed(&client, "delete", "pods", None).await);
    assert!(allowed(&client, "list", "pods", None).await);
    assert!(!allowed(&client, "get", "pods", Some("log")).await);
    assert!(allowed(&client, "get", "pods", None).await);

    env.fake.clear_denies();
    assert!(allowed(&client, "create", "pods", None).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_cluster_times_out_while_another_answers() {
    let hung = start();
    let healthy = start();
    let hung_client = client(&hung.fake).await;
    let healthy_client = client(&healthy.fake).await;
    // Open the connection first so the hang hits a request, not the handshake.
    hung_client.apiserver_version().await.unwrap();

    hung.fake.set_hang(true);
    let started = std::time::Instant::now();
    let result =
        tokio::time::timeout(Duration::from_secs(1), hung_client.apiserver_version()).await;
    assert!(
        result.is_err(),
        "a hung API server must not answer: {result:?}"
    );
    assert!(started.elapsed() >= Duration::from_secs(1));

    let started = std::time::Instant::now();
    let info = tokio::time::timeout(Duration::from_secs(1), healthy_client.apiserver_version())
        .await
        .expect("the other cluster answers at once")
        .unwrap();
    assert_eq!(info.major, "1");
    assert!(started.elapsed() < Duration::from_secs(1));

    // kube's own read timeout fires too.
    let mut config = config(&hung.fake).await;
    config.read_timeout = Some(Duration::from_secs(1));
    let short = Client::try_from(config).unwrap();
    let result = tokio::time::timeout(Duration::from_secs(5), short.apiserver_version())
        .await
        .expect("the client's read timeout fires before 5 s");
    assert!(result.is_err());

    hung.fake.set_hang(false);
    assert_eq!(hung_client.apiserver_version().await.unwrap().major, "1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn down_refuses_or_answers_503() {
    let env = start();
    let client = client(&env.fake).await;
    client.apiserver_version().await.unwrap();

    // Refuse (default): transport errors, fast, not retried by kube.
    env.fake.set_down(true);
    let error = within("a refused request", client.apiserver_version())
        .await
        .unwrap_err();
    assert!(
        !matches!(error, kube::Error::Api(_)),
        "expected a transport error, got {error:?}"
    );
    env.fake.set_down(false);
    client.apiserver_version().await.unwrap();

    // 503: a Status (kube's default retry is off here, else it would retry).
    env.fake.set_down_mode(true, DownMode::Unavailable);
    let mut no_retry = config(&env.fake).await;
    no_retry.default_retry = false;
    let no_retry = Client::try_from(no_retry).unwrap();
    let status = api_status(no_retry.apiserver_version().await.unwrap_err());
    assert_eq!(
        (status.code, status.reason.as_str()),
        (503, "ServiceUnavailable")
    );

    // With its default retry, kube rides out a short 503 outage.
    let retrying = tokio::spawn(async move { client.apiserver_version().await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    env.fake.set_down(false);
    let info = within("the retried request", retrying)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(info.major, "1");
    let versions = env
        .fake
        .requests()
        .iter()
        .filter(|r| r.path == "/version")
        .count();
    assert!(
        versions >= 5,
        "kube retried the 503s ({versions} /version requests)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_token_gets_401() {
    let env = start();
    let mut config = config(&env.fake).await;
    assert!(
        config.auth_info.token.is_some(),
        "the kubeconfig has a token"
    );
    config.auth_info.token = Some("wrong".to_string().into());
    let client = Client::try_from(config).unwrap();
    let status = api_status(client.apiserver_version().await.unwrap_err());
    assert_eq!((status.code, status.reason.as_str()), (401, "Unauthorized"));
    let api: Api<Pod> = Api::namespaced(client, NS);
    assert_eq!(
        api_status(api.list(&ListParams::default()).await.unwrap_err()).code,
        401
    );
    // The refused requests are logged.
    assert!(env
        .fake
        .requests()
        .iter()
        .any(|r| r.path == "/api/v1/namespaces/default/pods"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_paths_are_404_status() {
    let env = start();
    let client = client(&env.fake).await;
    let request = http::Request::get("/apis/batch/v1/jobs")
        .body(Vec::new())
        .unwrap();
    let status = api_status(
        client
            .request::<serde_json::Value>(request)
            .await
            .unwrap_err(),
    );
    assert_eq!((status.code, status.reason.as_str()), (404, "NotFound"));

    // Unschedulable pods keep Pending with PodScheduled=False.
    let api: Api<Pod> = Api::namespaced(client, NS);
    api.create(&PostParams::default(), &pod("u", &[]))
        .await
        .unwrap();
    env.fake.unschedulable(NS, "u", None);
    let u = api.get("u").await.unwrap();
    assert_eq!(phase(&u), "Pending");
    let conditions = u.status.unwrap().conditions.unwrap();
    let scheduled = conditions
        .iter()
        .find(|c| c.type_ == "PodScheduled")
        .unwrap();
    assert_eq!(
        (scheduled.status.as_str(), scheduled.reason.as_deref()),
        ("False", Some("Unschedulable"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_leaving_the_selector_is_deleted_for_the_watch() {
    let env = start();
    let api = pods(&env.fake).await;
    api.create(&PostParams::default(), &pod("s", &[("app", "s")]))
        .await
        .unwrap();
    let mut stream: Watch =
        watcher(api.clone(), watcher::Config::default().labels("app=s")).boxed();
    assert_eq!(initial_list(&mut stream).await.len(), 1);
    let patch = serde_json::json!({"metadata": {"labels": {"app": "other"}}});
    api.patch("s", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    match next(&mut stream).await.unwrap() {
        watcher::Event::Delete(p) => assert_eq!(p.metadata.name.as_deref(), Some("s")),
        other => panic!("expected Delete, got {other:?}"),
    }
    let patch = serde_json::json!({"metadata": {"labels": {"app": "s"}}});
    api.patch("s", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(
        next_apply(&mut stream).await.metadata.name.as_deref(),
        Some("s")
    );
    // The pod itself was never deleted.
    assert!(env.fake.deleted().is_empty());
}
