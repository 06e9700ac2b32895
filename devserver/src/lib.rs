//! An in-process Kubernetes API server for development and tests — never for production.
//!
//! It speaks enough of the Kubernetes API (discovery, get / list / watch / create / update /
//! patch / delete, selectors, pagination, resourceVersion semantics, bookmarks, 410 Gone after
//! compaction, finalizers, the status and scale subresources, CRDs, dry runs) that
//! `kube::Client` and `kubectl` work against it unchanged, and it adds test hooks: close
//! or silence watches, compact history, inject failures and latency, and log requests.
//!
//! # Differences from a real API server
//!
//! - No authentication, authorization, admission, defaulting or schema validation
//!   (`fieldValidation` is accepted and ignored).
//! - No managedFields; server-side apply is create-or-merge without field ownership; strategic
//!   merge patch knows keyed lists by field name (containers, ports, env, ...), not per kind.
//! - No garbage collection (`ownerReferences` and `propagationPolicy` are ignored); deleting a
//!   namespace deletes its objects at once; objects may be created in namespaces that do not
//!   exist.
//! - Field selectors support `metadata.name`, `metadata.namespace`, the built-in kinds' usual
//!   fields (`spec.nodeName`, `status.phase`, a Secret's `type`, ...) and a CRD's
//!   `selectableFields`.
//! - CRD versions are not converted: an object keeps the apiVersion it was written with.
//! - Responses are JSON; kubectl's Tables have a few columns per built-in kind and a CRD's
//!   `additionalPrinterColumns` (simple `.a.b` paths only); protobuf is decoded only for the create
//!   bodies of kubectl's generators for ConfigMap, Secret, Namespace, ServiceAccount,
//!   Deployment and Job.
//!
//! ```
//! # #[tokio::main] async fn main() -> anyhow::Result<()> {
//! use kubewasm_devserver::{DevServer, Options};
//! let server = DevServer::start(Options::default()).await?;
//! server.create(serde_json::json!({
//!     "apiVersion": "v1", "kind": "ConfigMap",
//!     "metadata": {"name": "settings", "namespace": "default"},
//!     "data": {"mode": "dev"},
//! }))?;
//! let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
//!     kube::Api::namespaced(server.client(), "default");
//! assert_eq!(api.get("settings").await?.data.unwrap()["mode"], "dev");
//! server.shutdown().await;
//! # Ok(()) }
//! ```

mod base64;
mod core;
mod discovery;
mod event;
mod filter;
mod gc;
mod handler;
mod hooks;
mod list;
mod manifests;
mod object;
mod openapi;
mod options;
mod patch;
mod protobuf;
mod registry;
mod resource;
mod route;
mod scale;
mod server;
mod status;
mod store;
mod strategic;
mod table;
mod time;
mod watch;
mod writes;

pub use hooks::{RequestRecord, Verb};
pub use options::Options;
pub use server::DevServer;
pub use status::{Status, StatusCause};
