#!/usr/bin/env bash
# Builds tekton-validate (main.go): Tekton's own PipelineRun defaulting and
# validation (github.com/tektoncd/pipeline v1.0.0, pkg/apis/pipeline/v1, from
# the Go module pinned in this directory) behind a command that bosun's tests
# run on every PipelineRun they create. It goes into a cache directory outside
# the clone keyed by the Tekton version, the Go toolchain and the hash of this
# module and script; a complete cache entry is reused as is.
#
#   tools/tekton/build.sh          build if needed; print the binary's path
#   tools/tekton/build.sh --check  print the path if it is built, else fail
#
# Only the path goes to stdout. A build says so on stderr in one line at its
# start and one at its end; on a terminal a progress line between them counts
# the packages compiled (tools/lib/go-progress.sh). tools/test runs this
# script and exports the path as $BOSUN_TEKTON_VALIDATE, where the tests look
# for it (else they run this script with --check).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export GOTOOLCHAIN=local CGO_ENABLED=0
tekton=v1.0.0
gover="$(go env GOVERSION)"
platform="$(go env GOOS)-$(go env GOARCH)"
hash="$(cat "$here/go.mod" "$here/go.sum" "$here/main.go" "$here/build.sh" | sha256sum | cut -c1-12)"
root="${XDG_CACHE_HOME:-$HOME/.cache}/bosun/tekton"
key="tekton-${tekton}_${gover}_${platform}_${hash}"
dir="$root/$key"

if [[ -f "$dir/.complete" ]]; then
  echo "$dir/tekton-validate"
  exit 0
fi
if [[ "${1:-}" == "--check" ]]; then
  echo "tekton-validate is not built for this tree: run tools/test --setup-only (or tools/tekton/build.sh) to build it into $dir" >&2
  exit 1
fi

mkdir -p "$root"
exec 9>"$root/$key.lock"
if ! flock -n 9; then
  echo "waiting for another build of tekton-validate into $dir" >&2
  flock 9
fi
if [[ -f "$dir/.complete" ]]; then
  echo "$dir/tekton-validate"
  exit 0
fi
tmp="$root/$key.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp"
cd "$here"
echo "building tekton-validate (Tekton $tekton) into $dir (first time: about 2 minutes on 2 cores)" >&2
start=$(date +%s)
# shellcheck source=tools/lib/go-progress.sh
source "$here/../lib/go-progress.sh"
progress_plan .
go build -v -mod=readonly -trimpath -ldflags "-s -w" -o "$tmp/tekton-validate" . \
  2>&1 | progress_filter tekton-validate
# A PipelineRun Tekton accepts, and one it refuses.
echo '{"apiVersion":"tekton.dev/v1","kind":"PipelineRun","metadata":{"name":"ok"},"spec":{"pipelineSpec":{"tasks":[{"name":"t","taskSpec":{"steps":[{"name":"s","image":"alpine","script":"true"}]}}]}}}' \
  | "$tmp/tekton-validate" >/dev/null
if echo '{"apiVersion":"tekton.dev/v1","kind":"PipelineRun","metadata":{"name":"bad"},"spec":{}}' | "$tmp/tekton-validate" >/dev/null; then
  progress_clear
  echo "tekton-validate accepted a PipelineRun with neither pipelineRef nor pipelineSpec" >&2
  exit 1
fi
touch "$tmp/.complete"
rm -rf "$dir"
mv -T "$tmp" "$dir"
progress_end "built in $(( $(date +%s) - start )) s"
echo "$dir/tekton-validate"
