//! The dashboard in a real headless Chromium (Debian's `chromium`, driven
//! over WebDriver by Debian's `chromedriver`), against a real `bosun serve`
//! with an API token: every page loads; log in; trigger a run and watch its
//! row turn green without a reload; abort a slow run; pause a periodic; read
//! the dispatcher's chart and ask why a job is on its cluster. A screenshot
//! of each page is kept in `target/web-screenshots/`.
//!
//! Needs `chromium` and `chromedriver` on `PATH` (`apt-get install -y
//! chromium chromium-driver`; tools/test installs them): without them it
//! fails, saying so.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};

use crate::web_support::{get, start, trigger, wait_plan, wait_state, API_TOKEN};

/// chromedriver, killed when dropped.
struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The browser: `chromium` on `PATH`, as tools/test checks for it
/// (Debian's package puts it in `/usr/bin`).
fn chromium() -> PathBuf {
    crate::common::needs("chromium", "chromium");
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("chromium"))
        .find(|p| p.is_file())
        .expect("found on PATH by `needs`")
}

/// Starts chromedriver on a free loopback port; its URL.
fn chromedriver() -> (Driver, String) {
    crate::common::needs("chromedriver", "chromium-driver");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("chromedriver could not start ({e}): install it with `apt-get install -y chromium-driver`, or run the tests with tools/test")
        });
    let driver = Driver(child);
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "chromedriver did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    (driver, format!("http://127.0.0.1:{port}"))
}

/// Where the screenshots go: `target/web-screenshots/`.
fn screenshots() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target")));
    let dir = target.join("web-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn shoot(c: &Client, name: &str) {
    let png = c.screenshot().await.expect("a screenshot");
    assert!(png.starts_with(b"\x89PNG"), "{name}: not a PNG");
    std::fs::write(screenshots().join(format!("{name}.png")), png).unwrap();
}

async fn js(c: &Client, script: &str) -> Value {
    c.execute(script, vec![]).await.expect(script)
}

/// Waits until `script` (a function body returning a value) returns
/// something other than `null` or `false`; that value.
async fn wait_js(c: &Client, script: &str, what: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v = js(c, script).await;
        if !v.is_null() && v != Value::Bool(false) {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: never");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Clicks what `css` finds in a live section (`data-live`), which each
/// fragment the server sends replaces (every second while a run runs): an
/// element replaced between finding and clicking it is found again.
async fn click_live(c: &Client, css: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let element = c
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("{css}: {e}"));
        match element.click().await {
            Ok(()) => return,
            Err(e) if e.is_stale_element_reference() && Instant::now() < deadline => {}
            Err(e) => panic!("{css}: {e}"),
        }
    }
}

async fn text_of(c: &Client, css: &str) -> String {
    c.find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .text()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_in_chromium() {
    let d = tempfile::tempdir().unwrap();
    let daemon = start(d.path(), true, false);
    let port = daemon.port;
    let base = format!("http://127.0.0.1:{port}");
    let plan = tokio::task::spawn_blocking(move || wait_plan(port))
        .await
        .unwrap();
    let (_driver, url) = chromedriver();
    let profile = tempfile::tempdir().unwrap();
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": chromium(),
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync",
                "--window-size=1400,1000",
                format!("--user-data-dir={}", profile.path().display()),
            ],
        }),
    );
    let c = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&url)
        .await
        .expect("a Chromium session");

    // Every page loads (no token: reads are public), with its heading.
    for (path, heading, shot) in [
        ("/", "Runs", "runs-anonymous"),
        ("/periodics", "Periodics", "periodics-anonymous"),
        ("/clusters", "Clusters", "clusters"),
        ("/dispatcher", "Dispatcher", "dispatcher-anonymous"),
        ("/config", "Config", "config"),
        ("/login", "Log in", "login"),
    ] {
        c.goto(&format!("{base}{path}")).await.unwrap();
        assert_eq!(text_of(&c, "h1").await, heading, "{path}");
        shoot(&c, shot).await;
    }
    // Not logged in: no action is offered.
    c.goto(&format!("{base}/")).await.unwrap();
    assert!(c.find(Locator::Css("#trigger")).await.is_err());

    // Log in with the API token, through the form.
    c.find(Locator::Css("#login-link"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    c.find(Locator::Css("#token"))
        .await
        .unwrap()
        .send_keys(API_TOKEN)
        .await
        .unwrap();
    c.find(Locator::Css("#login-submit"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_js(
        &c,
        "return location.pathname === '/' && !!document.querySelector('#trigger');",
        "back on the runs page, logged in",
    )
    .await;
    assert_eq!(text_of(&c, ".who .role").await, "operator");
    // The session cookie is out of the page's scripts' reach.
    let cookies = js(&c, "return document.cookie;").await;
    assert!(
        !cookies.as_str().unwrap().contains("bosun_session"),
        "{cookies}"
    );

    // Trigger a run from the form; watch its row turn green, live.
    c.find(Locator::Css("#trigger-job"))
        .await
        .unwrap()
        .send_keys("greenlight")
        .await
        .unwrap();
    c.find(Locator::Css("#trigger"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let path = wait_js(
        &c,
        "return location.pathname.startsWith('/runs/') && location.pathname;",
        "the run's page",
    )
    .await;
    let id = path
        .as_str()
        .unwrap()
        .trim_start_matches("/runs/")
        .to_string();
    shoot(&c, "run-running").await;
    c.goto(&format!("{base}/")).await.unwrap();
    js(&c, "window.__noReload = 'still here'; return true;").await;
    let row = format!("document.querySelector('tr[data-run=\"{id}\"]')");
    let first = js(
        &c,
        &format!("return {row} && {row}.getAttribute('data-state');"),
    )
    .await;
    assert!(
        ["scheduling", "triggered", "pending"].contains(&first.as_str().unwrap_or("")),
        "the row before the run ends: {first}"
    );
    shoot(&c, "runs-live-before").await;
    wait_js(
        &c,
        &format!("var r = {row}; return !!r && r.getAttribute('data-state') === 'success';"),
        "the row turns to success",
    )
    .await;
    assert_eq!(
        js(&c, "return window.__noReload || null;").await,
        "still here",
        "the page was not reloaded"
    );
    let colour = js(
        &c,
        &format!("return getComputedStyle({row}.querySelector('.badge')).backgroundColor;"),
    )
    .await;
    assert_eq!(colour, "rgb(30, 142, 62)", "green");
    shoot(&c, "runs-live-green").await;

    // The run's page: its log, then the ended run.
    c.goto(&format!("{base}/runs/{id}")).await.unwrap();
    assert!(text_of(&c, "#log").await.contains("done"));
    shoot(&c, "run").await;

    // Abort a slow run from its page.
    let slow = tokio::task::spawn_blocking(move || {
        let id = trigger(port, "slow", Some(API_TOKEN));
        wait_state(port, &id, "pending", None);
        id
    })
    .await
    .unwrap();
    c.goto(&format!("{base}/runs/{slow}")).await.unwrap();
    // Read in one script: the live section may be replaced at any time.
    assert_eq!(
        js(
            &c,
            "var s = document.querySelector('#run-state'); return s && s.getAttribute('data-state');"
        )
        .await,
        "pending"
    );
    click_live(&c, "#abort").await;
    wait_js(
        &c,
        "var s = document.querySelector('#run-state'); return !!s && s.getAttribute('data-state') === 'aborted';",
        "the run shows aborted",
    )
    .await;
    shoot(&c, "run-aborted").await;
    let run = tokio::task::spawn_blocking(move || wait_state(port, &slow, "aborted", None))
        .await
        .unwrap();
    assert_eq!(run["state"], "aborted");

    // Pause a periodic.
    c.goto(&format!("{base}/periodics")).await.unwrap();
    let row = "tr[data-periodic=\"nightly-paris\"]";
    c.find(Locator::Css(&format!("{row} button.pause")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_js(
        &c,
        &format!("var r = document.querySelector('{row}'); return !!r && r.getAttribute('data-paused') === 'true' && !!r.querySelector('button.resume');"),
        "the periodic shows paused",
    )
    .await;
    shoot(&c, "periodics").await;
    let periodics = tokio::task::spawn_blocking(move || get(port, "/api/v1/periodics", &[]).json())
        .await
        .unwrap();
    let paused: Vec<&str> = periodics["periodics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["paused"] == true)
        .map(|p| p["identity"].as_str().unwrap())
        .collect();
    assert_eq!(paused, ["nightly-paris"]);

    // The dispatcher's chart: one row per cluster, load and target as the
    // plan says, bars drawn in proportion.
    c.goto(&format!("{base}/dispatcher")).await.unwrap();
    let chart = js(
        &c,
        "return Array.from(document.querySelectorAll('#plan-chart g.row')).map(function (g) {
           return {name: g.getAttribute('data-name'), load: parseFloat(g.getAttribute('data-value')),
                   target: parseFloat(g.getAttribute('data-target')),
                   width: g.querySelector('rect.bar').getBBox().width};
         });",
    )
    .await;
    let chart = chart.as_array().unwrap();
    let clusters = plan["clusters"].as_array().unwrap();
    assert_eq!(chart.len(), clusters.len(), "{chart:?}");
    for (row, c) in chart.iter().zip(clusters) {
        assert_eq!(row["name"], c["name"]);
        assert!((row["load"].as_f64().unwrap() - c["load"].as_f64().unwrap()).abs() < 1e-9);
        assert!((row["target"].as_f64().unwrap() - c["target"].as_f64().unwrap()).abs() < 1e-9);
    }
    // The drawn lengths are in proportion to the loads.
    let (a, b) = chart
        .iter()
        .filter(|r| r["load"].as_f64().unwrap() > 0.0)
        .fold((None, None), |(a, b), r| {
            if a.is_none() {
                (Some(r), b)
            } else {
                (a, b.or(Some(r)))
            }
        });
    if let (Some(a), Some(b)) = (a, b) {
        let ratio = |r: &Value, k: &str| r[k].as_f64().unwrap();
        let drawn = ratio(a, "width") / ratio(b, "width");
        let meant = ratio(a, "load") / ratio(b, "load");
        assert!(
            (drawn - meant).abs() < 0.02 * meant.max(1.0),
            "{drawn} vs {meant}"
        );
    }
    // Why is a job on its cluster?
    c.find(Locator::Css("#explain-job"))
        .await
        .unwrap()
        .send_keys("quick")
        .await
        .unwrap();
    c.find(Locator::Css("#explain"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_js(
        &c,
        "return !!document.querySelector('#explanation');",
        "the explanation",
    )
    .await;
    assert_eq!(
        text_of(&c, "#explanation strong.cluster").await,
        plan["assignments"]["quick"].as_str().unwrap()
    );
    shoot(&c, "dispatcher").await;

    // Logged in, the other pages too.
    for (path, shot) in [
        ("/clusters", "clusters-operator"),
        ("/config", "config-operator"),
    ] {
        c.goto(&format!("{base}{path}")).await.unwrap();
        shoot(&c, shot).await;
    }
    c.close().await.unwrap();
}
