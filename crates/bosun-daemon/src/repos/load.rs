//! A repository's load: its branch's head, its mirror fetched to it, its
//! configuration read at the commit and checked against the central one,
//! the record stored and the jobs put in force; and what ends or brings
//! back its jobs (a remote gone for `repos.gone_after`, a `repository`
//! webhook). See the module's doc ([`super`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bosun_base::sync::Lock;
use bosun_config::source::FileSource;
use bosun_config::RepoLoadOptions;
use bosun_forge::repos::{CommitFiles, ErrorKind, Head, Mirror};
use bosun_store::{RepoError, RepoJob, RepoSnapshot, RetiredJob, Retirement, SeenHead};

use super::{
    job_list, jobs_of, kube_context_names, root_of, shared_repo_name, short, LoadFailure, Loaded,
    Pending, Repos, Slot, GONE,
};
use crate::state::Shared;

impl Repos {
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
        slot: &Arc<Slot>,
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
        let Some(jobs) = loaded.jobs else {
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
        let done = Arc::new(Mutex::new(None));
        self.pending.locked().push(Pending {
            repo: repo.to_string(),
            slot: slot.clone(),
            jobs,
            next,
            central,
            branch: synced.branch.clone(),
            kube: opts.kubeconfig_clusters.clone(),
            commit: commit.clone(),
            now,
            done: done.clone(),
        });
        // Whoever takes the compose lock next puts every load waiting for it
        // in force, in one swap: this one did, or a holder before it.
        let compose = self.compose.locked();
        let batch = std::mem::take(&mut *self.pending.locked());
        if !batch.is_empty() {
            self.apply_pending(shared, batch);
        }
        drop(compose);
        let outcome = done
            .locked()
            .take()
            .expect("put in force by this load or one before it");
        if matches!(outcome, Loaded::Applied(_)) {
            tracing::info!(repo, commit = %commit, by, "repository configuration in force");
        }
        Ok(outcome)
    }

    /// Puts the loads of `batch` in force in one swap, each checked again
    /// if a central reload came since it was loaded (one the reload refuses
    /// keeps what the reload put in force, and says why). The caller holds
    /// the compose lock.
    fn apply_pending(&self, shared: &Shared, batch: Vec<Pending>) {
        let base = shared.snapshot();
        let generation = self.central_generation();
        let mut changes = Vec::new();
        for p in batch {
            let stored = p.next.snapshot.clone().expect("a load's snapshot");
            let checked = if p.central == generation {
                Ok(p.jobs)
            } else {
                jobs_of(&base, &p.repo, &p.branch, &stored, &p.kube)
            };
            let mut st = p.slot.state.locked();
            st.record.snapshot = Some(stored);
            st.record.retired_jobs = p.next.retired_jobs;
            let outcome = match checked {
                Ok(jobs) => {
                    st.record.error = None;
                    changes.push((p.repo.clone(), Some(jobs)));
                    shared.metrics.repo_load("success");
                    shared.metrics.set_repo_error(&p.repo, false);
                    Loaded::Applied(p.commit)
                }
                Err(diagnostics) => {
                    st.record.error = Some(RepoError {
                        commit: Some(p.commit.clone()),
                        at: p.now,
                        message: format!(
                            "the central configuration refuses the jobs of {} at {}; their last good form stays in force",
                            p.repo,
                            short(&p.commit)
                        ),
                        diagnostics,
                    });
                    if let Err(e) = shared.store.put_repo(&st.record) {
                        tracing::warn!(repo = %p.repo, error = %e, "cannot store the repository's error");
                    }
                    shared.metrics.set_repo_error(&p.repo, true);
                    Loaded::Refused(p.commit)
                }
            };
            drop(st);
            *p.done.locked() = Some(outcome);
        }
        if !changes.is_empty() {
            shared.set_repo_commits(self.commits());
            shared.put_repo_jobs(&base, changes, &[]);
        }
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
