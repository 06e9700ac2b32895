//! The thread-safe store and its indexes; [`Indexer`] is the read-only view handed out.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use kubewasm_labels::Selector;
use parking_lot::RwLock;

use crate::error::{Error, Result};
use crate::index_funcs::{IndexFunc, NAMESPACE_INDEX};
use crate::key_hash::{KeyMap, KeySet};
use crate::object::{Object, ObjectRef};

/// An object that hashes and compares by its key, so sets of objects are maps by key without
/// a second copy of the key.
#[derive(Clone)]
pub(crate) struct ByKey(pub(crate) ObjectRef);

impl Hash for ByKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.key().hash(state);
    }
}

impl PartialEq for ByKey {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.key() == other.0.key()
    }
}

impl Eq for ByKey {}

impl Borrow<str> for ByKey {
    fn borrow(&self) -> &str {
        self.0.key()
    }
}

/// Index value -> the objects filed under it.
type Index = KeyMap<Box<str>, KeySet<ByKey>>;

/// The cache: objects by key plus one index per index function.
///
/// Invariant: an object is in `indices[name][value]` iff it is in `items` and `indexers[name]`
/// returns `value` for it. Written only by the informer's delta processing; read by anyone.
pub(crate) struct Store {
    inner: RwLock<Inner>,
}

struct Inner {
    items: KeySet<ByKey>,
    indexers: Vec<(String, IndexSource)>,
    indices: HashMap<String, Index>,
}

/// Where an index's values come from. The built-in namespace index reads the object's
/// namespace in place, saving the allocations an [`IndexFunc`] call costs on every write.
enum IndexSource {
    Namespace,
    Func(IndexFunc),
}

impl IndexSource {
    fn values(&self, object: &Object) -> Vec<String> {
        match self {
            IndexSource::Namespace => object.namespace().map(str::to_owned).into_iter().collect(),
            IndexSource::Func(f) => f(object),
        }
    }
}

impl Store {
    /// An empty store with the built-in `namespace` index.
    pub(crate) fn new() -> Store {
        let mut indices = HashMap::new();
        indices.insert(NAMESPACE_INDEX.to_string(), Index::default());
        Store {
            inner: RwLock::new(Inner {
                items: KeySet::default(),
                indexers: vec![(NAMESPACE_INDEX.to_string(), IndexSource::Namespace)],
                indices,
            }),
        }
    }

    /// Adds or replaces the object under its key; returns the previous one.
    ///
    /// A resync hands the store the very object it holds: nothing changes, so the key set and
    /// the indexes are left alone (three hash lookups and the index writes saved per object).
    pub(crate) fn upsert(&self, object: ObjectRef) -> Option<ObjectRef> {
        let mut inner = self.inner.write();
        if let Some(held) = inner.items.get(object.key())
            && Arc::ptr_eq(&held.0, &object)
        {
            return Some(object);
        }
        let old = inner.items.replace(ByKey(object.clone())).map(|b| b.0);
        inner.reindex(old.as_deref(), Some(&object));
        old
    }

    /// Removes the object with `key`; returns it.
    pub(crate) fn delete(&self, key: &str) -> Option<ObjectRef> {
        let mut inner = self.inner.write();
        let old = inner.items.take(key).map(|b| b.0);
        if let Some(old) = &old {
            inner.reindex(Some(old), None);
        }
        old
    }

    pub(crate) fn get(&self, key: &str) -> Option<ObjectRef> {
        self.inner.read().items.get(key).map(|b| b.0.clone())
    }

    pub(crate) fn list(&self) -> Vec<ObjectRef> {
        self.inner
            .read()
            .items
            .iter()
            .map(|b| b.0.clone())
            .collect()
    }

    pub(crate) fn len(&self) -> usize {
        self.inner.read().items.len()
    }

    /// Makes room for `listed` objects, a list about to be applied (some of which may be held
    /// already): the key set grows once instead of rehashing every held key at each doubling.
    pub(crate) fn reserve(&self, listed: usize) {
        let mut inner = self.inner.write();
        let additional = listed.saturating_sub(inner.items.len());
        inner.items.reserve(additional);
    }

    pub(crate) fn add_indexers(&self, indexers: Vec<(String, IndexFunc)>) -> Result<()> {
        let mut inner = self.inner.write();
        let mut seen = KeySet::default();
        for (name, _) in &indexers {
            if inner.indices.contains_key(name) || !seen.insert(name.as_str()) {
                return Err(Error::IndexExists(name.clone()));
            }
        }
        for (name, func) in indexers {
            let mut index = Index::default();
            for item in &inner.items {
                for value in func(&item.0) {
                    index
                        .entry(value.into_boxed_str())
                        .or_default()
                        .insert(item.clone());
                }
            }
            inner.indices.insert(name.clone(), index);
            inner.indexers.push((name, IndexSource::Func(func)));
        }
        Ok(())
    }

    pub(crate) fn has_index(&self, name: &str) -> bool {
        self.inner.read().indices.contains_key(name)
    }

    /// Removes an index added with `add_indexers` and its entries; the namespace index
    /// stays. Returns whether there was such an index.
    pub(crate) fn remove_indexer(&self, name: &str) -> bool {
        if name == NAMESPACE_INDEX {
            return false;
        }
        let mut inner = self.inner.write();
        inner.indexers.retain(|(n, _)| n != name);
        inner.indices.remove(name).is_some()
    }

    fn with_bucket<T>(
        &self,
        index: &str,
        value: &str,
        f: impl FnOnce(Option<&KeySet<ByKey>>) -> T,
    ) -> Result<T> {
        let inner = self.inner.read();
        let index = inner
            .indices
            .get(index)
            .ok_or_else(|| Error::IndexNotFound(index.to_string()))?;
        Ok(f(index.get(value)))
    }
}

impl Inner {
    fn reindex(&mut self, old: Option<&Object>, new: Option<&ObjectRef>) {
        for (name, source) in &self.indexers {
            let Some(index) = self.indices.get_mut(name) else {
                continue;
            };
            if let IndexSource::Namespace = source {
                // Old and new share a key, hence a namespace.
                let namespace = old.or(new.map(|n| &**n)).and_then(Object::namespace);
                let Some(ns) = namespace else { continue };
                match new {
                    Some(new) => match index.get_mut(ns) {
                        Some(bucket) => {
                            bucket.replace(ByKey(new.clone()));
                        }
                        None => {
                            index.insert(ns.into(), KeySet::from_iter([ByKey(new.clone())]));
                        }
                    },
                    None => {
                        if let (Some(old), Some(bucket)) = (old, index.get_mut(ns)) {
                            bucket.remove(old.key());
                            if bucket.is_empty() {
                                index.remove(ns);
                            }
                        }
                    }
                }
                continue;
            }
            let old_values = old.map(|o| source.values(o)).unwrap_or_default();
            let new_values = new.map(|o| source.values(o)).unwrap_or_default();
            if let Some(old) = old {
                for value in old_values.iter().filter(|v| !new_values.contains(v)) {
                    if let Some(bucket) = index.get_mut(value.as_str()) {
                        bucket.remove(old.key());
                        if bucket.is_empty() {
                            index.remove(value.as_str());
                        }
                    }
                }
            }
            if let Some(new) = new {
                for value in new_values {
                    match index.get_mut(value.as_str()) {
                        Some(bucket) => {
                            bucket.replace(ByKey(new.clone()));
                        }
                        None => {
                            index.insert(
                                value.into_boxed_str(),
                                KeySet::from_iter([ByKey(new.clone())]),
                            );
                        }
                    }
                }
            }
        }
    }
}

/// A read-only, cheaply cloned view of an informer's store.
///
/// Everything it returns is the cached object itself (an `Arc`), never a copy; the store is
/// updated before any handler hears of a change, so a handler always finds at least the state
/// it is told about.
#[derive(Clone)]
pub struct Indexer {
    store: Arc<Store>,
}

impl Indexer {
    pub(crate) fn new(store: Arc<Store>) -> Indexer {
        Indexer { store }
    }

    /// The object with key `namespace/name` (or `name`).
    pub fn get(&self, key: &str) -> Option<ObjectRef> {
        self.store.get(key)
    }

    /// The object called `name` in `namespace` (`None` for cluster-scoped objects).
    pub fn get_by_name(&self, namespace: Option<&str>, name: &str) -> Option<ObjectRef> {
        match namespace {
            Some(ns) => self.store.get(&format!("{ns}/{name}")),
            None => self.store.get(name),
        }
    }

    /// Every cached object, in no particular order.
    pub fn list(&self) -> Vec<ObjectRef> {
        self.store.list()
    }

    /// The cached objects in `namespace` (all namespaces for `None`) whose labels match.
    pub fn list_by_selector(&self, namespace: Option<&str>, selector: &Selector) -> Vec<ObjectRef> {
        let keep = |o: &ObjectRef| selector.is_everything() || selector.matches(|k| o.label(k));
        match namespace {
            Some(ns) => self
                .store
                .with_bucket(NAMESPACE_INDEX, ns, |bucket| {
                    bucket
                        .into_iter()
                        .flatten()
                        .map(|b| &b.0)
                        .filter(|o| keep(o))
                        .cloned()
                        .collect()
                })
                .unwrap_or_default(),
            None => {
                let inner = self.store.inner.read();
                inner
                    .items
                    .iter()
                    .map(|b| &b.0)
                    .filter(|o| keep(o))
                    .cloned()
                    .collect()
            }
        }
    }

    /// The objects filed under `value` in index `index`.
    pub fn by_index(&self, index: &str, value: &str) -> Result<Vec<ObjectRef>> {
        self.store.with_bucket(index, value, |bucket| {
            bucket.into_iter().flatten().map(|b| b.0.clone()).collect()
        })
    }

    /// The keys of the objects filed under `value` in index `index`.
    pub fn index_keys(&self, index: &str, value: &str) -> Result<Vec<String>> {
        self.store.with_bucket(index, value, |bucket| {
            bucket
                .into_iter()
                .flatten()
                .map(|b| b.0.key().to_string())
                .collect()
        })
    }

    /// The objects that share at least one value of index `index` with `object`.
    pub fn index(&self, index: &str, object: &Object) -> Result<Vec<ObjectRef>> {
        let inner = self.store.inner.read();
        let source = inner
            .indexers
            .iter()
            .find(|(name, _)| name == index)
            .map(|(_, source)| source)
            .ok_or_else(|| Error::IndexNotFound(index.to_string()))?;
        let idx = &inner.indices[index];
        let mut found: KeySet<ByKey> = KeySet::default();
        for value in source.values(object) {
            if let Some(bucket) = idx.get(value.as_str()) {
                found.extend(bucket.iter().cloned());
            }
        }
        Ok(found.into_iter().map(|b| b.0).collect())
    }

    /// Every value index `index` currently files objects under.
    pub fn list_index_func_values(&self, index: &str) -> Result<Vec<String>> {
        let inner = self.store.inner.read();
        let idx = inner
            .indices
            .get(index)
            .ok_or_else(|| Error::IndexNotFound(index.to_string()))?;
        Ok(idx.keys().map(|k| k.to_string()).collect())
    }

    /// The names of the indexes this store has (`namespace` always among them).
    pub fn index_names(&self) -> Vec<String> {
        self.store
            .inner
            .read()
            .indexers
            .iter()
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Whether index `name` exists.
    pub fn has_index(&self, name: &str) -> bool {
        self.store.has_index(name)
    }

    /// How many objects are cached.
    pub fn len(&self) -> usize {
        self.store.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index_funcs;

    fn obj(ns: &str, name: &str, rv: u64, app: &str) -> ObjectRef {
        Arc::new(
            Object::from_json(&format!(
                r#"{{"metadata":{{"name":"{name}","namespace":"{ns}","resourceVersion":"{rv}","labels":{{"app":"{app}"}}}}}}"#
            ))
            .unwrap(),
        )
    }

    fn sorted(mut v: Vec<String>) -> Vec<String> {
        v.sort();
        v
    }

    /// A resync hands the store the object it holds: the short cut that skips the index
    /// writes must leave the key set and every index as they were, and a new version of the
    /// same key must still move between index values.
    #[test]
    fn the_same_object_again_changes_nothing_and_a_new_version_still_moves() {
        let store = Arc::new(Store::new());
        let web = obj("a", "x", 1, "web");
        assert!(store.upsert(web.clone()).is_none());
        store
            .add_indexers(vec![("app".into(), index_funcs::label("app"))])
            .unwrap();
        let indexer = Indexer::new(store.clone());
        let again = store.upsert(web.clone()).expect("held");
        assert!(Arc::ptr_eq(&again, &web));
        assert_eq!(store.len(), 1);
        assert_eq!(indexer.index_keys("namespace", "a").unwrap(), vec!["a/x"]);
        assert_eq!(indexer.index_keys("app", "web").unwrap(), vec!["a/x"]);

        let moved = store.upsert(obj("a", "x", 2, "api")).expect("held");
        assert!(Arc::ptr_eq(&moved, &web));
        assert!(indexer.index_keys("app", "web").unwrap().is_empty());
        assert_eq!(indexer.index_keys("app", "api").unwrap(), vec!["a/x"]);
    }

    #[test]
    fn namespace_index_is_built_in() {
        let store = Arc::new(Store::new());
        store.upsert(obj("a", "x", 1, "web"));
        store.upsert(obj("b", "y", 1, "web"));
        let indexer = Indexer::new(store);
        assert_eq!(indexer.index_keys("namespace", "a").unwrap(), vec!["a/x"]);
        assert_eq!(
            sorted(indexer.list_index_func_values("namespace").unwrap()),
            vec!["a", "b"]
        );
        assert!(matches!(
            indexer.by_index("nope", "a"),
            Err(Error::IndexNotFound(_))
        ));
    }

    #[test]
    fn update_moves_object_between_index_values() {
        let store = Arc::new(Store::new());
        store
            .add_indexers(vec![("app".into(), index_funcs::label("app"))])
            .unwrap();
        store.upsert(obj("a", "x", 1, "web"));
        let old = store.upsert(obj("a", "x", 2, "db")).unwrap();
        assert_eq!(old.resource_version(), "1");
        let indexer = Indexer::new(store.clone());
        assert!(indexer.by_index("app", "web").unwrap().is_empty());
        let db = indexer.by_index("app", "db").unwrap();
        assert_eq!(db.len(), 1);
        assert_eq!(db[0].resource_version(), "2");
        assert_eq!(indexer.list_index_func_values("app").unwrap(), vec!["db"]);
        store.delete("a/x");
        assert!(indexer.list_index_func_values("app").unwrap().is_empty());
        assert!(indexer.is_empty());
    }

    #[test]
    fn indexers_added_late_index_existing_objects_and_names_are_unique() {
        let store = Arc::new(Store::new());
        store.upsert(obj("a", "x", 1, "web"));
        store.upsert(obj("a", "y", 1, "db"));
        store
            .add_indexers(vec![("app".into(), index_funcs::label("app"))])
            .unwrap();
        let indexer = Indexer::new(store.clone());
        assert_eq!(indexer.index_keys("app", "web").unwrap(), vec!["a/x"]);
        assert!(matches!(
            store.add_indexers(vec![("app".into(), index_funcs::label("app"))]),
            Err(Error::IndexExists(_))
        ));
        assert!(matches!(
            store.add_indexers(vec![("namespace".into(), index_funcs::namespace())]),
            Err(Error::IndexExists(_))
        ));
        let probe = obj("z", "q", 1, "web");
        let same = indexer.index("app", &probe).unwrap();
        assert_eq!(same.len(), 1);
        assert_eq!(same[0].key(), "a/x");
    }

    #[test]
    fn a_removed_indexer_is_gone_and_its_function_no_longer_runs() {
        let store = Arc::new(Store::new());
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = calls.clone();
        let label = index_funcs::label("app");
        let func: IndexFunc = Arc::new(move |o: &Object| {
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            label(o)
        });
        store.add_indexers(vec![("app".into(), func)]).unwrap();
        store.upsert(obj("a", "x", 1, "web"));
        assert!(store.remove_indexer("app"));
        assert!(!store.remove_indexer("app"));
        assert!(
            !store.remove_indexer(NAMESPACE_INDEX),
            "the namespace index stays"
        );
        let runs = calls.load(std::sync::atomic::Ordering::Relaxed);
        store.upsert(obj("a", "x", 2, "db"));
        assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), runs);
        let indexer = Indexer::new(store.clone());
        assert!(!indexer.has_index("app"));
        assert!(matches!(
            indexer.by_index("app", "db"),
            Err(Error::IndexNotFound(_))
        ));
        // The name can be declared again, and indexes what is cached.
        store
            .add_indexers(vec![("app".into(), index_funcs::label("app"))])
            .unwrap();
        assert_eq!(indexer.index_keys("app", "db").unwrap(), vec!["a/x"]);
    }

    #[test]
    fn list_by_selector_filters_namespace_and_labels() {
        let store = Arc::new(Store::new());
        store.upsert(obj("a", "x", 1, "web"));
        store.upsert(obj("a", "y", 1, "db"));
        store.upsert(obj("b", "z", 1, "web"));
        let indexer = Indexer::new(store);
        let web = Selector::parse("app=web").unwrap();
        let mut keys: Vec<_> = indexer
            .list_by_selector(None, &web)
            .iter()
            .map(|o| o.key().to_string())
            .collect();
        keys.sort();
        assert_eq!(keys, vec!["a/x", "b/z"]);
        let in_a = indexer.list_by_selector(Some("a"), &Selector::everything());
        assert_eq!(in_a.len(), 2);
        assert_eq!(indexer.list_by_selector(Some("a"), &web)[0].key(), "a/x");
        assert!(indexer.get_by_name(Some("b"), "z").is_some());
        assert!(indexer.get_by_name(None, "z").is_none());
    }

    #[test]
    fn index_operations_stay_consistent_under_concurrent_writers() {
        let store = Arc::new(Store::new());
        store
            .add_indexers(vec![("app".into(), index_funcs::label("app"))])
            .unwrap();
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let store = store.clone();
                std::thread::spawn(move || {
                    for i in 0..2000u64 {
                        let name = format!("o{}", i % 50);
                        let ns = format!("ns{w}");
                        let app = if i % 3 == 0 { "web" } else { "db" };
                        if i % 7 == 0 {
                            store.delete(&format!("{ns}/{name}"));
                        } else {
                            store.upsert(obj(&ns, &name, i, app));
                        }
                    }
                })
            })
            .collect();
        let reader = {
            let indexer = Indexer::new(store.clone());
            std::thread::spawn(move || {
                for _ in 0..500 {
                    for o in indexer.by_index("app", "web").unwrap() {
                        assert_eq!(o.label("app"), Some("web"));
                    }
                    let _ = indexer.list_index_func_values("namespace").unwrap();
                }
            })
        };
        for w in writers {
            w.join().unwrap();
        }
        reader.join().unwrap();
        // Every index agrees with the items once writers are done.
        let indexer = Indexer::new(store.clone());
        let all = indexer.list();
        for o in &all {
            let app = o.label("app").unwrap();
            assert!(
                indexer
                    .index_keys("app", app)
                    .unwrap()
                    .contains(&o.key().to_string())
            );
            let ns = o.namespace().unwrap();
            assert!(
                indexer
                    .index_keys("namespace", ns)
                    .unwrap()
                    .contains(&o.key().to_string())
            );
        }
        let indexed: usize = ["web", "db"]
            .iter()
            .map(|v| indexer.by_index("app", v).unwrap().len())
            .sum();
        assert_eq!(indexed, all.len());
        let by_ns: usize = indexer
            .list_index_func_values("namespace")
            .unwrap()
            .iter()
            .map(|v| indexer.by_index("namespace", v).unwrap().len())
            .sum();
        assert_eq!(by_ns, all.len());
    }
}
