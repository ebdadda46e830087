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
# The tests find the binary through $BOSUN_TEKTON_VALIDATE, or by running this
# script with --check.
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
  echo "tekton-validate is not built for this tree: run tools/tekton/build.sh (or .ci/run) to build it into $dir" >&2
  exit 1
fi

mkdir -p "$root"
exec 9>"$root/$key.lock"
flock 9
if [[ -f "$dir/.complete" ]]; then
  echo "$dir/tekton-validate"
  exit 0
fi
tmp="$root/$key.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp"
cd "$here"
echo "building tekton-validate (Tekton $tekton) into $dir" >&2
start=$(date +%s)
go build -mod=readonly -trimpath -ldflags "-s -w" -o "$tmp/tekton-validate" .
# A PipelineRun Tekton accepts, and one it refuses.
echo '{"apiVersion":"tekton.dev/v1","kind":"PipelineRun","metadata":{"name":"ok"},"spec":{"pipelineSpec":{"tasks":[{"name":"t","taskSpec":{"steps":[{"name":"s","image":"alpine","script":"true"}]}}]}}}' \
  | "$tmp/tekton-validate" >/dev/null
if echo '{"apiVersion":"tekton.dev/v1","kind":"PipelineRun","metadata":{"name":"bad"},"spec":{}}' | "$tmp/tekton-validate" >/dev/null; then
  echo "tekton-validate accepted a PipelineRun with neither pipelineRef nor pipelineSpec" >&2
  exit 1
fi
touch "$tmp/.complete"
rm -rf "$dir"
mv -T "$tmp" "$dir"
echo "built in $(( $(date +%s) - start )) s" >&2
echo "$dir/tekton-validate"
