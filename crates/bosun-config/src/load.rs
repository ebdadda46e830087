//! Loading: finds the files, reads and parses them in parallel, turns every job into
//! a typed [`Job`] with its origin, then hands the whole set to the validator.
//!
//! One bad job never hides another: each job is deserialized on its own, and every
//! problem becomes a [`Diagnostic`]. A snapshot is produced only when there are no
//! errors, so a daemon can keep its last good one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;
use serde::de::DeserializeOwned;

use crate::diag::Diagnostic;
use crate::model::{next_version, Job, LoadStats, Origin, PresetDef, Snapshot};
use crate::names::valid_repo_name;
use crate::parsed::Parsed;
use crate::source::{walk, EntryKind, FileSource};
use crate::types::{
    InRepoSource, JobBase, JobSource, PeriodicFields, PostsubmitFields, Preset, PresubmitFields,
    ProwConfig,
};
use crate::validate::{self, ScheduleCheck};
use crate::yaml::{self, from_node_as_go, FoldedKey, KeyNotes, Mark, Node, UnknownField, Value};

pub use crate::defaults::default_config;

mod lighthouse;
mod repo;

pub use repo::{load_repo, RepoLoadOptions, RepoLoaded};

/// What to load.
#[derive(Clone, Default)]
pub struct LoadOptions {
    /// Prow's `config.yaml` (`--config`); without it every setting has Prow's default.
    pub config: Option<PathBuf>,
    /// Job-config directories or files (`--job-config`), read recursively.
    pub job_config: Vec<PathBuf>,
    /// In-repo checkouts from the command line (`--in-repo`), added to `in_repo`.
    pub in_repo: Vec<InRepoSource>,
    /// Cluster aliases defined by kubeconfig files, besides `build_clusters`; a
    /// job's `cluster` is checked against both.
    pub kubeconfig_clusters: Vec<String>,
    /// Kubeconfig files (`--kubeconfig`) whose context names are added to
    /// `kubeconfig_clusters` when loading.
    pub kubeconfigs: Vec<PathBuf>,
    /// Validates schedules (cron, time zones); the schedule engine provides it.
    pub schedule_check: Option<Arc<dyn ScheduleCheck>>,
}

/// The outcome of a load.
#[derive(Debug)]
pub struct Loaded {
    /// The snapshot, when there were no errors.
    pub snapshot: Option<Snapshot>,
    /// Every problem found, sorted by file and position.
    pub diagnostics: Vec<Diagnostic>,
    /// What was read (also when there were errors).
    pub stats: LoadStats,
}

impl Loaded {
    /// Number of errors.
    pub fn errors(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.is_error()).count()
    }

    /// Number of warnings.
    pub fn warnings(&self) -> usize {
        self.diagnostics.len() - self.errors()
    }
}

/// The format of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Format {
    /// Prow's central `config.yaml` (component settings; may hold jobs).
    Config,
    /// A job-config file (`presets`, `periodics`, `presubmits`, `postsubmits`).
    JobConfig,
    /// Prow's in-repo `.prow.yaml` or `.prow/*.yaml`.
    ProwYaml { repo: String, branch: String },
    /// Lighthouse's `.lighthouse/*/triggers.yaml`, in the checkout at `root`
    /// (its jobs' `source:` files are read from it).
    Lighthouse {
        repo: String,
        branch: String,
        root: PathBuf,
    },
}

impl Format {
    fn source(&self) -> JobSource {
        match self {
            Format::Config | Format::JobConfig => JobSource::Central,
            Format::ProwYaml { repo, branch } | Format::Lighthouse { repo, branch, .. } => {
                JobSource::InRepo {
                    repo: repo.clone(),
                    branch: branch.clone(),
                }
            }
        }
    }
}

/// Loads and validates everything `opts` names.
pub fn load(opts: &LoadOptions, fs: &dyn FileSource) -> Loaded {
    let mut parsed = Parsed::default();
    let mut owned;
    let mut opts = opts;
    if !opts.kubeconfigs.is_empty() {
        let (names, diags) = kubeconfig_clusters(fs, &opts.kubeconfigs);
        parsed.diagnostics.extend(diags);
        owned = opts.clone();
        owned.kubeconfig_clusters.extend(names);
        owned.kubeconfigs.clear();
        opts = &owned;
    }

    // The central config first: it says where in-repo checkouts are.
    if let Some(path) = &opts.config {
        parsed.append(parse_file(fs, path, &Format::Config));
        if let Some((config, ..)) = &mut parsed.config {
            resolve_config_paths(config, path);
        }
    }
    // (source, given on the command line rather than in the config file)
    let mut in_repo: Vec<(InRepoSource, bool)> = parsed
        .config
        .as_ref()
        .map(|(c, ..)| c.in_repo.iter().map(|s| (s.clone(), false)).collect())
        .unwrap_or_default();
    in_repo.extend(opts.in_repo.iter().map(|s| (s.clone(), true)));

    let mut files: Vec<(PathBuf, Format)> = Vec::new();
    for root in &opts.job_config {
        match fs.stat(root) {
            Ok(EntryKind::Dir) => {
                let w = walk(fs, root);
                parsed.diagnostics.extend(w.diagnostics);
                parsed.stats.ignored_files += w.ignored;
                files.extend(w.files.into_iter().map(|f| (f, Format::JobConfig)));
            }
            Ok(EntryKind::File) => files.push((root.clone(), Format::JobConfig)),
            Ok(_) => parsed
                .diagnostics
                .push(Diagnostic::error("not a regular file or directory").in_file(&label(root))),
            Err(e) => parsed
                .diagnostics
                .push(Diagnostic::error(format!("cannot read: {e}")).in_file(&label(root))),
        }
    }
    check_duplicate_basenames(&files, &mut parsed.diagnostics);
    for (source, from_options) in &in_repo {
        in_repo_files(
            fs,
            source,
            *from_options,
            &mut files,
            &mut parsed.diagnostics,
        );
    }

    let mut repo_stats = BTreeMap::new();
    parse_files(fs, &files, &mut parsed, &mut repo_stats);

    let config = match &parsed.config {
        Some((c, ..)) => c.clone(),
        None => default_config(),
    };
    let stats = parsed.stats.clone();
    let mut diagnostics = std::mem::take(&mut parsed.diagnostics);
    let inputs = validate::Inputs {
        config_file: opts
            .config
            .as_deref()
            .map_or_else(|| Arc::from("config.yaml"), label),
        kubeconfig_clusters: &opts.kubeconfig_clusters,
        schedule: opts.schedule_check.as_deref(),
    };
    let snapshot = validate::finish(config, parsed, &inputs, &mut diagnostics);
    resolve_fields(fs, &mut diagnostics);
    diagnostics.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    diagnostics.dedup();
    let ok = !diagnostics.iter().any(Diagnostic::is_error);
    Loaded {
        snapshot: snapshot.filter(|_| ok).map(
            |(config, presets, periodics, presubmits, postsubmits)| Snapshot {
                version: next_version(),
                config,
                presets,
                periodics,
                presubmits,
                postsubmits,
                stats: stats.clone(),
                repo_stats,
            },
        ),
        diagnostics,
        stats,
    }
}

/// Turns "field F below the definition at M" into the field's own position, by
/// parsing each concerned file once more (only files with such diagnostics).
fn resolve_fields(fs: &dyn FileSource, diags: &mut [Diagnostic]) {
    let mut by_file: BTreeMap<Arc<str>, Vec<usize>> = BTreeMap::new();
    for (i, d) in diags.iter().enumerate() {
        if let (Some(file), Some(_)) = (&d.file, &d.field) {
            by_file.entry(file.clone()).or_default().push(i);
        }
    }
    for (file, idx) in by_file {
        let Ok(bytes) = fs.read(Path::new(&*file)) else {
            continue;
        };
        let Ok(text) = std::str::from_utf8(&bytes) else {
            continue;
        };
        let Ok(docs) = yaml::parse_documents(text) else {
            continue;
        };
        for i in idx {
            let d = &mut diags[i];
            if let (Some(mark), Some(field)) = (d.mark, d.field.take()) {
                if let Some(found) = crate::model::locate(&docs, mark, &field) {
                    d.mark = Some(found);
                }
            }
        }
    }
}

/// A relative `in_repo[].path` written in the config file names a directory
/// beside that file, as a relative `clone_uri` names a repository beside its
/// job file: it is joined to the directory of `config_file` (as the file was
/// named, so a relative `--config` keeps paths relative to the process's
/// directory). So are the credential files `in_repo[].token_file` and
/// `in_repo[].ssh_key_file`, and `repos.token_file` and `repos.ssh_key_file`.
/// A `clone_uri` starting with `./` or `../` is a repository beside it too,
/// made an absolute `file://` URL. The snapshot's config holds the joined paths, which is what everything
/// reading them (the loader, the reload watches, what fetches the remotes) uses.
/// An empty path stays empty (the config's checks report it); an absolute one
/// is kept. `--in-repo` on the command line is not touched: it is relative to
/// the process's directory, as every other path argument.
fn resolve_config_paths(config: &mut ProwConfig, config_file: &Path) {
    let dir = config_file.parent().unwrap_or(Path::new(""));
    let beside = |path: &mut String| {
        let p = Path::new(path.as_str());
        if path.is_empty() || p.is_absolute() {
            return;
        }
        // `components` drops the `.` parts (`./lighthouse-app`); `..` is kept,
        // as the directory may be relative and cannot be shortened.
        let joined: PathBuf = dir.join(p).components().collect();
        *path = joined.to_string_lossy().into_owned();
    };
    for source in &mut config.in_repo {
        beside(&mut source.path);
        // A `clone_uri` of `./x` or `../x` is a repository beside this file,
        // given to git as an absolute `file://` URL.
        if let Some(uri) = source
            .clone_uri
            .as_mut()
            .filter(|u| u.starts_with("./") || u.starts_with("../"))
        {
            let joined: PathBuf = dir.join(uri.as_str()).components().collect();
            let absolute = std::path::absolute(&joined).unwrap_or(joined);
            *uri = format!("file://{}", absolute.to_string_lossy());
        }
        for file in [&mut source.token_file, &mut source.ssh_key_file]
            .into_iter()
            .flatten()
        {
            beside(file);
        }
    }
    let repos = &mut config.repos;
    for file in [&mut repos.token_file, &mut repos.ssh_key_file]
        .into_iter()
        .flatten()
    {
        beside(file);
    }
}

fn label(p: &Path) -> Arc<str> {
    Arc::from(p.to_string_lossy().as_ref())
}

/// Prow refuses two job-config files with the same base name (they become keys of
/// one ConfigMap).
fn check_duplicate_basenames(files: &[(PathBuf, Format)], diags: &mut Vec<Diagnostic>) {
    let mut seen: BTreeMap<&std::ffi::OsStr, &Path> = BTreeMap::new();
    for (path, _) in files {
        let Some(name) = path.file_name() else {
            continue;
        };
        if let Some(first) = seen.insert(name, path) {
            diags.push(
                Diagnostic::error(format!(
                    "duplicated basename is not allowed: {}",
                    name.to_string_lossy()
                ))
                .in_file(&label(path))
                .hint(format!("{} has the same file name", first.display())),
            );
        }
    }
}

/// Finds the in-repo files of one `in_repo` entry or `--in-repo` checkout
/// ([`checkout_files`]). An entry with a `clone_uri` is skipped: it names a
/// git remote, not a directory, and the daemon loads it
/// ([`load_repo`]).
fn in_repo_files(
    fs: &dyn FileSource,
    source: &InRepoSource,
    from_options: bool,
    files: &mut Vec<(PathBuf, Format)>,
    diags: &mut Vec<Diagnostic>,
) {
    if source.clone_uri.is_some() {
        return;
    }
    let bad_name = !valid_repo_name(&source.repo);
    if !from_options && (source.path.is_empty() || bad_name) {
        return; // reported, with its position, by the config's checks
    }
    if from_options && (source.path.is_empty() || bad_name) {
        diags.push(
            Diagnostic::error(format!(
                "in-repo source {:?}={:?} must be ORG/REPO=DIR",
                source.repo, source.path
            ))
            .in_file(&Arc::from("--in-repo"))
            .hint("use --in-repo ORG/REPO=DIR[@BRANCH]"),
        );
        return;
    }
    let branch = source.branch.as_deref().unwrap_or("main");
    checkout_files(
        fs,
        &source.repo,
        branch,
        Path::new(&source.path),
        files,
        diags,
    );
}

/// Finds the in-repo files of the checkout of `repo` (on `branch`) at `root`:
/// `.prow/` (all YAML below it) or else `.prow.yaml`, as Prow; and
/// `.lighthouse/*/triggers.yaml`. `load` and `load_repo` both find them here.
fn checkout_files(
    fs: &dyn FileSource,
    repo: &str,
    branch: &str,
    root: &Path,
    files: &mut Vec<(PathBuf, Format)>,
    diags: &mut Vec<Diagnostic>,
) {
    match fs.stat(root) {
        Ok(EntryKind::Dir) => {}
        Ok(_) => {
            diags.push(
                Diagnostic::error("in-repo checkout is not a directory").in_file(&label(root)),
            );
            return;
        }
        Err(e) => {
            diags.push(
                Diagnostic::error(format!("cannot read in-repo checkout of {repo}: {e}"))
                    .in_file(&label(root)),
            );
            return;
        }
    }
    let prow_fmt = Format::ProwYaml {
        repo: repo.to_string(),
        branch: branch.to_string(),
    };
    let prow_dir = root.join(".prow");
    if fs.stat(&prow_dir).ok() == Some(EntryKind::Dir) {
        let w = walk(fs, &prow_dir);
        diags.extend(w.diagnostics);
        files.extend(w.files.into_iter().map(|f| (f, prow_fmt.clone())));
    } else {
        let prow_yaml = root.join(".prow.yaml");
        match fs.stat(&prow_yaml) {
            Ok(EntryKind::File) => files.push((prow_yaml, prow_fmt)),
            Ok(_) => {
                diags.push(Diagnostic::error("not a regular file").in_file(&label(&prow_yaml)))
            }
            Err(_) => {}
        }
    }
    let lh = root.join(".lighthouse");
    if fs.stat(&lh).ok() == Some(EntryKind::Dir) {
        let mut dirs = match fs.read_dir(&lh) {
            Ok(d) => d,
            Err(e) => {
                diags.push(
                    Diagnostic::error(format!("cannot read directory: {e}")).in_file(&label(&lh)),
                );
                return;
            }
        };
        dirs.sort_by(|a, b| a.name.cmp(&b.name));
        for d in dirs {
            let dir = lh.join(&d.name);
            if fs.stat(&dir).ok() != Some(EntryKind::Dir) {
                continue;
            }
            let triggers = dir.join("triggers.yaml");
            match fs.stat(&triggers) {
                Ok(EntryKind::File) => files.push((
                    triggers,
                    Format::Lighthouse {
                        repo: repo.to_string(),
                        branch: branch.to_string(),
                        root: root.to_path_buf(),
                    },
                )),
                Ok(_) => {
                    diags.push(Diagnostic::error("not a regular file").in_file(&label(&triggers)))
                }
                Err(_) => {}
            }
        }
    }
}

/// Reads, parses and types `files` in parallel, appending the results to
/// `parsed` in the order of `files`; what the in-repo files of each
/// repository read goes to `repo_stats` too.
fn parse_files(
    fs: &dyn FileSource,
    files: &[(PathBuf, Format)],
    parsed: &mut Parsed,
    repo_stats: &mut BTreeMap<String, LoadStats>,
) {
    let results: Vec<Parsed> = files
        .par_iter()
        .map(|(path, format)| parse_file(fs, path, format))
        .collect();
    for ((_, format), r) in files.iter().zip(results) {
        if let Format::ProwYaml { repo, .. } | Format::Lighthouse { repo, .. } = format {
            let stats = repo_stats.entry(repo.clone()).or_default();
            stats.files += r.stats.files;
            stats.bytes += r.stats.bytes;
        }
        parsed.append(r);
    }
}

/// Reads, parses and types one file.
fn parse_file(fs: &dyn FileSource, path: &Path, format: &Format) -> Parsed {
    let file = label(path);
    let mut out = Parsed::default();
    // Never open what is not a regular file: a FIFO would block the loader.
    match fs.stat(path) {
        Ok(EntryKind::File) => {}
        Ok(_) => {
            out.diagnostics.push(
                Diagnostic::error("not a regular file (FIFO, socket, device or directory)")
                    .in_file(&file),
            );
            return out;
        }
        Err(e) => {
            out.diagnostics
                .push(Diagnostic::error(format!("cannot read: {e}")).in_file(&file));
            return out;
        }
    }
    let bytes = match fs.read(path) {
        Ok(b) => b,
        Err(e) => {
            out.diagnostics
                .push(Diagnostic::error(format!("cannot read: {e}")).in_file(&file));
            return out;
        }
    };
    out.stats.files = 1;
    out.stats.bytes = bytes.len() as u64;
    let text = match std::str::from_utf8(&bytes) {
        Ok(t) => t,
        Err(e) => {
            let valid = &bytes[..e.valid_up_to()];
            let line = valid.iter().filter(|&&b| b == b'\n').count() + 1;
            let line_start = valid.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            // The prefix is valid UTF-8: count characters, as every other position does.
            let col =
                std::str::from_utf8(&valid[line_start..]).map_or(0, |s| s.chars().count()) + 1;
            out.diagnostics.push(
                Diagnostic::error(format!(
                    "file is not valid UTF-8 (invalid byte 0x{:02x})",
                    bytes[e.valid_up_to()]
                ))
                .at(
                    &file,
                    Mark {
                        line: line as u32,
                        col: col as u32,
                    },
                )
                .hint("YAML configuration must be UTF-8 text"),
            );
            return out;
        }
    };
    let docs = match yaml::parse_documents(text) {
        Ok(d) => d,
        Err(e) => {
            out.diagnostics
                .push(Diagnostic::error(format!("invalid YAML: {}", e.message)).at(&file, e.mark));
            return out;
        }
    };
    let source = format.source();
    for doc in &docs {
        if doc.is_null() {
            continue;
        }
        if !matches!(doc.value, Value::Map(_)) {
            out.diagnostics.push(
                Diagnostic::error(format!(
                    "expected a mapping at the top level, found {}",
                    doc.kind()
                ))
                .at(&file, doc.mark),
            );
            continue;
        }
        let mut ex = Extractor {
            file: &file,
            source: &source,
            out: &mut out,
        };
        match format {
            Format::Config => ex.config(doc),
            Format::JobConfig => ex.job_config(doc),
            Format::ProwYaml { repo, .. } => ex.prow_yaml(doc, repo),
            Format::Lighthouse { repo, .. } => ex.lighthouse(doc, repo),
        }
    }
    if let Format::Lighthouse { root, .. } = format {
        lighthouse::load_sources(fs, path, root, &mut out);
    }
    out
}

struct Extractor<'x> {
    file: &'x Arc<str>,
    source: &'x JobSource,
    out: &'x mut Parsed,
}

const JOB_CONFIG_KEYS: &[&str] = &[
    "presets",
    "periodics",
    "presubmits",
    "postsubmits",
    "decorate_all_jobs",
    "prow_ignored",
    "all_repos",
];

impl Extractor<'_> {
    fn unknown(&mut self, u: &UnknownField, job: Option<&str>) {
        let mut d = Diagnostic::warning(format!("unknown field `{}`", u.key)).at(self.file, u.mark);
        if let Some(job) = job {
            d = d.job(job);
        }
        if let Some(best) = closest(&u.key, u.expected) {
            d = d.hint(format!("did you mean `{best}`?"));
        }
        self.out.diagnostics.push(d);
    }

    /// A key read as the field it matches up to case, as Prow reads it (Go's
    /// `encoding/json`): not an error for Prow, but worth fixing.
    fn folded(&mut self, f: &FoldedKey, job: Option<&str>) {
        let message = if f.group.is_empty() {
            format!(
                "field `{}` read as `{}` (Prow matches field names case-insensitively)",
                f.key, f.field
            )
        } else {
            let others: Vec<String> = f
                .group
                .iter()
                .filter(|(_, m)| *m != f.mark)
                .map(|(k, m)| format!("`{k}` (line {})", m.line))
                .collect();
            let order: Vec<String> = f.group.iter().map(|(k, _)| format!("`{k}`")).collect();
            format!(
                "field `{}` read as `{}`, as is {}: Prow decodes them in byte order ({}), \
                 the last one's value wins and mappings merge",
                f.key,
                f.field,
                others.join(", "),
                order.join(", ")
            )
        };
        let mut d =
            Diagnostic::warning(message)
                .at(self.file, f.mark)
                .hint(if f.group.is_empty() {
                    format!("write `{}`", f.field)
                } else {
                    format!("keep one key, `{}`", f.field)
                });
        if let Some(job) = job {
            d = d.job(job);
        }
        self.out.diagnostics.push(d);
    }

    /// Reports what decoding learned about keys.
    fn notes(&mut self, notes: KeyNotes, job: Option<&str>) {
        for u in notes.unknown.into_inner() {
            self.unknown(&u, job);
        }
        for f in notes.folded.into_inner() {
            self.folded(&f, job);
        }
    }

    fn typed<T: DeserializeOwned>(&mut self, node: &Node<'_>, job: Option<&str>) -> Option<T> {
        let notes = KeyNotes::default();
        let r = from_node_as_go::<T>(node, &notes);
        self.notes(notes, job);
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                let mut d = Diagnostic::error(e.message).at(self.file, e.mark.unwrap_or(node.mark));
                if let Some(job) = job {
                    d = d.job(job);
                }
                self.out.diagnostics.push(d);
                None
            }
        }
    }

    fn config(&mut self, doc: &Node<'_>) {
        // Typed as a whole; when a section is wrong, report it and retry without
        // it, so every section's first problem is reported at once.
        let mut doc = doc.clone();
        let config = loop {
            let notes = KeyNotes::default();
            match from_node_as_go::<ProwConfig>(&doc, &notes) {
                Ok(c) => {
                    self.notes(notes, None);
                    break c;
                }
                Err(e) => {
                    let mark = e.mark.unwrap_or(doc.mark);
                    self.out
                        .diagnostics
                        .push(Diagnostic::error(e.message).at(self.file, mark));
                    let Value::Map(entries) = &mut doc.value else {
                        break default_config();
                    };
                    // The section holding the error: the last one starting at or before it.
                    let Some(i) = entries.iter().rposition(|(k, _)| k.mark <= mark) else {
                        break default_config();
                    };
                    entries.remove(i);
                }
            }
        };
        self.out.config = Some((config, self.file.clone(), doc.mark));
        self.jobs_sections(&doc, true);
    }

    fn job_config(&mut self, doc: &Node<'_>) {
        let found = doc.go_fields(JOB_CONFIG_KEYS, "JobConfig");
        for u in &found.unknown {
            self.unknown(u, None);
        }
        for f in &found.folded {
            self.folded(f, None);
        }
        self.jobs_sections(doc, true);
    }

    /// `presets`, `periodics`, and the `presubmits`/`postsubmits` maps by repo
    /// (keys matched as Prow matches them: `Periodics:` is `periodics`).
    fn jobs_sections(&mut self, doc: &Node<'_>, periodics_allowed: bool) {
        if let Some(presets) = doc.go_field("presets") {
            self.presets(&presets);
        }
        if let Some(list) = doc.go_field("periodics") {
            if periodics_allowed {
                for node in self.list(&list, "periodics") {
                    if let Some(job) = self.job::<PeriodicFields>(node) {
                        self.out.periodics.push(job);
                    }
                }
            }
        }
        for (key, is_pre) in [("presubmits", true), ("postsubmits", false)] {
            let Some(by_repo) = doc.go_field(key) else {
                continue;
            };
            if by_repo.is_null() {
                continue;
            }
            if !matches!(by_repo.value, Value::Map(_)) {
                self.out.diagnostics.push(
                    Diagnostic::error(format!(
                        "`{key}` must map `org/repo` to a list of jobs, found {}",
                        by_repo.kind()
                    ))
                    .at(self.file, by_repo.mark),
                );
                continue;
            }
            let entries = by_repo.entries();
            for (i, (repo, list)) in entries.iter().enumerate() {
                let repo = repo.as_str().unwrap_or_default();
                // Two `presubmits` keys merge their maps (see `yaml::go_merge`):
                // as in a Go map, the later list of a repository replaces the earlier.
                if entries[i + 1..]
                    .iter()
                    .any(|(r, _)| r.as_str() == Some(repo))
                {
                    continue;
                }
                self.repo_jobs(repo, list, is_pre, key);
            }
        }
    }

    fn repo_jobs(&mut self, repo: &str, list: &Node<'_>, is_pre: bool, key: &str) {
        for node in self.list(list, key) {
            if is_pre {
                if let Some(job) = self.job::<PresubmitFields>(node) {
                    self.out.presubmits.push((repo.to_string(), job));
                }
            } else if let Some(job) = self.job::<PostsubmitFields>(node) {
                self.out.postsubmits.push((repo.to_string(), job));
            }
        }
    }

    fn list<'n, 'a>(&mut self, node: &'n Node<'a>, what: &str) -> &'n [Node<'a>] {
        match &node.value {
            Value::Seq(items) => items,
            _ if node.is_null() => &[],
            _ => {
                self.out.diagnostics.push(
                    Diagnostic::error(format!("`{what}` must be a list, found {}", node.kind()))
                        .at(self.file, node.mark),
                );
                &[]
            }
        }
    }

    fn presets(&mut self, node: &Node<'_>) {
        for item in self.list(node, "presets") {
            if let Some(preset) = self.typed::<Preset>(item, None) {
                self.out.presets.push(PresetDef {
                    preset,
                    source: self.source.clone(),
                    origin: Origin::of(self.file, item),
                });
            }
        }
    }

    /// Types one job. `JobBase` and the kind's own fields are read from the same
    /// mapping; a key is unknown only when neither knows it.
    fn job<K: DeserializeOwned>(&mut self, node: &Node<'_>) -> Option<Job<K>> {
        let name = node
            .go_field("name")
            .and_then(|n| n.as_str().map(str::to_string));
        let name_ref = name.as_deref();
        if !matches!(node.value, Value::Map(_)) {
            let mut d =
                Diagnostic::error(format!("expected a job (a mapping), found {}", node.kind()))
                    .at(self.file, node.mark);
            if let Some(n) = name_ref {
                d = d.job(n);
            }
            self.out.diagnostics.push(d);
            return None;
        }
        // Go reads a job into one struct (`JobBase` inlined in the kind's): here
        // the two halves are read from the same mapping. Their field names are
        // distinct up to case (a test checks it), so each key, folded or not,
        // goes to one field of one half, as in Go.
        let n_base = KeyNotes::default();
        let n_kind = KeyNotes::default();
        let base = from_node_as_go::<JobBase>(node, &n_base);
        let kind = from_node_as_go::<K>(node, &n_kind);
        for f in n_base
            .folded
            .into_inner()
            .into_iter()
            .chain(n_kind.folded.into_inner())
        {
            self.folded(&f, name_ref);
        }
        let (u_base, u_kind) = (n_base.unknown.into_inner(), n_kind.unknown.into_inner());
        // Top-level keys unknown to both halves.
        let top_kind: Vec<&UnknownField> = u_kind
            .iter()
            .filter(|u| u.mark.line > 0 && is_top(node, u))
            .collect();
        let mut expected: Vec<&'static str> = Vec::new();
        for u in &u_base {
            if is_top(node, u) {
                if let Some(k) = top_kind.iter().find(|k| k.mark == u.mark) {
                    if expected.is_empty() {
                        expected = u.expected.iter().chain(k.expected).copied().collect();
                    }
                    let mut d = Diagnostic::warning(format!("unknown field `{}`", u.key))
                        .at(self.file, u.mark);
                    if let Some(n) = name_ref {
                        d = d.job(n);
                    }
                    if let Some(best) = closest(&u.key, &expected) {
                        d = d.hint(format!("did you mean `{best}`?"));
                    }
                    self.out.diagnostics.push(d);
                }
            } else {
                self.unknown(u, name_ref);
            }
        }
        for u in u_kind.iter().filter(|u| !is_top(node, u)) {
            self.unknown(u, name_ref);
        }
        let mut failed = false;
        for r in [base.as_ref().err(), kind.as_ref().err()]
            .into_iter()
            .flatten()
        {
            failed = true;
            let mut d =
                Diagnostic::error(r.message.clone()).at(self.file, r.mark.unwrap_or(node.mark));
            if let Some(n) = name_ref {
                d = d.job(n);
            }
            self.out.diagnostics.push(d);
        }
        if failed {
            return None;
        }
        let (Ok(base), Ok(kind)) = (base, kind) else {
            return None;
        };
        let cluster_written = node
            .go_field("cluster")
            .is_some_and(|c| c.as_str().is_some_and(|c| !c.is_empty()));
        Some(Job {
            base,
            kind,
            presets: Vec::new(),
            cluster_written,
            source: self.source.clone(),
            origin: Origin::of(self.file, node),
        })
    }

    fn prow_yaml(&mut self, doc: &Node<'_>, repo: &str) {
        // Prow's `ProwYAML` fields, and `periodics`, matched to be refused.
        const KEYS: &[&str] = &[
            "presets",
            "presubmits",
            "postsubmits",
            "prow_ignored",
            "periodics",
        ];
        let found = doc.go_fields(KEYS, "ProwYAML");
        for u in &found.unknown {
            self.unknown(
                &UnknownField {
                    expected: &KEYS[..4],
                    ..u.clone()
                },
                None,
            );
        }
        for f in &found.folded {
            self.folded(f, None);
        }
        for (key, mark, v) in &found.fields {
            match *key {
                "presets" => self.presets(v),
                "presubmits" | "postsubmits" => {
                    self.repo_jobs(repo, v, *key == "presubmits", key)
                }
                "periodics" => self.out.diagnostics.push(
                    Diagnostic::error("periodics are not allowed in in-repo Prow config")
                        .at(self.file, *mark)
                        .hint("define periodics in the central job config, or in .lighthouse/*/triggers.yaml"),
                ),
                _ => {}
            }
        }
    }

    fn lighthouse(&mut self, doc: &Node<'_>, repo: &str) {
        let Some(header) = self.typed::<crate::types::TriggerConfigFile>(doc, None) else {
            return;
        };
        if !header.kind.is_empty() && header.kind != "TriggerConfig" {
            let mark = doc.go_field("kind").map_or(doc.mark, |n| n.mark);
            self.out.diagnostics.push(
                Diagnostic::error(format!(
                    "kind must be TriggerConfig, found {:?}",
                    header.kind
                ))
                .at(self.file, mark),
            );
            return;
        }
        let Some(spec) = doc.go_field("spec") else {
            return;
        };
        const KEYS: &[&str] = &["presubmits", "postsubmits", "periodics", "deployments"];
        let found = spec.go_fields(KEYS, "TriggerConfigSpec");
        for u in &found.unknown {
            self.unknown(u, None);
        }
        for f in &found.folded {
            self.folded(f, None);
        }
        for (key, _, v) in &found.fields {
            match *key {
                "presubmits" | "postsubmits" => self.repo_jobs(repo, v, *key == "presubmits", key),
                "periodics" => {
                    for node in self.list(v, "periodics") {
                        if let Some(job) = self.job::<PeriodicFields>(node) {
                            self.out.periodics.push(job);
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

fn is_top(node: &Node<'_>, u: &UnknownField) -> bool {
    node.entries().iter().any(|(k, _)| k.mark == u.mark)
}

/// The expected name closest to `key`, when it is close enough to be a typo.
fn closest<'e>(key: &str, expected: &[&'e str]) -> Option<&'e str> {
    expected
        .iter()
        .map(|e| (edit_distance(&key.to_lowercase(), &e.to_lowercase()), *e))
        .filter(|(d, e)| *d <= 2.max(e.len() / 4))
        .min()
        .map(|(_, e)| e)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The context names of a kubeconfig file: each is a build-cluster alias, as in
/// Prow. Used to check jobs' `cluster` fields (the clusters themselves are loaded
/// by the cluster registry).
pub fn kubeconfig_contexts(fs: &dyn FileSource, path: &Path) -> Result<Vec<String>, Diagnostic> {
    let file = label(path);
    let bytes = fs
        .read(path)
        .map_err(|e| Diagnostic::error(format!("cannot read kubeconfig: {e}")).in_file(&file))?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| Diagnostic::error("kubeconfig is not valid UTF-8").in_file(&file))?;
    let docs = yaml::parse_documents(text)
        .map_err(|e| Diagnostic::error(format!("invalid YAML: {}", e.message)).at(&file, e.mark))?;
    let mut names = Vec::new();
    for doc in &docs {
        for ctx in doc.get("contexts").map(Node::items).unwrap_or_default() {
            match ctx.get("name").and_then(Node::as_str) {
                Some(name) if !name.is_empty() => names.push(name.to_string()),
                _ => {
                    return Err(
                        Diagnostic::error("a kubeconfig context has no name").at(&file, ctx.mark)
                    )
                }
            }
        }
    }
    Ok(names)
}

/// The contexts of several kubeconfig files; a context defined twice is an error
/// (Prow: "context %s occurred more than once in kubeconfig dir").
pub fn kubeconfig_clusters(
    fs: &dyn FileSource,
    paths: &[PathBuf],
) -> (Vec<String>, Vec<Diagnostic>) {
    let mut names: Vec<String> = Vec::new();
    let mut diags = Vec::new();
    for p in paths {
        match kubeconfig_contexts(fs, p) {
            Ok(found) => {
                for n in found {
                    if names.contains(&n) {
                        diags.push(
                            Diagnostic::error(format!(
                                "context {n} occurred more than once in kubeconfig dir"
                            ))
                            .in_file(&label(p)),
                        );
                    } else {
                        names.push(n);
                    }
                }
            }
            Err(d) => diags.push(d),
        }
    }
    (names, diags)
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;
    use crate::yaml::{from_node, go_fold_eq};

    /// The field names of `T`, as its `Deserialize` impl gives them.
    fn fields<T: DeserializeOwned>() -> &'static [&'static str] {
        let docs = yaml::parse_documents("zz_not_a_field: 1\n").unwrap();
        let unknown = RefCell::new(Vec::new());
        let _ = from_node::<T>(&docs[0], &unknown);
        unknown.into_inner()[0].expected
    }

    /// `job` reads `JobBase` and the kind's fields from one mapping, as Go
    /// reads the one struct that inlines both: that matches keys as Go does
    /// only while no two of these names are equal up to case.
    #[test]
    fn job_field_names_are_distinct_up_to_case() {
        let base = fields::<JobBase>();
        for kind in [
            fields::<PeriodicFields>(),
            fields::<PresubmitFields>(),
            fields::<PostsubmitFields>(),
        ] {
            let all: Vec<&str> = base.iter().chain(kind).copied().collect();
            for (i, a) in all.iter().enumerate() {
                for b in &all[i + 1..] {
                    assert!(!go_fold_eq(a, b), "`{a}` and `{b}`");
                }
            }
        }
    }
}
