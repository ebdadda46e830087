//! The SQLite store's errors: a failure of the database is
//! [`StoreError::Unavailable`], and a writer transaction's failure (a batch,
//! a fold) is a [`TxError`], whose message every request of the batch gets.

use crate::StoreError;

/// The store cannot commit or read now (see [`StoreError::Unavailable`]).
pub(super) fn unavailable(e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(e.to_string())
}

/// Why a writer transaction (a batch of requests, a fold of the fire log)
/// was not committed; nothing of it was written.
#[derive(Debug, thiserror::Error)]
pub(super) enum TxError {
    /// SQLite failed (opening the transaction, a statement, the commit).
    #[error(transparent)]
    Sql(#[from] rusqlite::Error),
    /// A read or write of the store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A request of the batch failed on the database itself: its message.
    #[error("{0}")]
    Request(String),
    /// SQLite rolled the transaction back on its own.
    #[error("transaction rolled back")]
    RolledBack,
}
