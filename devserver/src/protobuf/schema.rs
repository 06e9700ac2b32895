//! Field numbers and JSON names of the Kubernetes messages kubectl's create generators send
//! (from k8s.io/api's generated.proto), and a decoder driven by them. Fields not listed are
//! skipped; server-owned metadata is never listed.

use serde_json::{Map, Value};

use super::wire::{Fields, Wire};
use crate::Status;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

/// How a field is encoded and turned into JSON.
#[derive(Clone, Copy)]
pub(super) enum Kind {
    /// A string; empty strings are left out, as JSON's omitempty does.
    Str,
    /// An integer; zero is left out.
    Int,
    /// An optional integer (a pointer in Go): zero is kept.
    OptInt,
    /// A boolean; false is left out.
    Bool,
    /// An optional boolean: false is kept.
    OptBool,
    /// A nested message.
    Msg(&'static [Field]),
    /// A repeated string.
    Strs,
    /// A repeated message.
    Msgs(&'static [Field]),
    /// A `map<string, string>`.
    StrMap,
    /// A `map<string, bytes>`, base64 in JSON.
    BytesMap,
}

/// One field of a message.
pub(super) struct Field {
    number: u32,
    name: &'static str,
    kind: Kind,
}

const fn f(number: u32, name: &'static str, kind: Kind) -> Field {
    Field { number, name, kind }
}

use Kind::{Bool, BytesMap, Int, Msg, Msgs, OptBool, OptInt, Str, StrMap, Strs};

pub(super) const OBJECT_META: &[Field] = &[
    f(1, "name", Str),
    f(2, "generateName", Str),
    f(3, "namespace", Str),
    f(11, "labels", StrMap),
    f(12, "annotations", StrMap),
    f(14, "finalizers", Strs),
];

const LABEL_SELECTOR_REQUIREMENT: &[Field] = &[
    f(1, "key", Str),
    f(2, "operator", Str),
    f(3, "values", Strs),
];

const LABEL_SELECTOR: &[Field] = &[
    f(1, "matchLabels", StrMap),
    f(2, "matchExpressions", Msgs(LABEL_SELECTOR_REQUIREMENT)),
];

const CONTAINER_PORT: &[Field] = &[
    f(1, "name", Str),
    f(2, "hostPort", Int),
    f(3, "containerPort", Int),
    f(4, "protocol", Str),
    f(5, "hostIP", Str),
];

const ENV_VAR: &[Field] = &[f(1, "name", Str), f(2, "value", Str)];

const CONTAINER: &[Field] = &[
    f(1, "name", Str),
    f(2, "image", Str),
    f(3, "command", Strs),
    f(4, "args", Strs),
    f(5, "workingDir", Str),
    f(6, "ports", Msgs(CONTAINER_PORT)),
    f(7, "env", Msgs(ENV_VAR)),
    f(8, "resources", Msg(&[])),
    f(13, "terminationMessagePath", Str),
    f(14, "imagePullPolicy", Str),
    f(16, "stdin", Bool),
    f(17, "stdinOnce", Bool),
    f(18, "tty", Bool),
    f(20, "terminationMessagePolicy", Str),
];

const POD_SPEC: &[Field] = &[
    f(2, "containers", Msgs(CONTAINER)),
    f(3, "restartPolicy", Str),
    f(4, "terminationGracePeriodSeconds", OptInt),
    f(6, "dnsPolicy", Str),
    f(7, "nodeSelector", StrMap),
    f(8, "serviceAccountName", Str),
    f(10, "nodeName", Str),
    f(20, "initContainers", Msgs(CONTAINER)),
];

const POD_TEMPLATE_SPEC: &[Field] = &[
    f(1, "metadata", Msg(OBJECT_META)),
    f(2, "spec", Msg(POD_SPEC)),
];

const DEPLOYMENT_STRATEGY: &[Field] = &[f(1, "type", Str)];

const DEPLOYMENT_SPEC: &[Field] = &[
    f(1, "replicas", OptInt),
    f(2, "selector", Msg(LABEL_SELECTOR)),
    f(3, "template", Msg(POD_TEMPLATE_SPEC)),
    f(4, "strategy", Msg(DEPLOYMENT_STRATEGY)),
    f(5, "minReadySeconds", Int),
    f(6, "revisionHistoryLimit", OptInt),
    f(7, "paused", Bool),
    f(9, "progressDeadlineSeconds", OptInt),
];

const JOB_SPEC: &[Field] = &[
    f(1, "parallelism", OptInt),
    f(2, "completions", OptInt),
    f(3, "activeDeadlineSeconds", OptInt),
    f(4, "selector", Msg(LABEL_SELECTOR)),
    f(5, "manualSelector", OptBool),
    f(6, "template", Msg(POD_TEMPLATE_SPEC)),
    f(7, "backoffLimit", OptInt),
    f(8, "ttlSecondsAfterFinished", OptInt),
    f(9, "completionMode", Str),
    f(10, "suspend", OptBool),
];

const CONFIG_MAP: &[Field] = &[
    f(1, "metadata", Msg(OBJECT_META)),
    f(2, "data", StrMap),
    f(3, "binaryData", BytesMap),
    f(4, "immutable", OptBool),
];

const SECRET: &[Field] = &[
    f(1, "metadata", Msg(OBJECT_META)),
    f(2, "data", BytesMap),
    f(3, "type", Str),
    f(4, "stringData", StrMap),
    f(5, "immutable", OptBool),
];

const NAMESPACE: &[Field] = &[
    f(1, "metadata", Msg(OBJECT_META)),
    f(2, "spec", Msg(&[f(1, "finalizers", Strs)])),
];

const SERVICE_ACCOUNT: &[Field] = &[
    f(1, "metadata", Msg(OBJECT_META)),
    f(4, "automountServiceAccountToken", OptBool),
];

const DEPLOYMENT: &[Field] = &[
    f(1, "metadata", Msg(OBJECT_META)),
    f(2, "spec", Msg(DEPLOYMENT_SPEC)),
];

const JOB: &[Field] = &[
    f(1, "metadata", Msg(OBJECT_META)),
    f(2, "spec", Msg(JOB_SPEC)),
];

/// The schema of a top-level kind, if this server decodes it.
pub(super) fn for_kind(api_version: &str, kind: &str) -> Option<&'static [Field]> {
    Some(match (api_version, kind) {
        ("v1", "ConfigMap") => CONFIG_MAP,
        ("v1", "Secret") => SECRET,
        ("v1", "Namespace") => NAMESPACE,
        ("v1", "ServiceAccount") => SERVICE_ACCOUNT,
        ("apps/v1", "Deployment") => DEPLOYMENT,
        ("batch/v1", "Job") => JOB,
        _ => return None,
    })
}

/// The kinds [`for_kind`] knows, for error messages.
pub(super) const SUPPORTED: &str = "ConfigMap, Secret, Namespace, ServiceAccount, Deployment, Job";

/// Decodes one message into a JSON object.
pub(super) fn decode_message(raw: &[u8], schema: &[Field]) -> Result<Map<String, Value>, Status> {
    let mut object = Map::new();
    for field in Fields::new(raw) {
        let (number, wire) = field?;
        let Some(spec) = schema.iter().find(|s| s.number == number) else {
            continue;
        };
        let name = spec.name.to_owned();
        match (spec.kind, wire) {
            (Str, Wire::Bytes(b)) => {
                if !b.is_empty() {
                    object.insert(name, Value::String(text(b)?));
                }
            }
            (Int, Wire::Varint(v)) => {
                if v != 0 {
                    object.insert(name, Value::from(signed(v)));
                }
            }
            (OptInt, Wire::Varint(v)) => {
                object.insert(name, Value::from(signed(v)));
            }
            (Bool, Wire::Varint(v)) => {
                if v != 0 {
                    object.insert(name, Value::Bool(true));
                }
            }
            (OptBool, Wire::Varint(v)) => {
                object.insert(name, Value::Bool(v != 0));
            }
            (Msg(inner), Wire::Bytes(b)) => {
                object.insert(name, Value::Object(decode_message(b, inner)?));
            }
            (Strs, Wire::Bytes(b)) => push(&mut object, name, Value::String(text(b)?)),
            (Msgs(inner), Wire::Bytes(b)) => {
                push(&mut object, name, Value::Object(decode_message(b, inner)?));
            }
            (StrMap, Wire::Bytes(b)) => {
                let (key, value) = map_entry(b)?;
                entry(&mut object, name).insert(key, Value::String(text(value)?));
            }
            (BytesMap, Wire::Bytes(b)) => {
                let (key, value) = map_entry(b)?;
                entry(&mut object, name).insert(key, Value::String(BASE64.encode(value)));
            }
            _ => {
                return Err(Status::bad_request(format!(
                    "protobuf field {} has an unexpected wire type",
                    spec.name
                )));
            }
        }
    }
    Ok(object)
}

/// Varints carry int32/int64 in two's complement.
fn signed(v: u64) -> i64 {
    v as i64
}

fn push(object: &mut Map<String, Value>, name: String, value: Value) {
    if let Value::Array(items) = object
        .entry(name)
        .or_insert_with(|| Value::Array(Vec::new()))
    {
        items.push(value);
    }
}

fn entry(object: &mut Map<String, Value>, name: String) -> &mut Map<String, Value> {
    let slot = object
        .entry(name)
        .or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    match slot {
        Value::Object(map) => map,
        _ => unreachable!("the slot was just made an object"),
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

pub(super) fn text(bytes: &[u8]) -> Result<String, Status> {
    String::from_utf8(bytes.to_vec())
        .map_err(|_| Status::bad_request("protobuf string field is not UTF-8"))
}
