//! clonerefs for the local executor: clones a run's refs into its `GOPATH`
//! with the git commands Prow's clonerefs runs, and records them as Prow's
//! `clone.Record`s (the content of `clone-records.json`, rendered as
//! `clone-log.txt` by [`clone_log_text`]).
//!
//! # The command sequence
//!
//! Each ref is cloned into [`path_for_refs`]`(src_root, ref)` from
//! [`clone_uri`]`(ref)`, as Prow's clonerefs does, stopping at the first
//! command that fails:
//!
//! 1. `mkdir -p DIR` (run in `/`), `git init`, `git config user.name NAME`,
//!    `git config user.email EMAIL`; with `sparse_checkout_files`,
//!    `git sparse-checkout init` (and the depth is then 1);
//! 2. unless `skip_fetch_head` or sparse:
//!    `git fetch [--depth N] [--filter=blob:none] URI --tags --prune`;
//! 3. `git fetch [--depth N] [--filter=blob:none] [--no-tags] URI BASE`, BASE
//!    being `base_sha` if set, else `base_ref`; with sparse files,
//!    `git sparse-checkout set FILES...`;
//! 4. `git checkout T`, `git branch --force BASE_REF T`, `git checkout
//!    BASE_REF`, T being `base_sha` or `FETCH_HEAD`;
//! 5. per pull, in order: `git fetch [--filter=blob:none] URI X` (X = the
//!    pull's `ref`, else its `sha`, else `pull/N/head`) and `git merge --no-ff
//!    SHA|FETCH_HEAD` with `GIT_AUTHOR_DATE` and `GIT_COMMITTER_DATE` set to
//!    the base commit's time plus the pull's position (1, 2, ...), so the
//!    merge commits, and the final SHA, are the same on every clone of the
//!    same refs (the committer is `git_user_name` / `git_user_email`);
//! 6. unless `skip_submodules` or sparse: `git submodule update --init
//!    --recursive`; then `final_sha` = `git rev-parse HEAD`.
//!
//! Every `git fetch` is retried after each delay of
//! [`CloneOptions::fetch_backoff`] (Prow's 100ms ... 30s by default); the
//! record keeps the last attempt. A command is recorded as
//! `PWD=DIR ENV COMMAND ARGS` (two spaces when it has no extra environment),
//! its combined stdout and stderr, its error (`exit status 128`) and its
//! duration. As in Prow, a failed record has neither `final_sha` nor
//! `duration`.
//!
//! # The mirror
//!
//! With [`CloneOptions::mirror_root`], each clone URI has a bare mirror
//! there ([`mirror`]), brought up to date before step 1 under
//! a file lock, and the clone's fetches read from it instead of the remote.
//! The record then holds, in this order:
//!
//! - the mirror's commands (`PWD=MIRROR  git fetch ...`, creation the first
//!   time), before step 1;
//! - `git config url.file://MIRROR.insteadOf URI` right after the user
//!   config: git itself then sends the unchanged `git fetch ... URI ...`
//!   commands of steps 2-5 to the mirror (a `file://` URL, so `--depth` and
//!   `--filter` are honoured);
//! - `git config --unset url.file://MIRROR.insteadOf` after the last merge,
//!   so the submodules, and the job, fetch from the real remotes.
//!
//! Git writes the URL it fetched from into `FETCH_HEAD`, and `git merge
//! FETCH_HEAD` puts that text into the merge commit's message; after each
//! fetch from the mirror, `FETCH_HEAD`'s mirror URL is replaced by the text
//! git wrote for the real remote when the mirror fetched from it (a file
//! rewrite, not a recorded command). Together with the mirror keeping refs
//! under the names the remote resolved them to, the clone ends at the commit
//! a direct clone ends at.
//!
//! # Git's environment
//!
//! Commands inherit this process's environment, minus the variables that
//! would redirect git to another repository or identity (`GIT_DIR`,
//! `GIT_WORK_TREE`, `GIT_AUTHOR_*`, `GIT_COMMITTER_*`, ...), plus
//! `GIT_TERMINAL_PROMPT=0` (no command waits for a password) and
//! [`CloneOptions::env`]. Commands that only work on the local repository
//! (`init`, `config`, `checkout`, `branch`, `merge`, ...) also run without
//! system or user git configuration (`GIT_CONFIG_NOSYSTEM=1`,
//! `GIT_CONFIG_GLOBAL=/dev/null`), as in Prow's container, so an operator's
//! `merge.log`, `commit.gpgSign` or hooks cannot change what is checked out
//! or the merge SHAs. Commands that reach a remote (`fetch`, `submodule
//! update`) keep this machine's git configuration, so credential helpers,
//! proxies and URL rewrites set up for the daemon's user apply.
//!
//! [`clone_refs`] puts Prow's environment setup record first, always empty
//! here: SSH keys, host fingerprints, OAuth and GitHub App tokens and cookie
//! files are for Kubernetes runs only.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bosun_config::types::{Pull, Refs};
use bosun_config::GoDuration;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use bosun_git::mirror;
pub use bosun_git::runner::Command;
use bosun_git::runner::{from_nanos, nanos, Failed, Runner, Scope, Step};
use bosun_job::gojson::{empty_str, go_json, is_false, is_zero, RefsJson};
use bosun_job::refs::{clone_uri, path_for_refs};

/// What [`clone_refs`] clones, where, and how.
#[derive(Debug, Clone)]
pub struct CloneOptions {
    /// The `GOPATH`: each ref is cloned into [`path_for_refs`]`(src_root, ref)`.
    pub src_root: PathBuf,
    /// The refs to clone: the run's `refs` first, then its `extra_refs`.
    pub refs: Vec<Refs>,
    /// `user.name` of every clone (`ci-robot`); empty = not configured.
    pub git_user_name: String,
    /// `user.email` of every clone (`ci-robot@k8s.io`); empty = not configured.
    pub git_user_email: String,
    /// The directory of the per-cluster mirrors; `None` fetches straight
    /// from the remotes.
    pub mirror_root: Option<PathBuf>,
    /// The delays between the attempts of a `git fetch` (one attempt, plus
    /// one per delay).
    pub fetch_backoff: Vec<Duration>,
    /// How many refs are cloned at once; 0 = all of them.
    pub max_parallel: usize,
    /// Extra `NAME=VALUE` environment for every command, written into the
    /// recorded command strings as Prow writes its `env` (empty by default).
    pub env: Vec<String>,
}

impl CloneOptions {
    /// Options for cloning `refs` into `src_root` as a decorated pod does:
    /// committer `ci-robot <ci-robot@k8s.io>`, Prow's fetch retries, no
    /// mirror, every ref at once.
    pub fn new(src_root: impl Into<PathBuf>, refs: Vec<Refs>) -> Self {
        CloneOptions {
            src_root: src_root.into(),
            refs,
            git_user_name: "ci-robot".into(),
            git_user_email: "ci-robot@k8s.io".into(),
            mirror_root: None,
            fetch_backoff: prow_fetch_backoff(),
            max_parallel: 0,
            env: Vec::new(),
        }
    }
}

/// Prow's delays between `git fetch` attempts: 100ms, 200ms, 400ms, 800ms,
/// 2s, 5s, 10s, 15s, 30s.
pub fn prow_fetch_backoff() -> Vec<Duration> {
    [100, 200, 400, 800, 2_000, 5_000, 10_000, 15_000, 30_000]
        .into_iter()
        .map(Duration::from_millis)
        .collect()
}

/// What happened when one ref was cloned: Prow's `clone.Record`. Its JSON
/// ([`Serialize`]) is Prow's: `{"refs", "commands"?, "failed"?,
/// "final_sha"?, "duration"?}` with empty fields left out and durations in
/// nanoseconds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Record {
    /// The ref cloned, as given.
    pub refs: Refs,
    /// The commands run, in order.
    pub commands: Vec<Command>,
    /// Whether a command failed (it is the last one).
    pub failed: bool,
    /// `HEAD` of the finished clone; empty when the clone failed.
    pub final_sha: String,
    /// How long the clone took; zero when it failed.
    pub duration: Duration,
}

/// Clones every ref of `opts`, `opts.max_parallel` at a time, and returns
/// the records as Prow's clonerefs writes them: its environment setup
/// record first (empty refs; it has no commands, as bosun adds no SSH keys,
/// host fingerprints or cookie file), then one record per ref in the order
/// the clones finished. A failed clone is a record with `failed` set; the
/// others still run.
pub fn clone_refs(opts: &CloneOptions) -> Vec<Record> {
    let n = opts.refs.len();
    let workers = match opts.max_parallel {
        0 => n,
        m => m.min(n),
    };
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::channel();
    std::thread::scope(|s| {
        for _ in 0..workers {
            let tx = tx.clone();
            let next = &next;
            s.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(refs) = opts.refs.get(i) else { break };
                if tx.send(clone_ref(opts, refs)).is_err() {
                    break;
                }
            });
        }
    });
    drop(tx);
    std::iter::once(Record::default()).chain(rx).collect()
}

/// Clones one ref as [`clone_refs`] does (the module's doc has the steps).
pub fn clone_ref(opts: &CloneOptions, refs: &Refs) -> Record {
    let start = Instant::now();
    // A repository on this machine answers at once or not at all: a fetch
    // from it is not retried (a missing branch fails in milliseconds, not
    // after Prow's minute of network retries).
    let uri = bosun_job::refs::clone_uri(refs);
    let local = uri.starts_with("file://") || uri.starts_with('/');
    let backoff: &[Duration] = if local { &[] } else { &opts.fetch_backoff };
    let mut runner = Runner::new(backoff, &opts.env);
    let outcome = run_sequence(opts, refs, &mut runner);
    let mut record = Record {
        refs: refs.clone(),
        commands: runner.commands,
        ..Record::default()
    };
    match outcome {
        Ok(final_sha) => {
            record.final_sha = final_sha;
            record.duration = start.elapsed();
        }
        Err(Failed) => record.failed = true,
    }
    record
}

/// Whether any clone failed (the run then fails before its test starts).
pub fn any_failed(records: &[Record]) -> bool {
    records.iter().any(|r| r.failed)
}

/// `clone-log.txt`: every record as [`format_record`] writes it, in order.
pub fn clone_log_text(records: &[Record]) -> String {
    records.iter().map(format_record).collect()
}

/// One record in human-readable form, as Prow's `clone.FormatRecord`:
///
/// ```text
/// # FAILED                              (only when failed)
/// # Cloning ORG/REPO at BASE_REF(BASE_SHA)
/// # Checking out pulls:                 (only with pulls)
/// #<TAB>N(SHA)                        (a tab after the #)
/// $ COMMAND (runtime: 1.5s)
/// OUTPUT
/// # Error: exit status 1                (only when it failed)
/// # Final SHA: SHA
/// # Total runtime: 2.1s
/// ```
pub fn format_record(record: &Record) -> String {
    let mut out = String::new();
    if record.failed {
        out.push_str("# FAILED\n");
    }
    let r = &record.refs;
    if r.repo.is_empty() {
        out.push_str("Environment setup");
    } else {
        let _ = write!(
            out,
            "# Cloning {}/{} at {}",
            r.org,
            r.repo,
            opt(&r.base_ref)
        );
    }
    if let Some(sha) = r.base_sha.as_deref().filter(|s| !s.is_empty()) {
        let _ = write!(out, "({sha})");
    }
    out.push('\n');
    if !r.pulls.is_empty() {
        out.push_str("# Checking out pulls:\n");
        for p in &r.pulls {
            let _ = write!(out, "#\t{}", p.number);
            if !p.sha.is_empty() {
                let _ = write!(out, "({})", p.sha);
            }
            out.push('\n');
        }
    }
    for c in &record.commands {
        let runtime = if c.duration.is_zero() {
            String::new()
        } else {
            format!(" (runtime: {})", GoDuration(nanos(c.duration)))
        };
        let _ = writeln!(out, "$ {}{runtime}", c.command);
        out.push_str(&c.output);
        if !c.error.is_empty() {
            let _ = writeln!(out, "# Error: {}", c.error);
        }
    }
    let _ = writeln!(out, "# Final SHA: {}", record.final_sha);
    let _ = writeln!(
        out,
        "# Total runtime: {}",
        GoDuration(nanos(record.duration))
    );
    out
}

/// The records as Prow's clonerefs writes `clone.json` (`clone-records.json`):
/// Go's `json.Marshal` of the list, `<`, `>` and `&` escaped as `\u003c` etc.
pub fn records_json(records: &[Record]) -> String {
    go_json(records)
}

/// Checks that no two refs clone into the same directory, as Prow's
/// clonerefs options do: the same `org/repo` twice is an error (the
/// message is Prow's); different repositories sharing a directory only
/// yield a warning, returned for the caller to log.
pub fn check_paths(src_root: &Path, refs: &[Refs]) -> Result<Vec<String>, String> {
    let mut warnings = Vec::new();
    for (i, r) in refs.iter().enumerate() {
        let path = path_for_refs(src_root, r);
        let Some(first) = refs[..i]
            .iter()
            .rposition(|e| path_for_refs(src_root, e) == path)
        else {
            continue;
        };
        let e = &refs[first];
        let message = format!(
            "clone ref config {i} (for {}/{}) will be extracted to {}, which clone ref {first} (for {}/{}) is also using",
            r.org,
            r.repo,
            path.display(),
            e.org,
            e.repo
        );
        if e.org == r.org && e.repo == r.repo {
            return Err(message);
        }
        warnings.push(message);
    }
    Ok(warnings)
}

/// Runs Prow's sequence for `refs`, recording into `runner`; the final SHA.
fn run_sequence(opts: &CloneOptions, refs: &Refs, runner: &mut Runner) -> Result<String, Failed> {
    let dir = path_for_refs(&opts.src_root, refs);
    let uri = clone_uri(refs);
    let sparse = !refs.sparse_checkout_files.is_empty();
    let fetch_tags = !(refs.skip_fetch_head || sparse);
    let base_target = refs
        .base_sha
        .as_deref()
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    let base_ref = opt(&refs.base_ref).to_string();
    let pull_targets: Vec<String> = refs.pulls.iter().map(pull_fetch_target).collect();

    let mirror = match &opts.mirror_root {
        Some(root) => {
            let want = mirror::Want {
                heads_and_tags: fetch_tags,
                base: base_target.clone().unwrap_or_else(|| base_ref.clone()),
                pulls: pull_targets.clone(),
            };
            Some(mirror::prepare(root, &uri, &want, runner)?)
        }
        None => None,
    };

    let git = |args: &[&str], scope: Scope| Step {
        dir: dir.clone(),
        env: Vec::new(),
        program: "git",
        args: args.iter().map(|a| a.to_string()).collect(),
        scope,
        retry: false,
    };
    let fetch = |args: Vec<String>| Step {
        dir: dir.clone(),
        env: Vec::new(),
        program: "git",
        args: std::iter::once("fetch".to_string()).chain(args).collect(),
        scope: Scope::Remote,
        retry: true,
    };
    // After a fetch from the mirror, FETCH_HEAD names the remote, not the
    // mirror (see the module's doc).
    let fix_fetch_head = || {
        if let Some(m) = &mirror {
            m.rewrite_fetch_head(&dir.join(".git").join("FETCH_HEAD"));
        }
    };

    runner.run(Step {
        dir: PathBuf::from("/"),
        env: Vec::new(),
        program: "mkdir",
        args: vec!["-p".into(), dir.display().to_string()],
        scope: Scope::Local,
        retry: false,
    })?;
    runner.run(git(&["init"], Scope::Local))?;
    if !opts.git_user_name.is_empty() {
        runner.run(git(
            &["config", "user.name", &opts.git_user_name],
            Scope::Local,
        ))?;
    }
    if !opts.git_user_email.is_empty() {
        runner.run(git(
            &["config", "user.email", &opts.git_user_email],
            Scope::Local,
        ))?;
    }
    if let Some(m) = &mirror {
        runner.run(git(&["config", &m.insteadof_key(), &uri], Scope::Local))?;
    }
    let mut depth = refs.clone_depth;
    if sparse {
        depth = 1;
        runner.run(git(&["sparse-checkout", "init"], Scope::Local))?;
    }
    let mut depth_args: Vec<String> = Vec::new();
    if depth > 0 {
        depth_args = vec!["--depth".into(), depth.to_string()];
    }
    let blobless = refs.blobless_fetch == Some(true);
    let mut filter_args: Vec<String> = Vec::new();
    if blobless || sparse {
        filter_args.push("--filter=blob:none".into());
    }
    if fetch_tags {
        let mut args = depth_args.clone();
        args.extend(filter_args.iter().cloned());
        args.extend([uri.clone(), "--tags".into(), "--prune".into()]);
        runner.run(fetch(args))?;
        fix_fetch_head();
    }
    let (fetch_ref, target) = match &base_target {
        Some(sha) => (sha.clone(), sha.clone()),
        None => (base_ref.clone(), "FETCH_HEAD".to_string()),
    };
    let mut args = depth_args.clone();
    args.extend(filter_args.iter().cloned());
    if sparse {
        args.push("--no-tags".into());
    }
    args.extend([uri.clone(), fetch_ref]);
    runner.run(fetch(args))?;
    fix_fetch_head();
    if sparse {
        let mut args = vec!["sparse-checkout", "set"];
        args.extend(refs.sparse_checkout_files.iter().map(String::as_str));
        runner.run(git(&args, Scope::Local))?;
    }
    runner.run(git(&["checkout", &target], Scope::Local))?;
    runner.run(git(
        &["branch", "--force", &base_ref, &target],
        Scope::Local,
    ))?;
    runner.run(git(&["checkout", &base_ref], Scope::Local))?;

    let mut timestamp = runner
        .quiet(&git(
            &["show", "-s", "--format=format:%ct", "HEAD"],
            Scope::Local,
        ))
        .ok()
        .and_then(|out| out.trim().parse::<i64>().ok())
        .unwrap_or_else(unix_now);
    for (pull, x) in refs.pulls.iter().zip(&pull_targets) {
        let mut args = Vec::new();
        if blobless {
            args.push("--filter=blob:none".to_string());
        }
        args.extend([uri.clone(), x.clone()]);
        runner.run(fetch(args))?;
        fix_fetch_head();
        let merge_target = if pull.sha.is_empty() {
            "FETCH_HEAD"
        } else {
            pull.sha.as_str()
        };
        timestamp += 1;
        let mut merge = git(&["merge", "--no-ff", merge_target], Scope::Local);
        merge.env = vec![
            format!("GIT_AUTHOR_DATE={timestamp}"),
            format!("GIT_COMMITTER_DATE={timestamp}"),
        ];
        runner.run(merge)?;
    }
    if let Some(m) = &mirror {
        runner.run(git(
            &["config", "--unset", &m.insteadof_key()],
            Scope::Local,
        ))?;
    }
    if !refs.skip_submodules && !sparse {
        runner.run(git(
            &["submodule", "update", "--init", "--recursive"],
            Scope::Remote,
        ))?;
    }
    Ok(runner
        .quiet(&git(&["rev-parse", "HEAD"], Scope::Local))
        .map(|out| out.trim().to_string())
        .unwrap_or_default())
}

/// What a pull's fetch asks for: its `ref`, else its `sha`, else
/// `pull/N/head`.
fn pull_fetch_target(pull: &Pull) -> String {
    if let Some(r) = pull.ref_.as_deref().filter(|r| !r.is_empty()) {
        r.to_string()
    } else if !pull.sha.is_empty() {
        pull.sha.clone()
    } else {
        format!("pull/{}/head", pull.number)
    }
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn opt(s: &Option<String>) -> &str {
    s.as_deref().unwrap_or("")
}

/// Prow's `clone.Record` as JSON.
#[derive(Serialize)]
struct RecordJson<'a> {
    refs: RefsJson<'a>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    commands: Vec<&'a Command>,
    #[serde(skip_serializing_if = "is_false")]
    failed: bool,
    #[serde(skip_serializing_if = "empty_str")]
    final_sha: &'a str,
    #[serde(skip_serializing_if = "is_zero")]
    duration: i64,
}

impl Serialize for Record {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        RecordJson {
            refs: RefsJson::from(&self.refs),
            commands: self.commands.iter().collect(),
            failed: self.failed,
            final_sha: &self.final_sha,
            duration: nanos(self.duration),
        }
        .serialize(s)
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RecordIn {
    refs: Refs,
    commands: Vec<Command>,
    failed: bool,
    final_sha: String,
    duration: i64,
}

impl<'de> Deserialize<'de> for Record {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let r = RecordIn::deserialize(d)?;
        Ok(Record {
            refs: r.refs,
            commands: r.commands,
            failed: r.failed,
            final_sha: r.final_sha,
            duration: from_nanos(r.duration),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_targets_prefer_ref_then_sha_then_the_pull_head() {
        let mut p = Pull {
            number: 7,
            ..Pull::default()
        };
        assert_eq!(pull_fetch_target(&p), "pull/7/head");
        p.sha = "abc".into();
        assert_eq!(pull_fetch_target(&p), "abc");
        p.ref_ = Some("refs/changes/07/7/1".into());
        assert_eq!(pull_fetch_target(&p), "refs/changes/07/7/1");
    }

    #[test]
    fn same_repository_twice_in_one_place_is_an_error() {
        let root = Path::new("/go");
        let a = Refs {
            org: "o".into(),
            repo: "a".into(),
            ..Refs::default()
        };
        let mut b = a.clone();
        b.base_ref = Some("other".into());
        let err = check_paths(root, &[a.clone(), b]).unwrap_err();
        assert_eq!(
            err,
            "clone ref config 1 (for o/a) will be extracted to /go/src/github.com/o/a, which clone ref 0 (for o/a) is also using"
        );
        let mut c = Refs {
            org: "o".into(),
            repo: "c".into(),
            ..Refs::default()
        };
        assert_eq!(check_paths(root, &[a.clone(), c.clone()]), Ok(vec![]));
        c.path_alias = Some("github.com/o/a".into());
        assert_eq!(check_paths(root, &[a, c]).unwrap().len(), 1);
    }
}
