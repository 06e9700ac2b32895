//! Informer and index leases: which loaded plugins use each shared informer and each declared
//! index. A load takes its leases ([`Claims`]) and commits them, or gives them back when it
//! fails; an unloaded or replaced version releases them. An informer no plugin uses any more
//! is stopped after a grace period (a plugin reloaded meanwhile finds its cache warm: no new
//! LIST); an index no plugin declares any more is removed at once (its function would run on
//! every event for nobody).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kubewasm_informer::{InformerKey, SharedIndexInformer, SharedInformerFactory};
use parking_lot::Mutex;

use crate::events::informers::ensure_index;
use crate::model::declared::IndexSource;
use crate::model::grants::DeclarationLimits;

/// What one load took from the shared informers, to commit or give back.
#[derive(Debug, Default)]
pub(crate) struct Claims {
    /// The informer of each subscription, in order.
    pub(crate) keys: Vec<InformerKey>,
    /// Of those, the ones this load created.
    created: Vec<InformerKey>,
    /// Shared indexes claimed (counted at once).
    pub(crate) indexes: Vec<(InformerKey, String)>,
}

/// The leases of every plugin on the informers of one factory. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Leases {
    inner: Arc<Inner>,
}

struct Inner {
    factory: SharedInformerFactory,
    /// How long an informer nobody uses keeps running.
    grace: Duration,
    /// How many plugins use each informer the host asked the factory for.
    informers: Mutex<HashMap<InformerKey, Users>>,
    /// How many plugins declare each shared index, by informer and index name.
    indexes: Mutex<HashMap<(InformerKey, String), usize>>,
    /// Numbers each release, so a grace timer only stops an informer nobody took up since.
    releases: AtomicU64,
}

/// The plugins using one informer, and the last time that number fell to zero.
#[derive(Debug, Default)]
struct Users {
    plugins: usize,
    released: u64,
}

impl Leases {
    /// Leases on `factory`'s informers; an unused informer is stopped after `grace`.
    pub(crate) fn new(factory: SharedInformerFactory, grace: Duration) -> Self {
        Leases {
            inner: Arc::new(Inner {
                factory,
                grace,
                informers: Mutex::new(HashMap::new()),
                indexes: Mutex::new(HashMap::new()),
                releases: AtomicU64::new(0),
            }),
        }
    }

    /// The shared informer for `key` (created if there is none), recorded in `claims`.
    pub(crate) fn informer(&self, key: InformerKey, claims: &mut Claims) -> SharedIndexInformer {
        let factory = &self.inner.factory;
        let existed = factory.informers().iter().any(|(k, _)| *k == key);
        let informer = factory.informer_for(key.clone());
        if !existed {
            claims.created.push(key.clone());
        }
        claims.keys.push(key);
        informer
    }

    /// Adds the shared index computing `source` to the informer of `key` if needed (its cost
    /// per object bounded by `limits`) and counts one more plugin using it (recorded in
    /// `claims`): its name in the cache.
    pub(crate) fn index(
        &self,
        key: &InformerKey,
        informer: &SharedIndexInformer,
        source: &IndexSource,
        limits: &DeclarationLimits,
        claims: &mut Claims,
    ) -> Result<String, kubewasm_informer::Error> {
        let mut users = self.inner.indexes.lock();
        let name = ensure_index(informer, source, limits)?;
        *users.entry((key.clone(), name.clone())).or_default() += 1;
        claims.indexes.push((key.clone(), name.clone()));
        Ok(name)
    }

    /// The load went through: one more plugin uses each of its informers.
    pub(crate) fn commit(&self, claims: &Claims) {
        let mut users = self.inner.informers.lock();
        for key in &claims.keys {
            users.entry(key.clone()).or_default().plugins += 1;
        }
    }

    /// The load failed: its indexes are given back, and the informers it created are stopped
    /// unless a plugin took them up meanwhile.
    pub(crate) async fn abandon(&self, claims: &Claims) {
        self.release_indexes(&claims.indexes);
        for key in &claims.created {
            if self.inner.informers.lock().contains_key(key) {
                continue;
            }
            if self.idle(key) {
                tracing::debug!(resource = %key.resource.plural, "stopping an informer a failed load created");
                self.inner.factory.stop_informer(key).await;
            }
        }
    }

    /// A plugin version is gone: one use fewer of each of its informers and indexes. Indexes
    /// nobody declares are removed; informers nobody uses and no other handler listens to are
    /// stopped after the grace period.
    pub(crate) async fn release(&self, keys: &[InformerKey], indexes: &[(InformerKey, String)]) {
        self.release_indexes(indexes);
        let mut unused = Vec::new();
        {
            let mut users = self.inner.informers.lock();
            for key in keys {
                if let Some(u) = users.get_mut(key) {
                    u.plugins = u.plugins.saturating_sub(1);
                    if u.plugins == 0 {
                        u.released = self.inner.releases.fetch_add(1, Ordering::Relaxed) + 1;
                        unused.push((key.clone(), u.released));
                    }
                }
            }
        }
        if self.inner.grace.is_zero() {
            for (key, release) in unused {
                self.stop_if_unused(&key, release).await;
            }
            return;
        }
        for (key, release) in unused {
            let leases = self.clone();
            tokio::spawn(async move {
                tokio::time::sleep(leases.inner.grace).await;
                leases.stop_if_unused(&key, release).await;
            });
        }
    }

    fn release_indexes(&self, indexes: &[(InformerKey, String)]) {
        if indexes.is_empty() {
            return;
        }
        let informers = self.inner.factory.informers();
        let mut users = self.inner.indexes.lock();
        for claim in indexes {
            let Some(count) = users.get_mut(claim) else {
                continue;
            };
            *count = count.saturating_sub(1);
            if *count > 0 {
                continue;
            }
            users.remove(claim);
            let (key, name) = claim;
            if let Some((_, informer)) = informers.iter().find(|(k, _)| k == key) {
                informer.remove_indexer(name);
                tracing::debug!(resource = %key.resource.plural, index = %name, "removed an index no plugin declares");
            }
        }
    }

    /// Whether no handler listens to the informer of `key`.
    fn idle(&self, key: &InformerKey) -> bool {
        self.inner
            .factory
            .informers()
            .iter()
            .find(|(k, _)| k == key)
            .is_some_and(|(_, i)| i.handler_count() == 0)
    }

    /// Stops the informer if no plugin took it up since `release` and no handler listens.
    async fn stop_if_unused(&self, key: &InformerKey, release: u64) {
        {
            let mut users = self.inner.informers.lock();
            match users.get(key) {
                Some(u) if u.plugins == 0 && u.released == release => {
                    users.remove(key);
                }
                _ => return,
            }
        }
        if self.idle(key) {
            tracing::debug!(resource = %key.resource.plural, "stopping an informer no plugin uses");
            self.inner.factory.stop_informer(key).await;
        }
    }
}
