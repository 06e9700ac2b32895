//! Typed informers and listers over k8s-openapi (or CRD) types, sharing the untyped cache.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use kube::Resource;
use kubewasm_labels::Selector;
use serde::de::DeserializeOwned;

use crate::error::Result;
use crate::lister::Lister;
use crate::object::ObjectRef;
use crate::processor::ResourceEventHandler;
use crate::shared_informer::{Registration, SharedIndexInformer};

/// The Rust counterpart of client-go's generated `DeploymentInformer`: the shared informer for
/// `K` and a lister returning `K`.
///
/// The cache keeps the compact JSON form; typed reads deserialize on each call, so they cost a
/// parse but no extra memory per cached object.
pub struct TypedInformer<K> {
    informer: SharedIndexInformer,
    lister: TypedLister<K>,
}

impl<K> Clone for TypedInformer<K> {
    fn clone(&self) -> Self {
        TypedInformer {
            informer: self.informer.clone(),
            lister: self.lister.clone(),
        }
    }
}

impl<K: Resource + DeserializeOwned> TypedInformer<K> {
    pub(crate) fn new(informer: SharedIndexInformer, lister: Lister) -> Self {
        TypedInformer {
            informer,
            lister: TypedLister {
                lister,
                _kind: PhantomData,
            },
        }
    }

    /// The shared, untyped informer underneath.
    pub fn informer(&self) -> &SharedIndexInformer {
        &self.informer
    }

    /// A lister returning `K`.
    pub fn lister(&self) -> &TypedLister<K> {
        &self.lister
    }

    /// Registers a typed handler (objects are deserialized before each call; an object that
    /// does not deserialize is logged and skipped).
    pub fn add_event_handler<H>(&self, handler: H, resync: Option<Duration>) -> Registration
    where
        H: TypedEventHandler<K>,
        K: Send + Sync + 'static,
    {
        let adapter = TypedAdapter {
            handler,
            _kind: PhantomData::<fn() -> K>,
        };
        self.informer.add_event_handler(Arc::new(adapter), resync)
    }
}

/// A handler of typed events; see [`ResourceEventHandler`] for the guarantees.
pub trait TypedEventHandler<K>: Send + Sync + 'static {
    /// An object appeared.
    fn on_add(&self, obj: K, in_initial_list: bool);
    /// An object changed.
    fn on_update(&self, old: K, new: K);
    /// An object is gone (`final_state_unknown`: seen on a relist, `obj` is the last known state).
    fn on_delete(&self, obj: K, final_state_unknown: bool);
}

struct TypedAdapter<K, H> {
    handler: H,
    _kind: PhantomData<fn() -> K>,
}

impl<K, H> TypedAdapter<K, H>
where
    K: DeserializeOwned,
{
    fn decode(obj: &ObjectRef) -> Option<K> {
        match obj.deserialize() {
            Ok(k) => Some(k),
            Err(err) => {
                tracing::error!(key = obj.key(), error = %err, "cached object does not fit the typed handler's type");
                None
            }
        }
    }
}

impl<K, H> ResourceEventHandler for TypedAdapter<K, H>
where
    K: DeserializeOwned + 'static,
    H: TypedEventHandler<K>,
{
    fn on_add(&self, obj: &ObjectRef, in_initial_list: bool) {
        if let Some(k) = Self::decode(obj) {
            self.handler.on_add(k, in_initial_list);
        }
    }

    fn on_update(&self, old: &ObjectRef, new: &ObjectRef) {
        if let (Some(old), Some(new)) = (Self::decode(old), Self::decode(new)) {
            self.handler.on_update(old, new);
        }
    }

    fn on_delete(&self, obj: &ObjectRef, final_state_unknown: bool) {
        if let Some(k) = Self::decode(obj) {
            self.handler.on_delete(k, final_state_unknown);
        }
    }
}

/// client-go's generated typed lister: list and get returning `K`.
pub struct TypedLister<K> {
    lister: Lister,
    _kind: PhantomData<fn() -> K>,
}

impl<K> Clone for TypedLister<K> {
    fn clone(&self) -> Self {
        TypedLister {
            lister: self.lister.clone(),
            _kind: PhantomData,
        }
    }
}

impl<K: DeserializeOwned> TypedLister<K> {
    /// The objects whose labels match `selector`.
    pub fn list(&self, selector: &Selector) -> Result<Vec<K>> {
        self.lister
            .list(selector)
            .iter()
            .map(|o| o.deserialize())
            .collect()
    }

    /// The object called `name` (in this lister's namespace, if it has one).
    pub fn get(&self, name: &str) -> Result<Option<K>> {
        self.lister.get(name).map(|o| o.deserialize()).transpose()
    }

    /// The same cache restricted to `namespace`.
    pub fn by_namespace(&self, namespace: impl Into<String>) -> TypedLister<K> {
        TypedLister {
            lister: self.lister.by_namespace(namespace),
            _kind: PhantomData,
        }
    }

    /// The untyped lister underneath (objects without a parse).
    pub fn untyped(&self) -> &Lister {
        &self.lister
    }
}
