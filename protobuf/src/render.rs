//! A protobuf message rendered as the JSON `encoding/json` writes for the same Go value.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use crate::error::{Error, Result};
use crate::gojson::{push_raw, push_string};
use crate::schema::{Field, Kind, Message, Presence};
use crate::wire::{Fields, Wire};

/// Renders `buf`, a message of `message`, as a JSON object; `type_meta` (`apiVersion`, `kind`)
/// is written first, as the Go `TypeMeta` members (`kind`, then `apiVersion`).
pub fn object(buf: &[u8], message: &Message, type_meta: Option<(&str, &str)>) -> Result<String> {
    let mut out = String::with_capacity(buf.len() + buf.len() / 2 + 64);
    out.push('{');
    let mut first = true;
    if let Some((api_version, kind)) = type_meta {
        for (name, value) in [("kind", kind), ("apiVersion", api_version)] {
            if !value.is_empty() {
                member(&mut out, &mut first, name);
                push_string(&mut out, value.as_bytes());
            }
        }
    }
    members(buf, message, &mut out, first)?;
    out.push('}');
    Ok(out)
}

pub(crate) fn member(out: &mut String, first: &mut bool, name: &str) {
    if !*first {
        out.push(',');
    }
    *first = false;
    push_string(out, name.as_bytes());
    out.push(':');
}

fn members(buf: &[u8], message: &Message, out: &mut String, first: bool) -> Result<()> {
    members_with(buf, message, out, first, value)
}

/// The members of `buf`, a message of `message`, each field's values handed to `each` (which
/// writes them, as [`value`] does) in the Go struct's order.
pub(crate) fn members_with<'a>(
    buf: &'a [u8],
    message: &Message,
    out: &mut String,
    mut first: bool,
    mut each: impl FnMut(&Field, &Message, &[Wire<'a>], &mut String, &mut bool) -> Result<()>,
) -> Result<()> {
    let mut found: Vec<(usize, Wire<'_>)> = Vec::new();
    for field in Fields::new(buf) {
        let (number, wire) = field?;
        let index = message
            .fields
            .iter()
            .position(|f| f.number == number)
            .ok_or(Error::UnknownField {
                message: message.name,
                number,
            })?;
        found.push((index, wire));
    }
    found.sort_by_key(|(index, _)| *index);
    let mut at = 0;
    for (index, field) in message.fields.iter().enumerate() {
        let start = at;
        while at < found.len() && found[at].0 == index {
            at += 1;
        }
        let values: Vec<Wire<'_>> = found[start..at].iter().map(|(_, w)| *w).collect();
        each(field, message, &values, out, &mut first)?;
    }
    Ok(())
}

fn wire_error(message: &Message, field: &Field, wire: &Wire<'_>) -> Error {
    Error::WireType {
        message: message.name,
        field: field.json,
        wire: wire.number(),
    }
}

/// The one value of a singular field; `None` when absent.
pub(crate) fn single<'a>(
    message: &Message,
    field: &Field,
    values: &[Wire<'a>],
) -> Result<Option<Wire<'a>>> {
    match values {
        [] => Ok(None),
        [one] => Ok(Some(*one)),
        _ => Err(Error::Value(format!(
            "{}.{} appears more than once",
            message.name, field.json
        ))),
    }
}

pub(crate) fn value<'a>(
    field: &Field,
    message: &Message,
    values: &[Wire<'a>],
    out: &mut String,
    first: &mut bool,
) -> Result<()> {
    let presence = field.presence;
    let bytes = |w: Wire<'a>| -> Result<&'a [u8]> {
        match w {
            Wire::Bytes(b) => Ok(b),
            other => Err(wire_error(message, field, &other)),
        }
    };
    let varint = |w: Wire<'a>| match w {
        Wire::Varint(v) => Ok(v),
        other => Err(wire_error(message, field, &other)),
    };
    // Whether a scalar is written: `present` says the protobuf had it, `zero` that it is Go's
    // zero value.
    let written = |present: bool, zero: bool| match presence {
        Presence::Pointer => present,
        Presence::OmitEmpty => !zero,
        Presence::Always => true,
    };
    match field.kind {
        Kind::Str => {
            let text = single(message, field, values)?.map(bytes).transpose()?;
            if written(text.is_some(), text.is_none_or(<[u8]>::is_empty)) {
                member(out, first, field.json);
                push_string(out, text.unwrap_or_default());
            }
        }
        Kind::Int32 | Kind::Int64 | Kind::Bool => {
            let number = single(message, field, values)?.map(varint).transpose()?;
            if written(number.is_some(), number.unwrap_or(0) == 0) {
                member(out, first, field.json);
                let v = number.unwrap_or(0);
                match field.kind {
                    Kind::Int32 => out.push_str(&(v as i32).to_string()),
                    Kind::Int64 => out.push_str(&(v as i64).to_string()),
                    _ => out.push_str(if v != 0 { "true" } else { "false" }),
                }
            }
        }
        Kind::Msg(inner) => {
            let body = single(message, field, values)?.map(bytes).transpose()?;
            if body.is_some() || presence == Presence::Always {
                member(out, first, field.json);
                out.push('{');
                members(body.unwrap_or_default(), inner, out, true)?;
                out.push('}');
            }
        }
        Kind::Time => {
            let body = single(message, field, values)?.map(bytes).transpose()?;
            if body.is_some() || presence == Presence::Always {
                member(out, first, field.json);
                match body {
                    Some(b) if !b.is_empty() => time(b, out)?,
                    _ => out.push_str("null"),
                }
            }
        }
        Kind::FieldsV1 => {
            if let Some(body) = single(message, field, values)?.map(bytes).transpose()? {
                member(out, first, field.json);
                let mut raw = None;
                for f in Fields::new(body) {
                    if let (1, Wire::Bytes(b)) = f? {
                        raw = Some(b);
                    }
                }
                match raw {
                    Some(raw) => push_raw(out, raw)?,
                    None => out.push_str("null"),
                }
            }
        }
        Kind::Strs | Kind::Msgs(_) => {
            if values.is_empty() {
                if presence == Presence::Always {
                    member(out, first, field.json);
                    out.push_str("null");
                }
                return Ok(());
            }
            member(out, first, field.json);
            out.push('[');
            for (i, w) in values.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let b = bytes(*w)?;
                match field.kind {
                    Kind::Msgs(inner) => {
                        out.push('{');
                        members(b, inner, out, true)?;
                        out.push('}');
                    }
                    _ => push_string(out, b),
                }
            }
            out.push(']');
        }
        Kind::StrMap | Kind::BytesMap => {
            let mut entries = Vec::with_capacity(values.len());
            for w in values {
                entries.push(map_entry(bytes(*w)?)?);
            }
            // Go writes map keys sorted; a key given twice keeps its last value.
            entries.reverse();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            entries.dedup_by(|a, b| a.0 == b.0);
            if entries.is_empty() {
                if presence == Presence::Always {
                    member(out, first, field.json);
                    out.push_str("null");
                }
                return Ok(());
            }
            member(out, first, field.json);
            out.push('{');
            for (i, (key, value)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_string(out, key);
                out.push(':');
                match field.kind {
                    Kind::BytesMap => {
                        out.push('"');
                        BASE64.encode_string(value, out);
                        out.push('"');
                    }
                    _ => push_string(out, value),
                }
            }
            out.push('}');
        }
    }
    Ok(())
}

/// A map entry: key (field 1) and value (field 2).
fn map_entry(buf: &[u8]) -> Result<(&[u8], &[u8])> {
    let (mut key, mut value): (&[u8], &[u8]) = (&[], &[]);
    for field in Fields::new(buf) {
        match field? {
            (1, Wire::Bytes(b)) => key = b,
            (2, Wire::Bytes(b)) => value = b,
            _ => return Err(Error::Malformed("a map entry with an unexpected field")),
        }
    }
    Ok((key, value))
}

/// A `Timestamp` (`seconds` = 1, `nanos` = 2) as `metav1.Time` writes it: UTC, whole seconds.
fn time(buf: &[u8], out: &mut String) -> Result<()> {
    let mut seconds = 0i64;
    for field in Fields::new(buf) {
        match field? {
            (1, Wire::Varint(v)) => seconds = v as i64,
            (2, Wire::Varint(_)) => {}
            _ => return Err(Error::Malformed("a Timestamp with an unexpected field")),
        }
    }
    let at = jiff::Timestamp::from_second(seconds)
        .map_err(|e| Error::Value(format!("a time out of range: {e}")))?;
    let civil = at.to_zoned(jiff::tz::TimeZone::UTC).datetime();
    if !(0..=9999).contains(&civil.year()) {
        return Err(Error::Value(format!("a time out of range: {seconds}")));
    }
    out.push_str(&format!(
        "\"{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z\"",
        civil.year(),
        civil.month(),
        civil.day(),
        civil.hour(),
        civil.minute(),
        civil.second()
    ));
    Ok(())
}
