//! Run ids made from a run's `seq`: a keyed permutation of the seq, written
//! as a UUIDv4.
//!
//! A run's id is a lowercase UUIDv4 (DESIGN.md), and a run is found by it.
//! Drawn at random, ids need an index of their own, and every creation writes
//! its entry at a random place of that index: a page of its own in nearly
//! every commit, read first from disk once the index outgrows the page cache.
//! `run_bench`'s POSTs took 6–26% longer with that index than without it, the
//! more so as the table grew (docs/performance.md). So a run the writer
//! creates gets the id of its seq: the 122-bit image of the seq and of its
//! writer's generation under a keyed permutation, in the 122 bits of a
//! UUIDv4 that are not its version and variant. The id names the run's row
//! (no index), cannot be guessed without the key, and no two seqs share one.
//! The key is made once per database, at random, and kept in `secrets`. The
//! generation (59 bits) is drawn each time the store is opened: a database
//! restored from a copy hands its later seqs out again, never their ids.
//!
//! Runs whose ids were drawn at random before the run had a seq (those of the
//! fire log, and every run of a database older than schema 14) are marked
//! `random_id` and keep a partial index. A lookup tries the row the id names,
//! then that index.
//!
//! The permutation is a balanced Feistel network of eight rounds over two
//! 61-bit halves, whose round function is SipHash-2-4 keyed with the
//! database's key (the Luby–Rackoff construction: a pseudo-random permutation
//! from a pseudo-random function). It is written here rather than taken from
//! a format-preserving encryption crate: FF1 (the `fpe` crate) costs 7 to 27
//! µs per id on this domain, more than the writer's whole insert of a run,
//! where these eight rounds cost well under a microsecond.

use siphasher::sip::SipHasher24;

/// The name of the key in `secrets`.
pub(super) const KEY_NAME: &str = "run_ids";

/// Bits of the seq in the permuted value; the generation has the rest.
const SEQ_BITS: u32 = 63;
const SEQ_MASK: u128 = (1 << SEQ_BITS) - 1;
/// Bits in each half of the permuted 122-bit value.
const HALF: u32 = 61;
const HALF_MASK: u64 = (1 << HALF) - 1;
const ROUNDS: u8 = 8;

/// The permutation of one database, by its key, and the generation of the
/// ids this store hands out.
#[derive(Clone)]
pub(super) struct RunIds {
    keys: (u64, u64),
    generation: u128,
}

impl std::fmt::Debug for RunIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RunIds(..)")
    }
}

impl RunIds {
    /// The permutation keyed by the first 16 bytes of `key`, its ids of
    /// `generation` (its low 59 bits).
    pub(super) fn new(key: &[u8], generation: u64) -> Self {
        let word = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&key[at..at + 8]);
            u64::from_le_bytes(b)
        };
        assert!(key.len() >= 16, "a run id key has at least 16 bytes");
        RunIds {
            keys: (word(0), word(8)),
            generation: u128::from(generation) & ((1 << (2 * HALF - SEQ_BITS)) - 1),
        }
    }

    /// A generation drawn at random.
    pub(super) fn random_generation() -> Result<u64, getrandom::Error> {
        let mut b = [0u8; 8];
        getrandom::fill(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// A new random key for `secrets`.
    pub(super) fn random_key() -> Result<[u8; 32], getrandom::Error> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key)?;
        Ok(key)
    }

    fn round(&self, i: u8, half: u64) -> u64 {
        let mut input = [0u8; 9];
        input[0] = i;
        input[1..].copy_from_slice(&half.to_le_bytes());
        SipHasher24::new_with_keys(self.keys.0, self.keys.1).hash(&input) & HALF_MASK
    }

    fn permute(&self, x: u128) -> u128 {
        let (mut l, mut r) = ((x >> HALF) as u64 & HALF_MASK, x as u64 & HALF_MASK);
        for i in 0..ROUNDS {
            (l, r) = (r, l ^ self.round(i, r));
        }
        (u128::from(l) << HALF) | u128::from(r)
    }

    fn unpermute(&self, y: u128) -> u128 {
        let (mut l, mut r) = ((y >> HALF) as u64 & HALF_MASK, y as u64 & HALF_MASK);
        for i in (0..ROUNDS).rev() {
            (l, r) = (r ^ self.round(i, l), l);
        }
        (u128::from(l) << HALF) | u128::from(r)
    }

    /// The id of the run numbered `seq` (positive).
    pub(super) fn id(&self, seq: i64) -> String {
        debug_assert!(seq > 0);
        let x = (self.generation << SEQ_BITS) | seq as u128;
        uuid::Uuid::from_u128(spread(self.permute(x))).to_string()
    }

    /// The seq whose id `id` is, if `id` is a UUIDv4 (of any generation: a
    /// random id names a seq too, almost never one whose row has that id:
    /// callers check the row's id).
    pub(super) fn seq(&self, id: &str) -> Option<i64> {
        let u = uuid::Uuid::try_parse(id).ok()?;
        if u.get_version_num() != 4 || u.get_variant() != uuid::Variant::RFC4122 {
            return None;
        }
        i64::try_from(self.unpermute(gather(u.as_u128())) & SEQ_MASK)
            .ok()
            .filter(|&s| s > 0)
    }
}

/// A UUIDv4 whose 122 free bits are `v`'s: version 4 in bits 76–79, variant
/// `10` in bits 62–63.
fn spread(v: u128) -> u128 {
    let top = (v >> 74) << 80; // 48 bits
    let mid = ((v >> 62) & 0xfff) << 64; // 12 bits
    let low = v & ((1 << 62) - 1); // 62 bits
    top | (0x4 << 76) | mid | (0b10 << 62) | low
}

/// The 122 free bits of a UUIDv4 (the inverse of [`spread`]).
fn gather(u: u128) -> u128 {
    ((u >> 80) << 74) | (((u >> 64) & 0xfff) << 62) | (u & ((1 << 62) - 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn ids() -> RunIds {
        RunIds::new(&[7u8; 32], 5)
    }

    #[test]
    fn an_id_is_a_lowercase_uuid_v4_that_gives_back_its_seq() {
        let ids = ids();
        for seq in [1, 2, 3, 1000, 1 << 40, i64::MAX] {
            let id = ids.id(seq);
            let u = uuid::Uuid::parse_str(&id).unwrap();
            assert_eq!(u.get_version_num(), 4, "{id}");
            assert_eq!(u.get_variant(), uuid::Variant::RFC4122, "{id}");
            assert_eq!(id, u.hyphenated().to_string(), "lowercase, hyphenated");
            assert_eq!(ids.seq(&id), Some(seq), "{id}");
        }
    }

    #[test]
    fn neighbouring_seqs_get_unrelated_ids() {
        let ids = ids();
        let all: Vec<String> = (1..=10_000).map(|s| ids.id(s)).collect();
        assert_eq!(all.iter().collect::<HashSet<_>>().len(), all.len());
        // Consecutive seqs share no prefix to speak of (no order to read, no
        // neighbour to guess): about 1 in 16 share a first hex digit.
        let shared = all
            .windows(2)
            .filter(|w| w[0].as_bytes()[0] == w[1].as_bytes()[0])
            .count();
        assert!(shared < 1_000, "{shared} of 9,999 share a first digit");
        // Each of the 122 free bits is set about half the time.
        for bit in (0..128).filter(|b| !(76..80).contains(b) && !(62..64).contains(b)) {
            let ones = all
                .iter()
                .filter(|id| (uuid::Uuid::parse_str(id).unwrap().as_u128() >> bit) & 1 == 1)
                .count();
            assert!((4_000..6_000).contains(&ones), "bit {bit}: {ones}");
        }
    }

    #[test]
    fn another_key_gives_other_ids() {
        let other = RunIds::new(&[8u8; 32], 5);
        let ids = ids();
        assert_ne!(ids.id(1), other.id(1));
        assert_ne!(other.seq(&ids.id(1)), Some(1));
    }

    #[test]
    fn another_generation_gives_the_seq_another_id_that_names_it_too() {
        let ids = ids();
        let later = RunIds::new(&[7u8; 32], 6);
        for seq in [1, 2, 1 << 40] {
            assert_ne!(ids.id(seq), later.id(seq));
            assert_eq!(ids.seq(&later.id(seq)), Some(seq));
            assert_eq!(later.seq(&ids.id(seq)), Some(seq));
        }
        // Only the generation's 59 bits count.
        assert_eq!(ids.id(3), RunIds::new(&[7u8; 32], 5 | 1 << 59).id(3));
    }

    #[test]
    fn what_is_not_a_uuid_v4_names_no_seq() {
        let ids = ids();
        let id = ids.id(42);
        assert_eq!(ids.seq("run-1"), None);
        assert_eq!(ids.seq(""), None);
        // Version 1 and a variant that is not RFC 4122's.
        let v1 = format!("{}1{}", &id[..14], &id[15..]);
        assert_eq!(ids.seq(&v1), None);
        let variant = format!("{}c{}", &id[..19], &id[20..]);
        assert_eq!(ids.seq(&variant), None);
    }

    #[test]
    fn spread_and_gather_are_inverse_on_122_bits() {
        for v in [
            0u128,
            1,
            (1 << 122) - 1,
            0x0123_4567_89ab_cdef_0123_4567_89ab_cdef_u128,
        ] {
            let v = v & ((1 << 122) - 1);
            assert_eq!(gather(spread(v)), v);
        }
    }
}
