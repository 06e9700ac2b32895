//! The messages of the kinds this crate knows, as the API server's Go types declare them: each
//! field's protobuf number, its JSON name, how it is encoded, and when `encoding/json` writes it.
//! Fields are listed in the Go struct's order, which is the order of the JSON members.
//!
//! The kinds' tables are generated (`kinds/generated.rs`, by `cargo xtask protobuf-schema` from
//! the Go types of k8s.io/api and k8s.io/apimachinery); the metadata messages every kind shares
//! are written here by hand from the same types. Both are checked by the differential tests
//! against a real kube-apiserver.

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
    /// `[]byte`: bytes, base64 in JSON.
    Bytes,
    /// A repeated `int32` (packed or not).
    Int32s,
    /// A repeated `int64` (packed or not).
    Int64s,
    /// A repeated `bool` (packed or not).
    Bools,
    /// A repeated `resource.Quantity`: an array of their strings.
    Quantities,
    /// `resource.Quantity`: its canonical string in field 1; JSON a string, the zero `"0"`.
    Quantity,
    /// `intstr.IntOrString`: type (1), int (2), string (3); JSON a number or a string.
    IntOrString,
    /// `metav1.MicroTime`: a `Timestamp`; JSON `"2006-01-02T15:04:05.000000Z"`, the zero `null`.
    MicroTime,
    /// `runtime.RawExtension`: raw JSON in field 1, embedded as it is; none is `null`.
    RawExtension,
    /// An embedded struct (`json:",inline"`): a nested message in protobuf whose fields are
    /// members of the enclosing JSON object. The field's `json` is empty.
    Inline(&'static Message),
    /// A `map<string, Quantity>` (`ResourceList`).
    QuantityMap,
    /// A `map<string, Time>`.
    TimeMap,
    /// A `map<string, []string>`: each value a message of repeated strings in field 1.
    StrsMap,
    /// A `map<string, M>` of a nested message (`map[QualifiedName]DeviceAttribute`).
    MsgMap(&'static Message),
    /// An embedded `TypeMeta` below a kind's top level whose `apiVersion` and `kind` the API
    /// server sets to these in every answer (a StatefulSet's claim templates): not in protobuf
    /// (the field's number is 0, which no wire carries), written as Go writes the struct,
    /// `"kind"` then `"apiVersion"`. The field's `json` is empty.
    TypeMeta(&'static str, &'static str),
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
    /// A pointer without `omitempty`: written when the protobuf has it, `null` otherwise.
    Nullable,
}

/// One field of a message. A time with `OmitEmpty` is one tagged `omitzero`: left out when zero.
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

pub(crate) const fn f(number: u32, json: &'static str, kind: Kind, presence: Presence) -> Field {
    Field {
        number,
        json,
        kind,
        presence,
    }
}

use Kind::{Bool, FieldsV1, Int32, Int64, Msg, Msgs, Str, StrMap, Strs, Time};
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
        // `omitzero` since Kubernetes 1.34: a zero time (a template's) is left out.
        f(8, "creationTimestamp", Time, OmitEmpty),
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
