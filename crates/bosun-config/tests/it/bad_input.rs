//! Bad input: every broken file gives a clear diagnostic with its file, line and
//! column, never a panic or a hang, and the loader goes on with the other files.
//!
//! Most tests use [`MemFiles`] (which panics if the loader ever opens a FIFO); a
//! few repeat the file-system cases on the real file system with `tempfile`.
//!
//! YAML is written indented in the tests; [`y`] strips the indentation, so line 1
//! is the line right after the opening quote.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use bosun_config::source::{MemEntry, MemFiles};
use bosun_config::{load, Diagnostic, FileSource, LoadOptions, Loaded, OsFiles, Severity};

use crate::common::{y, Tmp};

const JOBS: &str = "/cfg/jobs";
const BAD: &str = "/cfg/jobs/bad.yaml";

/// A second job-config file next to the bad one. Its warning shows that the
/// loader read, parsed and typed it although the other file was broken.
const OTHER_FILE: &str = "/cfg/jobs/zz-other.yaml";
const OTHER: &str = "
    periodics:
    - name: other
      interval: 1h
      colour: blue
      spec:
        containers:
        - image: alpine
";
const OTHER_WARNING: &str =
    "/cfg/jobs/zz-other.yaml:4:3: warning: job other: unknown field `colour`";

/// A valid job-config file with one periodic, `good`.
const GOOD: &str = "
    periodics:
    - name: good
      interval: 1h
      spec:
        containers:
        - image: alpine
";

fn job_config(paths: &[&str]) -> LoadOptions {
    LoadOptions {
        job_config: paths.iter().map(PathBuf::from).collect(),
        ..LoadOptions::default()
    }
}

/// Every diagnostic as `bosun check` prints it (hints on their own line).
fn rendered(loaded: &Loaded) -> Vec<String> {
    loaded
        .diagnostics
        .iter()
        .map(Diagnostic::to_string)
        .collect()
}

/// Loads `/cfg/jobs` holding `bad.yaml` (these bytes) and `zz-other.yaml`.
fn load_bad(bytes: impl AsRef<[u8]>) -> Loaded {
    let mut fs = MemFiles::new();
    fs.file(BAD, bytes).file(OTHER_FILE, y(OTHER));
    let loaded = load(&job_config(&[JOBS]), &fs);
    assert_eq!(loaded.stats.files, 2, "both files are read");
    loaded
}

/// Asserts the single problem of `bad.yaml`, structurally and as printed, and that
/// the other file was still loaded. `job` is the job named in the diagnostic.
fn assert_bad(loaded: &Loaded, line: u32, col: u32, job: Option<&str>, message: &str) {
    assert_eq!(loaded.diagnostics.len(), 2, "{:#?}", rendered(loaded));
    let d = &loaded.diagnostics[0];
    assert_eq!(d.severity, Severity::Error);
    assert_eq!(d.file.as_deref(), Some(BAD));
    let mark = d.mark.expect("a position");
    assert_eq!((mark.line, mark.col), (line, col), "{d}");
    assert_eq!(d.job.as_deref(), job);
    assert_eq!(d.message, message);
    let job = job.map(|j| format!("job {j}: ")).unwrap_or_default();
    assert_eq!(
        rendered(loaded),
        vec![
            format!("{BAD}:{line}:{col}: error: {job}{message}"),
            OTHER_WARNING.to_string(),
        ]
    );
    assert!(loaded.snapshot.is_none(), "no snapshot with errors");
}

// --- Malformed YAML: the whole file is refused, the other files are not.

#[test]
fn unclosed_flow_sequence_before_the_next_job() {
    let loaded = load_bad(y("
        periodics:
        - name: a
          interval: 1h
          tags: [nightly, slow
        - name: b
          interval: 1h
    "));
    // The scanner reads `slow - name` as one flow scalar and stops at the `:`.
    assert_bad(
        &loaded,
        5,
        7,
        None,
        "invalid YAML: illegal placement of ':' indicator",
    );
}

#[test]
fn unclosed_flow_sequence_at_the_end_of_the_file() {
    let loaded = load_bad(y("
        periodics:
        - name: a
          interval: 1h
          tags: [nightly, slow
    "));
    // Reported at the end of the file (line 5, after the last line).
    assert_bad(
        &loaded,
        5,
        1,
        None,
        "invalid YAML: while parsing a flow sequence, expected ',' or ']'",
    );
}

#[test]
fn unclosed_flow_mapping() {
    let loaded = load_bad(y("
        periodics:
        - {name: a, interval: 1h
    "));
    assert_bad(
        &loaded,
        3,
        1,
        None,
        "invalid YAML: while parsing a flow mapping, did not find expected ',' or '}'",
    );
}

#[test]
fn over_indented_key() {
    let loaded = load_bad(y("
        periodics:
        - name: a
          interval: 1h
           spec: {}
    "));
    assert_bad(
        &loaded,
        4,
        8,
        None,
        "invalid YAML: mapping values are not allowed in this context",
    );
}

#[test]
fn under_indented_key() {
    let loaded = load_bad(y("
        periodics:
          - name: a
            interval: 1h
          spec:
            containers: []
    "));
    assert_bad(
        &loaded,
        4,
        3,
        None,
        "invalid YAML: while parsing a block collection, did not find expected '-' indicator",
    );
}

#[test]
fn tab_indentation_of_a_block_sequence() {
    let loaded = load_bad("periodics:\n\t- name: a\n\t  interval: 1h\n");
    // At the tab itself.
    assert_bad(
        &loaded,
        2,
        1,
        None,
        "invalid YAML: tabs disallowed within this context (block indentation)",
    );
}

#[test]
fn tab_indentation_of_a_key() {
    // Line 4 is indented with a tab; go-yaml (Prow) reports line 4.
    let loaded = load_bad("periodics:\n- name: a\n  interval: 1h\n\tspec: {}\n");
    let d = &loaded.diagnostics[0];
    assert_eq!(d.file.as_deref(), Some(BAD));
    assert!(d.message.contains("tab"), "{d}");
    assert_eq!(d.mark.map(|m| m.line), Some(4), "{d}");
}

#[test]
fn top_level_must_be_a_mapping() {
    let loaded = load_bad("- name: a\n- name: b\n");
    assert_bad(
        &loaded,
        1,
        1,
        None,
        "expected a mapping at the top level, found a sequence",
    );
}

#[test]
fn mapping_keys_must_be_scalars() {
    let loaded = load_bad("? [a, b]\n: c\n");
    assert_bad(
        &loaded,
        1,
        3,
        None,
        "invalid YAML: mapping keys must be scalars, found a sequence",
    );
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let n = 50_000;
    let loaded = load_bad(format!(
        "prow_ignored: {}{}\n",
        "[".repeat(n),
        "]".repeat(n)
    ));
    let d = &loaded.diagnostics[0];
    assert_eq!(d.file.as_deref(), Some(BAD));
    assert_eq!(d.mark.map(|m| m.line), Some(1));
    assert_eq!(d.message, "invalid YAML: recursion limit exceeded");
    assert_eq!(rendered(&loaded)[1], OTHER_WARNING);
}

// --- Wrong types: the job is refused, the other jobs of the file are not.

#[test]
fn string_where_a_list_is_expected() {
    let loaded = load_bad(y("
        presubmits:
          org/repo:
          - name: unit
            branches: main
            spec:
              containers:
              - image: alpine
          - name: lint
            spec:
              containers:
              - image: alpine
    "));
    assert_bad(
        &loaded,
        4,
        15,
        Some("unit"),
        r#"invalid type: string "main", expected a sequence"#,
    );
}

#[test]
fn section_of_the_wrong_type() {
    let loaded = load_bad(y("
        periodics: nightly
        presubmits: [org/repo]
        postsubmits:
          org/repo: publish
    "));
    assert_eq!(
        rendered(&loaded),
        vec![
            "/cfg/jobs/bad.yaml:1:12: error: `periodics` must be a list, found a scalar",
            "/cfg/jobs/bad.yaml:2:13: error: `presubmits` must map `org/repo` to a list of jobs, found a sequence",
            "/cfg/jobs/bad.yaml:4:13: error: `postsubmits` must be a list, found a scalar",
            OTHER_WARNING,
        ]
    );
}

#[test]
fn max_concurrency_must_be_a_number() {
    let text = y(r#"
        periodics:
        - name: a
          interval: 1h
          max_concurrency: "x"
          spec:
            containers:
            - image: alpine
    "#);
    let loaded = load_bad(&text);
    assert_bad(
        &loaded,
        4,
        20,
        Some("a"),
        r#"invalid type: string "x", expected i64"#,
    );
    // Unquoted, the same.
    let loaded = load_bad(text.replace(r#""x""#, "x"));
    assert_bad(
        &loaded,
        4,
        20,
        Some("a"),
        r#"invalid type: string "x", expected i64"#,
    );
}

#[test]
fn a_job_that_is_a_scalar() {
    let loaded = load_bad(y("
        periodics:
        - nightly
        - ~
        - name: b
          interval: 1h
          spec:
            containers:
            - image: alpine
    "));
    assert_eq!(
        rendered(&loaded),
        vec![
            "/cfg/jobs/bad.yaml:2:3: error: expected a job (a mapping), found a scalar",
            "/cfg/jobs/bad.yaml:3:3: error: expected a job (a mapping), found null",
            OTHER_WARNING,
        ]
    );
}

#[test]
fn wrong_types_deep_in_a_pod_spec_point_at_the_value() {
    let loaded = load_bad(y("
        periodics:
        - name: a
          interval: 1h
          spec:
            containers:
            - image: alpine
              env:
              - name: A
                value: [1]
        - name: b
          interval: 1h
          spec:
            containers:
              image: alpine
    "));
    assert_eq!(
        rendered(&loaded),
        vec![
            "/cfg/jobs/bad.yaml:9:16: error: job a: invalid type: sequence, expected a string",
            "/cfg/jobs/bad.yaml:14:7: error: job b: invalid type: map, expected a sequence",
            OTHER_WARNING,
        ]
    );
}

#[test]
fn every_bad_job_of_a_file_is_reported() {
    let loaded = load_bad(y(r#"
        periodics:
        - name: a
          interval: 1h
          max_concurrency: lots
        - name: b
          interval: 1h
          concurrency_policy: sometimes
        - name: c
          interval: 1h
          catch_up: never
    "#));
    assert_eq!(
        rendered(&loaded),
        vec![
            r#"/cfg/jobs/bad.yaml:4:20: error: job a: invalid type: string "lots", expected i64"#,
            "/cfg/jobs/bad.yaml:7:23: error: job b: unknown variant `sometimes`, expected one of `forbid`, `allow`, `replace`, `queue_one`",
            "/cfg/jobs/bad.yaml:10:13: error: job c: unknown variant `never`, expected `latest` or `skip`",
            OTHER_WARNING,
        ]
    );
}

// --- Duplicate keys.

#[test]
fn duplicate_key_in_a_job() {
    let loaded = load_bad(y("
        periodics:
        - name: a
          interval: 1h
          name: b
    "));
    assert_bad(
        &loaded,
        4,
        3,
        None,
        "invalid YAML: duplicate key `name` (first defined at line 2)",
    );
}

#[test]
fn duplicate_key_at_the_top_level() {
    let loaded = load_bad(y("
        periodics: []
        presubmits: {}
        periodics: []
    "));
    assert_bad(
        &loaded,
        3,
        1,
        None,
        "invalid YAML: duplicate key `periodics` (first defined at line 1)",
    );
}

#[test]
fn duplicate_key_deep_in_a_job() {
    let loaded = load_bad(y(r#"
        periodics:
        - name: a
          interval: 1h
          labels:
            team: "x"
            team: "y"
    "#));
    assert_bad(
        &loaded,
        6,
        5,
        None,
        "invalid YAML: duplicate key `team` (first defined at line 5)",
    );
}

// --- Unknown enum values.

#[test]
fn unknown_concurrency_policy() {
    let loaded = load_bad(y("
        periodics:
        - name: a
          interval: 1h
          concurrency_policy: sometimes
          spec:
            containers:
            - image: alpine
    "));
    assert_bad(
        &loaded,
        4,
        23,
        Some("a"),
        "unknown variant `sometimes`, expected one of `forbid`, `allow`, `replace`, `queue_one`",
    );
}

// --- Empty files.

#[test]
fn empty_and_comment_only_files_have_no_jobs_and_no_diagnostics() {
    for text in [
        "",
        "\n\n",
        "# nothing here yet\n\n# TODO\n",
        "---\n",
        "---\n...\n",
    ] {
        let mut fs = MemFiles::new();
        fs.file("/cfg/jobs/empty.yaml", text)
            .file("/cfg/jobs/good.yaml", y(GOOD));
        let loaded = load(&job_config(&[JOBS]), &fs);
        assert_eq!(rendered(&loaded), Vec::<String>::new(), "{text:?}");
        assert_eq!(loaded.stats.files, 2);
        let counts = loaded.snapshot.expect("a snapshot").counts();
        assert_eq!(
            (counts.periodics, counts.presubmits, counts.postsubmits),
            (1, 0, 0)
        );
    }
    // Alone, too: an empty snapshot, not an error.
    let mut fs = MemFiles::new();
    fs.file("/cfg/jobs/empty.yaml", "# empty\n");
    let loaded = load(&job_config(&[JOBS]), &fs);
    assert!(loaded.diagnostics.is_empty());
    let snapshot = loaded.snapshot.expect("a snapshot");
    assert!(snapshot.periodics.is_empty() && snapshot.presubmits.is_empty());
}

#[test]
fn empty_sections_are_no_jobs() {
    let mut fs = MemFiles::new();
    fs.file(
        "/cfg/jobs/empty.yaml",
        "presets:\nperiodics:\npresubmits:\n  org/repo:\npostsubmits: {}\n",
    );
    let loaded = load(&job_config(&[JOBS]), &fs);
    assert_eq!(rendered(&loaded), Vec::<String>::new());
    let counts = loaded.snapshot.expect("a snapshot").counts();
    assert_eq!(
        (counts.periodics, counts.presubmits, counts.postsubmits),
        (0, 0, 0)
    );
}

// --- Encoding.

#[test]
fn non_utf8_byte_after_ascii() {
    let loaded = load_bad(b"periodics:\n- name: a\n  interval: 1h # caf\xe9\n".as_slice());
    assert_eq!(
        rendered(&loaded),
        vec![
            "/cfg/jobs/bad.yaml:3:21: error: file is not valid UTF-8 (invalid byte 0xe9)\n  hint: YAML configuration must be UTF-8 text",
            OTHER_WARNING,
        ]
    );
    let d = &loaded.diagnostics[0];
    assert_eq!(d.file.as_deref(), Some(BAD));
    assert_eq!(d.mark.map(|m| (m.line, m.col)), Some((3, 21)));
}

#[test]
fn non_utf8_byte_on_the_first_line() {
    let loaded = load_bad(b"\xffperiodics: []\n".as_slice());
    assert_eq!(
        loaded.diagnostics[0].to_string(),
        "/cfg/jobs/bad.yaml:1:1: error: file is not valid UTF-8 (invalid byte 0xff)\n  hint: YAML configuration must be UTF-8 text"
    );
}

#[test]
fn non_utf8_byte_after_multibyte_characters() {
    // `- name: "é` is 10 characters (11 bytes): the bad byte is in column 11.
    let loaded = load_bad(b"periodics:\n- name: \"\xc3\xa9\xc3\"\n".as_slice());
    let d = &loaded.diagnostics[0];
    assert_eq!(d.message, "file is not valid UTF-8 (invalid byte 0xc3)");
    assert_eq!(d.mark.map(|m| (m.line, m.col)), Some((2, 11)), "{d}");
}

#[test]
fn byte_order_mark_is_accepted() {
    let mut fs = MemFiles::new();
    fs.file("/cfg/jobs/bom.yaml", format!("\u{feff}{}", y(GOOD)));
    let loaded = load(&job_config(&[JOBS]), &fs);
    assert_eq!(rendered(&loaded), Vec::<String>::new());
    let snapshot = loaded.snapshot.expect("a snapshot");
    assert_eq!(snapshot.periodics[0].name(), "good");
    assert_eq!(snapshot.periodics[0].origin.mark.line, 2);
}

// --- Special files through MemFiles (which panics if a FIFO is ever opened).

#[test]
fn symlink_loops_dangling_links_fifos_and_read_errors() {
    let mut fs = MemFiles::new();
    fs.file("/cfg/jobs/zz-good.yaml", y(GOOD))
        // A directory loop: sub/back -> /cfg/jobs.
        .insert("/cfg/jobs/sub/back", MemEntry::Symlink("..".into()))
        // A link to itself.
        .insert("/cfg/jobs/self.yaml", MemEntry::Symlink("self.yaml".into()))
        .insert(
            "/cfg/jobs/dangling.yaml",
            MemEntry::Symlink("nowhere.yaml".into()),
        )
        // Not YAML by name: dangling is fine, nothing to report.
        .insert("/cfg/jobs/notes.txt", MemEntry::Symlink("gone.txt".into()))
        .insert("/cfg/jobs/pipe.yaml", MemEntry::Fifo)
        .insert("/cfg/jobs/pipe", MemEntry::Fifo)
        .insert("/cfg/jobs/to-pipe.yaml", MemEntry::Symlink("pipe".into()))
        .insert(
            "/cfg/jobs/secret.yaml",
            MemEntry::Unreadable(
                ErrorKind::PermissionDenied,
                "Permission denied (os error 13)".into(),
            ),
        );
    let loaded = load(&job_config(&[JOBS]), &fs);
    assert_eq!(
        rendered(&loaded),
        vec![
            "/cfg/jobs/dangling.yaml: warning: dangling or unreadable symlink: No such file or directory (os error 2); skipped",
            "/cfg/jobs/pipe.yaml: warning: not a regular file (FIFO, socket or device); skipped",
            "/cfg/jobs/secret.yaml: error: cannot read: Permission denied (os error 13)",
            "/cfg/jobs/self.yaml: warning: dangling or unreadable symlink: Too many levels of symbolic links (os error 40); skipped",
            "/cfg/jobs/sub/back: warning: directory /cfg/jobs was already read (symlink loop?); skipped",
            "/cfg/jobs/to-pipe.yaml: warning: not a regular file (FIFO, socket or device); skipped",
        ]
    );
    assert_eq!(loaded.stats.files, 1, "only zz-good.yaml is read");
    assert!(loaded.snapshot.is_none());

    // Without the unreadable file, warnings only: the good job loads, once.
    let mut fs = fs.clone();
    fs.file("/cfg/jobs/secret.yaml", "");
    let loaded = load(&job_config(&[JOBS]), &fs);
    assert_eq!(loaded.errors(), 0, "{:#?}", rendered(&loaded));
    assert_eq!(loaded.warnings(), 5);
    let snapshot = loaded.snapshot.expect("a snapshot");
    assert_eq!(snapshot.periodics.len(), 1);
    assert_eq!(
        &*snapshot.periodics[0].origin.file,
        "/cfg/jobs/zz-good.yaml"
    );
}

#[test]
fn special_files_named_on_the_command_line() {
    let mut fs = MemFiles::new();
    fs.file("/cfg/good.yaml", y(GOOD))
        .insert("/cfg/pipe.yaml", MemEntry::Fifo)
        .insert(
            "/cfg/secret.yaml",
            MemEntry::Unreadable(ErrorKind::Other, "Input/output error (os error 5)".into()),
        )
        .insert("/cfg/dangling.yaml", MemEntry::Symlink("gone.yaml".into()));
    let loaded = load(
        &job_config(&[
            "/cfg/pipe.yaml",
            "/cfg/secret.yaml",
            "/cfg/dangling.yaml",
            "/cfg/missing",
            "/cfg/good.yaml",
        ]),
        &fs,
    );
    assert_eq!(
        rendered(&loaded),
        vec![
            "/cfg/dangling.yaml: error: cannot read: No such file or directory (os error 2)",
            "/cfg/missing: error: cannot read: No such file or directory (os error 2)",
            "/cfg/pipe.yaml: error: not a regular file or directory",
            "/cfg/secret.yaml: error: cannot read: Input/output error (os error 5)",
        ]
    );
    assert_eq!(loaded.stats.files, 1, "good.yaml is still read");

    // The same as --config.
    for (config, message) in [
        (
            "/cfg/pipe.yaml",
            "error: not a regular file (FIFO, socket, device or directory)",
        ),
        (
            "/cfg/secret.yaml",
            "error: cannot read: Input/output error (os error 5)",
        ),
        (
            "/cfg/config.yaml",
            "error: cannot read: No such file or directory (os error 2)",
        ),
    ] {
        let opts = LoadOptions {
            config: Some(config.into()),
            job_config: vec!["/cfg/good.yaml".into()],
            ..LoadOptions::default()
        };
        let loaded = load(&opts, &fs);
        assert_eq!(rendered(&loaded), vec![format!("{config}: {message}")]);
        assert_eq!(loaded.stats.files, 1, "good.yaml is still read");
        assert!(loaded.snapshot.is_none());
    }
}

#[test]
fn missing_config_file() {
    let mut fs = MemFiles::new();
    fs.file("/cfg/jobs/good.yaml", y(GOOD));
    let opts = LoadOptions {
        config: Some("/cfg/config.yaml".into()),
        job_config: vec![JOBS.into()],
        ..LoadOptions::default()
    };
    let loaded = load(&opts, &fs);
    assert_eq!(
        rendered(&loaded),
        vec!["/cfg/config.yaml: error: cannot read: No such file or directory (os error 2)"]
    );
    assert_eq!(loaded.errors(), 1);
    assert!(loaded.snapshot.is_none());
    assert_eq!(loaded.stats.files, 1, "the job config is still read");
}

#[test]
fn bad_config_file_does_not_hide_the_job_files() {
    let mut fs = MemFiles::new();
    fs.file("/cfg/config.yaml", "plank:\n  max_concurrency: [1]\n")
        .file(OTHER_FILE, y(OTHER));
    let opts = LoadOptions {
        config: Some("/cfg/config.yaml".into()),
        job_config: vec![JOBS.into()],
        ..LoadOptions::default()
    };
    let loaded = load(&opts, &fs);
    assert_eq!(
        rendered(&loaded),
        vec![
            "/cfg/config.yaml:2:20: error: invalid type: sequence, expected i64",
            OTHER_WARNING,
        ]
    );
}

#[test]
fn every_type_error_of_the_config_file_is_reported() {
    let mut fs = MemFiles::new();
    fs.file(
        "/cfg/config.yaml",
        y("
            plank:
              max_concurrency: x
            build_clusters:
              build01: {kind: vm}
        "),
    );
    let opts = LoadOptions {
        config: Some("/cfg/config.yaml".into()),
        ..LoadOptions::default()
    };
    let loaded = load(&opts, &fs);
    let lines: Vec<Option<u32>> = loaded
        .diagnostics
        .iter()
        .map(|d| d.mark.map(|m| m.line))
        .collect();
    assert_eq!(lines, vec![Some(2), Some(4)], "{:#?}", rendered(&loaded));
}

// --- Several documents, ignored files and ConfigMap layouts.

#[test]
fn jobs_from_every_document_load() {
    let mut fs = MemFiles::new();
    fs.file(
        "/cfg/jobs/multi.yaml",
        y("
            periodics:
            - name: first
              interval: 1h
              spec:
                containers:
                - image: alpine
            ---
            # an empty document
            ---
            presubmits:
              org/repo:
              - name: second
                spec:
                  containers:
                  - image: alpine
            ---
            periodics:
            - name: third
              cron: '@daily'
              spec:
                containers:
                - image: alpine
            ...
        "),
    );
    let loaded = load(&job_config(&[JOBS]), &fs);
    assert_eq!(rendered(&loaded), Vec::<String>::new());
    let snapshot = loaded.snapshot.expect("a snapshot");
    let periodics: Vec<(&str, u32)> = snapshot
        .periodics
        .iter()
        .map(|p| (p.name(), p.origin.mark.line))
        .collect();
    assert_eq!(periodics, vec![("first", 2), ("third", 18)]);
    let pre = &snapshot.presubmits["org/repo"];
    assert_eq!((pre[0].name(), pre[0].origin.mark.line), ("second", 12));
}

#[test]
fn a_bad_document_does_not_hide_the_others() {
    let loaded = load_bad(y("
        periodics:
        - name: first
          interval: 1h
          max_concurrency: x
        ---
        just a scalar
        ---
        periodics:
        - name: third
          interval: 1h
          bogus: 1
          spec:
            containers:
            - image: alpine
    "));
    assert_eq!(
        rendered(&loaded),
        vec![
            r#"/cfg/jobs/bad.yaml:4:20: error: job first: invalid type: string "x", expected i64"#,
            "/cfg/jobs/bad.yaml:6:1: error: expected a mapping at the top level, found a scalar",
            "/cfg/jobs/bad.yaml:11:3: warning: job third: unknown field `bogus`",
            OTHER_WARNING,
        ]
    );
}

#[test]
fn prowignore_and_non_yaml_files() {
    let broken = "periodics: [unclosed";
    let mut fs = MemFiles::new();
    fs.file(
        "/cfg/jobs/.prowignore",
        "# generated\nignored.yaml\ndrafts/\n*.tmp.yaml\n",
    )
    .file("/cfg/jobs/ignored.yaml", broken)
    .file("/cfg/jobs/drafts/draft.yaml", broken)
    .file("/cfg/jobs/a.tmp.yaml", broken)
    .file("/cfg/jobs/team/.prowignore", "local.yaml\n")
    .file("/cfg/jobs/team/local.yaml", broken)
    .file("/cfg/jobs/team/team.yml", y(GOOD).replace("good", "team"))
    // A .prowignore applies to its directory and below, not to its siblings.
    .file(
        "/cfg/jobs/other/local.yaml",
        y(GOOD).replace("good", "local"),
    )
    .file("/cfg/jobs/jobs.yaml.tpl", broken)
    .file("/cfg/jobs/README.md", broken)
    .file("/cfg/jobs/jobs.go", "package jobs\n")
    .file("/cfg/jobs/UPPER.YAML", broken)
    .file("/cfg/jobs/good.yaml", y(GOOD));
    let loaded = load(&job_config(&[JOBS]), &fs);
    assert_eq!(rendered(&loaded), Vec::<String>::new());
    // ignored.yaml, a.tmp.yaml and team/local.yaml (a directory is not a file).
    assert_eq!(loaded.stats.ignored_files, 3);
    assert_eq!(loaded.stats.files, 3);
    let mut names: Vec<&str> = loaded
        .snapshot
        .as_ref()
        .expect("a snapshot")
        .periodics
        .iter()
        .map(|p| p.name())
        .collect();
    names.sort();
    assert_eq!(names, vec!["good", "local", "team"]);
}

#[test]
fn configmap_layout_loads_each_job_once() {
    // How Kubernetes mounts a ConfigMap: the files live in a timestamped `..`
    // directory, `..data` points at it, and each key is a symlink through `..data`.
    let mut fs = MemFiles::new();
    fs.file(
        "/etc/job-config/..2024_01_01_00_00_00.000000001/jobs.yaml",
        y(GOOD),
    )
    .file(
        "/etc/job-config/..2024_01_01_00_00_00.000000001/more.yaml",
        y(GOOD).replace("good", "more"),
    )
    .insert(
        "/etc/job-config/..data",
        MemEntry::Symlink("..2024_01_01_00_00_00.000000001".into()),
    )
    .insert(
        "/etc/job-config/jobs.yaml",
        MemEntry::Symlink("..data/jobs.yaml".into()),
    )
    .insert(
        "/etc/job-config/more.yaml",
        MemEntry::Symlink("..data/more.yaml".into()),
    );
    let loaded = load(&job_config(&["/etc/job-config"]), &fs);
    assert_eq!(rendered(&loaded), Vec::<String>::new());
    assert_eq!(loaded.stats.files, 2);
    let snapshot = loaded.snapshot.expect("a snapshot");
    let jobs: Vec<(&str, &str)> = snapshot
        .periodics
        .iter()
        .map(|p| (p.name(), &*p.origin.file))
        .collect();
    assert_eq!(
        jobs,
        vec![
            ("good", "/etc/job-config/jobs.yaml"),
            ("more", "/etc/job-config/more.yaml"),
        ]
    );
}

#[test]
fn duplicate_basenames_across_directories() {
    let mut fs = MemFiles::new();
    fs.file("/cfg/jobs/team-a/jobs.yaml", y(GOOD))
        .file("/cfg/jobs/team-b/jobs.yaml", y(GOOD).replace("good", "b"))
        .file("/cfg/jobs/team-b/other.yaml", "");
    let loaded = load(&job_config(&[JOBS]), &fs);
    assert_eq!(
        rendered(&loaded),
        vec!["/cfg/jobs/team-b/jobs.yaml: error: duplicated basename is not allowed: jobs.yaml\n  hint: /cfg/jobs/team-a/jobs.yaml has the same file name"]
    );
    assert!(loaded.snapshot.is_none());

    // Also across two --job-config directories.
    let mut fs = MemFiles::new();
    fs.file("/one/jobs.yaml", y(GOOD))
        .file("/two/jobs.yaml", y(GOOD).replace("good", "two"));
    let loaded = load(&job_config(&["/one", "/two"]), &fs);
    assert_eq!(
        rendered(&loaded),
        vec!["/two/jobs.yaml: error: duplicated basename is not allowed: jobs.yaml\n  hint: /one/jobs.yaml has the same file name"]
    );
}

// --- Anchors, aliases and merge keys.

#[test]
fn anchors_aliases_and_merge_keys_in_job_definitions() {
    let mut fs = MemFiles::new();
    fs.file(
        "/cfg/jobs/anchors.yaml",
        y(r#"
            prow_ignored:
              base: &base
                interval: 1h
                max_concurrency: 1
                labels:
                  team: infra
                spec: &spec
                  containers:
                  - image: alpine
                    command: [make]
              extra: &extra
                hidden: true
            periodics:
            - <<: *base
              name: a
            - <<: *base
              name: b
              interval: 2h
            - <<: [*base, *extra]
              name: c
            - name: d
              cron: "@daily"
              spec: *spec
        "#),
    );
    let loaded = load(&job_config(&[JOBS]), &fs);
    assert_eq!(rendered(&loaded), Vec::<String>::new());
    let snapshot = loaded.snapshot.expect("a snapshot");
    let p = |name: &str| {
        snapshot
            .periodics
            .iter()
            .find(|p| p.name() == name)
            .unwrap_or_else(|| panic!("periodic {name}"))
    };
    assert_eq!(p("a").kind.interval.as_deref(), Some("1h"));
    assert_eq!(p("a").base.max_concurrency, 1);
    assert_eq!(p("a").base.labels["team"], "infra");
    // Keys written in the mapping win over merged ones.
    assert_eq!(p("b").kind.interval.as_deref(), Some("2h"));
    assert!(!p("b").base.hidden);
    assert!(p("c").base.hidden);
    assert_eq!(p("c").kind.interval.as_deref(), Some("1h"));
    assert_eq!(p("d").kind.interval, None);
    for name in ["a", "b", "c", "d"] {
        let spec = p(name).base.spec.as_ref().expect("spec");
        assert_eq!(
            spec.containers[0].image.as_deref(),
            Some("alpine"),
            "{name}"
        );
    }
    // Each job's position is where it is written, not where its anchor is.
    let lines: Vec<u32> = snapshot
        .periodics
        .iter()
        .map(|p| p.origin.mark.line)
        .collect();
    assert_eq!(lines, vec![14, 16, 19, 21]);
}

#[test]
fn errors_in_merged_content_point_at_the_anchor() {
    let loaded = load_bad(y("
        prow_ignored:
          base: &base
            interval: 1h
            max_concurrency: many
        periodics:
        - <<: *base
          name: a
        - <<: *base
          name: b
    "));
    assert_eq!(
        rendered(&loaded),
        vec![
            r#"/cfg/jobs/bad.yaml:4:22: error: job a: invalid type: string "many", expected i64"#,
            r#"/cfg/jobs/bad.yaml:4:22: error: job b: invalid type: string "many", expected i64"#,
            OTHER_WARNING,
        ]
    );
}

#[test]
fn bad_anchors_and_merge_keys() {
    let loaded = load_bad(y("
        periodics:
        - <<: *missing
          name: a
    "));
    assert_bad(
        &loaded,
        2,
        7,
        None,
        "invalid YAML: while parsing node, found unknown anchor",
    );
    let loaded = load_bad(y("
        periodics:
        - <<: not-a-mapping
          name: a
    "));
    assert_bad(
        &loaded,
        2,
        7,
        None,
        "invalid YAML: a merge key `<<` needs a mapping or a sequence of mappings",
    );
}

#[test]
fn alias_bombs_are_refused() {
    // 6 levels of 10 aliases each: 10^6 scalars from 421 bytes, which take 1.7 GB
    // and seconds today; 7 levels (482 bytes) take 17 GB.
    let mut text = String::from("prow_ignored:\n  l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..=6 {
        let refs = vec![format!("*l{}", i - 1); 10].join(", ");
        text += &format!("  l{i}: &l{i} [{refs}]\n");
    }
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let loaded = load_bad(text);
        let _ = tx.send(rendered(&loaded));
    });
    let lines = rx
        .recv_timeout(Duration::from_secs(2))
        .expect("the loader gives up on an alias bomb quickly");
    assert!(
        lines[0].starts_with("/cfg/jobs/bad.yaml:") && lines[0].contains("alias"),
        "{lines:#?}"
    );
}

// --- The real file system.

/// [`Tmp`] is in `common`; the options these tests load with.
impl Tmp {
    fn job_config(&self, rels: &[&str]) -> LoadOptions {
        LoadOptions {
            job_config: rels.iter().map(|r| self.path(r)).collect(),
            ..LoadOptions::default()
        }
    }
}

#[test]
fn real_symlink_loops() {
    let tmp = Tmp::new();
    tmp.write("jobs/good.yaml", &y(GOOD));
    tmp.symlink("jobs/sub/back", "..");
    tmp.symlink("jobs/self.yaml", "self.yaml");
    tmp.symlink("jobs/ping", "pong");
    tmp.symlink("jobs/pong", "ping");
    let (loaded, lines) = tmp.load(tmp.job_config(&["jobs"]));
    assert_eq!(
        lines,
        vec![
            "$TMP/jobs/ping: warning: dangling or unreadable symlink: Too many levels of symbolic links (os error 40); skipped",
            "$TMP/jobs/pong: warning: dangling or unreadable symlink: Too many levels of symbolic links (os error 40); skipped",
            "$TMP/jobs/self.yaml: warning: dangling or unreadable symlink: Too many levels of symbolic links (os error 40); skipped",
            "$TMP/jobs/sub/back: warning: directory $TMP/jobs was already read (symlink loop?); skipped",
        ]
    );
    let snapshot = loaded.snapshot.expect("warnings only");
    assert_eq!(snapshot.periodics.len(), 1, "the good job loads once");
}

#[test]
fn real_dangling_symlinks() {
    let tmp = Tmp::new();
    tmp.write("jobs/good.yaml", &y(GOOD));
    tmp.symlink("jobs/gone.yaml", "../elsewhere/gone.yaml");
    tmp.symlink("jobs/gone.md", "nowhere.md");
    tmp.symlink("jobs/gone-dir", "/nonexistent/bosun-test-dir");
    tmp.symlink("direct.yaml", "nowhere.yaml");
    let (loaded, lines) = tmp.load(tmp.job_config(&["jobs", "direct.yaml"]));
    assert_eq!(
        lines,
        vec![
            "$TMP/direct.yaml: error: cannot read: No such file or directory (os error 2)",
            "$TMP/jobs/gone.yaml: warning: dangling or unreadable symlink: No such file or directory (os error 2); skipped",
        ]
    );
    assert_eq!(loaded.stats.files, 1);
    assert!(loaded.snapshot.is_none());
}

#[test]
fn real_fifo_is_never_opened() {
    let tmp = Tmp::new();
    tmp.write("jobs/good.yaml", &y(GOOD));
    tmp.mkfifo("jobs/pipe.yaml");
    tmp.mkfifo("pipe");
    tmp.symlink("jobs/to-pipe.yaml", "../pipe");
    let (loaded, lines) = tmp.load(tmp.job_config(&["jobs"]));
    assert_eq!(
        lines,
        vec![
            "$TMP/jobs/pipe.yaml: warning: not a regular file (FIFO, socket or device); skipped",
            "$TMP/jobs/to-pipe.yaml: warning: not a regular file (FIFO, socket or device); skipped",
        ]
    );
    assert_eq!(loaded.snapshot.expect("warnings only").periodics.len(), 1);

    // Named directly, as a job-config file and as the config file.
    let (_, lines) = tmp.load(tmp.job_config(&["pipe", "jobs/good.yaml"]));
    assert_eq!(
        lines,
        vec!["$TMP/pipe: error: not a regular file or directory"]
    );
    let opts = LoadOptions {
        config: Some(tmp.path("jobs/to-pipe.yaml")),
        ..LoadOptions::default()
    };
    let (_, lines) = tmp.load(opts);
    assert_eq!(
        lines,
        vec![
            "$TMP/jobs/to-pipe.yaml: error: not a regular file (FIFO, socket, device or directory)"
        ]
    );
}

#[test]
fn real_configmap_layout() {
    let tmp = Tmp::new();
    tmp.write("cm/..2024_01_01_00_00_00.000000001/jobs.yaml", &y(GOOD));
    tmp.symlink("cm/..data", "..2024_01_01_00_00_00.000000001");
    tmp.symlink("cm/jobs.yaml", "..data/jobs.yaml");
    let (loaded, lines) = tmp.load(tmp.job_config(&["cm"]));
    assert_eq!(lines, Vec::<String>::new());
    assert_eq!(loaded.stats.files, 1);
    let snapshot = loaded.snapshot.expect("a snapshot");
    assert_eq!(snapshot.periodics.len(), 1);
    assert_eq!(
        Path::new(&*snapshot.periodics[0].origin.file),
        tmp.path("cm/jobs.yaml")
    );
}

#[test]
fn real_missing_config_file() {
    let tmp = Tmp::new();
    tmp.write("jobs/good.yaml", &y(GOOD));
    let opts = LoadOptions {
        config: Some(tmp.path("config.yaml")),
        ..tmp.job_config(&["jobs"])
    };
    let (loaded, lines) = tmp.load(opts);
    assert_eq!(
        lines,
        vec!["$TMP/config.yaml: error: cannot read: No such file or directory (os error 2)"]
    );
    assert!(loaded.snapshot.is_none());
    // FileSource is what the loader reads through: the same answer.
    assert!(OsFiles.stat(&tmp.path("config.yaml")).is_err());
}

// --- Positions of validation errors.

#[test]
fn validation_errors_point_at_the_field_also_in_the_first_job_of_a_list() {
    // `- ` at the indentation of its parent key starts a block sequence at the
    // same position as its first item: the field must still be found.
    let mut fs = MemFiles::new();
    fs.file(
        BAD,
        y("
            periodics:
            - name: first
              interval: 1h
              max_concurrency: -1
              spec:
                containers:
                - image: alpine
            - name: second
              interval: 1h
              max_concurrency: -2
              spec:
                containers:
                - image: alpine
        "),
    );
    let loaded = load(&job_config(&[JOBS]), &fs);
    assert_eq!(
        rendered(&loaded),
        vec![
            "/cfg/jobs/bad.yaml:4:3: error: job first: max_concurrency: -1 must be a non-negative number",
            "/cfg/jobs/bad.yaml:10:3: error: job second: max_concurrency: -2 must be a non-negative number",
        ]
    );
}

#[test]
fn unknown_cluster() {
    let mut fs = MemFiles::new();
    fs.file("/cfg/config.yaml", "build_clusters:\n  build01: {}\n")
        .file(
            BAD,
            y("
                periodics:
                - name: a
                  interval: 1h
                  cluster: build02
                  spec:
                    containers:
                    - image: alpine
            "),
        );
    let opts = LoadOptions {
        config: Some("/cfg/config.yaml".into()),
        ..job_config(&[JOBS])
    };
    assert_eq!(
        rendered(&load(&opts, &fs)),
        vec![
            "/cfg/jobs/bad.yaml:4:3: error: job a: job configuration for \"a\" specifies unknown 'cluster' value \"build02\"\n  hint: known clusters: default, build01"
        ]
    );
}

#[test]
fn unknown_cluster_hint_names_each_cluster_once() {
    let mut fs = MemFiles::new();
    fs.file(
        "/cfg/config.yaml",
        "build_clusters:\n  default: {}\n  build01: {}\n",
    )
    .file(
        BAD,
        y("
            periodics:
            - name: a
              interval: 1h
              cluster: build02
              spec:
                containers:
                - image: alpine
        "),
    );
    let opts = LoadOptions {
        config: Some("/cfg/config.yaml".into()),
        ..job_config(&[JOBS])
    };
    let loaded = load(&opts, &fs);
    let hint = loaded.diagnostics[0].hint.as_deref().expect("a hint");
    assert_eq!(hint.matches("default").count(), 1, "{hint}");
    assert!(hint.contains("build01"), "{hint}");
}
