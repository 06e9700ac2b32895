//! How sharded replicas spread the shards fairly: a membership heartbeat per replica, and a
//! fair share each replica keeps to.
//!
//! Every replica renews its own member Lease (`<lease>-member-<hash of identity>`, labelled
//! [`GROUP_LABEL`]) every retry period, and lists the group's member Leases. A member whose
//! Lease has not changed for a lease duration, judged on this replica's clock as the electors
//! judge theirs, is gone; one that shuts down deletes its Lease, so the others rebalance at
//! once. From the live members, sorted by identity, each replica computes the same targets:
//! `shards / members` each, and one more for the first `shards % members`. Then:
//!
//! - a replica contends for a *free* shard (holder empty: released, or never held) only while
//!   it leads fewer shards than its target;
//! - a shard whose holder stopped renewing, or free for a whole lease duration, goes to whoever
//!   takes it first, over target or not: every shard is led while any replica lives, and
//!   failover is never slowed by the balance;
//! - a replica over its target releases one shard per retry period, and only while some member
//!   is under its own target (so a shard given up has a taker), the highest-numbered first.
//!
//! Views of the membership can differ for up to a lease duration (a replica joining or dying);
//! during that time shards may move more than once, but leadership of each shard stays
//! exclusive, because that is the Leases' job, not the balance's.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::options::{ElectionOptions, retry_ticks};
use kubewasm_runtime::{LeaderGate, stable_hash};

/// The label that marks the member Leases of one group; its value is the lease name.
pub const GROUP_LABEL: &str = "kubewasm.io/lease-group";

/// What one replica knows of the group: who is alive, and who holds each shard.
#[derive(Debug)]
pub struct Balance {
    identity: String,
    shards: usize,
    state: Mutex<BalanceState>,
}

#[derive(Debug)]
struct BalanceState {
    /// Live members, sorted, this replica among them.
    members: Vec<String>,
    /// The holder of each shard as its elector last observed it.
    holders: Vec<Option<String>>,
}

impl Balance {
    /// The balance of `identity` over `shards` shards; alone until the membership says more.
    pub fn new(identity: &str, shards: usize) -> Balance {
        Balance {
            identity: identity.to_owned(),
            shards,
            state: Mutex::new(BalanceState {
                members: vec![identity.to_owned()],
                holders: vec![None; shards],
            }),
        }
    }

    /// Sets the live members (this replica is always one).
    pub fn set_members(&self, mut members: Vec<String>) {
        if !members.contains(&self.identity) {
            members.push(self.identity.clone());
        }
        members.sort();
        members.dedup();
        self.state.lock().members = members;
    }

    /// The live members as last seen, sorted.
    pub fn members(&self) -> Vec<String> {
        self.state.lock().members.clone()
    }

    pub(super) fn set_holder(&self, shard: usize, holder: Option<String>) {
        if let Some(slot) = self.state.lock().holders.get_mut(shard) {
            *slot = holder;
        }
    }

    /// The number of shards `member` should lead: an even split, the remainder going to the
    /// first members in identity order.
    pub fn target(&self, member: &str) -> usize {
        let state = self.state.lock();
        target_in(&state.members, member, self.shards)
    }

    /// Whether this replica may take a free shard: it leads fewer than its target.
    pub(super) fn may_take(&self, gate: &LeaderGate) -> bool {
        gate.led_shards().len() < self.target(&self.identity)
    }

    /// Whether this replica should give up `shard` now: it leads more than its target, `shard`
    /// is the highest it leads, and some live member leads fewer than its own target.
    pub(super) fn should_release(&self, shard: usize, gate: &LeaderGate) -> bool {
        let led = gate.led_shards();
        let state = self.state.lock();
        let mine = target_in(&state.members, &self.identity, self.shards);
        if led.len() <= mine || led.last() != Some(&shard) {
            return false;
        }
        let mut held: HashMap<&str, usize> = HashMap::new();
        for holder in state.holders.iter().flatten() {
            *held.entry(holder.as_str()).or_default() += 1;
        }
        state.members.iter().any(|m| {
            m != &self.identity
                && held.get(m.as_str()).copied().unwrap_or(0)
                    < target_in(&state.members, m, self.shards)
        })
    }
}

fn target_in(members: &[String], member: &str, shards: usize) -> usize {
    let count = members.len().max(1);
    let rank = members.iter().position(|m| m == member).unwrap_or(count);
    shards / count + usize::from(rank < shards % count)
}

/// The member Lease name of `identity` in group `lease`: identities may hold characters a
/// Lease name may not, so the name carries a stable hash and the Lease the identity itself.
pub fn member_lease(lease: &str, identity: &str) -> String {
    format!("{lease}-member-{:016x}", stable_hash(identity))
}

/// This replica's membership heartbeat, feeding a [`Balance`].
pub struct Membership {
    api: Api<Lease>,
    options: ElectionOptions,
    balance: Arc<Balance>,
    /// Per member Lease: the resourceVersion last seen, its holder, and when it changed.
    seen: HashMap<String, (String, String, Instant)>,
}

impl Membership {
    /// The heartbeat of `options.identity` in the group `options.lease_name`.
    pub fn new(client: Client, options: ElectionOptions, balance: Arc<Balance>) -> Membership {
        Membership {
            api: Api::namespaced(client, &options.namespace),
            options,
            balance,
            seen: HashMap::new(),
        }
    }

    /// Beats every retry period until `cancel` fires, then deletes this replica's member Lease
    /// so the others rebalance without waiting for it to expire.
    pub async fn run(mut self, cancel: CancellationToken) {
        let mut tick = retry_ticks(self.options.retry_period);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = tick.tick() => {}
            }
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = self.beat() => {}
            }
        }
        let name = member_lease(&self.options.lease_name, &self.options.identity);
        let params = DeleteParams::default();
        let delete = self.api.delete(&name, &params);
        match tokio::time::timeout(self.options.renew_deadline, delete).await {
            Ok(Ok(_)) => {}
            Ok(Err(err)) => {
                tracing::debug!(lease = %name, error = %err, "cannot delete the member lease")
            }
            Err(_) => tracing::debug!(lease = %name, "deleting the member lease timed out"),
        }
    }

    /// Renews this replica's member Lease, then reads the group's.
    async fn beat(&mut self) {
        let group = &self.options.lease_name;
        let name = member_lease(group, &self.options.identity);
        let now = k8s_openapi::jiff::Timestamp::now();
        let lease = serde_json::json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": { "name": name, "labels": { GROUP_LABEL: group } },
            "spec": {
                "holderIdentity": self.options.identity,
                "leaseDurationSeconds": self.options.lease_duration.as_secs(),
                "renewTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(now),
            },
        });
        let params = PatchParams::apply("kubewasm-membership").force();
        if let Err(err) = self.api.patch(&name, &params, &Patch::Apply(&lease)).await {
            tracing::debug!(lease = %name, error = %err, "cannot renew the member lease");
        }
        let selector = format!("{GROUP_LABEL}={group}");
        let listed = match self
            .api
            .list(&ListParams::default().labels(&selector))
            .await
        {
            Ok(listed) => listed,
            Err(err) => {
                tracing::debug!(%group, error = %err, "cannot list the member leases");
                return;
            }
        };
        let now = Instant::now();
        let mut seen = HashMap::new();
        for lease in listed.items {
            let (Some(name), Some(version)) =
                (lease.metadata.name, lease.metadata.resource_version)
            else {
                continue;
            };
            let holder = lease
                .spec
                .and_then(|s| s.holder_identity)
                .unwrap_or_default();
            let since = match self.seen.get(&name) {
                Some((v, h, at)) if *v == version && *h == holder => *at,
                _ => now,
            };
            seen.insert(name, (version, holder, since));
        }
        self.seen = seen;
        let alive = self.options.lease_duration;
        let members = self
            .seen
            .values()
            .filter(|(_, holder, since)| !holder.is_empty() && now < *since + alive)
            .map(|(_, holder, _)| holder.clone())
            .collect::<Vec<_>>();
        let before = self.balance.members();
        self.balance.set_members(members);
        let after = self.balance.members();
        if before != after {
            tracing::info!(%group, members = ?after, shards = self.balance.shards, target = self.balance.target(&self.options.identity), "shard group membership changed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_split_evenly_and_the_remainder_goes_to_the_first_members() {
        let members: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let targets = |shards| {
            members
                .iter()
                .map(|m| target_in(&members, m, shards))
                .collect::<Vec<_>>()
        };
        assert_eq!(targets(8), [3, 3, 2]);
        assert_eq!(targets(3), [1, 1, 1]);
        assert_eq!(targets(2), [1, 1, 0]);
        assert_eq!(target_in(&members, "stranger", 8), 2);
    }

    #[test]
    fn member_lease_names_are_valid_and_stable() {
        let name = member_lease("kubewasm", "Host_With:Odd/Chars");
        assert_eq!(name, member_lease("kubewasm", "Host_With:Odd/Chars"));
        assert!(
            name.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        );
        assert_ne!(name, member_lease("kubewasm", "other"));
    }
}
