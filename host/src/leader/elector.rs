//! The elector of one Lease: contends for it, renews it while leading, and keeps a
//! [`LeaderGate`] in step with the outcome.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use kubewasm_runtime::LeaderGate;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::balance::Balance;
use super::options::{ElectionOptions, LeaderError, retry_ticks};

/// The Lease record as last observed, and when this replica observed it change.
#[derive(Debug, Clone)]
struct Observed {
    spec: LeaseSpec,
    resource_version: Option<String>,
    at: Instant,
}

/// Contends for one Lease and keeps a [`LeaderGate`] in step with the outcome.
pub struct LeaderElector {
    api: Api<Lease>,
    options: ElectionOptions,
    gate: LeaderGate,
    /// The shard of the gate this elector contends for (0 without sharding).
    shard: usize,
    /// With sharding, the fair share this replica keeps to.
    balance: Option<Arc<Balance>>,
    observed: Option<Observed>,
    /// Whether this replica may lead now (`Err`: why not); `None`: always.
    eligible: Option<watch::Receiver<Result<(), String>>>,
}

impl LeaderElector {
    /// An elector for `options` (validated) through `client`.
    pub fn new(client: Client, options: ElectionOptions) -> Result<LeaderElector, LeaderError> {
        options.validate()?;
        Ok(LeaderElector {
            api: Api::namespaced(client, &options.namespace),
            gate: LeaderGate::new(&options.lease_name, &options.identity),
            shard: 0,
            balance: None,
            options,
            observed: None,
            eligible: None,
        })
    }

    /// The elector of shard `shard` of `gate` (made by [`LeaderGate::sharded`] from the same
    /// lease name and identity as `options`): it contends for the shard's own Lease, and only
    /// while `balance` says this replica is under its fair share or the Lease has expired.
    pub fn for_shard(
        client: Client,
        options: ElectionOptions,
        gate: LeaderGate,
        shard: usize,
        balance: Arc<Balance>,
    ) -> Result<LeaderElector, LeaderError> {
        options.validate()?;
        if shard >= gate.shards() {
            return Err(LeaderError::Invalid(format!(
                "shard {shard} of a gate with {} shards",
                gate.shards()
            )));
        }
        let options = ElectionOptions {
            lease_name: gate.shard_lease(shard),
            ..options
        };
        Ok(LeaderElector {
            api: Api::namespaced(client, &options.namespace),
            gate,
            shard,
            balance: Some(balance),
            options,
            observed: None,
            eligible: None,
        })
    }

    /// Leads only while `eligible` is `Ok`: on an `Err` a leader closes its gate and releases
    /// its Lease, and the elector contends again once it is `Ok`.
    pub fn with_eligibility(mut self, eligible: watch::Receiver<Result<(), String>>) -> Self {
        self.eligible = Some(eligible);
        self
    }

    /// Why this replica may not lead now, if it may not.
    fn ineligible(&self) -> Option<String> {
        self.eligible
            .as_ref()
            .and_then(|e| e.borrow().clone().err())
    }

    /// Waits until this replica may lead (at once if it may); false if `cancel` fired first.
    async fn wait_eligible(&mut self, cancel: &CancellationToken) -> bool {
        let Some(eligible) = &mut self.eligible else {
            return true;
        };
        tokio::select! {
            _ = cancel.cancelled() => false,
            ok = eligible.wait_for(Result::is_ok) => ok.is_ok(),
        }
    }

    /// Resolves when this replica may no longer lead, with the reason; never without an
    /// eligibility.
    async fn until_ineligible(
        eligible: &mut Option<watch::Receiver<Result<(), String>>>,
    ) -> String {
        let Some(eligible) = eligible else {
            return std::future::pending().await;
        };
        let reason = match eligible.wait_for(Result::is_err).await {
            Ok(verdict) => verdict.clone().err(),
            Err(_) => None,
        };
        match reason {
            Some(reason) => reason,
            None => std::future::pending().await,
        }
    }

    /// The gate this elector opens and closes.
    pub fn gate(&self) -> LeaderGate {
        self.gate.clone()
    }

    /// Contends until `cancel` fires: acquire, renew, and after losing the Lease contend again.
    /// On cancel a leader closes its gate and releases the Lease before this returns.
    pub async fn run(mut self, cancel: CancellationToken) {
        let identity = self.options.identity.clone();
        let lease = self.options.lease_name.clone();
        tracing::info!(%lease, %identity, "contending for leadership");
        loop {
            if !self.acquire(&cancel).await {
                return;
            }
            tracing::info!(%lease, %identity, "became leader");
            let ended = self.renew(&cancel).await;
            self.gate.close(self.shard);
            match ended {
                Renewal::Cancelled => {
                    self.release().await;
                    tracing::info!(%lease, %identity, "released leadership on shutdown");
                    return;
                }
                Renewal::Rebalanced => {
                    self.release().await;
                    tracing::info!(%lease, %identity, "released leadership: over this replica's fair share of shards");
                }
                Renewal::Lost => {
                    tracing::warn!(%lease, %identity, "lost leadership: could not renew before the renew deadline")
                }
                Renewal::Ineligible(reason) => {
                    self.release().await;
                    tracing::warn!(%lease, %identity, %reason, "released leadership: this replica is not fit to lead");
                }
            }
            if let Some(balance) = &self.balance {
                balance.set_holder(self.shard, None);
            }
        }
    }

    /// Tries every retry period until the Lease is ours (true) or `cancel` fires (false).
    async fn acquire(&mut self, cancel: &CancellationToken) -> bool {
        let mut tick = retry_ticks(self.options.retry_period);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return false,
                _ = tick.tick() => {}
            }
            if let Some(reason) = self.ineligible() {
                tracing::info!(lease = %self.options.lease_name, %reason, "not contending for leadership until fit to lead");
                if !self.wait_eligible(cancel).await {
                    return false;
                }
                tracing::info!(lease = %self.options.lease_name, "fit to lead again; contending");
                tick.reset_immediately();
                continue;
            }
            let started = Instant::now();
            // An attempt on a connection that stopped answering would otherwise wait for the
            // client's own timeout (minutes) while the leader's Lease expires: bounded as a
            // renewal is, the next attempt goes out on a fresh try.
            let attempt = tokio::select! {
                _ = cancel.cancelled() => return false,
                ok = tokio::time::timeout(self.options.renew_deadline, self.try_acquire_or_renew()) => {
                    ok.unwrap_or_else(|_| {
                        tracing::debug!(lease = %self.options.lease_name, "a lease attempt got no answer within the renew deadline");
                        false
                    })
                }
            };
            if attempt {
                self.gate
                    .open_until(self.shard, started + self.options.renew_deadline);
                return true;
            }
        }
    }

    /// Renews every retry period while leader, until `cancel` fires, no renewal succeeds
    /// before the renew deadline, or (sharded) this replica holds more than its fair share and
    /// this is the shard it gives up.
    async fn renew(&mut self, cancel: &CancellationToken) -> Renewal {
        let mut tick = retry_ticks(self.options.retry_period);
        tick.tick().await;
        let mut deadline = self.gate.deadline(self.shard).unwrap_or_else(Instant::now);
        let mut eligible = self.eligible.clone();
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return Renewal::Cancelled,
                _ = tokio::time::sleep_until(deadline) => return Renewal::Lost,
                reason = Self::until_ineligible(&mut eligible) => return Renewal::Ineligible(reason),
                _ = tick.tick() => {}
            }
            if let Some(balance) = &self.balance
                && balance.should_release(self.shard, &self.gate)
            {
                return Renewal::Rebalanced;
            }
            let started = Instant::now();
            let renewed = tokio::select! {
                _ = cancel.cancelled() => return Renewal::Cancelled,
                _ = tokio::time::sleep_until(deadline) => return Renewal::Lost,
                ok = self.try_acquire_or_renew() => ok,
            };
            if renewed {
                deadline = started + self.options.renew_deadline;
                self.gate.open_until(self.shard, deadline);
            }
        }
    }

    /// One attempt, as client-go's `tryAcquireOrRenew`: create the Lease if missing; else take
    /// it if we hold it, it is free, or it has not changed for its duration; write with the
    /// resourceVersion read. Any failure (conflict, network, server) is a `false`.
    pub(super) async fn try_acquire_or_renew(&mut self) -> bool {
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        let seconds = self.options.lease_duration.as_secs() as i32;
        let identity = self.options.identity.clone();
        let current = match self.api.get_opt(&self.options.lease_name).await {
            Ok(current) => current,
            Err(err) => {
                tracing::debug!(lease = %self.options.lease_name, error = %err, "cannot read the lease");
                return false;
            }
        };
        let Some(current) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.options.lease_name.clone()),
                    namespace: Some(self.options.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(identity),
                    lease_duration_seconds: Some(seconds),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observe(created);
                    true
                }
                Err(err) => {
                    tracing::debug!(lease = %self.options.lease_name, error = %err, "cannot create the lease");
                    false
                }
            };
        };

        let spec = current.spec.clone().unwrap_or_default();
        let changed = self.observed.as_ref().is_none_or(|o| {
            o.spec != spec || o.resource_version != current.metadata.resource_version
        });
        if changed {
            self.observe(current.clone());
        }
        let Some(observed) = &self.observed else {
            return false;
        };
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let held_by_us = holder == identity;
        let duration = Duration::from_secs(spec.lease_duration_seconds.unwrap_or(0).max(0) as u64);
        if !holder.is_empty() && !held_by_us && Instant::now() < observed.at + duration {
            return false;
        }
        // Sharded: a free shard goes first to a replica under its fair share; one left free
        // (or expired with its holder) for a whole lease duration goes to anyone, so every
        // shard is led while any replica lives.
        if let Some(balance) = &self.balance
            && !held_by_us
            && holder.is_empty()
            && Instant::now() < observed.at + self.options.lease_duration
            && !balance.may_take(&self.gate)
        {
            return false;
        }

        let transitions = spec.lease_transitions.unwrap_or(0);
        let record = LeaseSpec {
            holder_identity: Some(identity),
            lease_duration_seconds: Some(seconds),
            acquire_time: if held_by_us {
                spec.acquire_time.clone()
            } else {
                Some(now.clone())
            },
            renew_time: Some(now),
            lease_transitions: Some(if held_by_us {
                transitions
            } else {
                transitions + 1
            }),
            ..spec
        };
        let mut lease = current;
        lease.spec = Some(record);
        match self
            .api
            .replace(&self.options.lease_name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => {
                self.observe(written);
                true
            }
            Err(err) => {
                tracing::debug!(lease = %self.options.lease_name, error = %err, "cannot update the lease");
                false
            }
        }
    }

    fn observe(&mut self, lease: Lease) {
        if let Some(balance) = &self.balance {
            let holder = lease.spec.as_ref().and_then(|s| s.holder_identity.clone());
            balance.set_holder(self.shard, holder.filter(|h| !h.is_empty()));
        }
        self.observed = Some(Observed {
            spec: lease.spec.unwrap_or_default(),
            resource_version: lease.metadata.resource_version,
            at: Instant::now(),
        });
    }

    /// Empties the holder of a Lease we hold (client-go's `ReleaseOnCancel`), bounded by the
    /// renew deadline. The gate is already closed. The Lease is read again first: a renewal cut
    /// short by the cancel may have landed, and its resourceVersion is the one to write over.
    async fn release(&self) {
        let release = async {
            let Some(mut lease) = self.api.get_opt(&self.options.lease_name).await? else {
                return Ok(());
            };
            let spec = lease.spec.clone().unwrap_or_default();
            if spec.holder_identity.as_deref() != Some(self.options.identity.as_str()) {
                return Ok(());
            }
            let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
            lease.spec = Some(LeaseSpec {
                holder_identity: None,
                lease_duration_seconds: Some(1),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: spec.lease_transitions,
                ..LeaseSpec::default()
            });
            let params = PostParams::default();
            self.api
                .replace(&self.options.lease_name, &params, &lease)
                .await
                .map(drop)
        };
        let lease = &self.options.lease_name;
        match tokio::time::timeout(self.options.renew_deadline, release).await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => {
                tracing::warn!(%lease, error = %err, "cannot release the lease; it expires on its own")
            }
            Err(_) => {
                tracing::warn!(%lease, "releasing the lease timed out; it expires on its own")
            }
        }
    }
}

/// How a leader's renewal loop ended.
enum Renewal {
    /// Shutting down: release the Lease.
    Cancelled,
    /// Over the fair share: release this shard's Lease for a replica under its share.
    Rebalanced,
    /// No renewal before the renew deadline.
    Lost,
    /// The eligibility said no (the reason): release the Lease for a replica fit to lead.
    Ineligible(String),
}
