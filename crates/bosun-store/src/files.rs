//! A run's log and artifacts as a shared store keeps them, so that every
//! replica of `bosun serve` on it can serve them: the leader, which runs the
//! local runs and copies Kubernetes pods' logs to its own disk, appends each
//! log to the store as it grows ([`crate::Store::append_run_log`]) and puts a
//! local run's artifacts there once it has ended
//! ([`crate::Store::put_run_files`]); any replica reads them back.
//!
//! A store no other process shares (SQLite, one machine) keeps none of it:
//! the files are on that machine already, and keeping them twice would only
//! double the disk they take.
//!
//! Both are bounded: a log is kept up to [`LOG_LIMIT`] bytes (then a line
//! saying so ends it), a run's artifacts up to [`FILES_LIMIT`] bytes in all
//! (the first files by path; a listing of a run whose files were cut says
//! so). The store deletes them with their run.

use jiff::Timestamp;

/// The most bytes of a run's log a store keeps.
pub const LOG_LIMIT: u64 = 64 * 1024 * 1024;

/// The most bytes of a run's artifacts a store keeps, all files together.
pub const FILES_LIMIT: u64 = 64 * 1024 * 1024;

/// The line that ends a log cut at [`LOG_LIMIT`].
pub const LOG_CUT: &str =
    "\nbosun: the log was cut here: replicas keep at most 64 MiB of a run's log in the store\n";

/// Part of a run's stored log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSlice {
    /// The bytes from the offset asked for (at most as many as asked).
    pub data: Vec<u8>,
    /// How many bytes the store holds in all.
    pub len: u64,
    /// Whether the log is whole: nothing will be appended to it.
    pub complete: bool,
}

/// A regular file of a run's artifacts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFile {
    /// Its path below the run's artifacts directory, `/`-separated, each
    /// component a plain name (no `.`, `..` or empty one).
    pub path: String,
    /// Its bytes.
    pub data: Vec<u8>,
    /// Its last modification, to the microsecond.
    pub modified: Option<Timestamp>,
}

/// A stored file without its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFileEntry {
    /// As [`RunFile::path`].
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
    /// As [`RunFile::modified`].
    pub modified: Option<Timestamp>,
}

/// A run's stored artifacts: every file, by path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFiles {
    /// Sorted by path (bytewise).
    pub files: Vec<RunFileEntry>,
    /// Whether files were left out to stay under [`FILES_LIMIT`].
    pub truncated: bool,
}

/// Checks a path of [`RunFile::path`]'s form.
pub fn check_path(path: &str) -> Result<(), crate::StoreError> {
    let ok = !path.is_empty()
        && !path.contains('\0')
        && path.split('/').all(|c| !matches!(c, "" | "." | ".."));
    if ok {
        Ok(())
    } else {
        Err(crate::StoreError::Invalid(format!(
            "bad artifact path {path:?}: plain names separated by `/` are expected"
        )))
    }
}

/// What of `files` a store keeps: those with a good path, first by path,
/// while the bytes stay within [`FILES_LIMIT`] (a file that would go past it
/// is left out, and so is every later one); and whether any was left out.
pub fn within_limit(mut files: Vec<RunFile>) -> Result<(Vec<RunFile>, bool), crate::StoreError> {
    for f in &files {
        check_path(&f.path)?;
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    files.dedup_by(|a, b| a.path == b.path);
    let mut total = 0u64;
    let mut kept = Vec::with_capacity(files.len());
    let all = files.len();
    for mut f in files {
        total += f.data.len() as u64;
        if total > FILES_LIMIT {
            break;
        }
        f.modified = f.modified.map(crate::run::micros);
        kept.push(f);
    }
    let truncated = kept.len() < all;
    Ok((kept, truncated))
}

/// What an append of `data` at `offset` adds to a log of `len` bytes (see
/// [`crate::Store::append_run_log`]): the part past `len`, cut at
/// [`LOG_LIMIT`] with [`LOG_CUT`] after it; and whether the log is whole
/// after it (`complete`, or cut). `None` when `offset` is past `len` (a gap).
pub fn appended(len: u64, offset: u64, data: &[u8], complete: bool) -> Option<(Vec<u8>, bool)> {
    if offset > len {
        return None;
    }
    let end = offset + data.len() as u64;
    if end <= len {
        return Some((Vec::new(), complete));
    }
    let new = &data[(len - offset) as usize..];
    let room = LOG_LIMIT.saturating_sub(len) as usize;
    if new.len() > room {
        let mut kept = new[..room].to_vec();
        kept.extend_from_slice(LOG_CUT.as_bytes());
        return Some((kept, true));
    }
    Some((new.to_vec(), complete))
}

/// The error of an append past a log's end.
pub fn gap(run: &str, len: u64, offset: u64) -> crate::StoreError {
    crate::StoreError::Conflict(format!(
        "the log of run {run} holds {len} bytes: an append at {offset} would leave a gap"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_append_adds_only_what_is_past_the_end() {
        assert_eq!(
            appended(0, 0, b"abc", false),
            Some((b"abc".to_vec(), false))
        );
        // Overlapping: only the new part.
        assert_eq!(appended(3, 1, b"bcde", true), Some((b"de".to_vec(), true)));
        // All known already.
        assert_eq!(appended(5, 0, b"abc", false), Some((vec![], false)));
        // A gap.
        assert_eq!(appended(3, 4, b"x", false), None);
    }

    #[test]
    fn a_log_is_cut_at_the_limit_and_ends_there() {
        let (kept, whole) = appended(LOG_LIMIT - 2, LOG_LIMIT - 2, b"abcd", false).unwrap();
        assert!(whole);
        assert_eq!(&kept[..2], b"ab");
        assert_eq!(&kept[2..], LOG_CUT.as_bytes());
    }

    #[test]
    fn files_past_the_limit_are_left_out_in_path_order() {
        let f = |p: &str, n: usize| RunFile {
            path: p.into(),
            data: vec![0; n],
            modified: None,
        };
        let half = (FILES_LIMIT / 2) as usize;
        let (kept, cut) = within_limit(vec![f("c", 1), f("a", half), f("b", half)]).unwrap();
        assert_eq!(
            kept.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert!(cut);
        assert!(within_limit(vec![f("a/../b", 1)]).is_err());
        assert!(within_limit(vec![f("/a", 1)]).is_err());
    }
}
