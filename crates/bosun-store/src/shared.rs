//! What the replicas of `bosun serve` on one store share beside runs: the
//! dashboard's sessions ([`Session`], kept by the hash of their id, never
//! the id itself), secrets made once and then read by every replica
//! ([`Store::shared_secret`], e.g. the key of the forms' CSRF tokens) and
//! small versioned documents written by compare-and-set
//! ([`StoredDocument`], e.g. the dispatcher's plan).
//!
//! The store interprets none of it: a session's role is the caller's word,
//! a document's body the caller's bytes. Times are kept to the microsecond,
//! as every time of the store is.
//!
//! [`Store::shared_secret`]: crate::Store::shared_secret

use jiff::Timestamp;

/// A dashboard session as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// The lowercase hex SHA-256 of the session's id ([`session_id_hash`]):
    /// the key. The id itself (the cookie's value) is never stored.
    pub id_hash: String,
    /// What the session may do, in the caller's words (the store never
    /// reads it).
    pub role: String,
    /// When it ends: from then on it is not found.
    pub expires_at: Timestamp,
}

/// The key a session of id `id` (the cookie's value) is kept under: the
/// lowercase hex SHA-256 of its bytes.
pub fn session_id_hash(id: &str) -> String {
    crate::hash_hex(id.as_bytes())
}

/// A document as stored: its version and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredDocument {
    /// 1 for the first write, one more for each write after it.
    pub version: u64,
    /// What the last write put.
    pub body: Vec<u8>,
}

/// What a compare-and-set of document `name` answers when `expected` is
/// not its version (`found`, 0: absent).
pub fn conflict(name: &str, expected: u64, found: u64) -> crate::StoreError {
    crate::StoreError::Conflict(format!(
        "document {name} is at version {found}, not {expected}"
    ))
}

/// The sessions [`crate::Store::prune_sessions`] deletes from `sessions`
/// (id hash, expiry) at `now` to keep at most `keep`: the expired ones,
/// then the earliest to expire (ties by id hash), in that order.
pub(crate) fn doomed_sessions<'a>(
    sessions: impl Iterator<Item = (&'a str, Timestamp)>,
    now: Timestamp,
    keep: usize,
) -> Vec<String> {
    let mut live: Vec<(Timestamp, &str)> = Vec::new();
    let mut doomed = Vec::new();
    for (id, expires_at) in sessions {
        if expires_at <= now {
            doomed.push(id.to_string());
        } else {
            live.push((expires_at, id));
        }
    }
    live.sort_unstable();
    let over = live.len().saturating_sub(keep);
    doomed.extend(live[..over].iter().map(|(_, id)| id.to_string()));
    doomed
}

/// Refuses an `expected` version whose successor would not fit a signed
/// 64-bit column (see [`crate::Store::put_document`]).
pub fn check_expected(name: &str, expected: u64) -> Result<(), crate::StoreError> {
    if expected >= i64::MAX as u64 {
        return Err(crate::StoreError::Invalid(format!(
            "document {name}: version {expected} is out of range"
        )));
    }
    Ok(())
}
