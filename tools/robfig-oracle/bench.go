// Command bench measures robfig/cron v3 (Prow's parser configuration) parse and
// Next cost over the expressions read from stdin (one per line).
//
// For each expression that parses: parse time = mean over -parse-reps parses;
// Next time = mean over (-next-reps x starts x up to 50 successive Next calls),
// using the same four start instants as the oracle. Reports the median over
// expressions of these per-expression means:
//
//	robfig next_median_ns=X parse_median_ns=Y exprs=N calls=M
//
// Expressions that fail to parse are skipped (count on stderr).
// Build/run (GOPATH mode, Debian's golang-github-robfig-cron-dev):
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o bench bench.go
//	python3 gen.py --corpus-only | TZ=UTC ./bench
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/robfig/cron"
)

var benchStarts = []int64{1704067200, 1718454896, 1764460799, 1835395199}

var benchParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom |
	cron.Month | cron.Dow | cron.Descriptor)

func tryParse(spec string) (s cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("panic: %v", r)
		}
	}()
	return benchParser.Parse(spec)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sort.Float64s(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

var sink int64

func main() {
	parseReps := flag.Int("parse-reps", 2000, "parses per expression")
	nextReps := flag.Int("next-reps", 20, "repetitions of the (starts x 50 Next) loop per expression")
	runs := flag.Int("runs", 50, "successive Next calls per start")
	flag.Parse()

	var exprs []string
	in := bufio.NewReader(os.Stdin)
	for {
		line, err := in.ReadString('\n')
		if line != "" {
			exprs = append(exprs, strings.TrimSuffix(line, "\n"))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			panic(err)
		}
	}

	var nextNs, parseNs []float64
	var totalCalls int64
	skipped := 0
	for _, e := range exprs {
		sched, err := tryParse(e)
		if err != nil {
			skipped++
			continue
		}
		// parse timing
		t0 := time.Now()
		for i := 0; i < *parseReps; i++ {
			s, _ := benchParser.Parse(e)
			if s != nil {
				sink++
			}
		}
		parseNs = append(parseNs, float64(time.Since(t0).Nanoseconds())/float64(*parseReps))

		// warm-up
		for _, st := range benchStarts {
			sink += sched.Next(time.Unix(st, 0)).Unix()
		}
		var calls int64
		t1 := time.Now()
		for r := 0; r < *nextReps; r++ {
			for _, st := range benchStarts {
				prev := time.Unix(st, 0)
				for i := 0; i < *runs; i++ {
					next := sched.Next(prev)
					calls++
					if next.IsZero() {
						break
					}
					prev = next
				}
				sink += prev.Unix()
			}
		}
		el := time.Since(t1).Nanoseconds()
		nextNs = append(nextNs, float64(el)/float64(calls))
		totalCalls += calls
	}
	fmt.Fprintf(os.Stderr, "bench: %d expressions read, %d skipped (parse error), sink=%d\n", len(exprs), skipped, sink%7)
	fmt.Printf("robfig next_median_ns=%.1f parse_median_ns=%.1f exprs=%d calls=%d\n",
		median(nextNs), median(parseNs), len(nextNs), totalCalls)
}
