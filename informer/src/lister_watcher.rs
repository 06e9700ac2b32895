//! The source of lists and watches: the API server through kube's client, parsed compactly.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::io::{AsyncBufRead, AsyncBufReadExt};
use futures::stream::{self, BoxStream};
use kube::api::{ListParams, WatchParams};
use kube::core::Request;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::{Error, Result};
use crate::key::InformerKey;
use crate::list_body::ListBody;
use crate::negotiate::{Negotiation, WireCounters};
use crate::object::{Object, ParseOptions};
use crate::protobuf_body::{ProtobufList, next_frame, shape};

pub use crate::list_page::ListPage;

/// The annotation on the bookmark that ends a streaming list's initial events.
pub const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// One event of a watch.
#[derive(Debug)]
pub enum WatchEvent {
    /// The object was created (or, during a streaming list, is part of the initial state).
    Added(Object),
    /// The object changed.
    Modified(Object),
    /// The object was deleted; this is its final state.
    Deleted(Object),
    /// Progress: everything up to `resource_version` has been sent.
    Bookmark {
        /// The resourceVersion to resume from.
        resource_version: String,
        /// This bookmark ends a streaming list's initial events.
        initial_events_end: bool,
    },
}

/// A running watch; an `ERROR` event arrives as `Err(Error::Api { .. })`.
pub type WatchStream = BoxStream<'static, Result<WatchEvent>>;

/// What a [`ListerWatcher`] lists and watches, for the log lines about its failures.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchTarget {
    /// `group/version/plural`, or `version/plural` for the core group: `apps/v1/deployments`.
    pub resource: String,
    /// The kind, `Deployment`.
    pub kind: String,
    /// The namespace; empty for all namespaces or a cluster-scoped resource.
    pub namespace: String,
    /// Empty when none.
    pub label_selector: String,
    /// Empty when none.
    pub field_selector: String,
}

impl WatchTarget {
    /// The target of an informer with `key`.
    pub fn of(key: &InformerKey) -> WatchTarget {
        let resource = &key.resource;
        WatchTarget {
            resource: format!("{}/{}", resource.api_version, resource.plural),
            kind: resource.kind.clone(),
            namespace: key.namespace.clone().unwrap_or_default(),
            label_selector: key.label_selector.clone().unwrap_or_default(),
            field_selector: key.field_selector.clone().unwrap_or_default(),
        }
    }
}

/// Lists and watches one collection, as client-go's ListerWatcher.
pub trait ListerWatcher: Send + Sync + 'static {
    /// What is listed and watched, to name it in logs (all empty by default).
    fn target(&self) -> WatchTarget {
        WatchTarget::default()
    }
    /// One page of a consistent LIST, starting at `continue_token` (`None` for the first page).
    fn list(&self, continue_token: Option<String>) -> BoxFuture<'_, Result<ListPage>>;
    /// A LIST at any recent version (`resourceVersion=0`, no limit), which the API server
    /// answers from its watch cache in one response: the cheapest list for the server and the
    /// fastest for the client, but possibly a little stale (a watch from its version catches
    /// up). A page with a continue token is followed with [`ListerWatcher::list`]. The default
    /// makes a consistent list, which satisfies "any version" too.
    fn list_any(&self) -> BoxFuture<'_, Result<ListPage>> {
        self.list(None)
    }
    /// A watch from `resource_version` (bookmarks on) that the server ends after `timeout`
    /// (`timeoutSeconds`, whole seconds). With `send_initial_events` and an empty version it is
    /// a streaming list: the current objects as `Added`, then a bookmark with
    /// `initial_events_end`, then live events.
    fn watch(
        &self,
        resource_version: String,
        send_initial_events: bool,
        timeout: Duration,
    ) -> BoxFuture<'_, Result<WatchStream>>;
}

/// How a [`KubeListerWatcher`] talks to the API server.
#[derive(Debug, Clone)]
pub struct ListWatchOptions {
    /// Objects per LIST page (client-go and kube-runtime use 500).
    pub page_size: u32,
    /// Drop `metadata.managedFields` from every object (the default transform).
    pub strip_managed_fields: bool,
    /// A LIST whose response headers, or whose next piece of body, take longer than this is
    /// given up (a dead connection, a stopped server, a proxy that stopped forwarding) and
    /// retried after the reflector's backoff. It bounds silence, not the whole LIST, so a big
    /// list that keeps arriving is never cut off.
    pub list_idle_limit: Duration,
    /// Ask for protobuf, as client-go does, for the built-in kinds `kubewasm-protobuf` decodes
    /// (the cache holds the same JSON either way); every other kind, and every kind when this
    /// is off, is read as JSON.
    pub protobuf: bool,
    /// Ask for gzip on LISTs, as client-go does: the API server compresses answers over
    /// 128 KiB (a twentieth of the bytes for typical objects, for some server CPU). Watches are
    /// never compressed.
    pub gzip: bool,
    /// Where the wires lists and watches were answered in are counted.
    pub wire: WireCounters,
}

impl Default for ListWatchOptions {
    fn default() -> Self {
        ListWatchOptions {
            page_size: 500,
            strip_managed_fields: true,
            list_idle_limit: Duration::from_secs(60),
            protobuf: true,
            gzip: true,
            wire: WireCounters::default(),
        }
    }
}

/// A [`ListerWatcher`] over kube's client for any resource, objects parsed straight into the
/// compact [`Object`] (no intermediate `DynamicObject`).
pub struct KubeListerWatcher {
    client: kube::Client,
    target: WatchTarget,
    request: Request,
    label_selector: Option<String>,
    field_selector: Option<String>,
    options: ListWatchOptions,
    parse: ParseOptions,
    negotiation: Arc<Negotiation>,
}

impl KubeListerWatcher {
    /// A lister-watcher for the collection `key` names.
    pub fn new(client: kube::Client, key: &InformerKey, options: ListWatchOptions) -> Self {
        let parse = ParseOptions {
            strip_managed_fields: options.strip_managed_fields,
            type_meta: Some((key.resource.api_version.clone(), key.resource.kind.clone())),
        };
        let target = WatchTarget::of(key);
        let negotiation = Arc::new(Negotiation::new(
            options.protobuf,
            options.gzip,
            &key.resource.api_version,
            &key.resource.kind,
            target.resource.clone(),
            options.wire.clone(),
        ));
        KubeListerWatcher {
            client,
            target,
            negotiation,
            request: Request::new(key.collection_path()),
            label_selector: key.label_selector.clone(),
            field_selector: key.field_selector.clone(),
            options,
            parse,
        }
    }

    async fn list_page(&self, continue_token: Option<String>) -> Result<ListPage> {
        self.fetch_list(ListParams {
            label_selector: self.label_selector.clone(),
            field_selector: self.field_selector.clone(),
            limit: Some(self.options.page_size),
            continue_token,
            ..ListParams::default()
        })
        .await
    }

    async fn list_any_version(&self) -> Result<ListPage> {
        self.fetch_list(ListParams {
            label_selector: self.label_selector.clone(),
            field_selector: self.field_selector.clone(),
            resource_version: Some("0".into()),
            ..ListParams::default()
        })
        .await
    }

    /// Makes the LIST and parses its body as it arrives.
    async fn fetch_list(&self, params: ListParams) -> Result<ListPage> {
        let request = self
            .request
            .list(&params)
            .map_err(|e| Error::Client(kube::Error::BuildRequest(e)))?;
        let limit = self.options.list_idle_limit;
        let idle = |_| Error::ListIdle(limit);
        let response = self.negotiation.send(&self.client, request, false);
        let (protobuf, mut reader) = tokio::time::timeout(limit, response)
            .await
            .map_err(idle)??;
        if protobuf {
            let mut body = ProtobufList::new(&self.parse, &self.negotiation)?;
            loop {
                let chunk = tokio::time::timeout(limit, reader.fill_buf())
                    .await
                    .map_err(idle)?
                    .map_err(|e| body_error("LIST body", e))?;
                if chunk.is_empty() {
                    let (items, resource_version, continue_token) = body.finish()?;
                    return Ok(ListPage {
                        items,
                        resource_version,
                        continue_token,
                    });
                }
                body.feed(chunk)?;
                let n = chunk.len();
                self.negotiation.count_list_body(n);
                reader.consume_unpin(n);
            }
        }
        let mut body = ListBody::new(&self.parse);
        loop {
            let chunk = tokio::time::timeout(limit, reader.fill_buf())
                .await
                .map_err(idle)?
                .map_err(|e| body_error("LIST body", e))?;
            if chunk.is_empty() {
                return body.finish();
            }
            body.feed(chunk)?;
            let n = chunk.len();
            self.negotiation.count_list_body(n);
            reader.consume_unpin(n);
        }
    }

    async fn open_watch(
        &self,
        resource_version: String,
        send_initial_events: bool,
        timeout: Duration,
    ) -> Result<WatchStream> {
        let timeout_secs = u32::try_from(timeout.as_secs()).unwrap_or(u32::MAX).max(1);
        let params = WatchParams {
            label_selector: self.label_selector.clone(),
            field_selector: self.field_selector.clone(),
            timeout: Some(timeout_secs),
            bookmarks: true,
            send_initial_events,
        };
        let mut request = self
            .request
            .watch(&params, &resource_version)
            .map_err(|e| Error::Client(kube::Error::BuildRequest(e)))?;
        request.headers_mut().insert(
            http::header::ACCEPT_ENCODING,
            http::HeaderValue::from_static("identity"),
        );
        let (protobuf, reader) = self.negotiation.send(&self.client, request, true).await?;
        let parse = self.parse.clone();
        if protobuf {
            return Ok(self.protobuf_watch(reader, parse));
        }
        let events = stream::unfold(
            (reader, Vec::new(), parse, false),
            |(mut reader, mut line, parse, done)| async move {
                if done {
                    return None;
                }
                loop {
                    line.clear();
                    match reader.read_until(b'\n', &mut line).await {
                        Ok(0) => return None,
                        Ok(_) => {}
                        Err(e) => {
                            let err = body_error("watch stream", e);
                            return Some((Err(err), (reader, line, parse, true)));
                        }
                    }
                    let text = match std::str::from_utf8(&line) {
                        Ok(t) => t.trim(),
                        Err(e) => {
                            let err = Error::Response(format!("watch line is not UTF-8: {e}"));
                            return Some((Err(err), (reader, line, parse, true)));
                        }
                    };
                    if text.is_empty() {
                        continue;
                    }
                    let event = parse_watch_line(text, &parse);
                    let failed = event.is_err();
                    return Some((event, (reader, line, parse, failed)));
                }
            },
        );
        Ok(Box::pin(events))
    }
}

impl KubeListerWatcher {
    /// The events of a protobuf watch stream; a frame that does not decode ends the stream
    /// with an error and turns this resource to JSON.
    fn protobuf_watch(
        &self,
        reader: Box<dyn AsyncBufRead + Send + Unpin>,
        parse: ParseOptions,
    ) -> WatchStream {
        let shape = shape(&parse);
        let events = stream::unfold(
            (reader, parse, shape, false, Arc::clone(&self.negotiation)),
            |(mut reader, parse, shape, done, negotiation)| async move {
                if done {
                    return None;
                }
                let event = match next_frame(&mut *reader).await {
                    Ok(None) => return None,
                    Ok(Some(frame)) => {
                        match kubewasm_protobuf::watch_event_shaped(&frame, &shape) {
                            Ok((kind, rendered)) => rendered_event(&kind, rendered, &parse),
                            Err(e) => Err(negotiation.fall_back(e)),
                        }
                    }
                    Err(e) => Err(body_error("watch stream", e)),
                };
                let failed = event.is_err();
                Some((event, (reader, parse, shape, failed, negotiation)))
            },
        );
        Box::pin(events)
    }
}

impl ListerWatcher for KubeListerWatcher {
    fn target(&self) -> WatchTarget {
        self.target.clone()
    }

    fn list(&self, continue_token: Option<String>) -> BoxFuture<'_, Result<ListPage>> {
        Box::pin(self.list_page(continue_token))
    }

    fn list_any(&self) -> BoxFuture<'_, Result<ListPage>> {
        Box::pin(self.list_any_version())
    }

    fn watch(
        &self,
        resource_version: String,
        send_initial_events: bool,
        timeout: Duration,
    ) -> BoxFuture<'_, Result<WatchStream>> {
        Box::pin(self.open_watch(resource_version, send_initial_events, timeout))
    }
}

/// A failure reading a response body (`what`): [`Error::ConnectionDied`] when the connection
/// died under it, so the reflector counts a dead connection, else [`Error::Response`].
fn body_error(what: &'static str, err: std::io::Error) -> Error {
    if crate::transport::connection_died(&err) {
        Error::ConnectionDied {
            what,
            cause: crate::transport::root_cause(&err),
            source: err,
        }
    } else {
        Error::Response(format!("reading {what}: {err}"))
    }
}

/// Parses a LIST response body into compact objects.
pub fn parse_list(text: &str, parse: &ParseOptions) -> Result<ListPage> {
    let mut body = ListBody::new(parse);
    body.feed(text.as_bytes())?;
    body.finish()
}

#[derive(Deserialize)]
struct RawEvent<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    #[serde(borrow)]
    object: &'a RawValue,
}

#[derive(Deserialize)]
struct RawBookmark {
    metadata: RawBookmarkMeta,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawBookmarkMeta {
    #[serde(default)]
    resource_version: String,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
struct RawStatus {
    #[serde(default)]
    code: u16,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    message: String,
}

/// Parses one line of a watch stream.
///
/// Lines shaped as the API server writes them (`{"type":"T","object":{...}}`) are split without
/// a parse of their own, so the object is scanned once; anything else takes the general path.
pub fn parse_watch_line(line: &str, parse: &ParseOptions) -> Result<WatchEvent> {
    if let Some((kind, object)) = split_event_line(line)
        && let Ok(event) = parse_event(kind, object, parse)
    {
        return Ok(event);
    }
    let event: RawEvent<'_> =
        serde_json::from_str(line).map_err(|e| Error::Response(format!("watch event: {e}")))?;
    parse_event(event.kind, event.object.get(), parse)
}

/// `(type, object text)` of a line in the API server's exact layout.
fn split_event_line(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix(r#"{"type":""#)?;
    let (kind, rest) = rest.split_once('"')?;
    let object = rest.strip_prefix(r#","object":"#)?.strip_suffix('}')?;
    Some((kind, object))
}

/// A protobuf watch event whose object was rendered in the cache's shape.
fn rendered_event(
    kind: &str,
    rendered: kubewasm_protobuf::Rendered,
    parse: &ParseOptions,
) -> Result<WatchEvent> {
    match kind {
        "ADDED" => Ok(WatchEvent::Added(Object::from_rendered(rendered)?)),
        "MODIFIED" => Ok(WatchEvent::Modified(Object::from_rendered(rendered)?)),
        "DELETED" => Ok(WatchEvent::Deleted(Object::from_rendered(rendered)?)),
        _ => parse_event(kind, &rendered.json, parse),
    }
}

fn parse_event(kind: &str, object: &str, parse: &ParseOptions) -> Result<WatchEvent> {
    match kind {
        "ADDED" => Ok(WatchEvent::Added(Object::parse(object, parse)?)),
        "MODIFIED" => Ok(WatchEvent::Modified(Object::parse(object, parse)?)),
        "DELETED" => Ok(WatchEvent::Deleted(Object::parse(object, parse)?)),
        "BOOKMARK" => {
            let bookmark: RawBookmark = serde_json::from_str(object)
                .map_err(|e| Error::Response(format!("bookmark: {e}")))?;
            let initial_events_end = bookmark
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(INITIAL_EVENTS_END))
                .is_some_and(|v| v == "true");
            Ok(WatchEvent::Bookmark {
                resource_version: bookmark.metadata.resource_version,
                initial_events_end,
            })
        }
        "ERROR" => {
            let status: RawStatus = serde_json::from_str(object)
                .map_err(|e| Error::Response(format!("watch error status: {e}")))?;
            Err(Error::Api {
                code: status.code,
                reason: status.reason,
                message: status.message,
            })
        }
        other => Err(Error::Response(format!(
            "unknown watch event type {other:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> ParseOptions {
        ParseOptions::config_maps()
    }

    #[test]
    fn parses_list_pages_with_type_meta_and_continue() {
        let page = parse_list(
            r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"10","continue":"abc"},"items":[{"metadata":{"name":"a","namespace":"n","managedFields":[{}]}}]}"#,
            &opts(),
        )
        .unwrap();
        assert_eq!(page.resource_version, "10");
        assert_eq!(page.continue_token.as_deref(), Some("abc"));
        assert_eq!(
            page.items[0].json(),
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n"}}"#
        );
        let last = parse_list(
            r#"{"metadata":{"resourceVersion":"11","continue":""},"items":null}"#,
            &opts(),
        )
        .unwrap();
        assert!(last.continue_token.is_none());
        assert!(last.items.is_empty());
    }

    #[test]
    fn reordered_or_spaced_watch_lines_take_the_general_path() {
        for line in [
            r#"{"object":{"metadata":{"name":"a","resourceVersion":"5"}},"type":"MODIFIED"}"#,
            r#"{"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":"5"}},"x":1}"#,
            r#"{ "type" : "MODIFIED" , "object" : {"metadata":{"name":"a","resourceVersion":"5"}} }"#,
        ] {
            let event = parse_watch_line(line, &opts()).unwrap();
            assert!(
                matches!(event, WatchEvent::Modified(o) if o.resource_version() == "5"),
                "{line}"
            );
        }
        assert!(
            parse_watch_line(
                r#"{"type":"ADDED","object":{"metadata":{"name":"a"}}"#,
                &opts()
            )
            .is_err()
        );
    }

    #[test]
    fn parses_watch_events_bookmarks_and_errors() {
        let added = parse_watch_line(
            r#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"5"}}}"#,
            &opts(),
        )
        .unwrap();
        assert!(matches!(added, WatchEvent::Added(o) if o.resource_version() == "5"));
        let end = parse_watch_line(
            r#"{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"9","annotations":{"k8s.io/initial-events-end":"true"}}}}"#,
            &opts(),
        )
        .unwrap();
        assert!(matches!(
            end,
            WatchEvent::Bookmark { ref resource_version, initial_events_end: true } if resource_version == "9"
        ));
        let gone = parse_watch_line(
            r#"{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old"}}"#,
            &opts(),
        );
        assert!(gone.unwrap_err().is_expired());
    }
}
