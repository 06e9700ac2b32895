//! SharedInformerFactory: one informer per key, started together, shut down together.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kube::Resource;
use kube::discovery::ApiResource;
use parking_lot::Mutex;
use serde::de::DeserializeOwned;

use crate::health::HealthSignal;
use crate::key::InformerKey;
use crate::lister::Lister;
use crate::lister_watcher::{KubeListerWatcher, ListWatchOptions};
use crate::reflector::ReflectorOptions;
use crate::shared_informer::{InformerOptions, SharedIndexInformer};
use crate::typed::TypedInformer;

/// How the factory's informers list, watch and resync.
#[derive(Debug, Clone, Default)]
pub struct FactoryOptions {
    /// Page size, watch timeouts, managedFields stripping.
    pub list_watch: ListWatchOptions,
    /// Streaming lists, backoff.
    pub reflector: ReflectorOptions,
    /// Resync period for handlers registered without one; `None`: no resync.
    pub default_resync: Option<Duration>,
}

/// client-go's GenericInformer: an informer and a lister over its cache.
#[derive(Clone)]
pub struct GenericInformer {
    /// The shared informer.
    pub informer: SharedIndexInformer,
    /// A lister over its cache, restricted to the key's namespace if it has one.
    pub lister: Lister,
}

struct FactoryState {
    informers: HashMap<InformerKey, SharedIndexInformer>,
    started: bool,
}

/// client-go's SharedInformerFactory: hands out one shared informer per [`InformerKey`], so
/// every handler of the same resource, namespace and selectors shares one list/watch and one
/// cache.
///
/// Cheap to clone. `start`, and `informer_for` after start, spawn tasks: call them inside a
/// Tokio runtime.
#[derive(Clone)]
pub struct SharedInformerFactory {
    client: kube::Client,
    options: Arc<FactoryOptions>,
    health: HealthSignal,
    state: Arc<Mutex<FactoryState>>,
}

impl SharedInformerFactory {
    /// A factory whose informers use `client`.
    pub fn new(client: kube::Client, options: FactoryOptions) -> Self {
        SharedInformerFactory {
            client,
            options: Arc::new(options),
            health: HealthSignal::default(),
            state: Arc::new(Mutex::new(FactoryState {
                informers: HashMap::new(),
                started: false,
            })),
        }
    }

    /// The informer for `key`, created on first request. Equal keys get the same informer. It
    /// is started at once if the factory has been started.
    pub fn informer_for(&self, key: InformerKey) -> SharedIndexInformer {
        let mut state = self.state.lock();
        if let Some(informer) = state.informers.get(&key) {
            return informer.clone();
        }
        let lw = KubeListerWatcher::new(self.client.clone(), &key, self.options.list_watch.clone());
        let informer = SharedIndexInformer::new(
            Arc::new(lw),
            InformerOptions {
                reflector: self.options.reflector.clone(),
                default_resync: self.options.default_resync,
                health: Some(self.health.clone()),
            },
        );
        if state.started {
            informer.start();
        }
        state.informers.insert(key, informer.clone());
        informer
    }

    /// client-go's ForResource: the informer for `key` and a lister over its cache.
    pub fn for_resource(&self, key: InformerKey) -> GenericInformer {
        let namespace = key.namespace.clone();
        let informer = self.informer_for(key);
        let lister = Lister::new(informer.indexer());
        let lister = match namespace {
            Some(ns) => lister.by_namespace(ns),
            None => lister,
        };
        GenericInformer { informer, lister }
    }

    /// The typed informer for `K` (a k8s-openapi type or a CRD type), in `namespace` or all
    /// namespaces; shares the cache with `informer_for` on the same key.
    pub fn typed<K>(&self, namespace: Option<&str>) -> TypedInformer<K>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned,
    {
        let mut key = InformerKey::all(ApiResource::erase::<K>(&()));
        key.namespace = namespace.map(str::to_owned);
        let generic = self.for_resource(key);
        TypedInformer::new(generic.informer, generic.lister)
    }

    /// Starts every informer not yet started, and every informer created from now on.
    /// Idempotent.
    ///
    /// # Panics
    /// Outside a Tokio runtime.
    pub fn start(&self) {
        let mut state = self.state.lock();
        state.started = true;
        for informer in state.informers.values() {
            informer.start();
        }
    }

    /// Waits until every started informer has synced; `false` if one stopped before syncing.
    pub async fn wait_for_cache_sync(&self) -> bool {
        let informers: Vec<_> = self
            .state
            .lock()
            .informers
            .values()
            .filter(|i| i.is_started())
            .cloned()
            .collect();
        let mut all = true;
        for informer in informers {
            all &= informer.wait_synced().await;
        }
        all
    }

    /// Stops the informer for `key` and forgets it, so its cache's memory is freed once the
    /// last handle is dropped. A later `informer_for(key)` builds a new one.
    pub async fn stop_informer(&self, key: &InformerKey) {
        let informer = self.state.lock().informers.remove(key);
        if let Some(informer) = informer {
            informer.stop().await;
        }
    }

    /// Bumped whenever one of this factory's informers starts or ends a failure streak, or
    /// finds a connection dead: read [`crate::InformerStats::failing`] and
    /// [`crate::InformerStats::dead_connections`] of [`SharedInformerFactory::informers`] then.
    pub fn health_signal(&self) -> tokio::sync::watch::Receiver<u64> {
        self.health.subscribe()
    }

    /// Every informer with its key.
    pub fn informers(&self) -> Vec<(InformerKey, SharedIndexInformer)> {
        self.state
            .lock()
            .informers
            .iter()
            .map(|(k, i)| (k.clone(), i.clone()))
            .collect()
    }

    /// Stops every informer and waits until their handlers have drained their buffers.
    pub async fn shutdown(&self) {
        let informers: Vec<_> = {
            let mut state = self.state.lock();
            state.informers.drain().map(|(_, i)| i).collect()
        };
        for informer in informers {
            informer.stop().await;
        }
    }
}
