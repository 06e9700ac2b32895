//! Hooks through which the host reports what its plugins do (metrics live outside this module).

use std::time::Duration;

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

/// Receives the plugin host's measurements. Every method defaults to doing nothing; calls come
/// from the plugin actors' tasks, on the hot path, so implementations must be cheap and must
/// not block.
pub trait Observer: Send + Sync {
    /// A guest handler returned (`ok`: it returned `ok(_)`, not `err(_)` or a fault).
    fn event_handled(
        &self,
        _plugin: &str,
        _resource: &str,
        _kind: EventKind,
        _elapsed: Duration,
        _ok: bool,
    ) {
    }
    /// An instance was thrown away after a fault.
    fn instance_failed(&self, _plugin: &str, _failure: FailureKind) {}
    /// The plugin's queue holds `depth` events not yet handed to the guest.
    fn queue_depth(&self, _plugin: &str, _depth: usize) {}
}

/// An observer that ignores everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopObserver;

impl Observer for NoopObserver {}
