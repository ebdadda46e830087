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
mod load;
pub mod resync;
mod view;
pub mod webhooks;

pub use view::{JobNames, RecordView, RepoView};

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use bosun_base::sync::{Lock, ReadWrite};
use bosun_config::source::{MemEntry, MemFiles};
use bosun_config::types::ProwConfig;
use bosun_config::{RepoJobs, RepoLoadOptions, Snapshot};
use bosun_forge::repos::{Backoff, Credentials, Remote};
use bosun_store::{RepoError, RepoJob, RepoRecord, RepoSnapshot, Retirement, StoreError};
use jiff::Timestamp;

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
            credentials: enabled_credentials(config),
            because: format!("in_repo_config.enabled[{key}]"),
        });
    }
    out
}

/// The credentials a token file or an SSH key file names (the token wins).
fn cred(token: &Option<String>, key: &Option<String>) -> Credentials {
    match (token, key) {
        (Some(t), _) => Credentials::TokenFile(PathBuf::from(t)),
        (None, Some(k)) => Credentials::SshKey(PathBuf::from(k)),
        (None, None) => Credentials::None,
    }
}

/// The credentials of repositories followed through
/// `in_repo_config.enabled` (its keys, webhooks under them): `repos.token_file`
/// or `repos.ssh_key_file`.
pub fn enabled_credentials(config: &ProwConfig) -> Credentials {
    cred(&config.repos.token_file, &config.repos.ssh_key_file)
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

/// A load waiting for the compose lock to be put in force
/// (`load.rs`).
struct Pending {
    repo: String,
    slot: Arc<Slot>,
    jobs: RepoJobs,
    /// The record's snapshot and retired jobs once in force (stored).
    next: RepoRecord,
    /// `Repos::central_generation` when it was loaded.
    central: u64,
    branch: String,
    kube: Vec<String>,
    commit: String,
    now: jiff::Timestamp,
    /// What became of it, once in force.
    done: Arc<Mutex<Option<Loaded>>>,
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
    /// Loads waiting for the compose lock (see `load.rs`).
    pending: Mutex<Vec<Pending>>,
    /// Moves with every [`Repos::compose`] (a central configuration put in
    /// force): a load made against the one before is checked again.
    central: std::sync::atomic::AtomicU64,
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
            pending: Mutex::default(),
        }
    }

    fn slot(&self, repo: &str) -> Option<Arc<Slot>> {
        self.slots.read_locked().get(repo).cloned()
    }

    /// The remote of a followed repository (its clone URI and
    /// credentials), `None` when `repo` is not followed.
    pub fn remote_of(&self, repo: &str) -> Option<Remote> {
        Some(self.slot(repo)?.state.locked().remote.clone())
    }

    /// Where the mirrors are (`DATA_DIR/repos`).
    pub fn mirrors(&self) -> &std::path::Path {
        &self.mirrors
    }

    fn central_generation(&self) -> u64 {
        self.central.load(std::sync::atomic::Ordering::Acquire)
    }

    /// `repos.resync` and `repos.gone_after` in force.
    pub fn timing(&self) -> (Duration, Duration) {
        *self.timing.locked()
    }

    /// `base` with `repo`'s jobs replaced by `change` put in force (see
    /// [`Shared::put_repo_jobs`]; `None`: its templates made again), the
    /// repositories' commits published first. The caller holds the compose
    /// lock.
    fn apply(
        &self,
        shared: &Shared,
        base: &Snapshot,
        repo: &str,
        change: Option<Option<RepoJobs>>,
    ) {
        shared.set_repo_commits(self.commits());
        match change {
            Some(jobs) => shared.put_repo_jobs(base, vec![(repo.to_string(), jobs)], &[]),
            None => shared.put_repo_jobs(base, Vec::new(), &[repo.to_string()]),
        }
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
                // Followed from its webhook: the credentials of enabled
                // keys, as configured now.
                st.remote.credentials = enabled_credentials(config);
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
        credentials: Credentials,
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
            credentials,
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
