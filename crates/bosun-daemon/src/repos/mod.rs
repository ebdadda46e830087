//! Repositories as the source of jobs: every repository bosun follows from
//! its git remote, the snapshot of its own configuration in force, and how
//! a new head of its branch registers, changes or retires the jobs it
//! defines.
//!
//! - Which repositories are followed ([`wanted`]): `in_repo` entries with a
//!   `clone_uri`, `in_repo_config.enabled` `org/repo` keys (cloned from
//!   `repos.clone_base`), and repositories under an enabled `*` or `org` key
//!   from the first signed webhook bosun accepts for them (the record says
//!   why each is followed). A repository no longer wanted is retired.
//! - A repository's record (`bosun_store::RepoRecord`) holds its last good
//!   snapshot: the commit, the files read at it and the jobs they define.
//!   The daemon's job set is the central configuration plus every
//!   repository's last good jobs ([`Repos::compose`]), swapped in whole
//!   under one lock, as a reload swaps the central configuration. At start
//!   the stored snapshots are composed at once: nothing waits on git.
//! - A load ([`Repos::refresh`], one at a time per repository, git off the
//!   async runtime): the branch's head (the push's `after`, or
//!   `git ls-remote`), the mirror fetched to it (`bosun_forge::repos`), the
//!   configuration read at the commit without a checkout and checked
//!   against the central configuration in force. A good snapshot is stored,
//!   then put in force; a bad one leaves the last good one in force and its
//!   error (file:line, the commit) on the record. A snapshot applied is
//!   always the branch's head as fetched: a push older than the one applied
//!   is checked against the remote first, so an old delivery never wins and
//!   a force-push does.
//! - Periodics a newer snapshot drops are retired (recorded with the
//!   commit); their history and running runs are kept. A repository
//!   removed from the configuration, gone for `repos.gone_after`, or
//!   archived, deleted or renamed retires all its jobs; one that comes back
//!   gets them back (history is keyed by `org/repo:name`).
//! - An in-repo periodic's runs carry the branch head last seen as their
//!   refs' `base_sha` and the snapshot's commit as the
//!   [`crate::state::DEFINITION_COMMIT`] annotation, both in the scheduler's template:
//!   firing calls neither git nor the network.
//!
//! [`hook`] processes stored webhook deliveries; [`resync`] asks every
//! remote for its head on a timer; [`webhooks`] holds the intake's settings
//! and the HMAC secret file's tokens.

pub mod hook;
pub mod resync;
pub mod webhooks;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use bosun_base::sync::{Lock, ReadWrite};
use bosun_config::source::{FileSource, MemEntry, MemFiles};
use bosun_config::types::{JobSource, ProwConfig};
use bosun_config::{RepoJobs, RepoLoadOptions, Snapshot};
use bosun_forge::repos::{Backoff, CommitFiles, Credentials, ErrorKind, Head, Mirror, Remote};
use bosun_store::{
    RepoError, RepoJob, RepoRecord, RepoSnapshot, RetiredJob, Retirement, SeenHead, StoreError,
};
use jiff::Timestamp;
use serde::Serialize;

use crate::state::Shared;

/// A repository bosun should follow, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Want {
    /// `org/name`.
    pub repo: String,
    /// Its clone URI.
    pub clone_uri: String,
    /// The branch; `None`: the remote's `HEAD`.
    pub branch: Option<String>,
    /// How git authenticates.
    pub credentials: Credentials,
    /// Why it is followed (shown by the API).
    pub because: String,
}

/// The repositories `config` follows by itself (not through webhooks):
/// `in_repo` entries with a `clone_uri`, then `in_repo_config.enabled`
/// `org/repo` keys set true that no entry names.
pub fn wanted(config: &ProwConfig) -> Vec<Want> {
    let mut out: Vec<Want> = Vec::new();
    let cred = |token: &Option<String>, key: &Option<String>| match (token, key) {
        (Some(t), _) => Credentials::TokenFile(PathBuf::from(t)),
        (None, Some(k)) => Credentials::SshKey(PathBuf::from(k)),
        (None, None) => Credentials::None,
    };
    for (i, source) in config.in_repo.iter().enumerate() {
        let Some(uri) = source.clone_uri.as_deref().filter(|u| !u.is_empty()) else {
            continue;
        };
        out.push(Want {
            repo: source.repo.clone(),
            clone_uri: uri.to_string(),
            branch: source.branch.clone(),
            credentials: cred(&source.token_file, &source.ssh_key_file),
            because: format!("in_repo[{i}] of the configuration"),
        });
    }
    for (key, enabled) in &config.in_repo_config.enabled {
        if !*enabled || !key.contains('/') || out.iter().any(|w| &w.repo == key) {
            continue;
        }
        out.push(Want {
            repo: key.clone(),
            clone_uri: config.repos.clone_uri_for(key),
            branch: None,
            credentials: cred(&config.repos.token_file, &config.repos.ssh_key_file),
            because: format!("in_repo_config.enabled[{key}]"),
        });
    }
    out
}

/// The key of `in_repo_config.enabled` that enables `repo` (`org/repo`,
/// `org` or `*`, the most specific present), when it is enabled.
pub fn enabled_by(config: &ProwConfig, repo: &str) -> Option<String> {
    let enabled = &config.in_repo_config.enabled;
    let org = repo.split_once('/').map_or(repo, |(o, _)| o);
    for key in [repo, org, "*"] {
        if let Some(on) = enabled.get(key) {
            return on.then(|| key.to_string());
        }
    }
    None
}

/// One followed repository.
struct Slot {
    /// Held by the one load of this repository at a time.
    loading: tokio::sync::Mutex<()>,
    state: Mutex<SlotState>,
}

struct SlotState {
    record: RepoRecord,
    remote: Remote,
    /// Failed loads back off; a success resets it.
    backoff: Backoff,
    /// When the resync next asks the remote for its head.
    next_check: Instant,
    /// When the remote last answered (resync lag).
    last_answer: Option<Timestamp>,
}

/// The followed repositories (see the module's doc).
pub struct Repos {
    /// `DATA_DIR/repos`: a bare mirror per repository.
    mirrors: PathBuf,
    slots: RwLock<BTreeMap<String, Arc<Slot>>>,
    /// Held while the job set in force is changed (a repository's snapshot
    /// applied, a central reload composed): one change at a time, each on
    /// the one before.
    compose: Mutex<()>,
    /// Wakes the resync (a repository added, a retry due).
    pub resync_wake: tokio::sync::Notify,
    /// Wakes the delivery processor (a delivery stored).
    pub deliveries_wake: tokio::sync::Notify,
    /// `repos.resync`, `repos.gone_after` of the configuration in force.
    timing: Mutex<(Duration, Duration)>,
    /// Moves with every [`Repos::compose`] (a central configuration put in
    /// force): a load made against the one before is checked again.
    central: std::sync::atomic::AtomicU64,
}

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

/// What a load did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Loaded {
    /// A new snapshot is in force at this commit.
    Applied(String),
    /// The head is the commit in force already.
    Unchanged(String),
    /// The configuration at this commit has errors; the last good snapshot
    /// stays.
    Refused(String),
    /// The repository is retired; nothing was loaded.
    Retired,
}

/// Why a load could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadFailure {
    /// bosun does not follow it.
    #[error("bosun does not follow {0}")]
    NotFollowed(String),
    /// git failed (the error says what to check).
    #[error("{0}")]
    Git(String),
    /// The store failed.
    #[error("the store: {0}")]
    Store(String),
}

impl From<StoreError> for LoadFailure {
    fn from(e: StoreError) -> Self {
        LoadFailure::Store(e.to_string())
    }
}

/// The jobs of `jobs` by kind and name, as a record keeps them.
fn job_list(jobs: &RepoJobs) -> Vec<RepoJob> {
    let mut out: Vec<RepoJob> = Vec::new();
    let mut add = |kind: &str, name: &str| {
        out.push(RepoJob {
            kind: kind.to_string(),
            name: name.to_string(),
        })
    };
    for p in &jobs.periodics {
        add("periodic", p.name());
    }
    for p in &jobs.presubmits {
        add("presubmit", p.name());
    }
    for p in &jobs.postsubmits {
        add("postsubmit", p.name());
    }
    out.sort_by(|a, b| (&a.kind, &a.name).cmp(&(&b.kind, &b.name)));
    out.dedup();
    out
}

/// Where a repository's files are put for a load: `org/name@COMMIT`, which
/// names the repository and the commit in every diagnostic.
fn root_of(repo: &str, commit: &str) -> PathBuf {
    PathBuf::from(format!("{repo}@{commit}"))
}

/// A stored snapshot's files as a tree under their root.
fn tree_of(repo: &str, snapshot: &RepoSnapshot) -> (PathBuf, MemFiles) {
    let root = root_of(repo, &snapshot.commit);
    let mut files = MemFiles::new();
    files.insert(root.clone(), MemEntry::Dir);
    for dir in &snapshot.dirs {
        if !dir.is_empty() {
            files.insert(root.join(dir), MemEntry::Dir);
        }
    }
    for (path, text) in &snapshot.files {
        files.insert(root.join(path), MemEntry::File(text.as_bytes().to_vec()));
    }
    (root, files)
}

impl Repos {
    /// No repository yet; mirrors under `mirrors`.
    pub fn new(mirrors: PathBuf) -> Repos {
        Repos {
            mirrors,
            slots: RwLock::default(),
            compose: Mutex::new(()),
            resync_wake: tokio::sync::Notify::new(),
            deliveries_wake: tokio::sync::Notify::new(),
            timing: Mutex::new((Duration::from_secs(300), Duration::from_secs(3600))),
            central: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Where the mirrors are.
    pub fn mirrors(&self) -> &Path {
        &self.mirrors
    }

    fn slot(&self, repo: &str) -> Option<Arc<Slot>> {
        self.slots.read_locked().get(repo).cloned()
    }

    /// Every followed repository's name.
    pub fn names(&self) -> Vec<String> {
        self.slots.read_locked().keys().cloned().collect()
    }

    fn central_generation(&self) -> u64 {
        self.central.load(std::sync::atomic::Ordering::Acquire)
    }

    /// `repos.resync` and `repos.gone_after` in force.
    pub fn timing(&self) -> (Duration, Duration) {
        *self.timing.locked()
    }

    /// `base` with `change` put in force (see [`Shared::put_repo_jobs`]),
    /// the repositories' commits published first. The caller holds the
    /// compose lock.
    fn apply(
        &self,
        shared: &Shared,
        base: &Snapshot,
        repo: &str,
        change: Option<Option<RepoJobs>>,
    ) {
        shared.set_repo_commits(self.commits());
        shared.put_repo_jobs(base, repo, change);
    }

    /// Per followed repository that is not retired: its branch head last
    /// seen and the commit of its snapshot in force.
    pub fn commits(&self) -> HashMap<String, (String, String)> {
        let slots = self.slots.read_locked();
        let mut out = HashMap::with_capacity(slots.len());
        for (name, slot) in slots.iter() {
            let st = slot.state.locked();
            if st.record.retired.is_some() {
                continue;
            }
            if let Some(s) = &st.record.snapshot {
                let head = st
                    .record
                    .head
                    .as_ref()
                    .map_or(s.commit.clone(), |h| h.commit.clone());
                out.insert(name.clone(), (head, s.commit.clone()));
            }
        }
        out
    }

    /// Reads the stored records (at start, before anything loads).
    pub fn load_records(&self, records: Vec<RepoRecord>) {
        let now = Instant::now();
        let mut slots = self.slots.write_locked();
        for record in records {
            let remote = Remote {
                repo: record.repo.clone(),
                clone_uri: record.clone_uri.clone(),
                branch: record.branch.clone(),
                credentials: Credentials::None,
            };
            slots.insert(
                record.repo.clone(),
                Arc::new(Slot {
                    loading: tokio::sync::Mutex::new(()),
                    state: Mutex::new(SlotState {
                        record,
                        remote,
                        backoff: backoff(),
                        next_check: now,
                        last_answer: None,
                    }),
                }),
            );
        }
    }

    /// The central snapshot `central` with every followed repository's last
    /// good jobs, after following what `central`'s configuration wants
    /// (repositories added are loaded by the resync, which this wakes;
    /// repositories no longer wanted are retired). Each repository's stored
    /// files are checked against `central` again: one it refuses keeps the
    /// form `previous` (the snapshot in force before) has of its jobs, and
    /// the error is recorded. The caller holds [`Repos::composing`] until
    /// the result is in force.
    pub fn compose(
        &self,
        shared_store: &dyn bosun_store::Store,
        metrics: &crate::metrics::Metrics,
        central: Snapshot,
        previous: Option<&Snapshot>,
        kube_contexts: &[String],
        now: Timestamp,
    ) -> Snapshot {
        self.central
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        *self.timing.locked() = (
            central.config.repos.resync_interval(),
            central.config.repos.gone_after(),
        );
        self.follow_wanted(shared_store, &central.config, now);
        let slots: Vec<(String, Arc<Slot>)> = self
            .slots
            .read_locked()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut changes: Vec<(String, Option<RepoJobs>)> = Vec::new();
        for (name, slot) in slots {
            let mut st = slot.state.locked();
            if st.record.retired.is_some() {
                continue;
            }
            let Some(snapshot) = st.record.snapshot.clone() else {
                continue;
            };
            let branch = st
                .record
                .branch
                .clone()
                .unwrap_or_else(|| "main".to_string());
            match jobs_of(&central, &name, &branch, &snapshot, kube_contexts) {
                Ok(jobs) => {
                    if st
                        .record
                        .error
                        .as_ref()
                        .is_some_and(|e| e.commit.as_deref() == Some(&snapshot.commit))
                    {
                        st.record.error = None;
                        let _ = shared_store.put_repo(&st.record);
                    }
                    changes.push((name, Some(jobs)));
                }
                Err(diagnostics) => {
                    let kept = previous.and_then(|p| p.repo_jobs(&name));
                    metrics.set_repo_error(&name, true);
                    tracing::error!(
                        repo = %name,
                        commit = %snapshot.commit,
                        errors = diagnostics.len(),
                        "the central configuration refuses the repository's jobs; their last good form stays"
                    );
                    st.record.error = Some(RepoError {
                        commit: Some(snapshot.commit.clone()),
                        at: now,
                        message: format!(
                            "the central configuration refuses the jobs of {name} at {}; their last good form stays in force",
                            short(&snapshot.commit)
                        ),
                        diagnostics,
                    });
                    let _ = shared_store.put_repo(&st.record);
                    changes.push((name, kept));
                }
            }
        }
        if changes.is_empty() {
            central
        } else {
            central.with_repos(changes)
        }
    }

    /// The compose lock (see [`Repos::compose`]).
    pub fn composing(&self) -> std::sync::MutexGuard<'_, ()> {
        self.compose.locked()
    }

    /// Follows what `config` wants: new repositories added (due for a load
    /// at once), changed remotes updated, and repositories no longer wanted
    /// (nor enabled, for those followed through a webhook) retired.
    fn follow_wanted(&self, store: &dyn bosun_store::Store, config: &ProwConfig, now: Timestamp) {
        let wants = wanted(config);
        let mut added = false;
        let mut slots = self.slots.write_locked();
        for w in &wants {
            match slots.get(&w.repo) {
                Some(slot) => {
                    let mut st = slot.state.locked();
                    let remote = Remote {
                        repo: w.repo.clone(),
                        clone_uri: w.clone_uri.clone(),
                        branch: w.branch.clone(),
                        credentials: w.credentials.clone(),
                    };
                    let mut changed = false;
                    if st.remote != remote {
                        if st.remote.clone_uri != remote.clone_uri
                            || st.remote.branch != remote.branch
                        {
                            st.next_check = Instant::now();
                            added = true;
                        }
                        st.record.clone_uri = bosun_git::remote::display_url(&w.clone_uri);
                        if w.branch.is_some() {
                            st.record.branch.clone_from(&w.branch);
                        }
                        st.remote = remote;
                        changed = true;
                    }
                    if st.record.followed_because != w.because {
                        st.record.followed_because.clone_from(&w.because);
                        changed = true;
                    }
                    if st
                        .record
                        .retired
                        .as_ref()
                        .is_some_and(|r| r.reason.starts_with(REMOVED))
                    {
                        tracing::info!(repo = %w.repo, "followed again: its jobs come back");
                        st.record.retired = None;
                        st.next_check = Instant::now();
                        added = true;
                        changed = true;
                    }
                    if changed {
                        let _ = store.put_repo(&st.record);
                    }
                }
                None => {
                    let record = RepoRecord {
                        repo: w.repo.clone(),
                        clone_uri: bosun_git::remote::display_url(&w.clone_uri),
                        branch: w.branch.clone(),
                        followed_because: w.because.clone(),
                        followed_since: now,
                        snapshot: None,
                        head: None,
                        error: None,
                        last_webhook_at: None,
                        missing_since: None,
                        retired: None,
                        retired_jobs: Vec::new(),
                    };
                    let _ = store.put_repo(&record);
                    tracing::info!(repo = %w.repo, because = %w.because, "following a repository");
                    slots.insert(w.repo.clone(), new_slot(record, w));
                    added = true;
                }
            }
        }
        for (name, slot) in slots.iter() {
            if wants.iter().any(|w| &w.repo == name) {
                continue;
            }
            let mut st = slot.state.locked();
            if st.record.retired.is_some() {
                continue;
            }
            let webhook = st.record.followed_because.starts_with(WEBHOOK);
            if webhook && enabled_by(config, name).is_some() {
                continue;
            }
            tracing::info!(repo = %name, "no longer followed: its jobs are retired");
            st.record.retired = Some(Retirement {
                at: now,
                reason: format!(
                    "{REMOVED} (it was followed because of {})",
                    st.record.followed_because
                ),
                commit: st.record.snapshot.as_ref().map(|s| s.commit.clone()),
            });
            let _ = store.put_repo(&st.record);
        }
        drop(slots);
        if added {
            self.resync_wake.notify_one();
        }
    }

    /// Follows `repo` because a signed webhook came for it under the
    /// enabled key `key`; its clone URI is the one the forge sent. Whether
    /// it was new.
    pub fn follow_from_webhook(
        &self,
        store: &dyn bosun_store::Store,
        repo: &str,
        clone_uri: &str,
        key: &str,
        now: Timestamp,
    ) -> bool {
        let mut slots = self.slots.write_locked();
        if slots.contains_key(repo) {
            return false;
        }
        let w = Want {
            repo: repo.to_string(),
            clone_uri: clone_uri.to_string(),
            branch: None,
            credentials: Credentials::None,
            because: format!("{WEBHOOK} for {repo} under in_repo_config.enabled[{key}]"),
        };
        let record = RepoRecord {
            repo: repo.to_string(),
            clone_uri: bosun_git::remote::display_url(clone_uri),
            branch: None,
            followed_because: w.because.clone(),
            followed_since: now,
            snapshot: None,
            head: None,
            error: None,
            last_webhook_at: Some(now),
            missing_since: None,
            retired: None,
            retired_jobs: Vec::new(),
        };
        let _ = store.put_repo(&record);
        tracing::info!(repo, because = %w.because, "following a repository");
        slots.insert(repo.to_string(), new_slot(record, &w));
        true
    }

    /// Notes a webhook for `repo` (shown by the API).
    pub fn webhook_seen(&self, store: &dyn bosun_store::Store, repo: &str, now: Timestamp) {
        if let Some(slot) = self.slot(repo) {
            let mut st = slot.state.locked();
            st.record.last_webhook_at = Some(now);
            let _ = store.put_repo(&st.record);
        }
    }

    /// The branch followed for `repo`, when it is followed and known.
    pub fn branch(&self, repo: &str) -> Option<Option<String>> {
        let slot = self.slot(repo)?;
        let st = slot.state.locked();
        Some(
            st.record
                .branch
                .clone()
                .or_else(|| st.remote.branch.clone()),
        )
    }

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

    /// The repositories due for a resync at `now`, and the next instant one
    /// is due after them.
    pub fn due(&self, now: Instant) -> (Vec<String>, Option<Instant>) {
        let slots = self.slots.read_locked();
        let mut due = Vec::new();
        let mut next: Option<Instant> = None;
        for (name, slot) in slots.iter() {
            let st = slot.state.locked();
            if st
                .record
                .retired
                .as_ref()
                .is_some_and(|r| r.reason.starts_with(REMOVED))
            {
                continue;
            }
            let at = st.next_check;
            if at <= now {
                due.push(name.clone());
            } else {
                next = Some(next.map_or(at, |n| n.min(at)));
            }
        }
        (due, next)
    }

    /// How many followed repositories have no snapshot yet (their first
    /// load is to come).
    fn without_snapshot(&self) -> usize {
        let slots = self.slots.read_locked();
        slots
            .values()
            .filter(|s| {
                let st = s.state.locked();
                st.record.snapshot.is_none() && st.record.retired.is_none()
            })
            .count()
    }

    /// Seconds since each followed repository's remote last answered.
    pub fn lags(&self, now: Timestamp) -> Vec<(String, f64)> {
        let slots = self.slots.read_locked();
        slots
            .iter()
            .filter_map(|(name, slot)| {
                let st = slot.state.locked();
                let at = st.last_answer?;
                Some((
                    name.clone(),
                    (now.as_millisecond() - at.as_millisecond()) as f64 / 1000.0,
                ))
            })
            .collect()
    }

    /// Loads `repo` at its branch's head: `hint`, a commit a push named, or
    /// what the remote answers. One load at a time per repository; the git
    /// work runs off the async runtime. See the module's doc.
    pub async fn refresh(
        self: &Arc<Self>,
        shared: &Arc<Shared>,
        repo: &str,
        hint: Option<String>,
        by: &'static str,
    ) -> Result<Loaded, LoadFailure> {
        let slot = self
            .slot(repo)
            .ok_or_else(|| LoadFailure::NotFollowed(repo.to_string()))?;
        let held = slot.clone();
        let _one = held.loading.lock().await;
        let (me, shared, repo) = (self.clone(), shared.clone(), repo.to_string());
        let started = Instant::now();
        let result = tokio::task::spawn_blocking(move || me.load(&shared, &slot, &repo, hint, by))
            .await
            .unwrap_or_else(|e| Err(LoadFailure::Git(format!("the load panicked: {e}"))));
        tracing::debug!(elapsed = ?started.elapsed(), ?result, "repository load");
        result
    }

    /// [`Repos::refresh`]'s blocking part.
    fn load(
        &self,
        shared: &Shared,
        slot: &Slot,
        repo: &str,
        hint: Option<String>,
        by: &str,
    ) -> Result<Loaded, LoadFailure> {
        let metrics = &shared.metrics;
        let (remote, applied, retired) = {
            let st = slot.state.locked();
            (
                st.remote.clone(),
                st.record.snapshot.as_ref().map(|s| s.commit.clone()),
                st.record.retired.as_ref().map(|r| r.reason.clone()),
            )
        };
        // A repository retired as gone is still asked for: found again, its
        // jobs come back. Any other retirement ends only by what made it
        // (the configuration, an unarchive).
        let gone = match &retired {
            Some(reason) if reason.starts_with(GONE) => true,
            Some(_) => return Ok(Loaded::Retired),
            None => false,
        };
        let mirror = Mirror::open(&self.mirrors, repo);
        // A pushed commit the mirror knows as an ancestor of the one applied
        // is an old delivery or a force-push back: the remote says which.
        let stale_hint = match (&hint, &applied, &mirror) {
            (Some(h), Some(a), Some(m)) => h != a && m.is_ancestor(h, a).unwrap_or(false),
            _ => false,
        };
        if let (Some(h), Some(a)) = (&hint, &applied) {
            if h == a && slot.state.locked().record.error.is_none() {
                self.saw_head(shared, slot, h, by);
                return Ok(Loaded::Unchanged(a.clone()));
            }
        }
        let branch = remote
            .branch
            .clone()
            .or_else(|| slot.state.locked().record.branch.clone());
        let head = match (hint.filter(|_| !stale_hint), branch) {
            (Some(commit), Some(branch)) => Head { branch, commit },
            _ => match remote.head() {
                Ok(h) => h,
                Err(e) => return Err(self.git_failed(shared, slot, e)),
            },
        };
        slot.state.locked().last_answer = Some(shared.clock.now());
        if gone {
            tracing::info!(repo, "found again: its jobs come back");
            self.revive(shared, repo, GONE);
        }
        if applied.as_deref() == Some(head.commit.as_str())
            && slot.state.locked().record.error.is_none()
        {
            self.saw_head(shared, slot, &head.commit, by);
            return Ok(Loaded::Unchanged(head.commit));
        }
        let first = mirror.is_none();
        let started = Instant::now();
        if first {
            tracing::info!(repo, url = %remote.url(), "cloning the repository (its first load)");
        }
        let synced = match Mirror::sync(&self.mirrors, &remote, &head) {
            Ok(s) => s,
            Err(e) => return Err(self.git_failed(shared, slot, e)),
        };
        if first {
            let waiting = self.without_snapshot().saturating_sub(1);
            tracing::info!(repo, elapsed = ?started.elapsed(), waiting, "cloned; repositories still waiting for their first load: {waiting}");
        }
        let commit = synced.commit.clone();
        if let Some(a) = &applied {
            if a != &commit && !synced.mirror.is_ancestor(a, &commit).unwrap_or(false) {
                tracing::info!(repo, from = %a, to = %commit, "the branch was force-pushed: its new head applies");
            }
        }
        // Loaded off the compose lock, against the central configuration in
        // force; checked again under it if a central reload came between.
        let now = shared.clock.now();
        let central = self.central_generation();
        let base = shared.snapshot();
        let root = root_of(repo, &commit);
        let files = CommitFiles::open(synced.mirror.repo(), &commit, &root)
            .map_err(|e| LoadFailure::Git(e.to_string()))?;
        let opts = RepoLoadOptions {
            repo: repo.to_string(),
            branch: synced.branch.clone(),
            root: root.clone(),
            kubeconfig_clusters: kube_context_names(shared),
            schedule_check: Some(Arc::new(bosun_schedule::ConfigScheduleCheck)),
        };
        let loaded = bosun_config::load_repo(&base, &opts, &files);
        let mut st = slot.state.locked();
        st.record.branch = Some(synced.branch.clone());
        st.record.head = Some(SeenHead {
            commit: commit.clone(),
            at: now,
            by: by.to_string(),
        });
        st.record.missing_since = None;
        st.backoff.succeeded();
        let (resync, _) = self.timing();
        st.next_check = Instant::now() + resync;
        st.last_answer = Some(now);
        let Some(mut jobs) = loaded.jobs else {
            let errors: Vec<String> = loaded
                .diagnostics
                .iter()
                .filter(|d| d.is_error())
                .map(ToString::to_string)
                .collect();
            tracing::error!(repo, commit = %commit, errors = errors.len(), "the repository's configuration has errors; its last good snapshot stays in force");
            for e in &errors {
                tracing::error!(repo, "{e}");
            }
            st.record.error = Some(RepoError {
                commit: Some(commit.clone()),
                at: now,
                message: format!(
                    "{} error(s) in the configuration of {repo} at {}; the last good snapshot stays in force",
                    errors.len(),
                    short(&commit)
                ),
                diagnostics: errors,
            });
            shared.store.put_repo(&st.record)?;
            metrics.repo_load("error");
            metrics.set_repo_error(repo, true);
            drop(st);
            // The head moved: in-repo periodics' refs follow it.
            let _compose = self.compose.locked();
            self.apply(shared, &shared.snapshot(), repo, None);
            return Ok(Loaded::Refused(commit));
        };
        let mut contents = BTreeMap::new();
        for path in files.files_read() {
            let bytes = files
                .read(&root.join(&path))
                .map_err(|e| LoadFailure::Git(format!("{repo}@{commit}/{path}: {e}")))?;
            contents.insert(path, String::from_utf8_lossy(&bytes).into_owned());
        }
        let list = job_list(&jobs);
        let key = |j: &RepoJob| (j.kind.clone(), j.name.clone());
        // The record as it is once this snapshot is in force: stored first
        // (a restart composes what was applied), in memory with the job set
        // in force, under the compose lock, so that a reader holding it sees
        // both or neither.
        let mut next = st.record.clone();
        drop(st);
        let before: BTreeSet<(String, String)> = next
            .snapshot
            .as_ref()
            .map(|s| s.jobs.iter().map(key).collect())
            .unwrap_or_default();
        let after: BTreeSet<(String, String)> = list.iter().map(key).collect();
        for (kind, name) in before.difference(&after) {
            tracing::info!(repo, kind = %kind, job = %name, commit = %commit, "retired: its repository's configuration no longer defines it");
            next.retire_job(RetiredJob {
                kind: kind.clone(),
                name: name.clone(),
                at: now,
                commit: commit.clone(),
                reason: format!("no longer defined at {}", short(&commit)),
            });
        }
        next.retired_jobs
            .retain(|r| !after.contains(&(r.kind.clone(), r.name.clone())));
        next.snapshot = Some(RepoSnapshot {
            commit: commit.clone(),
            loaded_at: now,
            files: contents,
            dirs: files.dirs_listed(),
            jobs: list,
        });
        next.error = None;
        shared.store.put_repo(&next)?;
        let _compose = self.compose.locked();
        let refused = if self.central_generation() == central {
            None
        } else {
            let stored = next.snapshot.as_ref().expect("just set");
            let checked = jobs_of(
                &shared.snapshot(),
                repo,
                &synced.branch,
                stored,
                &opts.kubeconfig_clusters,
            );
            match checked {
                Ok(again) => {
                    jobs = again;
                    None
                }
                // The reload that came between refuses them: what it put in
                // force stays, and says why.
                Err(diagnostics) => Some(RepoError {
                    commit: Some(commit.clone()),
                    at: now,
                    message: format!(
                        "the central configuration refuses the jobs of {repo} at {}; their last good form stays in force",
                        short(&commit)
                    ),
                    diagnostics,
                }),
            }
        };
        {
            let mut st = slot.state.locked();
            st.record.snapshot = next.snapshot;
            st.record.retired_jobs = next.retired_jobs;
            st.record.error = refused.clone();
            if refused.is_some() {
                shared.store.put_repo(&st.record)?;
            }
        }
        if refused.is_some() {
            metrics.set_repo_error(repo, true);
            return Ok(Loaded::Refused(commit));
        }
        self.apply(shared, &shared.snapshot(), repo, Some(Some(jobs)));
        metrics.repo_load("success");
        metrics.set_repo_error(repo, false);
        tracing::info!(repo, commit = %commit, by, "repository configuration in force");
        Ok(Loaded::Applied(commit))
    }

    /// The head `commit` was seen (it is the one applied).
    fn saw_head(&self, shared: &Shared, slot: &Slot, commit: &str, by: &str) {
        let now = shared.clock.now();
        let mut st = slot.state.locked();
        let moved = st.record.head.as_ref().is_none_or(|h| h.commit != commit);
        st.record.head = Some(SeenHead {
            commit: commit.to_string(),
            at: now,
            by: by.to_string(),
        });
        st.record.missing_since = None;
        st.last_answer = Some(now);
        st.backoff.succeeded();
        let (resync, _) = self.timing();
        st.next_check = Instant::now() + resync;
        let _ = shared.store.put_repo(&st.record);
        drop(st);
        let repo = shared_repo_name(slot);
        shared.metrics.set_repo_error(&repo, false);
        if moved {
            let _compose = self.compose.locked();
            self.apply(shared, &shared.snapshot(), &repo, None);
        }
    }

    /// git failed for `slot`: the error recorded, a retry backed off; a
    /// repository not found on every attempt for `repos.gone_after` is
    /// retired.
    fn git_failed(
        &self,
        shared: &Shared,
        slot: &Slot,
        e: bosun_forge::repos::FollowError,
    ) -> LoadFailure {
        let now = shared.clock.now();
        let (resync, gone_after) = self.timing();
        let mut st = slot.state.locked();
        let wait = st.backoff.failed(Instant::now());
        st.next_check = Instant::now() + wait.min(resync);
        tracing::warn!(repo = %e.repo, error = %e, retry_in = ?wait, "cannot follow the repository");
        shared.metrics.repo_load("git_error");
        shared.metrics.set_repo_error(&e.repo, true);
        let mut retire = false;
        if e.kind == ErrorKind::NotFound {
            let since = *st.record.missing_since.get_or_insert(now);
            let gone =
                (now.as_millisecond() - since.as_millisecond()) as u128 >= gone_after.as_millis();
            if gone && st.record.retired.is_none() {
                st.record.retired = Some(Retirement {
                    at: now,
                    reason: format!("{GONE} since {since} ({e})"),
                    commit: st.record.snapshot.as_ref().map(|s| s.commit.clone()),
                });
                retire = true;
            }
        }
        st.record.error = Some(RepoError {
            commit: None,
            at: now,
            message: e.to_string(),
            diagnostics: Vec::new(),
        });
        let _ = shared.store.put_repo(&st.record);
        let repo = st.record.repo.clone();
        drop(st);
        if retire {
            tracing::warn!(repo = %repo, "gone for longer than repos.gone_after: its jobs are retired");
            let _compose = self.compose.locked();
            self.apply(shared, &shared.snapshot(), &repo, Some(None));
        }
        LoadFailure::Git(e.to_string())
    }

    /// Retires `repo`'s jobs for `reason` (a `repository` webhook). Whether
    /// it was followed and not retired.
    pub fn retire(&self, shared: &Shared, repo: &str, reason: String) -> bool {
        let Some(slot) = self.slot(repo) else {
            return false;
        };
        let now = shared.clock.now();
        {
            let mut st = slot.state.locked();
            if st.record.retired.is_some() {
                return false;
            }
            st.record.retired = Some(Retirement {
                at: now,
                reason,
                commit: st.record.snapshot.as_ref().map(|s| s.commit.clone()),
            });
            let _ = shared.store.put_repo(&st.record);
        }
        let _compose = self.compose.locked();
        self.apply(shared, &shared.snapshot(), repo, Some(None));
        true
    }

    /// Brings back a repository retired for `reason_prefix` (an archived one
    /// unarchived): its last good snapshot in force again, checked against
    /// the central configuration in force, and a load due.
    pub fn revive(&self, shared: &Shared, repo: &str, reason_prefix: &str) -> bool {
        let Some(slot) = self.slot(repo) else {
            return false;
        };
        let _compose = self.compose.locked();
        let base = shared.snapshot();
        let mut st = slot.state.locked();
        if !st
            .record
            .retired
            .as_ref()
            .is_some_and(|r| r.reason.starts_with(reason_prefix))
        {
            return false;
        }
        st.record.retired = None;
        st.record.missing_since = None;
        st.next_check = Instant::now();
        let _ = shared.store.put_repo(&st.record);
        let jobs = st.record.snapshot.as_ref().and_then(|s| {
            let branch = st.record.branch.clone().unwrap_or_else(|| "main".into());
            jobs_of(&base, repo, &branch, s, &kube_context_names(shared)).ok()
        });
        drop(st);
        if let Some(jobs) = jobs {
            self.apply(shared, &base, repo, Some(Some(jobs)));
        }
        self.resync_wake.notify_one();
        true
    }
}

/// Why a repository retired because the configuration no longer follows it
/// starts so.
const REMOVED: &str = "removed from the configuration";
/// Why a repository followed through a webhook is followed starts so.
const WEBHOOK: &str = "webhook";
/// Why a repository retired because its remote lost it starts so.
pub const GONE: &str = "gone: not found on every resync";
/// Why a repository retired because it was archived starts so.
pub const ARCHIVED: &str = "archived";

fn shared_repo_name(slot: &Slot) -> String {
    slot.state.locked().record.repo.clone()
}

fn backoff() -> Backoff {
    Backoff::new(Duration::from_secs(1), Duration::from_secs(300))
}

fn new_slot(record: RepoRecord, w: &Want) -> Arc<Slot> {
    Arc::new(Slot {
        loading: tokio::sync::Mutex::new(()),
        state: Mutex::new(SlotState {
            record,
            remote: Remote {
                repo: w.repo.clone(),
                clone_uri: w.clone_uri.clone(),
                branch: w.branch.clone(),
                credentials: w.credentials.clone(),
            },
            backoff: backoff(),
            next_check: Instant::now(),
            last_answer: None,
        }),
    })
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

fn kube_context_names(shared: &Shared) -> Vec<String> {
    shared.config_args.kube_context_names()
}

/// A stored snapshot's jobs, checked against `base`; the errors when it
/// refuses them.
fn jobs_of(
    base: &Snapshot,
    repo: &str,
    branch: &str,
    snapshot: &RepoSnapshot,
    kube_contexts: &[String],
) -> Result<RepoJobs, Vec<String>> {
    let (root, files) = tree_of(repo, snapshot);
    let opts = RepoLoadOptions {
        repo: repo.to_string(),
        branch: branch.to_string(),
        root,
        kubeconfig_clusters: kube_contexts.to_vec(),
        schedule_check: Some(Arc::new(bosun_schedule::ConfigScheduleCheck)),
    };
    let loaded = bosun_config::load_repo(base, &opts, &files);
    loaded.jobs.ok_or_else(|| {
        loaded
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(ToString::to_string)
            .collect()
    })
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

/// Whether a job source is `repo`'s own configuration.
pub fn is_repo_job(source: &JobSource, repo: &str) -> bool {
    matches!(source, JobSource::InRepo { repo: r, .. } if r == repo)
}
