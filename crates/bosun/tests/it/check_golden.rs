//! `bosun check` end to end: the real binary on the fixture trees under
//! `tests/fixtures/`, run from the tree's directory so the paths it prints are
//! relative and stable. The full output is compared with a golden copy;
//! `UPDATE_EXPECT=1 cargo test -p bosun --test it check_golden::` rewrites
//! the copies (read every line before keeping them).
//!
//! - `broken/`: errors of several kinds (YAML syntax, types, Prow's rules), some
//!   warnings, a clean file, a `.prowignore`d file and a README.
//! - `good/`: no errors; `good/extra/` adds warnings only.

use std::path::PathBuf;
use std::process::Command;

use expect_test::expect;

use crate::common::{assert_run, Run};

fn bosun(tree: &str, args: &[&str]) -> Run {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(tree);
    let out = Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args(args)
        .current_dir(&dir)
        .output()
        .expect("run bosun");
    Run {
        code: out.status.code().expect("exited normally"),
        stdout: String::from_utf8(out.stdout).expect("UTF-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("UTF-8 stderr"),
    }
}

fn check(tree: &str, extra: &[&str]) -> Run {
    let mut args = vec!["check", "--config", "config.yaml", "--job-config", "jobs"];
    args.extend_from_slice(extra);
    bosun(tree, &args)
}

fn json(run: &Run) -> serde_json::Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", run.stdout))
}

#[test]
fn broken_tree_reports_every_problem_and_fails() {
    assert_run(
        &check("broken", &[]),
        1,
        expect![[r#"
        jobs/rules.yaml:3:3: error: job nightly-build: duplicated periodic job: nightly-build
          hint: first defined at jobs/good.yaml:9:3
        jobs/rules.yaml:9:3: error: job cleanup: cannot parse duration for cleanup: time: unknown unit "d" in duration "1d"
          hint: durations are Go durations such as 90s, 10m, 1h30m (no `d`: write 24h)
        jobs/rules.yaml:13:3: warning: job a-periodic-job-whose-name-is-much-longer-than-sixty-three-characters: name of Periodic job "a-periodic-job-whose-name-is-much-longer-than-sixty-three-characters" too long (should be at most 63 characters)
          hint: Prow labels pods with job names; the label is truncated to 63 characters
        jobs/rules.yaml:15:3: error: job a-periodic-job-whose-name-is-much-longer-than-sixty-three-characters: max_concurrency: -1 must be a non-negative number
        jobs/rules.yaml:16:3: error: job a-periodic-job-whose-name-is-much-longer-than-sixty-three-characters: job configuration for "a-periodic-job-whose-name-is-much-longer-than-sixty-three-characters" specifies unknown 'cluster' value "build02"
          hint: known clusters: default, build01
        jobs/rules.yaml:23:5: warning: job post-widgets-jenkins: agent jenkins is not supported by bosun: the job loads, but its runs end in error
        jobs/syntax.yaml:5:8: error: invalid YAML: mapping values are not allowed in this context
        jobs/types.yaml:5:15: error: job pull-widgets-lint: invalid type: string "main", expected a sequence
        jobs/types.yaml:10:5: warning: job pull-widgets-docs: unknown field `optinal`
          hint: did you mean `optional`?
        jobs/types.yaml:18:23: error: job hourly-sync: unknown variant `sometimes`, expected one of `forbid`, `allow`, `replace`, `queue_one`
        5 files (1 ignored by .prowignore): no snapshot (errors); 7 errors, 3 warnings
    "#]],
    );
}

#[test]
fn good_tree_passes() {
    assert_run(
        &check("good", &[]),
        0,
        expect![[r#"
        3 files: 2 periodics, 2 presubmits, 1 postsubmit; 0 errors, 0 warnings
    "#]],
    );
}

#[test]
fn warnings_pass_unless_strict() {
    let run = check("good", &["--job-config", "extra"]);
    assert_run(
        &run,
        0,
        expect![[r#"
        extra/warnings.yaml:5:3: warning: job legacy-jenkins-job: agent jenkins is not supported by bosun: the job loads, but its runs end in error
        extra/warnings.yaml:9:5: warning: job sync-mirror: retry.attempts 20 is capped at 10
        4 files: 4 periodics, 2 presubmits, 1 postsubmit; 0 errors, 2 warnings
    "#]],
    );
    let strict = check("good", &["--job-config", "extra", "--strict"]);
    assert_eq!(
        strict.stdout, run.stdout,
        "--strict changes only the exit code"
    );
    assert_eq!(strict.code, 1);
    // Without warnings, --strict passes.
    assert_eq!(check("good", &["--strict"]).code, 0);
}

#[test]
fn missing_config_file() {
    let run = bosun(
        "good",
        &["check", "--config", "missing.yaml", "--job-config", "jobs"],
    );
    assert_run(
        &run,
        1,
        expect![[r#"
        missing.yaml: error: cannot read: No such file or directory (os error 2)
        2 files: no snapshot (errors); 1 error, 0 warnings
    "#]],
    );
}

#[test]
fn json_report_of_the_broken_tree() {
    let run = check("broken", &["--format", "json"]);
    assert_eq!(run.code, 1);
    assert_eq!(run.stderr, "");
    let doc = json(&run);
    // The same problems as the text report.
    let text = check("broken", &[]);
    let summary = text.stdout.lines().last().expect("a summary line");
    let errors = doc["errors"].as_u64().expect("errors");
    let warnings = doc["warnings"].as_u64().expect("warnings");
    assert_eq!((errors, warnings), (7, 3));
    assert_eq!(
        summary,
        format!("5 files (1 ignored by .prowignore): no snapshot (errors); {errors} errors, {warnings} warnings")
    );
    assert_eq!(doc["ok"], false);
    assert_eq!(doc["files"], 5);
    assert_eq!(doc["ignored_files"], 1);
    assert_eq!(doc["jobs"], serde_json::Value::Null, "no snapshot");
    let diags = doc["diagnostics"].as_array().expect("diagnostics");
    assert_eq!(diags.len() as u64, errors + warnings);
    let count = |severity: &str| diags.iter().filter(|d| d["severity"] == severity).count() as u64;
    assert_eq!((count("error"), count("warning")), (errors, warnings));
    // Each diagnostic renders as a line of the text report.
    for d in diags {
        let mut line = String::new();
        if let Some(file) = d["file"].as_str() {
            line += file;
            if let (Some(l), Some(c)) = (d["line"].as_u64(), d["column"].as_u64()) {
                line += &format!(":{l}:{c}");
            }
            line += ": ";
        }
        line += &format!("{}: ", d["severity"].as_str().expect("severity"));
        if let Some(job) = d["job"].as_str() {
            line += &format!("job {job}: ");
        }
        line += d["message"].as_str().expect("message");
        assert!(
            text.stdout.lines().any(|l| l == line),
            "{line:?} is not in the text report"
        );
        let hint = d["hint"].as_str();
        assert!(d["hint"].is_null() || hint.is_some_and(|h| text.stdout.contains(h)));
    }
}

#[test]
fn json_report_of_the_good_tree() {
    let run = check("good", &["--format", "json"]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
    let doc = json(&run);
    assert_eq!(
        doc,
        serde_json::json!({
            "ok": true,
            "files": 3,
            "ignored_files": 0,
            "jobs": {"periodics": 2, "presubmits": 2, "postsubmits": 1},
            "errors": 0,
            "warnings": 0,
            "diagnostics": [],
        })
    );
    // Warnings only: ok unless --strict.
    let run = check("good", &["--job-config", "extra", "--format", "json"]);
    let doc = json(&run);
    assert_eq!((run.code, &doc["ok"]), (0, &serde_json::json!(true)));
    assert_eq!(doc["errors"], 0);
    let warnings = doc["warnings"].as_u64().expect("warnings");
    assert!(warnings > 0);
    assert_eq!(
        doc["diagnostics"].as_array().map(Vec::len),
        Some(warnings as usize)
    );
    assert_eq!(doc["jobs"]["periodics"], 4);
    let run = check(
        "good",
        &["--job-config", "extra", "--format", "json", "--strict"],
    );
    let doc = json(&run);
    assert_eq!((run.code, &doc["ok"]), (1, &serde_json::json!(false)));
    assert_eq!(doc["jobs"]["periodics"], 4, "the snapshot is still built");
}

#[test]
fn a_plugin_configuration_is_checked_with_its_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("jobs")).unwrap();
    std::fs::write(
        d.join("config.yaml"),
        "build_clusters:\n  default: {kind: local}\n",
    )
    .unwrap();
    std::fs::write(
        d.join("good.yaml"),
        "plugins:\n  acme: [trigger, lgtm]\ntriggers:\n- repos: [acme]\n  trusted_apps: [dependabot]\n  only_org_members: true\nlgtm:\n- repos: [acme]\n",
    )
    .unwrap();
    std::fs::write(
        d.join("bad.yaml"),
        "plugins:\n  acme: [trigger]\ntriggers:\n- repos: [acme]\n  only_org_members: maybe\n",
    )
    .unwrap();
    let run = |file: &str| {
        Command::new(env!("CARGO_BIN_EXE_bosun"))
            .args([
                "check",
                "--config",
                "config.yaml",
                "--job-config",
                "jobs",
                "--plugin-config",
                file,
            ])
            .current_dir(d)
            .output()
            .unwrap()
    };
    let good = run("good.yaml");
    assert_eq!(good.status.code(), Some(0), "{good:?}");
    let bad = run("bad.yaml");
    assert_eq!(bad.status.code(), Some(1), "{bad:?}");
    let out = String::from_utf8_lossy(&bad.stdout);
    assert!(out.contains("bad.yaml:5:"), "{out}");
    assert!(out.contains("error"), "{out}");
}
