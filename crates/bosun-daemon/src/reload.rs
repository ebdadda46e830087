//! Hot configuration reload. The daemon watches the config file and the
//! job-config and in-repo directories (directories, not files: an editor's
//! rename-over, a Kubernetes ConfigMap's `..data` symlink swap or a git-sync
//! checkout swap all count as a change), waits for the changes to settle,
//! then loads the whole configuration again. It also reloads on SIGHUP, on
//! `POST /api/v1/config/reload`, and every 5 minutes as a safety net.
//!
//! A valid configuration replaces the one in force and the scheduler's entries
//! are updated: periodics added, removed or rescheduled, the others untouched.
//! An invalid one is reported (log, metrics, `GET /api/v1/config/status`) and
//! the last good configuration stays in force. Build clusters (`build_clusters`
//! and the contexts of the kubeconfig files, which are watched too) are
//! replaced with it: a new cluster takes runs at once, a removed one's pending
//! runs end in error, and an unchanged local cluster keeps its executor.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bosun_host::watch::Watch;

use crate::daemon::Daemon;
use crate::state::{ConfigStatus, Shared};

/// How long changes must settle before a reload.
pub const DEBOUNCE: Duration = Duration::from_millis(300);

/// How often the configuration is reloaded even when no change was seen.
pub const RESYNC: Duration = Duration::from_secs(300);

/// Loads the configuration again and, when it is valid, puts it in force.
/// Returns whether it was valid. Blocking.
pub fn reload(daemon: &Daemon, reason: &str) -> bool {
    let app = &*daemon.shared;
    let loaded = bosun_host::load::load_checked(&app.config_args);
    let now = app.clock.now();
    let errors: Vec<String> = loaded
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(ToString::to_string)
        .collect();
    let warnings: Vec<String> = loaded
        .diagnostics
        .iter()
        .filter(|d| !d.is_error())
        .map(ToString::to_string)
        .collect();
    for w in &warnings {
        tracing::warn!(reason, "config reload: {w}");
    }
    // The clusters of a valid configuration (and its kubeconfig files), and
    // the users of its local clusters; any error keeps the last good ones.
    let in_force = loaded.snapshot.ok_or(errors).and_then(|snapshot| {
        let defs = app.clusters_of(&snapshot);
        crate::clusters::local_users(&snapshot.config, &defs)
            .and_then(|users| {
                crate::clusters::check_run_dirs(&daemon.runs_dir, &snapshot.config, &users)?;
                Ok(users)
            })
            .map(|users| (snapshot, defs, users))
            .map_err(|e| vec![e.to_string()])
    });
    let (snapshot, defs, users) = match in_force {
        Ok(v) => v,
        Err(errors) => {
            for e in &errors {
                tracing::error!(reason, "config reload: {e}");
            }
            tracing::error!(
                reason,
                errors = errors.len(),
                "the new configuration is invalid; the last good one stays in force"
            );
            app.metrics
                .reloads
                .get_or_create(&vec![("result".into(), "error".into())])
                .inc();
            app.metrics.reload_ok.set(0);
            let mut status = app.config_status();
            status.ok = false;
            status.last_attempt_at = now;
            status.last_attempt_reason = reason.to_string();
            status.errors = errors;
            status.warnings = warnings.len();
            status.warning_messages = warnings;
            app.set_config_status(status);
            return false;
        }
    };
    // The repositories' last good jobs on the new central configuration,
    // checked against it again; one change of the job set at a time.
    let repos = &daemon.repos;
    let compose = repos.composing();
    let previous = app.snapshot();
    let kube = app.config_args.kube_context_names();
    let snapshot = repos.compose(
        &*app.store,
        &app.metrics,
        snapshot,
        Some(&previous),
        &kube,
        now,
    );
    let status = ConfigStatus::loaded(&snapshot, warnings, now, reason);
    let (added, removed) = app.set_in_force(snapshot, defs, users);
    app.set_repo_commits(repos.commits());
    app.install_periodics(&app.snapshot(), now);
    drop(compose);
    if !added.is_empty() || !removed.is_empty() {
        tracing::info!(?added, ?removed, "build clusters changed");
    }
    app.scheduler_wake.notify_one();
    daemon.controller.wake();
    app.metrics
        .reloads
        .get_or_create(&vec![("result".into(), "success".into())])
        .inc();
    app.metrics.reload_ok.set(1);
    app.metrics
        .reload_success_time
        .set(crate::metrics::seconds(now));
    tracing::info!(
        reason,
        version = status.version,
        periodics = status.periodics,
        "configuration reloaded"
    );
    app.set_config_status(status);
    true
}

/// The directories of the configuration: the config file's directory (for
/// the file itself and `..data`-style entries), each job-config directory
/// (recursively; a job-config file is watched like the config file), the
/// kubeconfig files and directory, and each in-repo checkout (recursively,
/// `.git` ignored).
fn watches(app: &Shared) -> Vec<Watch> {
    let file = |path: &Path| -> Option<Watch> {
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        Some(Watch {
            dir,
            recursive: false,
            names: Some(vec![path.file_name()?.to_string_lossy().to_string()]),
        })
    };
    let args = &app.config_args;
    let mut out = Vec::new();
    if let Some(c) = &args.config {
        out.extend(file(c));
    }
    for j in &args.job_config {
        if j.is_dir() {
            out.push(Watch {
                dir: j.clone(),
                recursive: true,
                names: None,
            });
        } else {
            out.extend(file(j));
        }
    }
    // Kubeconfig files and the kubeconfig directory: their contexts are
    // build clusters.
    if let Some(dir) = &args.kubeconfig_dir {
        out.push(Watch {
            dir: dir.clone(),
            recursive: false,
            names: None,
        });
    }
    for f in args.kubeconfig_files() {
        if args
            .kubeconfig_dir
            .as_ref()
            .is_none_or(|d| f.parent() != Some(d))
        {
            out.extend(file(&f));
        }
    }
    let snapshot = app.snapshot();
    // A `clone_uri` entry has no directory to watch: the daemon follows it.
    let checkouts = args.in_repo.iter().chain(&snapshot.config.in_repo);
    for source in checkouts.filter(|s| !s.path.is_empty()) {
        out.push(Watch {
            dir: PathBuf::from(&source.path),
            recursive: true,
            names: None,
        });
    }
    out.dedup();
    out
}

/// Starts a watcher sending on `tx` for every change of the configuration.
fn start_watcher(
    app: &Shared,
    tx: tokio::sync::mpsc::UnboundedSender<()>,
) -> Option<notify::RecommendedWatcher> {
    bosun_host::watch::start(
        watches(app),
        tx,
        "it is reloaded every 5 minutes and on SIGHUP",
    )
}

/// Reloads on changes, SIGHUP and every [`RESYNC`], until `stop`.
pub async fn reload_loop(daemon: Arc<Daemon>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let app = daemon.shared.clone();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut watching = watches(&app);
    let mut watcher = start_watcher(&app, tx.clone());
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
    let mut resync = tokio::time::interval_at(tokio::time::Instant::now() + RESYNC, RESYNC);
    loop {
        let reason = tokio::select! {
            Some(()) = rx.recv() => {
                // Let the change settle: a checkout swap or an editor's save is
                // several events.
                loop {
                    tokio::select! {
                        Some(()) = rx.recv() => {}
                        _ = tokio::time::sleep(DEBOUNCE) => break,
                    }
                }
                "file change"
            }
            _ = async { match hup.as_mut() { Some(h) => { h.recv().await; } None => std::future::pending().await } } => "SIGHUP",
            _ = resync.tick() => "resync",
            _ = stop.changed() => return,
        };
        let d = daemon.clone();
        let ok = tokio::task::spawn_blocking(move || reload(&d, reason))
            .await
            .unwrap_or(false);
        // The in-repo checkouts may have changed: watch what is configured now.
        let now = watches(&app);
        if ok && now != watching {
            drop(watcher.take());
            watcher = start_watcher(&app, tx.clone());
            watching = now;
        }
    }
}
