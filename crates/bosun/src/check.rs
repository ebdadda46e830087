//! `bosun check`: loads the configuration as the daemon would
//! ([`bosun_host::load::load_checked`]: the loader's diagnostics and what
//! would end every run of a Lighthouse pipeline job in `error`) and reports
//! every problem as `file:line:column: error|warning: job NAME: message`.

use bosun_base::command::{Failed, Outcome};
use std::io::Write;

use bosun_config::Loaded;
use bosun_host::args::ConfigArgs;
use bosun_host::load::load_checked;
use clap::{Args, ValueEnum};

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
    /// Prow's `plugins.yaml` as `bosun serve --plugin-config` reads it:
    /// its problems are reported with the configuration's (the `trigger`
    /// plugin's enablement and `triggers:` settings; other plugins'
    /// sections are not read).
    #[arg(long, value_name = "FILE")]
    pub plugin_config: Option<std::path::PathBuf>,
}

/// Runs the check and writes the report; fails (exit status 1) when the
/// configuration has errors, or warnings under `--strict`, and with exit
/// status 2 when the report cannot be written.
pub fn run(args: &CheckArgs, out: &mut dyn Write) -> Outcome {
    let mut loaded = load_checked(&args.config);
    if let Some(path) = &args.plugin_config {
        if let Err(problems) = bosun_config::plugins::load_plugins(path) {
            loaded.diagnostics.extend(problems);
        }
    }
    let ok = loaded.errors() == 0 && !(args.strict && loaded.warnings() > 0);
    match args.format {
        Format::Text => write_text(&loaded, out)?,
        Format::Json => write_json(&loaded, ok, out)?,
    }
    if ok {
        Ok(())
    } else {
        // The report says why.
        Err(Failed::status(1))
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
