//! The loaded configuration: jobs with their origins, and the immutable snapshot
//! every other part of bosun reads.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use crate::types::{
    JobBase, JobSource, JobType, PeriodicFields, PostsubmitFields, Preset, PresubmitFields,
    ProwConfig,
};
use crate::yaml::{Mark, Node, Value};

/// Where something was defined: file, position, and the positions of its fields.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Origin {
    /// The file, as given or found while walking a directory.
    pub file: Arc<str>,
    /// Start of the definition.
    pub mark: Mark,
    /// Positions of the fields below the definition (paths like
    /// `spec.containers[0].env[1]`), sorted by path.
    #[serde(skip)]
    pub fields: Arc<[(Box<str>, Mark)]>,
}

/// How deep [`Origin::fields`] records positions below a job.
const FIELD_DEPTH: usize = 5;

impl Origin {
    /// Records the position of `node` and of its fields.
    pub fn of(file: &Arc<str>, node: &Node<'_>) -> Origin {
        let mut fields = Vec::new();
        let mut path = String::new();
        collect_marks(node, &mut path, 0, &mut fields);
        fields.sort_by(|a: &(Box<str>, Mark), b| a.0.cmp(&b.0));
        Origin {
            file: file.clone(),
            mark: node.mark,
            fields: fields.into(),
        }
    }

    /// The position of `path`, or of its closest recorded ancestor.
    pub fn locate(&self, path: &str) -> Mark {
        let mut p = path;
        loop {
            if p.is_empty() {
                return self.mark;
            }
            if let Ok(i) = self.fields.binary_search_by(|(k, _)| (**k).cmp(p)) {
                return self.fields[i].1;
            }
            p = match p.rfind(['.', '[']) {
                Some(i) => &p[..i],
                None => "",
            };
        }
    }
}

fn collect_marks(
    node: &Node<'_>,
    path: &mut String,
    depth: usize,
    out: &mut Vec<(Box<str>, Mark)>,
) {
    if depth >= FIELD_DEPTH {
        return;
    }
    let len = path.len();
    match &node.value {
        Value::Map(entries) => {
            for (k, v) in entries {
                let key = k.as_str().unwrap_or_default();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                // A key's position is where the reader looks for it.
                out.push((path.as_str().into(), k.mark));
                collect_marks(v, path, depth + 1, out);
                path.truncate(len);
            }
        }
        Value::Seq(items) => {
            for (i, item) in items.iter().enumerate() {
                use std::fmt::Write;
                let _ = write!(path, "[{i}]");
                out.push((path.as_str().into(), item.mark));
                collect_marks(item, path, depth + 1, out);
                path.truncate(len);
            }
        }
        Value::Scalar { .. } => {}
    }
}

/// A job of kind `K` (its kind-specific fields), with everything all jobs share.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Job<K> {
    /// Fields every job has, after defaulting and presets.
    pub base: JobBase,
    /// Kind-specific fields.
    pub kind: K,
    /// True when `cluster:` was written (false when it defaulted to `default`).
    pub cluster_written: bool,
    /// Central or in-repo, and for in-repo jobs the repository.
    pub source: JobSource,
    /// Where it was defined.
    pub origin: Origin,
}

/// A periodic job.
pub type Periodic = Job<PeriodicFields>;
/// A presubmit job.
pub type Presubmit = Job<PresubmitFields>;
/// A postsubmit job.
pub type Postsubmit = Job<PostsubmitFields>;

impl<K> Job<K> {
    /// The job's name.
    pub fn name(&self) -> &str {
        &self.base.name
    }
}

impl Periodic {
    /// The periodic's identity: its name for central config, `ORG/REPO:name` for
    /// in-repo config. Run identity and schedule state are keyed by it.
    pub fn identity(&self) -> String {
        match &self.source {
            JobSource::Central => self.base.name.clone(),
            JobSource::InRepo { repo, .. } => format!("{repo}:{}", self.base.name),
        }
    }
}

/// A preset with its origin.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PresetDef {
    /// The preset.
    pub preset: Preset,
    /// Central or in-repo.
    pub source: JobSource,
    /// Where it was defined.
    pub origin: Origin,
}

/// One immutable, validated view of the whole configuration.
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    /// Increases by one with every snapshot a process builds.
    pub version: u64,
    /// The central `config.yaml` (component settings and bosun's sections).
    pub config: ProwConfig,
    /// All presets, central then in-repo.
    pub presets: Vec<PresetDef>,
    /// All periodics.
    pub periodics: Vec<Periodic>,
    /// Presubmits by `org/repo`.
    pub presubmits: BTreeMap<String, Vec<Presubmit>>,
    /// Postsubmits by `org/repo`.
    pub postsubmits: BTreeMap<String, Vec<Postsubmit>>,
    /// What was read.
    pub stats: LoadStats,
}

impl Snapshot {
    /// Number of jobs of each kind.
    pub fn counts(&self) -> JobCounts {
        JobCounts {
            periodics: self.periodics.len(),
            presubmits: self.presubmits.values().map(Vec::len).sum(),
            postsubmits: self.postsubmits.values().map(Vec::len).sum(),
        }
    }

    /// The periodic with this identity.
    pub fn periodic(&self, identity: &str) -> Option<&Periodic> {
        self.periodics.iter().find(|p| p.identity() == identity)
    }

    /// Every job as (type, repo, name), for lookups by name.
    pub fn jobs(&self) -> impl Iterator<Item = (JobType, Option<&str>, &JobBase)> {
        let p = self
            .periodics
            .iter()
            .map(|j| (JobType::Periodic, None, &j.base));
        let pre = self.presubmits.iter().flat_map(|(repo, jobs)| {
            jobs.iter()
                .map(move |j| (JobType::Presubmit, Some(repo.as_str()), &j.base))
        });
        let post = self.postsubmits.iter().flat_map(|(repo, jobs)| {
            jobs.iter()
                .map(move |j| (JobType::Postsubmit, Some(repo.as_str()), &j.base))
        });
        p.chain(pre).chain(post)
    }
}

/// Job counts by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct JobCounts {
    /// Periodics.
    pub periodics: usize,
    /// Presubmits.
    pub presubmits: usize,
    /// Postsubmits.
    pub postsubmits: usize,
}

/// What the loader read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LoadStats {
    /// YAML files parsed (config, job config and in-repo files).
    pub files: usize,
    /// YAML files skipped because a `.prowignore` lists them.
    pub ignored_files: usize,
    /// Bytes read.
    pub bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse_documents;

    #[test]
    fn locate_finds_the_closest_recorded_field() {
        let src = "name: a\nspec:\n  containers:\n  - image: x\n    env:\n    - name: A\n      value: b\n";
        let doc = &parse_documents(src).unwrap()[0];
        let origin = Origin::of(&Arc::from("f.yaml"), doc);
        assert_eq!(origin.locate("name").line, 1);
        assert_eq!(origin.locate("spec.containers[0]").line, 4);
        assert_eq!(origin.locate("spec.containers[0].env[0]").line, 6);
        // Deeper than recorded: the closest ancestor.
        assert_eq!(origin.locate("spec.containers[0].env[0].value").line, 6);
        assert_eq!(origin.locate("nothing.here"), Mark { line: 1, col: 1 });
    }
}
