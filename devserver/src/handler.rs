//! The HTTP front end: one handler that routes, logs, injects faults and answers each verb.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use bytes::BytesMut;
use futures::StreamExt;
use http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use serde_json::{Value, json};

use crate::Status;
use crate::admission::{self, Attempt, Operation};
use crate::core::Core;
use crate::discovery;
use crate::filter::Filter;
use crate::hooks::{Hooks, RequestRecord, Verb};
use crate::list::{self, ListRequest};
use crate::names;
use crate::object::StoredObject;
use crate::openapi;
use crate::patch::PatchType;
use crate::protobuf;
use crate::resource::ResourceInfo;
use crate::route::{self, ResourcePath, Route};
use crate::scale;
use crate::table::{self, IncludeObject};
use crate::watch::{self, WatchRequest};
use crate::writes::{Part, Target};

/// Request bodies over this size are refused with 413, as the API server refuses them (its
/// `MaxRequestBodyBytes`, 3 MiB by default).
const MAX_BODY: usize = 3 * 1024 * 1024;
/// A body over [`MAX_BODY`] is still read, and dropped, up to this size, so that a client still
/// sending it gets the 413 rather than a reset connection.
const MAX_DRAINED: usize = 64 * 1024 * 1024;

/// The router serving every path through [`handle`].
pub(crate) fn router(core: Arc<Core>) -> Router {
    Router::new().fallback(handle).with_state(core)
}

/// A request body, whole, or `None` when it is over [`MAX_BODY`] (then only drained).
async fn read_body(body: Body) -> Result<Option<Bytes>, Status> {
    let mut stream = body.into_data_stream();
    let mut chunks: Vec<Bytes> = Vec::new();
    let mut size = 0usize;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk
            .map_err(|e| Status::bad_request(format!("reading the request body failed: {e}")))?;
        size = size.saturating_add(chunk.len());
        if size <= MAX_BODY {
            chunks.push(chunk);
        } else if size > MAX_DRAINED {
            return Ok(None);
        } else {
            chunks.clear();
        }
    }
    if size > MAX_BODY {
        return Ok(None);
    }
    Ok(Some(match chunks.len() {
        0 => Bytes::new(),
        1 => chunks.swap_remove(0),
        _ => {
            let mut whole = BytesMut::with_capacity(size);
            chunks
                .iter()
                .for_each(|chunk| whole.extend_from_slice(chunk));
            whole.freeze()
        }
    }))
}

/// The request as the handlers need it.
struct Request {
    method: Method,
    query: HashMap<String, String>,
    raw_query: String,
    headers: HeaderMap,
    /// `None`: the body was over [`MAX_BODY`].
    body: Option<Bytes>,
}

impl Request {
    /// The body, or 413 when it was over the limit (answered where the API server reads it).
    fn body(&self) -> Result<&Bytes, Status> {
        self.body
            .as_ref()
            .ok_or_else(|| Status::entity_too_large(MAX_BODY))
    }

    fn param(&self, name: &str) -> Option<&str> {
        self.query.get(name).map(String::as_str)
    }

    fn flag(&self, name: &str) -> bool {
        matches!(self.param(name), Some("true" | "1"))
    }
}

async fn handle(
    State(core): State<Arc<Core>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let latency = core.hooks.latency();
    if latency > Duration::ZERO {
        tokio::time::sleep(latency).await;
    }
    let body = match read_body(body).await {
        Ok(body) => body,
        Err(status) => return status.into_response(),
    };
    // As the API server: the path is decoded before it is split into segments.
    let Ok(path) = percent_encoding::percent_decode_str(uri.path()).decode_utf8() else {
        return Status::unknown_resource().into_response();
    };
    let raw_query = uri.query().unwrap_or_default().to_owned();
    let query = match axum::extract::Query::<HashMap<String, String>>::try_from_uri(&uri) {
        Ok(axum::extract::Query(query)) => query,
        Err(e) => return Status::bad_request(format!("invalid query: {e}")).into_response(),
    };
    let request = Request {
        method,
        query,
        raw_query,
        headers,
        body,
    };
    let result = match route::parse(&path) {
        Route::Version => Ok(json_response(StatusCode::OK, &discovery::version())),
        Route::Health => Ok((StatusCode::OK, "ok").into_response()),
        Route::CoreVersions => {
            let address = request
                .headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or("127.0.0.1")
                .to_owned();
            Ok(json_response(
                StatusCode::OK,
                &discovery::core_versions(&address),
            ))
        }
        Route::Groups => Ok(json_response(
            StatusCode::OK,
            &discovery::groups(&core.registry),
        )),
        Route::Group(group) => discovery::group(&core.registry, &group)
            .map(|doc| json_response(StatusCode::OK, &doc))
            .ok_or_else(Status::unknown_resource),
        Route::ResourceList { group, version } => {
            core.hooks.resource_list_served();
            discovery::resource_list(&core.registry, &group, &version)
                .map(|doc| json_response(StatusCode::OK, &doc))
                .ok_or_else(Status::unknown_resource)
        }
        Route::OpenApi if path.trim_end_matches('/') == "/openapi/v3" => Ok(json_response(
            StatusCode::OK,
            &openapi::index(&core.registry),
        )),
        Route::OpenApi if path.trim_end_matches('/') == "/openapi/v2" => {
            let accept = request
                .headers
                .get(header::ACCEPT)
                .and_then(|a| a.to_str().ok())
                .unwrap_or_default();
            let protobuf = openapi::V2_PROTOBUF_ACCEPTED
                .iter()
                .any(|media| accept.contains(media));
            Ok(if protobuf {
                let mut response =
                    bytes_response(StatusCode::OK, Bytes::from(openapi::v2_protobuf()));
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(openapi::V2_PROTOBUF),
                );
                response
            } else {
                json_response(StatusCode::OK, &openapi::v2_json(&core.registry))
            })
        }
        Route::OpenApi => openapi::document(&core.registry, &path)
            .map(|doc| json_response(StatusCode::OK, &doc))
            .ok_or_else(Status::unknown_resource),
        Route::Unknown => Err(Status::unknown_resource()),
        Route::Resource(path) => handle_resource(&core, &path, &request).await,
    };
    let response = result.unwrap_or_else(IntoResponse::into_response);
    tracing::debug!(
        method = %request.method,
        path = uri.path(),
        query = request.raw_query,
        accept = ?request.headers.get(header::ACCEPT),
        content_type = ?request.headers.get(header::CONTENT_TYPE),
        status = response.status().as_u16(),
        "request"
    );
    response
}

/// Who sent `request`, for the request log: its bearer token, else its user agent.
fn client_of(request: &Request) -> String {
    let header = |name| {
        request
            .headers
            .get(name)
            .and_then(|v: &http::HeaderValue| v.to_str().ok())
    };
    header(header::AUTHORIZATION)
        .and_then(|auth| auth.strip_prefix("Bearer "))
        .or_else(|| header(header::USER_AGENT))
        .unwrap_or_default()
        .to_owned()
}

async fn handle_resource(
    core: &Arc<Core>,
    path: &ResourcePath,
    request: &Request,
) -> Result<Response, Status> {
    let verb = verb_of(request, path)?;
    let protobuf = verb == Verb::Create && is_protobuf(request);
    if matches!(verb, Verb::Create | Verb::Update | Verb::Delete) && !protobuf {
        check_json_body(request)?;
    }
    core.hooks.record(RequestRecord {
        verb,
        group: path.group.clone(),
        version: path.version.clone(),
        resource: path.plural.clone(),
        namespace: path.namespace.clone(),
        query: request.raw_query.clone(),
        name: path.name.clone(),
        client: client_of(request),
        user_agent: request
            .headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned(),
        impersonate_user: request
            .headers
            .get("impersonate-user")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        at: std::time::Instant::now(),
    })?;
    let resource = core
        .registry
        .find(&path.group, &path.version, &path.plural)
        .ok_or_else(Status::unknown_resource)?;
    if path.namespace.is_some() && !resource.namespaced {
        return Err(Status::unknown_resource());
    }
    if resource.namespaced && path.namespace.is_none() && path.name.is_some() {
        return Err(Status::unknown_resource());
    }
    let part = match path.subresource.as_deref() {
        None => Part::Main,
        Some("status") if resource.has_status => Part::Status,
        Some("scale") if resource.scale.is_some() => Part::Scale,
        Some(_) => return Err(Status::unknown_resource()),
    };
    if part != Part::Main && !matches!(verb, Verb::Get | Verb::Update | Verb::Patch) {
        return Err(Status::method_not_allowed(format!(
            "{} is not supported on a subresource",
            request.method
        )));
    }
    if let Some(name) = &path.name {
        names::check_path_name(name)?;
    }
    let namespace = path.namespace.as_deref();
    if verb != Verb::Create {
        check_namespace_key(&resource, namespace, path.name.as_deref())?;
    }
    let user_agent = request
        .headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(|agent| agent.split('/').next().unwrap_or(agent));
    let target = Target {
        resource: &resource,
        namespace,
        manager: request.param("fieldManager").or(user_agent),
        dry_run: match request.param("dryRun") {
            None | Some("") => false,
            Some("All") => true,
            Some(other) => {
                return Err(Status::bad_request(format!(
                    "unsupported dryRun {other:?}: only \"All\" is valid"
                )));
            }
        },
    };
    match (verb, path.name.as_deref()) {
        (Verb::Get, Some(name)) => {
            let stored = get(core, &resource, namespace, name)?;
            if part == Part::Main
                && let Some(include) = table_request(request)?
            {
                let metadata = json!({ "resourceVersion": stored.resource_version.to_string() });
                let table = table::table(&resource, &[&stored], metadata, include, true)?;
                return Ok(json_response(StatusCode::OK, &table));
            }
            part_response(StatusCode::OK, &resource, part, &stored)
        }
        (Verb::List, _) => list(core, &resource, namespace, request),
        (Verb::Watch, _) => watch(core, &resource, namespace, request),
        (Verb::Create, _) => {
            if resource.namespaced && namespace.is_none() {
                return Err(Status::method_not_allowed(
                    "the server does not allow this method on the requested resource",
                ));
            }
            let object = if protobuf {
                protobuf::decode(request.body()?)?
            } else {
                parse_body(request.body()?)?
            };
            let object = if admission::configured(core) {
                let name = object.pointer("/metadata/name").and_then(Value::as_str);
                let attempt = Attempt {
                    name,
                    ..attempt(Operation::Create, &target, part, user_agent)
                };
                let admitted = admission::admit(core, &attempt, Some(object.clone()), None).await?;
                admitted.unwrap_or(object)
            } else {
                object
            };
            let stored = core.create(&target, object)?;
            Ok(object_response(StatusCode::CREATED, &stored))
        }
        (Verb::Update, Some(name)) => {
            let mut object = parse_body(request.body()?)?;
            if admission::configured(core) && part != Part::Scale {
                let old = get(core, &resource, namespace, name)?;
                let old: Value = serde_json::from_slice(&old.json).map_err(internal)?;
                let attempt = Attempt {
                    name: Some(name),
                    ..attempt(Operation::Update, &target, part, user_agent)
                };
                if let Some(admitted) =
                    admission::admit(core, &attempt, Some(object.clone()), Some(&old)).await?
                {
                    object = admitted;
                }
            }
            let stored = core.update(&target, name, part, object)?;
            part_response(StatusCode::OK, &resource, part, &stored)
        }
        (Verb::Patch, Some(name)) => {
            let content_type = request
                .headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            let patch_type = PatchType::from_content_type(content_type)?;
            let applier = request
                .param("fieldManager")
                .map(|manager| (manager, request.param("force") == Some("true")));
            if admission::configured(core) && part != Part::Scale {
                // The object the patch makes, reviewed; a mutated one is stored by an update
                // at the version the patch was applied to.
                let dry = Target {
                    dry_run: true,
                    ..target
                };
                let patched = core.patch(&dry, name, part, patch_type, request.body()?, applier)?;
                let patched: Value = serde_json::from_slice(&patched.json).map_err(internal)?;
                let old = get(core, &resource, namespace, name).ok();
                let old: Option<Value> = match old {
                    Some(o) => Some(serde_json::from_slice(&o.json).map_err(internal)?),
                    None => None,
                };
                let operation = if old.is_some() {
                    Operation::Update
                } else {
                    Operation::Create
                };
                let attempt = Attempt {
                    name: Some(name),
                    ..attempt(operation, &target, part, user_agent)
                };
                let admitted =
                    admission::admit(core, &attempt, Some(patched.clone()), old.as_ref()).await?;
                if let (Some(mut mutated), Some(old)) = (admitted, &old)
                    && mutated != patched
                {
                    mutated["metadata"]["resourceVersion"] =
                        old["metadata"]["resourceVersion"].clone();
                    let stored = core.update(&target, name, part, mutated)?;
                    return part_response(StatusCode::OK, &resource, part, &stored);
                }
            }
            let stored = core.patch(&target, name, part, patch_type, request.body()?, applier)?;
            part_response(StatusCode::OK, &resource, part, &stored)
        }
        (Verb::Delete, Some(name)) => {
            let options = delete_options(request)?;
            let target = Target {
                dry_run: target.dry_run || body_dry_run(&options),
                ..target
            };
            if admission::configured(core) {
                let old = get(core, &resource, namespace, name)?;
                let old: Value = serde_json::from_slice(&old.json).map_err(internal)?;
                let attempt = Attempt {
                    name: Some(name),
                    ..attempt(Operation::Delete, &target, part, user_agent)
                };
                admission::admit(core, &attempt, None, Some(&old)).await?;
            }
            let stored = core.delete(&target, name, &options)?;
            Ok(object_response(StatusCode::OK, &stored))
        }
        (Verb::Delete, None) => {
            let options = delete_options(request)?;
            let dry_run = target.dry_run || body_dry_run(&options);
            delete_collection(core, &resource, namespace, dry_run, &options, request)
        }
        _ => Err(Status::method_not_allowed(format!(
            "{} is not supported on this path",
            request.method
        ))),
    }
}

/// A namespace in a path that is no path segment (`..`) makes the API server's storage key
/// invalid: every request but a create (refused before) fails with 500 and no reason.
fn check_namespace_key(
    resource: &ResourceInfo,
    namespace: Option<&str>,
    name: Option<&str>,
) -> Result<(), Status> {
    let Some(namespace) = namespace else {
        return Ok(());
    };
    if names::path_segment_problems(namespace, false).is_empty() {
        return Ok(());
    }
    let key = match name {
        Some(name) => format!("/{}/{namespace}/{name}", resource.plural),
        None => format!("/{}/{namespace}", resource.plural),
    };
    Err(Status::new(
        500,
        "",
        format!("invalid key: {}", Value::String(key)),
    ))
}

/// The verb a request performs, from its method, path and `watch` parameter.
fn verb_of(request: &Request, path: &ResourcePath) -> Result<Verb, Status> {
    let has_name = path.name.is_some();
    Ok(match request.method {
        Method::GET if has_name => Verb::Get,
        Method::GET if request.flag("watch") => Verb::Watch,
        Method::GET => Verb::List,
        Method::POST if !has_name => Verb::Create,
        Method::PUT if has_name => Verb::Update,
        Method::PATCH if has_name => Verb::Patch,
        Method::DELETE => Verb::Delete,
        _ => {
            return Err(Status::method_not_allowed(format!(
                "{} is not supported on this path",
                request.method
            )));
        }
    })
}

fn get(
    core: &Core,
    resource: &ResourceInfo,
    namespace: Option<&str>,
    name: &str,
) -> Result<Arc<StoredObject>, Status> {
    let key = crate::object::store_key(namespace, name);
    core.store
        .get(&resource.storage_key(), &key)
        .ok_or_else(|| Status::not_found(&resource.qualified_plural(), name))
}

/// The object, or for `/scale` its Scale view.
fn part_response(
    code: StatusCode,
    resource: &ResourceInfo,
    part: Part,
    object: &StoredObject,
) -> Result<Response, Status> {
    if part == Part::Scale {
        let view = scale::view(resource, &object.to_value()?)?;
        return Ok(json_response(code, &view));
    }
    Ok(object_response(code, object))
}

fn filter_of(
    resource: &ResourceInfo,
    namespace: Option<&str>,
    request: &Request,
) -> Result<Filter, Status> {
    Filter::parse(
        namespace.map(str::to_owned),
        request.param("labelSelector").filter(|s| !s.is_empty()),
        request.param("fieldSelector").filter(|s| !s.is_empty()),
        &resource.selectable_fields,
    )
}

fn list_request(
    resource: &ResourceInfo,
    namespace: Option<&str>,
    request: &Request,
) -> Result<ListRequest, Status> {
    let limit = match request.param("limit").filter(|s| !s.is_empty()) {
        Some(l) => Some(
            l.parse::<usize>()
                .map_err(|_| Status::bad_request(format!("invalid limit {l:?}")))?,
        ),
        None => None,
    };
    Ok(ListRequest {
        filter: filter_of(resource, namespace, request)?,
        limit,
        continue_token: request
            .param("continue")
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
        resource_version: request.param("resourceVersion").map(str::to_owned),
        resource_version_match: request
            .param("resourceVersionMatch")
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
    })
}

fn list(
    core: &Core,
    resource: &ResourceInfo,
    namespace: Option<&str>,
    request: &Request,
) -> Result<Response, Status> {
    let list_request = list_request(resource, namespace, request)?;
    let page = list::list(&core.store, &resource.storage_key(), &list_request)?;
    if let Some(include) = table_request(request)? {
        let mut metadata = json!({ "resourceVersion": page.resource_version.to_string() });
        if let Some(token) = &page.continue_token {
            metadata["continue"] = json!(token);
        }
        let objects: Vec<&StoredObject> = page.items.iter().map(Arc::as_ref).collect();
        let table = table::table(resource, &objects, metadata, include, true)?;
        return Ok(json_response(StatusCode::OK, &table));
    }
    let accept = request
        .headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    if let Some(protobuf) = core.json_only.negotiate(resource, accept) {
        let items: Vec<&[u8]> = page.items.iter().map(|o| &o.json[..]).collect();
        let token = page.continue_token.as_deref().unwrap_or_default();
        match protobuf.list(&items, &page.resource_version.to_string(), token) {
            Ok(mut body) => {
                if core.hooks.take_garbled_list() {
                    body.truncate(body.len().saturating_sub(1));
                }
                let mut response = list_response(request, body, &core.hooks);
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(kubewasm_protobuf::CONTENT_TYPE),
                );
                return Ok(response);
            }
            Err(error) => core.json_only.fall_back(&protobuf, &error),
        }
    }
    Ok(list_response(
        request,
        list::list_body(resource, &page),
        &core.hooks,
    ))
}

/// The size above which a LIST answer is gzipped for a client that accepts it: the API
/// server's (`defaultGzipThresholdBytes`, 128 KiB).
const GZIP_THRESHOLD: usize = 128 * 1024;

/// A LIST answer (JSON until the caller says otherwise), gzipped as the API server does when
/// the client sends `Accept-Encoding: gzip` and the body is over [`GZIP_THRESHOLD`]; spoiled
/// when `hooks` say so.
fn list_response(request: &Request, body: Bytes, hooks: &Hooks) -> Response {
    let accepts_gzip = request
        .headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        // As the API server reads it: `gzip`, with or without parameters.
        .any(|coding| coding.split(';').next().unwrap_or_default().trim() == "gzip");
    if !accepts_gzip || body.len() <= GZIP_THRESHOLD {
        return bytes_response(StatusCode::OK, body);
    }
    match gzip(&body) {
        Ok(mut compressed) => {
            if let Some(how) = hooks.take_gzip_corruption() {
                how.apply(&mut compressed);
            }
            let mut response = bytes_response(StatusCode::OK, Bytes::from(compressed));
            response
                .headers_mut()
                .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            response
        }
        Err(error) => {
            tracing::warn!(%error, "gzip of a LIST answer failed; answering it uncompressed");
            bytes_response(StatusCode::OK, body)
        }
    }
}

/// `body` gzipped at the level the API server uses (`gzip.DefaultCompression`).
fn gzip(body: &[u8]) -> std::io::Result<Vec<u8>> {
    use std::io::Write as _;
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(body.len() / 4),
        flate2::Compression::default(),
    );
    encoder.write_all(body)?;
    encoder.finish()
}

/// `Some(includeObject)` when the client asked for a Table (kubectl get).
fn table_request(request: &Request) -> Result<Option<IncludeObject>, Status> {
    let accept = request
        .headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    if !table::wanted(accept) {
        return Ok(None);
    }
    IncludeObject::parse(request.param("includeObject")).map(Some)
}

fn watch(
    core: &Arc<Core>,
    resource: &ResourceInfo,
    namespace: Option<&str>,
    request: &Request,
) -> Result<Response, Status> {
    let timeout = match request.param("timeoutSeconds").filter(|s| !s.is_empty()) {
        Some(t) => Some(Duration::from_secs(t.parse::<u64>().map_err(|_| {
            Status::bad_request(format!("invalid timeoutSeconds {t:?}"))
        })?)),
        None => None,
    };
    let send_initial_events = match request.param("sendInitialEvents") {
        None | Some("") => None,
        Some(_) => Some(request.flag("sendInitialEvents")),
    };
    let watch_request = WatchRequest {
        filter: filter_of(resource, namespace, request)?,
        resource_version: request.param("resourceVersion").map(str::to_owned),
        resource_version_match: request
            .param("resourceVersionMatch")
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
        allow_bookmarks: request.flag("allowWatchBookmarks"),
        send_initial_events,
        timeout,
        table: table_request(request)?,
        protobuf: None,
    };
    let watch_request = WatchRequest {
        protobuf: match watch_request.table {
            Some(_) => None,
            None => core.json_only.negotiate(
                resource,
                request
                    .headers
                    .get(header::ACCEPT)
                    .and_then(|v| v.to_str().ok()),
            ),
        },
        ..watch_request
    };
    let content_type = match watch_request.protobuf {
        Some(_) => HeaderValue::from_static("application/vnd.kubernetes.protobuf;stream=watch"),
        None => HeaderValue::from_static("application/json"),
    };
    let stream = watch::watch(Arc::clone(core), resource, watch_request)?;
    let mut response = Response::new(Body::from_stream(stream));
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, content_type);
    Ok(response)
}

/// DELETE on a collection: deletes every selected object, answering the list of them.
fn delete_collection(
    core: &Core,
    resource: &ResourceInfo,
    namespace: Option<&str>,
    dry_run: bool,
    options: &Value,
    request: &Request,
) -> Result<Response, Status> {
    let list_request = ListRequest {
        filter: filter_of(resource, namespace, request)?,
        ..ListRequest::default()
    };
    let page = list::list(&core.store, &resource.storage_key(), &list_request)?;
    let mut deleted = Vec::with_capacity(page.items.len());
    for item in &page.items {
        let target = Target {
            resource,
            namespace: item.namespace.as_deref(),
            dry_run,
            manager: None,
        };
        match core.delete(&target, &item.name, options) {
            Ok(stored) => deleted.push(stored),
            Err(status) if status.code == 404 => {}
            Err(status) => return Err(status),
        }
    }
    let page = list::Page {
        items: deleted,
        resource_version: core.store.resource_version(),
        continue_token: None,
    };
    Ok(bytes_response(
        StatusCode::OK,
        list::list_body(resource, &page),
    ))
}

/// Whether DeleteOptions in the body ask for a dry run (`"dryRun": ["All"]`).
/// A DELETE's DeleteOptions: the body (if any), with the `propagationPolicy` and
/// `orphanDependents` query parameters filled in where the body does not set them.
fn delete_options(request: &Request) -> Result<Value, Status> {
    let body = request.body()?;
    let mut options = if body.is_empty() {
        Value::Object(serde_json::Map::new())
    } else {
        parse_body(body)?
    };
    if let Some(map) = options.as_object_mut() {
        if let Some(policy) = request.param("propagationPolicy") {
            map.entry("propagationPolicy")
                .or_insert_with(|| Value::String(policy.to_owned()));
        }
        if let Some(orphan) = request.param("orphanDependents") {
            map.entry("orphanDependents")
                .or_insert_with(|| Value::Bool(orphan == "true"));
        }
    }
    Ok(options)
}

fn body_dry_run(options: &Value) -> bool {
    options
        .get("dryRun")
        .and_then(Value::as_array)
        .is_some_and(|modes| modes.iter().any(|m| m == "All"))
}

fn is_protobuf(request: &Request) -> bool {
    request
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with(protobuf::CONTENT_TYPE))
}

/// Only JSON (and YAML) bodies are understood here (protobuf creates are decoded separately):
/// any other body answers 415 with a message naming the media type.
fn check_json_body(request: &Request) -> Result<(), Status> {
    let Some(content_type) = request.headers.get(header::CONTENT_TYPE) else {
        return Ok(());
    };
    let media = content_type
        .to_str()
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    match media.as_str() {
        "" | "application/json" | "application/yaml" | "*/*" => Ok(()),
        other => Err(Status::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: \
             application/json, application/yaml (got {other:?})"
        ))),
    }
}

fn parse_body(body: &[u8]) -> Result<Value, Status> {
    if body.is_empty() {
        return Err(Status::bad_request("the request body is empty"));
    }
    serde_json::from_slice(body).or_else(|json_error| {
        serde_norway::from_slice(body).map_err(|_| {
            Status::bad_request(format!("the request body is not valid JSON: {json_error}"))
        })
    })
}

fn object_response(code: StatusCode, object: &StoredObject) -> Response {
    bytes_response(code, object.json.clone())
}

fn json_response(code: StatusCode, value: &Value) -> Response {
    bytes_response(code, Bytes::from(value.to_string()))
}

fn bytes_response(code: StatusCode, body: Bytes) -> Response {
    let mut response = (code, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The admission attempt of a write through `target` (name filled in by the caller).
fn attempt<'a>(
    operation: Operation,
    target: &Target<'a>,
    part: Part,
    user: Option<&'a str>,
) -> Attempt<'a> {
    Attempt {
        resource: target.resource,
        subresource: match part {
            Part::Main => None,
            Part::Status => Some("status"),
            Part::Scale => Some("scale"),
        },
        operation,
        namespace: target.object_namespace(),
        name: None,
        dry_run: target.dry_run,
        user: user.unwrap_or_default(),
    }
}

fn internal(e: serde_json::Error) -> Status {
    Status::internal(format!("a stored object does not parse: {e}"))
}
