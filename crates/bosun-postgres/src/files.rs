//! Runs' logs and artifacts in PostgreSQL (see [`bosun_store::files`]): a
//! log is its row in `run_logs` (stored length, whole or not) and its
//! chunks in `run_log_chunks`, one per append that added bytes, keyed by
//! where each starts; a run's artifacts are `run_files`, under the one row of
//! `run_file_sets` a put replaces. Everything is keyed by the run's `seq`
//! and goes with the run (`ON DELETE CASCADE`).
//!
//! An append locks its log's row first, so concurrent appends of one log
//! are ordered and each adds only what is past the end the other left.
//!
//! Each function answers the database's error apart from the store's own
//! refusal (`Ok(Err(..))`), for the caller's transaction to tell a conflict
//! to try again from an answer.

use bosun_store::files::{appended, gap, within_limit};
use bosun_store::{LogSlice, RunFile, RunFileEntry, RunFiles, StoreError};
use postgres::{Client, GenericClient, Transaction};

use crate::rows::{micros, opt_ts};

/// The database's error, or (inside) the store's answer.
type Answer<T> = Result<Result<T, StoreError>, postgres::Error>;

/// Run `id`'s `seq`, if the run exists.
fn seq(c: &mut impl GenericClient, id: &str) -> Result<Option<i64>, postgres::Error> {
    Ok(c.query_opt("SELECT seq FROM runs WHERE id = $1", &[&id])?
        .map(|r| r.get(0)))
}

/// See [`bosun_store::Store::append_run_log`].
pub(crate) fn append(
    tx: &mut Transaction<'_>,
    id: &str,
    offset: u64,
    data: &[u8],
    complete: bool,
) -> Answer<u64> {
    let Some(seq) = seq(tx, id)? else {
        return Ok(Err(StoreError::NotFound(id.to_string())));
    };
    tx.execute(
        "INSERT INTO run_logs(seq, len, complete) VALUES ($1, 0, false) ON CONFLICT (seq) DO NOTHING",
        &[&seq],
    )?;
    let row = tx.query_one(
        "SELECT len, complete FROM run_logs WHERE seq = $1 FOR UPDATE",
        &[&seq],
    )?;
    let (len, whole) = (row.get::<_, i64>(0) as u64, row.get::<_, bool>(1));
    if whole {
        return Ok(Ok(len));
    }
    let Some((new, done)) = appended(len, offset, data, complete) else {
        return Ok(Err(gap(id, len, offset)));
    };
    if !new.is_empty() {
        tx.execute(
            "INSERT INTO run_log_chunks(seq, start, data) VALUES ($1, $2, $3)",
            &[&seq, &(len as i64), &new],
        )?;
    }
    let end = len + new.len() as u64;
    tx.execute(
        "UPDATE run_logs SET len = $2, complete = $3 WHERE seq = $1",
        &[&seq, &(end as i64), &done],
    )?;
    Ok(Ok(end))
}

/// See [`bosun_store::Store::run_log`].
pub(crate) fn read_log(
    c: &mut Client,
    id: &str,
    offset: u64,
    max: usize,
) -> Result<Option<LogSlice>, postgres::Error> {
    let Some(row) = c.query_opt(
        "SELECT l.seq, l.len, l.complete FROM run_logs l JOIN runs r ON r.seq = l.seq WHERE r.id = $1",
        &[&id],
    )?
    else {
        return Ok(None);
    };
    let (seq, len, complete) = (
        row.get::<_, i64>(0),
        row.get::<_, i64>(1) as u64,
        row.get::<_, bool>(2),
    );
    let offset = offset.min(len);
    let mut data = Vec::new();
    if max > 0 && offset < len {
        // The chunk holding `offset` and those after it, until `max` bytes.
        let rows = c.query(
            "SELECT start, data FROM run_log_chunks
             WHERE seq = $1 AND start + length(data) > $2 AND start < $3
             ORDER BY start",
            &[
                &seq,
                &(offset as i64),
                &(offset.saturating_add(max as u64) as i64),
            ],
        )?;
        for r in rows {
            let start = r.get::<_, i64>(0) as u64;
            let chunk: &[u8] = r.get(1);
            let from = offset.saturating_sub(start) as usize;
            let room = max - data.len();
            let take = &chunk[from.min(chunk.len())..];
            data.extend_from_slice(&take[..take.len().min(room)]);
            if data.len() >= max {
                break;
            }
        }
    }
    Ok(Some(LogSlice {
        data,
        len,
        complete,
    }))
}

/// See [`bosun_store::Store::put_run_files`].
pub(crate) fn put(
    tx: &mut Transaction<'_>,
    id: &str,
    files: &[RunFile],
    left_out: bool,
) -> Answer<()> {
    let (kept, truncated) = match within_limit(files.to_vec()) {
        Ok((kept, cut)) => (kept, cut || left_out),
        Err(e) => return Ok(Err(e)),
    };
    let Some(seq) = seq(tx, id)? else {
        return Ok(Err(StoreError::NotFound(id.to_string())));
    };
    // The set's row first: it orders puts of one run, and its deletion
    // takes the files before.
    tx.execute("DELETE FROM run_file_sets WHERE seq = $1", &[&seq])?;
    tx.execute(
        "INSERT INTO run_file_sets(seq, truncated) VALUES ($1, $2)",
        &[&seq, &truncated],
    )?;
    let insert =
        tx.prepare("INSERT INTO run_files(seq, path, data, modified) VALUES ($1, $2, $3, $4)")?;
    for f in &kept {
        tx.execute(&insert, &[&seq, &f.path, &f.data, &f.modified.map(micros)])?;
    }
    Ok(Ok(()))
}

/// See [`bosun_store::Store::run_files`].
pub(crate) fn list(c: &mut Client, id: &str) -> Answer<Option<RunFiles>> {
    let Some(row) = c.query_opt(
        "SELECT s.seq, s.truncated FROM run_file_sets s JOIN runs r ON r.seq = s.seq WHERE r.id = $1",
        &[&id],
    )?
    else {
        return Ok(Ok(None));
    };
    let (seq, truncated) = (row.get::<_, i64>(0), row.get::<_, bool>(1));
    let rows = c.query(
        "SELECT path, length(data), modified FROM run_files WHERE seq = $1 ORDER BY path",
        &[&seq],
    )?;
    let mut files = Vec::with_capacity(rows.len());
    for r in rows {
        let modified = match opt_ts(r.get(2)) {
            Ok(m) => m,
            Err(e) => return Ok(Err(e)),
        };
        files.push(RunFileEntry {
            path: r.get(0),
            size: r.get::<_, i32>(1) as u64,
            modified,
        });
    }
    Ok(Ok(Some(RunFiles { files, truncated })))
}

/// See [`bosun_store::Store::run_file`].
pub(crate) fn file(c: &mut Client, id: &str, path: &str) -> Answer<Option<RunFile>> {
    let Some(row) = c.query_opt(
        "SELECT f.path, f.data, f.modified FROM run_files f JOIN runs r ON r.seq = f.seq
         WHERE r.id = $1 AND f.path = $2",
        &[&id, &path],
    )?
    else {
        return Ok(Ok(None));
    };
    Ok(opt_ts(row.get(2)).map(|modified| {
        Some(RunFile {
            path: row.get(0),
            data: row.get(1),
            modified,
        })
    }))
}
