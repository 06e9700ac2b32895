//! An in-memory [`ListerWatcher`] for tests (cargo feature `testing`): a real
//! [`SharedIndexInformer`](crate::SharedIndexInformer) runs over it as over an API server,
//! without one.
//!
//! It holds a map of objects and a version counter. Every change stamps the object with the
//! next resourceVersion (as the API server does), is recorded, and is sent to every open
//! watch. A watch from version `v` first gets every recorded change after `v`, so a reflector
//! that re-watches from its last version loses nothing and sees nothing twice. A watch with
//! `sendInitialEvents` and no version is a streaming list: the current objects, the
//! initial-events-end bookmark, then live changes.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc;
use futures::future::BoxFuture;
use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::lister_watcher::{ListPage, ListerWatcher, WatchEvent, WatchStream};
use crate::object::Object;

/// A change as recorded: kind and the object's JSON, stamped with its version.
#[derive(Clone)]
enum Change {
    Added(String),
    Modified(String),
    Deleted(String),
}

impl Change {
    fn event(&self) -> Result<WatchEvent> {
        Ok(match self {
            Change::Added(json) => WatchEvent::Added(Object::from_json(json)?),
            Change::Modified(json) => WatchEvent::Modified(Object::from_json(json)?),
            Change::Deleted(json) => WatchEvent::Deleted(Object::from_json(json)?),
        })
    }
}

#[derive(Default)]
struct State {
    /// The version of the last change (0: none yet).
    version: u64,
    /// The current objects by store key, JSON stamped with their version.
    objects: BTreeMap<String, String>,
    /// Every change, in order, with its version.
    history: Vec<(u64, Change)>,
    watchers: Vec<mpsc::UnboundedSender<Result<WatchEvent>>>,
}

impl State {
    /// Records `change` (already at `self.version`) and sends it to every open watch.
    fn publish(&mut self, change: Change) {
        self.watchers.retain(|w| {
            change
                .event()
                .is_ok_and(|e| w.unbounded_send(Ok(e)).is_ok())
        });
        self.history.push((self.version, change));
    }
}

/// An in-memory collection that lists and watches like the API server (see the module docs).
#[derive(Default)]
pub struct FakeListerWatcher {
    state: Mutex<State>,
}

impl FakeListerWatcher {
    /// An empty collection at version 0.
    pub fn new() -> Self {
        FakeListerWatcher::default()
    }

    /// Creates or replaces the object `json` (keyed by its namespace and name), stamped with
    /// the next resourceVersion, which is returned. An error if `json` is not an object with a
    /// name.
    pub fn upsert(&self, json: &str) -> Result<u64> {
        let key = Object::from_json(json)?.key().to_owned();
        let mut state = self.state.lock();
        state.version += 1;
        let stamped = stamp(json, state.version)?;
        let change = match state.objects.insert(key, stamped.clone()) {
            Some(_) => Change::Modified(stamped),
            None => Change::Added(stamped),
        };
        state.publish(change);
        Ok(state.version)
    }

    /// Deletes the object with store key `key` (`namespace/name` or `name`); its final state
    /// carries the next resourceVersion, which is returned. `None` if there is no such object.
    pub fn delete(&self, key: &str) -> Option<u64> {
        let mut state = self.state.lock();
        let json = state.objects.remove(key)?;
        state.version += 1;
        let stamped = stamp(&json, state.version).ok()?;
        state.publish(Change::Deleted(stamped));
        Some(state.version)
    }

    /// The version of the last change.
    pub fn version(&self) -> u64 {
        self.state.lock().version
    }

    /// Watches open now (each reflector holds at most one).
    pub fn watchers(&self) -> usize {
        let mut state = self.state.lock();
        state.watchers.retain(|w| !w.is_closed());
        state.watchers.len()
    }
}

/// `json` with `metadata.resourceVersion` set to `version`.
fn stamp(json: &str, version: u64) -> Result<String> {
    let mut value: serde_json::Value = serde_json::from_str(json).map_err(Error::InvalidObject)?;
    let metadata = value
        .get_mut("metadata")
        .and_then(serde_json::Value::as_object_mut)
        .ok_or(Error::MissingName)?;
    metadata.insert("resourceVersion".into(), version.to_string().into());
    Ok(value.to_string())
}

impl ListerWatcher for FakeListerWatcher {
    fn list(&self, _continue_token: Option<String>) -> BoxFuture<'_, Result<ListPage>> {
        let page = {
            let state = self.state.lock();
            state
                .objects
                .values()
                .map(|json| Object::from_json(json))
                .collect::<Result<Vec<_>>>()
                .map(|items| ListPage {
                    items,
                    resource_version: state.version.to_string(),
                    continue_token: None,
                })
        };
        Box::pin(async move { page })
    }

    fn watch(
        &self,
        resource_version: String,
        send_initial_events: bool,
        _timeout: Duration,
    ) -> BoxFuture<'_, Result<WatchStream>> {
        let opened = (|| {
            let (tx, rx) = mpsc::unbounded();
            let mut state = self.state.lock();
            if send_initial_events && resource_version.is_empty() {
                for json in state.objects.values() {
                    let _ = tx.unbounded_send(Change::Added(json.clone()).event());
                }
                let _ = tx.unbounded_send(Ok(WatchEvent::Bookmark {
                    resource_version: state.version.to_string(),
                    initial_events_end: true,
                }));
            } else {
                let from: u64 = resource_version.parse().map_err(|_| Error::Api {
                    code: 400,
                    reason: "BadRequest".into(),
                    message: format!("invalid resourceVersion {resource_version:?}"),
                })?;
                for (_, change) in state.history.iter().filter(|(v, _)| *v > from) {
                    let _ = tx.unbounded_send(change.event());
                }
            }
            state.watchers.push(tx);
            let stream: WatchStream = rx.boxed();
            Ok(stream)
        })();
        Box::pin(async move { opened })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::processor::tests::Recorder;
    use crate::reflector::{ListStrategy, ReflectorOptions};
    use crate::shared_informer::{InformerOptions, SharedIndexInformer};

    fn config_map(name: &str, value: &str) -> String {
        serde_json::json!({"metadata": {"name": name, "namespace": "ns"}, "data": {"v": value}})
            .to_string()
    }

    async fn eventually(cond: impl Fn() -> bool) {
        for _ in 0..2000 {
            if cond() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("timed out");
    }

    #[tokio::test]
    async fn an_informer_over_it_lists_then_watches_every_change_once_in_either_strategy() {
        for list in [ListStrategy::Paginated, ListStrategy::Streaming] {
            let lw = Arc::new(FakeListerWatcher::new());
            assert_eq!(lw.upsert(&config_map("a", "1")).unwrap(), 1);
            let informer = SharedIndexInformer::new(
                lw.clone(),
                InformerOptions {
                    reflector: ReflectorOptions {
                        list,
                        ..ReflectorOptions::default()
                    },
                    ..InformerOptions::default()
                },
            );
            let recorder = Arc::new(Recorder::default());
            informer.add_event_handler(recorder.clone(), None);
            informer.start();
            assert!(informer.wait_synced().await);
            eventually(|| lw.watchers() == 1).await;
            lw.upsert(&config_map("a", "2")).unwrap();
            lw.upsert(&config_map("b", "1")).unwrap();
            assert_eq!(lw.delete("ns/a"), Some(4));
            assert_eq!(lw.delete("ns/a"), None);
            eventually(|| recorder.events().len() == 4).await;
            assert_eq!(
                recorder.events(),
                [
                    "add:ns/a:1:true",
                    "update:ns/a:1>2",
                    "add:ns/b:3:false",
                    "delete:ns/a:4:false"
                ],
                "{list:?}"
            );
            let cached = informer.indexer().get("ns/b").unwrap();
            assert_eq!(cached.resource_version(), "3");
            informer.stop().await;
        }
    }

    #[tokio::test]
    async fn a_watch_from_a_version_gets_the_changes_after_it() {
        let lw = FakeListerWatcher::new();
        for value in ["1", "2", "3"] {
            lw.upsert(&config_map("a", value)).unwrap();
        }
        let mut watch = lw.watch("1".into(), false, Duration::ZERO).await.unwrap();
        lw.delete("ns/a");
        let mut seen = Vec::new();
        for _ in 0..3 {
            seen.push(match watch.next().await.unwrap().unwrap() {
                WatchEvent::Modified(o) => format!("modified {}", o.resource_version()),
                WatchEvent::Deleted(o) => format!("deleted {}", o.resource_version()),
                _ => "other".into(),
            });
        }
        assert_eq!(seen, ["modified 2", "modified 3", "deleted 4"]);
        assert!(lw.watch("x".into(), false, Duration::ZERO).await.is_err());
        assert!(lw.upsert(r#"{"metadata":{}}"#).is_err());
        assert_eq!(lw.version(), 4);
    }
}
