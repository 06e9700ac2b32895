//! What can be wrong with a protobuf body.

/// A protobuf body this crate cannot turn into the API server's JSON (or a JSON object it cannot
/// encode). Every case is a reason to read the resource as JSON instead.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The bytes are not a well-formed protobuf message.
    #[error("malformed protobuf: {0}")]
    Malformed(&'static str),
    /// A field this crate's schema of the message does not list: a newer API server's field.
    #[error("{message} has field {number}, which this decoder does not know")]
    UnknownField { message: &'static str, number: u32 },
    /// A known field with another wire type than its schema says.
    #[error("{message}.{field} has wire type {wire}, not the schema's")]
    WireType {
        message: &'static str,
        field: &'static str,
        wire: u8,
    },
    /// The envelope names a kind without a schema here.
    #[error("no protobuf schema for {api_version} {kind}")]
    UnknownKind { api_version: String, kind: String },
    /// A value that has no JSON form as the API server writes it.
    #[error("{0}")]
    Value(String),
}

pub type Result<T> = std::result::Result<T, Error>;
