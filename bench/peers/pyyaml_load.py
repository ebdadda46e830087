#!/usr/bin/env python3
"""PyYAML C-loader peer for bosun's config loader bench.

Usage: pyyaml_load.py [--repeat K] FILE...
       pyyaml_load.py [--repeat K] -        (newline-separated paths on stdin)

Each pass reads every file fully into memory and builds Python objects for every
document with yaml.load_all(..., Loader=yaml.CSafeLoader) (libyaml-backed).
Prints: files=N documents=M ns=T   (T = best wall-clock ns of K passes,
time.monotonic_ns, covering read + load of all files).
Exits 1 with a message naming the file on a read or parse error.
"""
import sys
import time

try:
    import yaml
except ImportError:
    sys.exit("pyyaml_load: PyYAML is not installed (pip install pyyaml)")

Loader = getattr(yaml, "CSafeLoader", None)
if Loader is None:
    sys.exit(
        "pyyaml_load: yaml.CSafeLoader is unavailable: PyYAML %s at %s was built "
        "without libyaml (yaml.__with_libyaml__=%s); install the binary wheel "
        "(pip install --only-binary=:all: pyyaml) or Debian's python3-yaml for "
        "/usr/bin/python3" % (yaml.__version__, yaml.__file__,
                              getattr(yaml, "__with_libyaml__", None)))


def main(argv):
    repeat = 1
    args = argv[1:]
    while args and args[0].startswith("--"):
        a = args.pop(0)
        if a == "--":
            break
        if a == "--repeat" and args:
            v = args.pop(0)
        elif a.startswith("--repeat="):
            v = a[len("--repeat="):]
        else:
            sys.exit("pyyaml_load: unknown option %s" % a)
        try:
            repeat = int(v)
        except ValueError:
            repeat = 0
        if repeat < 1:
            sys.exit("pyyaml_load: bad --repeat value: %s" % v)

    if args == ["-"]:
        paths = [l.rstrip("\r\n") for l in sys.stdin]
        paths = [p for p in paths if p]
    else:
        paths = args
    if not paths:
        sys.exit("usage: pyyaml_load.py [--repeat K] FILE... | -")

    best = None
    docs = 0
    for _ in range(repeat):
        n = 0
        t0 = time.monotonic_ns()
        for p in paths:
            try:
                with open(p, "rb") as f:
                    data = f.read()
                for _doc in yaml.load_all(data, Loader=Loader):
                    n += 1
            except (OSError, yaml.YAMLError) as e:
                sys.exit("pyyaml_load: error in %s: %s" % (p, e))
        dt = time.monotonic_ns() - t0
        if best is None or dt < best:
            best = dt
        docs = n
    print("files=%d documents=%d ns=%d" % (len(paths), docs, best))


if __name__ == "__main__":
    main(sys.argv)
