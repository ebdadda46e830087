#!/usr/bin/env bash
# Regenerate crates/bosun-schedule/testdata/robfig-vectors.jsonl.gz from
# robfig/cron v3 (Debian's golang-github-robfig-cron-dev, Prow's parser options).
# Usage: tools/robfig-oracle/make-vectors.sh   (from anywhere; needs root for apt-get if
# the packages are missing)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out_dir="$repo/crates/bosun-schedule/testdata"
out="$out_dir/robfig-vectors.jsonl.gz"
max_bytes=$((20 * 1024 * 1024))

need=()
dpkg-query -W -f='${Status}' golang-go 2>/dev/null | grep -q 'install ok installed' || need+=(golang-go)
dpkg-query -W -f='${Status}' golang-github-robfig-cron-dev 2>/dev/null | grep -q 'install ok installed' || need+=(golang-github-robfig-cron-dev)
if ((${#need[@]})); then
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y "${need[@]}"
fi

export GO111MODULE=off GOPATH=/usr/share/gocode
src=/usr/share/gocode/src/github.com/robfig/cron
grep -q 'func NewParser' "$src/parser.go" && grep -q 'SecondOptional' "$src/parser.go" \
  || { echo "robfig/cron at $src is not the v3 API" >&2; exit 1; }

export ROBFIG_VERSION="golang-github-robfig-cron-dev $(dpkg-query -W -f='${Version}' golang-github-robfig-cron-dev) ($(head -1 "$src/go.mod" | awk '{print $2}'))"
export TZDATA_VERSION="$(dpkg-query -W -f='${Version}' tzdata)"
export TZ=UTC

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$here" && go build -o "$work/oracle" oracle.go && go build -o "$work/bench" bench.go)

mkdir -p "$out_dir"
# Corpus crons: all four starts. Generated expressions: all four starts unless the
# result exceeds 20 MB, then the first two starts only (never fewer expressions).
python3 "$here/gen.py" --corpus-only >"$work/corpus.txt"
python3 "$here/gen.py" --generated-only >"$work/gen.txt"
"$work/oracle" <"$work/corpus.txt" >"$work/vectors.jsonl"
"$work/oracle" -meta=false <"$work/gen.txt" >>"$work/vectors.jsonl"
gzip -9 -n -c "$work/vectors.jsonl" >"$work/vectors.jsonl.gz"
if (( $(stat -c %s "$work/vectors.jsonl.gz") > max_bytes )); then
  echo "output > 20 MB; regenerating generated expressions with 2 starts" >&2
  "$work/oracle" <"$work/corpus.txt" >"$work/vectors.jsonl"
  "$work/oracle" -meta=false -nstarts=2 <"$work/gen.txt" >>"$work/vectors.jsonl"
  gzip -9 -n -c "$work/vectors.jsonl" >"$work/vectors.jsonl.gz"
fi
mv "$work/vectors.jsonl.gz" "$out"

lines=$(wc -l <"$work/vectors.jsonl")
ok=$(grep -c '"ok":true' "$work/vectors.jsonl" || true)
bad=$(grep -c '"ok":false' "$work/vectors.jsonl" || true)
echo "wrote $out: $lines lines (1 meta + $((lines - 1)) exprs: $(wc -l <"$work/corpus.txt") corpus, $(wc -l <"$work/gen.txt") generated), ok=$ok err=$bad, $(stat -c %s "$out") bytes"
head -1 "$work/vectors.jsonl"
