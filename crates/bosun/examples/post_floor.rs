//! Floors under `run_bench`: the same work done by servers that do less
//! than `bosun serve`, in turns with it on the same machine.
//!
//! `post_floor BOSUN [N] [ROUNDS]`: `run_bench`'s POSTs
//! (`BOSUN_BENCH_INSERTS_ONLY=1`), the same client (8 threads, a keep-alive
//! connection each, one request in flight on each), against bosun and:
//!
//! - `sqlite`: axum on tokio (as bosun's API), each POST's run inserted by a
//!   writer thread that takes the requests waiting in batches (one
//!   transaction and one fsync a batch; SQLite in WAL with
//!   `synchronous = FULL`, as bosun's store), then answered with the run's
//!   JSON: about the least a durable POST costs with these parts;
//! - `http`: the same server answering each POST with a run's JSON at once,
//!   stored nowhere: HTTP on loopback alone.
//!
//! Default 10000 POSTs, 3 rounds; prints each round's times and server CPU,
//! and the medians of bosun's time over each floor's, taken round by round.
//! `BOSUN_FLOOR_SYNC=NORMAL` commits the `sqlite` floor's batches without
//! their fsync (not durable: it shows what the fsyncs cost);
//! `BOSUN_FLOOR_SYNC=OVERLAP` syncs them on a thread of their own, a batch
//! written while the last one's fsync runs (durable: each answer waits for
//! its batch's fsync);
//! `BOSUN_FLOOR_INDEXES=1` gives the floor's runs table the indexes a
//! periodic's run had in bosun's at schema 12 (by job, by state, active, a
//! periodic's active); the floor's run ids have no index, as bosun's made
//! of their seq (schema 14), unless `BOSUN_FLOOR_ID_INDEX=1` (a unique index,
//! as bosun's ids drawn at random had before);
//! `TOKIO_WORKER_THREADS` applies to bosun and the floors alike.
//!
//! `post_floor --runs BOSUN [N] [ROUNDS]`: `run_bench`'s local runs (N
//! POSTs of a `/bin/true` job on a local cluster of 8 slots, to the last
//! run's end), against `run_bench`'s plain loop and the `runs` floor: the
//! `sqlite` floor whose committed runs 8 threads of its own run as the
//! plain loop does, each end committed too. The floor keeps less than
//! bosun promises (its jobs end with it; bosun's local runs outlive a
//! restart of the daemon in their supervisor).

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "common/lean.rs"]
mod lean;

#[path = "common/local.rs"]
mod local;

#[path = "common/proc.rs"]
mod proc;

#[path = "common/raw.rs"]
mod raw;

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

/// What the floor's writer commits: a run made (answered with its row's
/// key once committed), or a run's end.
enum Op {
    Insert(Box<Run>, tokio::sync::oneshot::Sender<(Run, i64)>),
    Ended(i64),
}

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
        writer: Option<std::sync::mpsc::Sender<Op>>,
        build_ids: Arc<std::sync::atomic::AtomicU64>,
        /// `runs`: where a committed run goes to be run.
        jobs: Option<std::sync::mpsc::Sender<i64>>,
        ended: Arc<AtomicUsize>,
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
            .send(Op::Insert(Box::new(run), tx))
            .map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
        let (run, seq) = rx.await.map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
        if let Some(jobs) = &shared.jobs {
            jobs.send(seq)
                .map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
        }
        Ok((StatusCode::CREATED, Json(run)))
    }

    /// The writer: the requests waiting are one batch (after two yields, as
    /// bosun's writer, for those about to be queued), committed at once.
    fn write(dir: &Path, rx: std::sync::mpsc::Receiver<Op>) {
        let conn = rusqlite::Connection::open(dir.join("floor.db")).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        let sync = std::env::var("BOSUN_FLOOR_SYNC").unwrap_or_else(|_| "FULL".into());
        // OVERLAP: batches are committed without their fsync, and a thread
        // of its own syncs the WAL once for every batch committed since its
        // last sync, then answers their requests: the next batch is written
        // while the last one's fsync runs.
        let overlap = sync == "OVERLAP";
        conn.pragma_update(None, "synchronous", if overlap { "NORMAL" } else { &sync })
            .unwrap();
        conn.execute_batch(
            "CREATE TABLE runs (seq INTEGER PRIMARY KEY, id TEXT NOT NULL,
             build_id INTEGER NOT NULL, job TEXT NOT NULL, state TEXT NOT NULL,
             created_at TEXT NOT NULL, labels TEXT NOT NULL, annotations TEXT NOT NULL,
             spec_hash TEXT NOT NULL, completed_at TEXT)",
        )
        .unwrap();
        if std::env::var_os("BOSUN_FLOOR_ID_INDEX").is_some() {
            conn.execute_batch("CREATE UNIQUE INDEX runs_id ON runs(id)")
                .unwrap();
        }
        if std::env::var_os("BOSUN_FLOOR_INDEXES").is_some() {
            // The indexes of bosun's runs table at schema 12 that a
            // periodic's run is written to.
            conn.execute_batch(
                "CREATE INDEX runs_job ON runs(job, seq);
                 CREATE INDEX runs_state ON runs(state, seq);
                 CREATE INDEX runs_active ON runs(seq) WHERE completed_at IS NULL;
                 CREATE INDEX runs_periodic_active ON runs(job, seq) WHERE completed_at IS NULL;",
            )
            .unwrap();
        }
        type Replies = Vec<(Run, i64, tokio::sync::oneshot::Sender<(Run, i64)>)>;
        let synced = overlap.then(|| {
            let (tx, rx) = std::sync::mpsc::channel::<Replies>();
            let wal = std::fs::File::open(dir.join("floor.db-wal")).unwrap();
            std::thread::spawn(move || {
                while let Ok(first) = rx.recv() {
                    let mut all = vec![first];
                    all.extend(rx.try_iter());
                    wal.sync_data().unwrap();
                    for (run, seq, reply) in all.into_iter().flatten() {
                        let _ = reply.send((run, seq));
                    }
                }
            });
            tx
        });
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
            let mut replies = Vec::new();
            {
                let mut insert = tx
                    .prepare_cached(
                        "INSERT INTO runs (id, build_id, job, state, created_at, labels, annotations, spec_hash)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                    )
                    .unwrap();
                let mut end = tx
                    .prepare_cached("UPDATE runs SET state = 'success' WHERE seq = ?1")
                    .unwrap();
                for op in batch {
                    match op {
                        Op::Insert(run, reply) => {
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
                            replies.push((*run, tx.last_insert_rowid(), reply));
                        }
                        Op::Ended(seq) => {
                            assert_eq!(end.execute([seq]).unwrap(), 1);
                        }
                    }
                }
            }
            tx.commit().unwrap();
            if let Some(synced) = &synced {
                synced.send(replies).unwrap();
                continue;
            }
            for (run, seq, reply) in replies {
                let _ = reply.send((run, seq));
            }
        }
    }

    /// `runs`: 8 threads run the committed runs' jobs as the plain loop
    /// does (`/bin/true`, its output to a file of its own), and have each
    /// end committed.
    fn run_jobs(
        dir: &Path,
        jobs: std::sync::mpsc::Receiver<i64>,
        writer: std::sync::mpsc::Sender<Op>,
        ended: Arc<AtomicUsize>,
    ) {
        let jobs = Arc::new(std::sync::Mutex::new(jobs));
        for _ in 0..8 {
            let (jobs, writer, ended, dir) = (
                jobs.clone(),
                writer.clone(),
                ended.clone(),
                dir.to_path_buf(),
            );
            std::thread::spawn(move || loop {
                let Ok(seq) = jobs.lock().unwrap().recv() else {
                    return;
                };
                raw::run_true(&dir, seq);
                let _ = writer.send(Op::Ended(seq));
                ended.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            });
        }
    }

    /// Serves `mode` (`sqlite`, `http` or `runs`) on `port` until killed.
    pub fn serve(mode: &str, port: u16, dir: &Path) {
        let ended = Arc::new(AtomicUsize::new(0));
        std::fs::create_dir_all(dir.join("logs")).unwrap();
        let (writer, jobs) = match mode {
            "http" => (None, None),
            "sqlite" | "runs" => {
                let (tx, rx) = std::sync::mpsc::channel();
                let data = dir.to_path_buf();
                std::thread::spawn(move || write(&data, rx));
                let jobs = (mode == "runs").then(|| {
                    let (jobs, queue) = std::sync::mpsc::channel();
                    run_jobs(&dir.join("logs"), queue, tx.clone(), ended.clone());
                    jobs
                });
                (Some(tx), jobs)
            }
            other => panic!("{other}: sqlite, http or runs"),
        };
        let shared = Shared {
            writer,
            build_ids: Arc::new(1.into()),
            jobs,
            ended: ended.clone(),
        };
        let app = axum::Router::new()
            .route("/api/v1/runs", post(create))
            .route("/healthz", get(|| async { "ok" }))
            .route(
                "/ended",
                get(|State(shared): State<Shared>| async move {
                    shared
                        .ended
                        .load(std::sync::atomic::Ordering::Relaxed)
                        .to_string()
                }),
            )
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

/// An HTTP client for the benchmark's own reads (kept-alive connections).
fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}

/// Waits until `GET /healthz` on `port` answers 200.
fn wait_ready(port: u16) {
    let agent = agent();
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

/// `n` POSTs of `job` from 8 threads, each with its own connection.
fn post_n(port: u16, job: &'static str, n: usize) {
    let next = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let next = next.clone();
            std::thread::spawn(move || lean::post_until(port, job, &next, n))
        })
        .collect();
    clients.into_iter().for_each(|c| c.join().unwrap());
}

/// [`post_n`], then until `done` says so (checked every 5 ms): the time
/// taken and the server's CPU meanwhile.
fn post_all(
    server: &Child,
    port: u16,
    job: &'static str,
    n: usize,
    mut done: impl FnMut() -> bool,
) -> (Duration, f64) {
    let cpu0 = proc::cpu_seconds(server.id());
    let t = Instant::now();
    post_n(port, job, n);
    while !done() {
        std::thread::sleep(Duration::from_millis(5));
    }
    (t.elapsed(), proc::cpu_seconds(server.id()) - cpu0)
}

/// The benchmark's arguments after its mode: bosun's binary, N (default
/// 10000) and the rounds (default 3).
fn bench_args(args: &[String]) -> (String, usize, usize) {
    let bosun = args.first().expect("path of the bosun binary").clone();
    let n = args.get(1).map_or(10_000, |v| v.parse().expect("N"));
    let rounds = args.get(2).map_or(3, |v| v.parse().expect("ROUNDS"));
    (bosun, n, rounds)
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// `bosun serve` in `dir` as `run_bench` configures it
/// ([`local::write_config`]), once it answers, and its port.
fn start_bosun(bosun: &str, dir: &Path) -> (Child, u16) {
    local::write_config(dir);
    let port = free_port();
    let daemon = local::serve_command(bosun, dir, port)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_ready(port);
    (daemon, port)
}

/// A floor server (`--serve MODE`) with its data in `dir/MODE`, once it
/// answers, and its port.
fn start_floor(me: &Path, mode: &str, dir: &Path) -> (Child, u16) {
    let data = dir.join(mode);
    std::fs::create_dir_all(&data).unwrap();
    let port = free_port();
    let server = Command::new(me)
        .args(["--serve", mode, &port.to_string()])
        .arg(&data)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_ready(port);
    (server, port)
}

/// A GET on loopback whose answer is JSON or a number, read whole.
/// Anything but 200 stops the benchmark.
fn get(agent: &ureq::Agent, port: u16, path: &str) -> String {
    let mut answer = agent
        .get(format!("http://127.0.0.1:{port}{path}"))
        .call()
        .unwrap();
    assert_eq!(answer.status(), 200, "GET {path}");
    answer.body_mut().read_to_string().unwrap()
}

/// `post_floor --runs BOSUN [N] [ROUNDS]`: N runs of `/bin/true` (default
/// 10000) by the plain loop, by `bosun serve` on a local cluster and by the
/// `runs` floor, in turns, ROUNDS rounds (default 3): their times, the
/// servers' CPU per run, and the medians of the plain loop's time over each
/// server's (as `run_bench`'s ratio).
fn runs(args: &[String]) {
    let (bosun, n, rounds) = bench_args(args);
    let agent = agent();
    let base = std::env::temp_dir().join(format!("bosun-run-floor-{}", std::process::id()));
    let me = std::env::current_exe().unwrap();
    let (mut bosun_ratios, mut floor_ratios) = (Vec::new(), Vec::new());
    for round in 1..=rounds {
        // A directory a round, all deleted at the end: thousands of files
        // deleted just before a measured part slow ext4's inode allocation
        // for whoever creates files next (as in `run_bench`).
        let dir = base.join(format!("round-{round}"));
        let raw = raw::raw_loop(&dir.join("raw"), n);

        let (daemon, port) = start_bosun(&bosun, &dir);
        let (bosun_time, bosun_cpu) = post_all(&daemon, port, "true", n, || {
            !get(&agent, port, "/api/v1/runs?active=true&limit=1").contains("\"id\"")
        });
        let supervisor =
            proc::find_process(&["run-shim", dir.to_str().unwrap()]).map_or(0.0, proc::cpu_seconds);
        stop(daemon);

        let (server, port) = start_floor(&me, "runs", &dir);
        let (floor_time, floor_cpu) = post_all(&server, port, "true", n, || {
            get(&agent, port, "/ended").trim().parse::<usize>().unwrap() >= n
        });
        stop(server);

        let per_run = |cpu: f64| cpu * 1e6 / n as f64;
        println!(
            "round {round}: {n} runs: plain loop {:.2} s; bosun {:.2} s (loop / bosun {:.3}; daemon CPU {:.0} us a run, its supervisor {:.0} us); floor {:.2} s (loop / floor {:.3}; CPU {:.0} us a run)",
            raw.as_secs_f64(),
            bosun_time.as_secs_f64(),
            raw.as_secs_f64() / bosun_time.as_secs_f64(),
            per_run(bosun_cpu),
            per_run(supervisor),
            floor_time.as_secs_f64(),
            raw.as_secs_f64() / floor_time.as_secs_f64(),
            per_run(floor_cpu),
        );
        bosun_ratios.push(raw.as_secs_f64() / bosun_time.as_secs_f64());
        floor_ratios.push(raw.as_secs_f64() / floor_time.as_secs_f64());
    }
    let _ = std::fs::remove_dir_all(&base);
    println!(
        "plain loop over bosun: median {:.3}; plain loop over the floor: median {:.3}",
        local::median(bosun_ratios),
        local::median(floor_ratios)
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--serve") {
        server::serve(&args[1], args[2].parse().unwrap(), Path::new(&args[3]));
        return;
    }
    if args.first().map(String::as_str) == Some("--runs") {
        runs(&args[1..]);
        return;
    }
    let (bosun, n, rounds) = bench_args(&args);
    let dir = std::env::temp_dir().join(format!("bosun-post-floor-{}", std::process::id()));
    let me = std::env::current_exe().unwrap();
    let (mut to_sqlite, mut to_http) = (Vec::new(), Vec::new());
    for round in 1..=rounds {
        let _ = std::fs::remove_dir_all(&dir);
        let (daemon, port) = start_bosun(&bosun, &dir);
        let (bosun_time, bosun_cpu) = post_all(&daemon, port, "held", n, || true);
        stop(daemon);
        let mut floors = Vec::new();
        for mode in ["sqlite", "http"] {
            let (server, port) = start_floor(&me, mode, &dir);
            floors.push(post_all(&server, port, "held", n, || true));
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
        local::median(to_sqlite),
        local::median(to_http)
    );
}
