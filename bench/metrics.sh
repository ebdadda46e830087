#!/usr/bin/env bash
# `GET /metrics` with JOBS jobs x 7 states (one retained run of every job in
# every state, so JOBS x 7 `prowjobs` series), side by side with Prow's
# client_golang: bosun's `Metrics::render` as the daemon's handler calls it,
# over metrics seeded from a SQLite store at start and kept up to date from
# its commits since (crates/bosun-daemon/examples/metrics_bench.rs), and a
# client_golang GaugeVec `prowjobs` with the same nine labels and label values
# rendered as promhttp renders a text scrape (bench/peers/metrics-go). In
# turns, ROUNDS times; each run times ITERS renders after one to warm up and
# reports its median render per series (sample lines of the exposition).
# Prints each run, the medians and their ratio against the target, with the
# seed at start (count_runs), the observer's cost per creation and per
# transition, and prometheus-client's encoding of the same family beside.
#
#   bench/metrics.sh [JOBS] [ROUNDS]     (defaults 10000 and 3;
#   METRICS_BENCH_ITERS renders per run, default 20; needs go >= 1.25;
#   builds into CARGO_TARGET_DIR, else target/)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
jobs=${1:-10000}
rounds=${2:-3}
iters=${METRICS_BENCH_ITERS:-20}
command -v go >/dev/null || { echo "needs go (>= 1.25, for client_golang v1.24.0)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cargo build --quiet --release --example metrics_bench -p bosun-daemon --manifest-path "$root/Cargo.toml"
(cd "$here/peers/metrics-go" && go build -o "$work/metrics-go" .)
bosun="${CARGO_TARGET_DIR:-$root/target}/release/examples/metrics_bench"

field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p"; }
: > "$work/results"
for r in $(seq 1 "$rounds"); do
  b=$("$bosun" "$jobs" "$iters" 2>/dev/null)
  g=$("$work/metrics-go" "$jobs" "$iters")
  echo "round $r: $b"
  echo "round $r: $g"
  echo "$(echo "$b" | field ns_per_series) $(echo "$b" | field pc_encode_ns_per_series) $(echo "$g" | field ns_per_series) $(echo "$b" | field seed_ms) $(echo "$b" | field observe_create_ns) $(echo "$b" | field observe_transition_ns)" >> "$work/results"
done
python3 - "$work/results" "$jobs" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
b, e, g, seed, create, move = (statistics.median(c) for c in zip(*rows))
print(f"medians, {int(sys.argv[2]) * 7} prowjobs series: bosun /metrics {b:.1f} ns/series; "
      f"client_golang {g:.0f} ns/series; prometheus-client's encoding of the family {e:.0f} ns/series")
print(f"bosun / client_golang: {b / g:.4f} (prometheus-client's encoding: {e / g:.3f}); "
      f"target <= 1000 ns/series: {'met' if b <= 1000 else 'missed'}")
print(f"once at start: seed from count_runs {seed:.0f} ms; per committed change: "
      f"creation {create:.0f} ns, transition {move:.0f} ns (observer, prowjob_state_transitions included)")
PY
