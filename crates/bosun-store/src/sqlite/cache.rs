//! What the writer keeps between batches instead of reading it back: the
//! last build id and seq, the specs and templates known to be stored, the
//! unfolded fire log's tick keys, the version stripes a batch touched, a
//! copy of each active run it wrote, and the database's run ids.

use super::error::unavailable;
use super::run_ids::RunIds;
use super::sql::last_counters;
use super::versions::{Touched, Versions};
use crate::StoreError;

/// What the writer keeps between batches instead of reading it back for every
/// insert. It is the only writer, so its copies are exact; they are reloaded
/// after a failed batch.
pub(super) struct WriterCache {
    /// The database's run ids (the seq of a run it creates names its id).
    pub(super) ids: RunIds,
    /// The last build id and seq handed out (None: read them from the store).
    pub(super) counters: Option<(i64, i64)>,
    /// Spec hashes known to be stored (specs are never deleted).
    pub(super) specs: std::collections::HashSet<String>,
    /// Run template hashes known to be stored (never deleted either).
    pub(super) templates: std::collections::HashSet<String>,
    /// Counts the times this cache was lost (a failed batch).
    pub(super) epoch: u64,
    /// Records in the unfolded fire log.
    pub(super) log_records: usize,
    /// The tick keys (periodic, scheduled_at, attempt) of the runs in the
    /// unfolded fire log: which record, which of its runs.
    pub(super) log_keys: std::collections::HashMap<(String, i64, u32), LogKey>,
    /// `log_keys` misses some records' keys.
    pub(super) log_keys_partial: bool,
    /// Version stripes of the periodics the current batch touched (bumped
    /// once it ends), or all of them.
    pub(super) touched: Touched,
    /// The active runs this writer created or moved, as committed (as far as
    /// the current batch: a failed batch drops the whole cache). A transition
    /// starts from this copy instead of reading and decoding the row again;
    /// a run missing here (created by an earlier writer, or through the fire
    /// log) is read. The copies are shared with the observer, which keeps the
    /// same active runs.
    pub(super) runs: crate::active::RunsById,
}

impl WriterCache {
    /// An empty cache: everything is read from the store when first needed.
    pub(super) fn new(ids: RunIds) -> Self {
        WriterCache {
            ids,
            counters: None,
            specs: Default::default(),
            templates: Default::default(),
            epoch: 0,
            log_records: 0,
            log_keys: Default::default(),
            log_keys_partial: false,
            touched: Default::default(),
            runs: Default::default(),
        }
    }

    /// Notes that the batch touched `periodic`.
    pub(super) fn touch(&mut self, periodic: &str) {
        self.touched.add(Versions::stripe(periodic));
    }
}

/// Where a run of the unfolded log is.
#[derive(Debug, Clone, Copy)]
pub(super) struct LogKey {
    pub(super) record: i64,
    pub(super) line: usize,
    pub(super) in_line: usize,
    pub(super) in_record: usize,
}

/// The last build id and seq handed out.
///
/// Build ids grow with seq (the single writer hands both out in order), so the
/// last one is the newest run's, in `runs` or in the fire log. The `meta` rows
/// keep the last build id and seq of the runs retention deleted (the newest
/// run may be one of them; a seq names its run's id), and the build id older
/// versions of bosun wrote with every batch. Nothing is written per batch:
/// that row's page was a frame of every commit.
pub(super) fn counters(
    tx: &rusqlite::Transaction<'_>,
    cache: &WriterCache,
) -> Result<(i64, i64), StoreError> {
    if let Some(c) = cache.counters {
        return Ok(c);
    }
    last_counters(tx).map_err(unavailable)
}
