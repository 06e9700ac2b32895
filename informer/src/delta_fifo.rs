//! DeltaFIFO: per-key queues of changes, popped in key order of first arrival.

use std::collections::VecDeque;
use std::collections::hash_map::Entry;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::watch;

use crate::key_hash::KeyMap;
use crate::object::ObjectRef;
use crate::store::{ByKey, Store};

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DeltaType {
    /// A watch saw it created.
    Added,
    /// A watch saw it change.
    Updated,
    /// A watch saw it deleted, or a relist no longer lists it (`final_state_unknown`).
    Deleted,
    /// A relist listed it.
    Replaced,
    /// A periodic resync re-delivers the cached state.
    Sync,
}

/// One change to one object.
#[derive(Debug, Clone)]
pub struct Delta {
    /// What happened.
    pub kind: DeltaType,
    /// The object after the change; for deletes, its last known state.
    pub object: ObjectRef,
    /// A tombstone: the object vanished between a watch and a relist, so its final state is
    /// unknown and `object` is what the cache last held (client-go's DeletedFinalStateUnknown).
    pub final_state_unknown: bool,
}

/// The changes to one key waiting to be processed, oldest first.
pub type Deltas = Vec<Delta>;

/// A queue of deltas keyed by object key, as client-go's DeltaFIFO.
///
/// Guarantees: a key is in `queue` iff it is in `items`; a key's deltas are handed out together
/// and in arrival order; two consecutive deletes of a key collapse into one (the real one is
/// kept over a tombstone). `known` is the store the popped deltas are applied to: deletes of
/// unknown keys are dropped, and `replace` and `resync` read it.
pub(crate) struct DeltaFifo {
    state: Mutex<State>,
    known: Arc<Store>,
    synced: watch::Sender<bool>,
}

struct State {
    items: KeyMap<ByKey, Deltas>,
    queue: VecDeque<ObjectRef>,
    /// A replace happened or an item was added.
    populated: bool,
    /// Items of the first replace not yet popped.
    initial_population_count: usize,
}

/// The capacity (in keys) the queue keeps when it runs empty: enough for watch traffic not to
/// regrow it, and far below what a big list grows it to.
const KEEP_WHEN_EMPTY: usize = 1024;

impl DeltaFifo {
    pub(crate) fn new(known: Arc<Store>) -> DeltaFifo {
        DeltaFifo {
            state: Mutex::new(State {
                items: KeyMap::default(),
                queue: VecDeque::new(),
                populated: false,
                initial_population_count: 0,
            }),
            known,
            synced: watch::Sender::new(false),
        }
    }

    /// The watch saw `object` created.
    pub(crate) fn add(&self, object: ObjectRef) {
        let mut state = self.state.lock();
        state.populated = true;
        self.queue_action(&mut state, DeltaType::Added, object, false);
    }

    /// The watch saw `object` change.
    pub(crate) fn update(&self, object: ObjectRef) {
        let mut state = self.state.lock();
        state.populated = true;
        self.queue_action(&mut state, DeltaType::Updated, object, false);
    }

    /// The watch saw `object` deleted. Dropped if neither the store nor the queue knows it.
    pub(crate) fn delete(&self, object: ObjectRef) {
        let mut state = self.state.lock();
        state.populated = true;
        if self.known.get(object.key()).is_none() && !state.items.contains_key(object.key()) {
            return;
        }
        self.queue_action(&mut state, DeltaType::Deleted, object, false);
    }

    /// A (re)list returned `list`: queue it as `Replaced` and queue a tombstone for every key
    /// the store or the queue has that the list lacks.
    ///
    /// The keys held before the list are gathered and the listed ones struck off, rather than
    /// the list's keys gathered and every held key looked up: an initial list (nothing held)
    /// hashes no key more than queuing it takes. The queue is grown once for the whole list.
    pub(crate) fn replace(&self, list: Vec<ObjectRef>) {
        let mut state = self.state.lock();
        let state = &mut *state;
        // Key -> whether it was queued (else only stored), with the object a tombstone carries.
        let mut unlisted: KeyMap<ByKey, bool> = state
            .items
            .values()
            .filter_map(|deltas| deltas.last())
            .map(|delta| (ByKey(delta.object.clone()), true))
            .collect();
        for object in self.known.list() {
            unlisted.entry(ByKey(object)).or_insert(false);
        }
        let queued_before = state.items.len();
        let mut listed_and_queued = 0;
        state.items.reserve(list.len());
        state.queue.reserve(list.len());
        self.known.reserve(list.len());
        for object in list {
            if !unlisted.is_empty() && unlisted.remove(object.key()) == Some(true) {
                listed_and_queued += 1;
            }
            self.queue_action(state, DeltaType::Replaced, object, false);
        }
        let listed_keys = state.items.len() - queued_before + listed_and_queued;
        let queued_deletions = unlisted.len();
        for (ByKey(object), _) in unlisted {
            self.queue_action(state, DeltaType::Deleted, object, true);
        }
        if !state.populated {
            state.populated = true;
            state.initial_population_count = listed_keys + queued_deletions;
        }
        self.update_synced(state);
    }

    /// Queue a `Sync` delta for every stored object that has nothing queued.
    pub(crate) fn resync(&self) {
        let mut state = self.state.lock();
        let state = &mut *state;
        for object in self.known.list() {
            // One hash per key: a key with pending deltas is skipped, any other queued.
            if let Entry::Vacant(slot) = state.items.entry(ByKey(object.clone())) {
                slot.insert(vec![Delta {
                    kind: DeltaType::Sync,
                    object: object.clone(),
                    final_state_unknown: false,
                }]);
                state.queue.push_back(object);
            }
        }
    }

    /// Takes the oldest key, if any, and runs `process` on its deltas while holding the queue's
    /// lock (so `replace` and `resync` never see a popped key that is not yet in the store).
    /// `process` gets `in_initial_list`: the deltas belong to the first list. Callers drain the
    /// queue right after they fill it, on their own task, so no hand-off to another task is
    /// paid per event.
    pub(crate) fn pop_ready<R>(&self, process: impl FnOnce(Deltas, bool) -> R) -> Option<R> {
        let mut state = self.state.lock();
        let head = state.queue.pop_front()?;
        let deltas = state.items.remove(head.key()).unwrap_or_default();
        if state.queue.is_empty() && state.items.capacity() > KEEP_WHEN_EMPTY {
            // A big list has been drained: its tables would otherwise stay allocated for good
            // (about 50 bytes per listed object).
            state.items.shrink_to_fit();
            state.queue.shrink_to_fit();
        }
        let in_initial_list = !Self::synced_locked(&state);
        let result = process(deltas, in_initial_list);
        if state.initial_population_count > 0 {
            state.initial_population_count -= 1;
            self.update_synced(&state);
        }
        Some(result)
    }

    /// Whether the first list has been fully popped.
    pub(crate) fn has_synced(&self) -> bool {
        Self::synced_locked(&self.state.lock())
    }

    /// A receiver that turns true once the first list has been fully popped.
    pub(crate) fn subscribe_synced(&self) -> watch::Receiver<bool> {
        self.synced.subscribe()
    }

    /// How many keys are queued.
    pub(crate) fn len(&self) -> usize {
        self.state.lock().queue.len()
    }

    fn synced_locked(state: &State) -> bool {
        state.populated && state.initial_population_count == 0
    }

    fn update_synced(&self, state: &State) {
        if Self::synced_locked(state) {
            self.synced
                .send_if_modified(|synced| !std::mem::replace(synced, true));
        }
    }

    fn queue_action(
        &self,
        state: &mut State,
        kind: DeltaType,
        object: ObjectRef,
        final_state_unknown: bool,
    ) {
        let delta = Delta {
            kind,
            object: object.clone(),
            final_state_unknown,
        };
        match state.items.get_mut(object.key()) {
            Some(deltas) => {
                deltas.push(delta);
                dedup_deletes(deltas);
            }
            None => {
                state.items.insert(ByKey(object.clone()), vec![delta]);
                state.queue.push_back(object);
            }
        }
    }
}

/// Two deletes in a row say the same thing: keep one, the real one over a tombstone.
fn dedup_deletes(deltas: &mut Deltas) {
    let n = deltas.len();
    if n < 2 {
        return;
    }
    let (a, b) = (&deltas[n - 2], &deltas[n - 1]);
    if a.kind == DeltaType::Deleted && b.kind == DeltaType::Deleted {
        if b.final_state_unknown && !a.final_state_unknown {
            deltas.pop();
        } else {
            deltas.remove(n - 2);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::Object;

    fn obj(name: &str, rv: u64) -> ObjectRef {
        Arc::new(
            Object::from_json(&format!(
                r#"{{"metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}"}}}}"#
            ))
            .unwrap(),
        )
    }

    /// A popped key with its deltas as `(type, resourceVersion, tombstone)`.
    type Popped = (String, Vec<(DeltaType, String, bool)>);

    fn pop_all(fifo: &DeltaFifo) -> Vec<Popped> {
        let mut out = Vec::new();
        while fifo.len() > 0 {
            let item = fifo
                .pop_ready(|deltas, _| {
                    let key = deltas[0].object.key().to_string();
                    let ds = deltas
                        .iter()
                        .map(|d| {
                            (
                                d.kind,
                                d.object.resource_version().to_string(),
                                d.final_state_unknown,
                            )
                        })
                        .collect();
                    (key, ds)
                })
                .unwrap();
            out.push(item);
        }
        out
    }

    #[test]
    fn pops_keys_in_first_arrival_order_with_deltas_in_order() {
        let store = Arc::new(Store::new());
        let fifo = DeltaFifo::new(store);
        fifo.add(obj("a", 1));
        fifo.add(obj("b", 2));
        fifo.update(obj("a", 3));
        let popped = pop_all(&fifo);
        assert_eq!(popped.len(), 2);
        assert_eq!(popped[0].0, "ns/a");
        assert_eq!(
            popped[0].1,
            vec![
                (DeltaType::Added, "1".into(), false),
                (DeltaType::Updated, "3".into(), false)
            ]
        );
        assert_eq!(popped[1].0, "ns/b");
    }

    #[test]
    fn delete_of_unknown_key_is_dropped() {
        let store = Arc::new(Store::new());
        let fifo = DeltaFifo::new(store);
        fifo.delete(obj("ghost", 1));
        assert_eq!(fifo.len(), 0);
    }

    #[test]
    fn duplicate_deletes_collapse_keeping_the_real_one() {
        let store = Arc::new(Store::new());
        store.upsert(obj("a", 1));
        let fifo = DeltaFifo::new(store);
        fifo.delete(obj("a", 2));
        fifo.replace(vec![]);
        let popped = pop_all(&fifo);
        assert_eq!(
            popped,
            vec![("ns/a".into(), vec![(DeltaType::Deleted, "2".into(), false)])]
        );
    }

    #[test]
    fn replace_makes_tombstones_for_missing_keys() {
        let store = Arc::new(Store::new());
        store.upsert(obj("gone", 1));
        store.upsert(obj("kept", 1));
        let fifo = DeltaFifo::new(store);
        fifo.add(obj("queued-only", 5));
        fifo.replace(vec![obj("kept", 2), obj("new", 3)]);
        let mut popped = pop_all(&fifo);
        popped.sort();
        assert_eq!(
            popped,
            vec![
                (
                    "ns/gone".into(),
                    vec![(DeltaType::Deleted, "1".into(), true)]
                ),
                (
                    "ns/kept".into(),
                    vec![(DeltaType::Replaced, "2".into(), false)]
                ),
                (
                    "ns/new".into(),
                    vec![(DeltaType::Replaced, "3".into(), false)]
                ),
                (
                    "ns/queued-only".into(),
                    vec![
                        (DeltaType::Added, "5".into(), false),
                        (DeltaType::Deleted, "5".into(), true)
                    ]
                ),
            ]
        );
    }

    #[test]
    fn has_synced_after_the_first_list_is_popped() {
        let store = Arc::new(Store::new());
        let fifo = DeltaFifo::new(store);
        assert!(!fifo.has_synced());
        fifo.replace(vec![obj("a", 1), obj("b", 1)]);
        assert!(!fifo.has_synced());
        let first = fifo.pop_ready(|_, initial| initial).unwrap();
        assert!(first);
        assert!(!fifo.has_synced());
        fifo.pop_ready(|_, _| ()).unwrap();
        assert!(fifo.has_synced());
        assert!(*fifo.subscribe_synced().borrow());
        fifo.add(obj("c", 2));
        assert!(!fifo.pop_ready(|_, initial| initial).unwrap());
    }

    #[test]
    fn a_key_listed_twice_counts_once_toward_the_first_sync() {
        let fifo = DeltaFifo::new(Arc::new(Store::new()));
        fifo.replace(vec![obj("a", 1), obj("b", 1), obj("a", 2)]);
        fifo.pop_ready(|_, _| ()).unwrap();
        assert!(!fifo.has_synced());
        fifo.pop_ready(|_, _| ()).unwrap();
        assert!(fifo.has_synced());
    }

    #[test]
    fn a_drained_big_list_gives_its_tables_back() {
        let fifo = DeltaFifo::new(Arc::new(Store::new()));
        let list: Vec<ObjectRef> = (0..5 * KEEP_WHEN_EMPTY)
            .map(|i| obj(&format!("o{i}"), 1))
            .collect();
        fifo.replace(list);
        assert!(fifo.state.lock().items.capacity() >= 5 * KEEP_WHEN_EMPTY);
        while fifo.pop_ready(|_, _| ()).is_some() {}
        let state = fifo.state.lock();
        assert!(state.items.capacity() <= KEEP_WHEN_EMPTY);
        assert!(state.queue.capacity() <= KEEP_WHEN_EMPTY);
    }

    #[test]
    fn empty_first_list_is_synced_at_once() {
        let fifo = DeltaFifo::new(Arc::new(Store::new()));
        fifo.replace(vec![]);
        assert!(fifo.has_synced());
    }

    #[test]
    fn resync_queues_sync_only_for_keys_without_pending_deltas() {
        let store = Arc::new(Store::new());
        store.upsert(obj("a", 1));
        store.upsert(obj("b", 1));
        let fifo = DeltaFifo::new(store);
        fifo.update(obj("a", 2));
        fifo.resync();
        let mut popped = pop_all(&fifo);
        popped.sort();
        assert_eq!(
            popped,
            vec![
                ("ns/a".into(), vec![(DeltaType::Updated, "2".into(), false)]),
                ("ns/b".into(), vec![(DeltaType::Sync, "1".into(), false)]),
            ]
        );
    }
}
