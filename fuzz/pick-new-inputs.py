#!/usr/bin/env python3
"""Picks at most N campaign inputs worth committing, from a libFuzzer merge control file.

Usage (from fuzz/, after a campaign that wrote to work-corpus/config_loader):

    rm -rf /tmp/base && mkdir /tmp/base && cp corpus/config_loader/* /tmp/base/ && rm -f /tmp/base/fz-*
    target/x86_64-unknown-linux-gnu/release/config_loader -merge=1 \\
        -merge_control_file=/tmp/ctl /tmp/base work-corpus/config_loader
    rm -f corpus/config_loader/fz-*
    ./pick-new-inputs.py /tmp/ctl 100 | while read -r f; do
        cp "$f" "corpus/config_loader/fz-$(basename "$f")"; done

The first corpus of the merge (the committed seeds without earlier fz-* picks) is the
baseline. Greedy: each step takes the input with the most new features and edges per
byte (edges weigh 4), so small inputs win; stops at N or when nothing adds coverage.
Prints the chosen paths, one a line, and a summary on stderr.
"""
import os
import sys


def main() -> None:
    ctl_path = sys.argv[1]
    cap = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    lines = open(ctl_path).read().split("\n")
    n, n_base = int(lines[0]), int(lines[1])
    names = lines[2 : 2 + n]
    ft: dict[int, set[int]] = {}
    cov: dict[int, set[int]] = {}
    for line in lines[2 + n :]:
        parts = line.split()
        if len(parts) < 2:
            continue
        if parts[0] == "FT":
            ft[int(parts[1])] = set(map(int, parts[2:]))
        elif parts[0] == "COV":
            cov[int(parts[1])] = set(map(int, parts[2:]))
    have_ft: set[int] = set()
    have_cov: set[int] = set()
    for i in range(n_base):
        have_ft |= ft.get(i, set())
        have_cov |= cov.get(i, set())
    base_ft, base_cov = len(have_ft), len(have_cov)
    # Inputs without an FT line crashed or timed out during the merge: never pick them.
    cands = [i for i in range(n_base, n) if i in ft]
    size = {i: os.path.getsize(names[i]) for i in cands}
    chosen: list[int] = []
    while len(chosen) < cap:
        best, best_score = None, 0.0
        for i in cands:
            gain = len(ft[i] - have_ft) + 4 * len(cov.get(i, set()) - have_cov)
            score = gain / (size[i] + 300)
            if score > best_score:
                best, best_score = i, score
        if best is None:
            break
        chosen.append(best)
        have_ft |= ft[best]
        have_cov |= cov.get(best, set())
        cands.remove(best)
    all_cov = set().union(*cov.values()) if cov else set()
    print(
        f"baseline cov {base_cov} ft {base_ft}; with {len(chosen)} picks "
        f"({sum(size[i] for i in chosen)} bytes): cov {len(have_cov)} ft {len(have_ft)}; "
        f"everything merged: cov {len(all_cov)}",
        file=sys.stderr,
    )
    for i in chosen:
        print(names[i])


if __name__ == "__main__":
    main()
