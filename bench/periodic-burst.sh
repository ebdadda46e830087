#!/usr/bin/env bash
# N periodics due in the same second, fired by a real `bosun serve` (SQLite
# store, local executor): prints the daemon's own report of the burst, the
# lateness of its last run's commit (commit time minus the tick, measured when
# the scheduler has the store's answer and has recorded every fire: after the
# transaction is durable; the controller's view and metrics hear of the runs
# right after the answer, before anything else commits), and the lateness histogram from
# /metrics.
#
#   bench/periodic-burst.sh [N]        (default 10000; PERF_OUT=FILE: perf profile of the burst,
#                                      PERF_ARGS: perf record's options;
#                                      BOSUN=PATH: that binary instead of a fresh release build,
#                                      to alternate old and new binaries;
#                                      the daemon's log is kept in /tmp/burst-last.log)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
n=${1:-10000}
work=$(mktemp -d)
pid=

# The daemon's processes: it and every descendant (its runs' processes).
tree() {
  local p
  echo "$1"
  for p in $(cat /proc/"$1"/task/*/children 2>/dev/null); do tree "$p"; done
}
# The runs' processes get SIGKILL when the daemon ends (they die with their
# parent), but only once the kernel has reaped it, and they still write into
# the data directory until they are gone: the daemon is killed and waited
# for, then its descendants, and only then is the directory removed.
cleanup() {
  local rc=$? p pids
  if [ -n "$pid" ]; then
    pids=$(tree "$pid")
    kill -9 $pids 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    for p in $pids; do
      for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
    done
  fi
  cp "$work/log" /tmp/burst-last.log 2>/dev/null || true
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT

if [ -n "${BOSUN:-}" ]; then
  bosun=$BOSUN
else
  cargo build --quiet --release --bin bosun --manifest-path "$root/Cargo.toml"
  bosun="${CARGO_TARGET_DIR:-$root/target}/release/bosun"
fi

# Due 40 s from now (start-up evaluates every periodic once first).
due=$(( $(date -u +%s) + 40 ))
read -r s m h < <(date -u -d "@$due" '+%-S %-M %-H')
mkdir -p "$work/jobs"
cat > "$work/config.yaml" <<YAML
build_clusters:
  default:
    kind: local
    max_concurrency: 8
YAML
{
  echo "periodics:"
  for i in $(seq 1 "$n"); do
    printf -- '- name: burst-%d\n  cron: "%d %d %d * * *"\n  spec: {containers: [{image: x, command: ["true"]}]}\n' "$i" "$s" "$m" "$h"
  done
} > "$work/jobs/burst.yaml"
port=$(( 20000 + RANDOM % 20000 ))
"$bosun" serve --config "$work/config.yaml" --job-config "$work/jobs" \
  --data-dir "$work/data" --listen "127.0.0.1:$port" --log-format json \
  > "$work/log" 2>&1 &
pid=$!
echo "$n periodics due at $(date -u -d "@$due" +%H:%M:%S) (cron \"$s $m $h * * *\"); daemon pid $pid"
if [ -n "${PERF_OUT:-}" ]; then
  # A profile of the daemon from 3 s before the instant to 2 s after it.
  sleep $(( due - 3 - $(date -u +%s) ))
  # PERF_ARGS: e.g. "-F 999 --call-graph dwarf" for whole stacks (the release
  # binary keeps no frame pointers).
  perf record ${PERF_ARGS:--F 4999 -g} -p "$pid" -o "$PERF_OUT" -- sleep 5 > /dev/null 2>&1 &
  perf_pid=$!
fi
for _ in $(seq 1 120); do
  if grep -q 'a burst of periodic runs committed' "$work/log" && [ "$(date -u +%s)" -ge "$due" ]; then
    break
  fi
  sleep 1
done
# The profile is written out before the daemon is killed.
[ -n "${perf_pid:-}" ] && wait "$perf_pid" || true
grep 'a burst of periodic runs committed' "$work/log" | tail -n 1
curl -s "http://127.0.0.1:$port/metrics" | grep '^bosun_periodic_fire_lateness_seconds_bucket' \
  | awk -v n="$n" '{ split($1, a, "le=\""); le=a[2]; sub(/".*/, "", le); if ($2 > 0) printf "  lateness <= %s s: %d of %d runs\n", le, $2, n }' | head -n 8
curl -s "http://127.0.0.1:$port/metrics" | grep '^bosun_periodic_prepared_fires_total' || true
# grep -c exits 1 when it counts none.
echo "errors logged: $(grep -c '"level":"ERROR"' "$work/log" || true)"
