//! The leader gate: whether this replica leads, the one fact the runtime needs of leader
//! election. The host's elector opens and closes it; the write client and the reconcile
//! workers only read it, so a standby replica's controllers never write.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::Instant;

/// Whether this replica leads, cheap to read from any thread: one Lease, or each shard's.
///
/// Cloning shares the state. A gate made by [`LeaderGate::always`] (leader election off) is
/// always open. The elector of each shard opens that shard with a deadline;
/// [`LeaderGate::leads_shard`] is false from that deadline on even if the elector has not run
/// since, so a starved elector can never leave a write going out after the lease could have
/// been taken. Without sharding there is one shard, the whole cluster.
#[derive(Clone)]
pub struct LeaderGate {
    inner: Arc<GateInner>,
}

struct GateInner {
    /// The Lease name (for metrics and logs); empty when leader election is off. With shards,
    /// the prefix of each shard's Lease name ([`LeaderGate::shard_lease`]).
    lease: String,
    /// This replica's identity in the Lease; empty when leader election is off.
    identity: String,
    shards: Vec<ShardSlot>,
    /// Whether any shard is led, as last reported by an elector.
    changes: watch::Sender<bool>,
    /// Bumped on every transition of any shard.
    transitions: watch::Sender<u64>,
}

struct ShardSlot {
    open: AtomicBool,
    /// Until when an open shard stays open without a renewal; `None`: no deadline.
    until: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for LeaderGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderGate")
            .field("lease", &self.inner.lease)
            .field("led_shards", &self.led_shards())
            .finish()
    }
}

impl LeaderGate {
    /// A gate for `identity`'s leader election on `lease`, closed until the elector opens it.
    pub fn new(lease: &str, identity: &str) -> LeaderGate {
        LeaderGate::sharded(lease, identity, 1)
    }

    /// A gate over `shards` shards (at least one) whose Leases are named after `lease`
    /// ([`LeaderGate::shard_lease`]), all closed until their electors open them.
    pub fn sharded(lease: &str, identity: &str, shards: usize) -> LeaderGate {
        LeaderGate::with_state(lease, identity, shards.max(1), false)
    }

    /// A gate that is always open: this replica is the only one (leader election off).
    pub fn always() -> LeaderGate {
        LeaderGate::with_state("", "", 1, true)
    }

    fn with_state(lease: &str, identity: &str, shards: usize, open: bool) -> LeaderGate {
        LeaderGate {
            inner: Arc::new(GateInner {
                lease: lease.to_owned(),
                identity: identity.to_owned(),
                shards: (0..shards)
                    .map(|_| ShardSlot {
                        open: AtomicBool::new(open),
                        until: Mutex::new(None),
                    })
                    .collect(),
                changes: watch::Sender::new(open),
                transitions: watch::Sender::new(0),
            }),
        }
    }

    /// The Lease this gate follows (with shards, the prefix of their names); empty when leader
    /// election is off.
    pub fn lease(&self) -> &str {
        &self.inner.lease
    }

    /// The Lease of shard `shard`: the lease name itself without sharding, else
    /// `<lease>-shard-<shard>`.
    pub fn shard_lease(&self, shard: usize) -> String {
        if self.shards() == 1 {
            self.inner.lease.clone()
        } else {
            format!("{}-shard-{shard}", self.inner.lease)
        }
    }

    /// This replica's identity in the Lease; empty when leader election is off.
    pub fn identity(&self) -> &str {
        &self.inner.identity
    }

    /// Whether leader election is on (a gate from [`LeaderGate::new`] or
    /// [`LeaderGate::sharded`]).
    pub fn elects(&self) -> bool {
        !self.inner.lease.is_empty()
    }

    /// How many shards the work is split into (1: not sharded).
    pub fn shards(&self) -> usize {
        self.inner.shards.len()
    }

    /// Whether this replica leads at least one shard now (without sharding: leads).
    pub fn is_leader(&self) -> bool {
        (0..self.shards()).any(|s| self.leads_shard(s))
    }

    /// Whether this replica leads shard `shard` now. Its writes must be refused when false.
    pub fn leads_shard(&self, shard: usize) -> bool {
        let Some(slot) = self.inner.shards.get(shard) else {
            return false;
        };
        if !slot.open.load(Ordering::Acquire) {
            return false;
        }
        match *slot.until.lock() {
            Some(until) => Instant::now() < until,
            None => true,
        }
    }

    /// The shards this replica leads now, in order.
    pub fn led_shards(&self) -> Vec<usize> {
        (0..self.shards())
            .filter(|&s| self.leads_shard(s))
            .collect()
    }

    /// The shard an object belongs to: by its namespace, or by its name when cluster-scoped
    /// (`namespace` `None`); see [`shard_of`].
    pub fn shard_of(&self, namespace: Option<&str>, name: &str) -> usize {
        shard_of(namespace, name, self.shards())
    }

    /// Whether this replica leads the shard of the object (`namespace` `None`: cluster-scoped).
    pub fn leads(&self, namespace: Option<&str>, name: &str) -> bool {
        self.leads_shard(self.shard_of(namespace, name))
    }

    /// Waits until this replica leads some shard (at once if it does).
    pub async fn wait_leader(&self) {
        let mut changes = self.inner.changes.subscribe();
        loop {
            changes.borrow_and_update();
            if self.is_leader() {
                return;
            }
            if changes.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }

    /// Leadership transitions as they happen: `true` when this replica came to lead some
    /// shard, `false` when it leads none any more. A deadline passing unrenewed is reported
    /// when the elector notices it.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.inner.changes.subscribe()
    }

    /// Bumped on every transition of any shard (read [`LeaderGate::leads_shard`] for each).
    pub fn subscribe_shards(&self) -> watch::Receiver<u64> {
        self.inner.transitions.subscribe()
    }

    /// Opens shard `shard`, or extends it, until `until`; a transition is announced
    /// ([`LeaderGate::subscribe_shards`]) when it was not led (closed, or its deadline passed
    /// unrenewed), so that work held for it is released.
    pub fn open_until(&self, shard: usize, until: Instant) {
        let slot = &self.inner.shards[shard];
        let was_led = self.leads_shard(shard);
        *slot.until.lock() = Some(until);
        slot.open.store(true, Ordering::Release);
        if !was_led {
            self.inner.transitions.send_modify(|n| *n += 1);
        }
        self.inner
            .changes
            .send_if_modified(|open| !std::mem::replace(open, true));
    }

    /// Closes shard `shard` now (its elector lost or released the Lease).
    pub fn close(&self, shard: usize) {
        if self.inner.shards[shard].open.swap(false, Ordering::AcqRel) {
            self.inner.transitions.send_modify(|n| *n += 1);
        }
        let any = self
            .inner
            .shards
            .iter()
            .any(|s| s.open.load(Ordering::Acquire));
        self.inner
            .changes
            .send_if_modified(|open| std::mem::replace(open, any) != any);
    }

    /// Until when shard `shard` stays open without a renewal; `None`: no deadline.
    pub fn deadline(&self, shard: usize) -> Option<Instant> {
        *self.inner.shards[shard].until.lock()
    }
}

/// The shard of an object among `shards`: a stable hash (64-bit FNV-1a, the same on every
/// replica, build and platform) of its namespace, or of its name when cluster-scoped, modulo
/// the shard count. Every object of a namespace is in one shard, so a controller's reads and
/// writes within a namespace stay with one replica.
pub fn shard_of(namespace: Option<&str>, name: &str, shards: usize) -> usize {
    if shards <= 1 {
        return 0;
    }
    let text = match namespace {
        Some(ns) => ns,
        None => name,
    };
    (stable_hash(text) % shards as u64) as usize
}

/// 64-bit FNV-1a: a hash that is the same on every replica, build and platform.
pub fn stable_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_always_falls_in_the_same_shard() {
        assert_eq!(shard_of(Some("team-a"), "x", 1), 0);
        let shard = shard_of(Some("team-a"), "x", 8);
        assert_eq!(shard, shard_of(Some("team-a"), "y", 8));
        // FNV-1a of "team-a", pinned: the split must not change between builds.
        assert_eq!(shard, (0xde90_a371_7d12_52d6_u64 % 8) as usize);
        let spread: std::collections::BTreeSet<_> = (0..64)
            .map(|i| shard_of(Some(&format!("ns-{i}")), "", 8))
            .collect();
        assert_eq!(spread.len(), 8, "64 namespaces reach every one of 8 shards");
        assert_eq!(shard_of(None, "node-1", 8), shard_of(Some("node-1"), "", 8));
    }
}
