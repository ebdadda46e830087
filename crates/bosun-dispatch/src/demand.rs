//! Demand: how much each job asks of a cluster, by job name.
//!
//! It comes from a JSON file in the format of OpenShift's `job_volume.json`
//! (`{"job name": runs}`; gzip-compressed or not; floats accepted), or from
//! the daemon (bosun's store, Prometheus) as a map. A job with no data gets
//! the median demand of the jobs of its type that have some, or 1 when none
//! has any ([`fill`]); a unit's demand is the sum over its job names
//! ([`unit_demand`]).

use std::collections::{BTreeMap, HashMap};
use std::io::Read;

use bosun_config::types::JobType;

use crate::jobs::{JobFacts, UnitSeed};

/// Measured demand per job name (runs, run-hours, ...).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Demand(pub BTreeMap<String, f64>);

/// Why a demand file was refused.
#[derive(Debug, thiserror::Error)]
pub enum DemandError {
    /// Not a JSON object of numbers.
    #[error("demand file is not a JSON object of job names to numbers: {0}")]
    Json(#[from] serde_json::Error),
    /// Looked gzip-compressed but did not decompress.
    #[error("demand file is not valid gzip: {0}")]
    Gzip(std::io::Error),
    /// A job's value is not a number.
    #[error("demand file: job {job:?}: {found} is not a number")]
    NotANumber {
        /// The job.
        job: String,
        /// What was found instead.
        found: String,
    },
    /// A job's value is negative or not finite.
    #[error(
        "demand file: job {job:?}: demand must be a non-negative finite number, found {value}"
    )]
    Invalid {
        /// The job.
        job: String,
        /// The value.
        value: f64,
    },
}

impl Demand {
    /// Parses OpenShift's `job_volume.json` (`{"job": 12, "other": 0.5}`),
    /// gzip-compressed or not. Every value must be a non-negative number.
    pub fn from_json(bytes: &[u8]) -> Result<Demand, DemandError> {
        let mut unzipped = Vec::new();
        let bytes = if bytes.starts_with(&[0x1f, 0x8b]) {
            flate2::read::GzDecoder::new(bytes)
                .read_to_end(&mut unzipped)
                .map_err(DemandError::Gzip)?;
            &unzipped[..]
        } else {
            bytes
        };
        let raw: BTreeMap<String, serde_json::Value> = serde_json::from_slice(bytes)?;
        let mut out = BTreeMap::new();
        for (job, v) in raw {
            let Some(value) = v.as_f64() else {
                return Err(DemandError::NotANumber {
                    job,
                    found: v.to_string(),
                });
            };
            if !value.is_finite() || value < 0.0 {
                return Err(DemandError::Invalid { job, value });
            }
            out.insert(job, value);
        }
        Ok(Demand(out))
    }

    /// Demand from a map the daemon built (bosun's store, Prometheus).
    /// Negative and non-finite values are dropped, as if the job had no data.
    pub fn from_map(map: impl IntoIterator<Item = (String, f64)>) -> Demand {
        Demand(
            map.into_iter()
                .filter(|(_, v)| v.is_finite() && *v >= 0.0)
                .collect(),
        )
    }

    /// The measured demand of `job`, if any.
    pub fn get(&self, job: &str) -> Option<f64> {
        self.0.get(job).copied()
    }
}

/// The demand of a job without data when no job of its type has any.
pub const NO_DATA_DEMAND: f64 = 1.0;

/// Every job name's demand: measured, else the median demand of the jobs of
/// its type that have data (per name; a name with several types takes the
/// largest of their medians), else [`NO_DATA_DEMAND`].
pub fn fill(demand: &Demand, facts: &[JobFacts]) -> BTreeMap<String, f64> {
    // Per type, the measured values of its names (each name once).
    let mut measured: HashMap<JobType, BTreeMap<&str, f64>> = HashMap::new();
    for f in facts {
        if let Some(v) = demand.get(&f.name) {
            measured.entry(f.ty).or_default().insert(&f.name, v);
        }
    }
    let medians: HashMap<JobType, f64> = measured
        .into_iter()
        .map(|(ty, values)| (ty, median(values.into_values().collect())))
        .collect();
    let mut out: BTreeMap<String, f64> = BTreeMap::new();
    for f in facts {
        let v = demand
            .get(&f.name)
            .unwrap_or_else(|| medians.get(&f.ty).copied().unwrap_or(NO_DATA_DEMAND));
        out.entry(f.name.clone())
            .and_modify(|e| *e = e.max(v))
            .or_insert(v);
    }
    out
}

/// The median of `values` (not empty): the middle value, or the mean of the
/// two middle ones.
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        return NO_DATA_DEMAND;
    }
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// A unit's demand: the sum of its job names' demand (from [`fill`]).
pub fn unit_demand(unit: &UnitSeed, per_job: &BTreeMap<String, f64>) -> f64 {
    unit.names
        .iter()
        .map(|n| per_job.get(n).copied().unwrap_or(NO_DATA_DEMAND))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(vec![3.0]), 3.0);
        assert_eq!(median(vec![4.0, 1.0]), 2.5);
        assert_eq!(median(vec![5.0, 1.0, 3.0]), 3.0);
    }
}
