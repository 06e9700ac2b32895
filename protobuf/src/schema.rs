//! The messages of the kinds this crate knows, as the API server's Go types declare them: each
//! field's protobuf number, its JSON name, how it is encoded, and when `encoding/json` writes it.
//! Fields are listed in the Go struct's order, which is the order of the JSON members.
//!
//! Written from k8s.io/api and k8s.io/apimachinery (`types.go` tags, `generated.proto` numbers)
//! and checked by the differential tests against a real kube-apiserver.

/// How a field is encoded.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// A string (wire type 2).
    Str,
    /// An `int32` (varint, two's complement).
    Int32,
    /// An `int64`.
    Int64,
    /// A `bool`.
    Bool,
    /// A nested message.
    Msg(&'static Message),
    /// `metav1.Time`: a `Timestamp`; JSON `"2006-01-02T15:04:05Z"`, the zero time `null`.
    Time,
    /// `metav1.FieldsV1`: raw JSON in field 1, embedded as it is.
    FieldsV1,
    /// A repeated string.
    Strs,
    /// A repeated message.
    Msgs(&'static Message),
    /// A `map<string, string>`.
    StrMap,
    /// A `map<string, bytes>`, base64 in JSON.
    BytesMap,
}

/// When `encoding/json` writes a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    /// A pointer (or `omitempty` slice or map): written when the protobuf has it.
    Pointer,
    /// A value with `omitempty`: left out when zero or empty.
    OmitEmpty,
    /// A value without `omitempty` (or a struct, which `omitempty` never drops): always written;
    /// an absent slice or map is `null`, an absent scalar its zero.
    Always,
}

/// One field of a message.
#[derive(Debug)]
pub struct Field {
    pub number: u32,
    pub json: &'static str,
    pub kind: Kind,
    pub presence: Presence,
}

/// A message: its Go name (for errors) and its fields in Go order.
#[derive(Debug)]
pub struct Message {
    pub name: &'static str,
    pub fields: &'static [Field],
}

const fn f(number: u32, json: &'static str, kind: Kind, presence: Presence) -> Field {
    Field {
        number,
        json,
        kind,
        presence,
    }
}

use Kind::{Bool, BytesMap, FieldsV1, Int32, Int64, Msg, Msgs, Str, StrMap, Strs, Time};
use Presence::{Always, OmitEmpty, Pointer};

pub static OWNER_REFERENCE: Message = Message {
    name: "OwnerReference",
    fields: &[
        f(5, "apiVersion", Str, Always),
        f(1, "kind", Str, Always),
        f(3, "name", Str, Always),
        f(4, "uid", Str, Always),
        f(6, "controller", Bool, Pointer),
        f(7, "blockOwnerDeletion", Bool, Pointer),
    ],
};

pub static MANAGED_FIELDS_ENTRY: Message = Message {
    name: "ManagedFieldsEntry",
    fields: &[
        f(1, "manager", Str, OmitEmpty),
        f(2, "operation", Str, OmitEmpty),
        f(3, "apiVersion", Str, OmitEmpty),
        f(4, "time", Time, Pointer),
        f(6, "fieldsType", Str, OmitEmpty),
        f(7, "fieldsV1", FieldsV1, Pointer),
        f(8, "subresource", Str, OmitEmpty),
    ],
};

pub static OBJECT_META: Message = Message {
    name: "ObjectMeta",
    fields: &[
        f(1, "name", Str, OmitEmpty),
        f(2, "generateName", Str, OmitEmpty),
        f(3, "namespace", Str, OmitEmpty),
        f(4, "selfLink", Str, OmitEmpty),
        f(5, "uid", Str, OmitEmpty),
        f(6, "resourceVersion", Str, OmitEmpty),
        f(7, "generation", Int64, OmitEmpty),
        f(8, "creationTimestamp", Time, Always),
        f(9, "deletionTimestamp", Time, Pointer),
        f(10, "deletionGracePeriodSeconds", Int64, Pointer),
        f(11, "labels", StrMap, OmitEmpty),
        f(12, "annotations", StrMap, OmitEmpty),
        f(13, "ownerReferences", Msgs(&OWNER_REFERENCE), OmitEmpty),
        f(14, "finalizers", Strs, OmitEmpty),
        f(17, "managedFields", Msgs(&MANAGED_FIELDS_ENTRY), OmitEmpty),
    ],
};

pub static LIST_META: Message = Message {
    name: "ListMeta",
    fields: &[
        f(1, "selfLink", Str, OmitEmpty),
        f(2, "resourceVersion", Str, OmitEmpty),
        f(3, "continue", Str, OmitEmpty),
        f(4, "remainingItemCount", Int64, Pointer),
    ],
};

static STATUS_CAUSE: Message = Message {
    name: "StatusCause",
    fields: &[
        f(1, "reason", Str, OmitEmpty),
        f(2, "message", Str, OmitEmpty),
        f(3, "field", Str, OmitEmpty),
    ],
};

static STATUS_DETAILS: Message = Message {
    name: "StatusDetails",
    fields: &[
        f(1, "name", Str, OmitEmpty),
        f(2, "group", Str, OmitEmpty),
        f(3, "kind", Str, OmitEmpty),
        f(6, "uid", Str, OmitEmpty),
        f(4, "causes", Msgs(&STATUS_CAUSE), OmitEmpty),
        f(5, "retryAfterSeconds", Int32, OmitEmpty),
    ],
};

/// `metav1.Status`: what an `ERROR` watch event carries.
pub static STATUS: Message = Message {
    name: "Status",
    fields: &[
        f(1, "metadata", Msg(&LIST_META), Always),
        f(2, "status", Str, OmitEmpty),
        f(3, "message", Str, OmitEmpty),
        f(4, "reason", Str, OmitEmpty),
        f(5, "details", Msg(&STATUS_DETAILS), Pointer),
        f(6, "code", Int32, OmitEmpty),
    ],
};

static CONFIG_MAP: Message = Message {
    name: "ConfigMap",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META), Always),
        f(4, "immutable", Bool, Pointer),
        f(2, "data", StrMap, OmitEmpty),
        f(3, "binaryData", BytesMap, OmitEmpty),
    ],
};

static SECRET: Message = Message {
    name: "Secret",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META), Always),
        f(5, "immutable", Bool, Pointer),
        f(2, "data", BytesMap, OmitEmpty),
        f(4, "stringData", StrMap, OmitEmpty),
        f(3, "type", Str, OmitEmpty),
    ],
};

static NAMESPACE_CONDITION: Message = Message {
    name: "NamespaceCondition",
    fields: &[
        f(1, "type", Str, Always),
        f(2, "status", Str, Always),
        f(4, "lastTransitionTime", Time, Always),
        f(5, "reason", Str, OmitEmpty),
        f(6, "message", Str, OmitEmpty),
    ],
};

static NAMESPACE: Message = Message {
    name: "Namespace",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META), Always),
        f(
            2,
            "spec",
            Msg(&Message {
                name: "NamespaceSpec",
                fields: &[f(1, "finalizers", Strs, OmitEmpty)],
            }),
            Always,
        ),
        f(
            3,
            "status",
            Msg(&Message {
                name: "NamespaceStatus",
                fields: &[
                    f(1, "phase", Str, OmitEmpty),
                    f(2, "conditions", Msgs(&NAMESPACE_CONDITION), OmitEmpty),
                ],
            }),
            Always,
        ),
    ],
};

static OBJECT_REFERENCE: Message = Message {
    name: "ObjectReference",
    fields: &[
        f(1, "kind", Str, OmitEmpty),
        f(2, "namespace", Str, OmitEmpty),
        f(3, "name", Str, OmitEmpty),
        f(4, "uid", Str, OmitEmpty),
        f(5, "apiVersion", Str, OmitEmpty),
        f(6, "resourceVersion", Str, OmitEmpty),
        f(7, "fieldPath", Str, OmitEmpty),
    ],
};

static SERVICE_ACCOUNT: Message = Message {
    name: "ServiceAccount",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META), Always),
        f(2, "secrets", Msgs(&OBJECT_REFERENCE), OmitEmpty),
        f(
            3,
            "imagePullSecrets",
            Msgs(&Message {
                name: "LocalObjectReference",
                fields: &[f(1, "name", Str, OmitEmpty)],
            }),
            OmitEmpty,
        ),
        f(4, "automountServiceAccountToken", Bool, Pointer),
    ],
};

/// Every kind with a schema: `(apiVersion, kind, message)`.
pub static KINDS: &[(&str, &str, &Message)] = &[
    ("v1", "ConfigMap", &CONFIG_MAP),
    ("v1", "Secret", &SECRET),
    ("v1", "Namespace", &NAMESPACE),
    ("v1", "ServiceAccount", &SERVICE_ACCOUNT),
];

/// The message of a kind, if this crate has its schema.
pub fn for_kind(api_version: &str, kind: &str) -> Option<&'static Message> {
    KINDS
        .iter()
        .find(|(v, k, _)| *v == api_version && *k == kind)
        .map(|(_, _, m)| *m)
}
