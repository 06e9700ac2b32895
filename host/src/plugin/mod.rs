//! The plugin runtime: WebAssembly components of the `controller` world as informer listeners.
//!
//! One [`PluginEngine`] compiles components (cached on disk by content hash and shared between
//! copies); the events of each loaded plugin, whatever its contract version, go to one
//! instance driven by one actor (which pulls from the plugin's inbox, fed by its handlers
//! registered inline on the shared informers, and calls the guest one call at a time under a
//! deadline and a memory cap, with one fault policy); a 0.2 plugin's reconcile workers take
//! keys from its workqueue, each with an instance of its own; and the [`PluginHost`] loads,
//! replaces, unloads and reports on plugins.

mod access;
mod actor;
mod admission;
mod batch;
mod bindings;
mod calls;
mod client;
mod compile_work;
mod component;
mod context;
mod declare;
mod engine;
mod error;
mod escape;
mod events;
mod grants;
mod host;
mod identity;
mod impersonation;
mod imports_v0_1;
mod imports_v0_2;
mod inbox;
mod informers;
mod instance;
mod keys;
mod leases;
mod log_gate;
mod model;
mod names;
mod notices;
mod observer;
mod paging;
mod policy;
mod predicates;
mod rate_limit;
mod reconciler;
mod state;
mod webhook_grants;
mod workqueue;

#[cfg(test)]
mod testing;

pub use actor::{PluginState, RestartPolicy};
pub use admission::{
    ADMISSION_INSTANCES, AdmissionPolicy, Failure, FailureReason, declared_webhooks,
};
pub use bindings::v0_2::World;
pub use client::{
    ClientOptions, DeleteOptions, Deleted, InvalidCause, NoWriteObserver, OTHER_KIND, ObjectRef,
    PatchBody, Propagation, Refusal, Resources, WriteClient, WriteError, WriteGrant, WriteGrants,
    WriteObserver, WriteVerb,
};
pub use compile_work::CompileWork;
pub use component::{CompiledPlugin, Origin};
pub use declare::{CheckOptions, Checked, Contract, check};
pub use engine::{EngineOptions, PluginEngine, engine_config};
pub use error::PluginError;
pub(crate) use escape::escaped;
pub use events::{EventRecord, EventRecorder, EventType, RecorderOptions};
pub use grants::{DeclarationLimits, Grants, Limits, ResourcePattern};
pub use host::{HostOptions, PluginHost, PluginId, PluginStatus};
pub use identity::{InvalidKey, MAX_KEY_BYTES, PluginKey};
pub use impersonation::PluginAccount;
pub use keys::{ObjectKey, QueueRule, keys_for};
pub use log_gate::{LogLimits, LogTap, LoggedLine};
pub use model::{Delivery, Gvk, IndexDecl, IndexSource, PluginInfo, Subscription};
pub use names::{InvalidName, Kind, Namespace, ObjectName};
pub use observer::{DropReason, EventKind, FailureKind, NoopObserver, Observer, PluginObserver};
pub use paging::{Page, PageError, PageLimits, page};
pub use policy::{PluginPolicy, PolicyLookup, ReconcileSettings, StaticPolicy};
pub use predicates::{Predicate, UpdateFilter};
pub use workqueue::{
    Completion, NoQueueMetrics, Processing, QueueMetrics, QueueOptions, QueueRefusal, QueueStats,
    ReconcileResult, WorkQueue,
};
