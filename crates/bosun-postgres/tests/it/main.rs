//! bosun-postgres's integration tests, on a real PostgreSQL server the tests
//! start (`bosun_kubetest::postgres`), in one test binary. The store's rules
//! themselves are bosun-store's conformance suite, which runs against this
//! store too; these are what only a shared database shows: several stores
//! (replicas) on one database, and the server going away.

mod lease;
mod replicas;
mod tls;

use bosun_kubetest::postgres::Postgres;
use bosun_store::{RunFilter, Store};

/// Uses a few of `store`'s pooled connections at once, then (once the
/// pool has settled) has the server end every backend of the database `url` names (as an
/// administrator's `pg_terminate_backend`), and waits a moment.
pub(crate) fn end_every_backend(pg: &Postgres, url: &str, store: &dyn Store) {
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| store.list(&RunFilter::default()).unwrap());
        }
    });
    // The pool's connections made in the background are made by now.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let db = url.rsplit('/').next().unwrap();
    let ended = pg
        .admin(
            db,
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        .unwrap();
    assert_ne!(ended, "0", "backends were ended");
    std::thread::sleep(std::time::Duration::from_millis(200));
}
