# shellcheck shell=bash
# Progress for the first build of the test infrastructure, sourced by
# tools/kube/build.sh and tools/tekton/build.sh.
#
# On a terminal (stderr is a tty) one line is redrawn as the build goes:
# the modules being downloaded, then `[N/M] building NAME`, where N counts
# the packages `go build -v` names as it compiles them and M is the number
# of packages `go list` finds stale (not in Go's build cache) before the
# build starts. Not on a terminal, nothing is drawn: only what go reports
# besides (its errors) is printed.
#
#   progress_plan PACKAGE...       count what building PACKAGE... compiles
#   go build -v ... 2>&1 | progress_filter NAME
#   progress_end MESSAGE           clear the line, print MESSAGE
#
# Nothing here goes to stdout, which is the build scripts' answer.

# The pipeline's last command runs in this shell, so the count N carries
# over from one `go build` to the next.
shopt -s lastpipe

progress_tty=""
[[ -t 2 ]] && progress_tty=1
progress_shown=""
progress_done=0
progress_total=0

# Redraws the progress line with $1 (cut short: a line that wrapped could
# not be redrawn in place).
progress_draw() {
  if [[ $progress_tty ]]; then
    printf '\r\033[K%s' "${1:0:76}" >&2
    progress_shown=1
  fi
}

progress_clear() {
  if [[ $progress_shown ]]; then
    printf '\r\033[K' >&2
    progress_shown=""
  fi
}

# A build that stops early leaves the terminal on a fresh line.
trap 'if [[ $progress_shown ]]; then echo >&2; fi' EXIT

# Reads go's output: an import path alone on a line is a package compiled
# (counted, for the build of $1), `go: downloading MODULE VERSION` a module
# fetched; any other line (an error) is printed as it is.
progress_filter() {
  local name=${1:-} line
  while IFS= read -r line; do
    case $line in
      "go: downloading "*)
        progress_draw "downloading ${line#go: downloading }"
        ;;
      "" | *[[:space:]]*)
        progress_clear
        printf '%s\n' "$line" >&2
        ;;
      *)
        progress_done=$((progress_done + 1))
        # A package go list took for cached can still be compiled.
        if ((progress_done > progress_total)); then
          progress_total=$progress_done
        fi
        progress_draw "[$progress_done/$progress_total] building $name"
        ;;
    esac
  done
  return 0
}

# Sets M: the packages of PACKAGE... and their dependencies that are stale
# (the modules they need are downloaded first, shown as they come).
progress_plan() {
  local list
  list="$(mktemp)"
  progress_draw "listing the packages to build"
  go list -mod=readonly -trimpath -deps -f '{{if .Stale}}{{.ImportPath}}{{end}}' "$@" \
    2>&1 >"$list" | progress_filter ""
  progress_total=$(grep -c . "$list" || true)
  rm -f "$list"
  progress_draw "[0/$progress_total] building"
}

progress_end() {
  progress_clear
  printf '%s\n' "$1" >&2
}
