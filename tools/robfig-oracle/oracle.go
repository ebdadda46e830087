// Command oracle evaluates cron expressions with robfig/cron v3, configured
// exactly like Prow:
//
//	cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom |
//	               cron.Month | cron.Dow | cron.Descriptor)
//
// Input: one expression per line on stdin (split on "\n" only; "\r" is kept).
// Output: JSON lines on stdout. First line (unless -meta=false):
//
//	{"meta": {"go": ..., "robfig": ..., "tzdata": ...}}
//
// then one line per input expression:
//
//	{"expr": E, "ok": true, "runs": [[START, [T1, ..., T50]], ...]}
//	{"expr": E, "ok": false, "error": MSG}
//
// Times are Unix seconds. Run with TZ=UTC: robfig's default location is
// time.Local. Build in GOPATH mode against Debian's golang-github-robfig-cron-dev:
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o oracle oracle.go
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/robfig/cron"
)

var allStarts = []int64{
	1704067200, // 2024-01-01T00:00:00Z
	1718454896, // 2024-06-15T12:34:56Z
	1764460799, // 2025-11-29T23:59:59Z
	1835395199, // 2028-02-28T23:59:59Z
}

const numRuns = 50

var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom |
	cron.Month | cron.Dow | cron.Descriptor)

// safeParse parses spec, converting a panic inside Parse into an error.
func safeParse(spec string) (sched cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			sched = nil
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return parser.Parse(spec)
}

type okLine struct {
	Expr string          `json:"expr"`
	Ok   bool            `json:"ok"`
	Runs [][]interface{} `json:"runs"`
}

type errLine struct {
	Expr  string `json:"expr"`
	Ok    bool   `json:"ok"`
	Error string `json:"error"`
}

type meta struct {
	Go     string `json:"go"`
	Robfig string `json:"robfig"`
	Tzdata string `json:"tzdata"`
}

func main() {
	nStarts := flag.Int("nstarts", len(allStarts), "use only the first N start instants")
	withMeta := flag.Bool("meta", true, "emit the meta line first")
	robfigVer := flag.String("robfig-version", os.Getenv("ROBFIG_VERSION"), "robfig package version for the meta line")
	tzdataVer := flag.String("tzdata-version", os.Getenv("TZDATA_VERSION"), "tzdata version for the meta line")
	flag.Parse()
	if *nStarts < 1 || *nStarts > len(allStarts) {
		fmt.Fprintln(os.Stderr, "bad -nstarts")
		os.Exit(2)
	}
	if tz := os.Getenv("TZ"); tz != "UTC" {
		fmt.Fprintf(os.Stderr, "oracle: refusing to run with TZ=%q; set TZ=UTC\n", tz)
		os.Exit(2)
	}
	starts := allStarts[:*nStarts]

	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriterSize(os.Stdout, 1<<20)
	defer out.Flush()
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)

	if *withMeta {
		m := struct {
			Meta meta `json:"meta"`
		}{meta{runtime.Version(), *robfigVer, *tzdataVer}}
		if err := enc.Encode(m); err != nil {
			panic(err)
		}
	}

	for {
		line, err := in.ReadString('\n')
		if err == io.EOF && line == "" {
			break
		}
		if err != nil && err != io.EOF {
			panic(err)
		}
		expr := strings.TrimSuffix(line, "\n")
		sched, perr := safeParse(expr)
		if perr != nil {
			if e := enc.Encode(errLine{expr, false, perr.Error()}); e != nil {
				panic(e)
			}
		} else {
			runs := make([][]interface{}, 0, len(starts))
			for _, s := range starts {
				ts := make([]int64, 0, numRuns)
				prev := time.Unix(s, 0) // Local (= UTC under TZ=UTC), like Prow's time.Now()
				for i := 0; i < numRuns; i++ {
					next := sched.Next(prev)
					if next.IsZero() {
						break
					}
					ts = append(ts, next.Unix())
					prev = next
				}
				runs = append(runs, []interface{}{s, ts})
			}
			if e := enc.Encode(okLine{expr, true, runs}); e != nil {
				panic(e)
			}
		}
		if err == io.EOF {
			break
		}
	}
}
