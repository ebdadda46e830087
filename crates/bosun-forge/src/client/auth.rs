//! The credentials a [`super::Client`] sends: a token read from its file
//! (again whenever the file changes, so that a rotated token is used
//! without a restart), or a GitHub App's: a JWT signed with the App's
//! private key (RS256, issued a minute in the past, valid 9 minutes, as
//! Prow signs it) for `/app` calls, and an installation token per account
//! for everything else, kept until 5 minutes before it expires (GitHub
//! gives them for an hour; Prow keeps them until a minute before).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, EncodingKey, Header};

use super::error::ForgeError;

/// How long before its expiry an installation token is replaced.
pub const TOKEN_REFRESH_BEFORE: Duration = Duration::from_secs(5 * 60);
/// How far in the past a JWT's `iat` is put (clock drift, as GitHub advises).
const JWT_BACKDATE: Duration = Duration::from_secs(60);
/// A JWT's lifetime from now (GitHub allows at most 10 minutes).
const JWT_LIFETIME: Duration = Duration::from_secs(9 * 60);

/// What identifies a file's content without reading it.
type Stamp = (Option<SystemTime>, u64);

fn stamp(path: &Path) -> Result<Stamp, std::io::Error> {
    let m = std::fs::metadata(path)?;
    Ok((m.modified().ok(), m.len()))
}

fn file_error(what: &str, path: &Path, e: impl std::fmt::Display) -> ForgeError {
    // A missing or unreadable secret may be mounted later: try again.
    ForgeError::unreachable(format!("cannot read the {what} {}: {e}", path.display()))
}

/// A file read again when its modification time or length changes.
#[derive(Debug)]
pub(crate) struct Watched<T> {
    path: PathBuf,
    what: &'static str,
    cached: Mutex<Option<(Stamp, Arc<T>)>>,
}

impl<T> Watched<T> {
    pub(crate) fn new(path: PathBuf, what: &'static str) -> Self {
        Watched {
            path,
            what,
            cached: Mutex::new(None),
        }
    }

    /// The file's content through `parse`, read again if the file changed.
    pub(crate) fn get(
        &self,
        parse: impl Fn(&[u8]) -> Result<T, String>,
    ) -> Result<Arc<T>, ForgeError> {
        let now = stamp(&self.path).map_err(|e| file_error(self.what, &self.path, e))?;
        let mut cached = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((s, v)) = cached.as_ref() {
            if *s == now {
                return Ok(v.clone());
            }
        }
        let bytes = std::fs::read(&self.path).map_err(|e| file_error(self.what, &self.path, e))?;
        let v = Arc::new(parse(&bytes).map_err(|e| file_error(self.what, &self.path, e))?);
        *cached = Some((now, v.clone()));
        Ok(v)
    }
}

/// A token file's token: its content without surrounding white space (as
/// Prow reads secrets); an empty file is an error.
pub(crate) fn parse_token(bytes: &[u8]) -> Result<String, String> {
    let t = String::from_utf8_lossy(bytes).trim().to_string();
    if t.is_empty() {
        Err("the file is empty".into())
    } else {
        Ok(t)
    }
}

/// A GitHub App: its id, its private key, and the installation tokens it
/// was given.
pub(crate) struct App {
    pub(crate) app_id: String,
    key: Watched<EncodingKey>,
    /// Account (lower case) to installation id.
    installations: Mutex<HashMap<String, u64>>,
    /// Installation id to token and expiry.
    tokens: Mutex<HashMap<u64, (String, SystemTime)>>,
}

impl App {
    pub(crate) fn new(app_id: String, private_key_path: PathBuf) -> App {
        App {
            app_id,
            key: Watched::new(private_key_path, "GitHub App private key"),
            installations: Mutex::new(HashMap::new()),
            tokens: Mutex::new(HashMap::new()),
        }
    }

    /// A JWT for `/app` calls, signed now.
    pub(crate) fn jwt(&self, now: SystemTime) -> Result<String, ForgeError> {
        let key = self.key.get(|pem| {
            EncodingKey::from_rsa_pem(pem)
                .map_err(|e| format!("not an RSA private key in PEM: {e}"))
        })?;
        let secs = |t: SystemTime| t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        let claims = serde_json::json!({
            "iat": secs(now - JWT_BACKDATE),
            "exp": secs(now + JWT_LIFETIME),
            "iss": self.app_id,
        });
        jsonwebtoken::encode(&Header::new(Algorithm::RS256), &claims, &key).map_err(|e| {
            ForgeError::unexpected(None, format!("cannot sign the GitHub App's JWT: {e}"))
        })
    }

    pub(crate) fn installation(&self, account: &str) -> Option<u64> {
        let map = self.installations.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&account.to_ascii_lowercase()).copied()
    }

    pub(crate) fn set_installation(&self, account: &str, id: u64) {
        let mut map = self.installations.lock().unwrap_or_else(|e| e.into_inner());
        map.insert(account.to_ascii_lowercase(), id);
    }

    /// The cached token of installation `id`, unless it expires within
    /// [`TOKEN_REFRESH_BEFORE`].
    pub(crate) fn token(&self, id: u64, now: SystemTime) -> Option<String> {
        let map = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&id)
            .filter(|(_, exp)| *exp > now + TOKEN_REFRESH_BEFORE)
            .map(|(t, _)| t.clone())
    }

    pub(crate) fn set_token(&self, id: u64, token: String, expires: SystemTime) {
        let mut map = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        map.insert(id, (token, expires));
    }

    /// Forgets installation `id`'s token (GitHub refused it: it was
    /// revoked, or the installation changed).
    pub(crate) fn forget(&self, id: u64) {
        let mut map = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        map.remove(&id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watched_file_is_read_again_when_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "one\n").unwrap();
        let w = Watched::new(path.clone(), "token file");
        assert_eq!(*w.get(parse_token).unwrap(), "one");
        std::fs::write(&path, "second\n").unwrap();
        assert_eq!(*w.get(parse_token).unwrap(), "second");
        std::fs::write(&path, "  \n").unwrap();
        let e = w.get(parse_token).unwrap_err();
        assert!(
            e.message.contains("the file is empty") && e.is_retry(),
            "{e}"
        );
        std::fs::remove_file(&path).unwrap();
        assert!(w
            .get(parse_token)
            .unwrap_err()
            .message
            .contains("cannot read the token file"));
    }
}
