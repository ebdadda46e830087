//! bosun's run store: the single source of truth for runs.
//!
//! - [`run`]: the run model and Prow's state machine; every state change goes
//!   through [`run::apply`], which refuses illegal moves (nothing moves a completed
//!   run), and every store reports it to its [`TransitionObserver`] (metrics).
//! - [`Store`]: what the scheduler, controller and API need; [`memory::MemoryStore`]
//!   and the SQLite store (module [`sqlite`]) implement it and pass the same
//!   conformance suite (`tests/it/conformance.rs`).
//! - Scheduled periodic runs are unique by (periodic, scheduled_at, attempt): a
//!   second create of the same tick returns the existing run.
//! - Schedule state and tick outcomes live in their own tables, which retention
//!   never touches.
//! - [`repos`]: the repositories bosun follows (their last good configuration)
//!   and the webhook deliveries it accepted, kept before the forge is answered.
//! - [`reports`]: the report outbox, what bosun tells the forge about its runs
//!   (statuses, comments), kept until the forge has it, never an older state
//!   over a newer one. A run's change and the reports of it (asked of the
//!   [`ReportPolicy`] installed by [`Store::set_report_policy`]) are
//!   committed together: one is never kept without the other.
//! - [`shared`]: what the replicas of `bosun serve` on one store share
//!   beside runs: the dashboard's sessions, secrets made once (the CSRF
//!   key) and versioned documents written by compare-and-set (the
//!   dispatcher's plan).
//!
//! The store knows nothing of HTTP or executors.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod active;
pub mod clock;
pub mod files;
pub mod memory;
mod prepared;
pub mod reports;
pub mod repos;
pub mod run;
pub mod shared;
pub mod sqlite;
pub mod template;

use std::sync::Arc;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use files::{LogSlice, RunFile, RunFileEntry, RunFiles};
pub use prepared::{KeptFire, PreparedFires};
pub use reports::{
    Enqueued, NewReport, ReportCounts, ReportFailure, ReportKind, ReportOutcome, ReportPolicy,
    StoredReport,
};
pub use repos::{
    Accepted, NewDelivery, RepoError, RepoJob, RepoRecord, RepoSnapshot, RetiredJob, Retirement,
    SeenHead, StoredDelivery,
};
pub use run::{Labels, NewRun, Run, RunState, Spec, Transition};
pub use shared::{session_id_hash, Session, StoredDocument};

/// Store failures.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StoreError {
    /// No such run.
    #[error("run {0} not found")]
    NotFound(String),
    /// The state machine forbids the move.
    #[error("run {id} cannot move from {from} to {to}")]
    InvalidTransition {
        /// The run.
        id: String,
        /// Its state.
        from: RunState,
        /// The refused state.
        to: RunState,
    },
    /// The store cannot commit now (disk full, locked, I/O error); nothing was
    /// written. Retry later.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// Bad input (e.g. a stored value that does not decode).
    #[error("{0}")]
    Invalid(String),
    /// A fire prepared ahead ([`Store::prepare_fires`]) was not committed: its
    /// periodic changed after the fire was decided, or a run of its ticks
    /// exists. Nothing was written; decide again.
    #[error("periodic {0} changed since its fire was decided")]
    Stale(String),
    /// The write was made as the leader of a term that is over (a replica
    /// paused or cut off past its lease): nothing was written, and this
    /// process is no longer the leader.
    #[error("not the leader: {0}")]
    Fenced(String),
    /// A compare-and-set ([`Store::put_document`]) found another version
    /// than the one it expected: someone else wrote meanwhile. Nothing was
    /// written; read again and decide again.
    #[error("{0}")]
    Conflict(String),
}

/// What `create_run` did.
#[derive(Debug, Clone, PartialEq)]
pub enum Created {
    /// A new run, shared: the store's observers may keep this very copy.
    New(Arc<Run>),
    /// The unique key (periodic, scheduled_at, attempt) already had this run.
    Existing(Arc<Run>),
}

impl Created {
    /// The run, new or existing.
    pub fn run(&self) -> &Run {
        match self {
            Created::New(r) => r,
            Created::Existing(r) => r,
        }
    }
}

/// Which runs to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFilter {
    /// Job name.
    pub job: Option<String>,
    /// Periodic identity.
    pub periodic: Option<String>,
    /// State.
    pub state: Option<RunState>,
    /// Actual cluster.
    pub cluster: Option<String>,
    /// Configured cluster (the job's `cluster:`).
    pub configured_cluster: Option<String>,
    /// Configured cluster none of these.
    pub not_configured_clusters: Vec<String>,
    /// Job type (Prow's name).
    pub job_type: Option<String>,
    /// Repository, `org/repo`: runs whose refs (not extra refs) are of it.
    pub repo: Option<String>,
    /// Pull request number: runs whose refs' pulls hold it (a presubmit's
    /// pull, or one of a batch's). With `repo`, that repository's pull (the
    /// SQLite store finds them through an index of pulls either way).
    pub pull: Option<i64>,
    /// Head commit: runs whose refs hold a pull at this commit (with `pull`:
    /// that pull at this commit). Without `pull` the SQLite store reads every
    /// run's pulls: give `pull` with it.
    pub head_sha: Option<String>,
    /// Only runs that are not complete.
    pub active: bool,
    /// Oldest first instead of newest first.
    pub oldest_first: bool,
    /// At most this many (0: 100).
    pub limit: usize,
    /// Skip this many.
    pub offset: usize,
    /// Keyset pagination: only the runs that come after this run (by id) in
    /// the listing's order; a deep page then costs what the first one does.
    /// A run that no longer exists is [`StoreError::NotFound`].
    pub after: Option<String>,
    /// Keyset pagination backwards: the `limit` runs that come just before
    /// this run in the listing's order, returned in that order. A run that
    /// no longer exists is [`StoreError::NotFound`].
    pub before: Option<String>,
}

impl RunFilter {
    /// The listing is counted back from `before` (without `after`): it
    /// walks away from the listing's order, and its rows are put back in it.
    pub fn counted_back(&self) -> bool {
        self.before.is_some() && self.after.is_none()
    }
}

/// A periodic's schedule state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeriodicState {
    /// The periodic's identity.
    pub periodic: String,
    /// A hash of its current schedule definition; a change resets `first_seen`.
    pub schedule_hash: String,
    /// When the current schedule was first seen.
    pub first_seen: Timestamp,
    /// The latest tick with an outcome.
    pub last_tick: Option<Timestamp>,
    /// Paused by an operator.
    pub paused: bool,
    /// `queue_one`: the held tick.
    pub queued: Option<Timestamp>,
}

/// A periodic's skipped ticks ([`Store::skipped_ticks`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkippedTicks {
    /// The latest skip outcomes, newest first.
    pub recent: Vec<TickOutcome>,
    /// The ticks all of its skip outcomes hold.
    pub total: u64,
}

/// One recorded tick outcome (or a range of skipped ticks).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TickOutcome {
    /// The periodic's identity.
    pub periodic: String,
    /// First tick of the range.
    pub first_tick: Timestamp,
    /// Last tick of the range (= first for one tick).
    pub last_tick: Timestamp,
    /// Ticks in the range.
    pub count: u64,
    /// `run`, or the skip reason (`missed`, `overlap`, `paused`).
    pub outcome: String,
    /// The run, for `run`.
    pub run_id: Option<String>,
    /// When it was recorded.
    pub recorded_at: Timestamp,
}

impl TickOutcome {
    /// A `run` outcome without its run gets the id of its tick's run
    /// (attempt 0) among `created`.
    pub fn fill_run_id(&mut self, created: &[Created]) {
        if self.outcome == "run" && self.run_id.is_none() {
            self.run_id = created
                .iter()
                .map(Created::run)
                .find(|r| r.scheduled_at == Some(self.first_tick) && r.attempt == 0)
                .map(|r| r.id.clone());
        }
    }
}

/// One evaluation of a periodic, committed at once by [`Store::commit_fire`].
#[derive(Debug, Clone, PartialEq)]
pub struct Fire {
    /// Runs to create (scheduled: each under the unique tick key).
    pub runs: Vec<NewRun>,
    /// Tick outcomes, oldest first. A `run` outcome's `run_id` may be left
    /// empty: the store fills in the id of the tick's run (attempt 0).
    pub outcomes: Vec<TickOutcome>,
    /// The periodic's schedule state after this evaluation.
    pub state: PeriodicState,
}

/// Retained runs counted by the labels of Prow's `prowjobs` gauge.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunCount {
    /// Job name.
    pub job: String,
    /// Job type (Prow's name).
    pub job_type: String,
    /// State.
    pub state: String,
    /// `org` of the run's refs (else of its first extra refs).
    pub org: String,
    /// `repo`, likewise.
    pub repo: String,
    /// `base_ref`, likewise.
    pub base_ref: String,
    /// Where it ran (else where it was configured to).
    pub cluster: String,
    /// Labelled `prow.k8s.io/retest: "true"`.
    pub retest: bool,
    /// How many runs.
    pub count: u64,
}

impl RunCount {
    /// The labels of `run` with a count of one.
    pub fn of(run: &Run) -> RunCount {
        let refs = run.refs.as_deref().or(run.extra_refs.first());
        RunCount {
            job: run.job.clone(),
            job_type: run.job_type.as_str().to_string(),
            state: run.state.as_str().to_string(),
            org: refs.map(|r| r.org.clone()).unwrap_or_default(),
            repo: refs.map(|r| r.repo.clone()).unwrap_or_default(),
            base_ref: refs.and_then(|r| r.base_ref.clone()).unwrap_or_default(),
            cluster: run
                .cluster
                .clone()
                .unwrap_or_else(|| run.configured_cluster.clone()),
            retest: run.labels.get("prow.k8s.io/retest").map(String::as_str) == Some("true"),
            count: 1,
        }
    }
}

/// One job's demand over a window: what [`Store::job_demand`] returns.
#[derive(Debug, Clone, PartialEq)]
pub struct JobDemand {
    /// Job name.
    pub job: String,
    /// Its runs that reached `pending` in the window.
    pub runs: u64,
    /// Their run time in seconds: from `pending` to completion, or to `now`
    /// for a run still active (never negative).
    pub run_seconds: f64,
}

/// What the scheduler needs to know of a periodic's runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeriodicRuns {
    /// The most recently created run, whatever created it.
    pub last: Option<RunSummary>,
    /// Some run is not complete.
    pub active: bool,
}

/// The parts of a run a scheduling decision looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSummary {
    /// Created.
    pub created_at: Timestamp,
    /// Completed.
    pub completed_at: Option<Timestamp>,
    /// The tick it ran for.
    pub scheduled_at: Option<Timestamp>,
    /// The attempt.
    pub attempt: u32,
    /// Its state.
    pub state: RunState,
    /// Its id.
    pub id: String,
}

impl From<&Run> for RunSummary {
    fn from(r: &Run) -> Self {
        RunSummary {
            created_at: r.created_at,
            completed_at: r.completed_at,
            scheduled_at: r.scheduled_at,
            attempt: r.attempt,
            state: r.state,
            id: r.id.clone(),
        }
    }
}

/// What a run was before a committed transition, in the fields a transition
/// can change that name it in Prow's `prowjobs` gauge: its state, and its
/// cluster (a transition may decide it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Before<'a> {
    /// The state it left (the same as its state now for a revival or a new
    /// description of a waiting run).
    pub state: RunState,
    /// Its `cluster` before the transition (none: not decided yet).
    pub cluster: Option<&'a str>,
}

/// Told about every committed state change (creation included), in commit
/// order, and about the runs retention deletes.
///
/// Stores call [`TransitionObserver::on_change`] and
/// [`TransitionObserver::on_deleted`]; an observer that needs no more than
/// the state a run left implements `on_transition` (and `on_committed`) only.
pub trait TransitionObserver: Send + Sync {
    /// `from` is `None` when the run was just created.
    fn on_transition(&self, run: &Run, from: Option<RunState>);

    /// The same, for a store that keeps the committed run shared: an
    /// observer that keeps runs may keep this copy instead of its own.
    fn on_committed(&self, run: &Arc<Run>, from: Option<RunState>) {
        self.on_transition(run, from);
    }

    /// A committed creation (`before` none) or transition, with what the run
    /// was before it; `shared` is the store's shared copy of the run when it
    /// keeps one. By default `on_committed` with that copy, else
    /// `on_transition`.
    fn on_change(&self, run: &Run, shared: Option<&Arc<Run>>, before: Option<Before<'_>>) {
        let from = before.map(|b| b.state);
        match shared {
            Some(arc) => self.on_committed(arc, from),
            None => self.on_transition(run, from),
        }
    }

    /// Whether this observer may hear of the runs a burst of fires prepared
    /// ahead created ([`Store::commit_prepared`]) after their caller has
    /// its answer: a report that nothing acts on (metrics), or a view whose
    /// readers it wakes itself once the runs are in
    /// ([`TransitionObserver::after_prepared`]). The store still tells it
    /// before it commits anything else, so it hears of every change in
    /// commit order. By default false.
    fn after_answer(&self) -> bool {
        false
    }

    /// [`TransitionObserver::on_change`] of a creation by fires prepared
    /// ahead, for the observers told before the answer (`after` false) or
    /// after it (`after` true; see [`TransitionObserver::after_answer`]).
    fn on_prepared_created(&self, run: &Arc<Run>, after: bool) {
        if self.after_answer() == after {
            self.on_change(run, Some(run), None);
        }
    }

    /// Every observer told after the answer has heard of the runs of one
    /// commit of fires prepared ahead (called once per such commit that
    /// created runs). By default nothing.
    fn after_prepared(&self) {}

    /// Runs retention deleted ([`Store::delete_completed_before`]), once
    /// the deletion is committed: counted by the labels of Prow's `prowjobs`
    /// gauge, as [`Store::count_runs`] counts them (deleted runs are
    /// complete: none of them is changed again). By default nothing.
    fn on_deleted(&self, runs: &[RunCount]) {
        let _ = runs;
    }
}

/// Counts `runs` by the labels of Prow's `prowjobs` gauge (sorted), as
/// [`Store::count_runs`] does.
pub fn count_by_labels<'a>(runs: impl IntoIterator<Item = &'a Run>) -> Vec<RunCount> {
    let mut counts: std::collections::BTreeMap<RunCount, u64> = Default::default();
    for r in runs {
        *counts.entry(RunCount::of(r)).or_default() += 1;
    }
    counts
        .into_iter()
        .map(|(c, n)| RunCount { count: n, ..c })
        .collect()
}

/// Receives the result of [`Store::create_run_then`].
pub type CreateDone = Box<dyn FnOnce(Result<Created, StoreError>) + Send>;

/// What bosun needs from a run store.
pub trait Store: Send + Sync {
    /// Creates a run; for a scheduled periodic run whose (periodic, scheduled_at,
    /// attempt) exists, returns the existing one and creates nothing. Returns only
    /// after the run is durable.
    fn create_run(&self, new: NewRun, at: Timestamp) -> Result<Created, StoreError>;

    /// `create_run` without waiting: `done` gets the result once the run is
    /// durable (or the create failed), possibly on another thread. An async
    /// caller waits on a channel instead of holding a thread for the commit.
    fn create_run_then(&self, new: NewRun, at: Timestamp, done: CreateDone) {
        done(self.create_run(new, at));
    }

    /// Moves a run to another state (validated by the state machine).
    fn transition(&self, id: &str, t: Transition) -> Result<Run, StoreError>;

    /// Several transitions; a store may commit them together. Each succeeds or
    /// fails on its own.
    fn transitions(&self, batch: Vec<(String, Transition)>) -> Vec<Result<Run, StoreError>> {
        batch
            .into_iter()
            .map(|(id, t)| self.transition(&id, t))
            .collect()
    }

    /// One run.
    fn get(&self, id: &str) -> Result<Option<Run>, StoreError>;

    /// Runs matching `filter`, newest first (or oldest first).
    fn list(&self, filter: &RunFilter) -> Result<Vec<Run>, StoreError>;

    /// A job spec snapshot by content hash.
    fn spec(&self, hash: &str) -> Result<Option<serde_json::Value>, StoreError>;

    /// A periodic's schedule state.
    fn periodic_state(&self, periodic: &str) -> Result<Option<PeriodicState>, StoreError>;

    /// Writes a periodic's schedule state.
    fn put_periodic_state(&self, state: &PeriodicState) -> Result<(), StoreError>;

    /// Records tick outcomes (oldest first).
    fn record_outcomes(&self, outcomes: &[TickOutcome]) -> Result<(), StoreError>;

    /// A periodic's recorded outcomes, oldest first.
    fn outcomes(&self, periodic: &str) -> Result<Vec<TickOutcome>, StoreError>;

    /// A periodic's skipped ticks: the latest `limit` skip outcomes (newest
    /// first) and the number of ticks all of its skips hold. Unlike
    /// [`Store::outcomes`], its cost does not grow with the periodic's runs.
    fn skipped_ticks(&self, periodic: &str, limit: usize) -> Result<SkippedTicks, StoreError> {
        let mut recent: Vec<TickOutcome> = self
            .outcomes(periodic)?
            .into_iter()
            .filter(|o| o.outcome != "run")
            .collect();
        let total = recent.iter().map(|o| o.count).sum();
        recent.reverse();
        recent.truncate(limit);
        Ok(SkippedTicks { recent, total })
    }

    /// Every retained run, counted by Prow's `prowjobs` labels (sorted).
    fn count_runs(&self) -> Result<Vec<RunCount>, StoreError> {
        let mut counts: std::collections::BTreeMap<RunCount, u64> = Default::default();
        let mut offset = 0;
        loop {
            let page = self.list(&RunFilter {
                limit: 1000,
                offset,
                ..RunFilter::default()
            })?;
            for r in &page {
                *counts.entry(RunCount::of(r)).or_default() += 1;
            }
            if page.len() < 1000 {
                break;
            }
            offset += page.len();
        }
        Ok(counts
            .into_iter()
            .map(|(c, n)| RunCount { count: n, ..c })
            .collect())
    }

    /// Per job, the runs that reached `pending` at or after `since`
    /// (`pending_at >= since`, runs that never started do not count) and their
    /// run time: `completed_at - pending_at`, or `now - pending_at` for a run
    /// still active, each at least 0 (`now` is the caller's: the store reads
    /// no clock). Sorted by job name; jobs without such a run are absent.
    /// Retention bounds what it sees: deleted runs are gone.
    ///
    /// The default pages through [`Store::list`] (writes between pages may
    /// shift a run out of or into two pages); the stores here read it at once.
    fn job_demand(&self, since: Timestamp, now: Timestamp) -> Result<Vec<JobDemand>, StoreError> {
        let mut sums = DemandSums::default();
        let mut offset = 0;
        loop {
            let page = self.list(&RunFilter {
                limit: 1000,
                offset,
                ..RunFilter::default()
            })?;
            for r in &page {
                sums.add(r, since, now);
            }
            if page.len() < 1000 {
                break;
            }
            offset += page.len();
        }
        Ok(sums.finish())
    }

    /// Commits one evaluation of a periodic all at once: its runs, its tick
    /// outcomes and its schedule state, or nothing (a crash in between can
    /// neither record a tick twice nor lose one). Returns the runs, created or
    /// found.
    fn commit_fire(&self, fire: Fire, at: Timestamp) -> Result<Vec<Created>, StoreError>;

    /// Several fires; a store may commit them together, but each succeeds or
    /// fails on its own (one periodic's failure never holds back another's).
    fn commit_fires(
        &self,
        fires: Vec<Fire>,
        at: Timestamp,
    ) -> Vec<Result<Vec<Created>, StoreError>> {
        fires.into_iter().map(|f| self.commit_fire(f, at)).collect()
    }

    /// The schedule states of several periodics (absent: never evaluated).
    fn periodic_states(
        &self,
        periodics: &[String],
    ) -> Result<std::collections::HashMap<String, PeriodicState>, StoreError> {
        let mut out = std::collections::HashMap::new();
        for p in periodics {
            if let Some(s) = self.periodic_state(p)? {
                out.insert(p.clone(), s);
            }
        }
        Ok(out)
    }

    /// For several periodics: the most recent run and whether one is active.
    fn periodic_runs(
        &self,
        periodics: &[String],
    ) -> Result<std::collections::HashMap<String, PeriodicRuns>, StoreError> {
        let mut out = std::collections::HashMap::new();
        for p in periodics {
            let filter = |active| RunFilter {
                periodic: Some(p.clone()),
                active,
                limit: 1,
                ..RunFilter::default()
            };
            let last = self.list(&filter(false))?.first().map(RunSummary::from);
            let active = !self.list(&filter(true))?.is_empty();
            out.insert(p.clone(), PeriodicRuns { last, active });
        }
        Ok(out)
    }

    /// The current versions of `periodics`, in order: a periodic's version
    /// changes with every committed write that touches it (its runs, their
    /// states, its schedule state, its outcomes), and versions are taken before
    /// the reads a fire is decided on, so a version still current at commit
    /// time means the fire was decided on current data. None: this store does
    /// not track versions (and cannot take prepared fires).
    fn periodic_versions(&self, periodics: &[String]) -> Option<Vec<u64>> {
        let _ = periodics;
        None
    }

    /// Readies fires decided ahead of their instant, each with the version of
    /// its periodic it was decided on (from [`Store::periodic_versions`]): the
    /// store does now what a commit need not wait for (run ids, encoding, the
    /// check of the tick keys, storing what the runs share).
    fn prepare_fires(&self, fires: Vec<(Fire, u64)>) -> Result<PreparedFires, StoreError> {
        let _ = fires;
        Err(StoreError::Unavailable(
            "this store does not prepare fires".into(),
        ))
    }

    /// Commits prepared fires, as [`Store::commit_fires`] with `at` as their
    /// creation time, except that a fire whose periodic changed since its
    /// version was taken (or one of whose ticks has a run) writes nothing and
    /// fails with [`StoreError::Stale`]; the others are unaffected.
    fn commit_prepared(
        &self,
        prepared: PreparedFires,
        at: Timestamp,
    ) -> Vec<Result<Vec<Created>, StoreError>> {
        let _ = at;
        prepared
            .fires
            .into_iter()
            .map(|f| Err(StoreError::Stale(f.periodic)))
            .collect()
    }

    /// Deletes completed runs that completed before `cutoff`, except the latest
    /// run of each periodic (Prow's sinker); returns the deleted ids (their logs
    /// go too) and tells the observer their labels
    /// ([`TransitionObserver::on_deleted`]). Schedule state and outcomes are
    /// kept.
    fn delete_completed_before(&self, cutoff: Timestamp) -> Result<Vec<String>, StoreError>;

    // Followed repositories and webhook deliveries. The defaults refuse with
    // `Unavailable`, as a store that keeps neither (the test fakes of other
    // crates) would; the memory and SQLite stores keep both, and the
    // conformance suite holds them to the same rules.

    /// Writes a repository's record whole (replacing the one of its `repo`),
    /// durable on return. Of its `retired_jobs` the newest
    /// [`repos::RETIRED_JOBS_KEPT`] are kept.
    fn put_repo(&self, record: &RepoRecord) -> Result<(), StoreError> {
        let _ = record;
        Err(no_repos())
    }

    /// Every repository's record, sorted by `repo`.
    fn repos(&self) -> Result<Vec<RepoRecord>, StoreError> {
        Err(no_repos())
    }

    /// Deletes a repository's record; false when there was none.
    fn delete_repo(&self, repo: &str) -> Result<bool, StoreError> {
        let _ = repo;
        Err(no_repos())
    }

    /// Keeps a webhook delivery, durably (committed, and as durable as the
    /// store's commits are) before it returns, under the next seq (seqs
    /// increase strictly in acceptance order and are never reused).
    ///
    /// (forge, delivery_id) is unique: a second delivery of the same pair
    /// stores nothing and is [`Accepted::Duplicate`], with the first one's
    /// seq and whether it was processed, for as long as the first is kept
    /// (see [`Store::prune_deliveries`]). An empty delivery id is never a
    /// duplicate.
    fn accept_delivery(&self, d: NewDelivery) -> Result<Accepted, StoreError> {
        let _ = d;
        Err(no_repos())
    }

    /// The deliveries not processed yet whose seq is above `after_seq`, in
    /// seq order, at most `limit` of them.
    fn pending_deliveries(
        &self,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<StoredDelivery>, StoreError> {
        let _ = (after_seq, limit);
        Err(no_repos())
    }

    /// A delivery by seq, processed or not (a processed one without its
    /// body); none once pruned.
    fn delivery(&self, seq: u64) -> Result<Option<StoredDelivery>, StoreError> {
        let _ = seq;
        Err(no_repos())
    }

    /// Marks deliveries processed at `at`: their bodies go, their ids stay
    /// (a redelivery is still a duplicate). Seqs unknown or already
    /// processed are left as they are.
    fn mark_processed(&self, seqs: &[u64], at: Timestamp) -> Result<(), StoreError> {
        let _ = (seqs, at);
        Err(no_repos())
    }

    /// Deletes the processed deliveries received before `before` (their ids
    /// with them: a redelivery is then new); returns how many. Unprocessed
    /// ones are kept, however old.
    fn prune_deliveries(&self, before: Timestamp) -> Result<usize, StoreError> {
        let _ = before;
        Err(no_repos())
    }

    // Runs of a pull request.

    /// A pull request's presubmit runs that are not complete, oldest first:
    /// those to abort when the pull gets a new head or is closed.
    fn active_runs_of_pull(&self, repo: &str, number: i64) -> Result<Vec<Run>, StoreError> {
        let mut out = Vec::new();
        let filter = RunFilter {
            repo: Some(repo.to_string()),
            pull: Some(number),
            job_type: Some(bosun_config::types::JobType::Presubmit.as_str().to_string()),
            active: true,
            oldest_first: true,
            ..RunFilter::default()
        };
        list_all(self, filter, |r| {
            out.push(r);
            true
        })?;
        Ok(out)
    }

    /// The newest presubmit run of each job on a pull request's head commit
    /// `sha` (by creation), sorted by job name: what `/retest` and the
    /// failure comment look at.
    fn latest_runs_of_head(
        &self,
        repo: &str,
        number: i64,
        sha: &str,
    ) -> Result<Vec<Run>, StoreError> {
        let mut newest: std::collections::BTreeMap<String, Run> = Default::default();
        let filter = RunFilter {
            repo: Some(repo.to_string()),
            pull: Some(number),
            head_sha: Some(sha.to_string()),
            job_type: Some(bosun_config::types::JobType::Presubmit.as_str().to_string()),
            ..RunFilter::default()
        };
        // Newest first: the first run of a job seen is its newest.
        list_all(self, filter, |r| {
            newest.entry(r.job.clone()).or_insert(r);
            true
        })?;
        Ok(newest.into_values().collect())
    }

    // The report outbox (see [`reports`]). The defaults refuse with
    // `Unavailable`; the memory and SQLite stores keep it, held to the same
    // rules by the conformance suite.

    /// Installs the policy that says what to report of every run created and
    /// every state change, from this call on: its entries are queued in the
    /// commit of the change they report (see [`ReportPolicy`]). Set once, at
    /// start, before the first change to report: a second call is refused
    /// ([`StoreError::Invalid`]) and leaves the first policy in place. A
    /// store without a policy queues nothing of its changes (and pays
    /// nothing for it).
    fn set_report_policy(&self, policy: Arc<dyn ReportPolicy>) -> Result<(), StoreError> {
        let _ = policy;
        Err(no_reports())
    }

    /// Queues reports, in order, committed (as durable as the store's
    /// commits are) before it returns. Per entry: a version no newer than
    /// the newest its key has had is [`Enqueued::Stale`] and not queued;
    /// otherwise it is queued, due at its `created_at`, and the pending
    /// entry of its key, if one, is superseded (kept, never sent). A version
    /// above `i64::MAX` refuses the whole call ([`StoreError::Invalid`])
    /// before anything is written.
    fn enqueue_reports(&self, entries: Vec<NewReport>) -> Result<Vec<Enqueued>, StoreError> {
        let _ = entries;
        Err(no_reports())
    }

    /// The pending entries due at `now` (`next_attempt_at <= now`), oldest
    /// (first queued) first, at most `limit`. An entry stays pending while
    /// it is sent: a worker that dies mid-send finds it again.
    fn due_reports(&self, now: Timestamp, limit: usize) -> Result<Vec<StoredReport>, StoreError> {
        let _ = (now, limit);
        Err(no_reports())
    }

    /// The entry `id` at `version` was delivered at `at`: it is done, if it
    /// is still pending (true). An entry superseded meanwhile is left as it
    /// is (false): the newer one is still to be sent.
    fn report_delivered(&self, id: u64, version: u64, at: Timestamp) -> Result<bool, StoreError> {
        let _ = (id, version, at);
        Err(no_reports())
    }

    /// An attempt to deliver the entry `id` at `version` failed at `at`:
    /// [`ReportFailure::Retry`] counts the attempt and makes it due again
    /// at the retry's time; [`ReportFailure::Permanent`] ends it, refused
    /// with the forge's answer. Only a pending entry of that version changes
    /// (true).
    fn report_failed(
        &self,
        id: u64,
        version: u64,
        failure: ReportFailure,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        let _ = (id, version, failure, at);
        Err(no_reports())
    }

    /// A run's kept entries, whatever their outcome, in order of queueing.
    fn reports_of_run(&self, run_id: &str) -> Result<Vec<StoredReport>, StoreError> {
        let _ = run_id;
        Err(no_reports())
    }

    /// How many entries are pending, and how many refused ones are kept.
    fn report_counts(&self) -> Result<ReportCounts, StoreError> {
        Err(no_reports())
    }

    // Abort requests made on a replica that does not lead, for the leader
    // to carry out. The defaults refuse with `Unavailable`: a store no other
    // process shares (memory, SQLite) never needs them, its daemon keeps its
    // requests in memory; the PostgreSQL store keeps them.

    /// Records requests to abort runs, durably, for whichever replica leads
    /// (told at commit). A run already requested stays requested once.
    fn request_aborts(&self, ids: &[String], at: Timestamp) -> Result<(), StoreError> {
        let _ = (ids, at);
        Err(StoreError::Unavailable(
            "this store keeps no abort requests: no other process shares it".into(),
        ))
    }

    /// The runs whose abort was requested and which have not ended yet
    /// (a request goes with its run's move to a final state).
    fn abort_requests(&self) -> Result<Vec<String>, StoreError> {
        Err(StoreError::Unavailable(
            "this store keeps no abort requests: no other process shares it".into(),
        ))
    }

    // A run's log and artifacts for every replica to serve (see [`files`]).
    // The defaults refuse with `Unavailable` (`no_run_files`): a store
    // no other process shares (SQLite) keeps none, the files are on its
    // machine already; the memory and PostgreSQL stores keep them, held to
    // the same rules by the conformance suite. All go with their run.

    /// Appends to run `id`'s log `data`, its bytes from `offset` on; with
    /// `complete`, the log is whole after it. What the store holds already
    /// is not written again (an append may repeat or overlap an earlier
    /// one: only the bytes past the stored end are added), an append past
    /// the end is refused ([`StoreError::Conflict`], nothing written), and
    /// the log is cut at [`files::LOG_LIMIT`] (see [`files::appended`]).
    /// Returns the stored length after it. An unknown run is
    /// [`StoreError::NotFound`].
    fn append_run_log(
        &self,
        id: &str,
        offset: u64,
        data: &[u8],
        complete: bool,
    ) -> Result<u64, StoreError> {
        let _ = (id, offset, data, complete);
        Err(no_run_files())
    }

    /// At most `max` bytes of run `id`'s stored log from `offset` on, with
    /// its stored length and whether it is whole; `None` when nothing was
    /// appended for it (or the run is unknown).
    fn run_log(&self, id: &str, offset: u64, max: usize) -> Result<Option<LogSlice>, StoreError> {
        let _ = (id, offset, max);
        Err(no_run_files())
    }

    /// Keeps `files` as run `id`'s artifacts, replacing what was kept for
    /// it: those [`files::within_limit`] keeps, with whether any was left
    /// out (by it, or by the caller: `left_out`). A bad path refuses the
    /// whole put ([`StoreError::Invalid`]); an unknown run is
    /// [`StoreError::NotFound`].
    fn put_run_files(
        &self,
        id: &str,
        files: Vec<RunFile>,
        left_out: bool,
    ) -> Result<(), StoreError> {
        let _ = (id, files, left_out);
        Err(no_run_files())
    }

    /// Run `id`'s stored artifacts, without their bytes; `None` when none
    /// were put for it (or the run is unknown).
    fn run_files(&self, id: &str) -> Result<Option<RunFiles>, StoreError> {
        let _ = id;
        Err(no_run_files())
    }

    /// The ended runs whose stored log is not whole yet (the replica that
    /// shipped it stopped leading before the end), oldest first, at most
    /// `limit`: a new leader finishes them.
    fn logs_left_open(&self, limit: usize) -> Result<Vec<String>, StoreError> {
        let _ = limit;
        Err(no_run_files())
    }

    /// One stored artifact of run `id`, bytes and all.
    fn run_file(&self, id: &str, path: &str) -> Result<Option<RunFile>, StoreError> {
        let _ = (id, path);
        Err(no_run_files())
    }

    /// Deletes the entries that ended (delivered, refused, superseded)
    /// before `before`; returns how many. Pending ones are kept, however
    /// old. A key's newest version is forgotten with its last entry: a
    /// version of a key none of whose entries is kept is queued again.
    fn prune_reports(&self, before: Timestamp) -> Result<usize, StoreError> {
        let _ = before;
        Err(no_reports())
    }

    // What the replicas of `bosun serve` on one store share (see [`shared`]).
    // The defaults refuse with `Unavailable`; the memory and SQLite stores
    // keep all of it, held to the same rules by the conformance suite.

    /// Keeps a session under its `id_hash`, replacing the one kept under it
    /// (whatever its role or expiry), committed before it returns. Nothing
    /// else is deleted: bounding the sessions is [`Store::prune_sessions`]'s.
    fn put_session(&self, session: &Session) -> Result<(), StoreError> {
        let _ = session;
        Err(no_shared())
    }

    /// The session kept under `id_hash` if it is live at `now`
    /// (`expires_at > now`); none when there is none or it has expired (an
    /// expired session is not deleted by this read). `expires_at` comes back
    /// truncated to the microsecond.
    fn session(&self, id_hash: &str, now: Timestamp) -> Result<Option<Session>, StoreError> {
        let _ = (id_hash, now);
        Err(no_shared())
    }

    /// Deletes the session kept under `id_hash`; false when there was none
    /// (an expired one not pruned yet counts as one).
    fn delete_session(&self, id_hash: &str) -> Result<bool, StoreError> {
        let _ = id_hash;
        Err(no_shared())
    }

    /// Deletes every session expired at `now` (`expires_at <= now`), then,
    /// while more than `keep` are left, the one that expires first (of two
    /// that expire at the same microsecond, the one whose `id_hash` sorts
    /// first by its bytes), in one transaction; returns how many were
    /// deleted. With `keep` at most the bound less one before each
    /// [`Store::put_session`], a writer never holds more than the bound.
    fn prune_sessions(&self, now: Timestamp, keep: usize) -> Result<usize, StoreError> {
        let _ = (now, keep);
        Err(no_shared())
    }

    /// The secret kept under `name`, made once: when there is none,
    /// `candidate` is kept under `name` and returned; when there is one, it
    /// is returned and `candidate` is dropped. Insert-if-absent in one
    /// transaction, so callers that race with different candidates (two
    /// replicas starting at once) all get the same secret, the first one
    /// committed. A secret is never replaced or deleted.
    fn shared_secret(&self, name: &str, candidate: [u8; 32]) -> Result<[u8; 32], StoreError> {
        let _ = (name, candidate);
        Err(no_shared())
    }

    /// The document `name` with its version; none when it was never written.
    fn document(&self, name: &str) -> Result<Option<StoredDocument>, StoreError> {
        let _ = name;
        Err(no_shared())
    }

    /// Writes document `name` whole if its version is still `expected` (0:
    /// the document must not exist yet), in one transaction: the new body
    /// is kept at version `expected + 1`, which is returned. When the
    /// version is another (someone wrote meanwhile, or there is none while
    /// one was expected), nothing is written and the write fails with
    /// [`StoreError::Conflict`]: of concurrent writes expecting one version,
    /// exactly one succeeds. An `expected` of `i64::MAX` or more is refused
    /// ([`StoreError::Invalid`]) before anything is read or written (every
    /// version fits a signed 64-bit column).
    fn put_document(&self, name: &str, expected: u64, body: &[u8]) -> Result<u64, StoreError> {
        let _ = (name, expected, body);
        Err(no_shared())
    }
}

/// What a store that keeps no repositories or deliveries answers.
fn no_repos() -> StoreError {
    StoreError::Unavailable("this store keeps no repositories or webhook deliveries".into())
}

/// What a store that keeps no sessions, shared secrets or documents
/// answers.
fn no_shared() -> StoreError {
    StoreError::Unavailable("this store keeps no sessions, shared secrets or documents".into())
}

/// What a store that keeps no report outbox answers.
/// What a store that keeps no runs' logs and artifacts answers.
fn no_run_files() -> StoreError {
    StoreError::Unavailable(
        "this store keeps no run logs or artifacts: no other process shares it".into(),
    )
}

fn no_reports() -> StoreError {
    StoreError::Unavailable("this store keeps no report outbox".into())
}

/// What a second [`Store::set_report_policy`] answers.
pub fn policy_set_already() -> StoreError {
    StoreError::Invalid("a report policy is installed already".into())
}

/// Every run `filter` lists, in its order, read a page at a time through
/// keyset cursors (no run is skipped or listed twice while others are
/// created); `keep` says which to keep, and whether to read on.
fn list_all(
    store: &(impl Store + ?Sized),
    filter: RunFilter,
    mut keep: impl FnMut(Run) -> bool,
) -> Result<(), StoreError> {
    const PAGE: usize = 500;
    let mut filter = RunFilter {
        limit: PAGE,
        offset: 0,
        before: None,
        ..filter
    };
    loop {
        let page = store.list(&filter)?;
        let full = page.len() == PAGE;
        filter.after = page.last().map(|r| r.id.clone());
        for r in page {
            if !keep(r) {
                return Ok(());
            }
        }
        if !full {
            return Ok(());
        }
    }
}

/// A shared store.
pub type SharedStore = Arc<dyn Store>;

/// Per job, the runs and run time in microseconds that [`Store::job_demand`]
/// counts, summed exactly before the one conversion to seconds (so every
/// store answers the same floats).
#[derive(Default)]
pub(crate) struct DemandSums(std::collections::BTreeMap<String, (u64, i64)>);

impl DemandSums {
    /// Adds `run` to its job if it reached `pending` at or after `since`.
    pub(crate) fn add(&mut self, run: &Run, since: Timestamp, now: Timestamp) {
        let Some(pending) = run.pending_at.filter(|p| *p >= since) else {
            return;
        };
        let end = run.completed_at.unwrap_or(now);
        let micros = (end.as_microsecond() - pending.as_microsecond()).max(0);
        let sums = match self.0.get_mut(run.job.as_str()) {
            Some(s) => s,
            None => self.0.entry(run.job.clone()).or_default(),
        };
        sums.0 += 1;
        sums.1 = sums.1.saturating_add(micros);
    }

    /// The demand, by job name.
    pub(crate) fn finish(self) -> Vec<JobDemand> {
        self.0
            .into_iter()
            .map(|(job, (runs, micros))| JobDemand {
                job,
                runs,
                run_seconds: micros as f64 / 1e6,
            })
            .collect()
    }
}

/// Content hash of a job spec snapshot (SHA-256 of its canonical JSON).
pub fn spec_hash(spec: &serde_json::Value) -> String {
    hash_hex(&serde_json::to_vec(spec).expect("JSON values serialize"))
}

/// The lowercase hex SHA-256 of `bytes` (a spec's serialized JSON).
pub fn hash_hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// The job name in a periodic's identity: the identity itself for a central
/// periodic, `name` in an in-repo one's `ORG/REPO:name` (a job name never
/// holds a `:`, by Prow's rule for names).
pub fn periodic_job(identity: &str) -> &str {
    identity.rsplit_once(':').map_or(identity, |(_, name)| name)
}

/// A new run id: a lowercase UUIDv4 (DESIGN.md's run identity).
pub fn new_run_id() -> String {
    uuid::Uuid::new_v4().to_string()
}
