//! The running server: start, clients and kubeconfig, in-process writes, test hooks, shutdown.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::serve::ListenerExt;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::core::Core;
use crate::hooks::{GzipCorruption, RequestRecord, ResourceName, Verb};
use crate::patch::PatchType;
use crate::writes::{Part, Target};
use crate::{Options, Status, handler, manifests};

/// Namespaces every server starts with, as a fresh cluster has them.
const INITIAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

/// A handle to a running development API server; clones share the same server.
///
/// The server keeps running until [`DevServer::shutdown`] is called or the runtime ends.
#[derive(Clone)]
pub struct DevServer {
    inner: Arc<Running>,
}

struct Running {
    core: Arc<Core>,
    address: SocketAddr,
    stop: Mutex<Option<oneshot::Sender<()>>>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl DevServer {
    /// Binds 127.0.0.1 on `options.port` (0: any free port), creates the initial namespaces
    /// and serves until shut down. Must be called inside a tokio runtime.
    pub async fn start(options: Options) -> anyhow::Result<DevServer> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", options.port))
            .await
            .with_context(|| format!("binding 127.0.0.1:{}", options.port))?;
        let address = listener.local_addr()?;
        // Small requests and answers go out at once: with Nagle's algorithm a response written
        // in two parts waits for the client's delayed ACK (about 40 ms).
        let listener = listener.tap_io(|stream| {
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!(error = %e, "setting TCP_NODELAY on an accepted connection failed");
            }
        });
        let core = Arc::new(Core::new(options));
        let namespaces = core
            .registry
            .find("", "v1", "namespaces")
            .context("the namespaces resource is missing from the built-in table")?;
        for name in INITIAL_NAMESPACES {
            let object =
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
            core.create(&Target::new(&namespaces, None), object)?;
        }
        let (stop, stopped) = oneshot::channel::<()>();
        let app = handler::router(Arc::clone(&core));
        let task = tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
                let _ = stopped.await;
            });
            if let Err(e) = serve.await {
                tracing::error!(error = %e, "development API server failed");
            }
        });
        tracing::info!(%address, "development API server listening (not for production)");
        Ok(DevServer {
            inner: Arc::new(Running {
                core,
                address,
                stop: Mutex::new(Some(stop)),
                task: Mutex::new(Some(task)),
            }),
        })
    }

    /// The base URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.inner.address)
    }

    /// A kube client for this server, default namespace "default". Must be called inside a
    /// tokio runtime (the client spawns its connection task).
    pub fn client(&self) -> kube::Client {
        let uri: http::Uri = self
            .url()
            .parse()
            .expect("a socket address always forms a valid URI");
        let config = kube::Config::new(uri);
        kube::Client::try_from(config).expect("a plain-HTTP kube client always builds")
    }

    /// A kubeconfig (context `kubewasm-dev`, namespace `default`) for kubectl and kube.
    pub fn kubeconfig_yaml(&self) -> String {
        format!(
            "apiVersion: v1\n\
             kind: Config\n\
             clusters:\n\
             - name: kubewasm-dev\n  cluster:\n    server: {url}\n\
             users:\n\
             - name: kubewasm-dev\n  user: {{}}\n\
             contexts:\n\
             - name: kubewasm-dev\n  context:\n    cluster: kubewasm-dev\n    user: kubewasm-dev\n    namespace: default\n\
             current-context: kubewasm-dev\n",
            url = self.url()
        )
    }

    /// Creates an object in-process through the same code path as POST (apiVersion and kind
    /// select the resource; a namespaced object without a namespace goes to "default").
    /// Returns the stored object, with the server-set metadata.
    pub fn create(&self, object: Value) -> Result<Value, Status> {
        let core = &self.inner.core;
        let api_version = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
        let resource = core.registry.find_kind(api_version, kind).ok_or_else(|| {
            Status::new(
                404,
                "NotFound",
                format!("no resource serves apiVersion {api_version:?} kind {kind:?}"),
            )
        })?;
        let stored = core.create(&Target::new(&resource, None), object)?;
        stored.to_value()
    }

    /// Creates every object found in the manifests in `dir` (see [`DevServer::seed`]);
    /// returns how many. Stops at the first object that cannot be created.
    pub fn load_manifests(&self, dir: &Path) -> anyhow::Result<usize> {
        let objects = manifests::read_dir(dir)?;
        self.seed(
            objects
                .into_iter()
                .map(|(file, object)| (file.display().to_string(), object)),
        )
    }

    /// Creates `objects` in order (see [`DevServer::create`]) as a manifest seeds them: a
    /// [`CONTROLLED_BY_ANNOTATION`] becomes a controller owner reference to the object of that
    /// name created before it in the same namespace, and a `status` is kept. Each object comes
    /// with where it is from, for errors; returns how many were created, and stops at the
    /// first that cannot be.
    pub fn seed(
        &self,
        objects: impl IntoIterator<Item = (String, Value)>,
    ) -> anyhow::Result<usize> {
        let mut count = 0;
        // (namespace, kind, name) -> uid of what was created so far.
        let mut uids: HashMap<(String, String, String), String> = HashMap::new();
        for (origin, mut object) in objects {
            let field =
                |o: &Value, p: &str| o.pointer(p).and_then(Value::as_str).map(str::to_owned);
            let name = field(&object, "/metadata/name").unwrap_or_else(|| "<unnamed>".into());
            let namespace = field(&object, "/metadata/namespace").unwrap_or_default();
            controlled_by_annotation(&mut object);
            fill_owner_uids(&mut object, &namespace, &uids);
            let status = object.get("status").cloned();
            let created = self
                .create(object)
                .with_context(|| format!("creating {name} from {origin}"))?;
            let kind = field(&created, "/kind").unwrap_or_default();
            if let Some(uid) = field(&created, "/metadata/uid") {
                uids.insert((namespace.clone(), kind, name.clone()), uid);
            }
            if let Some(status) = status {
                self.seed_status(&created, &name, status)
                    .with_context(|| format!("setting the status of {name} from {origin}"))?;
            }
            count += 1;
        }
        Ok(count)
    }

    /// A manifest's `status` is kept when seeding (a real server would drop it on create), so
    /// that a dev cluster can show ready pods and rolled-out deployments.
    fn seed_status(&self, created: &Value, name: &str, status: Value) -> Result<(), Status> {
        let core = &self.inner.core;
        let api_version = created
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let kind = created.get("kind").and_then(Value::as_str).unwrap_or("");
        let Some(resource) = core.registry.find_kind(api_version, kind) else {
            return Ok(());
        };
        if !resource.has_status || created.get("status") == Some(&status) {
            return Ok(());
        }
        let namespace = created
            .pointer("/metadata/namespace")
            .and_then(Value::as_str);
        let body = json!({ "status": status }).to_string();
        core.patch(
            &Target::new(&resource, namespace),
            name,
            Part::Status,
            PatchType::Merge,
            body.as_bytes(),
            None,
        )
        .map(drop)
    }

    /// Test hook: ends every open watch stream now (clients see the stream close).
    pub fn close_watches(&self) {
        self.inner.core.store.close_watches();
    }

    /// Test hook: ends every open watch of `resource` now; other watches go on.
    pub fn close_watches_of(&self, resource: &ResourceName) {
        self.inner.core.store.close_watches_of(resource);
    }

    /// Test hook: every watch open now stays open but goes silent (no events, no bookmarks,
    /// no end at its timeout), as behind a proxy that stopped forwarding its connections;
    /// watches opened later and every other request work as usual. `close_watches` and
    /// `shutdown` still end the silent watches.
    pub fn stall_watches(&self) {
        self.inner.core.hooks.stall_watches();
    }

    /// Test hook: drops all event history, so every resourceVersion handed out so far answers
    /// 410 Gone to a watch or to a list at that exact version.
    pub fn compact(&self) {
        self.inner.core.store.compact();
    }

    /// Test hook: the next `n` requests with `verb` answer HTTP `code` (a Status error).
    /// `n = 0` cancels pending failures for the verb.
    pub fn fail_next(&self, verb: Verb, n: usize, code: u16) {
        self.inner.core.hooks.fail_next(verb, None, n, code);
    }

    /// Test hook: the next `n` requests with `verb` to `resource` answer HTTP `code`; other
    /// resources are untouched. A fault on a verb and resource is used before one on the
    /// verb alone. `n = 0` cancels it.
    pub fn fail_next_on(&self, verb: Verb, resource: &ResourceName, n: usize, code: u16) {
        self.inner
            .core
            .hooks
            .fail_next(verb, Some(resource.clone()), n, code);
    }

    /// Test hook: the next `n` LIST answers in protobuf lose their last byte, a body the client
    /// cannot decode (a client that falls back to JSON gets a whole answer next).
    pub fn garble_protobuf_lists(&self, n: usize) {
        self.inner.core.hooks.garble_protobuf_lists(n);
    }

    /// Test hook: the next `n` LIST answers that are gzipped (the client asked for gzip and the
    /// answer is over 128 KiB) are spoiled as `how` says, a body no gzip decoder accepts.
    /// `n = 0` cancels it.
    pub fn corrupt_gzip_lists(&self, n: usize, how: GzipCorruption) {
        self.inner.core.hooks.corrupt_gzip_lists(n, how);
    }

    /// Test hook: every request waits this long before it is handled.
    pub fn set_latency(&self, latency: Duration) {
        self.inner.core.hooks.set_latency(latency);
    }

    /// Test hook: every resource request so far, oldest first (discovery is not logged).
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.inner.core.hooks.requests()
    }

    /// Test hook: how many group versions' resource lists (`/api/v1`, `/apis/GROUP/VERSION`)
    /// were served: the discovery of kinds, which [`DevServer::requests`] leaves out.
    pub fn resource_list_requests(&self) -> usize {
        self.inner.core.hooks.resource_lists()
    }

    /// Test hook: empties the request log.
    pub fn clear_requests(&self) {
        self.inner.core.hooks.clear_requests();
    }

    /// Stops accepting connections, ends open watches and waits (up to 5 s) for in-flight
    /// requests; other clones of this handle stop working too.
    pub async fn shutdown(self) {
        if let Some(stop) = self.inner.stop.lock().take() {
            let _ = stop.send(());
        }
        self.inner.core.store.close_watches();
        let task = self.inner.task.lock().take();
        if let Some(mut task) = task
            && tokio::time::timeout(Duration::from_secs(5), &mut task)
                .await
                .is_err()
        {
            task.abort();
        }
    }
}

/// The annotation a manifest names its controller with, `<apiVersion>/<Kind>/<name>` (the
/// owner in the same namespace): a manifest cannot hold the owner reference itself, since the
/// owner's uid is only known once the server has created it, and an API server refuses an
/// owner reference without one. `load_manifests` turns it into that reference.
pub const CONTROLLED_BY_ANNOTATION: &str = "dev.kubewasm.io/controlled-by";

/// Replaces a [`CONTROLLED_BY_ANNOTATION`] by a controller owner reference with an empty uid
/// (filled by [`fill_owner_uids`]); an annotation that does not parse is left as it is.
fn controlled_by_annotation(object: &mut Value) {
    let pointer = "/metadata/annotations";
    let Some(annotations) = object.pointer_mut(pointer).and_then(Value::as_object_mut) else {
        return;
    };
    let Some(owner) = annotations
        .get(CONTROLLED_BY_ANNOTATION)
        .and_then(Value::as_str)
        .and_then(|v| {
            let mut parts = v.rsplitn(3, '/');
            let (name, kind, api_version) = (parts.next()?, parts.next()?, parts.next()?);
            (!name.is_empty() && !kind.is_empty() && !api_version.is_empty()).then(|| {
                json!({
                    "apiVersion": api_version,
                    "kind": kind,
                    "name": name,
                    "uid": "",
                    "controller": true,
                    "blockOwnerDeletion": true,
                })
            })
        })
    else {
        return;
    };
    annotations.remove(CONTROLLED_BY_ANNOTATION);
    if annotations.is_empty()
        && let Some(metadata) = object
            .pointer_mut("/metadata")
            .and_then(Value::as_object_mut)
    {
        metadata.remove("annotations");
    }
    let Some(metadata) = object
        .pointer_mut("/metadata")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    match metadata
        .entry("ownerReferences")
        .or_insert_with(|| json!([]))
        .as_array_mut()
    {
        Some(owners) => owners.push(owner),
        None => tracing::warn!("ownerReferences is not a list; {CONTROLLED_BY_ANNOTATION} ignored"),
    }
}

/// Manifests cannot know the uids the server will give: an owner reference without a uid gets
/// the uid of the object of that kind and name created earlier in the same namespace.
fn fill_owner_uids(
    object: &mut Value,
    namespace: &str,
    uids: &HashMap<(String, String, String), String>,
) {
    let Some(owners) = object
        .pointer_mut("/metadata/ownerReferences")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for owner in owners {
        let missing = owner
            .get("uid")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty);
        let key = (
            namespace.to_owned(),
            owner
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            owner
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
        );
        if missing && let Some(uid) = uids.get(&key) {
            owner["uid"] = Value::String(uid.clone());
        }
    }
}
