//! Watching configuration files for changes, shared by the daemon's config
//! watcher and `bosun dispatcher`: directories, not files (an editor's
//! rename-over, a Kubernetes ConfigMap's `..data` symlink swap or a git-sync
//! checkout swap all count as a change); in a directory watched for some
//! files, only those names (and `..`-entries) count; `.git` never does.

use std::path::PathBuf;

use notify::{EventKind, RecursiveMode, Watcher};

/// What to watch: a directory, recursively or not, and which names in it
/// matter (none: all).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watch {
    /// The directory.
    pub dir: PathBuf,
    /// Its subdirectories too.
    pub recursive: bool,
    /// The names that matter in it (none: all).
    pub names: Option<Vec<String>>,
}

/// Whether an event concerns one of `watches`.
fn relevant(event: &notify::Event, watches: &[Watch]) -> bool {
    if matches!(event.kind, EventKind::Access(_)) {
        return false;
    }
    event.paths.iter().any(|p| {
        if p.components().any(|c| c.as_os_str() == ".git") {
            return false;
        }
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        watches.iter().any(|w| {
            p.starts_with(&w.dir)
                && match &w.names {
                    None => true,
                    // A ConfigMap swaps `..data`; its timestamped directories
                    // start with `..` too.
                    Some(names) => names.contains(&name) || name.starts_with(".."),
                }
        })
    })
}

/// Starts a watcher of `watches` sending on `tx` for every relevant change;
/// `fallback` says, in the warnings, what happens without it.
pub fn start(
    watches: Vec<Watch>,
    tx: tokio::sync::mpsc::UnboundedSender<()>,
    fallback: &'static str,
) -> Option<notify::RecommendedWatcher> {
    let watches: Vec<Watch> = watches
        .into_iter()
        .map(|w| Watch {
            dir: std::fs::canonicalize(&w.dir).unwrap_or(w.dir),
            ..w
        })
        .collect();
    let filter = watches.clone();
    let mut watcher =
        match notify::recommended_watcher(move |res: notify::Result<notify::Event>| match res {
            Ok(event) if relevant(&event, &filter) => {
                let _ = tx.send(());
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "config watcher"),
        }) {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch the configuration; {fallback}");
                return None;
            }
        };
    for w in &watches {
        let mode = if w.recursive {
            RecursiveMode::Recursive
        } else {
            RecursiveMode::NonRecursive
        };
        if let Err(e) = watcher.watch(&w.dir, mode) {
            tracing::warn!(dir = %w.dir.display(), error = %e, "cannot watch this directory; {fallback}");
        }
    }
    Some(watcher)
}
