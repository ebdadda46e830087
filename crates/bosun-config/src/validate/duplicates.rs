//! Checks across jobs: duplicate periodics, and among one repository's pre- or
//! postsubmits (central and in-repo together) duplicate names and shared GitHub
//! contexts, counted only where the jobs' branches intersect (Prow's `Brancher`).

use std::collections::HashMap;

use regex::Regex;

use crate::diag::Diagnostic;
use crate::model::{Job, Periodic, Postsubmit, Presubmit};
use crate::types::{JobSource, JobType};

use super::ctx::{err_at, warn_at};

/// Two periodics with the same identity.
pub(super) fn periodics(periodics: &[Periodic], d: &mut Vec<Diagnostic>) {
    let mut seen: HashMap<String, &Periodic> = HashMap::with_capacity(periodics.len());
    for p in periodics {
        let id = p.identity();
        if let Some(first) = seen.get(&id) {
            d.push(
                err_at(p, "name", format!("duplicated periodic job: {id}")).hint(format!(
                    "first defined at {}:{}",
                    first.origin.file, first.origin.mark
                )),
            );
        } else {
            seen.insert(id, p);
        }
    }
}

/// Prow's `Brancher`: which branches a job runs against. Regexes are unanchored,
/// as in Prow.
struct Brancher<'j> {
    branches: &'j [String],
    skip: &'j [String],
}

impl Brancher<'_> {
    fn all(&self) -> bool {
        self.branches.is_empty() && self.skip.is_empty()
    }

    fn should_run(&self, branch: &str, cache: &mut HashMap<String, Option<Regex>>) -> bool {
        if self.all() {
            return true;
        }
        let mut matches = |list: &[String]| {
            let joined = list.join("|");
            cache
                .entry(joined.clone())
                .or_insert_with(|| Regex::new(&joined).ok())
                .as_ref()
                .is_some_and(|re| re.is_match(branch))
        };
        if !self.skip.is_empty() && matches(self.skip) {
            return false;
        }
        self.branches.is_empty() || matches(self.branches)
    }

    /// Prow's `Brancher.Intersects`: patterns on both sides compare as strings.
    fn intersects(&self, other: &Brancher<'_>, cache: &mut HashMap<String, Option<Regex>>) -> bool {
        if self.all() || other.all() {
            return true;
        }
        if !self.branches.is_empty() {
            if !other.branches.is_empty() {
                return self.branches.iter().any(|b| other.branches.contains(b));
            }
            return self.branches.iter().any(|b| other.should_run(b, cache));
        }
        if other.branches.is_empty() {
            return true;
        }
        other.intersects(self, cache)
    }
}

/// Duplicate names and shared contexts among one repository's pre- or postsubmits,
/// counted only where branches intersect (central and in-repo together).
pub(super) fn repo_jobs<'j, K: 'j>(
    jobs: impl IntoIterator<Item = &'j Job<K>>,
    ty: JobType,
    parts: impl Fn(&Job<K>) -> (&Vec<String>, &Vec<String>, &String),
    d: &mut Vec<Diagnostic>,
) {
    let mut cache = HashMap::new();
    fn brancher<'j, K>(
        parts: &impl Fn(&Job<K>) -> (&Vec<String>, &Vec<String>, &String),
        j: &'j Job<K>,
    ) -> Brancher<'j> {
        let (branches, skip, _) = parts(j);
        Brancher { branches, skip }
    }
    let brancher = |j| brancher(&parts, j);
    let mut by_name: HashMap<&str, Vec<&Job<K>>> = HashMap::new();
    let mut by_context: HashMap<&str, Vec<&Job<K>>> = HashMap::new();
    let jobs = jobs.into_iter();
    for j in jobs {
        let earlier = by_name.entry(j.base.name.as_str()).or_default();
        if let Some(first) = earlier
            .iter()
            .find(|e| brancher(e).intersects(&brancher(j), &mut cache))
        {
            d.push(
                err_at(
                    j,
                    "name",
                    format!(
                        "duplicated {} jobs (consider both inrepo and central config): [{}]",
                        ty.as_str(),
                        j.base.name
                    ),
                )
                .hint(format!(
                    "also defined at {}:{} for intersecting branches",
                    first.origin.file, first.origin.mark
                )),
            );
        }
        earlier.push(j);
        by_context.entry(parts(j).2.as_str()).or_default().push(j);
    }
    for group in by_context.values().filter(|g| g.len() > 1) {
        for j in group {
            for other in group {
                if other.base.name == j.base.name {
                    continue;
                }
                if brancher(other).intersects(&brancher(j), &mut cache) {
                    d.push(err_at(
                        j,
                        "context",
                        format!(
                            "jobs {} and {} report to the same GitHub context {:?}",
                            other.base.name,
                            j.base.name,
                            parts(other).2
                        ),
                    ));
                }
            }
        }
    }
}

/// Jobs sharing a name are one unit for the dispatcher, and an external
/// scheduler answers by name (checked when either is configured): a warning on
/// every job whose cluster differs from that of the first job of its name
/// (periodics, then presubmits, then postsubmits, each in order), for the jobs
/// whose source `report` accepts.
pub(super) fn clusters_by_name<'j>(
    periodics: impl IntoIterator<Item = &'j Periodic>,
    presubmits: impl IntoIterator<Item = &'j Presubmit>,
    postsubmits: impl IntoIterator<Item = &'j Postsubmit>,
    report: &dyn Fn(&JobSource) -> bool,
    d: &mut Vec<Diagnostic>,
) {
    let mut first: HashMap<&str, (&str, String)> = HashMap::new();
    fn visit<'j, K>(
        j: &'j Job<K>,
        first: &mut HashMap<&'j str, (&'j str, String)>,
        report: &dyn Fn(&JobSource) -> bool,
        d: &mut Vec<Diagnostic>,
    ) {
        match first.get(j.base.name.as_str()) {
            None => {
                let at = format!("{}:{}", j.origin.file, j.origin.mark);
                first.insert(&j.base.name, (&j.base.cluster, at));
            }
            Some((cluster, at)) if *cluster != j.base.cluster && report(&j.source) => d.push(
                warn_at(
                    j,
                    "cluster",
                    format!(
                        "jobs named {} use different clusters ({:?} here, {cluster:?} at {at}): the dispatcher places all jobs of one name together",
                        j.base.name, j.base.cluster
                    ),
                )
                .hint("give the jobs of one name the same cluster, or rename one"),
            ),
            Some(_) => {}
        }
    }
    for j in periodics {
        visit(j, &mut first, report, d);
    }
    for j in presubmits {
        visit(j, &mut first, report, d);
    }
    for j in postsubmits {
        visit(j, &mut first, report, d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brancher_intersection_follows_prow() {
        let mut cache = HashMap::new();
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let (main, main2, anchored_main) = (s(&["main"]), s(&["main"]), s(&["^main$"]));
        let none: Vec<String> = vec![];
        let b = |branches, skip| Brancher { branches, skip };
        assert!(b(&main, &none).intersects(&b(&main2, &none), &mut cache));
        // Pattern strings compare literally, as in Prow.
        assert!(!b(&main, &none).intersects(&b(&anchored_main, &none), &mut cache));
        assert!(b(&none, &none).intersects(&b(&main, &none), &mut cache));
        let rel = s(&["release-.*"]);
        let skip_main = s(&["main"]);
        assert!(!b(&main, &none).intersects(&b(&none, &skip_main), &mut cache));
        assert!(b(&main, &none).intersects(&b(&none, &rel), &mut cache));
        assert!(b(&none, &rel).intersects(&b(&main, &none), &mut cache));
        assert!(b(&none, &rel).intersects(&b(&none, &main), &mut cache));
    }
}
