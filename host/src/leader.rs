//! Leader election on a `coordination.k8s.io/v1` Lease, the way client-go's
//! `tools/leaderelection` does it, and the [`LeaderGate`](kubewasm_runtime::LeaderGate) the rest of the host reads.
//!
//! Every replica runs a [`LeaderElector`] on the same Lease. The one holding it renews it every
//! retry period; the others poll it every retry period and take it once the record has not
//! changed for the lease duration. Guarantees:
//!
//! - **No overlap.** A leader's gate closes at the renew deadline counted from the *start* of its
//!   last successful renewal, even if the elector task is starved ([`LeaderGate::is_leader`](kubewasm_runtime::LeaderGate::is_leader)
//!   checks the deadline itself). Another replica can only take the Lease once it has seen the
//!   same record for a whole lease duration, counted from when *it* observed the record (after
//!   that renewal reached the server), and the renew deadline is shorter than the lease duration.
//! - **Clock-skew safety.** The timestamps in the Lease are written for humans and other tools;
//!   no decision reads them. Expiry is judged on this replica's monotonic clock.
//! - **Optimistic concurrency.** Every update carries the `resourceVersion` last read; a conflict
//!   means another replica wrote first, and this attempt simply fails.
//! - **Leadership follows health.** An elector given an eligibility
//!   ([`LeaderElector::with_eligibility`], in the host [`crate::health::ApiHealth`]: whether
//!   the informers reach the API server) steps down and releases its Lease while it says no,
//!   and contends again only once it says yes: a replica whose watches are dead stops leading
//!   blind even while its renewals still get through.
//! - **Graceful hand-over.** On shutdown the leader closes its gate, then empties the holder and
//!   sets a one-second duration (client-go's `ReleaseOnCancel`), so a standby takes over on its
//!   next retry.

mod balance;
mod elector;
mod options;
mod sharded;

pub use balance::{Balance, Membership};
pub use elector::LeaderElector;
pub use options::{ElectionOptions, LeaderError, default_identity};
pub use sharded::{Sharded, spawn_sharded};

#[cfg(test)]
mod tests;
