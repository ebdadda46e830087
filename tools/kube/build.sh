#!/usr/bin/env bash
# Builds the real Kubernetes control plane bosun's Kubernetes tests start:
# kube-apiserver (k8s.io/kubernetes v1.37.2) and etcd (go.etcd.io/etcd/server/v3
# v3.7.0), from the Go module pinned in this directory (go.mod, go.sum), into a
# cache directory outside the clone keyed by the versions, the Go toolchain and
# the hash of this module and script. A complete cache entry is reused as is.
#
#   tools/kube/build.sh          build if needed; print the directory
#   tools/kube/build.sh --check  print the directory if it is built, else fail
#
# Only the directory goes to stdout. A build says so on stderr in one line at
# its start and one at its end; on a terminal a progress line between them
# counts the packages compiled (tools/lib/go-progress.sh). tools/test runs
# this script and exports the directory as $BOSUN_KUBE_BIN_DIR, where the
# tests look for it (else they run this script with --check).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export GOTOOLCHAIN=local CGO_ENABLED=0
k8s=v1.37.2
etcd=v3.7.0
gover="$(go env GOVERSION)"
platform="$(go env GOOS)-$(go env GOARCH)"
hash="$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh" | sha256sum | cut -c1-12)"
root="${XDG_CACHE_HOME:-$HOME/.cache}/bosun/kube"
key="k8s-${k8s}_etcd-${etcd}_${gover}_${platform}_${hash}"
dir="$root/$key"

if [[ -f "$dir/.complete" ]]; then
  echo "$dir"
  exit 0
fi
if [[ "${1:-}" == "--check" ]]; then
  echo "kube-apiserver and etcd are not built for this tree: run tools/test --setup-only (or tools/kube/build.sh) to build them into $dir" >&2
  exit 1
fi

mkdir -p "$root"
exec 9>"$root/$key.lock"
if ! flock -n 9; then
  echo "waiting for another build of kube-apiserver and etcd into $dir" >&2
  flock 9
fi
if [[ -f "$dir/.complete" ]]; then
  echo "$dir"
  exit 0
fi
tmp="$root/$key.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp"
cd "$here"
echo "building kube-apiserver $k8s and etcd $etcd into $dir (first time: about 6 minutes on 2 cores)" >&2
start=$(date +%s)
# shellcheck source=tools/lib/go-progress.sh
source "$here/../lib/go-progress.sh"
progress_plan k8s.io/kubernetes/cmd/kube-apiserver go.etcd.io/etcd/server/v3
major="${k8s#v}"; major="${major%%.*}"
minor="${k8s#v*.}"; minor="${minor%%.*}"
go build -v -mod=readonly -trimpath -o "$tmp/kube-apiserver" \
  -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$k8s -X k8s.io/component-base/version.gitMajor=$major -X k8s.io/component-base/version.gitMinor=$minor" \
  k8s.io/kubernetes/cmd/kube-apiserver 2>&1 | progress_filter kube-apiserver
go build -v -mod=readonly -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3 \
  2>&1 | progress_filter etcd
apiserver_version="$("$tmp/kube-apiserver" --version)"
etcd_version="$("$tmp/etcd" --version)"
touch "$tmp/.complete"
rm -rf "$dir"
mv -T "$tmp" "$dir"
progress_end "built in $(( $(date +%s) - start )) s: $apiserver_version, ${etcd_version%%$'\n'*}"
echo "$dir"
