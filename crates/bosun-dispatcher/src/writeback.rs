//! `bosun dispatch write-back`: the plan written into the job files, so
//! that Prow's fallback (the `cluster:` a job file writes, used when the
//! dispatcher cannot be reached or does not know a job) is the plan's
//! answer too, without a weekly pull request rewriting every file.
//!
//! What it changes, and nothing else:
//! - the `cluster:` value of each relocatable job whose plan differs from
//!   it, and only with a value that keeps the job relocatable (an alias of
//!   `dispatcher.relocatable_clusters`; under OpenShift's rules any value but
//!   a `manualClusters` one). A job that omits `cluster:` gets a line
//!   `cluster: X` right after its `name:` (same indentation), unless the
//!   plan leaves it on `default`;
//! - with `--openshift-config`, the `buildFarm.<cloud>.<cluster>.filenames`
//!   lists of OpenShift's `_config.yaml`, regenerated from the plan (each job
//!   file under the cluster of most of its relocatable jobs).
//!
//! The files are not re-serialised: the YAML is read as written with
//! `bosun_config::yaml` (every node with its bytes), and its editor replaces
//! only the bytes of a value (its quoting kept) or inserts one line;
//! comments, order and formatting stay byte for byte. This module decides
//! what to change and checks the result. Each edited file is parsed again
//! and compared with the original (every node the same but the written
//! `cluster:` values, or the regenerated lists) before it is written,
//! atomically, keeping its permissions.
//!
//! Left alone and reported: a `cluster:` shared through an anchor (the job
//! or its value carries one that an alias uses, or it is itself an alias),
//! one that comes from a merge key (`<<:`), in-repo configuration
//! (`.prow.yaml`, `.lighthouse`: another repository's files), jobs outside
//! the `--job-config` trees, values that are not a one-line scalar, and
//! plan values that would pin the job.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use bosun_base::command::{self, Failed};
use bosun_config::model::Origin;
use bosun_config::types::{DispatcherConfig, JobSource};
use bosun_config::yaml::edit::{self, Edit};
use bosun_config::yaml::{self, go_fold_eq, AsWritten, Form, Mark, Node, Value};
use bosun_config::{load, OsFiles, Snapshot};
use bosun_dispatch::format;
use bosun_dispatch::jobs::facts;
use bosun_dispatch::openshift::{
    decide, rule_description, OsClusters, OsConfig, OsDecision, OsJob,
};
use clap::Args;

use crate::inputs::Sources;

/// How long `--server` may take to answer `GET /plan`.
const SERVER_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest plan `--server` may send.
const MAX_PLAN_BYTES: u64 = 512 << 20;

/// `bosun dispatch write-back` arguments.
#[derive(Args, Debug, Clone)]
pub struct WriteBackArgs {
    #[command(flatten)]
    pub sources: Sources,
    /// The plan: `bosun dispatch plan --format json`'s output, a plan file,
    /// or a bare `{"JOB": "CLUSTER"}` map.
    #[arg(
        long,
        value_name = "PLAN.json",
        required_unless_present = "server",
        conflicts_with = "server"
    )]
    pub plan: Option<PathBuf>,
    /// A running `bosun dispatcher`: its plan in force (`GET URL/plan`).
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    /// Print what would change; write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// A job whose `cluster:` is (or would be) written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobChange {
    /// Its file, relative to its `--job-config` root.
    pub file: String,
    /// Its name.
    pub job: String,
    /// The value written before (`None`: no `cluster:`).
    pub old: Option<String>,
    /// The plan's value.
    pub new: String,
}

/// A job the plan would move that is left as it is, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftAlone {
    /// Its file (relative to its root; `ORG/REPO:PATH` for in-repo files).
    pub file: String,
    /// Its name.
    pub job: String,
    /// Its value now and the plan's.
    pub old: String,
    /// The plan's value.
    pub new: String,
    /// Why it is left alone.
    pub reason: String,
}

/// One regenerated `buildFarm` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FarmChange {
    /// The cloud (`aws`).
    pub cloud: String,
    /// The cluster.
    pub cluster: String,
    /// File names added to its list.
    pub added: Vec<String>,
    /// File names removed from it.
    pub removed: Vec<String>,
    /// How many it holds now.
    pub total: usize,
}

/// What a write-back did (or, dry, would do).
#[derive(Debug, Default)]
pub struct Report {
    /// Jobs whose `cluster:` is written, by file then position.
    pub changes: Vec<JobChange>,
    /// Jobs the plan would move that are left alone.
    pub left: Vec<LeftAlone>,
    /// Relocatable jobs the plan does not name (left as they are).
    pub not_in_plan: usize,
    /// OpenShift's `_config.yaml` (as given), when its lists changed.
    pub farm_file: Option<String>,
    /// The regenerated `buildFarm` lists that changed.
    pub farm: Vec<FarmChange>,
    /// Notes on `buildFarm` (lists that could not be regenerated, files on
    /// clusters outside it).
    pub farm_notes: Vec<String>,
    /// Files that could not be read, edited or written (left unchanged).
    pub errors: Vec<String>,
    /// Files written (0 on a dry run).
    pub files_written: usize,
    /// Nothing was written.
    pub dry_run: bool,
}

impl Report {
    /// The report as text: the changes (`FILE: JOB: OLD -> NEW`), the jobs
    /// left alone with why, the `buildFarm` lists, then a count.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for c in &self.changes {
            match &c.old {
                Some(old) => {
                    let _ = writeln!(out, "{}: {}: {} -> {}", c.file, c.job, old, c.new);
                }
                None => {
                    let _ = writeln!(
                        out,
                        "{}: {}: (no cluster:) -> {} (line added)",
                        c.file, c.job, c.new
                    );
                }
            }
        }
        if !self.left.is_empty() {
            let _ = writeln!(out, "left alone:");
            for l in &self.left {
                let _ = writeln!(
                    out,
                    "  {}: {}: {} -> {}: {}",
                    l.file, l.job, l.old, l.new, l.reason
                );
            }
        }
        if self.not_in_plan > 0 {
            let _ = writeln!(
                out,
                "{} relocatable job(s) not in the plan: left as they are",
                self.not_in_plan
            );
        }
        let farm_file = self.farm_file.as_deref().unwrap_or("_config.yaml");
        for f in &self.farm {
            let _ = writeln!(
                out,
                "{farm_file}: buildFarm.{}.{}.filenames: {} file(s), +{} -{}",
                f.cloud,
                f.cluster,
                f.total,
                f.added.len(),
                f.removed.len()
            );
            for a in &f.added {
                let _ = writeln!(out, "  + {a}");
            }
            for r in &f.removed {
                let _ = writeln!(out, "  - {r}");
            }
        }
        for n in &self.farm_notes {
            let _ = writeln!(out, "{farm_file}: {n}");
        }
        for e in &self.errors {
            let _ = writeln!(out, "error: {e}");
        }
        let files: BTreeSet<&str> = self.changes.iter().map(|c| c.file.as_str()).collect();
        let _ = write!(
            out,
            "{} job(s) in {} file(s){}, {} left alone",
            self.changes.len(),
            files.len(),
            if self.farm.is_empty() {
                String::new()
            } else {
                format!(", {} buildFarm list(s)", self.farm.len())
            },
            self.left.len()
        );
        if self.dry_run {
            let _ = writeln!(out, " (dry run: nothing written)");
        } else {
            let _ = writeln!(out, "; {} file(s) written", self.files_written);
        }
        out
    }
}

/// `bosun dispatch write-back`.
pub fn command(args: &WriteBackArgs, out: &mut dyn Write) -> command::Outcome {
    let report =
        run(args).map_err(|e| Failed::with_line(1, format!("bosun dispatch write-back: {e}")))?;
    let _ = out.write_all(report.to_text().as_bytes());
    if report.errors.is_empty() {
        Ok(())
    } else {
        // The report lists them.
        Err(Failed::status(1))
    }
}

fn run(args: &WriteBackArgs) -> Result<Report, String> {
    let plan = match (&args.plan, &args.server) {
        (Some(path), _) => {
            let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            format::previous_from_json(&text).map_err(|e| format!("{}: {e}", path.display()))?
        }
        (None, Some(url)) => fetch_plan(url)?,
        (None, None) => return Err("give --plan PLAN.json or --server URL".to_string()),
    };
    let config = &args.sources.config;
    if config.job_config.is_empty() {
        return Err("give the job configuration to rewrite (--job-config DIR)".to_string());
    }
    let loading = spinner("loading the configuration");
    let loaded = load(&config.load_options(), &OsFiles);
    loading.finish_and_clear();
    let Some(snapshot) = loaded.snapshot else {
        let errors: Vec<String> = loaded
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| d.to_string())
            .collect();
        return Err(format!(
            "the configuration has errors:\n{}",
            errors.join("\n")
        ));
    };
    let read = |p: &Path| fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
    let clusters = match &args.sources.openshift_clusters {
        Some(p) => {
            OsClusters::parse(&p.display().to_string(), &read(p)?).map_err(|e| e.to_string())?
        }
        None => OsClusters::default(),
    };
    let openshift = match &args.sources.openshift_config {
        Some(p) => {
            let bytes = read(p)?;
            if bytes.starts_with(&[0x1f, 0x8b]) {
                return Err(format!(
                    "{}: gzipped; write-back edits a plain-text _config.yaml",
                    p.display()
                ));
            }
            let text = String::from_utf8(bytes)
                .map_err(|e| format!("{}: not UTF-8 text: {e}", p.display()))?;
            let parsed = OsConfig::parse(&p.display().to_string(), text.as_bytes())
                .map_err(|e| e.to_string())?;
            Some((p.clone(), text, parsed))
        }
        None => None,
    };
    let os = openshift
        .as_ref()
        .map(|(path, text, config)| OpenShiftInput {
            path,
            text,
            config,
            clusters: &clusters,
        });
    let files = files_bar(if args.dry_run {
        "reading job files"
    } else {
        "writing job files"
    });
    let report = write_back(
        &snapshot,
        &config.job_config,
        os.as_ref(),
        &plan,
        args.dry_run,
        &files,
    );
    files.finish_and_clear();
    Ok(report)
}

/// A spinner saying what is being done, redrawn while it lasts, on
/// standard error when it is a terminal; hidden otherwise (indicatif draws
/// nothing where no one watches), so logs and pipes stay clean.
fn spinner(what: &'static str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new_spinner().with_message(what);
    bar.enable_steady_tick(std::time::Duration::from_millis(100));
    bar
}

/// The job files' progress (`N/M files`), shown as [`spinner`] is.
fn files_bar(what: &'static str) -> indicatif::ProgressBar {
    let style = indicatif::ProgressStyle::with_template("{msg} {wide_bar} {pos}/{len} files")
        .expect("a valid template");
    indicatif::ProgressBar::new(0)
        .with_style(style)
        .with_message(what)
}

/// The plan in force of the `bosun dispatcher` at `url` (`GET URL/plan`).
fn fetch_plan(url: &str) -> Result<BTreeMap<String, String>, String> {
    let endpoint = format!("{}/plan", url.trim_end_matches('/'));
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(SERVER_TIMEOUT))
        .build()
        .into();
    let mut resp = agent
        .get(&endpoint)
        .call()
        .map_err(|e| format!("{endpoint}: {e}"))?;
    let status = resp.status().as_u16();
    let body = resp
        .body_mut()
        .with_config()
        .limit(MAX_PLAN_BYTES)
        .read_to_string()
        .map_err(|e| format!("{endpoint}: {e}"))?;
    if status != 200 {
        return Err(format!("{endpoint}: HTTP {status}: {}", body.trim()));
    }
    format::previous_from_json(&body).map_err(|e| format!("{endpoint}: {e}"))
}

/// OpenShift's `_config.yaml`, as given and parsed, and its inventory.
pub struct OpenShiftInput<'a> {
    /// Where it is (written back there).
    pub path: &'a Path,
    /// Its text.
    pub text: &'a str,
    /// Its rules.
    pub config: &'a OsConfig,
    /// `_clusters.yaml` (empty when not given: only rule 6 reads it, and a
    /// job it decides is never relocatable).
    pub clusters: &'a OsClusters,
}

/// One job as write-back reads it.
struct JobView<'s> {
    name: &'s str,
    cluster: &'s str,
    written: bool,
    source: &'s JobSource,
    origin: &'s Origin,
}

/// The snapshot's jobs in `facts`' order: periodics, then presubmits and
/// postsubmits by repository.
fn job_views(snapshot: &Snapshot) -> Vec<JobView<'_>> {
    fn view<K>(j: &bosun_config::Job<K>) -> JobView<'_> {
        JobView {
            name: &j.base.name,
            cluster: &j.base.cluster,
            written: j.cluster_written,
            source: &j.source,
            origin: &j.origin,
        }
    }
    let mut out: Vec<JobView<'_>> = snapshot.periodics.iter().map(view).collect();
    out.extend(snapshot.presubmits.values().flatten().map(view));
    out.extend(snapshot.postsubmits.values().flatten().map(view));
    out
}

/// A job whose `cluster:` one file's edit is to write.
#[derive(Debug, Clone)]
pub struct Target {
    /// Where its mapping starts (its origin).
    pub mark: Mark,
    /// Its name (checked against the file).
    pub name: String,
    /// Whether the loader saw a `cluster:` (own or merged).
    pub written: bool,
    /// The value to write.
    pub new: String,
}

/// What became of one [`Target`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Its value was replaced (`Some(old)`) or a line inserted (`None`).
    Edited(Option<String>),
    /// It already has the value.
    Unchanged,
    /// Left alone, and why.
    Left(String),
}

/// Writes the plan's clusters into the job files under `job_config`
/// (and OpenShift's `buildFarm` lists), or with `dry_run` only says what it
/// would write; counts each job file it edits on `progress`.
pub fn write_back(
    snapshot: &Snapshot,
    job_config: &[PathBuf],
    openshift: Option<&OpenShiftInput<'_>>,
    plan: &BTreeMap<String, String>,
    dry_run: bool,
    progress: &indicatif::ProgressBar,
) -> Report {
    let mut report = Report {
        dry_run,
        ..Report::default()
    };
    let dispatcher = snapshot.config.dispatcher.clone().unwrap_or_default();
    let views = job_views(snapshot);
    let facts = facts(snapshot, job_config);
    // What each job-config file is to get: per file (as loaded), its targets
    // with the job's display name of the file.
    let mut per_file: BTreeMap<&str, (String, Vec<Target>, Vec<String>)> = BTreeMap::new();
    let mut left: Vec<(String, Mark, LeftAlone)> = Vec::new();
    // OpenShift: per job-file basename, the plan's clusters of its
    // relocatable jobs (votes), and the basenames with relocatable jobs.
    let mut votes: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    let mut relocatable_files: BTreeSet<String> = BTreeSet::new();
    if views.len() != facts.len() || views.iter().zip(&facts).any(|(v, f)| v.name != f.name) {
        report
            .errors
            .push("internal: the jobs and their facts are not in the same order".to_string());
        return report;
    }
    for (view, fact) in views.iter().zip(&facts) {
        // OpenShift: the basename of its file, when it is listed in buildFarm.
        let mut listed: Option<String> = None;
        // Whether the job may move.
        let movable: Result<(), String> = match openshift {
            None if !fact.dispatched() => Err(format!("not dispatched (agent {})", fact.agent)),
            None if !fact.relocatable(&dispatcher) => Err(format!(
                "pinned: {} is not in dispatcher.relocatable_clusters",
                fact.cluster
            )),
            None => Ok(()),
            Some(os) => {
                let mut job = OsJob::new(fact.name.clone(), fact.file.clone());
                job.agent = fact.agent.clone();
                job.labels = fact.labels.clone();
                job.cluster_type_env = fact.cluster_type.clone();
                job.written_cluster = fact.cluster_written.then(|| fact.cluster.clone());
                match decide(&job, os.config, os.clusters) {
                    OsDecision::Relocatable { .. } => {
                        // Files a group's `paths` match are not listed.
                        if !fact.in_repo && !os.config.matching_path_regex(&fact.file) {
                            relocatable_files.insert(job.basename.clone());
                            listed = Some(job.basename);
                        }
                        Ok(())
                    }
                    OsDecision::Error(message) => Err(format!("openshift: {message}")),
                    other => {
                        let rule = other.rule().unwrap_or(0);
                        Err(format!(
                            "not relocatable under openshift rule {rule} ({})",
                            rule_description(rule)
                        ))
                    }
                }
            }
        };
        let Some(new) = plan.get(&fact.name) else {
            if movable.is_ok() {
                report.not_in_plan += 1;
            }
            continue;
        };
        if let Some(file) = listed {
            if would_pin(openshift, &dispatcher, new).is_none() {
                *votes
                    .entry(file)
                    .or_default()
                    .entry(new.clone())
                    .or_default() += 1;
            }
        }
        let effective = view.cluster;
        // Nothing to write: the value is the plan's, or the job omits
        // `cluster:` and the plan leaves it on `default`.
        if new == effective && (view.written || new == "default") {
            continue;
        }
        let mut leave = |reason: String| {
            left.push((
                fact.file.clone(),
                view.origin.mark,
                LeftAlone {
                    file: fact.file.clone(),
                    job: fact.name.clone(),
                    old: effective.to_string(),
                    new: new.clone(),
                    reason,
                },
            ))
        };
        if let Err(why) = movable {
            leave(why);
            continue;
        }
        if let Some(why) = would_pin(openshift, &dispatcher, new) {
            leave(why);
            continue;
        }
        if let JobSource::InRepo { repo, .. } = view.source {
            leave(format!(
                "in-repo configuration of {repo}: its own repository's file"
            ));
            continue;
        }
        let file = Path::new(&*view.origin.file);
        if !job_config.iter().any(|root| file.starts_with(root)) {
            leave("outside the --job-config trees".to_string());
            continue;
        }
        let (_, targets, olds) = per_file
            .entry(&view.origin.file)
            .or_insert_with(|| (fact.file.clone(), Vec::new(), Vec::new()));
        targets.push(Target {
            mark: view.origin.mark,
            name: fact.name.clone(),
            written: view.written,
            new: new.clone(),
        });
        olds.push(effective.to_string());
    }

    let mut changes: Vec<(String, Mark, JobChange)> = Vec::new();
    progress.set_length(per_file.len() as u64);
    for (path, (display, targets, olds)) in &per_file {
        progress.inc(1);
        let path = Path::new(path);
        let text = match fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => {
                report.errors.push(format!("{}: {e}", path.display()));
                continue;
            }
        };
        let (edited, outcomes) = match edit_job_clusters(&text, targets) {
            Ok(r) => r,
            Err(e) => {
                report.errors.push(format!("{}: {e}", path.display()));
                continue;
            }
        };
        for ((t, o), was) in targets.iter().zip(outcomes).zip(olds) {
            match o {
                Outcome::Edited(old) => changes.push((
                    display.clone(),
                    t.mark,
                    JobChange {
                        file: display.clone(),
                        job: t.name.clone(),
                        old,
                        new: t.new.clone(),
                    },
                )),
                Outcome::Unchanged => {}
                Outcome::Left(reason) => left.push((
                    display.clone(),
                    t.mark,
                    LeftAlone {
                        file: display.clone(),
                        job: t.name.clone(),
                        old: was.clone(),
                        new: t.new.clone(),
                        reason,
                    },
                )),
            }
        }
        if edited != text && !dry_run {
            match write_keeping_mode(path, edited.as_bytes()) {
                Ok(()) => report.files_written += 1,
                Err(e) => report
                    .errors
                    .push(format!("{}: cannot write: {e}", path.display())),
            }
        }
    }
    changes.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    left.sort_by(|a, b| (&a.0, a.1, &a.2.job).cmp(&(&b.0, b.1, &b.2.job)));
    left.dedup_by(|a, b| a.2 == b.2);
    report.changes = changes.into_iter().map(|c| c.2).collect();
    report.left = left.into_iter().map(|l| l.2).collect();

    if let Some(os) = openshift {
        farm(os, &votes, &relocatable_files, dry_run, &mut report);
    }
    report
}

/// Why writing `cluster` would pin a relocatable job, if it would: not an
/// alias of `dispatcher.relocatable_clusters`; under OpenShift's rules, a
/// `manualClusters` one (rule 2).
fn would_pin(
    openshift: Option<&OpenShiftInput<'_>>,
    dispatcher: &DispatcherConfig,
    cluster: &str,
) -> Option<String> {
    match openshift {
        None => (!dispatcher.relocatable_clusters.iter().any(|r| r == cluster)).then(|| {
            format!(
                "{cluster} is not in dispatcher.relocatable_clusters: writing it would pin the job"
            )
        }),
        Some(os) => os
            .config
            .manual_clusters
            .iter()
            .any(|m| m == cluster)
            .then(|| {
                format!(
                "{cluster} is in manualClusters: writing it would pin the job (openshift rule 2)"
            )
            }),
    }
}

/// The regenerated `buildFarm` lists of `os`, written (unless `dry_run`).
fn farm(
    os: &OpenShiftInput<'_>,
    votes: &BTreeMap<String, BTreeMap<String, usize>>,
    relocatable_files: &BTreeSet<String>,
    dry_run: bool,
    report: &mut Report,
) {
    report.farm_file = Some(os.path.display().to_string());
    // Each file with relocatable jobs under the cluster of most of them in
    // the plan (ties: the first name); a file none of whose relocatable jobs
    // the plan names keeps its lists.
    let mut wanted: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = os
        .config
        .build_farm
        .iter()
        .map(|(cloud, clusters)| {
            (
                cloud.clone(),
                clusters
                    .keys()
                    .map(|c| (c.clone(), BTreeSet::new()))
                    .collect(),
            )
        })
        .collect();
    let mut outside: BTreeMap<String, usize> = BTreeMap::new();
    for file in relocatable_files {
        let clusters: Vec<String> = match votes.get(file) {
            Some(v) => {
                let max = v.values().copied().max().unwrap_or(0);
                let winners: Vec<&String> = v
                    .iter()
                    .filter(|(_, n)| **n == max)
                    .map(|(c, _)| c)
                    .collect();
                vec![winners[0].clone()]
            }
            None => os
                .config
                .build_farm
                .values()
                .flat_map(|m| m.iter())
                .filter(|(_, files)| files.contains(file))
                .map(|(c, _)| c.clone())
                .collect(),
        };
        for cluster in clusters {
            match os.config.is_in_build_farm(&cluster) {
                Some(cloud) => {
                    wanted
                        .entry(cloud.to_string())
                        .or_default()
                        .entry(cluster)
                        .or_default()
                        .insert(file.clone());
                }
                None => *outside.entry(cluster).or_default() += 1,
            }
        }
    }
    for (cluster, n) in outside {
        report.farm_notes.push(format!(
            "{n} job file(s) placed on {cluster}, which is not in buildFarm: not listed"
        ));
    }
    let edit = match regenerate_build_farm(os.text, &wanted) {
        Ok(e) => e,
        Err(e) => {
            report.errors.push(format!("{}: {e}", os.path.display()));
            return;
        }
    };
    report.farm_notes.extend(edit.notes);
    // The file must still be OpenShift's, with the lists as meant.
    match OsConfig::parse(&os.path.display().to_string(), edit.text.as_bytes()) {
        Ok(parsed) if parsed.build_farm == edit.lists => {}
        Ok(_) => {
            report.errors.push(format!(
                "{}: the regenerated lists do not read back as meant; not written",
                os.path.display()
            ));
            return;
        }
        Err(e) => {
            report.errors.push(format!(
                "{}: the regenerated file does not load ({e}); not written",
                os.path.display()
            ));
            return;
        }
    }
    report.farm = edit.changes;
    if edit.text != os.text && !dry_run {
        match write_keeping_mode(os.path, edit.text.as_bytes()) {
            Ok(()) => report.files_written += 1,
            Err(e) => report
                .errors
                .push(format!("{}: cannot write: {e}", os.path.display())),
        }
    }
}

/// Writes `bytes` over `path` atomically (a temporary file beside it, fsync,
/// rename, fsync of the directory), keeping its permissions; a symbolic
/// link is followed, so the file it points to is replaced, not the link.
pub fn write_keeping_mode(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let path = fs::canonicalize(path)?;
    let permissions = fs::metadata(&path)?.permissions();
    bosun_base::fs::write_atomic_with(&path, bytes, Some(permissions))
}

// ---------------------------------------------------------------------------
// Job files.

/// Finds the job mapping starting at `mark`; `Err` says why it cannot be
/// edited (an alias, inside or carrying an anchor some alias repeats).
fn find_job<'t, 'a>(
    src: &str,
    written: &AsWritten<'_>,
    node: &'t Node<'a>,
    mark: Mark,
    shared: Option<&str>,
) -> Option<Result<&'t Node<'a>, String>> {
    if node.is_alias() {
        // What it repeats is found where its anchor is.
        return (node.mark == mark).then(|| {
            Err(format!(
                "the job is an alias ({}) of another definition",
                edit::property(src, node)
            ))
        });
    }
    let shared = match shared {
        Some(s) => Some(s),
        None if written.is_aliased(node) => Some(edit::property(src, node)),
        None => None,
    };
    if node.mark == mark {
        if let Value::Map(_) = node.value {
            return Some(match shared {
                Some(a) => Err(format!(
                    "its definition is shared through an anchor ({a}): an alias repeats it"
                )),
                None => Ok(node),
            });
        }
    }
    match &node.value {
        Value::Map(entries) => entries
            .iter()
            .find_map(|(_, v)| find_job(src, written, v, mark, shared)),
        Value::Seq(items) => items
            .iter()
            .find_map(|v| find_job(src, written, v, mark, shared)),
        Value::Scalar { .. } => None,
    }
}

/// The edit that gives one job its cluster, or why there is none.
fn job_edit(
    src: &str,
    written: &AsWritten<'_>,
    t: &Target,
) -> Result<Option<(Edit, Option<String>)>, String> {
    let job = written
        .docs
        .iter()
        .find_map(|d| find_job(src, written, d, t.mark, None))
        .unwrap_or_else(|| {
            Err(format!(
                "no job starts at {} (did the file change since it was loaded?)",
                t.mark
            ))
        })?;
    // The entries written in the job itself (not merged in) that Prow reads
    // as `field`.
    let own = |field: &str| -> Vec<&(Node<'_>, Node<'_>)> {
        job.entries()
            .iter()
            .filter(|(k, _)| {
                matches!(
                    k.form,
                    Form::Plain | Form::SingleQuoted | Form::DoubleQuoted
                ) && edit::scalar_text(k).is_some_and(|text| go_fold_eq(text, field))
            })
            .collect()
    };
    let names = own("name");
    let name = match names.as_slice() {
        [(k, v)] if edit::scalar_text(v) == Some(t.name.as_str()) => (k, v),
        [] => return Err("its name: is not its own key (a merge key?)".to_string()),
        [_] => {
            return Err(format!(
                "the job at {} is not named {} (did the file change since it was loaded?)",
                t.mark, t.name
            ))
        }
        _ => return Err("several keys are read as its name:".to_string()),
    };
    let clusters = own("cluster");
    match clusters.as_slice() {
        [(_, v)] => {
            if v.is_alias() {
                return Err(format!(
                    "its cluster: is an alias ({})",
                    edit::property(src, v)
                ));
            }
            let Value::Scalar { text, .. } = &v.value else {
                return Err("its cluster: is not a scalar".to_string());
            };
            if v.defined_anchor().is_some() {
                return Err(format!(
                    "its cluster: carries an anchor ({}) other values may share",
                    edit::property(src, v)
                ));
            }
            if text.is_empty() && v.form == Form::Plain {
                return Err("its cluster: is empty".to_string());
            }
            let edit = edit::replace_scalar(src, v, &t.new)
                .map_err(|why| format!("its cluster: is {why}"))?;
            if **text == *t.new {
                return Ok(None);
            }
            Ok(Some((edit, Some(text.to_string()))))
        }
        [] if t.written => Err("its cluster: comes from a merge key (<<)".to_string()),
        [] => {
            let (key, value) = name;
            let entry = format!("cluster: {}", edit::format_scalar(&t.new, Form::Plain));
            let edit = edit::insert_entry_after(src, job, key, value, &entry)
                .map_err(|why| format!("its name: is {why}"))?;
            Ok(Some((edit, None)))
        }
        _ => Err("several keys are read as its cluster:".to_string()),
    }
}

/// Gives each target of one file its cluster: the edited text and what
/// became of each target, in order. The edited text is checked: parsed
/// again, every node is the same but the targets' `cluster:` values.
pub fn edit_job_clusters(src: &str, targets: &[Target]) -> Result<(String, Vec<Outcome>), String> {
    let written = yaml::parse_as_written(src).map_err(|e| format!("{}: {}", e.mark, e.message))?;
    // Jobs sharing a definition (an alias repeats it) share its mark.
    let mut seen: HashMap<Mark, usize> = HashMap::new();
    for t in targets {
        *seen.entry(t.mark).or_default() += 1;
    }
    let mut edits = Vec::new();
    let mut outcomes = Vec::with_capacity(targets.len());
    let mut expected: HashMap<Mark, &str> = HashMap::new();
    for t in targets {
        if seen[&t.mark] > 1 {
            outcomes.push(Outcome::Left(
                "its definition is shared through an anchor: an alias repeats it".to_string(),
            ));
            continue;
        }
        match job_edit(src, &written, t) {
            Ok(Some((edit, old))) => {
                edits.push(edit);
                expected.insert(t.mark, &t.new);
                outcomes.push(Outcome::Edited(old));
            }
            Ok(None) => outcomes.push(Outcome::Unchanged),
            Err(why) => outcomes.push(Outcome::Left(why)),
        }
    }
    if edits.is_empty() {
        return Ok((src.to_string(), outcomes));
    }
    let out = edit::apply(src, edits)?;
    verify_jobs(src, &out, &expected)
        .map_err(|e| format!("the edit does not read back as meant ({e}); not written"))?;
    Ok((out, outcomes))
}

fn verify_jobs(old: &str, new: &str, expected: &HashMap<Mark, &str>) -> Result<(), String> {
    let a = yaml::parse_documents(old).map_err(|e| e.message)?;
    let b = yaml::parse_documents(new).map_err(|e| format!("{}: {}", e.mark, e.message))?;
    if a.len() != b.len() {
        return Err("a different number of documents".to_string());
    }
    let mut found = 0;
    for (x, y) in a.iter().zip(&b) {
        same(x, y, expected, &mut found)?;
    }
    if found != expected.len() {
        return Err(format!("{} of {} jobs found again", found, expected.len()));
    }
    Ok(())
}

fn is_cluster_key(k: &Node<'_>) -> bool {
    k.as_str().is_some_and(|k| go_fold_eq(k, "cluster"))
}

/// `a` and `b` are the same YAML (positions aside), but for the `cluster:`
/// of the mappings `expected` names (by `a`'s positions), which `b` must
/// have with the expected value.
fn same(
    a: &Node<'_>,
    b: &Node<'_>,
    expected: &HashMap<Mark, &str>,
    found: &mut usize,
) -> Result<(), String> {
    let differ = || format!("line {}: the YAML changed", a.mark.line);
    match (&a.value, &b.value) {
        (Value::Scalar { text: t, plain: p }, Value::Scalar { text: u, plain: q }) => {
            if t == u && p == q {
                Ok(())
            } else {
                Err(format!("line {}: {t:?} became {u:?}", a.mark.line))
            }
        }
        (Value::Seq(x), Value::Seq(y)) => {
            if x.len() != y.len() {
                return Err(differ());
            }
            x.iter()
                .zip(y)
                .try_for_each(|(x, y)| same(x, y, expected, found))
        }
        (Value::Map(x), Value::Map(y)) => {
            let edited = expected.get(&a.mark);
            let keep = |(k, _): &&(Node<'_>, Node<'_>)| edited.is_none() || !is_cluster_key(k);
            let xs: Vec<_> = x.iter().filter(keep).collect();
            let ys: Vec<_> = y.iter().filter(keep).collect();
            if xs.len() != ys.len() {
                return Err(differ());
            }
            for ((k1, v1), (k2, v2)) in xs.into_iter().zip(ys) {
                same(k1, k2, expected, found)?;
                same(v1, v2, expected, found)?;
            }
            if let Some(want) = edited {
                let got = b.go_field("cluster");
                if got.as_deref().and_then(Node::as_str) != Some(*want) {
                    return Err(format!(
                        "line {}: the job's cluster does not read back as {want}",
                        a.mark.line
                    ));
                }
                *found += 1;
            }
            Ok(())
        }
        _ => Err(differ()),
    }
}

// ---------------------------------------------------------------------------
// OpenShift's `_config.yaml`.

/// `_config.yaml` with its `buildFarm` lists regenerated.
#[derive(Debug)]
pub struct FarmEdit {
    /// The new text.
    pub text: String,
    /// The lists that changed.
    pub changes: Vec<FarmChange>,
    /// Lists that could not be regenerated, and why.
    pub notes: Vec<String>,
    /// Every list as the new text has it (cloud -> cluster -> files).
    pub lists: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
}

/// Regenerates the `buildFarm.<cloud>.<cluster>.filenames` lists of
/// OpenShift's `_config.yaml` text to `wanted` (a cluster it does not name
/// gets an empty list), changing nothing else: each list's bytes are
/// replaced (block lists stay block lists at their indentation, flow lists
/// flow), an empty `{}` or null cluster gets a `filenames:` block. Clusters
/// and clouds are neither added nor removed. The new text is checked: parsed
/// again, every node is the same but the lists.
pub fn regenerate_build_farm(
    src: &str,
    wanted: &BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
) -> Result<FarmEdit, String> {
    let written = yaml::parse_as_written(src).map_err(|e| format!("{}: {}", e.mark, e.message))?;
    let mut out = FarmEdit {
        text: src.to_string(),
        changes: Vec::new(),
        notes: Vec::new(),
        lists: BTreeMap::new(),
    };
    let Some(root) = written.docs.first() else {
        out.notes.push("empty: no buildFarm".to_string());
        return Ok(out);
    };
    let Some((_, farm)) = root
        .entries()
        .iter()
        .find(|(k, _)| edit::scalar_text(k) == Some("buildFarm"))
    else {
        out.notes
            .push("no buildFarm: nothing regenerated".to_string());
        return Ok(out);
    };
    let nl = edit::eol(src);
    // An anchor or an alias: an alias's anchor is the one it repeats.
    fn shares(n: &Node<'_>) -> bool {
        n.anchor != 0
            || match &n.value {
                Value::Seq(items) => items.iter().any(shares),
                Value::Map(entries) => entries.iter().any(|(k, v)| shares(k) || shares(v)),
                Value::Scalar { .. } => false,
            }
    }
    if shares(farm) {
        return Err("buildFarm holds anchors or aliases: not regenerated".to_string());
    }
    // Indentation of the file: a list item's `-` from its `filenames:` key
    // (the first block list's), and a cluster key from its cloud key.
    let mut item_step = None;
    for (_, clusters) in farm.entries() {
        for (_, value) in clusters.entries() {
            let Some((fk, list)) = value
                .entries()
                .iter()
                .find(|(k, _)| k.as_str() == Some("filenames"))
            else {
                continue;
            };
            if let (Some(first), Form::Block) = (list.items().first(), list.form) {
                let indent = edit::indent_of(src, first.span.start as usize) as i64;
                item_step.get_or_insert(indent - (fk.mark.col as i64 - 1));
            }
        }
    }
    let cloud_step = farm
        .entries()
        .iter()
        .find_map(|(k, v)| {
            v.entries()
                .first()
                .map(|(ck, _)| ck.mark.col as i64 - k.mark.col as i64)
        })
        .filter(|s| *s > 0)
        .unwrap_or(2);
    let item_step = item_step.filter(|s| *s >= 0).unwrap_or(2);
    let item = |f: &str| edit::format_scalar(f, Form::Plain);
    let block = |indent: usize, files: &BTreeSet<String>| -> String {
        files
            .iter()
            .map(|f| format!("{nl}{}- {}", " ".repeat(indent), item(f)))
            .collect()
    };
    let flow = |files: &BTreeSet<String>| -> String {
        format!(
            "[{}]",
            files.iter().map(|f| item(f)).collect::<Vec<_>>().join(", ")
        )
    };
    let mut edits = Vec::new();
    let empty = BTreeSet::new();
    for (cloud_key, clusters) in farm.entries() {
        let Some(cloud) = cloud_key.as_str() else {
            continue;
        };
        for (cluster_key, value) in clusters.entries() {
            let Some(cluster) = cluster_key.as_str() else {
                continue;
            };
            let want = wanted
                .get(cloud)
                .and_then(|m| m.get(cluster))
                .unwrap_or(&empty);
            let here = format!("buildFarm.{cloud}.{cluster}");
            let kept = |current: BTreeSet<String>, out: &mut FarmEdit| {
                out.lists
                    .entry(cloud.to_string())
                    .or_default()
                    .insert(cluster.to_string(), current);
            };
            // A `filenames:` block below the cluster's key, in place of
            // `value` (empty or null).
            let new_block = |value: &Node<'_>| match edit::after_colon(src, cluster_key) {
                Some(start) => {
                    let indent = (cluster_key.mark.col as i64 - 1 + cloud_step) as usize;
                    let end = if value.as_str() == Some("") {
                        start
                    } else {
                        value.span.end as usize
                    };
                    Ok(Edit::replace(
                        start..end,
                        format!(
                            "{nl}{}filenames:{}",
                            " ".repeat(indent),
                            block((indent as i64 + item_step) as usize, want)
                        ),
                    ))
                }
                None => Err("no `:` after the cluster"),
            };
            let edit = match &value.value {
                Value::Map(entries) => {
                    match entries
                        .iter()
                        .find(|(k, _)| k.as_str() == Some("filenames"))
                    {
                        Some((fkey, list)) => {
                            let current = list_of(list);
                            if current == *want {
                                kept(current, &mut out);
                                continue;
                            }
                            match &list.value {
                                Value::Seq(items) if list.form == Form::Flow => {
                                    if !src[..list.span.end as usize].ends_with(']')
                                        || items.iter().any(|i| i.as_str().is_none())
                                    {
                                        Err("a flow list whose end is not found")
                                    } else {
                                        Ok(Edit::replace(list.span.range(), flow(want)))
                                    }
                                }
                                Value::Seq(items) => {
                                    let last = items.last().expect("a block list has items");
                                    match (
                                        edit::after_colon(src, fkey),
                                        edit::scalar_range(src, last),
                                    ) {
                                        (Some(start), Ok(last_range)) => {
                                            let first = items.first().expect("items");
                                            let indent =
                                                edit::indent_of(src, first.span.start as usize);
                                            Ok(Edit::replace(
                                                start..edit::line_end(src, last_range.end),
                                                if want.is_empty() {
                                                    " []".to_string()
                                                } else {
                                                    block(indent, want)
                                                },
                                            ))
                                        }
                                        _ => Err("a list whose items are not one-line scalars"),
                                    }
                                }
                                _ if is_empty_value(list) => match edit::after_colon(src, fkey) {
                                    Some(start) => Ok(Edit::replace(
                                        start..if list.as_str() == Some("") {
                                            start
                                        } else {
                                            list.span.end as usize
                                        },
                                        block(
                                            (fkey.mark.col as i64 - 1 + item_step) as usize,
                                            want,
                                        ),
                                    )),
                                    None => Err("no `filenames:` key found"),
                                },
                                _ => Err("filenames is not a list"),
                            }
                        }
                        None if want.is_empty() => {
                            kept(BTreeSet::new(), &mut out);
                            continue;
                        }
                        None if entries.is_empty() && value.form == Form::Flow => {
                            // `{}`: a block when it ends its line, else flow.
                            let end = value.span.end as usize;
                            let rest = &src[end..edit::line_end(src, end)];
                            let rest = rest.trim_start();
                            if rest.is_empty() || rest.starts_with('#') {
                                new_block(value)
                            } else {
                                Ok(Edit::replace(
                                    value.span.range(),
                                    format!("{{filenames: {}}}", flow(want)),
                                ))
                            }
                        }
                        None => Err("a mapping without filenames"),
                    }
                }
                _ if is_empty_value(value) => {
                    if want.is_empty() {
                        kept(BTreeSet::new(), &mut out);
                        continue;
                    }
                    new_block(value)
                }
                _ => Err("not a mapping"),
            };
            match edit {
                Ok(e) => {
                    let before = list_of(value.get("filenames").unwrap_or(value));
                    out.changes.push(FarmChange {
                        cloud: cloud.to_string(),
                        cluster: cluster.to_string(),
                        added: want.difference(&before).cloned().collect(),
                        removed: before.difference(want).cloned().collect(),
                        total: want.len(),
                    });
                    kept(want.clone(), &mut out);
                    edits.push(e);
                }
                Err(why) => {
                    out.notes.push(format!("{here}: {why}: left alone"));
                    kept(list_of(value.get("filenames").unwrap_or(value)), &mut out);
                }
            }
        }
    }
    for (cloud, clusters) in wanted {
        for (cluster, files) in clusters {
            let known = out
                .lists
                .get(cloud)
                .is_some_and(|m| m.contains_key(cluster));
            if !known && !files.is_empty() {
                out.notes.push(format!(
                    "buildFarm.{cloud}.{cluster} is not in the file: {} file(s) not listed",
                    files.len()
                ));
            }
        }
    }
    if edits.is_empty() {
        return Ok(out);
    }
    out.text = edit::apply(src, edits)?;
    verify_farm(src, &out.text, &out.lists).map_err(|e| {
        format!("the regenerated file does not read back as meant ({e}); not written")
    })?;
    Ok(out)
}

/// A cluster or a `filenames:` with nothing written (`~`, `null`, or no
/// value at all): untagged, plain.
fn is_empty_value(n: &Node<'_>) -> bool {
    !n.tagged && n.form == Form::Plain && n.is_null()
}

/// The scalar items of a list node (nothing for anything else).
fn list_of(n: &Node<'_>) -> BTreeSet<String> {
    n.items()
        .iter()
        .filter_map(|i| i.as_str().map(String::from))
        .collect()
}

/// `new` is `old` with only the `buildFarm` lists changed (to `lists`).
fn verify_farm(
    old: &str,
    new: &str,
    lists: &BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
) -> Result<(), String> {
    let a = yaml::parse_documents(old).map_err(|e| e.message)?;
    let b = yaml::parse_documents(new).map_err(|e| format!("{}: {}", e.mark, e.message))?;
    if a.len() != b.len() || a.is_empty() {
        return Err("a different number of documents".to_string());
    }
    let none = HashMap::new();
    let mut found = 0;
    for (x, y) in a.iter().zip(&b).skip(1) {
        same(x, y, &none, &mut found)?;
    }
    let (ra, rb) = (&a[0], &b[0]);
    let (ea, eb) = (ra.entries(), rb.entries());
    if ea.len() != eb.len() {
        return Err("the top-level keys changed".to_string());
    }
    for ((k1, v1), (k2, v2)) in ea.iter().zip(eb) {
        same(k1, k2, &none, &mut found)?;
        if k1.as_str() != Some("buildFarm") {
            same(v1, v2, &none, &mut found)?;
            continue;
        }
        let (c1, c2) = (v1.entries(), v2.entries());
        if c1.len() != c2.len() {
            return Err("buildFarm's clouds changed".to_string());
        }
        for ((cloud1, m1), (cloud2, m2)) in c1.iter().zip(c2) {
            same(cloud1, cloud2, &none, &mut found)?;
            let (l1, l2) = (m1.entries(), m2.entries());
            if l1.len() != l2.len() {
                return Err("buildFarm's clusters changed".to_string());
            }
            for ((k1, f1), (k2, f2)) in l1.iter().zip(l2) {
                same(k1, k2, &none, &mut found)?;
                fn rest<'n, 'a>(n: &'n Node<'a>) -> Vec<&'n (Node<'a>, Node<'a>)> {
                    n.entries()
                        .iter()
                        .filter(|(k, _)| k.as_str() != Some("filenames"))
                        .collect()
                }
                let (r1, r2) = (rest(f1), rest(f2));
                if r1.len() != r2.len() {
                    return Err(format!("line {}: the cluster's keys changed", k1.mark.line));
                }
                for ((x1, y1), (x2, y2)) in r1.into_iter().zip(r2) {
                    same(x1, x2, &none, &mut found)?;
                    same(y1, y2, &none, &mut found)?;
                }
                let got: BTreeSet<String> = f2
                    .get("filenames")
                    .map(|l| {
                        l.items()
                            .iter()
                            .filter_map(|i| i.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default();
                let want = lists
                    .get(cloud1.as_str().unwrap_or_default())
                    .and_then(|m| m.get(k1.as_str().unwrap_or_default()));
                if Some(&got) != want {
                    return Err(format!(
                        "line {}: the list does not read back as meant",
                        k1.mark.line
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(line: u32, col: u32, name: &str, written: bool, new: &str) -> Target {
        Target {
            mark: Mark { line, col },
            name: name.to_string(),
            written,
            new: new.to_string(),
        }
    }

    #[test]
    fn a_plain_value_is_replaced_and_nothing_else() {
        let src =
            "# jobs\nperiodics:\n- name: a   # the job\n  cluster: old # where\n  interval: 1h\n";
        let (out, o) = edit_job_clusters(src, &[target(3, 3, "a", true, "new-one")]).unwrap();
        assert_eq!(
            out,
            "# jobs\nperiodics:\n- name: a   # the job\n  cluster: new-one # where\n  interval: 1h\n"
        );
        assert_eq!(o, [Outcome::Edited(Some("old".into()))]);
    }

    #[test]
    fn quoting_is_kept() {
        let src = "periodics:\n- name: a\n  cluster: \"old\"\n- name: b\n  cluster: 'o''ld'\n";
        let (out, o) = edit_job_clusters(
            src,
            &[
                target(2, 3, "a", true, "x"),
                target(4, 3, "b", true, "it's"),
            ],
        )
        .unwrap();
        assert_eq!(
            out,
            "periodics:\n- name: a\n  cluster: \"x\"\n- name: b\n  cluster: 'it''s'\n"
        );
        assert_eq!(
            o,
            [
                Outcome::Edited(Some("old".into())),
                Outcome::Edited(Some("o'ld".into()))
            ]
        );
    }

    #[test]
    fn a_plain_value_that_would_read_otherwise_is_quoted() {
        let src = "periodics:\n- name: a\n  cluster: old\n";
        let (out, _) = edit_job_clusters(src, &[target(2, 3, "a", true, "true")]).unwrap();
        assert_eq!(out, "periodics:\n- name: a\n  cluster: \"true\"\n");
    }

    #[test]
    fn a_missing_cluster_is_inserted_after_the_name() {
        let src = "presubmits:\n  o/r:\n  - name: a # c\n    always_run: true\n  - always_run: false\n    name: b\n";
        let (out, o) = edit_job_clusters(
            src,
            &[
                target(3, 5, "a", false, "x"),
                target(5, 5, "b", false, "yy"),
            ],
        )
        .unwrap();
        assert_eq!(
            out,
            "presubmits:\n  o/r:\n  - name: a # c\n    cluster: x\n    always_run: true\n  - always_run: false\n    name: b\n    cluster: yy\n"
        );
        assert_eq!(o, [Outcome::Edited(None), Outcome::Edited(None)]);
    }

    #[test]
    fn insertion_at_the_end_of_a_file_without_newline_and_with_crlf() {
        let src = "periodics:\r\n- interval: 1h\r\n  name: a";
        let (out, _) = edit_job_clusters(src, &[target(2, 3, "a", false, "x")]).unwrap();
        assert_eq!(
            out,
            "periodics:\r\n- interval: 1h\r\n  name: a\r\n  cluster: x"
        );
    }

    #[test]
    fn flow_mappings_are_edited_in_place() {
        let src =
            "periodics:\n- {name: a, cluster: old, interval: 1h}\n- {name: b, interval: 1h}\n";
        let (out, _) = edit_job_clusters(
            src,
            &[target(2, 3, "a", true, "x"), target(3, 3, "b", false, "yy")],
        )
        .unwrap();
        assert_eq!(
            out,
            "periodics:\n- {name: a, cluster: x, interval: 1h}\n- {name: b, cluster: yy, interval: 1h}\n"
        );
    }

    #[test]
    fn multibyte_text_before_the_value_is_kept() {
        let src = "# café ☕\nperiodics:\n- name: a # naïve\n  cluster: 'é'\n";
        let (out, _) = edit_job_clusters(src, &[target(3, 3, "a", true, "x")]).unwrap();
        assert_eq!(
            out,
            "# café ☕\nperiodics:\n- name: a # naïve\n  cluster: 'x'\n"
        );
    }

    #[test]
    fn anchors_aliases_and_merge_keys_are_left_alone() {
        let src = "\
periodics:
- name: a
  cluster: &c old
- name: b
  cluster: *c
- &base
  name: c
  cluster: old
- <<: *base
  name: d
- name: e
  <<: *base
  cluster: old
";
        let (out, o) = edit_job_clusters(
            src,
            &[
                target(2, 3, "a", true, "x"),
                target(4, 3, "b", true, "x"),
                target(6, 3, "c", true, "x"),
                target(9, 3, "d", true, "x"),
                target(11, 3, "e", true, "x"),
            ],
        )
        .unwrap();
        assert!(
            matches!(&o[0], Outcome::Left(w) if w.contains("anchor (&c)")),
            "{o:?}"
        );
        assert!(
            matches!(&o[1], Outcome::Left(w) if w.contains("alias (*c)")),
            "{o:?}"
        );
        assert!(
            matches!(&o[2], Outcome::Left(w) if w.contains("shared through an anchor (&base)")),
            "{o:?}"
        );
        assert!(
            matches!(&o[3], Outcome::Left(w) if w.contains("merge key")),
            "{o:?}"
        );
        // Its own `cluster:` overrides the merged one: it is edited.
        assert_eq!(o[4], Outcome::Edited(Some("old".into())));
        assert_eq!(
            out,
            src.replace("  <<: *base\n  cluster: old", "  <<: *base\n  cluster: x")
        );
    }

    #[test]
    fn a_job_repeated_through_an_alias_is_left_alone() {
        let src = "presubmits:\n  o/r: &jobs\n  - name: a\n    cluster: old\n  o/s: *jobs\n";
        let (out, o) = edit_job_clusters(src, &[target(3, 5, "a", true, "x")]).unwrap();
        assert_eq!(out, src);
        assert!(
            matches!(&o[0], Outcome::Left(w) if w.contains("&jobs")),
            "{o:?}"
        );
    }

    #[test]
    fn a_changed_file_is_noticed() {
        let src = "periodics:\n- name: other\n  cluster: old\n";
        let (out, o) = edit_job_clusters(src, &[target(2, 3, "a", true, "x")]).unwrap();
        assert_eq!(out, src);
        assert!(
            matches!(&o[0], Outcome::Left(w) if w.contains("not named a")),
            "{o:?}"
        );
        let (_, o) = edit_job_clusters(src, &[target(7, 3, "a", true, "x")]).unwrap();
        assert!(
            matches!(&o[0], Outcome::Left(w) if w.contains("no job starts at 7:3")),
            "{o:?}"
        );
    }

    #[test]
    fn block_and_multiline_values_are_left_alone() {
        let src = "periodics:\n- name: a\n  cluster: |\n    old\n- name: b\n  cluster: !!str old\n";
        let (out, o) = edit_job_clusters(
            src,
            &[target(2, 3, "a", true, "x"), target(5, 3, "b", true, "x")],
        )
        .unwrap();
        assert_eq!(out, src);
        assert!(
            matches!(&o[0], Outcome::Left(w) if w.contains("block scalar")),
            "{o:?}"
        );
        assert!(
            matches!(&o[1], Outcome::Left(w) if w.contains("tagged")),
            "{o:?}"
        );
    }

    fn lists(v: &[(&str, &str, &[&str])]) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
        let mut out: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
        for (cloud, cluster, files) in v {
            out.entry(cloud.to_string()).or_default().insert(
                cluster.to_string(),
                files.iter().map(|f| f.to_string()).collect(),
            );
        }
        out
    }

    #[test]
    fn build_farm_lists_are_regenerated_in_their_style() {
        let src = "\
# rules
buildFarm:
  aws:
    build01:
      filenames:
        - a.yaml
        - b.yaml   # gone
    build03:
      filenames: [c.yaml]
    build05: {}
    build06:
  gcp:
    build02:
      filenames:
      - d.yaml
default: build03 # fallback
";
        let want = lists(&[
            ("aws", "build01", &["a.yaml", "e.yaml"]),
            ("aws", "build03", &["c.yaml", "f.yaml"]),
            ("aws", "build05", &["g.yaml"]),
            ("aws", "build06", &["h.yaml"]),
            ("gcp", "build02", &[]),
        ]);
        let e = regenerate_build_farm(src, &want).unwrap();
        assert_eq!(
            e.text,
            "\
# rules
buildFarm:
  aws:
    build01:
      filenames:
        - a.yaml
        - e.yaml
    build03:
      filenames: [c.yaml, f.yaml]
    build05:
      filenames:
        - g.yaml
    build06:
      filenames:
        - h.yaml
  gcp:
    build02:
      filenames: []
default: build03 # fallback
"
        );
        assert_eq!(e.lists, want);
        assert_eq!(e.changes.len(), 5);
        assert!(e.notes.is_empty(), "{:?}", e.notes);
        // Already as wanted: not a byte changes.
        let again = regenerate_build_farm(&e.text, &want).unwrap();
        assert_eq!(again.text, e.text);
        assert!(again.changes.is_empty());
    }

    #[test]
    fn anchors_in_build_farm_leave_it_alone() {
        let src = "buildFarm:\n  aws:\n    build01: &files\n      filenames: [a.yaml]\n    build03: *files\n";
        let want = lists(&[("aws", "build01", &["b.yaml"])]);
        let e = regenerate_build_farm(src, &want).unwrap_err();
        assert!(e.contains("anchors or aliases"), "{e}");
    }

    #[test]
    fn clusters_missing_from_build_farm_are_noted_not_added() {
        let src = "buildFarm:\n  aws:\n    build01:\n      filenames:\n      - a.yaml\n";
        let want = lists(&[
            ("aws", "build01", &["a.yaml"]),
            ("aws", "build09", &["b.yaml"]),
        ]);
        let e = regenerate_build_farm(src, &want).unwrap();
        assert_eq!(e.text, src);
        assert_eq!(e.notes.len(), 1, "{:?}", e.notes);
        assert!(e.notes[0].contains("build09"));
    }
}
