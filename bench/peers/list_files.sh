#!/bin/sh
# list_files.sh DIR|FILE...
# Prints every *.yaml / *.yml regular file below each DIR (recursive), one per
# line, sorted bytewise (LC_ALL=C) and de-duplicated. Symlinks to files are
# followed (a symlink whose target is a regular file is listed); directories are
# descended with find -L, so symlinked directories are followed too (find
# reports loops). A FILE argument is listed as is if it is a regular file.
# The extension match is case-sensitive, like Prow's filepath.Ext check.
# Note: .prowignore files are NOT honoured here.
set -eu
[ $# -ge 1 ] || { echo "usage: list_files.sh DIR..." >&2; exit 2; }
for d in "$@"; do
    if [ -d "$d" ]; then
        find -L "$d" -type f \( -name '*.yaml' -o -name '*.yml' \) -print
    elif [ -f "$d" ]; then
        printf '%s\n' "$d"
    else
        echo "list_files.sh: not a file or directory: $d" >&2
        exit 1
    fi
done | LC_ALL=C sort -u
