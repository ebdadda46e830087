#!/usr/bin/env bash
# N runs (default 1000) of one Kubernetes job through a release-built
# `bosun serve` on one real kube-apiserver (bosun-kubetest: v1.37.2 and etcd
# v3.7.0, audit log on), the harness completing pods as they start: runs per
# second, and API requests per run (bosun's own from the audit log, everyone's
# from apiserver_request_total) beside plank's per ProwJob.
#
#   bench/kube-runs.sh [N]
#
# Twice: with kube-apiserver's default limits, then with larger
# priority-and-fairness limits (--max-requests-inflight and
# --max-mutating-requests-inflight 3000), which admit the whole burst of pod
# creations. KUBE_BENCH_APISERVER_ARGS="..." runs once with those flags
# instead; KUBE_BENCH_WORKERS: harness threads (default 8); KUBE_BENCH_KEEP=DIR
# keeps bosun's, kube-apiserver's and the audit log.
#
# Builds kube-apiserver and etcd if needed (tools/kube/build.sh), bosun and
# the benchmark (crates/bosun-kubetest/examples/runs_bench.rs).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
n=${1:-1000}

BOSUN_KUBE_BIN_DIR=$(bash "$root/tools/kube/build.sh")
export BOSUN_KUBE_BIN_DIR
cargo build --quiet --release --bin bosun --manifest-path "$root/Cargo.toml"
cargo build --quiet --release -p bosun-kubetest --example runs_bench --manifest-path "$root/Cargo.toml"
bench() { "$root/target/release/examples/runs_bench" "$root/target/release/bosun" "$n"; }
if [ -n "${KUBE_BENCH_APISERVER_ARGS+set}" ]; then
  bench
else
  KUBE_BENCH_APISERVER_ARGS= bench
  echo
  KUBE_BENCH_APISERVER_ARGS="--max-requests-inflight=3000 --max-mutating-requests-inflight=3000" bench
fi
