//! How a guest call ended ([`Outcome`]) and a plugin's counts of how its calls ended
//! ([`CallCounters`]), which its status reports.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::observer::{DropReason, FailureKind};

/// How a guest call ended.
#[derive(Debug)]
pub(crate) enum Outcome<T> {
    /// The guest returned `ok`.
    Ok(T),
    /// The guest returned `err(reason)`; the instance is fine.
    GuestError(String),
    /// The instance faulted and must be thrown away.
    Failed(FailureKind, String),
}

impl<T> Outcome<T> {
    /// The same ending with the value of a returned call mapped.
    pub(crate) fn map<U>(self, f: impl FnOnce(T) -> U) -> Outcome<U> {
        match self {
            Outcome::Ok(v) => Outcome::Ok(f(v)),
            Outcome::GuestError(reason) => Outcome::GuestError(reason),
            Outcome::Failed(kind, reason) => Outcome::Failed(kind, reason),
        }
    }
}

/// Counts of a plugin's guest calls (handler calls, reconciles) by how they ended, for its
/// status.
#[derive(Debug, Default)]
pub(crate) struct CallCounters {
    /// Events handled by handler calls that returned (ok or err).
    pub(crate) returned: AtomicU64,
    /// Events whose handler call returned `err`.
    pub(crate) errors: AtomicU64,
    /// Reconciles that returned (ok or err).
    pub(crate) reconciles: AtomicU64,
    /// Reconciles that returned `err`.
    pub(crate) reconcile_errors: AtomicU64,
    pub(crate) traps: AtomicU64,
    pub(crate) timeouts: AtomicU64,
    pub(crate) memory_faults: AtomicU64,
    /// Events the plugin did not receive, by [`DropReason`].
    dropped: [AtomicU64; DropReason::ALL.len()],
}

impl CallCounters {
    /// Counts how a call ended.
    pub(crate) fn count<T>(&self, outcome: &Outcome<T>) {
        let counter = match outcome {
            Outcome::Ok(_) => &self.returned,
            Outcome::GuestError(_) => {
                self.returned.fetch_add(1, Ordering::Relaxed);
                &self.errors
            }
            Outcome::Failed(FailureKind::Trap, _) => &self.traps,
            Outcome::Failed(FailureKind::Timeout, _) => &self.timeouts,
            Outcome::Failed(FailureKind::Memory, _) => &self.memory_faults,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts how a reconcile ended: apart from the events handled, but faults alike.
    pub(crate) fn count_reconcile<T>(&self, outcome: &Outcome<T>) {
        match outcome {
            Outcome::Ok(_) => {
                self.reconciles.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::GuestError(_) => {
                self.reconciles.fetch_add(1, Ordering::Relaxed);
                self.reconcile_errors.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::Failed(..) => self.count(outcome),
        }
    }

    /// Counts `n` events the plugin did not receive, for `reason`.
    pub(crate) fn drop_events(&self, reason: DropReason, n: u64) {
        self.dropped[reason as usize].fetch_add(n, Ordering::Relaxed);
    }

    /// Events dropped for `reason` so far.
    pub(crate) fn dropped(&self, reason: DropReason) -> u64 {
        self.dropped[reason as usize].load(Ordering::Relaxed)
    }

    /// Counts `n` events handled by calls that returned, `errors` of them failed.
    pub(crate) fn returned_events(&self, n: usize, errors: usize) {
        self.returned.fetch_add(n as u64, Ordering::Relaxed);
        self.errors.fetch_add(errors as u64, Ordering::Relaxed);
    }
}
