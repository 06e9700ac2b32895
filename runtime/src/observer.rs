//! Hooks through which the host reports what its plugins do (metrics live outside this module).

use std::sync::Arc;
use std::time::Duration;

use crate::client::{NoWriteObserver, WriteObserver};
use crate::reconcile::workqueue::{NoQueueMetrics, QueueMetrics};
use crate::wasm::origin::Origin;

/// Which handler an event went to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    Add,
    Update,
    Delete,
}

impl EventKind {
    /// A lowercase label for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Add => "add",
            EventKind::Update => "update",
            EventKind::Delete => "delete",
        }
    }
}

/// Why a plugin did not receive an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The event the instance faulted on.
    Fault,
    /// Queued for an instance that was then replaced after a fault: the fresh instance is
    /// replayed the cache's current state instead.
    Replaced,
    /// An object version that made the plugin fail twice.
    Quarantined,
    /// Queued for an instance that faulted as the plugin became failed: no fresh instance
    /// takes them (until the failed plugin's next retry replays the cache).
    Failed,
}

impl DropReason {
    pub const ALL: [DropReason; 4] = [
        DropReason::Fault,
        DropReason::Replaced,
        DropReason::Quarantined,
        DropReason::Failed,
    ];

    /// A lowercase label for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::Fault => "fault",
            DropReason::Replaced => "replaced",
            DropReason::Quarantined => "quarantined",
            DropReason::Failed => "failed",
        }
    }
}

/// Why a plugin instance was thrown away and replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// The guest trapped (panic, unreachable, out-of-bounds access, ...).
    Trap,
    /// A call ran past its deadline.
    Timeout,
    /// The instance tried to grow its memory past the cap.
    Memory,
}

impl FailureKind {
    /// A lowercase label for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Trap => "trap",
            FailureKind::Timeout => "timeout",
            FailureKind::Memory => "memory",
        }
    }
}

/// Receives the plugin host's measurements: once per plugin version loaded, [`Observer::plugin`]
/// makes the handles its actor reports through, so the hot path builds no label strings.
pub trait Observer: Send + Sync {
    /// The handles of plugin `name`, whose subscriptions are to `resources` (kinds, by
    /// subscription index). Called for every version loaded; versions with the same name may
    /// share series.
    fn plugin(&self, _name: &str, _resources: &[String]) -> Arc<dyn PluginObserver> {
        Arc::new(NoopObserver)
    }
    /// The handles the workqueue of 0.2 plugin `name` reports through (made once per queue:
    /// the queue outlives the plugin's versions).
    fn queue(&self, _name: &str) -> Arc<dyn QueueMetrics> {
        Arc::new(NoQueueMetrics)
    }
    /// What the write client and Event recorder of 0.2 plugin `name` report to.
    fn writes(&self, _name: &str) -> Arc<dyn WriteObserver> {
        Arc::new(NoWriteObserver)
    }
    /// No loaded plugin is called `name` any more: its series can be removed.
    fn plugin_removed(&self, _name: &str) {}
    /// A plugin version's compiled code was had from `origin` (a load or a replacement, before
    /// `init`): how many compiles ran, and how many were saved.
    fn code_loaded(&self, _origin: Origin) {}
}

/// One plugin's measurements. Calls come from its actor's task, on the hot path: they must be
/// cheap and must not block. Every method defaults to doing nothing.
pub trait PluginObserver: Send + Sync {
    /// A guest handled an event of subscription `resource` (`ok`: the guest did not fail it,
    /// by an error or a fault).
    fn event_handled(&self, _resource: usize, _kind: EventKind, _ok: bool) {}
    /// A guest handler call ended after `elapsed`: one event, or one batch of a
    /// `batch-handler` plugin.
    fn handler_called(&self, _elapsed: Duration) {}
    /// An instance was thrown away after a fault.
    fn instance_failed(&self, _failure: FailureKind) {}
    /// The plugin did not receive `n` events, for `reason`.
    fn events_dropped(&self, _reason: DropReason, _n: u64) {}
    /// `n` lines the guest logged were dropped (over its rate) or cut (too long).
    fn log_dropped(&self, _n: u64) {}
    /// `n` handler or reconcile error lines were kept out of the log (over one a second).
    fn errors_unlogged(&self, _n: u64) {}
}

/// An observer that ignores everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopObserver;

impl Observer for NoopObserver {}

impl PluginObserver for NoopObserver {}
