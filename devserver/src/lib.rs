//! An in-process Kubernetes API server for development and tests — never for production.
//!
//! It speaks enough of the Kubernetes API (discovery, get / list / watch / create / update /
//! patch / delete, selectors, pagination, resourceVersion semantics, bookmarks, 410 Gone after
//! compaction, finalizers, the status and scale subresources, CRDs, dry runs, core and
//! `events.k8s.io/v1` Events) that `kube::Client` and `kubectl` work against it unchanged, and it
//! adds test hooks: close or silence watches, compact history, inject failures and latency, and
//! log requests.
//!
//! Like a cluster, it collects garbage: deleting an owner deletes its dependents (objects whose
//! `metadata.ownerReferences` name its uid) with the requested propagation — background (the
//! default), foreground (the owner keeps a `foregroundDeletion` finalizer until its dependents
//! with `blockOwnerDeletion` are gone) or orphan (the references are removed; also what the
//! `orphan` finalizer asks for) — and a dependent whose owners are all absent (never existed, or
//! have another uid) is collected when written. `metadata.generation` counts changes to
//! anything but metadata; for resources with a status subresource that is the spec.
//!
//! # Differences from a real API server
//!
//! - No authentication, authorization, admission, defaulting or schema validation
//!   (`fieldValidation` is accepted and ignored). What is checked is what a cluster refuses
//!   whatever the kind's schema, with its codes and reasons: request bodies over 3 MiB (413),
//!   objects etcd would not store (over 1.5 MiB as JSON: 500), ConfigMap and Secret data over
//!   1 MiB (422), names by their kind's rule (DNS subdomain, DNS label or path segment: 422),
//!   names in paths that are no path segment (400).
//! - Server-side apply keeps `managedFields` and field ownership (removal of fields an applier
//!   stops applying, 409 `FieldManagerConflict`, `force`), but a non-apply write is recorded (as
//!   an `Update` manager, named by `fieldManager` or the User-Agent) only on an object that
//!   already has `managedFields`. A built-in kind's lists are keyed by field name
//!   (containers, env and volumes by name, ports by port and protocol, ...), not per kind; a
//!   custom resource's lists follow its CRD's `x-kubernetes-list-type` and
//!   `x-kubernetes-list-map-keys` (atomic where the schema says nothing). Of defaulting, only
//!   that of list keys is done (a port's protocol, a CRD key field's `default`).
//! - The garbage collector runs synchronously inside the write that makes garbage (a real one
//!   works shortly after, from its own informers); an owner reference to a kind the server does
//!   not serve is left alone. No other controller runs: a Deployment gets no ReplicaSets.
//! - Deleting a namespace deletes its objects at once; objects may be created in namespaces that
//!   do not exist, though not in one no namespace could be (404, or 500 for `..`, as a cluster
//!   answers).
//! - Core `v1` and `events.k8s.io/v1` Events are stored apart, not converted into each other as a
//!   real server does (an Event written through one API is not listed by the other).
//! - Field selectors support `metadata.name`, `metadata.namespace`, the built-in kinds' usual
//!   fields (`spec.nodeName`, `status.phase`, a Secret's `type`, ...) and a CRD's
//!   `selectableFields`.
//! - CRD versions are not converted: an object keeps the apiVersion it was written with.
//! - Responses are JSON, but for LISTs and watches of ConfigMaps, Secrets, Namespaces and
//!   ServiceAccounts asked for in protobuf (`kubewasm-protobuf`'s encoder); the stored JSON keeps
//!   the dev server's own member order, not Go's. kubectl's Tables have a few columns per
//!   built-in kind and a CRD's `additionalPrinterColumns` (simple `.a.b` paths only); protobuf
//!   is decoded only for the create bodies of kubectl's generators for ConfigMap, Secret,
//!   Namespace, ServiceAccount, Deployment and Job.
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

mod admission;
mod core;
mod discovery;
mod event;
mod filter;
mod gc;
mod handler;
mod hooks;
mod list;
mod lists;
mod managed;
mod manifests;
mod names;
mod object;
mod openapi;
mod options;
mod patch;
mod propagation;
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
mod watch;
mod wire;
mod writes;

pub use hooks::{BadResourceName, GzipCorruption, RequestRecord, ResourceName, Verb};
pub use options::Options;
pub use server::DevServer;
pub use status::{Status, StatusCause};
