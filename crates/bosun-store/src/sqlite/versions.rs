//! The periodics' versions, which prepared fires are checked against: striped
//! by a hash of the identity, bumped by the writer after every commit that
//! touched one of a stripe's periodics; and the stripes a batch touched.

use std::sync::atomic::{AtomicU64, Ordering};

/// How many version stripes: a periodic's version is its stripe's, so a
/// change to another periodic of the stripe makes a prepared fire stale too
/// (it is decided again: slower, never wrong). 256 KiB.
const STRIPES: usize = 1 << 15;

/// The periodics' versions, striped by a hash of the identity. The writer
/// bumps a stripe after every commit that touched one of its periodics (so a
/// version read before a snapshot is never newer than the snapshot).
pub(super) struct Versions(Box<[AtomicU64]>);

impl Default for Versions {
    fn default() -> Self {
        Versions((0..STRIPES).map(|_| AtomicU64::new(0)).collect())
    }
}

impl Versions {
    /// The stripe of `periodic`.
    pub(super) fn stripe(periodic: &str) -> usize {
        use std::hash::{Hash, Hasher};
        // A fixed-key SipHash: the same stripe in every thread and run.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        periodic.hash(&mut h);
        (h.finish() as usize) % STRIPES
    }

    /// The version of `periodic`.
    pub(super) fn get(&self, periodic: &str) -> u64 {
        self.at(Self::stripe(periodic))
    }

    /// The version of a stripe.
    pub(super) fn at(&self, stripe: usize) -> u64 {
        self.0[stripe].load(Ordering::Acquire)
    }

    /// Bumps every stripe.
    pub(super) fn bump_all(&self) {
        for v in self.0.iter() {
            v.fetch_add(1, Ordering::AcqRel);
        }
    }
}

/// The version stripes a writer batch touched.
#[derive(Default)]
pub(super) struct Touched {
    bits: Vec<u64>,
    list: Vec<usize>,
    /// Every stripe.
    pub(super) all: bool,
}

impl Touched {
    pub(super) fn add(&mut self, stripe: usize) {
        if self.bits.is_empty() {
            self.bits = vec![0; STRIPES / 64];
        }
        let (w, b) = (stripe / 64, 1u64 << (stripe % 64));
        if self.bits[w] & b == 0 {
            self.bits[w] |= b;
            self.list.push(stripe);
        }
    }

    pub(super) fn has(&self, stripe: usize) -> bool {
        self.all
            || self
                .bits
                .get(stripe / 64)
                .is_some_and(|w| w & (1 << (stripe % 64)) != 0)
    }

    /// Bumps the touched stripes' versions, and forgets them.
    pub(super) fn bump(&mut self, versions: &Versions) {
        if std::mem::take(&mut self.all) {
            versions.bump_all();
        }
        for s in self.list.drain(..) {
            self.bits[s / 64] = 0;
            versions.0[s].fetch_add(1, Ordering::AcqRel);
        }
    }
}
