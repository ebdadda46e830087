#!/usr/bin/env bash
# Regression run of every fuzz target over its committed corpus, for CI.
#
# Runs each input of fuzz/corpus/<target>/ once (libFuzzer -runs=0: no mutation, no
# new inputs written) and exits non-zero if any input crashes, panics, times out or
# runs out of memory. Works on stable Rust: the targets are built without a
# sanitizer (`--sanitizer none`), which is the only cargo-fuzz mode stable rustc
# accepts (see README.md).
#
# Usage: fuzz/run-corpus.sh [TARGET...]   (default: every target of `cargo fuzz list`)
# Environment: FUZZ_TIMEOUT (seconds per input, default 30),
#              FUZZ_RSS_LIMIT_MB (default 2048).
set -euo pipefail

cd "$(dirname "$0")"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "run-corpus: installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked
fi

targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
    mapfile -t targets < <(cargo fuzz list)
fi

# yaml_parse takes one YAML stream; the config_loader seeds (job-config files, with
# optional NUL-separated extra files) are valid inputs for it as well.
corpus_for() {
    if [ -d "corpus/$1" ]; then
        echo "corpus/$1"
    else
        echo "corpus/config_loader"
    fi
}

# Crash files go to a scratch directory, never into the work tree.
artifacts="$(mktemp -d "${TMPDIR:-/tmp}/bosun-fuzz-artifacts.XXXXXX")"

failed=()
for t in "${targets[@]}"; do
    corpus="$(corpus_for "$t")"
    n="$(find "$corpus" -type f | wc -l)"
    echo "run-corpus: $t over $corpus ($n inputs)" >&2
    # --sanitizer none: stable rustc rejects -Zsanitizer; -O: release with debug assertions.
    if cargo fuzz run --sanitizer none -O "$t" "$corpus" -- \
        -runs=0 \
        -timeout="${FUZZ_TIMEOUT:-30}" \
        -rss_limit_mb="${FUZZ_RSS_LIMIT_MB:-2048}" \
        -artifact_prefix="$artifacts/$t-"; then
        echo "run-corpus: $t: ok ($n inputs)" >&2
    else
        echo "run-corpus: $t: FAILED (reproducers in $artifacts)" >&2
        failed+=("$t")
    fi
done

if [ "${#failed[@]}" -gt 0 ]; then
    echo "run-corpus: failing targets: ${failed[*]}" >&2
    exit 1
fi
rmdir "$artifacts" 2>/dev/null || true
echo "run-corpus: all ${#targets[@]} targets passed over their corpora" >&2
