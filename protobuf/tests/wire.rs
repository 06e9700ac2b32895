//! Encoding and decoding through the public API: the JSON is Go's layout, lists read in pieces
//! of any size give the same items, and what the schema lacks fails rather than vanishes.

use kubewasm_protobuf::{
    Error, ListReader, MAGIC, encode_list, encode_object, encode_watch_event, object_json,
    watch_event,
};
use serde_json::{Value, json};

fn config_map() -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cm", "namespace": "ns", "uid": "u-1", "resourceVersion": "7",
            "generation": 0, "creationTimestamp": "2026-12-05T00:43:25Z",
            "labels": {"b": "2", "a": "<1>"}, "annotations": {"n": "x\u{2028}\"y"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "o", "controller": true}],
            "managedFields": [{"manager": "m", "operation": "Apply", "apiVersion": "v1",
                "time": "2026-12-05T00:43:25Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:k": {}}}}]},
        "data": {"k": "v", "e": ""},
        "binaryData": {"b": "/wAQ"},
        "immutable": false
    })
}

#[test]
fn an_object_is_rendered_in_the_go_types_order_with_go_escapes() {
    let body = encode_object(&config_map(), "v1", "ConfigMap").unwrap();
    assert!(body.starts_with(MAGIC));
    assert_eq!(
        object_json(&body).unwrap(),
        concat!(
            r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm","namespace":"ns","uid":"u-1","#,
            r#""resourceVersion":"7","creationTimestamp":"2026-12-05T00:43:25Z","labels":{"a":"\u003c1\u003e","b":"2"},"#,
            r#""annotations":{"n":"x\u2028\"y"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","#,
            r#""name":"d","uid":"o","controller":true}],"managedFields":[{"manager":"m","operation":"Apply","#,
            r#""apiVersion":"v1","time":"2026-12-05T00:43:25Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:k":{}}}}]},"#,
            r#""immutable":false,"data":{"e":"","k":"v"},"binaryData":{"b":"/wAQ"}}"#
        )
    );
}

#[test]
fn a_metadata_without_creation_time_leaves_it_out() {
    // `omitzero` on `creationTimestamp` since Kubernetes 1.34 (before, `null`).
    let body = encode_object(&json!({"metadata": {"name": "n"}}), "v1", "Namespace").unwrap();
    assert_eq!(
        object_json(&body).unwrap(),
        r#"{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"n"},"spec":{},"status":{}}"#
    );
}

#[test]
fn a_list_read_in_pieces_of_any_size_gives_the_same_items() {
    let items: Vec<Value> = (0..5)
        .map(|i| {
            let mut cm = config_map();
            cm["metadata"]["name"] = format!("cm-{i}").into();
            cm["data"]["big"] = "x".repeat(i * 100).into();
            cm
        })
        .collect();
    let body = encode_list(&items, "42", "next", "v1", "ConfigMap").unwrap();
    let read = |piece: usize| {
        let mut reader = ListReader::new("v1", "ConfigMap").unwrap();
        let mut got = Vec::new();
        for chunk in body.chunks(piece) {
            reader.feed(chunk).unwrap();
            got.extend(reader.take_items());
        }
        (got, reader.finish().unwrap())
    };
    let (whole, meta) = read(body.len());
    assert_eq!(meta.resource_version, "42");
    assert_eq!(meta.continue_token, "next");
    assert_eq!(whole.len(), 5);
    for (json, item) in whole.iter().zip(&items) {
        let mut expected = item.clone();
        let object = expected.as_object_mut().unwrap();
        object.remove("apiVersion");
        object.remove("kind");
        object["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("generation");
        assert!(
            json.starts_with(r#"{"metadata":"#),
            "list items carry no type meta: {json}"
        );
        assert_eq!(serde_json::from_str::<Value>(json).unwrap(), expected);
    }
    for piece in [1, 2, 3, 7, 64, 333] {
        assert_eq!(read(piece).0, whole, "pieces of {piece}");
    }
}

#[test]
fn truncated_or_mistyped_lists_are_errors() {
    let body = encode_list(&[config_map()], "1", "", "v1", "ConfigMap").unwrap();
    for cut in [0, 3, 10, body.len() - 1] {
        let mut reader = ListReader::new("v1", "ConfigMap").unwrap();
        reader.feed(&body[..cut]).unwrap();
        assert!(reader.finish().is_err(), "cut at {cut}");
    }
    let mut secrets = ListReader::new("v1", "Secret").unwrap();
    assert!(matches!(
        secrets.feed(&body),
        Err(Error::UnknownKind { .. })
    ));
    assert!(ListReader::new("example.com/v1", "Widget").is_err());
    assert!(
        ListReader::new("v1", "ConfigMap")
            .unwrap()
            .feed(b"{\"items\":[]}")
            .is_err()
    );
}

#[test]
fn a_field_the_schema_lacks_fails_the_decode() {
    let mut raw = vec![0x0a, 0x03, 0x0a, 0x01, b'n']; // metadata { name: "n" }
    raw.extend_from_slice(&[0x98, 0x06, 0x01]); // field 99, varint 1
    let mut body = MAGIC.to_vec();
    body.extend_from_slice(&[0x0a, 0x0f, 0x0a, 0x02, b'v', b'1', 0x12, 0x09]);
    body.extend_from_slice(b"ConfigMap");
    body.push(0x12);
    body.push(raw.len() as u8);
    body.extend_from_slice(&raw);
    assert!(matches!(
        object_json(&body),
        Err(Error::UnknownField {
            message: "ConfigMap",
            number: 99
        })
    ));
    raw.truncate(5);
    let at = body.len() - 8 - 2;
    body.truncate(at);
    body.push(0x12);
    body.push(raw.len() as u8);
    body.extend_from_slice(&raw);
    assert!(object_json(&body).is_ok());
}

#[test]
fn watch_frames_carry_the_type_and_the_object_with_its_type_meta() {
    let frame = encode_watch_event("MODIFIED", &config_map(), "v1", "ConfigMap").unwrap();
    let len = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
    assert_eq!(len, frame.len() - 4);
    let (kind, json) = watch_event(&frame[4..]).unwrap();
    assert_eq!(kind, "MODIFIED");
    assert!(json.starts_with(r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm""#));
    let status =
        json!({"status": "Failure", "message": "too old", "reason": "Expired", "code": 410});
    let frame = encode_watch_event("ERROR", &status, "v1", "ConfigMap").unwrap();
    let (kind, json) = watch_event(&frame[4..]).unwrap();
    assert_eq!(kind, "ERROR");
    assert_eq!(
        json,
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old","reason":"Expired","code":410}"#
    );
    assert!(watch_event(&frame[4..frame.len() - 1]).is_err());
}

#[test]
fn objects_the_schema_cannot_hold_are_not_encoded() {
    let cm = |v: Value| encode_object(&v, "v1", "ConfigMap");
    assert!(cm(json!({"metadata": {"name": "n"}, "spec": {}})).is_err());
    assert!(cm(json!({"metadata": {"name": 1}})).is_err());
    assert!(encode_object(&json!({"metadata": {"name": "n"}}), "example.com/v1", "Pod").is_err());
}

#[test]
fn a_bookmark_frame_carries_its_version_and_annotations() {
    let bookmark = json!({"metadata": {"resourceVersion": "9",
        "annotations": {"k8s.io/initial-events-end": "true"}}});
    let frame = encode_watch_event("BOOKMARK", &bookmark, "v1", "Secret").unwrap();
    let (kind, json) = watch_event(&frame[4..]).unwrap();
    assert_eq!(kind, "BOOKMARK");
    assert_eq!(
        json,
        r#"{"kind":"Secret","apiVersion":"v1","metadata":{"resourceVersion":"9","annotations":{"k8s.io/initial-events-end":"true"}}}"#
    );
}
