//! The webhook intake's settings (`POST /hook`): the body cap, and Prow's
//! HMAC secret file (`--hmac-secret-file`), read again when it changes (its
//! size, modification time or inode), so tokens rotate without a restart; a
//! file that cannot be read keeps the tokens read last.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bosun_base::sync::Lock;
use bosun_forge::hook::{Intake, Secrets};

/// The webhook intake's settings and the secret file's tokens.
#[derive(Default)]
pub struct Webhooks {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    file: Option<PathBuf>,
    intake: Intake,
    /// The tokens, and the file's stamp when they were read.
    secrets: Option<(Stamp, Arc<Secrets>)>,
}

/// What tells a changed file: size, modification time, inode.
type Stamp = (u64, Option<std::time::SystemTime>, u64);

fn stamp(path: &std::path::Path) -> std::io::Result<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path)?;
    Ok((m.len(), m.modified().ok(), m.ino()))
}

impl Webhooks {
    /// Takes webhooks signed with the tokens of `file`, bodies up to
    /// `max_body` bytes. Why not, when the file cannot be read.
    pub fn configure(&self, file: PathBuf, max_body: u64) -> Result<(), String> {
        let st = stamp(&file)
            .map_err(|e| format!("cannot read the HMAC secret file {}: {e}", file.display()))?;
        let bytes = std::fs::read(&file)
            .map_err(|e| format!("cannot read the HMAC secret file {}: {e}", file.display()))?;
        let mut inner = self.inner.locked();
        inner.secrets = Some((st, Arc::new(Secrets::parse(&bytes))));
        inner.file = Some(file);
        inner.intake = Intake::with_max_body(max_body);
        Ok(())
    }

    /// The intake's settings.
    pub fn intake(&self) -> Intake {
        self.inner.locked().intake
    }

    /// The tokens in force: the file read again when it changed.
    pub fn secrets(&self) -> Option<Arc<Secrets>> {
        let mut inner = self.inner.locked();
        let file = inner.file.clone()?;
        match stamp(&file) {
            Ok(now) if inner.secrets.as_ref().is_some_and(|(s, _)| *s == now) => {}
            Ok(now) => match std::fs::read(&file) {
                Ok(bytes) => {
                    tracing::info!(file = %file.display(), "HMAC secret file read again");
                    inner.secrets = Some((now, Arc::new(Secrets::parse(&bytes))));
                }
                Err(e) => {
                    tracing::warn!(file = %file.display(), error = %e, "cannot read the HMAC secret file; its last tokens stay");
                }
            },
            Err(e) => {
                tracing::warn!(file = %file.display(), error = %e, "cannot read the HMAC secret file; its last tokens stay");
            }
        }
        inner.secrets.as_ref().map(|(_, s)| s.clone())
    }
}
