//! Decodes the Kubernetes protobuf bodies kubectl's create generators send (`kubectl create
//! configmap|secret|namespace|serviceaccount|deployment|job`) into the equivalent JSON object.
//! Other kinds answer 415 with a message suggesting JSON.

mod schema;
mod wire;

use serde_json::Value;

use crate::Status;
use wire::{Fields, Wire};

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
                        (1, Wire::Bytes(b)) => api_version = schema::text(b)?,
                        (2, Wire::Bytes(b)) => kind = schema::text(b)?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(b)) => raw = b,
            _ => {}
        }
    }
    let Some(fields) = schema::for_kind(&api_version, &kind) else {
        return Err(Status::unsupported_media_type(format!(
            "this development server decodes protobuf only for {}, not {api_version} {kind}; \
             send JSON instead (e.g. kubectl create -f or kubectl apply -f)",
            schema::SUPPORTED
        )));
    };
    let mut object = schema::decode_message(raw, fields)?;
    object.insert("apiVersion".into(), Value::String(api_version));
    object.insert("kind".into(), Value::String(kind));
    Ok(Value::Object(object))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
    fn secret_bytes_become_standard_padded_base64() {
        let data: Vec<u8> = [
            ("a", &b"f"[..]),
            ("b", b"fo"),
            ("bin", &[0xff, 0x00, 0x10]),
            ("empty", b""),
        ]
        .iter()
        .flat_map(|(k, v)| {
            bytes_field(
                2,
                &[bytes_field(1, k.as_bytes()), bytes_field(2, v)].concat(),
            )
        })
        .collect();
        let raw = [bytes_field(1, &bytes_field(1, b"creds")), data].concat();
        let type_meta = [bytes_field(1, b"v1"), bytes_field(2, b"Secret")].concat();
        let body = [
            MAGIC.to_vec(),
            bytes_field(1, &type_meta),
            bytes_field(2, &raw),
        ]
        .concat();
        assert_eq!(
            decode(&body).unwrap()["data"],
            json!({"a": "Zg==", "b": "Zm8=", "bin": "/wAQ", "empty": ""})
        );
    }

    #[test]
    fn unsupported_kinds_and_garbage_are_rejected() {
        let type_meta = [bytes_field(1, b"apps/v1"), bytes_field(2, b"DaemonSet")].concat();
        let body = [MAGIC.to_vec(), bytes_field(1, &type_meta)].concat();
        assert_eq!(decode(&body).unwrap_err().code, 415);
        assert_eq!(decode(b"k8s\0\x0a\x7f").unwrap_err().code, 400);
        assert_eq!(decode(b"{}").unwrap_err().code, 400);
    }

    #[test]
    fn deployment_with_nested_containers_decodes() {
        let port = [0x18, 80];
        let container = [
            bytes_field(1, b"nginx"),
            bytes_field(2, b"nginx:1"),
            bytes_field(6, &port),
            bytes_field(8, b""),
        ]
        .concat();
        let pod_spec = bytes_field(2, &container);
        let template = [bytes_field(1, b""), bytes_field(2, &pod_spec)].concat();
        let spec = [vec![0x08, 0x00], bytes_field(3, &template)].concat();
        let raw = [
            bytes_field(1, &bytes_field(1, b"web")),
            bytes_field(2, &spec),
        ]
        .concat();
        let type_meta = [bytes_field(1, b"apps/v1"), bytes_field(2, b"Deployment")].concat();
        let body = [
            MAGIC.to_vec(),
            bytes_field(1, &type_meta),
            bytes_field(2, &raw),
        ]
        .concat();
        assert_eq!(
            decode(&body).unwrap(),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                   "spec": {"replicas": 0, "template": {"metadata": {}, "spec": {"containers": [
                       {"name": "nginx", "image": "nginx:1", "ports": [{"containerPort": 80}],
                        "resources": {}}]}}}})
        );
    }
}
