//! The placement rules: which clusters a unit of jobs may go to, or the one
//! it must go to, in one precedence. A later rule only narrows what the
//! earlier ones left; a rule that would leave nothing is skipped (groups,
//! provider) or leaves the unit unplaceable (pins, capabilities), and the
//! unit's `rule` text says why.
//!
//! 1. **eligibility**: clusters that are not blocked; a trusted cluster
//!    (`build_clusters.<c>.trusted`) only when its allow rules admit every
//!    job of the unit; for in-repo jobs only the clusters
//!    `in_repo_config.allowed_clusters` allows for their repository.
//! 2. **pin**: a job's written `cluster:` outside
//!    `dispatcher.relocatable_clusters` (or the cluster of a job whose agent
//!    is not `kubernetes`, which is never dispatched) pins the unit there.
//!    A pin on a cluster missing from the inventory, blocked, or not
//!    eligible leaves the unit unplaceable (`pinned` set, `eligible` empty).
//! 3. **capabilities**: the clusters offering every capability the unit's
//!    jobs require with `capability/<x>: <x>` labels; none: unplaceable.
//! 4. **group**: the first `dispatcher.groups` entry matching a job's name
//!    (`jobs`, anchored patterns) or its job-config file (`paths`,
//!    unanchored) whose cluster is still eligible pins the unit there;
//!    matching groups whose cluster is not eligible are skipped (noted).
//! 5. **provider**: a job label of `dispatcher.provider_labels` (default
//!    `dispatcher.bosun.dev/provider`, then `ci-operator.openshift.io/cloud`)
//!    names a provider, mapped by `dispatcher.provider_mapping`; the eligible
//!    clusters of that provider, when there are some (else ignored, noted).
//! 6. **balance**: the planner chooses among what is left, by demand and
//!    capacity.
//!
//! `rule` reads `NAME: detail`, followed by `[notes]` on the earlier rules
//! that narrowed the choice or were skipped.

use std::collections::{BTreeMap, BTreeSet};

use bosun_config::types::{DispatcherConfig, ProwConfig, CAPABILITY_LABEL_PREFIX};
use bosun_config::validate::{in_repo_allows_cluster, trust_admits};
use regex::Regex;

use crate::demand::unit_demand;
use crate::inventory::Inventory;
use crate::jobs::{JobFacts, UnitSeed};
use crate::model::UnitSpec;

/// The rules, in precedence order; each unit's `rule` text starts with the
/// name of the one that decided it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rule {
    /// Nothing eligible at all (blocked, trusted, in-repo limits).
    Eligibility,
    /// A written `cluster:` outside `relocatable_clusters`, or a job not
    /// dispatched (agent).
    Pin,
    /// Required capabilities.
    Capabilities,
    /// A `dispatcher.groups` entry.
    Group,
    /// Provider affinity.
    Provider,
    /// Balancing among the eligible clusters.
    Balance,
}

impl Rule {
    /// All rules, in precedence order.
    pub const ORDER: [Rule; 6] = [
        Rule::Eligibility,
        Rule::Pin,
        Rule::Capabilities,
        Rule::Group,
        Rule::Provider,
        Rule::Balance,
    ];

    /// The name `rule` texts start with.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::Eligibility => "eligibility",
            Rule::Pin => "pin",
            Rule::Capabilities => "capabilities",
            Rule::Group => "group",
            Rule::Provider => "provider",
            Rule::Balance => "balance",
        }
    }

    /// The rule a unit's `rule` text names.
    pub fn of(text: &str) -> Option<Rule> {
        let name = text.split(':').next()?;
        Rule::ORDER.into_iter().find(|r| r.as_str() == name)
    }
}

struct Group {
    index: usize,
    cluster: String,
    jobs: Vec<Regex>,
    paths: Vec<Regex>,
}

/// The rules of one configuration over one inventory, compiled once.
pub struct Rules<'a> {
    config: &'a ProwConfig,
    dispatcher: DispatcherConfig,
    inventory: &'a Inventory,
    groups: Vec<Group>,
}

impl<'a> Rules<'a> {
    /// Compiles the rules of `config` (a missing `dispatcher:` section has
    /// every default). Patterns that do not compile are ignored: `bosun
    /// check` reports them.
    pub fn new(config: &'a ProwConfig, inventory: &'a Inventory) -> Rules<'a> {
        let dispatcher = config.dispatcher.clone().unwrap_or_default();
        let groups = dispatcher
            .groups
            .iter()
            .enumerate()
            .map(|(index, g)| Group {
                index,
                cluster: g.cluster.clone(),
                jobs: g
                    .jobs
                    .iter()
                    .filter_map(|p| Regex::new(&format!("^(?:{p})$")).ok())
                    .collect(),
                paths: g.paths.iter().filter_map(|p| Regex::new(p).ok()).collect(),
            })
            .collect();
        Rules {
            config,
            dispatcher,
            inventory,
            groups,
        }
    }

    /// The unit specs of `seeds` with their demand from `per_job` (see
    /// [`crate::demand::fill`]).
    pub fn unit_specs(
        &self,
        seeds: &[UnitSeed],
        facts: &[JobFacts],
        per_job: &BTreeMap<String, f64>,
    ) -> Vec<UnitSpec> {
        seeds
            .iter()
            .map(|s| {
                let mut u = self.unit(s, facts);
                u.demand = unit_demand(s, per_job);
                u
            })
            .collect()
    }

    /// Applies the precedence to one unit. `demand` is left 0 (the caller
    /// fills it); `previous` is the cluster most of its jobs are configured
    /// for (ties: the first by name), which the caller replaces with the
    /// previous plan's when there is one.
    pub fn unit(&self, seed: &UnitSeed, facts: &[JobFacts]) -> UnitSpec {
        let jobs: Vec<&JobFacts> = seed.jobs.iter().map(|&i| &facts[i]).collect();
        let (rule, eligible, pinned) = self.decide(&jobs);
        UnitSpec {
            id: seed.id.clone(),
            jobs: seed.names.clone(),
            demand: 0.0,
            eligible,
            pinned,
            keeps_blocked_pin: false,
            previous: previous(&jobs),
            rule,
        }
    }

    fn decide(&self, jobs: &[&JobFacts]) -> (String, Vec<String>, Option<String>) {
        let mut notes: Vec<String> = Vec::new();
        let done = |rule: Rule, detail: String, notes: &[String]| {
            if notes.is_empty() {
                format!("{}: {detail}", rule.as_str())
            } else {
                format!("{}: {detail} [{}]", rule.as_str(), notes.join("; "))
            }
        };

        // 1. Eligibility.
        let mut excluded: BTreeMap<String, String> = BTreeMap::new();
        let mut eligible: BTreeSet<String> = BTreeSet::new();
        for c in self.inventory.clusters() {
            match self.exclusion(&c.name, c.blocked, jobs) {
                Some(why) => {
                    excluded.insert(c.name.clone(), why);
                }
                None => {
                    eligible.insert(c.name.clone());
                }
            }
        }
        if !excluded.is_empty() {
            notes.push(format!(
                "not eligible: {}",
                excluded
                    .iter()
                    .map(|(c, why)| format!("{c} ({why})"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }

        // 2. Pins.
        let pins: Vec<(&JobFacts, String)> = jobs
            .iter()
            .filter_map(|j| {
                if !j.dispatched() {
                    Some((*j, format!("agent {} is not dispatched", j.agent)))
                } else if j.relocatable(&self.dispatcher) {
                    None
                } else {
                    Some((
                        *j,
                        "written, not in dispatcher.relocatable_clusters".to_string(),
                    ))
                }
            })
            .collect();
        if let Some((job, why)) = pins.first() {
            let pin = job.cluster.clone();
            let others: BTreeSet<&str> = pins
                .iter()
                .map(|(j, _)| j.cluster.as_str())
                .filter(|c| *c != pin)
                .collect();
            if !others.is_empty() {
                notes.push(format!(
                    "conflicting pins of jobs sharing a name: {} ignored",
                    others.into_iter().collect::<Vec<_>>().join(", ")
                ));
            }
            let what = format!("cluster {pin} of job {} in {} ({why})", job.name, job.file);
            let problem = match self.inventory.get(&pin) {
                None => Some("which is not in the inventory".to_string()),
                Some(c) if c.blocked => Some("which is blocked".to_string()),
                Some(_) => excluded
                    .get(&pin)
                    .map(|why| format!("which is not eligible ({why})")),
            };
            // The exclusions are in the detail already when they matter.
            notes.retain(|n| !n.starts_with("not eligible: "));
            return match problem {
                Some(p) => (
                    done(Rule::Pin, format!("{what}, {p}"), &notes),
                    Vec::new(),
                    Some(pin),
                ),
                None => (done(Rule::Pin, what, &notes), vec![pin.clone()], Some(pin)),
            };
        }
        if eligible.is_empty() {
            return (
                done(Rule::Eligibility, "no cluster is eligible".into(), &notes),
                Vec::new(),
                None,
            );
        }

        // 3. Capabilities.
        let required: BTreeSet<&str> = jobs
            .iter()
            .flat_map(|j| j.labels.iter())
            .filter_map(|(k, v)| {
                let cap = k.strip_prefix(CAPABILITY_LABEL_PREFIX)?;
                (cap == v && !cap.is_empty()).then_some(cap)
            })
            .collect();
        if !required.is_empty() {
            let list = required.iter().copied().collect::<Vec<_>>().join(", ");
            eligible.retain(|c| {
                self.inventory
                    .get(c)
                    .is_some_and(|s| required.iter().all(|r| s.capabilities.contains(*r)))
            });
            if eligible.is_empty() {
                return (
                    done(
                        Rule::Capabilities,
                        format!("no eligible cluster offers {list}"),
                        &notes,
                    ),
                    Vec::new(),
                    None,
                );
            }
            notes.push(format!("capabilities: {list}"));
        }

        // 4. Groups.
        for g in &self.groups {
            let Some(matched) = group_match(g, jobs) else {
                continue;
            };
            if eligible.contains(&g.cluster) {
                return (
                    done(
                        Rule::Group,
                        format!("dispatcher.groups[{}] ({matched}): {}", g.index, g.cluster),
                        &notes,
                    ),
                    vec![g.cluster.clone()],
                    Some(g.cluster.clone()),
                );
            }
            notes.push(format!(
                "dispatcher.groups[{}] ({matched}) skipped: {} is not eligible",
                g.index, g.cluster
            ));
        }

        // 5. Provider.
        let labels = self.dispatcher.provider_labels();
        let wanted = jobs.iter().find_map(|j| {
            labels.iter().find_map(|l| {
                j.labels
                    .get(*l)
                    .filter(|v| !v.is_empty())
                    .map(|v| (j.name.as_str(), *l, v.as_str()))
            })
        });
        if let Some((job, label, value)) = wanted {
            let provider = self
                .dispatcher
                .provider_mapping
                .get(value)
                .map_or(value, String::as_str);
            let of_provider: BTreeSet<String> = eligible
                .iter()
                .filter(|c| {
                    self.inventory.get(c).and_then(|s| s.provider.as_deref()) == Some(provider)
                })
                .cloned()
                .collect();
            let source = if provider == value {
                format!("label {label} of job {job}")
            } else {
                format!("label {label}: {value} of job {job}, mapped")
            };
            if of_provider.is_empty() {
                notes.push(format!(
                    "provider {provider} ({source}) ignored: no eligible cluster has it"
                ));
            } else {
                let eligible: Vec<String> = of_provider.into_iter().collect();
                return (
                    done(
                        Rule::Provider,
                        format!("{provider} ({source}): {}", eligible.join(", ")),
                        &notes,
                    ),
                    eligible,
                    None,
                );
            }
        }

        // 6. Balance.
        let eligible: Vec<String> = eligible.into_iter().collect();
        (
            done(Rule::Balance, eligible.join(", "), &notes),
            eligible,
            None,
        )
    }

    /// Why `cluster` is not eligible for every job of the unit, if it is not.
    fn exclusion(&self, cluster: &str, blocked: bool, jobs: &[&JobFacts]) -> Option<String> {
        if blocked {
            return Some("blocked".into());
        }
        if let Some(rules) = self
            .config
            .build_clusters
            .get(cluster)
            .and_then(|c| c.trusted.as_ref())
        {
            if let Some(j) = jobs
                .iter()
                .find(|j| !trust_admits(rules, &j.name, j.repo.as_deref(), j.ty))
            {
                return Some(format!("trusted; job {} not admitted", j.name));
            }
        }
        if let Some(j) = jobs.iter().find(|j| {
            j.in_repo
                && !in_repo_allows_cluster(self.config, j.repo.as_deref().unwrap_or(""), cluster)
        }) {
            return Some(format!(
                "in-repo job {} of {}: not in in_repo_config.allowed_clusters",
                j.name,
                j.repo.as_deref().unwrap_or("")
            ));
        }
        None
    }
}

/// What makes group `g` match the unit: `job NAME` or `file PATH`.
fn group_match(g: &Group, jobs: &[&JobFacts]) -> Option<String> {
    if let Some(j) = jobs
        .iter()
        .find(|j| g.jobs.iter().any(|re| re.is_match(&j.name)))
    {
        return Some(format!("job {}", j.name));
    }
    jobs.iter()
        .find(|j| g.paths.iter().any(|re| re.is_match(&j.file)))
        .map(|j| format!("file {}", j.file))
}

/// The cluster most of `jobs` are configured for (ties: the first by name).
fn previous(jobs: &[&JobFacts]) -> Option<String> {
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for j in jobs {
        *count.entry(j.cluster.as_str()).or_default() += 1;
    }
    let max = count.values().copied().max()?;
    count
        .into_iter()
        .find(|(_, n)| *n == max)
        .map(|(c, _)| c.to_string())
}

/// Convenience: the facts' units with their specs over `inventory`, demand
/// filled from `per_job`.
pub fn unit_specs(
    config: &ProwConfig,
    inventory: &Inventory,
    facts: &[JobFacts],
    per_job: &BTreeMap<String, f64>,
) -> Vec<UnitSpec> {
    let seeds = crate::jobs::units(facts, config);
    Rules::new(config, inventory).unit_specs(&seeds, facts, per_job)
}
