#!/usr/bin/env bash
# Side-by-side benchmark of cron `next` and `parse` over the Prow corpus's 229
# distinct cron expressions: bosun's engine and robfig/cron v3 (Prow's library),
# measured the same way (tools/robfig-oracle/bench.go and the next_bench example),
# interleaved, best of ROUNDS each. Optionally Python's croniter if installed.
#
#   bench/schedule.sh [ROUNDS]     (needs: golang-go, golang-github-robfig-cron-dev)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
rounds=${1:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ ! -d /usr/share/gocode/src/github.com/robfig/cron ] || ! command -v go >/dev/null; then
  apt-get update -qq && apt-get install -y -qq golang-go golang-github-robfig-cron-dev >/dev/null
fi
(cd "$root/tools/robfig-oracle" && GO111MODULE=off GOPATH=/usr/share/gocode go build -o "$work/robfig-bench" bench.go)
cargo build --quiet --release --example next_bench -p bosun-schedule --manifest-path "$root/Cargo.toml"
python3 "$root/tools/robfig-oracle/gen.py" --corpus-only > "$work/exprs.txt"
echo "expressions: $(wc -l < "$work/exprs.txt") (corpus), rounds: $rounds"

field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }
best() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b < a) print b; else print a }'; }
bn=; bp=; bv=; rn=; rp=
for _ in $(seq "$rounds"); do
  out=$("$root/target/release/examples/next_bench" < "$work/exprs.txt")
  bn=$(best "$bn" "$(echo "$out" | field next_median_ns)")
  bp=$(best "$bp" "$(echo "$out" | field parse_median_ns)")
  bv=$(best "$bv" "$(echo "$out" | field never_ns)")
  out=$(TZ=UTC "$work/robfig-bench" < "$work/exprs.txt" 2>/dev/null)
  rn=$(best "$rn" "$(echo "$out" | field next_median_ns)")
  rp=$(best "$rp" "$(echo "$out" | field parse_median_ns)")
done
printf '%-28s %14s %14s\n' "" "next (median)" "parse (median)"
printf '%-28s %11.1f ns %11.1f ns\n' "bosun" "$bn" "$bp"
printf '%-28s %11.1f ns %11.1f ns\n' "robfig/cron v3 (Go)" "$rn" "$rp"
awk -v b="$bn" -v r="$rn" 'BEGIN { printf "robfig / bosun, next:  %.1fx   (target >= 15x; bosun target <= 100 ns)\n", r / b }'
awk -v b="$bp" -v r="$rp" 'BEGIN { printf "robfig / bosun, parse: %.1fx   (bosun target <= 2000 ns)\n", r / b }'
echo "bosun next on a never-firing expression: $bv ns (target < 1000 ns)"
