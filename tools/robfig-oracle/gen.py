#!/usr/bin/env python3
"""Generate cron expressions for the robfig/cron v3 differential oracle.

Writes one expression per line to stdout (the line terminator is "\\n" only;
generated expressions never contain "\\n" or "\\r").

  (a) every distinct `cron:` value in the Prow job corpus, in sorted order;
  (b) unless --corpus-only, >= --count generated expressions (about 60%
      intended-valid, 40% intended-invalid; robfig decides the truth), from a
      fixed seed so the output is deterministic.

Standard library only.
"""
import argparse
import glob
import os
import random
import re
import sys

DEFAULT_CORPUS = "/work/shared/corpus/test-infra/config/jobs"

CRON_LINE = re.compile(
    r"""^\s*(?:-\s+)?cron:\s*(?:"((?:[^"\\]|\\.)*)"|'((?:[^']|'')*)'|([^#\s][^#]*?))\s*(?:\#.*)?$"""
)


def corpus_crons(root):
    vals = set()
    for path in sorted(glob.glob(os.path.join(root, "**", "*.yaml"), recursive=True)):
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if "cron:" not in line:
                    continue
                m = CRON_LINE.match(line.rstrip("\n"))
                if not m:
                    continue
                dq, sq, bare = m.groups()
                if dq is not None:
                    v = dq.replace('\\"', '"').replace("\\\\", "\\")
                elif sq is not None:
                    v = sq.replace("''", "'")
                else:
                    v = bare
                vals.add(v)
    return sorted(vals)


# field name -> (lo, hi, names)
MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
DOWS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
FIELDS = {
    "sec": (0, 59, None),
    "min": (0, 59, None),
    "hour": (0, 23, None),
    "dom": (1, 31, None),
    "month": (1, 12, MONTHS),
    "dow": (0, 6, DOWS),
}
ORDER6 = ["sec", "min", "hour", "dom", "month", "dow"]
ORDER5 = ORDER6[1:]

DESCRIPTORS = ["@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"]
GOOD_DURATIONS = [
    "1h30m", "90s", "500ms", "1.5h", "0s", "-1m", "1s", "1m", "5m", "15m", "1h", "2h", "6h",
    "12h", "24h", "48h", "168h", "1h1m1s", "1m30s", "2.5s", "1500ms", "999ms", "1001ms",
    "100us", "100µs", "3ns", "1h0m0s", "0.5m", "72h", "8760h", "+1h", "-1s", "10m0.5s",
    "0", "4h20m", ".5h", "1.h", "3m7s", "59s", "61s", "3599s", "3601s",
]
BAD_DURATIONS = [
    "1d", "1w", "", "h", "1", "1hh", "1 h", "m5", "1y", "abc", "1.5.h", "--1m", "1H", "1M",
    "ms", "1e3s", "5 m", "0x10s", "1h 30m",
]
ZONES = ["America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kathmandu",
         "Pacific/Chatham", "UTC"]
ODD_ZONES = ["Local", "", "utc", "Etc/GMT+5", "EST", "GMT", "Europe/London", "Asia/Tokyo"]
BAD_ZONES = ["Mars/Olympus", "America/New York", "Nowhere", "../etc/passwd", "UTC+1",
             "America/new_york", "Europe/", "/UTC", "+05:00", "X"]

FIXED = [
    "", " ", "\t", "* * * * *", "* * * * * *", "0 0 30 2 *", "0 0 31 4 *", "0 0 31 6 *",
    "0 0 31 9 *", "0 0 31 11 *", "0 0 31 2 *", "0 0 29 2 *", "0 0 0 29 2 *", "0 0 29 2 1",
    "0 0 30 2 1", "0 0 13 * 5", "0 0 1 * 1", "0 0 1-7 * 1", "0 0 * * 1", "0 0 1 * *",
    "0 0 31 * *", "0 0 31 * 0", "0 0 L * *", "0 0 ? * ?", "? ? ? ? ?", "0 0 1,15 * mon",
    "0 0 */2 * */2", "0 0 1-31/2 * MON-FRI", "0 0 29 2 sun", "0 0 30 2 sun",
    "TZ=UTC", "CRON_TZ=UTC", "TZ=", "TZ= * * * * *", "TZ=UTC * * * * *",
    "CRON_TZ=UTC * * * * *", "TZ=UTC\t* * * * *", "TZ=UTC  * * * * *", "TZ=UTC @daily",
    "TZ=UTC@daily", "TZ=Local * * * * *", "CRON_TZ=Local @hourly", "tz=UTC * * * * *",
    "TZ=UTC TZ=UTC * * * * *", " TZ=UTC * * * * *", "TZ=UTC", "TZ=America/New_York",
    "@every", "@every ", "@every  1h", "@every 1h ", "@daily ", " @daily", "@DAILY", "@Daily",
    "@", "@reboot", "@every1h", "@yearly *", "@ every 1h", "@minutely", "@weekday",
    "* * * *", "* * * * * * *", "0 0 0 * * * *", "*", ",", ", , , , ,", "* * * * ,",
    ", * * * *", "0 0 0 0 0", "0 0 0 0 0 0", "60 * * * *", "* 24 * * *", "* * 32 * *",
    "* * * 13 *", "* * * * 7", "* * * * 8", "59 23 31 12 6", "0 0 1 1 0",
    "*/0 * * * *", "*/60 * * * *", "*/59 * * * *", "*/61 * * * *",
    "*/1 * * * *", "0/1 * * * *", "1/0 * * * *", "*/99999999999999999999 * * * *",
    "*/4294967297 * * * *", "*/18446744073709551617 * * * *", "4294967296 * * * *",
    "-0 * * * *", "+0 * * * *", "00 00 01 01 00", "007 * * * *", "0x1 * * * *",
    "1e1 * * * *", "1.0 * * * *", " 1 * * * *", "*-5 * * * *", "5-* * * * *", "*-* * * * *",
    "1--2 * * * *", "1-2-3 * * * *", "1//2 * * * *", "1/2/3 * * * *", "/5 * * * *", "5/ * * * *",
    "-5 * * * *", "5- * * * *", "- * * * *", "/ * * * *", "*/ * * * *", "1-/2 * * * *",
    "0 0 * jan-dec sun-sat", "0 0 * JAN-DEC SUN-SAT", "0 0 * Jan mOn", "0 0 * january *",
    "0 0 * * monday", "0 0 * * sun-mon", "0 0 * * sat-sun", "0 0 * dec-jan *", "0 0 * * 6-0",
    "0 0 * mon *", "0 0 * * jan", "jan * * * *", "0 0 mon * *", "0 0 * * MON,WED,fri",
    "0 0 * * mon-fri/2", "0 0 * jan/3 *", "0 0 * feb-nov/4 *", "0 0 * * 7-7", "0 0 * * 0-7",
    "0 0 * * ?/2", "? * * * *", "?/5 * * * *", "?-5 * * * *", "1-? * * * *",
    "* * * * * ?", "0 30 9 ? * MON-FRI", "0 0 12 * * ?",
]


def num(rng, lo, hi, fmt=True):
    n = rng.randint(lo, hi)
    if fmt:
        r = rng.random()
        if r < 0.05:
            return "0" + str(n)
        if r < 0.07:
            return "+" + str(n)
    return str(n)


def name_or_num(rng, field, lo, hi):
    _, _, names = FIELDS[field]
    n = rng.randint(lo, hi)
    if names and rng.random() < 0.4:
        nm = names[n - FIELDS[field][0]]
        return mixcase(rng, nm)
    return str(n)


def mixcase(rng, s):
    r = rng.random()
    if r < 0.35:
        return s.upper()
    if r < 0.6:
        return s
    if r < 0.8:
        return s.capitalize()
    return "".join(c.upper() if rng.random() < 0.5 else c for c in s)


def valid_item(rng, field):
    lo, hi, names = FIELDS[field]
    k = rng.random()
    if k < 0.12:
        return "*"
    if k < 0.15:
        return "?"
    if k < 0.40:
        return name_or_num(rng, field, lo, hi)
    if k < 0.60:
        a = rng.randint(lo, hi)
        b = rng.randint(a, hi)
        return name_or_num(rng, field, a, a) + "-" + name_or_num(rng, field, b, b)
    if k < 0.75:
        return rng.choice(["*", "?"]) + "/" + str(rng.randint(1, max(1, hi - lo + 2)))
    if k < 0.88:
        a = rng.randint(lo, hi)
        b = rng.randint(a, hi)
        return "%s-%s/%d" % (name_or_num(rng, field, a, a), name_or_num(rng, field, b, b),
                             rng.randint(1, hi - lo + 3))
    a = rng.randint(lo, hi)
    return "%s/%d" % (name_or_num(rng, field, a, a), rng.randint(1, hi - lo + 3))


def valid_field(rng, field):
    # Sparse fields are more interesting in time-of-day positions; bias "*" in dom/month/dow.
    if field in ("dom", "month", "dow") and rng.random() < 0.45:
        return "*"
    if field == "sec" and rng.random() < 0.3:
        return "0"
    n = 1 if rng.random() < 0.65 else rng.randint(2, 4)
    items = [valid_item(rng, field) for _ in range(n)]
    s = ",".join(items)
    if rng.random() < 0.03:
        s = rng.choice([s + ",", "," + s, s.replace(",", ",,", 1)])
    return s


def join_fields(rng, fields):
    r = rng.random()
    if r < 0.85:
        return " ".join(fields)
    out = fields[0]
    for f in fields[1:]:
        out += rng.choice([" ", "  ", "\t", " \t", "   "]) + f
    if rng.random() < 0.5:
        out = rng.choice([" ", "\t", "  "]) + out
    if rng.random() < 0.5:
        out = out + rng.choice([" ", "\t", "  "])
    return out


def valid_spec(rng):
    order = ORDER6 if rng.random() < 0.35 else ORDER5
    return [valid_field(rng, f) for f in order], order


def tz_prefix(rng, expr, zones):
    return "%s=%s %s" % (rng.choice(["TZ", "CRON_TZ"]), rng.choice(zones), expr)


def gen_valid(rng):
    k = rng.random()
    if k < 0.05:
        e = rng.choice(DESCRIPTORS)
    elif k < 0.10:
        e = "@every " + rng.choice(GOOD_DURATIONS)
    elif k < 0.13:
        # random well-formed duration
        parts = []
        for unit, mx in (("h", 200), ("m", 59), ("s", 59), ("ms", 999)):
            if rng.random() < 0.5:
                parts.append("%d%s" % (rng.randint(0, mx), unit))
        e = "@every " + ("".join(parts) or "1s")
    elif k < 0.17:
        # never-firing / rare dates, dom+dow OR semantics
        dom = rng.choice(["29", "30", "31", "13", "1", "1-7", "15,31", "30,31", "28-31"])
        mon = rng.choice(["2", "feb", "4", "6", "9", "11", "*", "2,4", "FEB-apr"])
        dow = rng.choice(["*", "?", "0", "5", "fri", "MON-FRI", "sat,sun", "1-5/2"])
        e = "0 %d %s %s %s" % (rng.randint(0, 23), dom, mon, dow)
    else:
        fields, _ = valid_spec(rng)
        e = join_fields(rng, fields)
    if rng.random() < 0.18:
        e = tz_prefix(rng, e.strip() if rng.random() < 0.8 else e,
                      ZONES if rng.random() < 0.85 else ODD_ZONES)
    return e


def invalid_item(rng, field):
    lo, hi, names = FIELDS[field]
    other = {"month": DOWS, "dow": MONTHS}.get(field, MONTHS + DOWS)
    choices = [
        lambda: str(hi + rng.randint(1, 40)),                      # out of range high
        lambda: str(lo - 1) if lo > 0 else "-1",                   # below range
        lambda: "%d-%d" % (rng.randint(lo + 1, hi), lo),           # reversed
        lambda: "%d-%d" % (rng.randint(lo, hi), hi + rng.randint(1, 10)),
        lambda: "*/0",
        lambda: "%d-%d/0" % (lo, hi),
        lambda: "%d/0" % rng.randint(lo, hi),
        lambda: "*/%d" % rng.choice([10 ** 6, 2 ** 32, 2 ** 63, 2 ** 64 + 1, 10 ** 25]),
        lambda: "-%d" % rng.randint(1, hi),
        lambda: "%d--%d" % (lo, hi),
        lambda: "%d-%d-%d" % (lo, lo, hi),
        lambda: "*/%d/%d" % (rng.randint(1, 5), rng.randint(1, 5)),
        lambda: "%d//%d" % (lo, rng.randint(1, 5)),
        lambda: "*-%d" % rng.randint(lo, hi),
        lambda: "%d-*" % rng.randint(lo, hi),
        lambda: mixcase(rng, rng.choice(other)),                    # name in wrong field
        lambda: mixcase(rng, rng.choice(other)) + "-" + mixcase(rng, rng.choice(other)),
        lambda: rng.choice(["L", "W", "#", "5#2", "LW", "15W", "x", "a-b", "1.5", "0x5",
                            "1e2", "\u00bd", "*,?x", "/", "-", "*/", "/5", "5/", "1-",
                            "?/x", "**", "*/-1", "*/+2"]),
        lambda: rng.choice(["january", "monday", "sunday", "ja", "mo", "tues", "thurs"]),
    ]
    return rng.choice(choices)()


def gen_invalid(rng):
    k = rng.random()
    if k < 0.04:
        return rng.choice(["@", "@reboot", "@minutely", "@weekday", "@quarterly", "@every",
                           "@yearly 0", "@Hourly", "@DAILY", "@every_1h", "@@daily",
                           "@daily *", "@every 1h *", "@ daily", "@hour"]) \
            + rng.choice(["", "", " ", "x"])
    if k < 0.09:
        return "@every " + rng.choice(BAD_DURATIONS)
    if k < 0.15:
        fields, _ = valid_spec(rng)
        z = rng.choice(BAD_ZONES + ODD_ZONES[:1])
        r = rng.random()
        if r < 0.25:  # TZ without any space -> robfig panics (slice bounds)
            return rng.choice(["TZ=", "CRON_TZ="]) + rng.choice(ZONES + BAD_ZONES)
        if r < 0.4:   # tab separator after zone
            return "%s=%s\t%s" % (rng.choice(["TZ", "CRON_TZ"]), rng.choice(ZONES), " ".join(fields))
        return tz_prefix(rng, " ".join(fields), BAD_ZONES)
    if k < 0.23:
        # wrong field count
        n = rng.choice([0, 1, 2, 3, 4, 4, 4, 7, 7, 7, 8])
        fields = [valid_field(rng, rng.choice(ORDER6[1:4])) for _ in range(n)]
        e = join_fields(rng, fields) if fields else rng.choice(["", " ", "\t", "  \t "])
        if rng.random() < 0.15:
            e = tz_prefix(rng, e, ZONES)
        return e
    # one (sometimes two) bad field in an otherwise valid spec
    fields, order = valid_spec(rng)
    for _ in range(1 if rng.random() < 0.85 else 2):
        i = rng.randrange(len(fields))
        bad = invalid_item(rng, order[i])
        if rng.random() < 0.3:
            bad = ",".join([valid_item(rng, order[i]), bad])
        fields[i] = bad
    e = join_fields(rng, fields)
    if rng.random() < 0.1:
        e = tz_prefix(rng, e, ZONES)
    return e


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--corpus", default=DEFAULT_CORPUS)
    ap.add_argument("--corpus-only", action="store_true", help="emit only the corpus crons")
    ap.add_argument("--generated-only", action="store_true", help="emit only generated exprs")
    ap.add_argument("--count", type=int, default=22000, help="min number of generated exprs")
    ap.add_argument("--seed", type=int, default=20240615)
    args = ap.parse_args()

    seen = set()
    out = []

    def add(e):
        assert "\n" not in e and "\r" not in e, repr(e)
        if e not in seen:
            seen.add(e)
            out.append(e)

    # Corpus crons come first; with --generated-only they are still reserved in
    # `seen`, so corpus-only + generated-only output == full output (no duplicates).
    for e in corpus_crons(args.corpus):
        if args.generated_only:
            seen.add(e)
        else:
            add(e)
    if not args.corpus_only:
        base = len(out)
        for e in FIXED:
            add(e)
        for d in DESCRIPTORS:
            for pre in ("", "TZ=UTC ", "CRON_TZ=Asia/Kathmandu ", "TZ=Pacific/Chatham "):
                add(pre + d)
        for dur in GOOD_DURATIONS + BAD_DURATIONS:
            add("@every " + dur)
        for z in ZONES + ODD_ZONES + BAD_ZONES:
            add("TZ=%s 0 30 2 * * *" % z)
            add("CRON_TZ=%s 0 0 * * *" % z)
        rng = random.Random(args.seed)
        while len(out) - base < args.count:
            add(gen_valid(rng) if rng.random() < 0.6 else gen_invalid(rng))
    w = sys.stdout
    for e in out:
        w.write(e + "\n")


if __name__ == "__main__":
    main()
