//! `bosun schedule`: the next fire times of periodics, computed by the same engine
//! the scheduler uses.

use bosun_base::command::{Failed, Outcome};
use std::io::Write;

use bosun_config::{load, OsFiles, Periodic};
use bosun_host::args::ConfigArgs;
use bosun_schedule::{describe, ParseOptions, Schedule};
use clap::Args;
use jiff::Timestamp;

/// `bosun schedule` arguments.
#[derive(Args, Debug, Clone)]
pub struct ScheduleArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Only this periodic (its name, or ORG/REPO:name for in-repo ones).
    #[arg(long)]
    pub job: Option<String>,
    /// How many fire times to print per periodic.
    #[arg(long, default_value_t = 5)]
    pub count: usize,
    /// Print fire times after this instant (exclusive; RFC 3339). Default: now.
    #[arg(long, value_name = "TIME")]
    pub from: Option<Timestamp>,
}

/// Prints the schedule of each selected periodic.
pub fn run(args: &ScheduleArgs, out: &mut dyn Write) -> Outcome {
    let loaded = load(&args.config.load_options(), &OsFiles);
    let Some(snapshot) = loaded.snapshot else {
        for d in loaded.diagnostics.iter().filter(|d| d.is_error()) {
            writeln!(out, "{d}")?;
        }
        writeln!(out, "the configuration has errors: run `bosun check`")?;
        return Err(Failed::status(1));
    };
    let from = args.from.unwrap_or_else(Timestamp::now);
    let selected: Vec<&Periodic> = snapshot
        .periodics
        .iter()
        .filter(|p| {
            args.job
                .as_deref()
                .is_none_or(|j| p.has_identity(j) || p.base.name == j)
        })
        .collect();
    if selected.is_empty() {
        writeln!(
            out,
            "no periodic matches {:?}",
            args.job.as_deref().unwrap_or("")
        )?;
        return Err(Failed::status(1));
    }
    for p in selected {
        write_periodic(p, from, args.count, out)?;
    }
    Ok(())
}

fn write_periodic(
    p: &Periodic,
    from: Timestamp,
    count: usize,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let k = &p.kind;
    if let Some(cron) = k.cron.as_deref() {
        let identity = p.identity();
        let opts = ParseOptions {
            timezone: k.timezone.as_deref(),
            identity: Some(&identity),
        };
        let s = Schedule::parse(cron, opts).expect("validated by load");
        writeln!(out, "{}: cron {cron:?}: {}", p.identity(), describe(&s))?;
        let zone = s.as_cron().map(|c| c.zone().clone());
        let mut t = from;
        for _ in 0..count {
            let Some(n) = s.next_after(t) else {
                writeln!(out, "  (never fires)")?;
                break;
            };
            match &zone {
                Some(z) if z.iana_name() != Some("UTC") => writeln!(
                    out,
                    "  {n}  {}",
                    n.to_zoned(z.clone()).strftime("%Y-%m-%d %H:%M:%S %Z")
                )?,
                _ => writeln!(out, "  {n}")?,
            }
            t = n;
        }
    } else if let Some(i) = k.interval.as_deref() {
        writeln!(
            out,
            "{}: interval {i}: {i} after the previous run was created; at once if it never ran",
            p.identity()
        )?;
    } else if let Some(i) = k.minimum_interval.as_deref() {
        writeln!(out, "{}: minimum_interval {i}: {i} after the previous run completed; at once if it never ran", p.identity())?;
    }
    Ok(())
}
