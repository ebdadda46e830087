//! What other replicas commit, told to this one: `LISTEN`/`NOTIFY`.
//!
//! Every write transaction that creates runs or changes their states sends
//! `NOTIFY bosun_runs` with its origin (the store that wrote) and, per run,
//! its id and the state it left; PostgreSQL delivers it only if the
//! transaction commits, after the commit. A store that listens
//! ([`PgStore::listen`](crate::PgStore::listen)) reads the runs other
//! stores changed and tells its remote observer, so that a run created on
//! a follower is in the leader's active runs (and wakes its controller) at
//! once, without polling. A resignation of the leader's lease sends
//! `NOTIFY bosun_lease`, so followers try at once.
//!
//! Notifications need a session connection (a transaction-mode pooler such
//! as PgBouncer's loses them). The listener has a connection of its own;
//! when it is lost, it connects again and then calls the resync hook:
//! changes sent meanwhile were missed, and the hook reads anew what it
//! keeps.

use std::sync::Arc;
use std::time::Duration;

use bosun_store::{Before, RunState, TransitionObserver};
use postgres::fallible_iterator::FallibleIterator;

use crate::rows::RUN_COLUMNS;

/// The channel of run changes.
pub(crate) const RUNS: &str = "bosun_runs";
/// The channel of lease resignations.
pub(crate) const LEASE: &str = "bosun_lease";
/// The channel of abort requests.
pub(crate) const ABORTS: &str = "bosun_aborts";

/// The largest payload sent in one notification (PostgreSQL's limit is
/// 8,000 bytes).
const PAYLOAD_MAX: usize = 7_000;

/// Sends the changes of `changes` (run id, state left; none: created) from
/// `origin` in `tx`, in as many notifications as their size needs.
pub(crate) fn notify(
    tx: &mut postgres::Transaction<'_>,
    origin: &str,
    changes: &[(String, Option<RunState>)],
) -> Result<(), postgres::Error> {
    let mut payload = String::new();
    for (id, before) in changes {
        if payload.len() + id.len() + 16 > PAYLOAD_MAX {
            tx.execute("SELECT pg_notify($1, $2)", &[&RUNS, &payload])?;
            payload.clear();
        }
        if payload.is_empty() {
            payload.push_str(origin);
        }
        payload.push(' ');
        payload.push_str(id);
        payload.push(':');
        payload.push_str(before.map_or("-", RunState::as_str));
    }
    if !payload.is_empty() {
        tx.execute("SELECT pg_notify($1, $2)", &[&RUNS, &payload])?;
    }
    Ok(())
}

/// Runs a notification names: (id, state left; none: created).
type Changes<'a> = Vec<(&'a str, Option<RunState>)>;

/// A notification's changes: its origin and (id, state left).
fn parse(payload: &str) -> Option<(&str, Changes<'_>)> {
    let mut words = payload.split(' ');
    let origin = words.next()?;
    let changes = words
        .filter_map(|w| {
            let (id, before) = w.split_once(':')?;
            let before = match before {
                "-" => None,
                s => Some(s.parse().ok()?),
            };
            Some((id, before))
        })
        .collect();
    Some((origin, changes))
}

/// What the listener tells.
pub struct Hooks {
    /// Told of every run another store created or moved (`before`: none for
    /// a creation), after its commit.
    pub remote: Arc<dyn TransitionObserver>,
    /// Called when the lease was resigned (a follower tries at once).
    pub lease_free: Box<dyn Fn() + Send + Sync>,
    /// Called when a replica requested aborts (the leader carries them out).
    pub aborts: Box<dyn Fn() + Send + Sync>,
    /// Called after the listener connected again: changes may have been
    /// missed; read anew what is kept.
    pub resync: Box<dyn Fn() + Send + Sync>,
}

/// The listener's loop (its own thread): connects, listens, tells; connects
/// again after a loss, then resyncs.
pub(crate) fn run(
    config: postgres::Config,
    tls: crate::tls::Connector,
    origin: String,
    hooks: Hooks,
    ready: std::sync::mpsc::Sender<()>,
) {
    let mut first = true;
    loop {
        match listen_once(&config, &tls, &origin, &hooks, first, &ready) {
            Ok(()) => return,
            Err(e) => {
                tracing::warn!(error = %crate::error::describe(&e), "the store's listener lost its connection; connecting again");
                first = false;
                std::thread::sleep(Duration::from_millis(500));
            }
        }
    }
}

fn listen_once(
    config: &postgres::Config,
    tls: &crate::tls::Connector,
    origin: &str,
    hooks: &Hooks,
    first: bool,
    ready: &std::sync::mpsc::Sender<()>,
) -> Result<(), postgres::Error> {
    let mut c = config.connect(tls.clone())?;
    c.batch_execute(&format!("LISTEN {RUNS}; LISTEN {LEASE}; LISTEN {ABORTS}"))?;
    // Listening: what is committed from now on is heard.
    let _ = ready.send(());
    if !first {
        (hooks.resync)();
    }
    loop {
        // Wait for the next notification; a quiet minute checks the
        // connection with a query.
        let next = {
            let mut n = c.notifications();
            let mut it = n.timeout_iter(Duration::from_secs(60));
            it.next()?
        };
        let Some(n) = next else {
            c.simple_query("SELECT 1")?;
            continue;
        };
        if n.channel() == LEASE {
            (hooks.lease_free)();
            continue;
        }
        if n.channel() == ABORTS {
            (hooks.aborts)();
            continue;
        }
        let Some((from, changes)) = parse(n.payload()) else {
            continue;
        };
        if from == origin || changes.is_empty() {
            continue;
        }
        let ids: Vec<&str> = changes.iter().map(|(id, _)| *id).collect();
        let rows = c.query(
            &format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ANY($1)"),
            &[&ids],
        )?;
        for row in &rows {
            let Ok(run) = crate::rows::run(row) else {
                continue;
            };
            let before = changes
                .iter()
                .find(|(id, _)| *id == run.id)
                .and_then(|(_, b)| *b);
            hooks.remote.on_change(
                &run,
                None,
                before.map(|state| Before {
                    state,
                    cluster: run.cluster.as_deref(),
                }),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_reads_back_its_origin_and_changes() {
        let (origin, changes) = parse("o1 a:- b:pending c:bogus").expect("a payload");
        assert_eq!(origin, "o1");
        assert_eq!(
            changes,
            vec![("a", None), ("b", Some(RunState::Pending))],
            "an unknown state is left out"
        );
    }
}
