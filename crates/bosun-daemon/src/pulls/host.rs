//! The trigger's [`Host`] for one event: who is trusted, labels, statuses
//! and pull requests from the forge's client; the pull request's changed
//! files and its merged in-repo configuration from the repository's mirror
//! (fetched once per event, with git, never from the forge); the
//! configuration in force for everything else. Blocking: it runs off the
//! async runtime.

use std::cell::RefCell;
use std::sync::Arc;

use bosun_config::types::JobSource;
use bosun_config::{RepoLoadOptions, Snapshot};
use bosun_forge::client::Client;
use bosun_forge::hook::{PullRequest, Push};
use bosun_forge::repos::{fetch_pull, fetch_pulls, CommitFiles, PullFetched, Remote, Wanted};
use bosun_forge::trigger::{Host, HostError, Presubmits};
use bosun_git::repo::Merge;

use crate::daemon::Daemon;

/// The host of one event's decision.
pub struct DaemonHost {
    daemon: Arc<Daemon>,
    remote: Remote,
    bot: String,
    /// The pull request's commits in the mirror, fetched at the first need.
    fetched: RefCell<Option<PullFetched>>,
    /// The job set the decided runs are made from: the one in force, or
    /// with the pull request's merged in-repo configuration composed over
    /// it.
    snapshot: RefCell<Arc<Snapshot>>,
}

/// The remote of `repo`: its followed remote, else `clone_url` (the
/// event's; when empty, `repos.clone_base`/`repo`) with the credentials of
/// `repos:`.
pub fn remote_of(daemon: &Daemon, repo: &str, clone_url: &str) -> Remote {
    if let Some(r) = daemon.repos.remote_of(repo) {
        return r;
    }
    let config = daemon.shared.snapshot();
    let clone_uri = if clone_url.is_empty() {
        format!(
            "{}/{repo}.git",
            config.config.repos.clone_base().trim_end_matches('/')
        )
    } else {
        clone_url.to_string()
    };
    let credentials = crate::repos::enabled_credentials(&config.config);
    Remote {
        repo: repo.to_string(),
        clone_uri,
        branch: None,
        credentials,
    }
}

impl DaemonHost {
    /// The host for an event of `repo`; an error when no forge client is
    /// configured (the trigger cannot tell who is trusted without one).
    pub fn new(daemon: &Arc<Daemon>, repo: &str, clone_url: &str) -> Result<DaemonHost, String> {
        let client = client(daemon).map_err(|e| e.0)?;
        let bot = daemon.pulls.bot(&client)?;
        Ok(DaemonHost {
            daemon: daemon.clone(),
            remote: remote_of(daemon, repo, clone_url),
            bot,
            fetched: RefCell::new(None),
            snapshot: RefCell::new(daemon.shared.snapshot()),
        })
    }

    /// The job set the decided runs are made from.
    pub fn into_snapshot(self) -> Arc<Snapshot> {
        self.snapshot.into_inner()
    }

    fn client(&self) -> Result<Arc<Client>, HostError> {
        client(&self.daemon)
    }

    /// The pull request's commits in the mirror (fetched once).
    fn fetch(&self, pr: &PullRequest) -> Result<PullFetched, HostError> {
        if let Some(f) = self.fetched.borrow().as_ref() {
            if f.head_sha == pr.head_sha {
                return Ok(f.clone());
            }
        }
        if let Some(f) = self
            .daemon
            .pulls
            .take_prefetched(&pr.repo, pr.number, &pr.head_sha)
        {
            *self.fetched.borrow_mut() = Some(f.clone());
            return Ok(f);
        }
        let f = fetch_pull(
            self.daemon.repos.mirrors(),
            &self.remote,
            &pr.base_ref,
            pr.number,
            &pr.head_sha,
        )
        .map_err(|e| HostError::new(format!("{}: {}", e.problem, e.check)))?;
        *self.fetched.borrow_mut() = Some(f.clone());
        Ok(f)
    }
}

fn client(daemon: &Daemon) -> Result<Arc<Client>, HostError> {
    daemon.pulls.client.clone().ok_or_else(|| {
        HostError::new(
            "no forge client is configured (--github-token-path or --github-app-id): who is trusted cannot be asked",
        )
    })
}

fn forge(e: bosun_forge::client::ForgeError) -> HostError {
    HostError::new(e.to_string())
}

fn number(n: i64) -> u64 {
    u64::try_from(n).unwrap_or_default()
}

impl Host for DaemonHost {
    fn bot(&self) -> &str {
        &self.bot
    }

    fn is_member(&self, org: &str, user: &str) -> Result<bool, HostError> {
        self.client()?.is_member(org, user).map_err(forge)
    }

    fn is_collaborator(&self, org: &str, repo: &str, user: &str) -> Result<bool, HostError> {
        self.client()?
            .is_collaborator(&format!("{org}/{repo}"), user)
            .map_err(forge)
    }

    fn labels(&self, repo: &str, n: i64) -> Result<Vec<String>, HostError> {
        self.client()?.issue_labels(repo, number(n)).map_err(forge)
    }

    fn pull_request(&self, repo: &str, n: i64) -> Result<PullRequest, HostError> {
        let p = self
            .client()?
            .pull_request(repo, number(n))
            .map_err(forge)?;
        Ok(PullRequest {
            repo: repo.to_string(),
            action: String::new(),
            number: n,
            author: p.author,
            sender: String::new(),
            head_sha: p.head_sha,
            head_ref: p.head_ref,
            base_ref: p.base_ref,
            base_sha: p.base_sha,
            draft: p.draft,
            merged: p.merged,
            open: p.open,
            mergeable: p.mergeable,
            label: None,
            labels: p.labels,
            base_changed: false,
            title: p.title,
            body: String::new(),
            html_url: p.html_url,
            clone_url: self.remote.clone_uri.clone(),
        })
    }

    fn branch_head(&self, repo: &str, branch: &str) -> Result<String, HostError> {
        // This event's repository: the base fetched with its pull request.
        if let Some(f) = self
            .fetched
            .borrow()
            .as_ref()
            .filter(|_| repo == self.remote.repo)
        {
            if let Ok(Some(sha)) = f
                .mirror
                .repo()
                .resolve(&format!("refs/bosun/bases/{branch}"))
            {
                return Ok(sha);
            }
        }
        let remote = Remote {
            branch: Some(branch.to_string()),
            ..self.remote.clone()
        };
        remote
            .head()
            .map(|h| h.commit)
            .map_err(|e| HostError::new(format!("{}: {}", e.problem, e.check)))
    }

    fn statuses(&self, repo: &str, sha: &str) -> Result<Vec<(String, String)>, HostError> {
        self.client()?.combined_statuses(repo, sha).map_err(forge)
    }

    fn presubmits(&self, pr: &PullRequest) -> Result<Presubmits, HostError> {
        let base = self.daemon.shared.snapshot();
        let all = base.presubmits.get(&pr.repo).cloned().unwrap_or_default();
        let in_repo = self.daemon.repos.remote_of(&pr.repo).is_some()
            || crate::repos::enabled_by(&base.config, &pr.repo).is_some();
        if !in_repo {
            return Ok(Presubmits {
                jobs: all,
                in_repo_error: None,
            });
        }
        let central: Vec<_> = all
            .into_iter()
            .filter(|j| j.source == JobSource::Central)
            .collect();
        let fetched = self.fetch(pr)?;
        let git = fetched.mirror.repo();
        let fallback = |why: String| {
            Ok(Presubmits {
                jobs: central.clone(),
                in_repo_error: Some(why),
            })
        };
        let commit = match git.merge(&fetched.base_sha, &[&fetched.head_sha]) {
            Ok(Merge::Merged { commit }) => commit,
            Ok(Merge::Conflict { paths }) => {
                return fallback(format!(
                    "pull request #{} does not merge into {} at {}: conflicts in {}",
                    pr.number,
                    pr.base_ref,
                    short(&fetched.base_sha),
                    paths.join(", ")
                ))
            }
            Err(e) => return Err(HostError::new(e.to_string())),
        };
        let root = std::path::PathBuf::from(format!("{}@{commit}", pr.repo));
        let files =
            CommitFiles::open(git, &commit, &root).map_err(|e| HostError::new(e.to_string()))?;
        let opts = RepoLoadOptions {
            repo: pr.repo.clone(),
            branch: pr.base_ref.clone(),
            root,
            kubeconfig_clusters: self.daemon.shared.config_args.kube_context_names(),
            schedule_check: Some(Arc::new(bosun_schedule::ConfigScheduleCheck)),
        };
        let loaded = bosun_config::load_repo(&base, &opts, &files);
        let Some(jobs) = loaded.jobs else {
            let errors: Vec<String> = loaded
                .diagnostics
                .iter()
                .filter(|d| d.is_error())
                .map(ToString::to_string)
                .collect();
            return fallback(format!(
                "the in-repo configuration of pull request #{} merged into {} does not load: {}",
                pr.number,
                pr.base_ref,
                errors.join("; ")
            ));
        };
        let composed = Arc::new(base.with_repos([(pr.repo.clone(), Some(jobs))]));
        let presubmits = composed
            .presubmits
            .get(&pr.repo)
            .cloned()
            .unwrap_or_default();
        *self.snapshot.borrow_mut() = composed;
        Ok(Presubmits {
            jobs: presubmits,
            in_repo_error: None,
        })
    }

    fn changed_files(&self, pr: &PullRequest) -> Result<Vec<String>, HostError> {
        let f = self.fetch(pr)?;
        f.mirror
            .repo()
            .changed_files(&f.base_sha, &f.head_sha, true)
            .map_err(|e| HostError::new(e.to_string()))
    }
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

/// Fetches `pulls` (one repository's, several) into the mirror in one `git
/// fetch` and keeps each for the event that needs it; a failure is logged
/// (each event then fetches on its own).
pub fn prefetch(daemon: &Arc<Daemon>, pulls: &[PullRequest]) {
    let mut by_repo: std::collections::BTreeMap<&str, Vec<&PullRequest>> = Default::default();
    for pr in pulls {
        by_repo.entry(pr.repo.as_str()).or_default().push(pr);
    }
    for (repo, prs) in by_repo {
        let remote = remote_of(daemon, repo, &prs[0].clone_url);
        let wanted: Vec<Wanted> = prs
            .iter()
            .map(|pr| Wanted {
                base_ref: pr.base_ref.clone(),
                number: pr.number,
                head_sha: pr.head_sha.clone(),
            })
            .collect();
        match fetch_pulls(daemon.repos.mirrors(), &remote, &wanted) {
            Ok(answers) => {
                for (pr, answer) in prs.iter().zip(answers) {
                    if let Ok(f) = answer {
                        daemon.pulls.put_prefetched(repo, pr.number, f);
                    }
                }
            }
            Err(e) => {
                tracing::warn!(repo, error = %e.problem, "the pull requests could not be fetched together; each is fetched on its own")
            }
        }
    }
}

/// The files a push changed: `git diff before after` from the mirror (the
/// pushed ref fetched into it); a new ref's (`before` all zeros) from the
/// payload's lists, as Prow does.
pub fn push_changes(daemon: &Arc<Daemon>, push: &Push) -> Result<Vec<String>, String> {
    if push.before.bytes().all(|b| b == b'0') {
        return Ok(push.changed_files.clone());
    }
    let remote = remote_of(daemon, &push.repo, &push.clone_url);
    let mirror =
        bosun_forge::repos::fetch_ref(daemon.repos.mirrors(), &remote, &push.git_ref, &push.after)
            .map_err(|e| format!("{}: {}", e.problem, e.check))?;
    mirror
        .repo()
        .changed_files(&push.before, &push.after, false)
        .map_err(|e| e.to_string())
}
