//! The plugin runtime: WebAssembly components as controllers and policies over the host's
//! shared informers.
//!
//! Modules by concept, from what a plugin is to the manager that runs it. No file imports a
//! file that imports it back (`cargo xtask cycles`); the directories are not yet strict layers
//! (a store's data in `wasm` holds the plugin's reconcile context and log cap, and the manager
//! and the admission pool use each other's types):
//!
//! - [`model`]: what a plugin is and declares, in the host's own types: its key, its
//!   subscriptions and indexes, its read grants and limits, and the checked names a guest
//!   hands over.
//! - `contracts`: every `bindgen!` of the WIT packages in `wit/`, and the host side of each
//!   contract's imports (`cache`, `log`, `client`, `queue`).
//! - `wasm`: the one engine, compiling (with its memory budget and the on-disk cache), and
//!   the data of one store (WASI context, memory limiter).
//! - `guest`: one instance of any contract version: `init`, handler, reconcile and admission
//!   calls under a deadline, and the per-plugin log cap.
//! - `cache`: a plugin's read access to the shared cache, in bounded pages.
//! - `events`: informer subscriptions, the inbox they fill, batching, and the one event loop
//!   every contract version runs on.
//! - `reconcile`: the workqueue, the keys an event queues, predicates, and the reconcile
//!   workers.
//! - [`client`]: writes on the plugin's behalf (grants, Events, impersonation), gated by the
//!   [`LeaderGate`].
//! - [`admission`]: policies of contract 0.3 on the same instance model: their webhook
//!   declarations, reviews, and the registry the host's webhook server answers from.
//! - `manager`: the [`PluginHost`]: loads, replaces and unloads plugins, and the policy
//!   the host's config sets for each.
//!
//! What the host decides comes in as values: the [`LeaderGate`] its elector opens, the
//! User-Agent prefix and connection of its API client, the [`Observer`] its metrics implement,
//! and the function that returns freed memory after a compile ([`set_memory_release`]).

pub mod admission;
mod cache;
pub mod client;
mod contracts;
mod error;
mod events;
mod guest;
mod leader_gate;
mod manager;
pub mod model;
mod observer;
mod reconcile;
mod wasm;

#[cfg(test)]
mod testing;

pub use admission::policy::{
    ADMISSION_INSTANCES, AdmissionPolicy, Failure, FailureReason, declared_webhooks,
};
pub use cache::paging::{Page, PageError, PageLimits, page};
pub use client::events::{EventRecord, EventRecorder, EventType, RecorderOptions};
pub use client::impersonation::PluginAccount;
pub use client::{
    ClientOptions, DeleteOptions, Deleted, InvalidCause, NoWriteObserver, OTHER_KIND, ObjectRef,
    PatchBody, Propagation, Refusal, Resources, WriteClient, WriteError, WriteGrant, WriteGrants,
    WriteObserver, WriteVerb,
};
pub use contracts::v0_2::World;
pub use error::PluginError;
pub use events::event_loop::{PluginState, RestartPolicy};
pub use guest::declare::{CheckOptions, Checked, Contract, check};
pub use guest::escape::escaped;
pub use guest::log_gate::{LogLimits, LogTap, LoggedLine};
pub use leader_gate::{LeaderGate, shard_of, stable_hash};
pub use manager::plugin_host::{HostOptions, PluginHost, PluginId, PluginStatus};
pub use manager::policy::{PluginPolicy, PolicyLookup, ReconcileSettings, StaticPolicy};
pub use model::declared::{Delivery, Gvk, IndexDecl, IndexSource, PluginInfo, Subscription};
pub use model::grants::{DeclarationLimits, Grants, Limits, ResourcePattern};
pub use model::identity::{InvalidKey, MAX_KEY_BYTES, PluginKey};
pub use model::names::{InvalidName, Kind, Namespace, ObjectName};
pub use observer::{DropReason, EventKind, FailureKind, NoopObserver, Observer, PluginObserver};
pub use reconcile::keys::{ObjectKey, QueueRule, keys_for};
pub use reconcile::predicates::{Predicate, UpdateFilter};
pub use reconcile::workqueue::{
    Completion, NoQueueMetrics, Processing, QueueMetrics, QueueOptions, QueueRefusal, QueueStats,
    ReconcileResult, WorkQueue,
};
pub use wasm::compile_work::{CompilePlan, CompileWork};
pub use wasm::component::{CompiledPlugin, Origin};
pub use wasm::engine::{EngineOptions, PluginEngine, engine_config, set_memory_release};
pub use wasm::precompiled::{self, EngineStamp, PrecompiledError, WASMTIME_VERSION};
