//! Which jobs run: Prow's branch and change matching (`pkg/config/jobs.go`)
//! and its presubmit filters (`pkg/pjutil/filter.go`).
//!
//! - Branches: `skip_branches` first, then `branches`; each list is joined
//!   with `|` into one **unanchored** expression, as Prow compiles it, so
//!   `branches: [main]` also matches `maintenance` (anchor with `^main$`).
//! - Changes: `run_if_changed` runs when any changed file matches;
//!   `skip_if_only_changed` runs when any does not; no changed file runs
//!   neither. Changed files are asked for only when such a job has to be
//!   decided, and at most once ([`ChangedFiles`]).
//! - A filter says of each job whether it is a candidate, whether it is
//!   forced (runs without looking at changes) and what it defaults to when
//!   its changes cannot say; several filters of one comment are a union,
//!   the first that takes a job deciding for it ([`Filter::Any`]).
//!
//! The job regexes were checked when the configuration loaded; one that does
//! not compile anyway matches nothing.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap, HashSet};

use bosun_config::{Postsubmit, Presubmit};
use regex::Regex;

use super::commands::Commands;
use super::HostError;

/// `pattern` compiled, from a per-thread cache (the same few branch and
/// trigger expressions recur across every job of a repository).
fn matches(pattern: &str, text: &str) -> bool {
    thread_local! {
        static CACHE: RefCell<HashMap<String, Option<Regex>>> = RefCell::new(HashMap::new());
    }
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() > 4096 {
            c.clear();
        }
        c.entry(pattern.to_owned())
            .or_insert_with(|| Regex::new(pattern).ok())
            .as_ref()
            .is_some_and(|re| re.is_match(text))
    })
}

/// Prow's `Brancher.ShouldRun`: whether a job with these `branches` and
/// `skip_branches` runs against `branch`.
pub fn branch_matches(branches: &[String], skip_branches: &[String], branch: &str) -> bool {
    if !skip_branches.is_empty() && matches(&skip_branches.join("|"), branch) {
        return false;
    }
    branches.is_empty() || matches(&branches.join("|"), branch)
}

/// Prow's `RegexpChangeMatcher.RunsAgainstChanges`.
pub fn runs_against_changes(
    run_if_changed: Option<&str>,
    skip_if_only_changed: Option<&str>,
    files: &[String],
) -> bool {
    let run = run_if_changed.filter(|p| !p.is_empty());
    let skip = skip_if_only_changed.filter(|p| !p.is_empty());
    files.iter().any(|f| match (run, skip) {
        (Some(p), _) => matches(p, f),
        (None, Some(p)) => !matches(p, f),
        (None, None) => false,
    })
}

type Fetch<'a, E> = Box<dyn FnOnce() -> Result<Vec<String>, E> + 'a>;

/// The changed files of an event, asked for on first use only and then
/// kept (Prow's deferred changed-files provider).
pub struct ChangedFiles<'a, E> {
    fetch: Option<Fetch<'a, E>>,
    files: Option<Vec<String>>,
}

impl<'a, E> ChangedFiles<'a, E> {
    /// Files got by calling `fetch` when first needed.
    pub fn new(fetch: impl FnOnce() -> Result<Vec<String>, E> + 'a) -> Self {
        ChangedFiles {
            fetch: Some(Box::new(fetch)),
            files: None,
        }
    }

    /// Whether the files have been asked for.
    pub fn fetched(&self) -> bool {
        self.files.is_some()
    }

    /// The files (asked for now if not yet). A failed ask is asked again
    /// next time only if it has not been tried; a second call after an
    /// error gives an empty list.
    pub fn get(&mut self) -> Result<&[String], E> {
        if self.files.is_none() {
            let files = match self.fetch.take() {
                Some(fetch) => fetch()?,
                None => Vec::new(),
            };
            self.files = Some(files);
        }
        Ok(self.files.as_deref().unwrap_or_default())
    }
}

fn has_change_matcher(
    run_if_changed: &Option<String>,
    skip_if_only_changed: &Option<String>,
) -> bool {
    run_if_changed.as_deref().is_some_and(|p| !p.is_empty())
        || skip_if_only_changed
            .as_deref()
            .is_some_and(|p| !p.is_empty())
}

/// Prow's `NeedsExplicitTrigger`: neither `always_run` nor a change
/// matcher, so only its trigger (`/test NAME`) starts it.
pub fn needs_explicit_trigger(job: &Presubmit) -> bool {
    !job.kind.always_run
        && !has_change_matcher(&job.kind.run_if_changed, &job.kind.skip_if_only_changed)
}

/// Prow's `TriggerMatches`: the job's trigger matches the text (a job
/// without one never matches).
pub fn trigger_matches(job: &Presubmit, text: &str) -> bool {
    !job.kind.trigger.is_empty() && matches(&job.kind.trigger, text)
}

/// Prow's `Presubmit.ShouldRun`: the branch first, then `always_run`, then
/// `forced`, then `(changes decide and say run) || default`.
pub fn presubmit_should_run<E>(
    job: &Presubmit,
    branch: &str,
    changes: &mut ChangedFiles<'_, E>,
    forced: bool,
    default: bool,
) -> Result<bool, E> {
    let k = &job.kind;
    if !branch_matches(&k.branches, &k.skip_branches, branch) {
        return Ok(false);
    }
    if k.always_run || forced {
        return Ok(true);
    }
    if has_change_matcher(&k.run_if_changed, &k.skip_if_only_changed) {
        let files = changes.get()?;
        if runs_against_changes(
            k.run_if_changed.as_deref(),
            k.skip_if_only_changed.as_deref(),
            files,
        ) {
            return Ok(true);
        }
    }
    Ok(default)
}

/// Prow's `Postsubmit.ShouldRun`: the branch first, then the change matcher
/// when set, then `always_run` (unset: true).
pub fn postsubmit_should_run<E>(
    job: &Postsubmit,
    branch: &str,
    changes: &mut ChangedFiles<'_, E>,
) -> Result<bool, E> {
    let k = &job.kind;
    if !branch_matches(&k.branches, &k.skip_branches, branch) {
        return Ok(false);
    }
    if has_change_matcher(&k.run_if_changed, &k.skip_if_only_changed) {
        let files = changes.get()?;
        return Ok(runs_against_changes(
            k.run_if_changed.as_deref(),
            k.skip_if_only_changed.as_deref(),
            files,
        ));
    }
    Ok(k.always_run.unwrap_or(true))
}

/// What a filter says of a job.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Verdict {
    /// The job is a candidate.
    pub matches: bool,
    /// It runs whatever its changes say (the branch still counts).
    pub forced: bool,
    /// Whether it runs when its changes do not say it must.
    pub default: bool,
}

impl Verdict {
    fn of(matches: bool, forced: bool, default: bool) -> Verdict {
        Verdict {
            matches,
            forced,
            default,
        }
    }
}

/// The contexts on a pull request's head: those failed (`failure` or
/// `error`) and all of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Contexts {
    /// Contexts whose state is `failure` or `error`.
    pub failed: HashSet<String>,
    /// Every context with a status.
    pub all: HashSet<String>,
}

impl Contexts {
    /// From the host's (context, state) list.
    pub fn of(statuses: &[(String, String)]) -> Contexts {
        let mut c = Contexts::default();
        for (context, state) in statuses {
            c.all.insert(context.clone());
            if state == "failure" || state == "error" {
                c.failed.insert(context.clone());
            }
        }
        c
    }
}

/// Prow's presubmit filters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filter {
    /// A comment: jobs whose trigger matches it, forced, default run.
    Command(String),
    /// `/test all`, `/ok-to-test` and pull request events: jobs that need
    /// no explicit trigger, decided by their changes, default no.
    TestAll,
    /// `/retest`: jobs whose context failed (default run), and jobs that
    /// need no explicit trigger and have no context yet (decided by their
    /// changes).
    Retest(Contexts),
    /// `/retest-required`: as [`Filter::Retest`], non-optional jobs only.
    RetestRequired(Contexts),
    /// `/test-manual-required`: required jobs that need an explicit trigger
    /// and have no change matcher, forced.
    TestManualRequired,
    /// The first of these that takes a job decides for it.
    Any(Vec<Filter>),
}

impl Filter {
    /// What this filter says of `job`.
    pub fn check(&self, job: &Presubmit) -> Verdict {
        match self {
            Filter::Command(body) => {
                let m = trigger_matches(job, body);
                Verdict::of(m, m, true)
            }
            Filter::TestAll => Verdict::of(!needs_explicit_trigger(job), false, false),
            Filter::Retest(c) => {
                let failed = c.failed.contains(&job.kind.context);
                Verdict::of(
                    failed || (!needs_explicit_trigger(job) && !c.all.contains(&job.kind.context)),
                    false,
                    failed,
                )
            }
            Filter::RetestRequired(c) => {
                if job.kind.optional {
                    Verdict::default()
                } else {
                    Filter::Retest(c.clone()).check(job)
                }
            }
            Filter::TestManualRequired => {
                let k = &job.kind;
                if k.optional || !needs_explicit_trigger(job) {
                    Verdict::default()
                } else {
                    Verdict::of(true, true, false)
                }
            }
            Filter::Any(filters) => filters
                .iter()
                .map(|f| f.check(job))
                .find(|v| v.matches)
                .unwrap_or_default(),
        }
    }
}

/// Prow's `PresubmitFilter`: the filters a comment's text selects, most
/// specific first (its own triggers, `/retest`, `/retest-required`,
/// `/test-manual-required`, then `/test all` or an honoured
/// `/ok-to-test`). The head's statuses are asked for (`contexts`) only for
/// `/retest` and `/retest-required`.
pub fn presubmit_filter<E>(
    honor_ok_to_test: bool,
    text: &str,
    contexts: impl FnOnce() -> Result<Contexts, E>,
) -> Result<Filter, E> {
    let commands = Commands::of(text);
    let mut filters = vec![Filter::Command(text.to_owned())];
    if commands.retest || commands.retest_required {
        let c = contexts()?;
        if commands.retest {
            filters.push(Filter::Retest(c.clone()));
        }
        if commands.retest_required {
            filters.push(Filter::RetestRequired(c));
        }
    }
    if commands.test_manual_required {
        filters.push(Filter::TestManualRequired);
    }
    if (honor_ok_to_test && commands.ok_to_test) || commands.test_all {
        filters.push(Filter::TestAll);
    }
    Ok(Filter::Any(filters))
}

/// Prow's `FilterPresubmits`: the jobs the filter takes that should run
/// against `branch`, in configuration order.
pub fn filter_presubmits<E>(
    filter: &Filter,
    changes: &mut ChangedFiles<'_, E>,
    branch: &str,
    jobs: &[Presubmit],
) -> Result<Vec<Presubmit>, E> {
    filter_presubmits_by(|j| filter.check(j), changes, branch, jobs)
}

/// [`filter_presubmits`] with any verdicts (Prow's `ArbitraryFilter`).
pub(crate) fn filter_presubmits_by<E>(
    check: impl Fn(&Presubmit) -> Verdict,
    changes: &mut ChangedFiles<'_, E>,
    branch: &str,
    jobs: &[Presubmit],
) -> Result<Vec<Presubmit>, E> {
    let mut out = Vec::new();
    for job in jobs {
        let v = check(job);
        if v.matches && presubmit_should_run(job, branch, changes, v.forced, v.default)? {
            out.push(job.clone());
        }
    }
    Ok(out)
}

/// What a help comment lists (Prow's `AvailablePresubmits`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Available {
    /// Names of the jobs `/test all` would start.
    pub test_all: BTreeSet<String>,
    /// Rerun commands of the optional jobs a trigger can start.
    pub optional: BTreeSet<String>,
    /// Rerun commands of the required jobs a trigger can start.
    pub required: BTreeSet<String>,
}

/// Prow's `AvailablePresubmits` for `branch`: what `/test all` starts, and
/// the jobs some job's rerun command starts, split by `optional`.
pub fn available_presubmits<E>(
    changes: &mut ChangedFiles<'_, E>,
    branch: &str,
    jobs: &[Presubmit],
) -> Result<Available, E> {
    let mut out = Available::default();
    for job in filter_presubmits(&Filter::TestAll, changes, branch, jobs)? {
        out.test_all.insert(job.base.name.clone());
    }
    let commands = Filter::Any(
        jobs.iter()
            .map(|j| Filter::Command(j.kind.rerun_command.clone()))
            .collect(),
    );
    for job in filter_presubmits(&commands, changes, branch, jobs)? {
        let set = if job.kind.optional {
            &mut out.optional
        } else {
            &mut out.required
        };
        set.insert(job.kind.rerun_command.clone());
    }
    Ok(out)
}

/// The host's changed files of a pull request, as [`ChangedFiles`].
pub(crate) fn pull_changes<'a, H: super::Host + ?Sized>(
    host: &'a H,
    pr: &'a super::PullRequest,
) -> ChangedFiles<'a, HostError> {
    ChangedFiles::new(move || host.changed_files(pr))
}

#[cfg(test)]
#[path = "select_tests.rs"]
mod tests;
