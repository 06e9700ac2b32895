//! The Kubernetes Event recorder behind the 0.2 `client.record-event`: client-go's
//! EventRecorder, correlating before it writes so that a hot loop cannot flood the API server.
//!
//! For each recorded event, in order (client-go's `EventCorrelator`):
//! 1. similar events (same object, type and reason) with more than `max_similar` distinct
//!    messages within the window are combined: the message becomes
//!    `(combined from similar events): <latest message>`;
//! 2. an event identical to one written within the window (same object, type, reason and
//!    message) updates that Event (`count` + 1, `lastTimestamp`, by merge patch) instead of
//!    creating another;
//! 3. a per-object token bucket (one event per 5 minutes, burst 25 by default) drops what is
//!    left over: every record, even one that would only bump a count, takes a token.
//!
//! Writes go through a [`WriteClient`] of the plugin's (so its grants and call limit apply)
//! from a background task, in order; [`EventRecorder::record`] only decides. Events have a write
//! budget of their own ([`RecorderOptions::writes_per_second`]): the background task waits for
//! it, and takes nothing from the plugin's own writes. At most
//! [`RecorderOptions::max_pending`] accepted events wait to be written; past that, a record is
//! refused (`TooManyRequests`) and counted as dropped.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::client::{ObjectRef, PatchBody, WriteClient, WriteError, WriteVerb};
use crate::model::declared::Gvk;
use crate::reconcile::rate_limit::TokenBucket;

/// How the recorder correlates and limits events.
#[derive(Debug, Clone, PartialEq)]
pub struct RecorderOptions {
    /// How long a repeated event updates the existing Event instead of creating another, and
    /// how long similar messages are counted (client-go: 10 minutes).
    pub window: Duration,
    /// Distinct messages for the same object, type and reason within the window before further
    /// ones are combined into one Event (client-go: 10).
    pub max_similar: usize,
    /// Events per second one object may get, sustained (client-go: one per 300 s).
    pub per_object_qps: f64,
    /// Events one object may get at once (client-go: 25).
    pub per_object_burst: u32,
    /// The most events and objects remembered; the least recently seen are forgotten first
    /// (client-go: 4096).
    pub cache_size: usize,
    /// Event writes per second, sustained, apart from the plugin's own write rate limit.
    pub writes_per_second: f64,
    /// Event writes at once above that rate.
    pub write_burst: u32,
    /// The most accepted events waiting to be written.
    pub max_pending: usize,
}

impl Default for RecorderOptions {
    fn default() -> Self {
        RecorderOptions {
            window: Duration::from_secs(600),
            max_similar: 10,
            per_object_qps: 1.0 / 300.0,
            per_object_burst: 25,
            cache_size: 4096,
            writes_per_second: 5.0,
            write_burst: 25,
            max_pending: 1000,
        }
    }
}

/// The type of an Event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// An event about an object, as a guest records it (its object checked at the boundary: the
/// Event is written in that object's namespace).
#[derive(Debug, Clone)]
pub struct EventRecord {
    /// The object the event is about.
    pub regarding: ObjectRef,
    /// Its metadata.uid, so `kubectl describe` finds the event: at most [`MAX_UID`] bytes of
    /// ASCII letters, digits and `-` (an RFC 4122 UUID, as every API server makes them, has
    /// 36), or empty for unknown. The correlator keeps it in its keys, so its size is bounded.
    pub uid: Option<String>,
    pub event_type: EventType,
    /// UpperCamelCase, e.g. `ErrResourceExists`; at most 128 characters.
    pub reason: String,
    /// For humans; cut to 1024 characters.
    pub message: String,
}

/// The message prefix of an Event that stands for many similar ones.
const COMBINED: &str = "(combined from similar events)";

/// The most characters of a reason, and of a message (longer messages are cut).
const MAX_REASON: usize = 128;
const MAX_MESSAGE: usize = 1024;

/// The longest `uid` an event may carry, in bytes.
pub const MAX_UID: usize = 128;

/// Whether `uid` has the shape of an object's UID: 1 to [`MAX_UID`] ASCII letters, digits and
/// `-`.
pub(crate) fn is_uid(uid: &str) -> bool {
    !uid.is_empty()
        && uid.len() <= MAX_UID
        && uid.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-')
}

/// The Event kind every recorded event is written as.
fn event_gvk() -> Gvk {
    Gvk {
        group: String::new(),
        version: "v1".into(),
        kind: "Event".into(),
    }
}

/// Records a plugin's events. Must be created inside a tokio runtime (it spawns its writer).
pub struct EventRecorder {
    client: Arc<WriteClient>,
    correlator: Mutex<Correlator>,
    jobs: mpsc::Sender<Job>,
}

impl EventRecorder {
    /// A recorder writing through `client` (the plugin's: its name is the Events' source; one
    /// without its own rate limit, see [`WriteClient::unmetered`], so that Events keep to
    /// their own budget only).
    pub fn new(client: Arc<WriteClient>, options: RecorderOptions) -> Self {
        let (jobs, rx) = mpsc::channel(options.max_pending.max(1));
        let budget = TokenBucket::new(
            options.writes_per_second.max(f64::MIN_POSITIVE),
            options.write_burst,
        );
        tokio::spawn(write_loop(client.clone(), rx, budget));
        EventRecorder {
            client,
            correlator: Mutex::new(Correlator::new(options)),
            jobs,
        }
    }

    /// Accepts an event for writing in the background, or refuses it at once: `NotGranted`
    /// without a write grant for `Event` (create and patch), `Invalid` for a bad reason or a
    /// `uid` not of UID shape (counted as an invalid refusal),
    /// `TooManyRequests` when the object's event budget is spent (the event is dropped).
    pub fn record(&self, mut event: EventRecord) -> Result<(), WriteError> {
        let gvk = event_gvk();
        if !(self.client.may(&gvk, WriteVerb::Create) && self.client.may(&gvk, WriteVerb::Patch)) {
            return Err(WriteError::NotGranted(format!(
                "plugin {} may not record events: grant it `Event` in `writes`",
                self.client.plugin()
            )));
        }
        let reason_ok = !event.reason.is_empty()
            && event.reason.len() <= MAX_REASON
            && event.reason.chars().all(|c| c.is_ascii_alphanumeric());
        if !reason_ok {
            return Err(WriteError::invalid(format!(
                "event reason {:?} must be 1 to {MAX_REASON} letters and digits (UpperCamelCase)",
                event.reason
            )));
        }
        // An empty uid is an unknown one (SDKs pass the object's `uid` or `""`).
        if event.uid.as_deref() == Some("") {
            event.uid = None;
        }
        if let Some(uid) = event.uid.as_deref().filter(|uid| !is_uid(uid)) {
            let shown = crate::model::names::InvalidName::new(
                "uid",
                uid,
                "must be 1 to 128 bytes of ASCII letters, digits and '-' (an object's UID)",
            );
            return Err(self.client.invalid(
                WriteVerb::Create,
                WriteError::invalid(format!("event {shown}")),
            ));
        }
        let decision = self.correlator.lock().correlate(&event, Instant::now());
        let job = match decision {
            Decision::Drop => {
                self.client.event_dropped();
                return Err(WriteError::TooManyRequests(format!(
                    "too many events about {}: dropped",
                    event.regarding.name
                )));
            }
            Decision::Create {
                name,
                count,
                message,
            } => Job::Create(self.event_json(&event, name, count, &message)),
            Decision::Bump {
                name,
                count,
                message,
            } => Job::Bump {
                target: ObjectRef::new(
                    event_gvk(),
                    Some(event_namespace(&event.regarding)),
                    &name,
                )?,
                patch: json!({
                    "count": count,
                    "lastTimestamp": Timestamp::now().to_string(),
                    "message": message,
                }),
                fallback: self.event_json(&event, name, count, &message),
            },
        };
        // The writer only ends when the recorder is dropped: only a full backlog refuses.
        if self.jobs.try_send(job).is_err() {
            self.client.event_dropped();
            return Err(WriteError::TooManyRequests(format!(
                "too many events waiting to be written: the event about {} is dropped",
                event.regarding.name
            )));
        }
        Ok(())
    }

    /// Waits until every event accepted so far has been written (or has failed).
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.jobs.send(Job::Flush(done)).await.is_ok() {
            let _ = wait.await;
        }
    }

    fn event_json(&self, event: &EventRecord, name: String, count: u32, message: &str) -> String {
        let now = Timestamp::now().to_string();
        let object = &event.regarding;
        let gvk = object.gvk();
        let api_version = if gvk.group.is_empty() {
            gvk.version.clone()
        } else {
            format!("{}/{}", gvk.group, gvk.version)
        };
        json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": event_namespace(object)},
            "involvedObject": {
                "apiVersion": api_version,
                "kind": gvk.kind,
                "namespace": object.namespace.as_ref().map(|ns| ns.as_str()),
                "name": object.name.as_str(),
                "uid": event.uid,
            },
            "reason": event.reason,
            "message": message,
            "type": event.event_type.as_str(),
            "source": {"component": self.client.plugin()},
            "reportingComponent": self.client.plugin(),
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": count,
        })
        .to_string()
    }
}

/// Events about cluster-scoped objects go to `default`, as client-go's do.
fn event_namespace(object: &ObjectRef) -> &str {
    object
        .namespace
        .as_ref()
        .map_or("default", |ns| ns.as_str())
}

enum Job {
    Create(String),
    /// Update an existing Event; if it is gone, create `fallback` instead.
    Bump {
        target: ObjectRef,
        patch: Value,
        fallback: String,
    },
    Flush(oneshot::Sender<()>),
}

async fn write_loop(
    client: Arc<WriteClient>,
    mut jobs: mpsc::Receiver<Job>,
    mut budget: TokenBucket,
) {
    while let Some(job) = jobs.recv().await {
        if !matches!(job, Job::Flush(_)) {
            let wait = budget.reserve(Instant::now());
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
        }
        let result = match job {
            Job::Create(event) => client.create(&event).await.map(drop),
            Job::Bump {
                target,
                patch,
                fallback,
            } => match client
                .patch(&target, &PatchBody::Merge(patch.to_string()))
                .await
            {
                Err(WriteError::NotFound(_)) => client.create(&fallback).await.map(drop),
                other => other.map(drop),
            },
            Job::Flush(done) => {
                let _ = done.send(());
                Ok(())
            }
        };
        if let Err(error) = result {
            tracing::warn!(plugin = %client.plugin(), error = %crate::guest::escape::Escaped(&error.to_string()), "could not write an event");
        }
    }
}

/// What to do with one recorded event.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Decision {
    /// Create a new Event of this name, count and message.
    Create {
        name: String,
        count: u32,
        message: String,
    },
    /// Update the Event of this name to this count and message.
    Bump {
        name: String,
        count: u32,
        message: String,
    },
    /// The object's budget is spent.
    Drop,
}

/// The object an event is about, and its type (client-go's spam key).
type ObjectKey = (String, String, Option<String>, String, EventType);

/// Remembers recent events; decides create, bump or drop. Pure: time is passed in.
struct Correlator {
    options: RecorderOptions,
    /// Written events by object and reason and message.
    written: HashMap<(ObjectKey, String, String), Written>,
    /// Distinct messages by object and reason, with when the window started.
    similar: HashMap<(ObjectKey, String), (Instant, HashSet<String>)>,
    /// Each object's event budget, and when it was last used.
    budgets: HashMap<ObjectKey, (TokenBucket, Instant)>,
    last_nanos: i128,
}

struct Written {
    name: String,
    count: u32,
    last_seen: Instant,
}

impl Correlator {
    fn new(options: RecorderOptions) -> Self {
        Correlator {
            options,
            written: HashMap::new(),
            similar: HashMap::new(),
            budgets: HashMap::new(),
            last_nanos: 0,
        }
    }

    fn correlate(&mut self, event: &EventRecord, now: Instant) -> Decision {
        self.prune(now);
        let object = &event.regarding;
        let object_key: ObjectKey = (
            format!("{}/{}", object.gvk().group, object.gvk().kind),
            object.name.as_str().to_owned(),
            object.namespace.as_ref().map(|ns| ns.as_str().to_owned()),
            event.uid.clone().unwrap_or_default(),
            event.event_type,
        );
        let (key_message, message) = self.aggregate(&object_key, event, now);
        let (budget, used) = self.budgets.entry(object_key.clone()).or_insert_with(|| {
            let bucket =
                TokenBucket::new(self.options.per_object_qps, self.options.per_object_burst);
            (bucket, now)
        });
        *used = now;
        if !budget.reserve(now).is_zero() {
            budget.cancel();
            return Decision::Drop;
        }
        let key = (object_key, event.reason.clone(), key_message);
        match self.written.get_mut(&key) {
            Some(seen) if now.duration_since(seen.last_seen) <= self.options.window => {
                seen.count += 1;
                seen.last_seen = now;
                Decision::Bump {
                    name: seen.name.clone(),
                    count: seen.count,
                    message,
                }
            }
            _ => {
                let name = self.new_name(object.name.as_str());
                self.written.insert(
                    key,
                    Written {
                        name: name.clone(),
                        count: 1,
                        last_seen: now,
                    },
                );
                Decision::Create {
                    name,
                    count: 1,
                    message,
                }
            }
        }
    }

    /// The message to correlate on and the message to write: the event's own (cut to
    /// [`MAX_MESSAGE`] characters), or combined once the object has had too many distinct
    /// messages for this reason within the window.
    fn aggregate(
        &mut self,
        object: &ObjectKey,
        event: &EventRecord,
        now: Instant,
    ) -> (String, String) {
        let window = self.options.window;
        let (started, messages) = self
            .similar
            .entry((object.clone(), event.reason.clone()))
            .or_insert_with(|| (now, HashSet::new()));
        if now.duration_since(*started) > window {
            *started = now;
            messages.clear();
        }
        let message: String = event.message.chars().take(MAX_MESSAGE).collect();
        if messages.len() <= self.options.max_similar {
            messages.insert(message.clone());
        }
        if messages.len() > self.options.max_similar {
            let combined = format!("{COMBINED}: {message}");
            (
                COMBINED.to_owned(),
                combined.chars().take(MAX_MESSAGE).collect(),
            )
        } else {
            (message.clone(), message)
        }
    }

    /// A unique Event name: the object's name and a hex timestamp, as client-go's.
    fn new_name(&mut self, object: &str) -> String {
        let nanos = Timestamp::now().as_nanosecond().max(self.last_nanos + 1);
        self.last_nanos = nanos;
        format!("{object}.{nanos:x}")
    }

    /// Keeps the caches within `cache_size`, forgetting the least recently seen first.
    fn prune(&mut self, now: Instant) {
        let (cap, window) = (self.options.cache_size, self.options.window);
        if self.written.len() > cap {
            self.written
                .retain(|_, w| now.duration_since(w.last_seen) <= window);
            evict_oldest(&mut self.written, cap, |w| w.last_seen);
        }
        if self.similar.len() > cap {
            self.similar
                .retain(|_, (started, _)| now.duration_since(*started) <= window);
            evict_oldest(&mut self.similar, cap, |(started, _)| *started);
        }
        evict_oldest(&mut self.budgets, cap, |(_, used)| *used);
    }
}

/// Removes the entries with the oldest times until at most `cap` are left.
fn evict_oldest<K: Clone + Eq + std::hash::Hash, V>(
    map: &mut HashMap<K, V>,
    cap: usize,
    time: impl Fn(&V) -> Instant,
) {
    if map.len() <= cap {
        return;
    }
    let mut by_age: Vec<(Instant, K)> = map.iter().map(|(k, v)| (time(v), k.clone())).collect();
    by_age.sort_unstable_by_key(|(at, _)| *at);
    let excess = map.len() - cap;
    for (_, key) in by_age.into_iter().take(excess) {
        map.remove(&key);
    }
}

#[cfg(test)]
mod tests;
