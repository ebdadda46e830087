#!/usr/bin/env bash
# Context switches per local run: one round of `run_bench` (N no-op runs
# through `bosun serve` on a local cluster, default 10000), and 3 s of the
# kernel's sched_switch events in the middle of bosun's part of it, divided
# by the runs that ended in those 3 s (`prowjob_state_transitions` to
# success, from /metrics). Prints the daemon's switches per run by thread
# name, and its supervisor's. Needs `perf` and the right to trace the
# system (root, or kernel.perf_event_paranoid <= -1).
#
#   bench/local-switches.sh [N]        (BOSUN=PATH: that binary instead of a
#                                      fresh release build, to alternate old
#                                      and new binaries; TOKIO_WORKER_THREADS
#                                      passes to the daemon)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
n=${1:-10000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ -z "${BOSUN:-}" ]; then
  cargo build --quiet --release --bin bosun --manifest-path "$root/Cargo.toml"
  BOSUN=$root/target/release/bosun
fi
cargo build --quiet --release -p bosun --example run_bench --manifest-path "$root/Cargo.toml"

BOSUN_BENCH_ROUNDS=1 "$root/target/release/examples/run_bench" "$BOSUN" "$n" > "$work/bench.log" 2>&1 &
bench=$!
# The newest process whose command line matches $1, looked for $2 times
# every $3 s (none: empty).
newest() {
  local pid
  for _ in $(seq 1 "$2"); do
    pid=$(pgrep -n -f -- "$1" || true)
    [ -n "$pid" ] && { echo "$pid"; return; }
    sleep "$3"
  done
}
# The daemon, then its supervisor (started with the round's first run,
# after the plain loop; its root is in the benchmark's directory, and an
# earlier supervisor may still be there for a few seconds).
daemon=$(newest "$BOSUN serve" 200 0.1)
[ -n "$daemon" ] || { echo "no daemon"; cat "$work/bench.log"; exit 1; }
supervisor=$(newest "run-shim.*bosun-run-bench-$bench" 1200 0.05)
[ -n "$supervisor" ] || { echo "no supervisor"; cat "$work/bench.log"; exit 1; }
sleep 0.5
# Starts at once may each have started one; the one that serves (that took
# the cluster's lock) is the one with threads beside its main one.
most=0
for p in $(pgrep -f -- "run-shim.*bosun-run-bench-$bench"); do
  threads=$(ls /proc/"$p"/task 2>/dev/null | wc -l)
  if [ "$threads" -gt "$most" ]; then most=$threads; supervisor=$p; fi
done
port=$(ss -ltnp | grep "pid=$daemon," | awk '{print $4}' | head -1)
ended() {
  curl -s "http://$port/metrics" |
    awk '/^prowjob_state_transitions/ && /state="success"/ {s += $NF} END {print s + 0}'
}
before=$(ended)
perf record -q -e sched:sched_switch -a -o "$work/switches.data" -- sleep 3 > /dev/null 2>&1
after=$(ended)
wait "$bench"
runs=$((after - before))
[ "$runs" -gt 0 ] || { echo "no run ended while counting"; cat "$work/bench.log"; exit 1; }
grep '^round' "$work/bench.log"
echo "runs ended while counting: $runs"
perf script -i "$work/switches.data" -F comm,pid 2>/dev/null |
  awk -v d="$daemon" -v s="$supervisor" -v runs="$runs" '
    $NF == d { by[$1]++; daemon++ }
    $NF == s { sup++ }
    END {
      printf "the daemon: %.1f switches per run\n", daemon / runs
      for (t in by) printf "  %-16s %.2f\n", t, by[t] / runs
      printf "its supervisor: %.1f switches per run\n", sup / runs
    }'
