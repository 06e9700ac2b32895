//! WATCH: a chunked stream of newline-delimited JSON events, with bookmarks and timeouts.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use futures::Stream;
use serde_json::json;
use tokio::time::{Instant, Interval, MissedTickBehavior};

use crate::Status;
use crate::core::Core;
use crate::event::{Event, EventType, watch_line};
use crate::filter::Filter;
use crate::object::StoredObject;
use crate::resource::ResourceInfo;
use crate::table::{self, IncludeObject};
use crate::wire::Protobuf;

/// Chunks grow to about this size when many events are ready at once.
const CHUNK_TARGET: usize = 64 * 1024;

/// The WATCH parameters after parsing.
#[derive(Debug, Default)]
pub(crate) struct WatchRequest {
    pub filter: Filter,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
    pub allow_bookmarks: bool,
    pub send_initial_events: Option<bool>,
    pub timeout: Option<Duration>,
    /// Send each object as a one-row Table (kubectl get -w), with these row objects.
    pub table: Option<IncludeObject>,
    /// Send length-prefixed protobuf frames instead of JSON lines.
    pub protobuf: Option<Protobuf>,
}

/// Opens a watch. Request errors answer with an HTTP status; a resourceVersion that is too old
/// answers, as the API server does, with a stream holding a single ERROR event (410 Expired).
pub(crate) fn watch(
    core: Arc<Core>,
    resource: &ResourceInfo,
    request: WatchRequest,
) -> Result<impl Stream<Item = Result<Bytes, Infallible>> + Send + use<>, Status> {
    let rv = request.resource_version.as_deref().unwrap_or("");
    let from = match rv {
        "" | "0" => None,
        rv => Some(
            rv.parse::<u64>()
                .map_err(|_| Status::bad_request(format!("invalid resourceVersion {rv:?}")))?,
        ),
    };
    let send_initial = request.send_initial_events.unwrap_or(from.is_none());
    if request.send_initial_events == Some(true) {
        if !request.allow_bookmarks {
            return Err(Status::invalid(
                "sendInitialEvents requires allowWatchBookmarks=true",
            ));
        }
        if request.resource_version_match.as_deref() != Some("NotOlderThan") {
            return Err(Status::invalid(
                "sendInitialEvents requires resourceVersionMatch=NotOlderThan",
            ));
        }
    }
    let marks_initial_end = request.send_initial_events == Some(true);
    let start_from = if send_initial { None } else { from };
    let type_meta = (resource.kind.clone(), resource.api_version());
    let mut state = WatchState {
        core: Arc::clone(&core),
        filter: request.filter,
        type_meta,
        queued: VecDeque::new(),
        initial: Vec::new().into_iter(),
        end_bookmark: None,
        replay: Vec::new().into_iter(),
        receiver: None,
        held: None,
        bookmarks: None,
        deadline: request.timeout.map(|t| Instant::now() + t),
        stall: core.hooks.stall_signal(),
        table: request.table.map(|include| TableWatch {
            resource: resource.clone(),
            include,
            headers_sent: AtomicBool::new(false),
        }),
        protobuf: request.protobuf,
    };
    let start = match core.store.watch(&resource.storage_key(), start_from) {
        Ok(start) => start,
        Err(status) if status.code == 410 => {
            state.queued.push_back(error_line(&status));
            return Ok(state.into_stream());
        }
        Err(status) => return Err(status),
    };
    if send_initial {
        state.initial = start.initial.into_iter();
    }
    if marks_initial_end {
        state.end_bookmark = Some(start.resource_version);
    }
    state.replay = start.replay.into_iter();
    state.receiver = Some(start.receiver);
    if request.allow_bookmarks {
        let period = core
            .options
            .bookmark_interval
            .max(Duration::from_millis(10));
        let mut interval = tokio::time::interval_at(Instant::now() + period, period);
        interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
        state.bookmarks = Some(interval);
    }
    Ok(state.into_stream())
}

/// The progress of one watch stream: initial objects, the end-of-initial-events bookmark,
/// replayed history, then live events.
struct WatchState {
    core: Arc<Core>,
    filter: Filter,
    /// `kind` and `apiVersion` for bookmark objects.
    type_meta: (String, String),
    /// Lines ready to send before anything else.
    queued: VecDeque<Bytes>,
    initial: std::vec::IntoIter<Arc<StoredObject>>,
    end_bookmark: Option<u64>,
    replay: std::vec::IntoIter<Arc<Event>>,
    receiver: Option<crate::store::EventReceiver>,
    /// A live event received while emitting a bookmark, newer than that bookmark.
    held: Option<Arc<Event>>,
    bookmarks: Option<Interval>,
    deadline: Option<Instant>,
    /// Changes when a test stalls the watches open now (see [`WatchState::stalled`]).
    stall: tokio::sync::watch::Receiver<u64>,
    /// Set when the client asked for Tables instead of objects.
    table: Option<TableWatch>,
    /// Set when the answer is protobuf: each chunk of lines is sent as frames.
    protobuf: Option<Protobuf>,
}

/// Table mode of a watch: objects become one-row Tables; only the first carries the columns.
struct TableWatch {
    resource: ResourceInfo,
    include: IncludeObject,
    headers_sent: AtomicBool,
}

impl WatchState {
    fn into_stream(self) -> impl Stream<Item = Result<Bytes, Infallible>> + Send {
        futures::stream::unfold(self, |mut state| async move {
            let chunk = state.next_chunk().await?;
            let Some(protobuf) = &state.protobuf else {
                return Some((Ok(chunk), state));
            };
            match protobuf.frames(&chunk) {
                Ok(frames) => Some((Ok(frames), state)),
                Err(error) => {
                    // The stream ends; the client's next watch is answered in JSON.
                    state.core.json_only.fall_back(protobuf, &error);
                    None
                }
            }
        })
    }

    /// The next chunk of one or more lines; `None` ends the stream.
    async fn next_chunk(&mut self) -> Option<Bytes> {
        if self.stall.has_changed().unwrap_or(false) {
            return self.stalled().await;
        }
        let mut chunk = BytesMut::new();
        while let Some(line) = self.queued.pop_front() {
            chunk.put_slice(&line);
        }
        if self.receiver.is_none() {
            return (!chunk.is_empty()).then(|| chunk.freeze());
        }
        while chunk.len() < CHUNK_TARGET {
            let Some(object) = self.initial.next() else {
                break;
            };
            if self.filter.matches(&object) {
                chunk.put_slice(&self.object_line("ADDED", &object));
            }
        }
        if !chunk.is_empty() {
            return Some(chunk.freeze());
        }
        if let Some(rv) = self.end_bookmark.take() {
            return Some(self.bookmark(rv, true));
        }
        while chunk.len() < CHUNK_TARGET {
            let Some(event) = self.replay.next() else {
                break;
            };
            self.put_event(&mut chunk, &event);
        }
        if !chunk.is_empty() {
            return Some(chunk.freeze());
        }
        loop {
            if self.stall.has_changed().unwrap_or(false) {
                return self.stalled().await;
            }
            if let Some(event) = self.held.take() {
                self.put_event(&mut chunk, &event);
            }
            self.drain_ready(&mut chunk);
            if !chunk.is_empty() {
                return Some(chunk.freeze());
            }
            let deadline = self.deadline;
            let has_bookmarks = self.bookmarks.is_some();
            let receiver = self.receiver.as_mut()?;
            let bookmarks = self.bookmarks.as_mut();
            let stall = &mut self.stall;
            // Biased, stall first: a test stalls the watches and then writes, so an event that
            // is ready together with the stall must not slip out before it.
            tokio::select! {
                biased;
                _ = stall.changed() => return self.stalled().await,
                event = receiver.recv() => {
                    let event = event?;
                    self.put_event(&mut chunk, &event);
                }
                _ = async { bookmarks?.tick().await; Some(()) }, if has_bookmarks => {
                    return Some(self.periodic_bookmark());
                }
                _ = async { if let Some(d) = deadline { tokio::time::sleep_until(d).await } },
                    if deadline.is_some() => {
                    return None;
                }
            }
        }
    }

    /// The fault of a connection that stopped forwarding: nothing more is sent (no event, no
    /// bookmark, no end at the timeout) until the watches are closed or the server stops.
    async fn stalled(&mut self) -> Option<Bytes> {
        self.bookmarks = None;
        let receiver = self.receiver.as_mut()?;
        while receiver.recv().await.is_some() {}
        None
    }

    /// Appends every event already waiting, up to the chunk target.
    fn drain_ready(&mut self, chunk: &mut BytesMut) {
        while chunk.len() < CHUNK_TARGET {
            let Some(receiver) = self.receiver.as_mut() else {
                return;
            };
            match receiver.try_recv() {
                Ok(event) => self.put_event(chunk, &event),
                Err(_) => return,
            }
        }
    }

    /// A bookmark at the current resourceVersion, after sending every event up to it: the
    /// store sends events before releasing its lock, so all events at or below the version read
    /// under that lock are already in the channel.
    fn periodic_bookmark(&mut self) -> Bytes {
        let rv = self.core.store.resource_version();
        let mut chunk = BytesMut::new();
        while let Some(receiver) = self.receiver.as_mut() {
            match receiver.try_recv() {
                Ok(event) if event.resource_version <= rv => self.put_event(&mut chunk, &event),
                Ok(event) => {
                    self.held = Some(event);
                    break;
                }
                Err(_) => break,
            }
        }
        chunk.put_slice(&self.bookmark(rv, false));
        chunk.freeze()
    }

    fn bookmark(&self, rv: u64, initial_events_end: bool) -> Bytes {
        let (kind, api_version) = &self.type_meta;
        let mut metadata = json!({ "resourceVersion": rv.to_string() });
        if initial_events_end {
            metadata["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
        }
        let object = json!({ "kind": kind, "apiVersion": api_version, "metadata": metadata });
        watch_line("BOOKMARK", object.to_string().as_bytes())
    }

    /// Appends the line this watcher sees for `event`, if any. With a selector, an object that
    /// starts matching arrives as ADDED and one that stops matching as DELETED.
    fn put_event(&self, chunk: &mut BytesMut, event: &Event) {
        let unfiltered = self.filter.namespace.is_none() && self.filter.selects_all();
        let now = unfiltered || self.filter.matches(&event.object);
        let before = unfiltered
            || event
                .previous
                .as_ref()
                .is_some_and(|p| self.filter.matches(p));
        let seen = match event.event_type {
            EventType::Added | EventType::Deleted => now.then_some(Seen::AsIs),
            EventType::Modified => match (before, now) {
                (true, true) => Some(Seen::AsIs),
                (false, true) => Some(Seen::Entered),
                (true, false) => Some(Seen::Left),
                (false, false) => None,
            },
        };
        match (seen, self.table.is_some()) {
            (None, _) => {}
            (Some(Seen::AsIs), false) => chunk.put_slice(event.line()),
            (Some(Seen::Left), false) => chunk.put_slice(event.vanished_line()),
            (Some(Seen::AsIs), true) => {
                chunk.put_slice(&self.object_line(event.event_type.as_str(), &event.object));
            }
            (Some(Seen::Entered), _) => chunk.put_slice(&self.object_line("ADDED", &event.object)),
            (Some(Seen::Left), true) => {
                let previous = event.previous.as_ref().unwrap_or(&event.object);
                chunk.put_slice(&self.object_line("DELETED", previous));
            }
        }
    }

    /// A watch line for one object: the object itself, or a one-row Table in table mode.
    fn object_line(&self, event_type: &str, object: &StoredObject) -> Bytes {
        let Some(table) = &self.table else {
            return watch_line(event_type, &object.json);
        };
        let headers = !table.headers_sent.swap(true, Ordering::Relaxed);
        let metadata = json!({ "resourceVersion": object.resource_version.to_string() });
        match table::table(&table.resource, &[object], metadata, table.include, headers) {
            Ok(doc) => watch_line(event_type, doc.to_string().as_bytes()),
            Err(status) => error_line(&status),
        }
    }
}

/// How a watcher with a selector sees a change.
enum Seen {
    /// As it happened.
    AsIs,
    /// The object started matching: ADDED.
    Entered,
    /// The object stopped matching: DELETED.
    Left,
}

fn error_line(status: &Status) -> Bytes {
    watch_line("ERROR", status.to_json().to_string().as_bytes())
}
