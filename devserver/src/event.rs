//! A change to one object, serialised for watchers at most once however many receive it.

use std::sync::{Arc, OnceLock};

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::Value;

use crate::object::StoredObject;

/// The watch event types the API server sends for changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    /// The name in a watch line (`ADDED`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One committed change, kept in the history and fanned out to every watcher of its resource.
#[derive(Debug)]
pub(crate) struct Event {
    pub resource_version: u64,
    pub event_type: EventType,
    /// The object after the change (for a deletion: its last state, at this resourceVersion).
    pub object: Arc<StoredObject>,
    /// The object before the change; `None` for an addition.
    pub previous: Option<Arc<StoredObject>>,
    line: OnceLock<Bytes>,
    vanished_line: OnceLock<Bytes>,
}

impl Event {
    pub fn new(
        event_type: EventType,
        object: Arc<StoredObject>,
        previous: Option<Arc<StoredObject>>,
    ) -> Event {
        Event {
            resource_version: object.resource_version,
            event_type,
            object,
            previous,
            line: OnceLock::new(),
            vanished_line: OnceLock::new(),
        }
    }

    /// The newline-terminated watch line `{"type":..,"object":..}`, built on first use.
    pub fn line(&self) -> &Bytes {
        self.line
            .get_or_init(|| watch_line(self.event_type.as_str(), &self.object.json))
    }

    /// A DELETED line carrying the previous object at this event's resourceVersion: what a
    /// watcher whose selector matched the old object but not the new one receives.
    pub fn vanished_line(&self) -> &Bytes {
        self.vanished_line.get_or_init(|| {
            let Some(previous) = &self.previous else {
                return self.line().clone();
            };
            match serde_json::from_slice::<Value>(&previous.json) {
                Ok(mut value) => {
                    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
                        meta.insert(
                            "resourceVersion".to_owned(),
                            Value::String(self.resource_version.to_string()),
                        );
                    }
                    let json =
                        serde_json::to_vec(&value).unwrap_or_else(|_| previous.json.to_vec());
                    watch_line("DELETED", &json)
                }
                Err(_) => watch_line("DELETED", &previous.json),
            }
        })
    }
}

/// `{"type":"<type>","object":<object>}\n`.
pub(crate) fn watch_line(event_type: &str, object: &[u8]) -> Bytes {
    let mut buf = BytesMut::with_capacity(object.len() + 40);
    buf.put_slice(b"{\"type\":\"");
    buf.put_slice(event_type.as_bytes());
    buf.put_slice(b"\",\"object\":");
    buf.put_slice(object);
    buf.put_slice(b"}\n");
    buf.freeze()
}
