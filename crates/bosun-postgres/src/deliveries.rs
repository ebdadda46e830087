//! Webhook deliveries in PostgreSQL: the acceptor thread's batch
//! (`accept_batch`: every delivery waiting stored in one transaction under
//! one lock of the seq row), and how a failed batch is told apart (bad
//! input, refused alone, from the database being out of reach).

use std::collections::HashMap;

use bosun_store::repos::{Accepted, NewDelivery};
use bosun_store::StoreError;
use postgres::Transaction;

use crate::rows::{micros, DELIVERY_COLUMNS};

/// Whether a batch failed on what one of its values holds (PostgreSQL's
/// data exceptions and integrity violations, SQLSTATE classes 22 and 23, as
/// `describe` ends its message), not on the database being out of reach.
pub(crate) fn bad_data(e: &StoreError) -> bool {
    let StoreError::Unavailable(m) = e else {
        return matches!(e, StoreError::Invalid(_));
    };
    let code = m.len().checked_sub(7).and_then(|i| m.get(i..));
    code.is_some_and(|c| (c.starts_with("(22") || c.starts_with("(23")) && c.ends_with(')'))
}

/// The same failure again, for each delivery of a batch that failed.
pub(crate) fn same_error(e: &StoreError) -> StoreError {
    match e {
        StoreError::NotFound(m) => StoreError::NotFound(m.clone()),
        StoreError::InvalidTransition { id, from, to } => StoreError::InvalidTransition {
            id: id.clone(),
            from: *from,
            to: *to,
        },
        StoreError::Unavailable(m) => StoreError::Unavailable(m.clone()),
        StoreError::Invalid(m) => StoreError::Invalid(m.clone()),
        StoreError::Stale(m) => StoreError::Stale(m.clone()),
        StoreError::Fenced(m) => StoreError::Fenced(m.clone()),
        StoreError::Conflict(m) => StoreError::Conflict(m.clone()),
    }
}

/// Stores `news` in order under the next seqs, in the caller's transaction:
/// the seq row locked first (accepts commit in seq order, and the duplicate
/// check sees every accept before this one); a (forge, delivery id) kept
/// already, or earlier in the batch, is a duplicate and takes no seq.
pub(crate) fn accept_batch(
    tx: &mut Transaction<'_>,
    news: &[&NewDelivery],
) -> Result<Vec<Accepted>, postgres::Error> {
    let last: i64 = tx
        .query_one(
            "SELECT value FROM meta WHERE key = 'delivery_seq' FOR UPDATE",
            &[],
        )?
        .get(0);
    let (forges, ids): (Vec<&str>, Vec<&str>) = news
        .iter()
        .filter(|d| !d.delivery_id.is_empty())
        .map(|d| (d.forge.as_str(), d.delivery_id.as_str()))
        .unzip();
    let mut kept: HashMap<(String, String), (u64, bool)> = HashMap::new();
    if !forges.is_empty() {
        for r in tx.query(
            "SELECT d.forge, d.delivery_id, d.seq, d.processed_at IS NOT NULL
             FROM deliveries d JOIN unnest($1::text[], $2::text[]) AS k(forge, id)
               ON d.forge = k.forge AND d.delivery_id = k.id",
            &[&forges, &ids],
        )? {
            kept.insert((r.get(0), r.get(1)), (r.get::<_, i64>(2) as u64, r.get(3)));
        }
    }
    let mut answers = Vec::with_capacity(news.len());
    let mut seq = last;
    #[allow(clippy::type_complexity)]
    let mut rows: (
        Vec<i64>,
        Vec<&str>,
        Vec<&str>,
        Vec<&str>,
        Vec<Option<&str>>,
        Vec<&[u8]>,
        Vec<i64>,
    ) = Default::default();
    for d in news {
        let key = (d.forge.clone(), d.delivery_id.clone());
        if !d.delivery_id.is_empty() {
            if let Some((first, processed)) = kept.get(&key) {
                answers.push(Accepted::Duplicate {
                    seq: *first,
                    processed: *processed,
                });
                continue;
            }
        }
        seq += 1;
        if !d.delivery_id.is_empty() {
            kept.insert(key, (seq as u64, false));
        }
        rows.0.push(seq);
        rows.1.push(&d.forge);
        rows.2.push(&d.event);
        rows.3.push(&d.delivery_id);
        rows.4.push(d.repo.as_deref());
        rows.5.push(&d.body);
        rows.6.push(micros(bosun_store::run::micros(d.received_at)));
        answers.push(Accepted::New { seq: seq as u64 });
    }
    if seq > last {
        tx.execute(
            &format!(
                "INSERT INTO deliveries({DELIVERY_COLUMNS})
                 SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bytea[], $7::bigint[])"
            ),
            &[&rows.0, &rows.1, &rows.2, &rows.3, &rows.4, &rows.5, &rows.6],
        )?;
        tx.execute(
            "UPDATE meta SET value = $1 WHERE key = 'delivery_seq'",
            &[&seq],
        )?;
    }
    Ok(answers)
}
