//! The plugin side of the shared informers: a plugin's handlers (registered inline: they only
//! push into its inbox), its cache view over an informer's indexer, and the shared declared indexes.

use std::sync::Arc;

use kubewasm_informer::{
    IndexFunc, Indexer, ObjectRef, Registration, ResourceEventHandler, SharedIndexInformer,
    index_funcs,
};
use kubewasm_labels::Selector;

use crate::cache::access::{NAMESPACE_INDEX, ResourceCache};
use crate::events::inbox::{Event, EventSink, Subscribed, Subscriber};
use crate::model::declared::IndexSource;
use crate::model::grants::DeclarationLimits;

/// A handler registered inline: every callback becomes one queued event, nothing else.
pub(crate) struct QueueHandler {
    pub(crate) sink: EventSink,
}

impl ResourceEventHandler for QueueHandler {
    fn on_add(&self, obj: &ObjectRef, in_initial_list: bool) {
        self.sink.push(Event::Add {
            object: obj.clone(),
            in_initial_list,
        });
    }

    fn on_update(&self, old: &ObjectRef, new: &ObjectRef) {
        self.sink.push(Event::Update {
            old: old.clone(),
            new: new.clone(),
        });
    }

    fn on_delete(&self, obj: &ObjectRef, final_state_unknown: bool) {
        self.sink.push(Event::Delete {
            object: obj.clone(),
            final_state_unknown,
        });
    }

    fn flush(&self) {
        self.sink.flush();
    }

    fn wants_resync(&self) -> bool {
        self.sink.takes_resync()
    }
}

/// One subscription that receives events.
pub(crate) struct EventSource {
    /// Index of the subscription in the plugin's `init` result.
    pub(crate) subscription: usize,
    pub(crate) informer: SharedIndexInformer,
    pub(crate) resync: Option<std::time::Duration>,
}

/// Registers a plugin's handlers on its informers.
pub(crate) struct InformerSubscriber {
    pub(crate) sources: Vec<EventSource>,
}

/// The registrations of one instance generation; dropping it removes the handlers.
struct Registrations(Vec<(SharedIndexInformer, Registration)>);

impl Drop for Registrations {
    fn drop(&mut self) {
        for (informer, registration) in &self.0 {
            informer.remove_event_handler(registration);
        }
    }
}

impl Subscribed for Registrations {
    fn synced(&self) -> bool {
        self.0.iter().all(|(_, r)| r.has_synced())
    }
}

impl Subscriber for InformerSubscriber {
    fn subscribe(&self, sink: &EventSink) -> Box<dyn Subscribed> {
        let registrations = self
            .sources
            .iter()
            .map(|s| {
                let handler = Arc::new(QueueHandler {
                    sink: sink.for_subscription(s.subscription),
                });
                let registration = s.informer.add_inline_event_handler(handler, s.resync);
                (s.informer.clone(), registration)
            })
            .collect();
        Box::new(Registrations(registrations))
    }
}

/// A plugin's view of one informer's cache.
pub(crate) struct InformerCache {
    pub(crate) informer: SharedIndexInformer,
    pub(crate) indexer: Indexer,
}

fn cache_index(index: &str) -> &str {
    if index == NAMESPACE_INDEX {
        kubewasm_informer::NAMESPACE_INDEX
    } else {
        index
    }
}

impl ResourceCache for InformerCache {
    fn get(&self, namespace: Option<&str>, name: &str) -> Option<ObjectRef> {
        self.indexer.get_by_name(namespace, name)
    }

    fn list(
        &self,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<ObjectRef>, String> {
        let selector = match label_selector {
            Some(s) => Selector::parse(s).map_err(|e| format!("label selector {s:?}: {e}"))?,
            None => Selector::everything(),
        };
        Ok(self.indexer.list_by_selector(namespace, &selector))
    }

    fn by_index(&self, index: &str, value: &str) -> Result<Vec<ObjectRef>, String> {
        self.indexer
            .by_index(cache_index(index), value)
            .map_err(|e| e.to_string())
    }

    fn index_values(&self, index: &str) -> Result<Vec<String>, String> {
        self.indexer
            .list_index_func_values(cache_index(index))
            .map_err(|e| e.to_string())
    }

    fn has_synced(&self) -> bool {
        self.informer.has_synced()
    }
}

/// The informer index computing `source`, named after it so that plugins declaring the same
/// index on the same informer share one, its cost per object bounded by `limits` ([`bounded`]).
pub(crate) fn shared_index(
    source: &IndexSource,
    limits: &DeclarationLimits,
) -> (String, IndexFunc) {
    let (name, func) = match source {
        IndexSource::Label(key) => (format!("label:{key}"), index_funcs::label(key.clone())),
        IndexSource::Annotation(key) => (
            format!("annotation:{key}"),
            index_funcs::annotation(key.clone()),
        ),
        IndexSource::Field(path) => (
            format!("field:{path}"),
            index_funcs::field_path(path.clone()),
        ),
        IndexSource::OwnerUid => ("owner-uid".to_owned(), index_funcs::owner_uid()),
    };
    let bounded = bounded(func, limits.max_index_values, limits.max_index_value_bytes);
    (name, bounded)
}

/// `func` filing each object under at most `values` of its values, none longer than `bytes`:
/// what one object costs the index it is in (the keys the index keeps, the entries it
/// updates on each add and update, under the store's write lock) is bounded whatever the
/// object holds. A longer value is left out, not cut (a cut value would file the object under
/// a value it does not have); the values past `values` are left out in the order found.
pub(crate) fn bounded(func: IndexFunc, values: usize, bytes: usize) -> IndexFunc {
    Arc::new(move |object| {
        let mut found = func(object);
        found.retain(|v| v.len() <= bytes);
        found.truncate(values);
        found
    })
}

/// Adds the index to the informer unless an identical one (same name) is already there.
pub(crate) fn ensure_index(
    informer: &SharedIndexInformer,
    source: &IndexSource,
    limits: &DeclarationLimits,
) -> Result<String, kubewasm_informer::Error> {
    let (name, func) = shared_index(source, limits);
    if informer.indexer().has_index(&name) {
        return Ok(name);
    }
    match informer.add_indexers(vec![(name.clone(), func)]) {
        Ok(()) | Err(kubewasm_informer::Error::IndexExists(_)) => Ok(name),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use kubewasm_informer::Object;

    use super::*;
    use crate::events::inbox::Inbox;
    use crate::testing::{TestInformer, config_map_json};

    /// A plugin that never takes its events, subscribed with a resync of 200 ms: its inbox
    /// holds the replay and one resync of the cache, however many periods pass, and every
    /// resync it declined is counted.
    #[tokio::test]
    async fn a_plugin_that_does_not_keep_up_holds_one_resync_of_the_cache_at_most() {
        let config_maps = TestInformer::new();
        for name in ["a", "b", "c"] {
            config_maps.upsert(config_map_json("default", name, &[]));
        }
        config_maps.start().await;
        let subscriber = InformerSubscriber {
            sources: vec![EventSource {
                subscription: 0,
                informer: config_maps.informer.clone(),
                resync: Some(Duration::from_millis(200)),
            }],
        };
        let inbox = Arc::new(Inbox::default());
        inbox.set_generation(1);
        let _subscribed = subscriber.subscribe(&EventSink::new(inbox.clone(), 1));
        tokio::time::timeout(Duration::from_secs(60), async {
            while inbox.resyncs_skipped() < 5 {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await
        .expect("resyncs come due every 200 ms and are declined");
        assert_eq!(
            inbox.depth(),
            6,
            "three replayed adds and one resync of three"
        );
    }

    #[test]
    fn an_object_is_filed_under_few_short_values_only() {
        let limits = DeclarationLimits {
            max_index_values: 3,
            max_index_value_bytes: 8,
            ..DeclarationLimits::default()
        };
        let long = "v".repeat(256 << 10);
        let object = Object::from_json(
            &serde_json::json!({
                "metadata": {"name": "c", "namespace": "ns", "annotations": {"big": long}},
                "spec": {"items": ["a", "b", &long, "c", "d", "e"]},
            })
            .to_string(),
        )
        .expect("an object");
        let (name, field) = shared_index(&IndexSource::Field("spec.items".into()), &limits);
        assert_eq!(name, "field:spec.items");
        assert_eq!(field(&object), ["a", "b", "c"]);
        let (_, annotation) = shared_index(&IndexSource::Annotation("big".into()), &limits);
        assert!(annotation(&object).is_empty(), "256 KiB is no index key");
    }
}
