//! How a job's decoration config is resolved, as Prow resolves it: Prow's
//! `DecorationConfig.ApplyDefault` field by field
//! ([`DecorationConfig::apply_default`]), the matching of
//! `plank.default_decoration_config_entries` (and of the legacy
//! `plank.default_decoration_configs` map) in order under the job's own config
//! (`Snapshot::decoration_config`), and the test-infra corpus resolved whole.
//!
//! The `apply_default` tables port the semantics of Prow's
//! `TestDecorationDefaultingDoesntOverwrite` and
//! `TestApplyDefaultsAppliesDefaultsForAllFields`
//! (kubernetes-sigs/prow `pkg/apis/prowjobs/v1/types_test.go`), plus the cases
//! where Prow's pointers, empty strings and lists decide (explicit `""`, `0s`,
//! `false`; the `mediaTypes` union).

use std::path::PathBuf;

use bosun_config::source::MemFiles;
use bosun_config::types::DecorationConfig;
use bosun_config::{load, Job, LoadOptions, Loaded, OsFiles, Snapshot};
use serde_json::{json, Value};

fn dc(v: Value) -> DecorationConfig {
    serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{v}: {e}"))
}

/// `base` with the top-level fields of `patch` replaced.
fn patched(base: &Value, patch: &Value) -> Value {
    let mut out = base.clone();
    for (k, v) in patch.as_object().expect("object") {
        out[k] = v.clone();
    }
    out
}

/// A config with every field set.
fn full() -> Value {
    json!({
        "timeout": "2h",
        "grace_period": "15s",
        "utility_images": {"clonerefs": "c:d", "initupload": "i:d", "entrypoint": "e:d", "sidecar": "s:d"},
        "resources": {
            "clonerefs": {"requests": {"cpu": "100m"}},
            "initupload": {"requests": {"cpu": "110m"}},
            "place_entrypoint": {"requests": {"cpu": "120m"}},
            "sidecar": {"requests": {"cpu": "130m"}},
        },
        "gcs_configuration": {
            "bucket": "gs://def",
            "path_prefix": "pre",
            "path_strategy": "legacy",
            "default_org": "o",
            "default_repo": "r",
            "mediaTypes": {"log": "text/plain", "md": "text/markdown"},
            "job_url_prefix": "https://prow.example.com/view/",
            "local_output_dir": "/out",
            "compress_file_types": ["txt"],
        },
        "gcs_credentials_secret": "service-account",
        "s3_credentials_secret": "s3",
        "default_service_account_name": "sa",
        "ssh_key_secrets": ["ssh-d"],
        "ssh_host_fingerprints": ["fp-d"],
        "skip_cloning": true,
        "cookiefile_secret": "cookie",
        "oauth_token_secret": {"name": "oauth", "key": "token"},
        "github_api_endpoints": ["https://api.github.com"],
        "github_app_id": "123",
        "github_app_private_key_secret": {"name": "app", "key": "key"},
        "censor_secrets": true,
        "censoring_options": {
            "censoring_concurrency": 5,
            "censoring_buffer_size": 1024,
            "include_directories": ["a"],
            "exclude_directories": ["b"],
            "minimum_secret_length": 4,
        },
        "upload_ignores_interrupts": true,
        "fs_group": 2000,
        "run_as_user": 1000,
        "run_as_group": 1001,
        "set_limit_equals_memory_request": true,
        "default_memory_request": "1Gi",
        "blobless_fetch": true,
        "sparse_checkout_files": ["go.mod"],
        "scheduling_options": {
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}]
            }}},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ci", "effect": "NoSchedule"}],
        },
        "pod_pending_timeout": "10m",
        "pod_running_timeout": "48h",
        "pod_unscheduled_timeout": "5m",
    })
}

/// Another config with every field set, every value different from [`full`]'s
/// (its `mediaTypes` name other extensions).
fn other() -> Value {
    json!({
        "timeout": "3h",
        "grace_period": "1m",
        "utility_images": {"clonerefs": "c:o", "initupload": "i:o", "entrypoint": "e:o", "sidecar": "s:o"},
        "resources": {
            "clonerefs": {"limits": {"memory": "1Gi"}},
            "initupload": {"limits": {"memory": "2Gi"}},
            "place_entrypoint": {"limits": {"memory": "3Gi"}},
            "sidecar": {"limits": {"memory": "4Gi"}},
        },
        "gcs_configuration": {
            "bucket": "s3://other",
            "path_prefix": "p2",
            "path_strategy": "explicit",
            "default_org": "o2",
            "default_repo": "r2",
            "mediaTypes": {"html": "text/html"},
            "job_url_prefix": "https://other.example.com/view/",
            "local_output_dir": "/out2",
            "compress_file_types": ["*"],
        },
        "gcs_credentials_secret": "",
        "s3_credentials_secret": "",
        "default_service_account_name": "sa2",
        "ssh_key_secrets": ["ssh-o"],
        "ssh_host_fingerprints": ["fp-o"],
        "skip_cloning": false,
        "cookiefile_secret": "cookie2/key",
        "oauth_token_secret": {"name": "oauth2", "key": "t2"},
        "github_api_endpoints": ["http://ghproxy"],
        "github_app_id": "456",
        "github_app_private_key_secret": {"name": "app2", "key": "k2"},
        "censor_secrets": false,
        "censoring_options": {
            "censoring_concurrency": 1,
            "censoring_buffer_size": 2048,
            "include_directories": [],
            "exclude_directories": ["c"],
            "minimum_secret_length": 0,
        },
        "upload_ignores_interrupts": false,
        "fs_group": 0,
        "run_as_user": 0,
        "run_as_group": 0,
        "set_limit_equals_memory_request": false,
        "default_memory_request": "512Mi",
        "blobless_fetch": false,
        "sparse_checkout_files": ["Makefile"],
        "scheduling_options": {
            "affinity": {"podAffinity": {}},
            "tolerations": [],
        },
        "pod_pending_timeout": "0s",
        "pod_running_timeout": "1h",
        "pod_unscheduled_timeout": "1m",
    })
}

/// The fixtures set every field of `DecorationConfig` (so the tables below
/// cover every field, also ones added later).
#[test]
fn fixtures_set_every_field() {
    let fields = serde_json::to_value(DecorationConfig::default()).unwrap();
    let fields: Vec<&String> = fields.as_object().unwrap().keys().collect();
    for fixture in [full(), other()] {
        let written: Vec<&String> = fixture.as_object().unwrap().keys().collect();
        let mut missing: Vec<&&String> = fields.iter().filter(|f| !written.contains(f)).collect();
        missing.sort();
        assert!(missing.is_empty(), "fixture lacks {missing:?}");
        // Every field reads as set (nothing is dropped or renamed).
        let read = serde_json::to_value(dc(fixture.clone())).unwrap();
        for (k, v) in read.as_object().unwrap() {
            assert!(
                !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty()),
                "{k}"
            );
        }
    }
}

/// Prow's `TestApplyDefaultsAppliesDefaultsForAllFields`: an empty config
/// takes every field of the default; and a config with every field set keeps
/// all of its own (only `mediaTypes` also take the default's).
#[test]
fn applies_defaults_for_all_fields_and_overwrites_none() {
    let def = dc(full());
    assert_eq!(DecorationConfig::default().apply_default(&def), def);
    assert_eq!(def.apply_default(&DecorationConfig::default()), def);

    let mine = dc(other());
    let mut want = other();
    want["gcs_configuration"]["mediaTypes"] =
        json!({"html": "text/html", "log": "text/plain", "md": "text/markdown"});
    assert_eq!(mine.apply_default(&def), dc(want));

    // Field by field: one set field wins, the others come from the default.
    for (k, v) in other().as_object().unwrap() {
        let provided = dc(json!({ k.clone(): v.clone() }));
        let mut want = patched(&full(), &json!({ k.clone(): v.clone() }));
        if k == "gcs_configuration" {
            want[k]["mediaTypes"] =
                json!({"html": "text/html", "log": "text/plain", "md": "text/markdown"});
        }
        assert_eq!(provided.apply_default(&def), dc(want), "{k} set");
    }
}

/// Prow's `TestDecorationDefaultingDoesntOverwrite`, with its defaults.
#[test]
fn prow_decoration_defaulting_does_not_overwrite() {
    let defaults = json!({
        "timeout": "1m",
        "grace_period": "10s",
        "utility_images": {"clonerefs": "clonerefs", "initupload": "initupload", "entrypoint": "entrypoint", "sidecar": "sidecar"},
        "gcs_configuration": {"bucket": "bucket", "path_prefix": "prefix", "path_strategy": "legacy", "default_org": "org", "default_repo": "repo"},
        "gcs_credentials_secret": "secretName",
        "s3_credentials_secret": "s3-secret",
        "ssh_key_secrets": ["first", "second"],
        "ssh_host_fingerprints": ["primero", "segundo"],
        "skip_cloning": true,
    });
    let special = json!({"clonerefs": "clonerefs-special", "initupload": "initupload-special", "entrypoint": "entrypoint-special", "sidecar": "sidecar-special"});
    let gcs = json!({"bucket": "bucket-1", "path_prefix": "prefix-2", "path_strategy": "explicit", "default_org": "org2", "default_repo": "repo2", "compress_file_types": ["txt", "json"]});
    // (name, provided, expected: the defaults with these fields replaced)
    let cases: Vec<(&str, Value, Value)> = vec![
        ("nothing provided", json!({}), json!({})),
        (
            "timeout provided",
            json!({"timeout": "10m"}),
            json!({"timeout": "10m"}),
        ),
        (
            "grace period provided",
            json!({"grace_period": "10h"}),
            json!({"grace_period": "10h"}),
        ),
        (
            "utility images provided",
            json!({"utility_images": special}),
            json!({"utility_images": special}),
        ),
        (
            "gcs configuration provided",
            json!({"gcs_configuration": gcs}),
            json!({"gcs_configuration": gcs}),
        ),
        (
            "gcs secret name provided",
            json!({"gcs_credentials_secret": "somethingSecret"}),
            json!({"gcs_credentials_secret": "somethingSecret"}),
        ),
        (
            "gcs secret name unset",
            json!({"gcs_credentials_secret": ""}),
            json!({"gcs_credentials_secret": ""}),
        ),
        (
            "s3 secret name provided",
            json!({"s3_credentials_secret": "overwritten"}),
            json!({"s3_credentials_secret": "overwritten"}),
        ),
        (
            "s3 secret name unset",
            json!({"s3_credentials_secret": ""}),
            json!({"s3_credentials_secret": ""}),
        ),
        (
            "default service account name provided",
            json!({"default_service_account_name": "gcs-upload-sa"}),
            json!({"default_service_account_name": "gcs-upload-sa"}),
        ),
        (
            "ssh secrets provided",
            json!({"ssh_key_secrets": ["my", "special"]}),
            json!({"ssh_key_secrets": ["my", "special"]}),
        ),
        (
            "utility images partially provided",
            json!({"utility_images": {"clonerefs": "clonerefs-special", "initupload": "initupload-special"}}),
            json!({"utility_images": {"clonerefs": "clonerefs-special", "initupload": "initupload-special", "entrypoint": "entrypoint", "sidecar": "sidecar"}}),
        ),
        (
            "gcs configuration partially provided",
            json!({"gcs_configuration": {"bucket": "bucket-1"}}),
            json!({"gcs_configuration": {"bucket": "bucket-1", "path_prefix": "prefix", "path_strategy": "legacy", "default_org": "org", "default_repo": "repo"}}),
        ),
        (
            "skip_cloning provided",
            json!({"skip_cloning": false}),
            json!({"skip_cloning": false}),
        ),
        (
            "ssh host fingerprints provided",
            json!({"ssh_host_fingerprints": ["unique", "print"]}),
            json!({"ssh_host_fingerprints": ["unique", "print"]}),
        ),
        (
            "ignore interrupts set",
            json!({"upload_ignores_interrupts": true}),
            json!({"upload_ignores_interrupts": true}),
        ),
        (
            "do not ignore interrupts",
            json!({"upload_ignores_interrupts": false}),
            json!({"upload_ignores_interrupts": false}),
        ),
    ];
    for (name, provided, expected) in cases {
        let got = dc(provided).apply_default(&dc(defaults.clone()));
        assert_eq!(got, dc(patched(&defaults, &expected)), "{name}");
    }
}

/// Where Prow's nil pointers, empty strings and empty lists decide, over the
/// fully set default [`full`].
#[test]
fn unset_means_prow_nil() {
    let images = |c: &str| json!({"clonerefs": c, "initupload": "i:d", "entrypoint": "e:d", "sidecar": "s:d"});
    let gcs = |patch: Value| patched(&full()["gcs_configuration"], &patch);
    let censoring = |patch: Value| patched(&full()["censoring_options"], &patch);
    // (name, provided, the fields of `full` it changes)
    let cases: Vec<(&str, Value, Value)> = vec![
        (
            "explicit empty, zero and false win",
            json!({"timeout": "0s", "gcs_credentials_secret": "", "blobless_fetch": false, "skip_cloning": false, "censor_secrets": false, "run_as_user": 0, "pod_pending_timeout": "0s"}),
            json!({"timeout": "0s", "gcs_credentials_secret": "", "blobless_fetch": false, "skip_cloning": false, "censor_secrets": false, "run_as_user": 0, "pod_pending_timeout": "0s"}),
        ),
        (
            "null is unset",
            json!({"timeout": null, "gcs_credentials_secret": null, "utility_images": null, "scheduling_options": null}),
            json!({}),
        ),
        (
            "empty lists are unset",
            json!({"ssh_key_secrets": [], "ssh_host_fingerprints": [], "github_api_endpoints": [], "sparse_checkout_files": []}),
            json!({}),
        ),
        (
            "an empty GitHub App id is unset",
            json!({"github_app_id": ""}),
            json!({}),
        ),
        (
            "utility images per image, an empty one unset",
            json!({"utility_images": {"clonerefs": "c:job", "sidecar": ""}}),
            json!({"utility_images": images("c:job")}),
        ),
        (
            "no images written: the default's",
            json!({"utility_images": {}}),
            json!({}),
        ),
        (
            "resources per container, each taken whole",
            json!({"resources": {"sidecar": {"limits": {"memory": "1Gi"}}}}),
            json!({"resources": patched(&full()["resources"], &json!({"sidecar": {"limits": {"memory": "1Gi"}}}))}),
        ),
        (
            "gcs per field, empty strings unset",
            json!({"gcs_configuration": {"bucket": "", "path_strategy": "explicit", "default_org": ""}}),
            json!({"gcs_configuration": gcs(json!({"path_strategy": "explicit"}))}),
        ),
        (
            "an empty compress_file_types is set",
            json!({"gcs_configuration": {"compress_file_types": []}}),
            json!({"gcs_configuration": gcs(json!({"compress_file_types": []}))}),
        ),
        (
            "a null compress_file_types is unset",
            json!({"gcs_configuration": {"compress_file_types": null}}),
            json!({}),
        ),
        (
            "mediaTypes are unioned, the default's winning on a clash",
            json!({"gcs_configuration": {"mediaTypes": {"log": "text/x-log", "json": "application/json"}}}),
            json!({"gcs_configuration": gcs(json!({"mediaTypes": {"log": "text/plain", "md": "text/markdown", "json": "application/json"}}))}),
        ),
        (
            "censoring options per field, an empty list set",
            json!({"censoring_options": {"censoring_concurrency": 1, "include_directories": []}}),
            json!({"censoring_options": censoring(json!({"censoring_concurrency": 1, "include_directories": []}))}),
        ),
        (
            "scheduling options per field, an empty tolerations list set",
            json!({"scheduling_options": {"tolerations": []}}),
            json!({"scheduling_options": {"affinity": full()["scheduling_options"]["affinity"], "tolerations": []}}),
        ),
        (
            "scheduling options: unset tolerations come from the default",
            json!({"scheduling_options": {"affinity": {"podAffinity": {}}}}),
            json!({"scheduling_options": {"affinity": {"podAffinity": {}}, "tolerations": full()["scheduling_options"]["tolerations"]}}),
        ),
        (
            "the OAuth secret is taken whole",
            json!({"oauth_token_secret": {"name": "mine"}}),
            json!({"oauth_token_secret": {"name": "mine"}}),
        ),
        (
            "Prow's keys, matched as Go matches them; unknown keys dropped",
            json!({"utility_images": {"CloneRefs": "c:job", "extra": "x"}, "gcs_configuration": {"Bucket": "gs://job", "unknown": 1}}),
            json!({"utility_images": images("c:job"), "gcs_configuration": gcs(json!({"bucket": "gs://job"}))}),
        ),
    ];
    for (name, provided, changes) in cases {
        let got = dc(provided).apply_default(&dc(full()));
        assert_eq!(got, dc(patched(&full(), &changes)), "{name}");
    }

    // With no default at all a lone config is read as Prow reads it.
    let lone = dc(
        json!({"utility_images": {"clonerefs": "c", "sidecar": ""}, "gcs_configuration": {"bucket": "", "mediaTypes": {}}}),
    );
    assert_eq!(
        lone.apply_default(&DecorationConfig::default()),
        dc(json!({"utility_images": {"clonerefs": "c"}, "gcs_configuration": {"mediaTypes": {}}}))
    );
    // An unset mediaTypes stays unset when the default has none.
    let none = dc(json!({"gcs_configuration": {"bucket": "b"}}))
        .apply_default(&dc(json!({"gcs_configuration": {"mediaTypes": {}}})));
    assert_eq!(none, dc(json!({"gcs_configuration": {"bucket": "b"}})));
}

// --- Resolution through the loader.

const CONFIG: &str = "/c/config.yaml";
const JOBS: &str = "/c/jobs/jobs.yaml";

fn check(config: &str, jobs: &str) -> Loaded {
    let mut fs = MemFiles::new();
    fs.file(CONFIG, config);
    fs.file(JOBS, jobs);
    load(
        &LoadOptions {
            config: Some(CONFIG.into()),
            job_config: vec!["/c/jobs".into()],
            ..LoadOptions::default()
        },
        &fs,
    )
}

#[track_caller]
fn snapshot(l: &Loaded) -> &Snapshot {
    assert!(l.diagnostics.is_empty(), "{:#?}", l.diagnostics);
    l.snapshot.as_ref().expect("snapshot")
}

fn presubmit<'s>(
    s: &'s Snapshot,
    repo: &str,
    name: &str,
) -> &'s Job<bosun_config::types::PresubmitFields> {
    s.presubmits[repo]
        .iter()
        .find(|j| j.name() == name)
        .unwrap_or_else(|| panic!("{repo} {name}"))
}

/// The fields of a resolved config that are set, as JSON (unset fields left out).
fn set_fields(d: Option<DecorationConfig>) -> Value {
    let v = serde_json::to_value(d.expect("decorated")).unwrap();
    let set = v
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, v)| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Value::Object(set)
}

const ENTRIES: &str = r#"
plank:
  default_decoration_config_entries:
  - config: {timeout: 1h, grace_period: 1s}
  - repo: "*"
    cluster: "*"
    config: {grace_period: 2s}
  - repo: o
    config: {timeout: 2h}
  - repo: o/r
    config: {timeout: 3h}
  - cluster: build
    config: {gcs_credentials_secret: ""}
  - repo: "^o/"
    config: {timeout: 9h}
  - repo: o/r
    cluster: build
    config: {timeout: 4h}
  - repo: other
    config: {timeout: 5h}
  - repo: gerrit.example.com/project
    config: {timeout: 6h}
build_clusters: {default: {}, build: {}}
"#;

const ENTRY_JOBS: &str = "
presubmits:
  o/r:
  - name: o-r-default
    decorate: true
    spec: {containers: [{image: alpine, command: [make]}]}
  - name: o-r-build
    decorate: true
    cluster: build
    spec: {containers: [{image: alpine, command: [make]}]}
  - name: o-r-own
    decorate: true
    cluster: build
    decoration_config: {timeout: 30m, gcs_credentials_secret: mine}
    spec: {containers: [{image: alpine, command: [make]}]}
  o/x:
  - name: o-x
    decorate: true
    spec: {containers: [{image: alpine, command: [make]}]}
  p/q:
  - name: p-q
    decorate: true
    spec: {containers: [{image: alpine, command: [make]}]}
periodics:
- name: no-refs
  interval: 1h
  decorate: true
  spec: {containers: [{image: alpine, command: [make]}]}
- name: with-refs
  interval: 1h
  decorate: true
  extra_refs: [{org: o, repo: r, base_ref: main}, {org: other, repo: z, base_ref: main}]
  spec: {containers: [{image: alpine, command: [make]}]}
- name: undecorated
  interval: 1h
  spec: {containers: [{image: alpine, command: [make]}]}
- name: undecorated-with-config
  interval: 1h
  decorate: false
  decoration_config: {timeout: 7h}
  spec: {containers: [{image: alpine, command: [make]}]}
";

/// Entries match by exact `org`/`org/repo` (no patterns) and cluster (empty or
/// `*` for all); every match applies in file order; the job's own wins.
#[test]
fn entries_match_exactly_and_apply_in_order() {
    let l = check(ENTRIES, ENTRY_JOBS);
    let s = snapshot(&l);
    let pre =
        |repo: &str, name: &str| set_fields(s.decoration_config(presubmit(s, repo, name), repo));
    assert_eq!(
        pre("o/r", "o-r-default"),
        json!({"timeout": "3h0m0s", "grace_period": "2s"})
    );
    assert_eq!(
        pre("o/r", "o-r-build"),
        json!({"timeout": "4h0m0s", "grace_period": "2s", "gcs_credentials_secret": ""})
    );
    assert_eq!(
        pre("o/r", "o-r-own"),
        json!({"timeout": "30m0s", "grace_period": "2s", "gcs_credentials_secret": "mine"})
    );
    assert_eq!(
        pre("o/x", "o-x"),
        json!({"timeout": "2h0m0s", "grace_period": "2s"})
    );
    assert_eq!(
        pre("p/q", "p-q"),
        json!({"timeout": "1h0m0s", "grace_period": "2s"})
    );

    // Periodics match by their first extra_refs, or by no repository at all.
    let p = |name: &str| set_fields(s.periodic_decoration(s.periodic(name).expect(name)));
    assert_eq!(
        p("no-refs"),
        json!({"timeout": "1h0m0s", "grace_period": "2s"})
    );
    assert_eq!(
        p("with-refs"),
        json!({"timeout": "3h0m0s", "grace_period": "2s"})
    );

    // Undecorated: nothing, or just the job's own config (no defaults merged).
    assert_eq!(
        s.periodic_decoration(s.periodic("undecorated").unwrap()),
        None
    );
    assert_eq!(p("undecorated-with-config"), json!({"timeout": "7h0m0s"}));

    // A Gerrit repository's `https://` or `http://` is not part of the match.
    let job = presubmit(s, "p/q", "p-q");
    for repo in [
        "https://gerrit.example.com/project",
        "http://gerrit.example.com/project",
    ] {
        assert_eq!(
            set_fields(s.decoration_config(job, repo)),
            json!({"timeout": "6h0m0s", "grace_period": "2s"}),
            "{repo}"
        );
    }
}

/// File order decides, not how specific an entry is; a decorated job nothing
/// matches gets an empty config (which Prow's validation then refuses on
/// Kubernetes).
#[test]
fn later_entries_win_whatever_they_match() {
    let l = check(
        "
plank:
  default_decoration_config_entries:
  - repo: o/r
    config: {timeout: 3h, skip_cloning: true}
  - repo: o
    config: {timeout: 2h}
  - cluster: elsewhere
    config: {timeout: 1h}
",
        "
presubmits:
  o/r:
  - name: j
    decorate: true
    spec: {containers: [{image: alpine, command: [make]}]}
  p/q:
  - name: k
    decorate: true
    spec: {containers: [{image: alpine, command: [make]}]}
",
    );
    let s = snapshot(&l);
    assert_eq!(
        set_fields(s.decoration_config(presubmit(s, "o/r", "j"), "o/r")),
        json!({"timeout": "2h0m0s", "skip_cloning": true})
    );
    assert_eq!(
        s.decoration_config(presubmit(s, "p/q", "k"), "p/q"),
        Some(DecorationConfig::default())
    );
}

/// The legacy map reads as entries for every cluster: `*` first, then the orgs,
/// then the `org/repo` keys, whatever their order in the file.
#[test]
fn legacy_map_orders_star_then_orgs_then_repos() {
    let l = check(
        r#"
plank:
  default_decoration_configs:
    o/r: {timeout: 3h}
    o: {timeout: 2h, grace_period: 1m}
    "*": {timeout: 1h, grace_period: 5s, blobless_fetch: true}
    p: {blobless_fetch: false}
build_clusters: {default: {}, build: {}}
"#,
        "
presubmits:
  o/r:
  - name: o-r
    decorate: true
    cluster: build
    spec: {containers: [{image: alpine, command: [make]}]}
  o/x:
  - name: o-x
    decorate: true
    spec: {containers: [{image: alpine, command: [make]}]}
  p/q:
  - name: p-q
    decorate: true
    spec: {containers: [{image: alpine, command: [make]}]}
  z/z:
  - name: z-z
    decorate: true
    spec: {containers: [{image: alpine, command: [make]}]}
",
    );
    let s = snapshot(&l);
    let pre =
        |repo: &str, name: &str| set_fields(s.decoration_config(presubmit(s, repo, name), repo));
    assert_eq!(
        pre("o/r", "o-r"),
        json!({"timeout": "3h0m0s", "grace_period": "1m0s", "blobless_fetch": true})
    );
    assert_eq!(
        pre("o/x", "o-x"),
        json!({"timeout": "2h0m0s", "grace_period": "1m0s", "blobless_fetch": true})
    );
    assert_eq!(
        pre("p/q", "p-q"),
        json!({"timeout": "1h0m0s", "grace_period": "5s", "blobless_fetch": false})
    );
    assert_eq!(
        pre("z/z", "z-z"),
        json!({"timeout": "1h0m0s", "grace_period": "5s", "blobless_fetch": true})
    );
}

// --- The test-infra corpus.

fn corpus() -> Option<PathBuf> {
    let beside =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/test-infra/config");
    beside.join("jobs").is_dir().then_some(beside)
}

/// Clusters whose corpus entry writes `gcs_credentials_secret: ""`.
const NO_CREDENTIALS: [&str; 3] = [
    "k8s-infra-aks-prow-build",
    "k8s-infra-ppc64le-prow-build",
    "k8s-infra-s390x-prow-build",
];

/// Prow's own configuration still loads, and every decorated job resolves to
/// a config Prow accepts: the four released images, the upload configuration,
/// the catch-all's credentials secret except on the three clusters whose
/// entries write `""`, and its own fields over the defaults.
#[test]
fn corpus_decorated_jobs_resolve_completely() {
    let root = corpus().expect(
        "the test-infra corpus is not beside the project (../shared/corpus/test-infra): this test reads it",
    );
    let loaded = load(
        &LoadOptions {
            config: Some(root.join("prow/config.yaml")),
            job_config: vec![root.join("jobs")],
            ..LoadOptions::default()
        },
        &OsFiles,
    );
    let s = loaded.snapshot.as_ref().unwrap_or_else(|| {
        panic!(
            "the corpus does not load: {:#?}",
            &loaded.diagnostics[..loaded.diagnostics.len().min(10)]
        )
    });
    let counts = s.counts();
    assert_eq!(
        (counts.periodics, counts.presubmits, counts.postsubmits),
        (1335, 2261, 253)
    );

    let mut decorated = 0;
    let mut without_credentials = 0;
    let mut own_timeouts = 0;
    let mut check =
        |name: &str, cluster: &str, own: Option<&DecorationConfig>, d: Option<DecorationConfig>| {
            let Some(d) = d else { return };
            decorated += 1;
            d.validate().unwrap_or_else(|e| panic!("{name}: {e}"));
            let images = d.utility_images.as_ref().expect("images");
            for utility in ["clonerefs", "initupload", "entrypoint", "sidecar"] {
                assert!(
                    images[utility].ends_with(":v20260821-a61940897"),
                    "{name}: {utility} {}",
                    images[utility]
                );
            }
            let gcs = d.gcs_configuration.as_ref().expect("gcs");
            assert!(
                gcs["bucket"].is_string() && gcs["path_strategy"].is_string(),
                "{name}"
            );
            let own_secret = own.and_then(|o| o.gcs_credentials_secret.clone());
            let want = own_secret.unwrap_or_else(|| {
                if NO_CREDENTIALS.contains(&cluster) {
                    String::new()
                } else {
                    "service-account".into()
                }
            });
            if want.is_empty() {
                without_credentials += 1;
            }
            assert_eq!(
                d.gcs_credentials_secret.as_deref(),
                Some(want.as_str()),
                "{name} on {cluster}"
            );
            match own.and_then(|o| o.timeout) {
                Some(t) => {
                    own_timeouts += 1;
                    assert_eq!(d.timeout, Some(t), "{name}");
                }
                None => assert_eq!(
                    d.timeout.map(|t| t.to_string()).as_deref(),
                    Some("2h0m0s"),
                    "{name}"
                ),
            }
            if own.and_then(|o| o.blobless_fetch).is_none() {
                assert_eq!(d.blobless_fetch, Some(true), "{name}");
            }
        };
    for p in &s.periodics {
        check(
            p.name(),
            &p.base.cluster,
            p.base.decoration_config.as_ref(),
            s.periodic_decoration(p),
        );
    }
    for (repo, jobs) in &s.presubmits {
        for j in jobs {
            check(
                j.name(),
                &j.base.cluster,
                j.base.decoration_config.as_ref(),
                s.decoration_config(j, repo),
            );
        }
    }
    for (repo, jobs) in &s.postsubmits {
        for j in jobs {
            check(
                j.name(),
                &j.base.cluster,
                j.base.decoration_config.as_ref(),
                s.decoration_config(j, repo),
            );
        }
    }
    eprintln!(
        "{decorated} decorated jobs resolved; {without_credentials} without GCS credentials; {own_timeouts} with their own timeout"
    );
    // Most of the corpus is decorated, jobs on the three clusters among them,
    // and some set their own timeout.
    assert!(decorated > 3000, "{decorated}");
    assert!(without_credentials > 0);
    assert!(own_timeouts > 0);
}
