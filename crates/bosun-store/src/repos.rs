//! The repositories bosun follows and the webhook deliveries it accepted: what
//! the store keeps of them ([`RepoRecord`], one record per repository, replaced
//! whole; [`NewDelivery`], kept before the forge is answered, and
//! [`StoredDelivery`], handed back until it is processed).
//!
//! A delivery is kept durably before the HTTP 200, so a crash after the answer
//! replays it at the next start ([`Store::pending_deliveries`]); a forge that
//! delivers the same delivery id again is answered without processing it twice
//! ([`Accepted::Duplicate`]). The ids of processed deliveries are kept (without
//! their bodies) until [`Store::prune_deliveries`] lets them go.
//!
//! [`Store::pending_deliveries`]: crate::Store::pending_deliveries
//! [`Store::prune_deliveries`]: crate::Store::prune_deliveries

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// How many retired jobs a [`RepoRecord`] keeps: the oldest beyond this go.
pub const RETIRED_JOBS_KEPT: usize = 1000;

/// A repository bosun follows, as the store keeps it (one record per
/// repository, replaced whole).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoRecord {
    /// `org/name`, the key.
    pub repo: String,
    /// Where it is cloned from, for display: never with credentials.
    pub clone_uri: String,
    /// The tracked branch (none until the remote's HEAD is known).
    pub branch: Option<String>,
    /// Why bosun follows it, in the words of the configuration: e.g.
    /// `in_repo[0] in config.yaml`, `in_repo_config.enabled[acme/widgets]`,
    /// `webhook for acme/widgets under in_repo_config.enabled[acme]`.
    pub followed_because: String,
    /// Since when.
    pub followed_since: Timestamp,
    /// The last good snapshot of its configuration, the one in force.
    pub snapshot: Option<RepoSnapshot>,
    /// The branch head last seen.
    pub head: Option<SeenHead>,
    /// The last load's error (none once a later load succeeds).
    pub error: Option<RepoError>,
    /// When its last webhook came.
    pub last_webhook_at: Option<Timestamp>,
    /// The first resync that found the repository gone, for as long as it
    /// stays gone.
    pub missing_since: Option<Timestamp>,
    /// The whole repository is retired (removed from the configuration,
    /// gone, archived, deleted, renamed).
    pub retired: Option<Retirement>,
    /// Jobs a newer snapshot dropped, newest last; at most
    /// [`RETIRED_JOBS_KEPT`] (the stores drop the oldest beyond it).
    pub retired_jobs: Vec<RetiredJob>,
}

impl RepoRecord {
    /// Notes a retired job (newest last), dropping the oldest beyond
    /// [`RETIRED_JOBS_KEPT`].
    pub fn retire_job(&mut self, job: RetiredJob) {
        self.retired_jobs.push(job);
        self.cap_retired_jobs();
    }

    /// Drops the oldest retired jobs beyond [`RETIRED_JOBS_KEPT`].
    pub fn cap_retired_jobs(&mut self) {
        let over = self.retired_jobs.len().saturating_sub(RETIRED_JOBS_KEPT);
        self.retired_jobs.drain(..over);
    }
}

/// A repository's configuration as loaded from one commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoSnapshot {
    /// The commit it was loaded from.
    pub commit: String,
    /// When.
    pub loaded_at: Timestamp,
    /// The files read: path in the tree → content.
    pub files: BTreeMap<String, String>,
    /// The directories listed (`""`: the root).
    pub dirs: Vec<String>,
    /// The jobs it defines.
    pub jobs: Vec<RepoJob>,
}

/// A job a snapshot defines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoJob {
    /// `periodic`, `presubmit` or `postsubmit`.
    pub kind: String,
    /// Its name.
    pub name: String,
}

/// A branch head as seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeenHead {
    /// The commit.
    pub commit: String,
    /// When it was seen.
    pub at: Timestamp,
    /// How: `push`, `resync`, `refresh`, `clone`.
    pub by: String,
}

/// Why a load of a repository's configuration failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoError {
    /// The commit, if one was read.
    pub commit: Option<String>,
    /// When.
    pub at: Timestamp,
    /// What failed.
    pub message: String,
    /// The configuration's diagnostics, one a line.
    pub diagnostics: Vec<String>,
}

/// A whole repository retired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retirement {
    /// When.
    pub at: Timestamp,
    /// Why (removed from the configuration, gone, archived, deleted, renamed).
    pub reason: String,
    /// The commit that retired it, if one did.
    pub commit: Option<String>,
}

/// A job a newer snapshot dropped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetiredJob {
    /// `periodic`, `presubmit` or `postsubmit`.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// When.
    pub at: Timestamp,
    /// The commit whose snapshot dropped it.
    pub commit: String,
    /// Why.
    pub reason: String,
}

/// A webhook delivery to keep before answering the forge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewDelivery {
    /// `github`, `gitea` or `gitlab`.
    pub forge: String,
    /// The event's name, as the forge sent it.
    pub event: String,
    /// The forge's delivery id; empty when it sent none (GitLab may omit
    /// `Idempotency-Key`): such a delivery is never a duplicate.
    pub delivery_id: String,
    /// The repository it is about, if any (`org/name`).
    pub repo: Option<String>,
    /// The body, as received.
    pub body: Vec<u8>,
    /// When it was received (kept to the microsecond).
    pub received_at: Timestamp,
}

/// A kept delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredDelivery {
    /// Its place in acceptance order (strictly increasing, never reused).
    pub seq: u64,
    /// `github`, `gitea` or `gitlab`.
    pub forge: String,
    /// The event's name.
    pub event: String,
    /// The forge's delivery id (may be empty).
    pub delivery_id: String,
    /// The repository it is about, if any.
    pub repo: Option<String>,
    /// The body (empty once the delivery is processed).
    pub body: Vec<u8>,
    /// When it was received.
    pub received_at: Timestamp,
}

/// What [`Store::accept_delivery`](crate::Store::accept_delivery) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepted {
    /// Kept, under this seq.
    New {
        /// Its seq.
        seq: u64,
    },
    /// The forge's delivery id was kept already: nothing was stored.
    Duplicate {
        /// The first delivery's seq.
        seq: u64,
        /// Whether the first was processed.
        processed: bool,
    },
}

impl Accepted {
    /// The seq of the delivery kept, new or first.
    pub fn seq(&self) -> u64 {
        match self {
            Accepted::New { seq } | Accepted::Duplicate { seq, .. } => *seq,
        }
    }
}
