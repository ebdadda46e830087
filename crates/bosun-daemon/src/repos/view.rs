//! Followed repositories as `GET /api/v1/repos`, `bosun repos` and the
//! dashboard show them: each record without its files' contents, its state
//! and the jobs in force from it, read under the compose lock so that a
//! record and the job set in force agree.

use std::sync::Arc;

use bosun_base::sync::{Lock, ReadWrite};
use bosun_config::Snapshot;
use bosun_store::{RepoError, RepoJob, RetiredJob, Retirement, SeenHead};
use jiff::Timestamp;
use serde::Serialize;

use super::{job_list, Repos, Slot, SlotState};
use crate::state::Shared;

/// A repository as `GET /api/v1/repos` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct RepoView {
    /// Its record, as stored (files left out).
    #[serde(flatten)]
    pub record: RecordView,
    /// `following`, `cloning` (no snapshot yet), `error` (the last load
    /// failed; the last good snapshot, if any, is in force) or `retired`.
    pub state: &'static str,
    /// Jobs in force from it, by kind.
    pub jobs_in_force: JobNames,
    /// When the remote last answered a resync or a load.
    pub last_answer_at: Option<Timestamp>,
}

/// A record without its files' contents.
#[derive(Debug, Clone, Serialize)]
pub struct RecordView {
    /// `org/name`.
    pub repo: String,
    /// Its clone URI (no credentials).
    pub clone_uri: String,
    /// The branch followed, once known.
    pub branch: Option<String>,
    /// Why it is followed.
    pub followed_because: String,
    /// Since when.
    pub followed_since: Timestamp,
    /// The commit of the snapshot in force.
    pub commit: Option<String>,
    /// When it was loaded.
    pub loaded_at: Option<Timestamp>,
    /// The files read at that commit.
    pub files: Vec<String>,
    /// The branch head last seen.
    pub head: Option<SeenHead>,
    /// The last load's error.
    pub error: Option<RepoError>,
    /// When the last webhook for it arrived.
    pub last_webhook_at: Option<Timestamp>,
    /// Since when every resync found it gone.
    pub missing_since: Option<Timestamp>,
    /// Its retirement, when retired.
    pub retired: Option<Retirement>,
    /// Jobs newer snapshots dropped.
    pub retired_jobs: Vec<RetiredJob>,
}

/// Job names by kind.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct JobNames {
    /// Periodics.
    pub periodics: Vec<String>,
    /// Presubmits.
    pub presubmits: Vec<String>,
    /// Postsubmits.
    pub postsubmits: Vec<String>,
}

impl JobNames {
    fn of(jobs: &[RepoJob]) -> JobNames {
        let mut n = JobNames::default();
        for j in jobs {
            match j.kind.as_str() {
                "periodic" => n.periodics.push(j.name.clone()),
                "presubmit" => n.presubmits.push(j.name.clone()),
                _ => n.postsubmits.push(j.name.clone()),
            }
        }
        n
    }
}

impl Repos {
    /// Every followed repository as the API shows it, with the jobs in
    /// force: read under the compose lock, so a repository's record and
    /// the job set in force agree.
    pub fn views(&self, shared: &Shared) -> Vec<RepoView> {
        let _compose = self.compose.locked();
        let snapshot = shared.snapshot();
        let snapshot = &*snapshot;
        let slots: Vec<Arc<Slot>> = self.slots.read_locked().values().cloned().collect();
        slots
            .iter()
            .map(|slot| {
                let st = slot.state.locked();
                view(&st, snapshot)
            })
            .collect()
    }

    /// One repository as the API shows it (see [`Repos::views`]).
    pub fn view(&self, repo: &str, shared: &Shared) -> Option<RepoView> {
        let slot = self.slot(repo)?;
        let _compose = self.compose.locked();
        let snapshot = &*shared.snapshot();
        let st = slot.state.locked();
        Some(view(&st, snapshot))
    }
}

fn view(st: &SlotState, snapshot: &Snapshot) -> RepoView {
    let r = &st.record;
    let state = if r.retired.is_some() {
        "retired"
    } else if r.error.is_some() {
        "error"
    } else if r.snapshot.is_none() {
        "cloning"
    } else {
        "following"
    };
    let in_force = snapshot
        .repo_jobs(&r.repo)
        .map(|j| JobNames::of(&job_list(&j)))
        .unwrap_or_default();
    RepoView {
        record: RecordView {
            repo: r.repo.clone(),
            clone_uri: r.clone_uri.clone(),
            branch: r.branch.clone(),
            followed_because: r.followed_because.clone(),
            followed_since: r.followed_since,
            commit: r.snapshot.as_ref().map(|s| s.commit.clone()),
            loaded_at: r.snapshot.as_ref().map(|s| s.loaded_at),
            files: r
                .snapshot
                .as_ref()
                .map(|s| s.files.keys().cloned().collect())
                .unwrap_or_default(),
            head: r.head.clone(),
            error: r.error.clone(),
            last_webhook_at: r.last_webhook_at,
            missing_since: r.missing_since,
            retired: r.retired.clone(),
            retired_jobs: r.retired_jobs.clone(),
        },
        state,
        jobs_in_force: in_force,
        last_answer_at: st.last_answer,
    }
}
