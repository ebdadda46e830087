//! `bosun check`: loads the configuration as the daemon would and reports every
//! problem as `file:line:column: error|warning: job NAME: message`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use bosun_config::types::InRepoSource;
use bosun_config::{load, LoadOptions, Loaded, OsFiles};
use clap::{Args, ValueEnum};

/// Where the configuration comes from (shared by `check` and, later, `serve`).
#[derive(Args, Debug, Clone, Default)]
pub struct ConfigArgs {
    /// Prow's central config.yaml.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// A job-config directory (read recursively) or file; repeatable.
    #[arg(long = "job-config", value_name = "DIR")]
    pub job_config: Vec<PathBuf>,
    /// A local checkout whose in-repo config is loaded (the @BRANCH part is optional); repeatable.
    #[arg(long = "in-repo", value_name = "ORG/REPO=DIR[@BRANCH]", value_parser = parse_in_repo)]
    pub in_repo: Vec<InRepoSource>,
    /// A kubeconfig file whose contexts are build-cluster aliases; repeatable.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Vec<PathBuf>,
    /// A directory of kubeconfig files (each file's contexts are aliases).
    /// Without `--kubeconfig` and `--kubeconfig-dir`, the files of `$KUBECONFIG`.
    #[arg(long = "kubeconfig-dir", value_name = "DIR")]
    pub kubeconfig_dir: Option<PathBuf>,
}

impl ConfigArgs {
    /// The loader's options for these arguments.
    pub fn load_options(&self) -> LoadOptions {
        LoadOptions {
            config: self.config.clone(),
            job_config: self.job_config.clone(),
            in_repo: self.in_repo.clone(),
            kubeconfigs: self.kubeconfig_files(),
            schedule_check: Some(std::sync::Arc::new(bosun_schedule::ConfigScheduleCheck)),
            ..LoadOptions::default()
        }
    }
}

impl ConfigArgs {
    /// The kubeconfig files, as Prow finds them: `--kubeconfig`, the files of
    /// `--kubeconfig-dir` (read again at each load, so files added later
    /// count), else `$KUBECONFIG` (colon-separated).
    pub fn kubeconfig_files(&self) -> Vec<PathBuf> {
        let mut files = self.kubeconfig.clone();
        if let Some(dir) = &self.kubeconfig_dir {
            let mut listed: Vec<PathBuf> = std::fs::read_dir(dir)
                .into_iter()
                .flatten()
                .flatten()
                .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect();
            listed.sort();
            files.extend(listed);
        }
        if files.is_empty() && self.kubeconfig_dir.is_none() {
            if let Some(v) = std::env::var_os("KUBECONFIG") {
                files.extend(std::env::split_paths(&v).filter(|p| !p.as_os_str().is_empty()));
            }
        }
        files
    }

    /// The contexts of the kubeconfig files (a file that cannot be read adds
    /// none; the loader reports it).
    pub fn kube_contexts(&self) -> Vec<bosun_cluster::registry::KubeContext> {
        self.kubeconfig_files()
            .into_iter()
            .flat_map(|file| {
                bosun_config::load::kubeconfig_contexts(&bosun_config::OsFiles, &file)
                    .unwrap_or_default()
                    .into_iter()
                    .map(move |name| bosun_cluster::registry::KubeContext {
                        name,
                        file: file.clone(),
                    })
            })
            .collect()
    }
}

fn parse_in_repo(s: &str) -> Result<InRepoSource, String> {
    let (repo, rest) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected ORG/REPO=DIR[@BRANCH]"))?;
    let (path, branch) = match rest.rsplit_once('@') {
        Some((p, b)) if !b.is_empty() && !b.contains('/') || rest.ends_with('@') => {
            (p.to_string(), Some(b.to_string()).filter(|b| !b.is_empty()))
        }
        _ => (rest.to_string(), None),
    };
    if repo.split('/').filter(|p| !p.is_empty()).count() != 2 || path.is_empty() {
        return Err(format!("{s:?}: expected ORG/REPO=DIR[@BRANCH]"));
    }
    Ok(InRepoSource {
        repo: repo.to_string(),
        path,
        branch,
    })
}

/// Output format.
#[derive(ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Format {
    /// One line per problem, then a summary.
    #[default]
    Text,
    /// One JSON document.
    Json,
}

/// `bosun check` arguments.
#[derive(Args, Debug, Clone)]
pub struct CheckArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Warnings fail the check too.
    #[arg(long)]
    pub strict: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// Runs the check, writes the report, and returns the exit status.
pub fn run(args: &CheckArgs, out: &mut dyn Write) -> ExitCode {
    let loaded = load(&args.config.load_options(), &OsFiles);
    let ok = loaded.errors() == 0 && !(args.strict && loaded.warnings() > 0);
    let written = match args.format {
        Format::Text => write_text(&loaded, out),
        Format::Json => write_json(&loaded, ok, out),
    };
    if written.is_err() {
        return ExitCode::from(2);
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The text report: every diagnostic, then one summary line.
pub fn write_text(loaded: &Loaded, out: &mut dyn Write) -> std::io::Result<()> {
    for d in &loaded.diagnostics {
        writeln!(out, "{d}")?;
    }
    let counts = loaded.snapshot.as_ref().map(|s| s.counts());
    let jobs = match counts {
        Some(c) => format!(
            "{}, {}, {}",
            plural(c.periodics, "periodic", "periodics"),
            plural(c.presubmits, "presubmit", "presubmits"),
            plural(c.postsubmits, "postsubmit", "postsubmits")
        ),
        None => "no snapshot (errors)".to_string(),
    };
    let ignored = if loaded.stats.ignored_files > 0 {
        format!(" ({} ignored by .prowignore)", loaded.stats.ignored_files)
    } else {
        String::new()
    };
    writeln!(
        out,
        "{}{ignored}: {jobs}; {}, {}",
        plural(loaded.stats.files, "file", "files"),
        plural(loaded.errors(), "error", "errors"),
        plural(loaded.warnings(), "warning", "warnings"),
    )
}

/// The JSON report.
pub fn write_json(loaded: &Loaded, ok: bool, out: &mut dyn Write) -> std::io::Result<()> {
    let doc = serde_json::json!({
        "ok": ok,
        "files": loaded.stats.files,
        "ignored_files": loaded.stats.ignored_files,
        "jobs": loaded.snapshot.as_ref().map(|s| s.counts()),
        "errors": loaded.errors(),
        "warnings": loaded.warnings(),
        "diagnostics": loaded.diagnostics.iter().map(|d| serde_json::json!({
            "severity": d.severity,
            "file": d.file,
            "line": d.mark.map(|m| m.line),
            "column": d.mark.map(|m| m.col),
            "job": d.job,
            "message": d.message,
            "hint": d.hint,
        })).collect::<Vec<_>>(),
    });
    serde_json::to_writer_pretty(&mut *out, &doc)?;
    writeln!(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_repo_argument() {
        let s = parse_in_repo("org/repo=/src/repo@release-1.0").unwrap();
        assert_eq!(
            (s.repo.as_str(), s.path.as_str(), s.branch.as_deref()),
            ("org/repo", "/src/repo", Some("release-1.0"))
        );
        let s = parse_in_repo("org/repo=../checkout").unwrap();
        assert_eq!((s.path.as_str(), s.branch), ("../checkout", None));
        assert!(parse_in_repo("repo=/x").is_err());
        assert!(parse_in_repo("org/repo").is_err());
        assert!(parse_in_repo("org/repo=").is_err());
    }
}
