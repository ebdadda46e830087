//! Locks that outlive a panic. A thread that panics while holding a
//! [`Mutex`] poisons it; bosun's data behind a lock is kept consistent at
//! every await or return point (a panic leaves nothing half-changed that a
//! later holder would misread), so every lock is taken past the poison.

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// [`Mutex::lock`] that takes the lock even when a panicking holder
/// poisoned it.
pub trait Lock<T: ?Sized> {
    /// The guard, poisoned or not.
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> Lock<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// [`RwLock::read`] and [`RwLock::write`] past the poison, as [`Lock`].
pub trait ReadWrite<T: ?Sized> {
    /// The read guard, poisoned or not.
    fn read_locked(&self) -> RwLockReadGuard<'_, T>;
    /// The write guard, poisoned or not.
    fn write_locked(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T: ?Sized> ReadWrite<T> for RwLock<T> {
    fn read_locked(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write_locked(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_is_taken_with_its_data() {
        let m = std::sync::Arc::new(Mutex::new(1));
        let m2 = m.clone();
        let _ = std::thread::spawn(move || {
            let mut g = m2.lock().unwrap();
            *g = 2;
            panic!("poison it");
        })
        .join();
        assert!(m.is_poisoned());
        assert_eq!(*m.locked(), 2);
    }
}
