//! What the host's config says about one plugin ([`PluginPolicy`]): its config string, read
//! grants, write grants, limits and reconcile settings, looked up by its source file.

use std::path::Path;
use std::time::Duration;

use crate::client::impersonation::PluginAccount;
use crate::client::{ClientOptions, WriteGrants};
use crate::model::grants::{Grants, Limits};
use crate::model::names::InvalidName;
use crate::reconcile::workqueue::QueueOptions;

/// What the host's config says about one plugin.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PluginPolicy {
    pub grants: Grants,
    /// What the plugin may write (0.2 plugins); none by default.
    pub writes: WriteGrants,
    /// Passed to the guest's `init`; empty when none is configured.
    pub config: String,
    /// How a 0.2 plugin's reconciles run and write.
    pub reconcile: ReconcileSettings,
    /// Overrides the host's default limits.
    pub limits: Option<Limits>,
    /// The service account the plugin's requests impersonate (`[impersonation]`), or why its
    /// file name makes none (a plugin with write grants is then refused); `None`: the
    /// requests go as the host.
    pub impersonate: Option<Result<PluginAccount, InvalidName>>,
}

/// Looks up the policy of a plugin by its source file (the plugin's name is only known after
/// `init`, which already needs the config string).
pub trait PolicyLookup: Send + Sync {
    fn policy(&self, source: &Path) -> PluginPolicy;
}

/// The same policy for every plugin.
#[derive(Debug, Clone, Default)]
pub struct StaticPolicy(pub PluginPolicy);

impl PolicyLookup for StaticPolicy {
    fn policy(&self, _source: &Path) -> PluginPolicy {
        self.0.clone()
    }
}

impl<F> PolicyLookup for F
where
    F: Fn(&Path) -> PluginPolicy + Send + Sync,
{
    fn policy(&self, source: &Path) -> PluginPolicy {
        self(source)
    }
}

/// How a 0.2 plugin's reconciles run and write: its workqueue, its write client and how many
/// instances reconcile at once.
#[derive(Debug, Clone, PartialEq)]
pub struct ReconcileSettings {
    /// Instances reconciling at once (at least 1); one key is never in two of them at once.
    pub max_concurrent_reconciles: usize,
    /// Reconcile on every replica rather than only where the key's shard is led: for plugins
    /// that only observe (no write grants). Off by default, so that what a reconcile does
    /// besides writing (logs, metrics, calls out) happens once, not once per replica.
    pub every_replica: bool,
    /// Reconciles per second the plugin's instances start, together, once the burst is spent:
    /// a guest that requeues its keys at once for ever costs a bounded share of a core.
    pub reconciles_per_second: f64,
    /// Reconciles the plugin may start at once above that rate.
    pub reconcile_burst: u32,
    /// The shortest `requeue-after` honoured: a shorter one (`requeue-after(0)`) waits this
    /// long, so one key cannot loop faster.
    pub min_requeue_delay: Duration,
    pub queue: QueueOptions,
    pub client: ClientOptions,
}

impl Default for ReconcileSettings {
    /// client-go's defaults, one reconcile at a time, at most 200 reconciles a second (burst
    /// 1000), a requeue after at least 100 ms.
    fn default() -> Self {
        ReconcileSettings {
            max_concurrent_reconciles: 1,
            every_replica: false,
            reconciles_per_second: 200.0,
            reconcile_burst: 1000,
            min_requeue_delay: Duration::from_millis(100),
            queue: QueueOptions::default(),
            client: ClientOptions::default(),
        }
    }
}

impl ReconcileSettings {
    /// Checks the values make sense; the message names the bad one.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_concurrent_reconciles == 0 {
            return Err("max-concurrent-reconciles must be at least 1".into());
        }
        if !(self.reconciles_per_second.is_finite() && self.reconciles_per_second > 0.0) {
            return Err(format!(
                "reconciles per second must be positive, got {}",
                self.reconciles_per_second
            ));
        }
        if self.reconcile_burst == 0 {
            return Err("the reconcile burst must be at least 1".into());
        }
        self.queue.validate()?;
        self.client.validate()
    }
}
