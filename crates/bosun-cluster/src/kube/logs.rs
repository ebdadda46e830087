//! Pod logs: each pod's log is copied, as it is written, into the run's log
//! file `DIR/NAME.log` (the run log endpoint streams that file), once per
//! pod, from when its containers start until the pod ends.
//!
//! It knows nothing of the watch or of runs' states: the watch hands it the
//! pods it sees, the sinker asks it which logs are complete.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Pod;

use super::client::{ApiError, Connection};

/// Why a pod's log could not be copied (written at the end of the copy).
#[derive(Debug, thiserror::Error)]
enum CopyError {
    /// The log could not be read from the API.
    #[error("{0}")]
    Api(#[from] ApiError),
    /// The log file could not be written (or the stream broke).
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The copies of one cluster's pod logs.
pub(crate) struct LogCopier {
    conn: Arc<Connection>,
    /// Where pod logs are copied (`NAME.log`).
    dir: PathBuf,
    /// Pods whose log is being copied.
    copying: Mutex<HashSet<String>>,
    /// Pods whose log has been copied to its end.
    copied: Mutex<HashSet<String>>,
}

impl LogCopier {
    /// Copies logs of pods reached through `conn` into `dir`.
    pub(crate) fn new(conn: Arc<Connection>, dir: PathBuf) -> Self {
        LogCopier {
            conn,
            dir,
            copying: Mutex::default(),
            copied: Mutex::default(),
        }
    }

    /// The log file of pod (or run) `name`.
    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.log"))
    }

    /// Whether pod `name`'s log has been copied to its end.
    pub(crate) fn is_copied(&self, name: &str) -> bool {
        self.copied
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(name)
    }

    /// Pod `name` is gone: a pod of the same name (a revived run's) is
    /// copied again.
    pub(crate) fn forget(&self, name: &str) {
        self.copying
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
    }

    /// Starts copying `pod`'s log into `DIR/NAME.log` once its containers
    /// have started (the copy follows the log until the pod ends), once per
    /// pod. Runs on the caller's tokio runtime.
    pub(crate) fn copy(self: &Arc<Self>, pod: &Pod) {
        let started = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|p| p != "Pending");
        let Some(name) = pod.metadata.name.clone().filter(|_| started) else {
            return;
        };
        if !self
            .copying
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.clone())
        {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            use futures_util::AsyncReadExt;
            use std::io::Write;
            let path = this.path(&name);
            let copied = async {
                let api = this.conn.pods().await?;
                let params = kube::api::LogParams {
                    follow: true,
                    ..Default::default()
                };
                let mut stream = api
                    .log_stream(&name, &params)
                    .await
                    .map_err(ApiError::from)?;
                std::fs::create_dir_all(&this.dir)?;
                let mut file = std::fs::File::create(&path)?;
                let mut buf = vec![0u8; 16 * 1024];
                loop {
                    let n = stream.read(&mut buf).await?;
                    if n == 0 {
                        return Ok::<(), CopyError>(());
                    }
                    file.write_all(&buf[..n])?;
                }
            }
            .await;
            this.copied
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(name.clone());
            if let Err(e) = copied {
                let _ = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .and_then(|mut f| writeln!(f, "bosun: the pod's log could not be copied: {e}"));
            }
        });
    }
}
