//! The floor under `run_bench`'s POSTs (`BOSUN_BENCH_INSERTS_ONLY=1`): the
//! same client (8 threads, a keep-alive connection each, one request in
//! flight on each) against `bosun serve` and against two servers that do
//! less, in turns on the same machine:
//!
//! - `sqlite`: axum on tokio (as bosun's API), each POST's run inserted by a
//!   writer thread that takes the requests waiting in batches (one
//!   transaction and one fsync a batch; SQLite in WAL with
//!   `synchronous = FULL`, as bosun's store), then answered with the run's
//!   JSON: about the least a durable POST costs with these parts;
//! - `http`: the same server answering each POST with a run's JSON at once,
//!   stored nowhere: HTTP on loopback alone.
//!
//! `post_floor BOSUN_BINARY [N] [ROUNDS]` (default 10000 POSTs, 3 rounds)
//! prints each round's times and server CPU, and the medians of bosun's
//! time over each floor's, taken round by round. `BOSUN_FLOOR_SYNC=NORMAL`
//! commits the `sqlite` floor's batches without their fsync (not durable:
//! it shows what the fsyncs cost); `TOKIO_WORKER_THREADS` applies to bosun
//! and the floors alike.

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "common/lean.rs"]
mod lean;

#[path = "common/proc.rs"]
mod proc;

// As `bosun serve`.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A run as the floor servers answer it: the fields of bosun's answer, about
/// as many bytes.
#[derive(serde::Serialize)]
struct Run {
    id: String,
    build_id: String,
    job: String,
    job_type: &'static str,
    periodic: String,
    configured_cluster: &'static str,
    cluster: Option<String>,
    refs: Option<String>,
    extra_refs: Vec<String>,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    spec_hash: &'static str,
    scheduled_at: Option<String>,
    attempt: u32,
    pod_revival_count: u32,
    created_at: String,
    pending_at: Option<String>,
    completed_at: Option<String>,
    state: &'static str,
    description: &'static str,
    url: Option<String>,
}

#[derive(serde::Deserialize)]
struct NewRun {
    job: String,
}

type Insert = (Run, tokio::sync::oneshot::Sender<Run>);

mod server {
    use super::*;
    use axum::extract::State;
    use axum::http::StatusCode;
    use axum::routing::{get, post};
    use axum::Json;

    fn run(job: String, build_id: u64) -> Run {
        let labels: BTreeMap<String, String> = [
            ("created-by-prow", "true"),
            ("prow.k8s.io/job", job.as_str()),
            ("prow.k8s.io/type", "periodic"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        Run {
            id: uuid::Uuid::new_v4().to_string(),
            build_id: build_id.to_string(),
            periodic: job.clone(),
            annotations: [("prow.k8s.io/job".to_string(), job.clone())].into(),
            job,
            job_type: "periodic",
            configured_cluster: "default",
            cluster: None,
            refs: None,
            extra_refs: Vec::new(),
            labels,
            spec_hash: "4cf6f83c8aa56247464267af1a3af39e3543a5ec6c4dfd750fa81bfa3fd814e7",
            scheduled_at: None,
            attempt: 0,
            pod_revival_count: 0,
            created_at: jiff::Timestamp::now().to_string(),
            pending_at: None,
            completed_at: None,
            state: "triggered",
            description: "Job triggered.",
            url: None,
        }
    }

    #[derive(Clone)]
    struct Shared {
        writer: Option<std::sync::mpsc::Sender<Insert>>,
        build_ids: Arc<std::sync::atomic::AtomicU64>,
    }

    async fn create(
        State(shared): State<Shared>,
        Json(new): Json<NewRun>,
    ) -> Result<(StatusCode, Json<Run>), StatusCode> {
        let build_id = shared
            .build_ids
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let run = run(new.job, build_id);
        let Some(writer) = &shared.writer else {
            return Ok((StatusCode::CREATED, Json(run)));
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        writer
            .send((run, tx))
            .map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
        let run = rx.await.map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
        Ok((StatusCode::CREATED, Json(run)))
    }

    /// The writer: the requests waiting are one batch (after two yields, as
    /// bosun's writer, for those about to be queued), committed at once.
    fn write(dir: &Path, rx: std::sync::mpsc::Receiver<Insert>) {
        let conn = rusqlite::Connection::open(dir.join("floor.db")).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        let sync = std::env::var("BOSUN_FLOOR_SYNC").unwrap_or_else(|_| "FULL".into());
        conn.pragma_update(None, "synchronous", sync).unwrap();
        conn.execute_batch(
            "CREATE TABLE runs (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE,
             build_id INTEGER NOT NULL, job TEXT NOT NULL, state TEXT NOT NULL,
             created_at TEXT NOT NULL, labels TEXT NOT NULL, annotations TEXT NOT NULL,
             spec_hash TEXT NOT NULL)",
        )
        .unwrap();
        while let Ok(first) = rx.recv() {
            let mut batch = vec![first];
            let mut yields = 2;
            loop {
                match rx.try_recv() {
                    Ok(r) => batch.push(r),
                    Err(std::sync::mpsc::TryRecvError::Empty) if yields > 0 => {
                        yields -= 1;
                        std::thread::yield_now();
                    }
                    Err(_) => break,
                }
            }
            let tx = conn.unchecked_transaction().unwrap();
            {
                let mut insert = tx
                    .prepare_cached(
                        "INSERT INTO runs (id, build_id, job, state, created_at, labels, annotations, spec_hash)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                    )
                    .unwrap();
                for (run, _) in &batch {
                    insert
                        .execute(rusqlite::params![
                            run.id,
                            run.build_id.parse::<i64>().unwrap(),
                            run.job,
                            run.state,
                            run.created_at,
                            serde_json::to_string(&run.labels).unwrap(),
                            serde_json::to_string(&run.annotations).unwrap(),
                            run.spec_hash,
                        ])
                        .unwrap();
                }
            }
            tx.commit().unwrap();
            for (run, reply) in batch {
                let _ = reply.send(run);
            }
        }
    }

    /// Serves `mode` (`sqlite` or `http`) on `port` until killed.
    pub fn serve(mode: &str, port: u16, dir: &Path) {
        let writer = match mode {
            "http" => None,
            "sqlite" => {
                let (tx, rx) = std::sync::mpsc::channel();
                let dir = dir.to_path_buf();
                std::thread::spawn(move || write(&dir, rx));
                Some(tx)
            }
            other => panic!("{other}: sqlite or http"),
        };
        let shared = Shared {
            writer,
            build_ids: Arc::new(1.into()),
        };
        let app = axum::Router::new()
            .route("/api/v1/runs", post(create))
            .route("/healthz", get(|| async { "ok" }))
            .with_state(shared);
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async move {
                let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
                    .await
                    .unwrap();
                axum::serve(listener, app).await.unwrap();
            });
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until `GET /healthz` on `port` answers 200.
fn wait_ready(port: u16) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if TcpStream::connect(("127.0.0.1", port)).is_ok()
            && agent
                .get(format!("http://127.0.0.1:{port}/healthz"))
                .call()
                .is_ok_and(|r| r.status() == 200)
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the server on {port} never got ready"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `n` POSTs of `job` from 8 threads; their time and the server's CPU.
fn post_all(server: &Child, port: u16, job: &'static str, n: usize) -> (Duration, f64) {
    let next = Arc::new(AtomicUsize::new(0));
    let cpu0 = proc::cpu_seconds(server.id());
    let t = Instant::now();
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let next = next.clone();
            std::thread::spawn(move || lean::post_until(port, job, &next, n))
        })
        .collect();
    clients.into_iter().for_each(|c| c.join().unwrap());
    (t.elapsed(), proc::cpu_seconds(server.id()) - cpu0)
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--serve") {
        server::serve(&args[1], args[2].parse().unwrap(), Path::new(&args[3]));
        return;
    }
    let bosun = args.first().expect("path of the bosun binary").clone();
    let n: usize = args.get(1).map_or(10_000, |v| v.parse().expect("N"));
    let rounds: usize = args.get(2).map_or(3, |v| v.parse().expect("ROUNDS"));
    let dir = std::env::temp_dir().join(format!("bosun-post-floor-{}", std::process::id()));
    let me = std::env::current_exe().unwrap();
    let (mut to_sqlite, mut to_http) = (Vec::new(), Vec::new());
    for round in 1..=rounds {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("jobs")).unwrap();
        // bosun, as `run_bench`'s inserts: a job whose queue takes no run,
        // so its runs are committed and stay triggered.
        std::fs::write(
            dir.join("config.yaml"),
            "plank: {job_queue_capacities: {held: 0}}\nbuild_clusters:\n  default: {kind: local, max_concurrency: 8}\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("jobs/held.yaml"),
            "periodics:\n- name: held\n  cron: \"0 0 31 2 *\"\n  job_queue_name: held\n  spec: {containers: [{image: x, command: [/bin/true]}]}\n",
        )
        .unwrap();
        let port = free_port();
        let daemon = Command::new(&bosun)
            .args(["serve", "--config"])
            .arg(dir.join("config.yaml"))
            .arg("--job-config")
            .arg(dir.join("jobs"))
            .arg("--data-dir")
            .arg(dir.join("data"))
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_ready(port);
        let (bosun_time, bosun_cpu) = post_all(&daemon, port, "held", n);
        stop(daemon);
        let mut floors = Vec::new();
        for mode in ["sqlite", "http"] {
            let data = dir.join(mode);
            std::fs::create_dir_all(&data).unwrap();
            let port = free_port();
            let server = Command::new(&me)
                .args(["--serve", mode, &port.to_string()])
                .arg(&data)
                .stdout(Stdio::null())
                .spawn()
                .unwrap();
            wait_ready(port);
            floors.push(post_all(&server, port, "held", n));
            stop(server);
        }
        let (sqlite, http) = (floors[0], floors[1]);
        println!(
            "round {round}: {n} POSTs: bosun {:.3} s (server CPU {:.2} s), sqlite floor {:.3} s ({:.2} s), http floor {:.3} s ({:.2} s)",
            bosun_time.as_secs_f64(),
            bosun_cpu,
            sqlite.0.as_secs_f64(),
            sqlite.1,
            http.0.as_secs_f64(),
            http.1,
        );
        to_sqlite.push(bosun_time.as_secs_f64() / sqlite.0.as_secs_f64());
        to_http.push(bosun_time.as_secs_f64() / http.0.as_secs_f64());
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "bosun's time over the sqlite floor's: median {:.2}; over the http floor's: median {:.2}",
        median(to_sqlite),
        median(to_http)
    );
}
