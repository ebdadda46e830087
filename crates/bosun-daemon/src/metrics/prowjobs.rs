//! Prow's `prowjobs` gauge: retained runs by state and labels, kept up to
//! date from the store's commits rather than counted at each scrape, and
//! written by hand.
//!
//! Counting at scrape time was a grouped scan of every retained run (two
//! thirds of a scrape of 70,000 series), and prometheus-client's family
//! hashed nine labels per series to fill it again and checked every label
//! value for characters to escape on each scrape. Here each series is its
//! label text, escaped once when a run first lands in it, in a sorted map of
//! counts: a scrape copies the lines out. The counts are seeded once from
//! [`bosun_store::Store::count_runs`] at start, then moved by every
//! committed creation (+1), transition (-1 on the labels the run left, +1 on
//! those it reached) and retention deletion (-1 per run), as the store
//! reports them to its observer; a series goes when its count reaches 0.

use bosun_base::sync::Lock;
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use bosun_store::{Before, Run, RunCount, RunState};

/// Changes queued before the committing thread applies them itself (a
/// scrape applies them otherwise).
const PENDING_MAX: usize = 4096;

/// The `# HELP` and `# TYPE` lines, as prometheus-client writes them.
const DESCRIPTOR: &str =
    "# HELP prowjobs Number of retained runs by state.\n# TYPE prowjobs gauge\n";

/// The `prowjobs` gauge.
pub struct ProwJobs {
    /// `prowjobs{job_namespace="NS",`: how every sample line starts.
    head: String,
    /// Retained runs by series, each keyed by the rest of its labels as
    /// written (`job_name="...",...,retest="false"}`), in that order.
    counts: Mutex<BTreeMap<String, i64>>,
    /// Changes not applied yet. The committing thread (the store's writer)
    /// queues them and a scrape applies them, so a scrape writing the
    /// counts out holds up no commit; the committing thread applies them
    /// when too many wait and no scrape is writing.
    pending: Mutex<Vec<(String, i64)>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.locked()
}

/// Adds `delta` to the series `key`, which goes at 0.
fn apply(counts: &mut BTreeMap<String, i64>, key: String, delta: i64) {
    match counts.get_mut(&key) {
        Some(n) => {
            *n += delta;
            if *n == 0 {
                counts.remove(&key);
            }
        }
        None if delta != 0 => {
            counts.insert(key, delta);
        }
        None => {}
    }
}

/// Appends a label value escaped as prometheus-client escapes it.
fn escaped(out: &mut String, value: &str) {
    if !value.bytes().any(|b| matches!(b, b'\\' | b'"' | b'\n')) {
        out.push_str(value);
        return;
    }
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// The labels of a series after its namespace, as they are written.
#[allow(clippy::too_many_arguments)]
fn key(
    job: &str,
    job_type: &str,
    state: &str,
    org: &str,
    repo: &str,
    base_ref: &str,
    cluster: &str,
    retest: bool,
) -> String {
    let values = job.len() + job_type.len() + state.len() + org.len();
    let mut k = String::with_capacity(values + repo.len() + base_ref.len() + cluster.len() + 90);
    for (name, value) in [
        ("job_name=\"", job),
        ("\",type=\"", job_type),
        ("\",state=\"", state),
        ("\",org=\"", org),
        ("\",repo=\"", repo),
        ("\",base_ref=\"", base_ref),
        ("\",cluster=\"", cluster),
    ] {
        k.push_str(name);
        escaped(&mut k, value);
    }
    k.push_str(if retest {
        "\",retest=\"true\"}"
    } else {
        "\",retest=\"false\"}"
    });
    k
}

/// The series of `run` in `state` on `cluster` (its `cluster`, else the
/// configured one), with the labels [`RunCount::of`] gives it.
fn run_key(run: &Run, state: RunState, cluster: Option<&str>) -> String {
    let refs = run.refs.as_deref().or(run.extra_refs.first());
    key(
        &run.job,
        run.job_type.as_str(),
        state.as_str(),
        refs.map_or("", |r| r.org.as_str()),
        refs.map_or("", |r| r.repo.as_str()),
        refs.and_then(|r| r.base_ref.as_deref()).unwrap_or(""),
        cluster.unwrap_or(&run.configured_cluster),
        run.labels.get("prow.k8s.io/retest").map(String::as_str) == Some("true"),
    )
}

/// The series of a count.
fn count_key(c: &RunCount) -> String {
    key(
        &c.job,
        &c.job_type,
        &c.state,
        &c.org,
        &c.repo,
        &c.base_ref,
        &c.cluster,
        c.retest,
    )
}

/// Appends `n` in decimal.
fn push_int(out: &mut String, n: i64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut v = n.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if n < 0 {
        out.push('-');
    }
    // Only ASCII digits were written.
    out.push_str(std::str::from_utf8(&buf[i..]).unwrap_or("0"));
}

impl ProwJobs {
    /// An empty gauge of runs in `namespace` (Prow's `prowjob_namespace`).
    pub fn new(namespace: &str) -> Self {
        let mut head = String::from("prowjobs{job_namespace=\"");
        escaped(&mut head, namespace);
        head.push_str("\",");
        ProwJobs {
            head,
            counts: Mutex::default(),
            pending: Mutex::default(),
        }
    }

    /// Replaces the counts with `counts` (from [`bosun_store::Store::count_runs`]),
    /// dropping the changes not applied yet.
    pub fn seed(&self, counts: &[RunCount]) {
        let mut map = lock(&self.counts);
        lock(&self.pending).clear();
        map.clear();
        for c in counts {
            apply(&mut map, count_key(c), c.count as i64);
        }
    }

    /// A committed creation (`before` none) or transition of `run`.
    pub fn change(&self, run: &Run, before: Option<Before<'_>>) {
        let now = run_key(run, run.state, run.cluster.as_deref());
        match before {
            None => self.add([(now, 1)]),
            Some(b) => {
                // A revival or a new description of a waiting run that
                // decides no cluster is no new series: nothing to build.
                if b.state == run.state && b.cluster == run.cluster.as_deref() {
                    return;
                }
                let was = run_key(run, b.state, b.cluster);
                if was != now {
                    self.add([(was, -1), (now, 1)]);
                }
            }
        }
    }

    /// Runs retention deleted, counted by labels.
    pub fn deleted(&self, runs: &[RunCount]) {
        self.add(runs.iter().map(|c| (count_key(c), -(c.count as i64))));
    }

    /// Queues changes, and applies the queue when it is long and no scrape
    /// is writing the counts.
    fn add(&self, changes: impl IntoIterator<Item = (String, i64)>) {
        let mut pending = lock(&self.pending);
        pending.extend(changes);
        if pending.len() >= PENDING_MAX {
            // Never waits for `counts` while holding `pending` (a scrape
            // takes them in the other order).
            if let Ok(mut counts) = self.counts.try_lock() {
                for (k, d) in pending.drain(..) {
                    apply(&mut counts, k, d);
                }
            }
        }
    }

    /// The counts with every queued change applied.
    fn current(&self) -> MutexGuard<'_, BTreeMap<String, i64>> {
        let mut counts = lock(&self.counts);
        let queued = std::mem::take(&mut *lock(&self.pending));
        for (k, d) in queued {
            apply(&mut counts, k, d);
        }
        counts
    }

    /// Writes the family in Prometheus' text format, as prometheus-client
    /// writes a gauge family of Prow's labels, its series sorted by labels.
    /// A count below 0 (a deletion reported before the commit it follows)
    /// is not written.
    pub fn encode(&self, out: &mut String) {
        let counts = self.current();
        out.push_str(DESCRIPTOR);
        for (labels, &n) in counts.iter() {
            if n > 0 {
                out.push_str(&self.head);
                out.push_str(labels);
                out.push(' ');
                push_int(out, n);
                out.push('\n');
            }
        }
    }

    /// The series and their counts: each series' labels (after its
    /// namespace) as written, sorted.
    pub fn series(&self) -> Vec<(String, i64)> {
        self.current()
            .iter()
            .map(|(k, n)| (k.clone(), *n))
            .collect()
    }

    /// The series of `counts`, as [`ProwJobs::series`] gives them.
    pub fn series_of(counts: &[RunCount]) -> Vec<(String, i64)> {
        let mut map = BTreeMap::new();
        for c in counts {
            apply(&mut map, count_key(c), c.count as i64);
        }
        map.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode_registry;

    #[allow(clippy::too_many_arguments)]
    fn count(
        job: &str,
        job_type: &str,
        state: &str,
        org: &str,
        repo: &str,
        base_ref: &str,
        cluster: &str,
        retest: bool,
        count: u64,
    ) -> RunCount {
        RunCount {
            job: job.into(),
            job_type: job_type.into(),
            state: state.into(),
            org: org.into(),
            repo: repo.into(),
            base_ref: base_ref.into(),
            cluster: cluster.into(),
            retest,
            count,
        }
    }

    /// The hand-written lines are those prometheus-client writes for a gauge
    /// family of Prow's nine labels (the family bosun registered before),
    /// escapes included; only their order differs (sorted here, the
    /// family's hash order there).
    #[test]
    fn prowjobs_are_written_as_prometheus_client_writes_the_family() {
        let counts = vec![
            count(
                "a", "periodic", "success", "o", "r", "", "default", false, 3,
            ),
            count(
                "a", "periodic", "failure", "o", "r", "", "build01", false, 1,
            ),
            count(
                "pull-x",
                "presubmit",
                "pending",
                "kubernetes",
                "test-infra",
                "main",
                "default",
                true,
                12_345_678_901,
            ),
            count(
                "odd\"job\\",
                "batch",
                "error",
                "o\nrg",
                "re\"po",
                "release\\4.16",
                "c\"l",
                false,
                2,
            ),
            count("", "postsubmit", "aborted", "", "", "", "", false, 1),
            count(
                "λ-unicode",
                "periodic",
                "triggered",
                "",
                "",
                "",
                "x",
                true,
                7,
            ),
        ];
        for namespace in ["default", "ci\"ns"] {
            let ours = ProwJobs::new(namespace);
            ours.seed(&counts);
            let mut text = String::new();
            ours.encode(&mut text);

            let registry = crate::metrics::reference_prowjobs(namespace, &counts);
            let mut theirs = String::new();
            encode_registry(&mut theirs, &registry).unwrap();

            let lines = |t: &str| {
                let (descriptor, samples) = t.split_at(DESCRIPTOR.len());
                let mut samples: Vec<String> = samples.lines().map(String::from).collect();
                samples.sort();
                (descriptor.to_string(), samples)
            };
            assert_eq!(lines(&text), lines(&theirs), "{text}\n{theirs}");
            // Sorted, one line per series.
            let samples = lines(&text).1;
            let written: Vec<&str> = text.lines().skip(2).collect();
            assert_eq!(
                written,
                samples.iter().map(String::as_str).collect::<Vec<_>>()
            );
            assert_eq!(samples.len(), counts.len());
        }
    }

    /// Counts move by changes, a series goes at 0, and a count below 0 is
    /// kept (the change it waits for comes) but not written.
    #[test]
    fn prowjobs_series_go_at_zero_and_wait_below_it() {
        let p = ProwJobs::new("default");
        let c = count(
            "a", "periodic", "success", "o", "r", "", "default", false, 2,
        );
        p.seed(std::slice::from_ref(&c));
        p.deleted(&[RunCount {
            count: 3,
            ..c.clone()
        }]);
        assert_eq!(p.series(), vec![(count_key(&c), -1)]);
        let mut text = String::new();
        p.encode(&mut text);
        assert_eq!(text, DESCRIPTOR);
        p.seed(&[]);
        assert!(p.series().is_empty());
        // More changes than the queue holds are applied without a scrape.
        for _ in 0..PENDING_MAX + 1 {
            p.deleted(&[RunCount {
                count: 0,
                ..c.clone()
            }]);
        }
        assert!(lock(&p.pending).len() < PENDING_MAX);
        for n in [-7, 0, 5, 10, 1234567890] {
            let mut s = String::new();
            push_int(&mut s, n);
            assert_eq!(s, n.to_string());
        }
    }
}
