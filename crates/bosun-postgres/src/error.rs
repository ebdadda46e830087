//! Database errors as the store's: every failure of the database or the
//! connection is [`StoreError::Unavailable`] (nothing was written: the
//! transaction is rolled back), with PostgreSQL's own message.

use bosun_store::StoreError;

/// How many times the pipeline of creations dials its own connection again
/// after the server ended it, before a creation fails.
pub(crate) const RECONNECTS: usize = 4;

/// How many closed pooled connections a call steps over before it fails:
/// as many as `pool` can hold, and one more. After the server restarted,
/// or ended every backend, each idle one is closed, and is found so only
/// when a call fails on it (`test_on_check_out` is off).
pub(crate) fn pooled_reconnects<M: r2d2::ManageConnection>(pool: &r2d2::Pool<M>) -> usize {
    pool.max_size() as usize + 1
}

/// A database error as [`StoreError::Unavailable`].
pub(crate) fn unavailable(e: postgres::Error) -> StoreError {
    StoreError::Unavailable(describe(&e))
}

/// A pool error (no connection within the pool's timeout) as
/// [`StoreError::Unavailable`].
pub(crate) fn no_connection(e: r2d2::Error) -> StoreError {
    StoreError::Unavailable(format!("no connection to PostgreSQL: {e}"))
}

/// PostgreSQL's message and code, or the client's error with what caused
/// it (a TLS handshake's failure says which certificate check failed).
pub(crate) fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => {
            let mut text = e.to_string();
            let mut cause = std::error::Error::source(e);
            while let Some(c) = cause {
                let more = c.to_string();
                if !text.contains(&more) {
                    text = format!("{text}: {more}");
                }
                cause = c.source();
            }
            text
        }
    }
}

/// True when the transaction failed only because it ran beside another
/// (a serialization failure or a deadlock): it is tried again.
pub(crate) fn is_conflict(e: &postgres::Error) -> bool {
    e.code().is_some_and(|c| {
        *c == postgres::error::SqlState::T_R_SERIALIZATION_FAILURE
            || *c == postgres::error::SqlState::T_R_DEADLOCK_DETECTED
    })
}

/// True when the server ended the session (`57P01` an administrator's
/// termination or a shutdown, `57P02` a crash, `57P03` not accepting
/// connections now, `57P04` the database dropped): the first answer a
/// client waiting on it gets, so nothing it sent after ran.
pub(crate) fn ended_session(e: &postgres::Error) -> bool {
    e.code().is_some_and(|c| c.code().starts_with("57P"))
}
