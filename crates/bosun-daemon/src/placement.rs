//! Where a run in `scheduling` goes (DESIGN's cluster resolution, step 2):
//! with a `dispatcher:` section, bosun's own plan (the [`Engine`]'s
//! effective plan: the base plan with overrides and the health overlay);
//! else, with `scheduler.external.url`, that dispatcher's answer (asked off
//! the controller's pass, cached per `scheduler.external.cache`; any error
//! keeps the configured cluster); else the configured cluster. Prow's
//! failover mappings apply after either (the controller's business).
//!
//! The controller's pass never waits on the network: it asks [`Placer::place`],
//! which answers from memory or says a lookup is needed; the lookups run off
//! the pass ([`Placer::look_up`]) and wake the controller.
//!
//! It also keeps the health window of the overlay ([`HealthWindow`]): a
//! cluster not Reachable for `dispatcher.unhealthy_after` enters the
//! overlay, and leaves it once Reachable again for `dispatcher.recover_after`.

use bosun_base::sync::{Lock, ReadWrite};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use bosun_config::types::{ExternalScheduler, ProwConfig};
use bosun_dispatcher::client::{ExternalClient, Source};
use bosun_dispatcher::engine::Engine;
use bosun_store::Run;
use jiff::Timestamp;

/// Where a run goes, and why (for its description).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    /// The cluster; `None` keeps the configured one.
    pub cluster: Option<String>,
    /// Where the answer came from.
    pub why: String,
}

/// What the controller can do with a run in `scheduling` now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Place it.
    Ready(Placed),
    /// Ask the external dispatcher (off the pass), then look again.
    LookUp,
    /// Wait: bosun's own plan is not made yet.
    NotYet,
}

/// The daemon's placement state.
pub struct Placer {
    /// bosun's own dispatcher (used while the configuration has a
    /// `dispatcher:` section).
    pub engine: Arc<Engine>,
    /// The client, and the `scheduler.external` it was last given.
    external: Mutex<Option<(ExternalScheduler, Arc<ExternalClient>)>>,
    /// The build clusters in force (an external answer must name one).
    known: Arc<std::sync::RwLock<BTreeSet<String>>>,
    /// External answers by run id, until the run is placed.
    answers: Mutex<HashMap<String, Placed>>,
    in_flight: Mutex<HashSet<String>>,
    window: Mutex<HealthWindow>,
}

impl Placer {
    /// A placer over `engine`.
    pub fn new(engine: Arc<Engine>) -> Placer {
        Placer {
            engine,
            external: Mutex::new(None),
            known: Arc::default(),
            answers: Mutex::default(),
            in_flight: Mutex::default(),
            window: Mutex::default(),
        }
    }

    /// The external client for `config`'s `scheduler.external` (one for the
    /// daemon's life, so its cache hits; reconfigured when the section
    /// changes, its cache kept unless the URL changed).
    pub fn external(&self, config: &ProwConfig) -> Option<Arc<ExternalClient>> {
        let wanted: &ExternalScheduler = config.scheduler.external.as_ref()?;
        let mut current = self.external.locked();
        match current.as_mut() {
            Some((given, client)) => {
                if given != wanted {
                    client.reconfigure(wanted);
                    *given = wanted.clone();
                }
                Some(client.clone())
            }
            None => {
                let known = self.known.clone();
                let client = Arc::new(ExternalClient::new(wanted, move |c: &str| {
                    known.read_locked().contains(c)
                }));
                if let Some(e) = client.url_error() {
                    tracing::warn!(
                        "scheduler.external.url: {e}; runs keep their configured cluster"
                    );
                }
                *current = Some((wanted.clone(), client.clone()));
                Some(client)
            }
        }
    }

    /// Where `run` goes under `config`, from memory.
    pub fn place(&self, run: &Run, config: &ProwConfig, now: Timestamp) -> Decision {
        if config.dispatcher.is_some() {
            let Some((assignment, generation)) = self.engine.service.assignment(&run.job) else {
                return match self.engine.service.plan() {
                    None => Decision::NotYet,
                    Some(_) => Decision::Ready(Placed {
                        cluster: None,
                        why: "not in the dispatcher's plan".into(),
                    }),
                };
            };
            return Decision::Ready(Placed {
                cluster: Some(assignment.cluster),
                why: format!(
                    "dispatcher plan {generation}, rule {}: {}",
                    assignment.rule, assignment.reason
                ),
            });
        }
        let Some(client) = self.external(config) else {
            return Decision::Ready(Placed {
                cluster: None,
                why: String::new(),
            });
        };
        if let Some(answer) = self.answers.locked().remove(&run.id) {
            return Decision::Ready(answer);
        }
        if let Some(cluster) = client.cached(&run.job, now) {
            client.metrics().hit();
            return Decision::Ready(Placed {
                cluster: Some(cluster),
                why: format!("the dispatcher at {} (cached)", client.url()),
            });
        }
        Decision::LookUp
    }

    /// Asks the external dispatcher for `run` (blocking, at most its
    /// timeout); the answer waits for the next pass. Whether a lookup was
    /// made (one per run at a time).
    pub fn look_up(&self, run: &Run, config: &ProwConfig, now: Timestamp) -> bool {
        let Some(client) = self.external(config) else {
            return false;
        };
        if !self.in_flight.locked().insert(run.id.clone()) {
            return false;
        }
        let answer = client.cluster_for(&run.job, now);
        let placed = match answer.source {
            Source::Fallback(why) => Placed {
                cluster: None,
                why: format!(
                    "the dispatcher at {} gave no cluster ({why}); the configured one is kept",
                    client.url()
                ),
            },
            Source::Cache => Placed {
                cluster: answer.cluster,
                why: format!("the dispatcher at {} (cached)", client.url()),
            },
            Source::Dispatcher => Placed {
                cluster: answer.cluster,
                why: format!("the dispatcher at {}", client.url()),
            },
        };
        self.answers.locked().insert(run.id.clone(), placed);
        self.in_flight.locked().remove(&run.id);
        true
    }

    /// Once per controller pass: moves the health window on with the
    /// clusters' health (`reachable` per alias) and re-publishes the
    /// effective plan when the overlay changed or an override expired.
    /// Returns whether the effective plan changed.
    pub fn tick(
        &self,
        reachable: impl IntoIterator<Item = (String, bool)>,
        config: &ProwConfig,
        now: Timestamp,
    ) -> bool {
        let reachable: Vec<(String, bool)> = reachable.into_iter().collect();
        {
            let known: BTreeSet<String> = reachable.iter().map(|(c, _)| c.clone()).collect();
            let mut k = self.known.write_locked();
            if *k != known {
                *k = known;
            }
        }
        let Some(dispatcher) = &config.dispatcher else {
            return false;
        };
        let unhealthy = self.window.locked().observe(
            reachable,
            now,
            dispatcher.unhealthy_after().to_std(),
            dispatcher.recover_after().to_std(),
        );
        if self.engine.set_unhealthy(unhealthy, now) {
            return true;
        }
        if self.engine.expired_overrides(now) {
            self.engine.publish(now);
            return true;
        }
        false
    }
}

impl Placer {
    /// When the effective plan next changes by the clock alone, with no
    /// probe or request in between: the first override to expire, or the
    /// first cluster to enter or leave the health overlay. `None` without a
    /// `dispatcher:` section.
    pub fn next_change(&self, config: &ProwConfig) -> Option<Timestamp> {
        let dispatcher = config.dispatcher.as_ref()?;
        let window = self.window.locked().next_change(
            dispatcher.unhealthy_after().to_std(),
            dispatcher.recover_after().to_std(),
        );
        let expiry = self.engine.next_override_expiry();
        window.into_iter().chain(expiry).min()
    }
}

/// The overlay's health window: since when each cluster has been Reachable
/// or not, and which clusters are in the overlay.
#[derive(Debug, Default)]
pub struct HealthWindow {
    since: HashMap<String, (bool, Timestamp)>,
    overlaid: BTreeSet<String>,
}

impl HealthWindow {
    /// Takes each cluster's health at `now`; returns the clusters in the
    /// overlay: not Reachable for `unhealthy_after`, until Reachable again
    /// for `recover_after`. Clusters not given are forgotten.
    pub fn observe(
        &mut self,
        reachable: impl IntoIterator<Item = (String, bool)>,
        now: Timestamp,
        unhealthy_after: std::time::Duration,
        recover_after: std::time::Duration,
    ) -> BTreeSet<String> {
        let mut seen = HashSet::new();
        for (cluster, ok) in reachable {
            seen.insert(cluster.clone());
            match self.since.get(&cluster) {
                Some((was, _)) if *was == ok => {}
                _ => {
                    self.since.insert(cluster.clone(), (ok, now));
                }
            }
            let (_, since) = self.since[&cluster];
            let held = now.duration_since(since).unsigned_abs();
            if !ok && held >= unhealthy_after {
                self.overlaid.insert(cluster);
            } else if ok && held >= recover_after {
                self.overlaid.remove(&cluster);
            }
        }
        self.since.retain(|c, _| seen.contains(c));
        self.overlaid.retain(|c| seen.contains(c));
        self.overlaid.clone()
    }

    /// When [`HealthWindow::observe`] would next answer otherwise if no
    /// cluster's health changed: a cluster not Reachable and not in the
    /// overlay enters it `unhealthy_after` from when it stopped being
    /// Reachable; one in it that is Reachable again leaves `recover_after`
    /// from then.
    pub fn next_change(
        &self,
        unhealthy_after: std::time::Duration,
        recover_after: std::time::Duration,
    ) -> Option<Timestamp> {
        self.since
            .iter()
            .filter_map(|(cluster, (ok, since))| {
                let overlaid = self.overlaid.contains(cluster);
                let after = match (ok, overlaid) {
                    (false, false) => unhealthy_after,
                    (true, true) => recover_after,
                    _ => return None,
                };
                since
                    .checked_add(jiff::SignedDuration::try_from(after).ok()?)
                    .ok()
            })
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_cluster_enters_the_overlay_after_unhealthy_after_and_leaves_after_recover_after() {
        let t0: Timestamp = "2026-12-01T10:00:00Z".parse().unwrap();
        let at = |m: i64| t0 + jiff::SignedDuration::from_mins(m);
        let (bad, good) = (Duration::from_secs(300), Duration::from_secs(600));
        let mut w = HealthWindow::default();
        let health = |b: bool| vec![("a".to_string(), true), ("b".to_string(), b)];
        assert!(w.observe(health(true), at(0), bad, good).is_empty());
        assert_eq!(
            w.next_change(bad, good),
            None,
            "all Reachable: no change due"
        );
        assert!(w.observe(health(false), at(1), bad, good).is_empty());
        // The controller wakes when b would enter the overlay.
        assert_eq!(w.next_change(bad, good), Some(at(6)));
        assert!(w.observe(health(false), at(5), bad, good).is_empty());
        assert_eq!(
            w.observe(health(false), at(6), bad, good),
            BTreeSet::from(["b".to_string()])
        );
        assert_eq!(
            w.next_change(bad, good),
            None,
            "in the overlay until Reachable"
        );
        // Reachable again: still in the overlay for 10 minutes.
        assert!(w.observe(health(true), at(7), bad, good).contains("b"));
        assert_eq!(w.next_change(bad, good), Some(at(17)));
        assert!(w.observe(health(true), at(16), bad, good).contains("b"));
        assert!(w.observe(health(true), at(17), bad, good).is_empty());
        // A short outage never enters it.
        w.observe(health(false), at(20), bad, good);
        assert!(w.observe(health(true), at(24), bad, good).is_empty());
        // A removed cluster is forgotten.
        w.observe(health(false), at(30), bad, good);
        assert!(w.observe(health(false), at(40), bad, good).contains("b"));
        assert!(w
            .observe(vec![("a".to_string(), true)], at(41), bad, good)
            .is_empty());
    }
}
