//! Sessions, shared secrets and documents (see [`crate::shared`]) in SQLite:
//! the writes are the writer's requests ([`SharedOp`], one arm of
//! [`super::request::Op`]), so they share its batches and their fsync; the
//! reads go through the reader. A compare-and-set's check and write, and an
//! insert-if-absent's insert and read, are in the batch's transaction, so
//! the single writer orders concurrent ones.

use std::sync::mpsc::Sender;

use rusqlite::{params, Connection, OptionalExtension};

use super::codec::ts;
use super::error::unavailable;
use super::sql::{exec, row};
use crate::shared::{conflict, Session, StoredDocument};
use crate::StoreError;

/// A write of this module, with where its result goes.
pub(super) enum SharedOp {
    /// A session (its expiry in microseconds).
    PutSession(Session, Sender<Result<(), StoreError>>),
    DeleteSession(String, Sender<Result<bool, StoreError>>),
    /// Prune at a time (microseconds), keeping at most so many.
    PruneSessions(i64, usize, Sender<Result<usize, StoreError>>),
    /// A secret's name and candidate; the reply is the kept value's bytes
    /// (checked by the caller).
    Secret(String, [u8; 32], Sender<Result<Vec<u8>, StoreError>>),
    /// A document's name, the version expected and its new body.
    PutDocument(Box<(String, u64, Vec<u8>)>, Sender<Result<u64, StoreError>>),
}

/// A result held until the batch's commit, with where it goes.
pub(super) enum SharedReply {
    Unit(Sender<Result<(), StoreError>>, Result<(), StoreError>),
    Flag(Sender<Result<bool, StoreError>>, Result<bool, StoreError>),
    Count(Sender<Result<usize, StoreError>>, Result<usize, StoreError>),
    Bytes(
        Sender<Result<Vec<u8>, StoreError>>,
        Result<Vec<u8>, StoreError>,
    ),
    Version(Sender<Result<u64, StoreError>>, Result<u64, StoreError>),
}

/// The reply's error, if it has one.
macro_rules! reply_error {
    ($r:expr) => {
        match $r {
            SharedReply::Unit(_, Err(e)) => Some(e),
            SharedReply::Flag(_, Err(e)) => Some(e),
            SharedReply::Count(_, Err(e)) => Some(e),
            SharedReply::Bytes(_, Err(e)) => Some(e),
            SharedReply::Version(_, Err(e)) => Some(e),
            _ => None,
        }
    };
}

impl SharedReply {
    /// Whether the request failed on the database itself (a conflict is
    /// the request's own rule, not a failed write).
    pub(super) fn failed_write(&self) -> bool {
        reply_error!(self)
            .is_some_and(|e| matches!(e, StoreError::Unavailable(_) | StoreError::Invalid(_)))
    }

    /// The message of the request's failure.
    pub(super) fn error(&self) -> Option<String> {
        reply_error!(self).map(|e| match e {
            StoreError::Unavailable(m) => m.clone(),
            other => other.to_string(),
        })
    }

    /// Sends the result, once the batch is committed.
    pub(super) fn send(self) {
        match self {
            SharedReply::Unit(tx, r) => drop(tx.send(r)),
            SharedReply::Flag(tx, r) => drop(tx.send(r)),
            SharedReply::Count(tx, r) => drop(tx.send(r)),
            SharedReply::Bytes(tx, r) => drop(tx.send(r)),
            SharedReply::Version(tx, r) => drop(tx.send(r)),
        }
    }

    /// Fails it with the batch's failure.
    pub(super) fn fail(self, msg: &str) {
        let e = || unavailable(msg);
        match self {
            SharedReply::Unit(tx, _) => drop(tx.send(Err(e()))),
            SharedReply::Flag(tx, _) => drop(tx.send(Err(e()))),
            SharedReply::Count(tx, _) => drop(tx.send(Err(e()))),
            SharedReply::Bytes(tx, _) => drop(tx.send(Err(e()))),
            SharedReply::Version(tx, _) => drop(tx.send(Err(e()))),
        }
    }
}

impl SharedOp {
    /// Fails a request the writer did not apply.
    pub(super) fn fail(self, msg: &str) {
        let e = || unavailable(msg);
        match self {
            SharedOp::PutSession(_, tx) => drop(tx.send(Err(e()))),
            SharedOp::DeleteSession(_, tx) => drop(tx.send(Err(e()))),
            SharedOp::PruneSessions(_, _, tx) => drop(tx.send(Err(e()))),
            SharedOp::Secret(_, _, tx) => drop(tx.send(Err(e()))),
            SharedOp::PutDocument(_, tx) => drop(tx.send(Err(e()))),
        }
    }
}

/// Applies one request in the batch's transaction; its reply is held until
/// the commit.
pub(super) fn apply(tx: &rusqlite::Transaction<'_>, op: SharedOp) -> SharedReply {
    match op {
        SharedOp::PutSession(s, reply) => SharedReply::Unit(
            reply,
            exec(
                tx,
                "INSERT INTO sessions(id_hash, role, expires_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT(id_hash) DO UPDATE SET role = ?2, expires_at = ?3",
                params![s.id_hash, s.role, s.expires_at.as_microsecond()],
            )
            .map(drop)
            .map_err(unavailable),
        ),
        SharedOp::DeleteSession(id_hash, reply) => SharedReply::Flag(
            reply,
            exec(tx, "DELETE FROM sessions WHERE id_hash = ?1", [id_hash])
                .map(|n| n > 0)
                .map_err(unavailable),
        ),
        SharedOp::PruneSessions(now, keep, reply) => {
            SharedReply::Count(reply, prune(tx, now, keep).map_err(unavailable))
        }
        SharedOp::Secret(name, candidate, reply) => {
            SharedReply::Bytes(reply, secret(tx, &name, &candidate).map_err(unavailable))
        }
        SharedOp::PutDocument(doc, reply) => {
            let (name, expected, body) = *doc;
            SharedReply::Version(reply, put_document(tx, &name, expected, &body))
        }
    }
}

/// Deletes the expired sessions, then the earliest to expire beyond `keep`
/// (through the index by expiry); how many went.
fn prune(tx: &Connection, now: i64, keep: usize) -> rusqlite::Result<usize> {
    let expired = exec(tx, "DELETE FROM sessions WHERE expires_at <= ?1", [now])?;
    // Ties by id hash: its BINARY collation orders the bytes, as Rust does.
    let over = exec(
        tx,
        "DELETE FROM sessions WHERE id_hash IN (
            SELECT id_hash FROM sessions ORDER BY expires_at, id_hash
            LIMIT max(0, (SELECT COUNT(*) FROM sessions) - ?1))",
        [keep.min(i64::MAX as usize) as i64],
    )?;
    Ok(expired + over)
}

/// Keeps `candidate` under `name` unless a secret is kept there; the kept
/// one's bytes.
pub(super) fn secret(
    tx: &Connection,
    name: &str,
    candidate: &[u8; 32],
) -> rusqlite::Result<Vec<u8>> {
    exec(
        tx,
        "INSERT INTO secrets(name, value) VALUES (?1, ?2) ON CONFLICT(name) DO NOTHING",
        params![name, candidate.as_slice()],
    )?;
    row(
        tx,
        "SELECT value FROM secrets WHERE name = ?1",
        [name],
        |r| r.get(0),
    )
}

/// Writes document `name` at `expected + 1` if it is at `expected` (0:
/// absent); else a conflict, nothing written.
fn put_document(
    tx: &Connection,
    name: &str,
    expected: u64,
    body: &[u8],
) -> Result<u64, StoreError> {
    let found: Option<i64> = row(
        tx,
        "SELECT version FROM documents WHERE name = ?1",
        [name],
        |r| r.get(0),
    )
    .optional()
    .map_err(unavailable)?;
    let found = found.map_or(0, |v| v as u64);
    if found != expected {
        return Err(conflict(name, expected, found));
    }
    let version = expected + 1;
    exec(
        tx,
        "INSERT INTO documents(name, version, body) VALUES (?1, ?2, ?3)
         ON CONFLICT(name) DO UPDATE SET version = ?2, body = ?3",
        params![name, version as i64, body],
    )
    .map_err(unavailable)?;
    Ok(version)
}

/// The session kept under `id_hash`, if it is live at `now` (microseconds).
pub(super) fn session(
    c: &Connection,
    id_hash: &str,
    now: i64,
) -> rusqlite::Result<Option<Session>> {
    row(
        c,
        "SELECT id_hash, role, expires_at FROM sessions WHERE id_hash = ?1 AND expires_at > ?2",
        params![id_hash, now],
        |r| {
            Ok(Session {
                id_hash: r.get(0)?,
                role: r.get(1)?,
                expires_at: ts(r.get(2)?)?,
            })
        },
    )
    .optional()
}

/// Document `name`, if it was written.
pub(super) fn document(c: &Connection, name: &str) -> rusqlite::Result<Option<StoredDocument>> {
    row(
        c,
        "SELECT version, body FROM documents WHERE name = ?1",
        [name],
        |r| {
            Ok(StoredDocument {
                version: r.get::<_, i64>(0)? as u64,
                body: r.get(1)?,
            })
        },
    )
    .optional()
}
