//! Decodes the Kubernetes protobuf bodies clients post (kubectl's create generators send
//! protobuf) into the JSON object the API server would read from them, with the schemas
//! `kubewasm-protobuf` has of the built-in kinds. Other kinds answer 415 with a message
//! suggesting JSON.

use serde_json::Value;

use crate::Status;

/// The `Content-Type` of Kubernetes protobuf bodies.
pub(crate) const CONTENT_TYPE: &str = kubewasm_protobuf::CONTENT_TYPE;

/// The JSON object a protobuf body (`k8s\0` + `runtime.Unknown`) encodes: the members Go's
/// types give it, zero values included, as the API server's JSON of the same object has them,
/// less its `null`s (unset pointers, slices, maps and times: what a JSON body leaves out; a
/// required one left unset stays absent rather than a `null` readers cannot take).
pub(crate) fn decode(body: &[u8]) -> Result<Value, Status> {
    use kubewasm_protobuf::Error;
    let json = kubewasm_protobuf::object_json(body).map_err(|e| match e {
        Error::UnknownKind { .. } | Error::UnknownField { .. } => {
            Status::unsupported_media_type(format!(
                "this development server cannot decode this protobuf body ({e}); send JSON \
                 instead (e.g. kubectl create -f or kubectl apply -f)"
            ))
        }
        other => Status::bad_request(format!("a protobuf body that cannot be read: {other}")),
    })?;
    let mut object = serde_json::from_str(&json)
        .map_err(|e| Status::bad_request(format!("a protobuf body rendered as bad JSON: {e}")))?;
    drop_nulls(&mut object);
    Ok(object)
}

fn drop_nulls(value: &mut Value) {
    match value {
        Value::Object(members) => {
            members.retain(|_, v| !v.is_null());
            members.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
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

    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let type_meta = [
            bytes_field(1, api_version.as_bytes()),
            bytes_field(2, kind.as_bytes()),
        ]
        .concat();
        [
            kubewasm_protobuf::MAGIC.to_vec(),
            bytes_field(1, &type_meta),
            bytes_field(2, raw),
        ]
        .concat()
    }

    #[test]
    fn config_map_envelope_decodes_to_json() {
        let meta = [
            bytes_field(1, b"demo"),
            bytes_field(11, &entry("app", "web")),
        ]
        .concat();
        let raw = [bytes_field(1, &meta), bytes_field(2, &entry("a", "1"))].concat();
        let object = decode(&envelope("v1", "ConfigMap", &raw)).unwrap();
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
        assert_eq!(
            decode(&envelope("v1", "Secret", &raw)).unwrap()["data"],
            json!({"a": "Zg==", "b": "Zm8=", "bin": "/wAQ", "empty": ""})
        );
    }

    #[test]
    fn unsupported_kinds_and_garbage_are_rejected() {
        let widget = envelope("example.com/v1", "Widget", b"");
        assert_eq!(decode(&widget).unwrap_err().code, 415);
        // A field the schema lacks (99, a varint): a newer client's, not dropped.
        let unknown = envelope("v1", "ConfigMap", &[0x98, 0x06, 0x01]);
        assert_eq!(decode(&unknown).unwrap_err().code, 415);
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
        assert_eq!(
            decode(&envelope("apps/v1", "Deployment", &raw)).unwrap(),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                   "spec": {"replicas": 0, "strategy": {}, "template": {"metadata": {}, "spec": {
                       "containers": [{"name": "nginx", "image": "nginx:1",
                           "ports": [{"containerPort": 80}], "resources": {}}]}}},
                   "status": {}})
        );
    }
}
