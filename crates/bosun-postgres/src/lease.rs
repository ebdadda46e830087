//! Leadership: a lease row in the database and the term that fences every
//! write of the leader.
//!
//! A replica becomes the leader by taking the lease when it is free or
//! expired ([`Lease::try_acquire`]), which raises its term; it keeps it by
//! renewing before it expires ([`Lease::renew`]), and gives it up on a
//! graceful stop ([`Lease::resign`]), so a follower takes over at its next
//! try. Only the database's clock decides expiry: replicas' clocks may
//! disagree.
//!
//! While a replica leads, its store carries a [`Fence`]
//! ([`PgStore::set_fence`](crate::PgStore::set_fence)): every write
//! transaction checks, in the same transaction (first thing; for a batch of
//! creations, in the one statement that writes them, and it is rolled back
//! when the check fails), that the lease is still its own, of that term,
//! and not expired, and holds the row shared until it commits. A takeover (which updates the row) therefore waits
//! for the old leader's writes in flight, and a write that begins after it
//! fails with [`StoreError::Fenced`] and commits nothing: a leader that was
//! paused or cut off past its lease writes nothing of its old term.
//!
//! The lease says nothing of what a leader does outside the database (pods,
//! forge calls): the daemon checks its trust window, measured on its own
//! monotonic clock from each renewal, before those.

use std::time::Duration;

use bosun_store::StoreError;
use jiff::Timestamp;

use r2d2_postgres::PostgresConnectionManager;

use crate::blocking::off_runtime;
use crate::error::unavailable;

type Pool = r2d2::Pool<PostgresConnectionManager<crate::tls::Connector>>;

/// A lease as the database has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseInfo {
    /// Who holds it (empty after a resignation).
    pub holder: String,
    /// Its term.
    pub term: i64,
    /// When the holder took it (its term began).
    pub since: Timestamp,
    /// When it was last renewed.
    pub renewed_at: Timestamp,
    /// When it expires unless renewed.
    pub expires_at: Timestamp,
    /// Whether it is held now (by the database's clock).
    pub live: bool,
}

/// What fences a leader's writes: its lease, holder and term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    /// The lease's name.
    pub name: String,
    /// This process.
    pub holder: String,
    /// The term it leads.
    pub term: i64,
}

/// A replica's handle on one lease.
#[derive(Clone)]
pub struct Lease {
    pool: Pool,
    name: String,
    holder: String,
    ttl: Duration,
}

impl Lease {
    pub(crate) fn new(pool: Pool, name: &str, holder: &str, ttl: Duration) -> Lease {
        Lease {
            pool,
            name: name.to_string(),
            holder: holder.to_string(),
            ttl,
        }
    }

    /// This process's name as a holder.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// The lease's time to live.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Takes the lease if it is free, expired or resigned, or held by an
    /// earlier start of this replica (a holder is `NAME#START`: the same
    /// `NAME`, another `START`; that process is gone, or it is fenced by
    /// the new term): its new term. None: another holder has it.
    pub fn try_acquire(&self) -> Result<Option<i64>, StoreError> {
        off_runtime(|| {
            let mut c = self.pool.get().map_err(crate::error::no_connection)?;
            let row = c
                .query_opt(
                    "INSERT INTO leases AS l (name, holder, term, acquired_at, renewed_at, expires_at)
                     VALUES ($1, $2, 1, now(), now(), now() + make_interval(secs => $3))
                     ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, term = l.term + 1,
                        acquired_at = now(), renewed_at = now(), expires_at = EXCLUDED.expires_at
                     WHERE l.expires_at <= now() OR l.holder = ''
                    OR (position('#' IN l.holder) > 0
                        AND split_part(l.holder, '#', 1) = split_part(EXCLUDED.holder, '#', 1)
                        AND l.holder <> EXCLUDED.holder)
                     RETURNING term",
                    &[&self.name, &self.holder, &self.ttl.as_secs_f64()],
                )
                .map_err(unavailable)?;
            Ok(row.map(|r| r.get(0)))
        })
    }

    /// Extends the lease of `term` by its time to live, if this process
    /// still holds it unexpired (true). Once expired it is never renewed:
    /// taking it again is a new term.
    ///
    /// A pooled connection the server ended while it idled (every backend
    /// terminated, a restart) fails at its first use: the renewal is then
    /// made on another, as a renewal made twice only extends the same
    /// term's lease. A leader does not lose its lease to stale connections.
    pub fn renew(&self, term: i64) -> Result<bool, StoreError> {
        off_runtime(|| {
            let mut reconnects = 0;
            loop {
                let mut c = self.pool.get().map_err(crate::error::no_connection)?;
                match c.execute(
                    "UPDATE leases SET renewed_at = now(), expires_at = now() + make_interval(secs => $4)
                     WHERE name = $1 AND holder = $2 AND term = $3 AND expires_at > now()",
                    &[&self.name, &self.holder, &term, &self.ttl.as_secs_f64()],
                ) {
                    Ok(n) => return Ok(n == 1),
                    Err(e)
                        if c.is_closed()
                            && reconnects < crate::error::pooled_reconnects(&self.pool) =>
                    {
                        reconnects += 1;
                        tracing::debug!(error = %crate::error::describe(&e), "a closed connection; renewing on another");
                    }
                    Err(e) => return Err(unavailable(e)),
                }
            }
        })
    }

    /// Gives up the lease of `term` (a graceful stop): free at once for the
    /// next replica that tries. True when it was still held.
    pub fn resign(&self, term: i64) -> Result<bool, StoreError> {
        off_runtime(|| {
            let mut c = self.pool.get().map_err(crate::error::no_connection)?;
            let n = c
                .execute(
                    "UPDATE leases SET holder = '', expires_at = now()
                     WHERE name = $1 AND holder = $2 AND term = $3",
                    &[&self.name, &self.holder, &term],
                )
                .map_err(unavailable)?;
            if n == 1 {
                // Followers listening try at once.
                let _ = c.execute(
                    "SELECT pg_notify($1, $2)",
                    &[&crate::listen::LEASE, &self.name],
                );
            }
            Ok(n == 1)
        })
    }

    /// The lease as the database has it now (none: never taken).
    pub fn current(&self) -> Result<Option<LeaseInfo>, StoreError> {
        off_runtime(|| {
            let mut c = self.pool.get().map_err(crate::error::no_connection)?;
            let row = c
                .query_opt(
                    "SELECT holder, term,
                        (extract(epoch FROM acquired_at) * 1000000)::bigint,
                        (extract(epoch FROM renewed_at) * 1000000)::bigint,
                        (extract(epoch FROM expires_at) * 1000000)::bigint,
                        holder <> '' AND expires_at > now()
                     FROM leases WHERE name = $1",
                    &[&self.name],
                )
                .map_err(unavailable)?;
            row.map(|r| {
                Ok(LeaseInfo {
                    holder: r.get(0),
                    term: r.get(1),
                    since: crate::rows::ts(r.get(2))?,
                    renewed_at: crate::rows::ts(r.get(3))?,
                    expires_at: crate::rows::ts(r.get(4))?,
                    live: r.get(5),
                })
            })
            .transpose()
        })
    }

    /// The fence of `term` for this holder.
    pub fn fence(&self, term: i64) -> Fence {
        Fence {
            name: self.name.clone(),
            holder: self.holder.clone(),
            term,
        }
    }
}

/// Whether the lease `fence` names is still its holder's, of its term and
/// unexpired: checked first thing in a write transaction, holding the
/// lease's row shared until the transaction ends.
pub(crate) fn holds(
    tx: &mut postgres::Transaction<'_>,
    fence: &Fence,
) -> Result<bool, postgres::Error> {
    Ok(tx
        .query_opt(
            "SELECT 1 FROM leases WHERE name = $1 AND holder = $2 AND term = $3 AND expires_at > now() FOR SHARE",
            &[&fence.name, &fence.holder, &fence.term],
        )?
        .is_some())
}
