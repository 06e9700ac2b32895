//! JSON objects encoded as the API server encodes the same Go value in protobuf: for a server
//! that offers protobuf (the development server), with the schemas the decoder uses.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map, Value};

use crate::envelope::MAGIC;
use crate::error::{Error, Result};
use crate::kinds;
use crate::schema::{self, Field, Kind, Message, Presence};
use crate::wire::{put_bytes, put_varint_field};

/// An object as a protobuf body: `k8s\0` + `runtime.Unknown` naming `api_version` and `kind`.
pub fn encode_object(object: &Value, api_version: &str, kind: &str) -> Result<Vec<u8>> {
    let raw = encode_raw(object, api_version, kind)?;
    Ok(envelope(api_version, kind, &raw))
}

/// A LIST answer as a protobuf body: a `<kind>List` with `resource_version` and
/// `continue_token` (empty on the last page) around `items`.
pub fn encode_list<'a>(
    items: impl IntoIterator<Item = &'a Value>,
    resource_version: &str,
    continue_token: &str,
    api_version: &str,
    kind: &str,
) -> Result<Vec<u8>> {
    let mut meta = Vec::new();
    if !resource_version.is_empty() {
        put_bytes(&mut meta, 2, resource_version.as_bytes());
    }
    if !continue_token.is_empty() {
        put_bytes(&mut meta, 3, continue_token.as_bytes());
    }
    let mut list = Vec::new();
    put_bytes(&mut list, 1, &meta);
    for item in items {
        put_bytes(&mut list, 2, &encode_raw(item, api_version, kind)?);
    }
    Ok(envelope(api_version, &format!("{kind}List"), &list))
}

/// One watch event as a frame of a protobuf watch: the big-endian length, then a `WatchEvent`
/// whose object is an encoded object of `kind` (a `Status` for `ERROR`).
pub fn encode_watch_event(
    event_type: &str,
    object: &Value,
    api_version: &str,
    kind: &str,
) -> Result<Vec<u8>> {
    let (api_version, kind) = if event_type == "ERROR" {
        ("v1", "Status")
    } else {
        (api_version, kind)
    };
    let mut extension = Vec::new();
    put_bytes(
        &mut extension,
        1,
        &encode_object(object, api_version, kind)?,
    );
    let mut event = Vec::new();
    put_bytes(&mut event, 1, event_type.as_bytes());
    put_bytes(&mut event, 2, &extension);
    let len = u32::try_from(event.len()).map_err(|_| Error::Value("a frame over 4 GiB".into()))?;
    let mut frame = len.to_be_bytes().to_vec();
    frame.extend_from_slice(&event);
    Ok(frame)
}

fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut type_meta = Vec::new();
    put_bytes(&mut type_meta, 1, api_version.as_bytes());
    put_bytes(&mut type_meta, 2, kind.as_bytes());
    let mut out = MAGIC.to_vec();
    put_bytes(&mut out, 1, &type_meta);
    put_bytes(&mut out, 2, raw);
    put_bytes(&mut out, 3, b"");
    put_bytes(&mut out, 4, b"");
    out
}

fn encode_raw(object: &Value, api_version: &str, kind: &str) -> Result<Vec<u8>> {
    let message = if (api_version, kind) == ("v1", "Status") {
        &schema::STATUS
    } else {
        kinds::for_kind(api_version, kind).ok_or_else(|| Error::UnknownKind {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
        })?
    };
    let Value::Object(members) = object else {
        return Err(Error::Value(format!("a {kind} that is not a JSON object")));
    };
    let mut out = Vec::new();
    message_bytes(members, message, &["apiVersion", "kind"], &mut out)?;
    Ok(out)
}

fn message_bytes(
    members: &Map<String, Value>,
    message: &Message,
    ignored: &[&str],
    out: &mut Vec<u8>,
) -> Result<()> {
    for name in members.keys() {
        if !ignored.contains(&name.as_str()) && !has_member(message, name) {
            return Err(Error::Value(format!(
                "{}.{name} has no protobuf field here",
                message.name
            )));
        }
    }
    fields_bytes(members, message, out)
}

/// Whether `name` is a JSON member of `message`, its embedded messages' members included.
fn has_member(message: &Message, name: &str) -> bool {
    message.fields.iter().any(|f| match f.kind {
        Kind::Inline(inner) => has_member(inner, name),
        Kind::TypeMeta(..) => name == "kind" || name == "apiVersion",
        _ => f.json == name,
    })
}

/// `message`'s fields from `members`, whose names [`message_bytes`] checked.
fn fields_bytes(members: &Map<String, Value>, message: &Message, out: &mut Vec<u8>) -> Result<()> {
    let mut fields: Vec<_> = message.fields.iter().collect();
    fields.sort_by_key(|f| f.number);
    for field in fields {
        let value = members.get(field.json).filter(|v| !v.is_null());
        let n = field.number;
        let bad = || {
            Error::Value(format!(
                "{}.{} has the wrong type",
                message.name, field.json
            ))
        };
        // Go writes a non-pointer field always, its zero when unset; a pointer when set.
        let pointer = matches!(field.presence, Presence::Pointer | Presence::Nullable);
        if value.is_none() && pointer {
            continue;
        }
        match field.kind {
            Kind::Str => {
                let s = value.map_or(Some(""), Value::as_str).ok_or_else(bad)?;
                put_bytes(out, n, s.as_bytes());
            }
            Kind::Int32 | Kind::Int64 => {
                let v = value.map_or(Some(0), Value::as_i64).ok_or_else(bad)?;
                put_varint_field(out, n, v as u64);
            }
            Kind::Bool => {
                let v = value.map_or(Some(false), Value::as_bool).ok_or_else(bad)?;
                put_varint_field(out, n, u64::from(v));
            }
            Kind::Msg(inner) => {
                let empty = Map::new();
                let m = value
                    .map_or(Some(&empty), Value::as_object)
                    .ok_or_else(bad)?;
                let mut body = Vec::new();
                message_bytes(m, inner, &[], &mut body)?;
                put_bytes(out, n, &body);
            }
            Kind::Bytes
            | Kind::Int32s
            | Kind::Int64s
            | Kind::Bools
            | Kind::Quantities
            | Kind::Quantity
            | Kind::IntOrString
            | Kind::MicroTime
            | Kind::RawExtension
            | Kind::Inline(_)
            | Kind::QuantityMap
            | Kind::TimeMap
            | Kind::StrsMap
            | Kind::MsgMap(_)
            | Kind::TypeMeta(..) => generated_kind_bytes(members, message, field, value, out)?,
            Kind::Time => {
                let mut body = Vec::new();
                if let Some(v) = value {
                    let text = v.as_str().ok_or_else(bad)?;
                    let at: jiff::Timestamp = text
                        .parse()
                        .map_err(|e| Error::Value(format!("{}: {e}", field.json)))?;
                    put_varint_field(&mut body, 1, at.as_second() as u64);
                }
                put_bytes(out, n, &body);
            }
            Kind::FieldsV1 => {
                let mut body = Vec::new();
                if let Some(v) = value {
                    let raw = serde_json::to_vec(v).map_err(|e| Error::Value(e.to_string()))?;
                    put_bytes(&mut body, 1, &raw);
                }
                put_bytes(out, n, &body);
            }
            Kind::Strs | Kind::Msgs(_) => {
                let Some(v) = value else { continue };
                for item in v.as_array().ok_or_else(bad)? {
                    match field.kind {
                        Kind::Msgs(inner) => {
                            let mut body = Vec::new();
                            message_bytes(
                                item.as_object().ok_or_else(bad)?,
                                inner,
                                &[],
                                &mut body,
                            )?;
                            put_bytes(out, n, &body);
                        }
                        _ => put_bytes(out, n, item.as_str().ok_or_else(bad)?.as_bytes()),
                    }
                }
            }
            Kind::StrMap | Kind::BytesMap => {
                let Some(v) = value else { continue };
                let mut entries: Vec<_> = v.as_object().ok_or_else(bad)?.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                for (key, item) in entries {
                    let text = item.as_str().ok_or_else(bad)?;
                    let bytes = match field.kind {
                        Kind::BytesMap => BASE64
                            .decode(text)
                            .map_err(|e| Error::Value(format!("{}: {e}", field.json)))?,
                        _ => text.as_bytes().to_vec(),
                    };
                    let mut entry = Vec::new();
                    put_bytes(&mut entry, 1, key.as_bytes());
                    put_bytes(&mut entry, 2, &bytes);
                    put_bytes(out, n, &entry);
                }
            }
        }
    }
    Ok(())
}

/// A field of a kind the generated tables brought, from its JSON `value` (`None`: absent or
/// null); `members` is the enclosing object, for an embedded message.
fn generated_kind_bytes(
    members: &Map<String, Value>,
    message: &Message,
    field: &Field,
    value: Option<&Value>,
    out: &mut Vec<u8>,
) -> Result<()> {
    let n = field.number;
    let bad = || {
        Error::Value(format!(
            "{}.{} has the wrong type",
            message.name, field.json
        ))
    };
    match field.kind {
        Kind::Inline(inner) => {
            let mut body = Vec::new();
            fields_bytes(members, inner, &mut body)?;
            put_bytes(out, n, &body);
        }
        Kind::Bytes => {
            if let Some(v) = value {
                let text = v.as_str().ok_or_else(bad)?;
                let bytes = BASE64
                    .decode(text)
                    .map_err(|e| Error::Value(format!("{}: {e}", field.json)))?;
                put_bytes(out, n, &bytes);
            }
        }
        Kind::Int32s | Kind::Int64s => {
            for item in value
                .map(Value::as_array)
                .unwrap_or(Some(&Vec::new()))
                .ok_or_else(bad)?
            {
                put_varint_field(out, n, item.as_i64().ok_or_else(bad)? as u64);
            }
        }
        Kind::Bools => {
            for item in value
                .map(Value::as_array)
                .unwrap_or(Some(&Vec::new()))
                .ok_or_else(bad)?
            {
                put_varint_field(out, n, u64::from(item.as_bool().ok_or_else(bad)?));
            }
        }
        Kind::Quantities => {
            for item in value
                .map(Value::as_array)
                .unwrap_or(Some(&Vec::new()))
                .ok_or_else(bad)?
            {
                put_bytes(out, n, &quantity_bytes(Some(item)).ok_or_else(bad)?);
            }
        }
        // Not in protobuf: the API server sets it in every answer.
        Kind::TypeMeta(..) => {}
        Kind::Quantity => put_bytes(out, n, &quantity_bytes(value).ok_or_else(bad)?),
        Kind::IntOrString => {
            let mut body = Vec::new();
            match value {
                Some(Value::String(text)) => {
                    put_varint_field(&mut body, 1, 1);
                    put_varint_field(&mut body, 2, 0);
                    put_bytes(&mut body, 3, text.as_bytes());
                }
                Some(v) => {
                    let int = v
                        .as_i64()
                        .and_then(|i| i32::try_from(i).ok())
                        .ok_or_else(bad)?;
                    put_varint_field(&mut body, 1, 0);
                    put_varint_field(&mut body, 2, i64::from(int) as u64);
                    put_bytes(&mut body, 3, b"");
                }
                None => {
                    put_varint_field(&mut body, 1, 0);
                    put_varint_field(&mut body, 2, 0);
                    put_bytes(&mut body, 3, b"");
                }
            }
            put_bytes(out, n, &body);
        }
        Kind::MicroTime => put_bytes(out, n, &timestamp_bytes(value, field)?),
        Kind::RawExtension => {
            let mut body = Vec::new();
            if let Some(v) = value {
                let raw = serde_json::to_vec(v).map_err(|e| Error::Value(e.to_string()))?;
                put_bytes(&mut body, 1, &raw);
            }
            put_bytes(out, n, &body);
        }
        Kind::QuantityMap | Kind::TimeMap | Kind::StrsMap | Kind::MsgMap(_) => {
            let Some(v) = value else { return Ok(()) };
            let mut entries: Vec<_> = v.as_object().ok_or_else(bad)?.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            for (key, item) in entries {
                let item = Some(item).filter(|i| !i.is_null());
                let bytes = match field.kind {
                    Kind::QuantityMap => quantity_bytes(item).ok_or_else(bad)?,
                    Kind::TimeMap => {
                        let mut body = Vec::new();
                        if let Some(text) = item {
                            let at = parse_time(text.as_str().ok_or_else(bad)?, field)?;
                            put_varint_field(&mut body, 1, at.as_second() as u64);
                        }
                        body
                    }
                    Kind::MsgMap(inner) => {
                        let empty = Map::new();
                        let members = item
                            .map_or(Some(&empty), Value::as_object)
                            .ok_or_else(bad)?;
                        let mut body = Vec::new();
                        message_bytes(members, inner, &[], &mut body)?;
                        body
                    }
                    _ => {
                        let mut body = Vec::new();
                        for s in item
                            .map(Value::as_array)
                            .unwrap_or(Some(&Vec::new()))
                            .ok_or_else(bad)?
                        {
                            put_bytes(&mut body, 1, s.as_str().ok_or_else(bad)?.as_bytes());
                        }
                        body
                    }
                };
                let mut entry = Vec::new();
                put_bytes(&mut entry, 1, key.as_bytes());
                put_bytes(&mut entry, 2, &bytes);
                put_bytes(out, n, &entry);
            }
        }
        _ => {
            return Err(Error::Value(format!(
                "{}.{}: not a generated kind",
                message.name, field.json
            )));
        }
    }
    Ok(())
}

/// A `Quantity` message: the JSON string (or number, as clients may write it) in field 1; none
/// is `"0"`. `None` when the JSON is neither.
fn quantity_bytes(value: Option<&Value>) -> Option<Vec<u8>> {
    let text = match value {
        None => "0".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(_) => return None,
    };
    let mut body = Vec::new();
    put_bytes(&mut body, 1, text.as_bytes());
    Some(body)
}

fn parse_time(text: &str, field: &Field) -> Result<jiff::Timestamp> {
    text.parse()
        .map_err(|e| Error::Value(format!("{}: {e}", field.json)))
}

/// A `Timestamp` with nanoseconds (a `MicroTime`); none is the empty message (the zero time).
fn timestamp_bytes(value: Option<&Value>, field: &Field) -> Result<Vec<u8>> {
    let mut body = Vec::new();
    if let Some(v) = value {
        let text = v
            .as_str()
            .ok_or_else(|| Error::Value(format!("{} is not a time", field.json)))?;
        let at = parse_time(text, field)?;
        put_varint_field(&mut body, 1, at.as_second() as u64);
        put_varint_field(
            &mut body,
            2,
            u64::from(at.subsec_nanosecond().unsigned_abs()),
        );
    }
    Ok(body)
}
