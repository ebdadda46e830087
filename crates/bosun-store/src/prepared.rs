//! Fires decided ahead of their instant: what [`Store::prepare_fires`] returns
//! and [`Store::commit_prepared`] takes. Each store keeps a prepared fire in
//! its own form ([`Payload`]): as decided, or encoded as a line of a record.
//!
//! [`Store::prepare_fires`]: crate::Store::prepare_fires
//! [`Store::commit_prepared`]: crate::Store::commit_prepared

use crate::run::Run;
use crate::Fire;

/// Fires decided ahead of their instant, made ready by
/// [`Store::prepare_fires`](crate::Store::prepare_fires) and committed by
/// [`Store::commit_prepared`](crate::Store::commit_prepared).
pub struct PreparedFires {
    pub(crate) fires: Vec<PreparedFire>,
    /// A store that logs fires as records ([`Payload::Log`]): the record of
    /// them all, a line per fire (empty otherwise).
    pub(crate) log_body: String,
}

/// One prepared fire.
pub(crate) struct PreparedFire {
    /// Its periodic.
    pub(crate) periodic: String,
    /// The periodic's version the fire was decided on.
    pub(crate) version: u64,
    /// A run of one of its ticks exists already: never committed.
    pub(crate) conflict: bool,
    /// What to commit, in the store's own form.
    pub(crate) payload: Payload,
}

/// A prepared fire's content.
pub(crate) enum Payload {
    /// As decided.
    Fire(Fire),
    /// Encoded as a line of [`PreparedFires::log_body`].
    Log(Box<LogEntry>),
}

/// A prepared fire ready to be appended: its new runs (made already; the
/// commit gives them their build ids and creation time) and where its line is
/// in the prepared record (its templates are stored already), with what the
/// writer checks.
pub(crate) struct LogEntry {
    pub(crate) runs: Vec<Run>,
    pub(crate) line: std::ops::Range<usize>,
    /// The periodic's version stripe.
    pub(crate) stripe: usize,
    /// The writer's cache epoch when the templates were stored: a cache lost
    /// since (a failed batch) may not know them, and the fire is stale.
    pub(crate) templates_epoch: u64,
}

impl PreparedFires {
    /// How many fires.
    pub fn len(&self) -> usize {
        self.fires.len()
    }

    /// None.
    pub fn is_empty(&self) -> bool {
        self.fires.is_empty()
    }

    /// Keeps the fires for which `keep(index, periodic)` holds (indexes are
    /// the positions before the call).
    pub fn retain(&mut self, mut keep: impl FnMut(usize, &str) -> bool) {
        let mut i = 0;
        self.fires.retain(|f| {
            i += 1;
            keep(i - 1, &f.periodic)
        });
    }
}

/// One prepared fire as a store outside this crate keeps it (see
/// [`PreparedFires::of_fires`]).
#[derive(Debug)]
pub struct KeptFire {
    /// Its periodic.
    pub periodic: String,
    /// The periodic's version the fire was decided on.
    pub version: u64,
    /// A run of one of its ticks existed at preparation: never committed.
    pub conflict: bool,
    /// The fire as decided (none for a fire another store prepared).
    pub fire: Option<Fire>,
}

impl PreparedFires {
    /// Fires prepared by a store that keeps them as decided, each with its
    /// version and whether a run of its ticks existed at preparation.
    pub fn of_fires(fires: Vec<KeptFire>) -> PreparedFires {
        PreparedFires {
            fires: fires
                .into_iter()
                .map(|k| PreparedFire {
                    periodic: k.periodic,
                    version: k.version,
                    conflict: k.conflict || k.fire.is_none(),
                    payload: match k.fire {
                        Some(f) => Payload::Fire(f),
                        None => Payload::Log(Box::new(LogEntry {
                            runs: Vec::new(),
                            line: 0..0,
                            stripe: 0,
                            templates_epoch: 0,
                        })),
                    },
                })
                .collect(),
            log_body: String::new(),
        }
    }

    /// The fires, as [`PreparedFires::of_fires`] took them (a fire another
    /// store prepared has none).
    pub fn into_fires(self) -> Vec<KeptFire> {
        self.fires
            .into_iter()
            .map(|f| KeptFire {
                periodic: f.periodic,
                version: f.version,
                conflict: f.conflict,
                fire: match f.payload {
                    Payload::Fire(fire) => Some(fire),
                    Payload::Log(_) => None,
                },
            })
            .collect()
    }
}

impl std::fmt::Debug for PreparedFires {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedFires")
            .field("fires", &self.fires.len())
            .finish()
    }
}
