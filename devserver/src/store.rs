//! The object store: one global resourceVersion, objects per resource, bounded event history,
//! and the watchers each change is fanned out to.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use parking_lot::RwLock;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::Status;
use crate::event::{Event, EventType};
use crate::hooks::ResourceName;
use crate::object::StoredObject;

/// Receives the events of one resource, in resourceVersion order.
pub(crate) type EventReceiver = mpsc::UnboundedReceiver<Arc<Event>>;

/// The largest request etcd takes (its `--max-request-bytes` default).
const ETCD_MAX_REQUEST: usize = 1536 * 1024;
/// The largest message the API server's etcd client sends (gRPC's default in etcd's client).
const ETCD_CLIENT_MAX_SEND: usize = 2 * 1024 * 1024;

/// Refuses an object a real cluster could not store, as the API server fails (500 without a
/// reason): etcd refuses a request over 1.5 MiB, and the API server's etcd client refuses to
/// send one over 2 MiB. The request's size is taken as the object's JSON plus its key twice (in
/// the transaction's condition and its put), close to what etcd counts for a custom resource,
/// which is stored as JSON; a built-in kind is stored as protobuf, a little smaller.
fn check_storable(storage_key: &str, key: &str, object: &StoredObject) -> Result<(), Status> {
    let request = object.json.len() + 2 * ("/registry/".len() + storage_key.len() + key.len());
    if request > ETCD_CLIENT_MAX_SEND {
        return Err(Status::new(
            500,
            "",
            format!(
                "rpc error: code = ResourceExhausted desc = trying to send message larger than \
                 max ({request} vs. {ETCD_CLIENT_MAX_SEND})"
            ),
        ));
    }
    if request > ETCD_MAX_REQUEST {
        return Err(Status::new(500, "", "etcdserver: request is too large"));
    }
    Ok(())
}

/// What a write decided to do with the object at a key.
pub(crate) enum Change {
    /// Store this object (its `metadata.resourceVersion` is set by the store).
    Put(Value),
    /// Delete the object, reporting this final state (its resourceVersion is set by the store).
    Remove(Value),
    /// Nothing changes: no new resourceVersion, no event; the write returns the current object.
    Unchanged,
}

/// Every object of one resource (all namespaces), its recent history and its watchers.
///
/// Invariant: `history` holds, in order, every event of this resource with a resourceVersion
/// greater than `oldest_resource_version`, so any state from that version on can be rebuilt.
#[derive(Default)]
pub(crate) struct Collection {
    pub objects: BTreeMap<String, Arc<StoredObject>>,
    pub history: VecDeque<Arc<Event>>,
    pub oldest_resource_version: u64,
    watchers: Vec<mpsc::UnboundedSender<Arc<Event>>>,
}

impl Collection {
    /// An empty collection whose history starts at `resource_version`.
    fn starting_at(resource_version: u64) -> Collection {
        Collection {
            oldest_resource_version: resource_version,
            ..Collection::default()
        }
    }

    /// Fails with 410 Gone when `resource_version` is older than the retained history.
    pub fn check_not_expired(&self, resource_version: u64) -> Result<(), Status> {
        if resource_version < self.oldest_resource_version {
            Err(Status::expired(format!(
                "too old resource version: {resource_version} ({})",
                self.oldest_resource_version
            )))
        } else {
            Ok(())
        }
    }

    /// The events after `resource_version`, oldest first.
    pub fn events_after(&self, resource_version: u64) -> impl Iterator<Item = &Arc<Event>> {
        let start = self
            .history
            .partition_point(|e| e.resource_version <= resource_version);
        self.history.range(start..)
    }
}

struct Inner {
    resource_version: u64,
    /// The resourceVersion of the last compaction: collections created later start there.
    compacted: u64,
    collections: HashMap<String, Collection>,
}

/// The store; all writes are serialised by one lock so resourceVersions are totally ordered.
pub(crate) struct Store {
    inner: RwLock<Inner>,
    history_size: usize,
}

/// The state a new watch starts from, captured atomically with its registration.
pub(crate) struct WatchStart {
    /// Objects to announce as ADDED first (for a watch without a resourceVersion).
    pub initial: Vec<Arc<StoredObject>>,
    /// Retained events after the requested resourceVersion, oldest first.
    pub replay: Vec<Arc<Event>>,
    /// The global resourceVersion at registration.
    pub resource_version: u64,
    pub receiver: EventReceiver,
}

impl Store {
    pub fn new(history_size: usize) -> Store {
        Store {
            inner: RwLock::new(Inner {
                resource_version: 1,
                compacted: 0,
                collections: HashMap::new(),
            }),
            history_size: history_size.max(1),
        }
    }

    /// The latest resourceVersion handed out.
    pub fn resource_version(&self) -> u64 {
        self.inner.read().resource_version
    }

    /// Runs `f` on the collection `storage_key` (empty if nothing was ever stored) under the read
    /// lock, with the global resourceVersion. Keep `f` short: writers wait for it.
    pub fn read<R>(&self, storage_key: &str, f: impl FnOnce(&Collection, u64) -> R) -> R {
        let inner = self.inner.read();
        let empty = Collection::starting_at(inner.compacted);
        let collection = inner.collections.get(storage_key).unwrap_or(&empty);
        f(collection, inner.resource_version)
    }

    /// The current object at `key`.
    pub fn get(&self, storage_key: &str, key: &str) -> Option<Arc<StoredObject>> {
        self.read(storage_key, |c, _| c.objects.get(key).cloned())
    }

    /// Applies one write to `key` atomically: `decide` sees the current object and the
    /// resourceVersion the change will get, and returns the change (or an error, which leaves
    /// the store untouched). Returns the stored object. With `dry_run` nothing is stored and
    /// the result keeps the current resourceVersion (none for a creation).
    pub fn write(
        &self,
        storage_key: &str,
        key: &str,
        selectable_fields: &[String],
        dry_run: bool,
        decide: impl FnOnce(Option<&Arc<StoredObject>>, u64) -> Result<Change, Status>,
    ) -> Result<Arc<StoredObject>, Status> {
        let mut inner = self.inner.write();
        let next_rv = inner.resource_version + 1;
        let compacted = inner.compacted;
        let collection = inner
            .collections
            .entry(storage_key.to_owned())
            .or_insert_with(|| Collection::starting_at(compacted));
        let current = collection.objects.get(key).cloned();
        let change = decide(current.as_ref(), next_rv)?;
        let (event_type, mut value) = match change {
            Change::Put(value) if current.is_none() => (EventType::Added, value),
            Change::Put(value) => (EventType::Modified, value),
            Change::Remove(_) if current.is_none() => {
                return Err(Status::internal("removal of an absent object"));
            }
            Change::Remove(value) => (EventType::Deleted, value),
            Change::Unchanged => {
                return current
                    .ok_or_else(|| Status::internal("unchanged write without an object"));
            }
        };
        let meta = value
            .get_mut("metadata")
            .and_then(Value::as_object_mut)
            .ok_or_else(|| Status::internal("object without metadata"))?;
        if dry_run {
            match &current {
                Some(c) => meta.insert(
                    "resourceVersion".to_owned(),
                    Value::String(c.resource_version.to_string()),
                ),
                None => meta.remove("resourceVersion"),
            };
            let rv = current.as_ref().map_or(0, |c| c.resource_version);
            return Ok(Arc::new(StoredObject::new(&value, rv, selectable_fields)?));
        }
        meta.insert(
            "resourceVersion".to_owned(),
            Value::String(next_rv.to_string()),
        );
        let stored = Arc::new(StoredObject::new(&value, next_rv, selectable_fields)?);
        if event_type != EventType::Deleted {
            check_storable(storage_key, key, &stored)?;
        }
        if stored.key != key {
            return Err(Status::internal(format!(
                "write to {key:?} produced an object at {:?}",
                stored.key
            )));
        }
        if event_type == EventType::Deleted {
            collection.objects.remove(key);
        } else {
            collection
                .objects
                .insert(key.to_owned(), Arc::clone(&stored));
        }
        let event = Arc::new(Event::new(event_type, Arc::clone(&stored), current));
        collection.history.push_back(Arc::clone(&event));
        while collection.history.len() > self.history_size {
            if let Some(dropped) = collection.history.pop_front() {
                collection.oldest_resource_version = dropped.resource_version;
            }
        }
        collection
            .watchers
            .retain(|w| w.send(Arc::clone(&event)).is_ok());
        inner.resource_version = next_rv;
        Ok(stored)
    }

    /// Registers a watcher of `storage_key`. With `from = None` the watch starts with every
    /// current object; with `Some(rv)` it replays the retained events after `rv` (410 if they are
    /// no longer retained).
    pub fn watch(&self, storage_key: &str, from: Option<u64>) -> Result<WatchStart, Status> {
        let mut inner = self.inner.write();
        let resource_version = inner.resource_version;
        let compacted = inner.compacted;
        let collection = inner
            .collections
            .entry(storage_key.to_owned())
            .or_insert_with(|| Collection::starting_at(compacted));
        let (initial, replay) = match from {
            None => (collection.objects.values().cloned().collect(), Vec::new()),
            Some(rv) => {
                collection.check_not_expired(rv)?;
                (Vec::new(), collection.events_after(rv).cloned().collect())
            }
        };
        let (sender, receiver) = mpsc::unbounded_channel();
        collection.watchers.push(sender);
        Ok(WatchStart {
            initial,
            replay,
            resource_version,
            receiver,
        })
    }

    /// The names of the objects of `storage_key` in `namespace`.
    pub fn names_in_namespace(&self, storage_key: &str, namespace: &str) -> Vec<String> {
        let prefix = format!("{namespace}/");
        self.read(storage_key, |collection, _| {
            collection
                .objects
                .range::<str, _>((
                    std::ops::Bound::Included(prefix.as_str()),
                    std::ops::Bound::Unbounded,
                ))
                .take_while(|(key, _)| key.starts_with(&prefix))
                .map(|(_, object)| object.name.clone())
                .collect()
        })
    }

    /// Ends every open watch: their receivers see the channel close.
    pub fn close_watches(&self) {
        self.close_watches_where(|_| true);
    }

    /// Ends the open watches of `resource` (its storage key is `group/plural`).
    pub fn close_watches_of(&self, resource: &ResourceName) {
        self.close_watches_where(|key| {
            key.split_once('/')
                .is_some_and(|(group, plural)| resource.matches(group, plural))
        });
    }

    fn close_watches_where(&self, pick: impl Fn(&str) -> bool) {
        let mut inner = self.inner.write();
        for (key, collection) in inner.collections.iter_mut() {
            if pick(key) {
                collection.watchers.clear();
            }
        }
    }

    /// Drops all history and moves the global resourceVersion on by one, so every
    /// resourceVersion handed out before answers 410 Gone.
    pub fn compact(&self) {
        let mut inner = self.inner.write();
        inner.resource_version += 1;
        let rv = inner.resource_version;
        inner.compacted = rv;
        for collection in inner.collections.values_mut() {
            collection.history.clear();
            collection.oldest_resource_version = rv;
        }
    }

    /// Forgets every object of a resource (when its CustomResourceDefinition is deleted).
    pub fn drop_collection(&self, storage_key: &str) {
        self.inner.write().collections.remove(storage_key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn put(store: &Store, name: &str, value: &str) -> Arc<StoredObject> {
        store
            .write("/configmaps", &format!("ns/{name}"), &[], false, |_, _| {
                Ok(Change::Put(json!({
                    "metadata": {"name": name, "namespace": "ns"},
                    "data": {"v": value},
                })))
            })
            .unwrap()
    }

    #[test]
    fn writes_get_increasing_resource_versions() {
        let store = Store::new(10);
        let a = put(&store, "a", "1");
        let b = put(&store, "b", "1");
        assert!(b.resource_version > a.resource_version);
        assert_eq!(store.resource_version(), b.resource_version);
        assert!(
            std::str::from_utf8(&b.json)
                .unwrap()
                .contains(&format!("\"resourceVersion\":\"{}\"", b.resource_version))
        );
    }

    #[test]
    fn history_overflow_expires_old_versions() {
        let store = Store::new(2);
        let first = put(&store, "a", "1").resource_version;
        put(&store, "a", "2");
        put(&store, "a", "3");
        assert_eq!(
            store
                .watch("/configmaps", Some(first - 1))
                .err()
                .unwrap()
                .code,
            410
        );
        let start = store.watch("/configmaps", Some(first)).unwrap();
        assert_eq!(start.replay.len(), 2);
    }

    #[test]
    fn compaction_expires_everything_older_than_now() {
        let store = Store::new(100);
        let latest = put(&store, "a", "1").resource_version;
        store.compact();
        assert_eq!(
            store.watch("/configmaps", Some(latest)).err().unwrap().code,
            410
        );
        let now = store.resource_version();
        assert!(store.watch("/configmaps", Some(now)).is_ok());
    }

    #[test]
    fn compaction_also_expires_resources_never_written() {
        let store = Store::new(100);
        let before = store.resource_version();
        store.compact();
        assert_eq!(
            store.watch("/secrets", Some(before)).err().unwrap().code,
            410
        );
        assert!(store.read("/pods", |c, _| c.check_not_expired(before).is_err()));
    }

    #[test]
    fn watchers_receive_later_writes_and_end_on_close() {
        let store = Store::new(100);
        put(&store, "a", "1");
        let mut start = store.watch("/configmaps", None).unwrap();
        assert_eq!(start.initial.len(), 1);
        put(&store, "a", "2");
        let event = start.receiver.try_recv().unwrap();
        assert_eq!(event.event_type, EventType::Modified);
        assert!(event.previous.is_some());
        store.close_watches();
        assert!(matches!(
            start.receiver.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        ));
    }

    #[test]
    fn closing_the_watches_of_one_resource_leaves_the_others_open() {
        let store = Store::new(100);
        let mut config_maps = store.watch("/configmaps", None).unwrap();
        let mut deployments = store.watch("apps/deployments", None).unwrap();
        let mut other = store.watch("example.com/deployments", None).unwrap();
        store.close_watches_of(&"deployments.apps".parse().unwrap());
        let closed = |start: &mut WatchStart| {
            matches!(
                start.receiver.try_recv(),
                Err(mpsc::error::TryRecvError::Disconnected)
            )
        };
        assert!(closed(&mut deployments));
        assert!(!closed(&mut other), "another group's deployments");
        assert!(!closed(&mut config_maps));
        put(&store, "a", "1");
        assert!(config_maps.receiver.try_recv().is_ok(), "still delivering");
        store.close_watches_of(&"configmaps".parse().unwrap());
        assert!(closed(&mut config_maps));
    }

    #[test]
    fn dry_run_stores_nothing() {
        let store = Store::new(10);
        let before = store.resource_version();
        let result = store
            .write("/configmaps", "ns/a", &[], true, |_, _| {
                Ok(Change::Put(
                    json!({"metadata": {"name": "a", "namespace": "ns"}}),
                ))
            })
            .unwrap();
        assert_eq!(result.name, "a");
        assert_eq!(store.resource_version(), before);
        assert!(store.get("/configmaps", "ns/a").is_none());
    }

    #[test]
    fn failed_decision_leaves_store_untouched() {
        let store = Store::new(10);
        let before = store.resource_version();
        let result = store.write("/configmaps", "ns/a", &[], false, |_, _| {
            Err(Status::invalid("no"))
        });
        assert!(result.is_err());
        assert_eq!(store.resource_version(), before);
        assert!(store.get("/configmaps", "ns/a").is_none());
    }
}
