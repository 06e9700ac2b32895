//! [`Cache`]: typed, read-only queries of the host's shared informer cache.
//!
//! Every query answers from the host's memory (no API server round trip). The plugin must have
//! subscribed to the resource in `init` (events or cache-only), and the host's config must grant
//! it; otherwise the query fails with [`CacheError`](crate::CacheError).

use std::marker::PhantomData;

use serde::de::DeserializeOwned;

use crate::{DynamicObject, Error, Kind, Resource};

/// The cached objects of one resource, decoded as `T`.
///
/// ```no_run
/// # use kubewasm_guest::{Cache, Error, k8s_openapi::api::core::v1::Pod};
/// # fn f() -> Result<(), Error> {
/// let pods = Cache::<Pod>::new();
/// let web = pods.list(Some("shop"), Some("app=web"))?;
/// let owned = pods.by_index("by-owner", "1c0d-...")?;
/// let one = pods.get(Some("shop"), "web-0")?;
/// # Ok(()) }
/// ```
pub struct Cache<T> {
    resource: Resource,
    _type: PhantomData<fn() -> T>,
}

impl<K: Kind + DeserializeOwned> Cache<K> {
    /// The cache of `K`'s resource, e.g. `Cache::<Pod>::new()`.
    pub fn new() -> Self {
        Self::of(K::resource())
    }
}

impl<K: Kind + DeserializeOwned> Default for Cache<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl Cache<DynamicObject> {
    /// The cache of any resource as [`DynamicObject`]s (custom resources).
    pub fn dynamic(resource: Resource) -> Self {
        Self::of(resource)
    }
}

impl<T: DeserializeOwned> Cache<T> {
    /// The cache of `resource`, its objects decoded as `T` (which must fit their JSON).
    pub fn of(resource: Resource) -> Self {
        Cache {
            resource,
            _type: PhantomData,
        }
    }

    /// The resource queried.
    pub fn resource(&self) -> &Resource {
        &self.resource
    }

    /// One object by namespace (`None` for cluster-scoped) and name.
    pub fn get(&self, namespace: Option<&str>, name: &str) -> Result<Option<T>, Error> {
        host::get(&self.resource, namespace, name)?
            .map(|json| self.decode(&json))
            .transpose()
    }

    /// Every cached object, optionally in one namespace and matching a label selector.
    pub fn list(
        &self,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<T>, Error> {
        self.decode_all(host::list(&self.resource, namespace, label_selector)?)
    }

    /// The objects whose index `index` holds `value` (client-go's `ByIndex`). `namespace` is
    /// always an index; others are declared with [`Index`](crate::Index).
    pub fn by_index(&self, index: &str, value: &str) -> Result<Vec<T>, Error> {
        self.decode_all(host::by_index(&self.resource, index, value)?)
    }

    /// Every value index `index` currently holds.
    pub fn index_values(&self, index: &str) -> Result<Vec<String>, Error> {
        host::index_values(&self.resource, index)
    }

    /// Whether the resource's informer has finished its initial list.
    pub fn has_synced(&self) -> Result<bool, Error> {
        host::has_synced(&self.resource)
    }

    fn decode(&self, json: &str) -> Result<T, Error> {
        serde_json::from_str(json).map_err(|source| Error::Decode {
            resource: self.resource.clone(),
            source,
        })
    }

    fn decode_all(&self, objects: Vec<String>) -> Result<Vec<T>, Error> {
        objects.iter().map(|json| self.decode(json)).collect()
    }
}

/// The host's `cache` interface, or [`Error::NoHost`] in native builds.
#[cfg(target_arch = "wasm32")]
mod host {
    use crate::bindings::kubewasm::controller::cache;
    use crate::{CacheError, Error, Resource};

    fn refused(error: crate::bindings::kubewasm::controller::types::CacheError) -> Error {
        Error::Cache(CacheError::from(error))
    }

    pub fn get(
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<String>, Error> {
        cache::get(&resource.to_wit(), namespace, name).map_err(refused)
    }

    pub fn list(
        resource: &Resource,
        namespace: Option<&str>,
        selector: Option<&str>,
    ) -> Result<Vec<String>, Error> {
        cache::list_objects(&resource.to_wit(), namespace, selector).map_err(refused)
    }

    pub fn by_index(resource: &Resource, index: &str, value: &str) -> Result<Vec<String>, Error> {
        cache::by_index(&resource.to_wit(), index, value).map_err(refused)
    }

    pub fn index_values(resource: &Resource, index: &str) -> Result<Vec<String>, Error> {
        cache::index_values(&resource.to_wit(), index).map_err(refused)
    }

    pub fn has_synced(resource: &Resource) -> Result<bool, Error> {
        cache::has_synced(&resource.to_wit()).map_err(refused)
    }
}

/// Native builds have no host: every query answers [`Error::NoHost`].
#[cfg(not(target_arch = "wasm32"))]
mod host {
    use crate::{Error, Resource};

    pub fn get(_: &Resource, _: Option<&str>, _: &str) -> Result<Option<String>, Error> {
        Err(Error::NoHost)
    }

    pub fn list(_: &Resource, _: Option<&str>, _: Option<&str>) -> Result<Vec<String>, Error> {
        Err(Error::NoHost)
    }

    pub fn by_index(_: &Resource, _: &str, _: &str) -> Result<Vec<String>, Error> {
        Err(Error::NoHost)
    }

    pub fn index_values(_: &Resource, _: &str) -> Result<Vec<String>, Error> {
        Err(Error::NoHost)
    }

    pub fn has_synced(_: &Resource) -> Result<bool, Error> {
        Err(Error::NoHost)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;

    use super::*;

    #[test]
    fn native_builds_answer_no_host_instead_of_trapping() {
        let pods = Cache::<Pod>::new();
        assert_eq!(pods.resource(), &Resource::of::<Pod>());
        assert!(matches!(pods.get(None, "p"), Err(Error::NoHost)));
        assert!(matches!(pods.list(None, None), Err(Error::NoHost)));
        assert!(matches!(
            pods.by_index("namespace", "x"),
            Err(Error::NoHost)
        ));
        assert!(matches!(pods.has_synced(), Err(Error::NoHost)));
    }

    #[test]
    fn decode_turns_host_json_into_the_cache_type() {
        let widgets = Cache::dynamic(Resource::new("example.com", "v1", "Widget"));
        let objects = vec![r#"{"metadata":{"name":"a"}}"#.to_owned(), "{}".to_owned()];
        let decoded = widgets.decode_all(objects).unwrap();
        assert_eq!(decoded[0].name(), "a");
        let error = widgets.decode("[1]").err().unwrap();
        assert!(
            error
                .to_string()
                .starts_with("cannot decode a example.com/v1 Widget")
        );
    }
}
