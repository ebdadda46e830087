//! Kubeconfig contexts are build-cluster aliases: jobs may name them, and a context
//! defined in two files is an error.

use std::path::PathBuf;

use bosun_config::source::MemFiles;
use bosun_config::{load, LoadOptions};

const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\ncontexts:\n- name: build01\n  context: {cluster: c1, user: u}\n- name: trusted\n  context: {cluster: c2, user: u}\n";
const JOBS: &str = "periodics:\n- name: a\n  interval: 1h\n  cluster: build01\n  spec: {containers: [{image: x, command: [true]}]}\n- name: b\n  interval: 1h\n  cluster: build02\n  spec: {containers: [{image: x, command: [true]}]}\n";

fn opts(kubeconfigs: &[&str]) -> LoadOptions {
    LoadOptions {
        job_config: vec![PathBuf::from("/c/jobs")],
        kubeconfigs: kubeconfigs.iter().map(PathBuf::from).collect(),
        ..LoadOptions::default()
    }
}

#[test]
fn contexts_are_cluster_aliases() {
    let mut fs = MemFiles::new();
    fs.file("/c/jobs/j.yaml", JOBS)
        .file("/k/config", KUBECONFIG);
    let loaded = load(&opts(&["/k/config"]), &fs);
    let lines: Vec<String> = loaded.diagnostics.iter().map(|d| d.to_string()).collect();
    assert_eq!(
        lines,
        vec!["/c/jobs/j.yaml:8:3: error: job b: job configuration for \"b\" specifies unknown 'cluster' value \"build02\"\n  hint: known clusters: default, build01, trusted"]
    );
    // Without kubeconfigs nothing is configured explicitly: no alias is checked.
    assert!(load(&opts(&[]), &fs).diagnostics.is_empty());
}

#[test]
fn a_context_in_two_files_is_an_error() {
    let mut fs = MemFiles::new();
    fs.file("/c/jobs/j.yaml", "periodics: []\n")
        .file("/k/a", KUBECONFIG)
        .file("/k/b", KUBECONFIG);
    let loaded = load(&opts(&["/k/a", "/k/b"]), &fs);
    let lines: Vec<String> = loaded.diagnostics.iter().map(|d| d.to_string()).collect();
    assert_eq!(
        lines,
        vec![
            "/k/b: error: context build01 occurred more than once in kubeconfig dir",
            "/k/b: error: context trusted occurred more than once in kubeconfig dir"
        ]
    );
    assert!(loaded.snapshot.is_none());
}

#[test]
fn unreadable_and_broken_kubeconfigs() {
    let mut fs = MemFiles::new();
    fs.file("/c/jobs/j.yaml", "periodics: []\n")
        .file("/k/bad", "contexts: [\n")
        .file("/k/noname", "contexts:\n- context: {}\n");
    let loaded = load(&opts(&["/k/missing", "/k/bad", "/k/noname"]), &fs);
    let lines: Vec<String> = loaded.diagnostics.iter().map(|d| d.to_string()).collect();
    assert_eq!(lines.len(), 3, "{lines:#?}");
    assert!(
        lines[0].starts_with("/k/bad:2:1: error: invalid YAML:"),
        "{lines:#?}"
    );
    assert!(
        lines[1].starts_with("/k/missing: error: cannot read kubeconfig:"),
        "{lines:#?}"
    );
    assert_eq!(
        lines[2],
        "/k/noname:2:3: error: a kubeconfig context has no name"
    );
}
