// Peer of bosun's /metrics benchmark (crates/bosun-daemon/examples/metrics_bench.rs):
// Prow's `prowjobs` gauge as Prow declares it (a GaugeVec in the default
// registry, beside client_golang's Go and process collectors), filled with
// JOBS jobs x 7 states under the same nine labels and the same label values
// as bosun's benchmark, and the text exposition rendered as promhttp renders
// it for a text/plain scrape: Gather from prometheus.DefaultGatherer, then
// expfmt's text encoder, one family after another, into a buffer (no gzip).
//
//	metrics-go [JOBS] [ITERS]   (defaults 10000 and 20)
//
// One render to warm up, then ITERS renders, each timed alone; prints the
// median render's ns per series (sample lines of the exposition), its bytes,
// and the fastest render.
package main

import (
	"bytes"
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

var states = []string{"scheduling", "triggered", "pending", "success", "failure", "aborted", "error"}

// job returns job j's labels but its state; the same formula as
// metrics_bench.rs's `Job::new`.
func job(j int) (name, typ, org, repo, baseRef, cluster string, retest bool) {
	org = fmt.Sprintf("org-%d", j%50)
	repo = fmt.Sprintf("repo-%d", j%500)
	cluster = fmt.Sprintf("build%02d", j%3+1)
	baseRef = "main"
	if j%10 == 0 {
		baseRef = "release-4.16"
	}
	switch j % 3 {
	case 0:
		typ = "presubmit"
		name = fmt.Sprintf("pull-ci-%s-%s-%s-e2e-aws-%05d", org, repo, baseRef, j)
		retest = j%7 == 0
	case 1:
		typ = "postsubmit"
		name = fmt.Sprintf("branch-ci-%s-%s-%s-images-%05d", org, repo, baseRef, j)
	default:
		typ = "periodic"
		name = fmt.Sprintf("periodic-ci-%s-%s-%s-nightly-%05d", org, repo, baseRef, j)
	}
	return
}

func main() {
	jobs, iters := 10000, 20
	if len(os.Args) > 1 {
		jobs, _ = strconv.Atoi(os.Args[1])
	}
	if len(os.Args) > 2 {
		iters, _ = strconv.Atoi(os.Args[2])
	}
	prowJobs := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "prowjobs",
		Help: "Number of prowjobs in the system",
	}, []string{"job_namespace", "job_name", "type", "state", "org", "repo", "base_ref", "cluster", "retest"})
	prometheus.MustRegister(prowJobs)
	for j := 0; j < jobs; j++ {
		name, typ, org, repo, baseRef, cluster, retest := job(j)
		for _, s := range states {
			prowJobs.WithLabelValues("default", name, typ, s, org, repo, baseRef, cluster, strconv.FormatBool(retest)).Set(1)
		}
	}

	var buf bytes.Buffer
	// promhttp.HandlerFor's path for a text/plain scrape, gzip off.
	render := func() {
		buf.Reset()
		mfs, err := prometheus.DefaultGatherer.Gather()
		if err != nil {
			panic(err)
		}
		enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				panic(err)
			}
		}
	}
	render()
	series := 0
	for _, line := range bytes.Split(buf.Bytes(), []byte("\n")) {
		if len(line) > 0 && line[0] != '#' {
			series++
		}
	}
	times := make([]int64, iters)
	for i := range times {
		t0 := time.Now()
		render()
		times[i] = time.Since(t0).Nanoseconds()
	}
	sort.Slice(times, func(a, b int) bool { return times[a] < times[b] })
	median := times[len(times)/2]
	fmt.Printf("client_golang: series=%d bytes=%d iters=%d median_ms=%.2f min_ms=%.2f ns_per_series=%.1f\n",
		series, buf.Len(), iters, float64(median)/1e6, float64(times[0])/1e6, float64(median)/float64(series))
}
