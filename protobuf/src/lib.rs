//! Kubernetes protobuf for the built-in kinds this crate has a schema of: LIST bodies and watch
//! frames from the API server rendered as the exact JSON text the API server writes for the same
//! object (member order, omitted empty fields, escapes, times, base64), so a cache fed from
//! either wire holds the same bytes; and JSON objects encoded as protobuf, for a test server.
//!
//! The schemas are tables of the Go types' fields (`schema.rs`; the kinds' generated from
//! k8s.io/api by `cargo xtask protobuf-schema`), read by hand-written renderings of each field
//! type (`render.rs`, `gojson.rs`): a field the table lacks fails the decode
//! ([`Error::UnknownField`]) rather than being dropped, so a caller falls back to JSON instead of
//! losing data. An embedded `TypeMeta` below a kind's top level, which protobuf does not carry,
//! is written only where the API server sets it itself in every answer (a StatefulSet's claim
//! templates, `v1` `PersistentVolumeClaim`).

mod encode;
mod envelope;
mod error;
mod gojson;
mod kinds;
mod render;
mod schema;
mod shape;
mod wire;

pub use encode::{encode_list, encode_object, encode_watch_event};
pub use envelope::{
    ListMeta, ListReader, MAGIC, MAX_FRAME, object_json, watch_event, watch_event_shaped,
};
pub use error::{Error, Result};
pub use shape::{MetaSpans, OwnerSpans, Rendered, Shape};

/// The media type of Kubernetes protobuf.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The `Accept` header client-go sends: protobuf where the server has it, JSON otherwise.
pub const ACCEPT: &str = "application/vnd.kubernetes.protobuf, application/json";

/// Whether this crate can decode (and encode) objects of `kind` in `api_version`.
pub fn supports(api_version: &str, kind: &str) -> bool {
    kinds::for_kind(api_version, kind).is_some()
}

/// Whether a response `Content-Type` is Kubernetes protobuf (a watch adds `;stream=watch`).
pub fn is_protobuf(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|media| media.trim().eq_ignore_ascii_case(CONTENT_TYPE))
}
