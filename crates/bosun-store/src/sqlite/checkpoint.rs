//! Checkpoints: a thread of their own copies the WAL into the database beside
//! the writer, and the writer bounds the WAL's length itself under a steady
//! load ([`WAL_RESTART_FRAMES`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::Connection;

/// The least time between two checkpoints.
const CHECKPOINT_PAUSE: Duration = Duration::from_millis(500);

/// The WAL length (in frames, about 4 KiB each) past which the writer
/// finishes a checkpoint itself, between two batches.
///
/// The checkpoint thread copies the WAL into the database beside the writer,
/// but under a steady stream of commits it never catches up: every pass ends
/// behind the frames committed while it ran, and SQLite starts the WAL over
/// from its beginning only once every frame is copied. The WAL then grows for
/// as long as the load lasts (about 13 MB per thousand runs created), and
/// each commit appends to new blocks of the file. Between two of its own
/// batches the writer is the only one who could commit, so its checkpoint
/// copies every frame (unless a reader still needs an old one) and its next
/// commit starts the WAL over.
///
/// 4,096 frames (16 MiB): a checkpoint copies a page once however many
/// commits rewrote it, so a longer WAL costs less per commit. With 1,000
/// frames, 10,000 POSTs in `run_bench` took 0.78–0.94 s; with 4,096,
/// 0.65–0.85 s, as without any bound (0.75 s, with a 130 MB WAL).
pub(super) const WAL_RESTART_FRAMES: i32 = 4096;

thread_local! {
    /// The WAL's length in frames after the writer's last commit, as SQLite's
    /// WAL hook reports it (the writer's connection commits on its own thread
    /// only).
    static WAL_FRAMES: std::cell::Cell<i32> = const { std::cell::Cell::new(0) };
}

/// Keeps the WAL short under a steady load (see [`WAL_RESTART_FRAMES`]):
/// checkpoints on the writer's connection once the WAL holds `*next` frames.
/// A checkpoint that could not copy everything (a reader holds an old
/// snapshot) is tried again a quarter of the limit later, not after every
/// commit.
pub(super) fn bound_wal(conn: &Connection, next: &mut i32) {
    let frames = WAL_FRAMES.with(std::cell::Cell::get);
    if frames < WAL_RESTART_FRAMES {
        *next = WAL_RESTART_FRAMES;
        return;
    }
    if frames < *next {
        return;
    }
    // A failure (another checkpoint holds the lock) is tried again later.
    let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
    *next = frames + WAL_RESTART_FRAMES / 4;
}

/// What the writer tells the checkpoint thread of its commits: a flag set
/// with every commit, and a wake-up only when that thread waits for one.
/// Under a steady load the thread sleeps out its pause and finds the flag
/// set; a message a commit, as before, woke it (and made the writer pay a
/// system call) thousands of times a second for one pass every
/// [`CHECKPOINT_PAUSE`].
pub(super) struct Commits {
    notes: Arc<CommitNotes>,
    wake: mpsc::SyncSender<()>,
}

/// The flags [`Commits`] shares with the checkpoint thread.
#[derive(Default)]
pub(super) struct CommitNotes {
    /// Set by every commit; cleared by the checkpoint thread before a pass.
    committed: AtomicBool,
    /// Set while the checkpoint thread waits for a commit.
    waiting: AtomicBool,
}

/// The checkpoint thread's side of [`Commits`]: the flags, and the
/// wake-ups, which end when the writer's side is dropped.
pub(super) struct CommitWatch {
    notes: Arc<CommitNotes>,
    woken: Receiver<()>,
}

impl Commits {
    /// The writer's side, and the checkpoint thread's.
    pub(super) fn new() -> (Commits, CommitWatch) {
        let notes = Arc::new(CommitNotes::default());
        let (wake, woken) = mpsc::sync_channel(1);
        (
            Commits {
                notes: notes.clone(),
                wake,
            },
            CommitWatch { notes, woken },
        )
    }

    /// Notes a commit; wakes the checkpoint thread if it waits for one.
    pub(super) fn committed(&self) {
        // SeqCst with the thread's own `waiting` then `committed`: one of
        // the two sides sees the other's store, so no commit is missed.
        self.notes.committed.store(true, Ordering::SeqCst);
        if self.notes.waiting.swap(false, Ordering::SeqCst) {
            let _ = self.wake.try_send(());
        }
    }
}

impl CommitWatch {
    /// Returns once the writer has committed since the flag was last
    /// cleared (false: the writer ended).
    fn wait_for_commit(&self) -> bool {
        loop {
            self.notes.waiting.store(true, Ordering::SeqCst);
            if self.notes.committed.load(Ordering::SeqCst) {
                self.notes.waiting.store(false, Ordering::SeqCst);
                return true;
            }
            if self.woken.recv().is_err() {
                return false;
            }
        }
    }

    /// Sleeps until `until` (false: the writer ended meanwhile). Only the
    /// writer's end, or a wake-up left from an earlier wait, comes through
    /// the channel meanwhile.
    fn pause_until(&self, until: std::time::Instant) -> bool {
        use mpsc::RecvTimeoutError;
        loop {
            let left = until.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return true;
            }
            match self.woken.recv_timeout(left) {
                Ok(()) => {}
                Err(RecvTimeoutError::Timeout) => return true,
                Err(RecvTimeoutError::Disconnected) => return false,
            }
        }
    }
}

/// Copies committed WAL frames into the database when the writer has
/// committed since the last pass, at most every CHECKPOINT_PAUSE; ends as soon
/// as the writer does.
pub(super) fn checkpoint_loop(conn: Connection, watch: CommitWatch) {
    while watch.wait_for_commit() {
        // Commits from now on are for the next pass. A busy or failed pass
        // is retried after the next commit.
        watch.notes.committed.store(false, Ordering::SeqCst);
        let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
        if !watch.pause_until(std::time::Instant::now() + CHECKPOINT_PAUSE) {
            return;
        }
    }
}

/// Has SQLite report the WAL's length after every commit of `conn` (the
/// writer's, on its own thread) to [`bound_wal`].
pub(super) fn track_wal(conn: &Connection) {
    conn.wal_hook(Some(|_, frames| {
        WAL_FRAMES.with(|f| f.set(frames));
        Ok(())
    }));
}
