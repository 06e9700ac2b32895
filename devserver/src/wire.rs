//! The wire a LIST or watch answers in: Kubernetes protobuf when the client accepts it and the
//! kind is one `kubewasm-protobuf` encodes, JSON otherwise. A resource holding an object the
//! protobuf schema cannot carry (the dev server keeps fields a real API server would drop) is
//! answered in JSON from then on, as a client that accepts both would be by a real server.

use std::collections::HashSet;

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use serde_json::Value;

use crate::resource::ResourceInfo;

/// A protobuf answer for one resource: its `apiVersion` and `kind`.
#[derive(Debug, Clone)]
pub(crate) struct Protobuf {
    api_version: String,
    kind: String,
    storage_key: String,
}

/// The resources answered in JSON only since one of their objects failed to encode.
#[derive(Default)]
pub(crate) struct JsonOnly(Mutex<HashSet<String>>);

impl JsonOnly {
    /// Protobuf, when `accept` asks for it (before JSON or beside it) and the kind has a schema.
    pub fn negotiate(&self, resource: &ResourceInfo, accept: Option<&str>) -> Option<Protobuf> {
        let wanted = accept.is_some_and(|a| {
            a.split(',')
                .any(|media| kubewasm_protobuf::is_protobuf(media.trim()))
        });
        let api_version = resource.api_version();
        if !wanted || !kubewasm_protobuf::supports(&api_version, &resource.kind) {
            return None;
        }
        let storage_key = resource.storage_key();
        if self.0.lock().contains(&storage_key) {
            return None;
        }
        Some(Protobuf {
            api_version,
            kind: resource.kind.clone(),
            storage_key,
        })
    }

    /// Answers `protobuf`'s resource in JSON from now on.
    pub fn fall_back(&self, protobuf: &Protobuf, error: &kubewasm_protobuf::Error) {
        if self.0.lock().insert(protobuf.storage_key.clone()) {
            tracing::warn!(
                resource = %protobuf.storage_key,
                %error,
                "an object cannot be encoded as protobuf; answering this resource in JSON"
            );
        }
    }
}

impl Protobuf {
    /// A LIST answer holding `items` (their stored JSON).
    pub fn list(
        &self,
        items: &[&[u8]],
        resource_version: &str,
        continue_token: &str,
    ) -> Result<Bytes, kubewasm_protobuf::Error> {
        let values = items
            .iter()
            .map(|json| parse(json))
            .collect::<Result<Vec<_>, _>>()?;
        let body = kubewasm_protobuf::encode_list(
            &values,
            resource_version,
            continue_token,
            &self.api_version,
            &self.kind,
        )?;
        Ok(Bytes::from(body))
    }

    /// The frames of a chunk of JSON watch lines (`{"type":..,"object":..}\n` each).
    pub fn frames(&self, lines: &[u8]) -> Result<Bytes, kubewasm_protobuf::Error> {
        let mut out = BytesMut::with_capacity(lines.len());
        for line in lines.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let mut event = parse(line)?;
            let event_type = event["type"].as_str().unwrap_or_default().to_owned();
            let frame = kubewasm_protobuf::encode_watch_event(
                &event_type,
                &event["object"].take(),
                &self.api_version,
                &self.kind,
            )?;
            out.extend_from_slice(&frame);
        }
        Ok(out.freeze())
    }
}

fn parse(json: &[u8]) -> Result<Value, kubewasm_protobuf::Error> {
    serde_json::from_slice(json)
        .map_err(|e| kubewasm_protobuf::Error::Value(format!("a stored object: {e}")))
}
