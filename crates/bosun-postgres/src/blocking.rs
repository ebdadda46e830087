//! Where the driver may block.

/// Calls `f` where the driver may block: off the async runtime's worker
/// threads. The driver runs a runtime of its own for each connection and
/// blocks on it, which tokio refuses on a thread driving another runtime's
/// tasks; the daemon calls the store from such threads as it calls SQLite
/// (briefly blocking). On a multi-threaded runtime the worker hands its
/// tasks to others for the call (`block_in_place`); on a current-thread one
/// the call runs on a scoped thread of its own.
pub(crate) fn off_runtime<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        Ok(_) => std::thread::scope(|s| match s.spawn(f).join() {
            Ok(v) => v,
            Err(panic) => std::panic::resume_unwind(panic),
        }),
        Err(_) => f(),
    }
}
