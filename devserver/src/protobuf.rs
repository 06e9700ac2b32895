//! Decodes the few Kubernetes protobuf bodies kubectl sends: its `create configmap`,
//! `create secret`, `create namespace` and `create serviceaccount` generators post protobuf,
//! which is turned into the equivalent JSON object here. Every other kind answers 415.

use serde_json::{Map, Value, json};

use crate::Status;
use crate::base64;

/// The `Content-Type` of Kubernetes protobuf bodies.
pub(crate) const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The four-byte prefix of every Kubernetes protobuf body.
const MAGIC: &[u8] = b"k8s\0";

/// The JSON object a protobuf body (`k8s\0` + `runtime.Unknown`) encodes.
pub(crate) fn decode(body: &[u8]) -> Result<Value, Status> {
    let envelope = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| Status::bad_request("protobuf body without the k8s envelope"))?;
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    for field in Fields::new(envelope) {
        match field? {
            (1, Wire::Bytes(type_meta)) => {
                for field in Fields::new(type_meta) {
                    match field? {
                        (1, Wire::Bytes(b)) => api_version = text(b)?,
                        (2, Wire::Bytes(b)) => kind = text(b)?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(b)) => raw = b,
            _ => {}
        }
    }
    let mut object = match (api_version.as_str(), kind.as_str()) {
        ("v1", "ConfigMap") => config_map(raw)?,
        ("v1", "Secret") => secret(raw)?,
        ("v1", "Namespace") => namespace(raw)?,
        ("v1", "ServiceAccount") => service_account(raw)?,
        _ => {
            return Err(Status::unsupported_media_type(format!(
                "this development server decodes protobuf only for ConfigMap, Secret, \
                 Namespace and ServiceAccount, not {api_version} {kind}; send JSON instead \
                 (e.g. kubectl create -f or kubectl apply -f)"
            )));
        }
    };
    object.insert("apiVersion".into(), Value::String(api_version));
    object.insert("kind".into(), Value::String(kind));
    Ok(Value::Object(object))
}

fn config_map(raw: &[u8]) -> Result<Map<String, Value>, Status> {
    let mut object = Map::new();
    let (mut data, mut binary) = (Map::new(), Map::new());
    for field in Fields::new(raw) {
        match field? {
            (1, Wire::Bytes(b)) => {
                object.insert("metadata".into(), object_meta(b)?);
            }
            (2, Wire::Bytes(b)) => {
                let (k, v) = map_entry(b)?;
                data.insert(k, Value::String(text(v)?));
            }
            (3, Wire::Bytes(b)) => {
                let (k, v) = map_entry(b)?;
                binary.insert(k, Value::String(base64::encode(v)));
            }
            (4, Wire::Varint(v)) => {
                object.insert("immutable".into(), Value::Bool(v != 0));
            }
            _ => {}
        }
    }
    insert_non_empty(&mut object, "data", data);
    insert_non_empty(&mut object, "binaryData", binary);
    Ok(object)
}

fn secret(raw: &[u8]) -> Result<Map<String, Value>, Status> {
    let mut object = Map::new();
    let (mut data, mut string_data) = (Map::new(), Map::new());
    for field in Fields::new(raw) {
        match field? {
            (1, Wire::Bytes(b)) => {
                object.insert("metadata".into(), object_meta(b)?);
            }
            (2, Wire::Bytes(b)) => {
                let (k, v) = map_entry(b)?;
                data.insert(k, Value::String(base64::encode(v)));
            }
            (3, Wire::Bytes(b)) => {
                object.insert("type".into(), Value::String(text(b)?));
            }
            (4, Wire::Bytes(b)) => {
                let (k, v) = map_entry(b)?;
                string_data.insert(k, Value::String(text(v)?));
            }
            (5, Wire::Varint(v)) => {
                object.insert("immutable".into(), Value::Bool(v != 0));
            }
            _ => {}
        }
    }
    insert_non_empty(&mut object, "data", data);
    insert_non_empty(&mut object, "stringData", string_data);
    Ok(object)
}

fn namespace(raw: &[u8]) -> Result<Map<String, Value>, Status> {
    let mut object = Map::new();
    for field in Fields::new(raw) {
        match field? {
            (1, Wire::Bytes(b)) => {
                object.insert("metadata".into(), object_meta(b)?);
            }
            (2, Wire::Bytes(spec)) => {
                let mut finalizers = Vec::new();
                for field in Fields::new(spec) {
                    if let (1, Wire::Bytes(b)) = field? {
                        finalizers.push(Value::String(text(b)?));
                    }
                }
                if !finalizers.is_empty() {
                    object.insert("spec".into(), json!({ "finalizers": finalizers }));
                }
            }
            _ => {}
        }
    }
    Ok(object)
}

fn service_account(raw: &[u8]) -> Result<Map<String, Value>, Status> {
    let mut object = Map::new();
    for field in Fields::new(raw) {
        match field? {
            (1, Wire::Bytes(b)) => {
                object.insert("metadata".into(), object_meta(b)?);
            }
            (4, Wire::Varint(v)) => {
                object.insert("automountServiceAccountToken".into(), Value::Bool(v != 0));
            }
            _ => {}
        }
    }
    Ok(object)
}

/// The client-settable parts of `ObjectMeta`; server-owned fields are ignored.
fn object_meta(raw: &[u8]) -> Result<Value, Status> {
    let mut meta = Map::new();
    let (mut labels, mut annotations, mut finalizers) = (Map::new(), Map::new(), Vec::new());
    for field in Fields::new(raw) {
        match field? {
            (1, Wire::Bytes(b)) if !b.is_empty() => {
                meta.insert("name".into(), Value::String(text(b)?));
            }
            (2, Wire::Bytes(b)) if !b.is_empty() => {
                meta.insert("generateName".into(), Value::String(text(b)?));
            }
            (3, Wire::Bytes(b)) if !b.is_empty() => {
                meta.insert("namespace".into(), Value::String(text(b)?));
            }
            (11, Wire::Bytes(b)) => {
                let (k, v) = map_entry(b)?;
                labels.insert(k, Value::String(text(v)?));
            }
            (12, Wire::Bytes(b)) => {
                let (k, v) = map_entry(b)?;
                annotations.insert(k, Value::String(text(v)?));
            }
            (14, Wire::Bytes(b)) => finalizers.push(Value::String(text(b)?)),
            _ => {}
        }
    }
    insert_non_empty(&mut meta, "labels", labels);
    insert_non_empty(&mut meta, "annotations", annotations);
    if !finalizers.is_empty() {
        meta.insert("finalizers".into(), Value::Array(finalizers));
    }
    Ok(Value::Object(meta))
}

fn insert_non_empty(object: &mut Map<String, Value>, key: &str, map: Map<String, Value>) {
    if !map.is_empty() {
        object.insert(key.into(), Value::Object(map));
    }
}

/// A protobuf map entry: key (field 1, string) and value (field 2, bytes).
fn map_entry(raw: &[u8]) -> Result<(String, &[u8]), Status> {
    let (mut key, mut value) = (String::new(), &[][..]);
    for field in Fields::new(raw) {
        match field? {
            (1, Wire::Bytes(b)) => key = text(b)?,
            (2, Wire::Bytes(b)) => value = b,
            _ => {}
        }
    }
    Ok((key, value))
}

fn text(bytes: &[u8]) -> Result<String, Status> {
    String::from_utf8(bytes.to_vec())
        .map_err(|_| Status::bad_request("protobuf string field is not UTF-8"))
}

/// A field's wire value.
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

/// Iterates over the fields of one protobuf message.
struct Fields<'a> {
    buf: &'a [u8],
    failed: bool,
}

impl<'a> Fields<'a> {
    fn new(buf: &'a [u8]) -> Fields<'a> {
        Fields { buf, failed: false }
    }

    fn varint(&mut self) -> Result<u64, Status> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self.buf.split_first().ok_or_else(truncated)?;
            self.buf = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(truncated())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Status> {
        if n > self.buf.len() {
            return Err(truncated());
        }
        let (taken, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(taken)
    }

    fn field(&mut self) -> Result<(u32, Wire<'a>), Status> {
        let key = self.varint()?;
        let number = u32::try_from(key >> 3).map_err(|_| truncated())?;
        let wire = match key & 7 {
            0 => Wire::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                Wire::Fixed
            }
            2 => {
                let len = usize::try_from(self.varint()?).map_err(|_| truncated())?;
                Wire::Bytes(self.take(len)?)
            }
            5 => {
                self.take(4)?;
                Wire::Fixed
            }
            other => {
                return Err(Status::bad_request(format!(
                    "unsupported protobuf wire type {other}"
                )));
            }
        };
        Ok((number, wire))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Wire<'a>), Status>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() || self.failed {
            return None;
        }
        let field = self.field();
        self.failed = field.is_err();
        Some(field)
    }
}

fn truncated() -> Status {
    Status::bad_request("malformed protobuf body")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_field(number: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![(number << 3) | 2, u8::try_from(payload.len()).unwrap()];
        out.extend_from_slice(payload);
        out
    }

    fn entry(k: &str, v: &str) -> Vec<u8> {
        [bytes_field(1, k.as_bytes()), bytes_field(2, v.as_bytes())].concat()
    }

    #[test]
    fn config_map_envelope_decodes_to_json() {
        let meta = [
            bytes_field(1, b"demo"),
            bytes_field(11, &entry("app", "web")),
        ]
        .concat();
        let raw = [bytes_field(1, &meta), bytes_field(2, &entry("a", "1"))].concat();
        let type_meta = [bytes_field(1, b"v1"), bytes_field(2, b"ConfigMap")].concat();
        let body = [
            MAGIC.to_vec(),
            bytes_field(1, &type_meta),
            bytes_field(2, &raw),
        ]
        .concat();
        let object = decode(&body).unwrap();
        assert_eq!(
            object,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "demo", "labels": {"app": "web"}}, "data": {"a": "1"}})
        );
    }

    #[test]
    fn unsupported_kinds_and_garbage_are_rejected() {
        let type_meta = [bytes_field(1, b"apps/v1"), bytes_field(2, b"Deployment")].concat();
        let body = [MAGIC.to_vec(), bytes_field(1, &type_meta)].concat();
        assert_eq!(decode(&body).unwrap_err().code, 415);
        assert_eq!(decode(b"k8s\0\x0a\x7f").unwrap_err().code, 400);
        assert_eq!(decode(b"{}").unwrap_err().code, 400);
    }
}
