//! client-go's SharedInformerFactory in Rust: reflector, DeltaFIFO, indexed store, shared
//! processor, over kube's client, with a compact cached object.
//!
//! Lists and watches ask for protobuf, as client-go does, for the built-in kinds
//! `kubewasm-protobuf` decodes (ConfigMap, Secret, Namespace, ServiceAccount), and JSON for every
//! other kind; either way the cache holds the JSON text the API server's JSON wire sends
//! ([`ListWatchOptions::protobuf`] turns protobuf off, [`WireCounters`] counts the wires).
//!
//! ```no_run
//! # async fn demo(client: kube::Client) {
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kubewasm_informer::{FactoryOptions, ObjectRef, ResourceEventHandler, SharedInformerFactory};
//!
//! struct Print;
//! impl ResourceEventHandler for Print {
//!     fn on_add(&self, obj: &ObjectRef, _initial: bool) { println!("add {}", obj.key()); }
//!     fn on_update(&self, _old: &ObjectRef, new: &ObjectRef) { println!("update {}", new.key()); }
//!     fn on_delete(&self, obj: &ObjectRef, _unknown: bool) { println!("delete {}", obj.key()); }
//! }
//!
//! let factory = SharedInformerFactory::new(client, FactoryOptions::default());
//! let config_maps = factory.typed::<ConfigMap>(None);
//! config_maps.informer().add_event_handler(Arc::new(Print), None);
//! factory.start();
//! factory.wait_for_cache_sync().await;
//! let cm: Option<ConfigMap> = config_maps.lister().by_namespace("default").get("app").unwrap();
//! # }
//! ```

mod backoff;
mod delta_fifo;
mod discovery;
mod error;
mod factory;
mod health;
pub mod index_funcs;
mod key;
mod key_hash;
mod list_body;
mod list_page;
mod lister;
mod lister_watcher;
mod negotiate;
mod object;
mod processor;
mod protobuf_body;
mod reflector;
mod shared_informer;
mod store;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod transport;
mod typed;

pub use backoff::BackoffOptions;
pub use delta_fifo::{Delta, DeltaType, Deltas};
pub use discovery::{KindResolver, Served};
pub use error::{Error, Result};
pub use factory::{FactoryOptions, GenericInformer, SharedInformerFactory};
pub use health::{Failing, HealthSignal};
pub use index_funcs::{IndexFunc, NAMESPACE_INDEX};
pub use key::{InformerKey, path_segment};
pub use lister::Lister;
pub use lister_watcher::{
    INITIAL_EVENTS_END, KubeListerWatcher, ListPage, ListWatchOptions, ListerWatcher, WatchEvent,
    WatchStream, WatchTarget, parse_list, parse_watch_line,
};
pub use negotiate::{WireCounters, WireStats};
pub use object::{Object, ObjectRef, OwnerReference, ParseOptions};
pub use processor::{ListenerStats, ResourceEventHandler};
pub use reflector::{ListStrategy, ReflectorOptions, TransformFunc, WatchErrorHandler};
pub use shared_informer::{InformerOptions, InformerStats, Registration, SharedIndexInformer};
pub use store::Indexer;
pub use typed::{TypedEventHandler, TypedInformer, TypedLister};
