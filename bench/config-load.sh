#!/usr/bin/env bash
# Side-by-side benchmark of config loading on the real Prow corpus:
#   bosun (load + validate, in-process, best of N; default threads and 1 thread)
#   PyYAML's C loader (yaml.CSafeLoader), building Python objects
#   a raw libyaml event scan (C), the floor for any YAML parser
# All three parse exactly the files bosun loads (.prowignore applied), rounds are
# interleaved so machine noise hits all of them alike, and the best of each is kept.
# Prints ratios and each tool's peak RSS.
#
#   bench/config-load.sh [ROUNDS]     (needs: cc, libyaml-dev, python3 with PyYAML C ext, /usr/bin/time)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
C=${CORPUS:-$root/../shared/corpus/test-infra/config}
rounds=${1:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cargo build --quiet --release --example load_bench -p bosun-config --manifest-path "$root/Cargo.toml"
bosun="$root/target/release/examples/load_bench"
cc -O2 -o "$work/libyaml_scan" "$here/peers/libyaml_scan.c" -lyaml
python3 -c 'import yaml; yaml.CSafeLoader' 2>/dev/null || { echo "PyYAML without CSafeLoader: python3 -m pip install --only-binary=:all: pyyaml" >&2; exit 1; }

args=(--config "$C/prow/config.yaml" --job-config "$C/jobs")
"$bosun" --print-files "${args[@]}" > "$work/files.txt"
echo "files: $(wc -l < "$work/files.txt"), $(cat $(cat "$work/files.txt") | wc -c) bytes; rounds: $rounds (best of 3 runs each)"

ns() { sed -n 's/.*ns=\([0-9]*\).*/\1/p'; }
best_b=; best_b1=; best_p=; best_l=
min() { if [ -z "$1" ] || [ "$2" -lt "$1" ]; then echo "$2"; else echo "$1"; fi; }
for _ in $(seq "$rounds"); do
  b=$("$bosun" --repeat 3 "${args[@]}" | ns);                      best_b=$(min "$best_b" "$b")
  b1=$(RAYON_NUM_THREADS=1 "$bosun" --repeat 3 "${args[@]}" | ns);  best_b1=$(min "$best_b1" "$b1")
  p=$(python3 "$here/peers/pyyaml_load.py" --repeat 3 - < "$work/files.txt" | ns); best_p=$(min "$best_p" "$p")
  l=$("$work/libyaml_scan" --repeat 3 - < "$work/files.txt" | ns); best_l=$(min "$best_l" "$l")
done

rss() { /usr/bin/time -f '%M' "$@" 2>&1 >/dev/null | tail -1; }
rss_b=$(rss "$bosun" "${args[@]}")
rss_p=$(/usr/bin/time -f '%M' python3 "$here/peers/pyyaml_load.py" - < "$work/files.txt" 2>&1 >/dev/null | tail -1)
rss_l=$(/usr/bin/time -f '%M' "$work/libyaml_scan" - < "$work/files.txt" 2>&1 >/dev/null | tail -1)

ms() { awk -v n="$1" 'BEGIN { printf "%.1f ms", n / 1e6 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
printf '%-34s %12s %10s\n' tool "best time" "peak RSS"
printf '%-34s %12s %7s KiB\n' "bosun load+validate (2 threads)" "$(ms "$best_b")" "$rss_b"
printf '%-34s %12s\n' "bosun load+validate (1 thread)" "$(ms "$best_b1")"
printf '%-34s %12s %7s KiB\n' "PyYAML CSafeLoader" "$(ms "$best_p")" "$rss_p"
printf '%-34s %12s %7s KiB\n' "libyaml raw event scan" "$(ms "$best_l")" "$rss_l"
echo "bosun / CSafeLoader:     $(ratio "$best_b" "$best_p")  (target <= 0.2)   [1 thread: $(ratio "$best_b1" "$best_p")]"
echo "bosun / libyaml scan:    $(ratio "$best_b" "$best_l")  (target <= 2.0)   [1 thread: $(ratio "$best_b1" "$best_l")]"
echo "bosun peak RSS:          $rss_b KiB (target < 65536)"
