//! A protobuf message rendered as the JSON `encoding/json` writes for the same Go value.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use crate::error::{Error, Result};
use crate::gojson::{push_raw, push_string};
use crate::schema::{Field, Kind, Message, Presence};
use crate::wire::{Fields, Wire, read_varint};

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

fn members(buf: &[u8], message: &Message, out: &mut String, mut first: bool) -> Result<()> {
    members_at(buf, message, out, &mut first)
}

/// [`members`] after `first` says whether a member was written before: for an embedded
/// message, whose members join the enclosing object's.
fn members_at(buf: &[u8], message: &Message, out: &mut String, first: &mut bool) -> Result<()> {
    members_with(buf, message, out, first, value)
}

/// The members of `buf`, a message of `message`, each field's values handed to `each` (which
/// writes them, as [`value`] does) in the Go struct's order; `first` says whether a member was
/// written before.
pub(crate) fn members_with<'a>(
    buf: &'a [u8],
    message: &Message,
    out: &mut String,
    first: &mut bool,
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
        each(field, message, &values, out, first)?;
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
    if presence == Presence::Nullable && values.is_empty() {
        member(out, first, field.json);
        out.push_str("null");
        return Ok(());
    }
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
        Presence::Pointer | Presence::Nullable => present,
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
            let zero = body.is_none_or(<[u8]>::is_empty);
            if (presence == Presence::OmitEmpty && !zero)
                || (presence != Presence::OmitEmpty
                    && (body.is_some() || presence == Presence::Always))
            {
                member(out, first, field.json);
                match body {
                    Some(b) if !b.is_empty() => time(b, out)?,
                    _ => out.push_str("null"),
                }
            }
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
        | Kind::TypeMeta(..) => generated_kind(field, message, values, out, first)?,
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
        Kind::Strs | Kind::Msgs(_) => array(field, values, out, first, |w, out| {
            let b = bytes(*w)?;
            match field.kind {
                Kind::Msgs(inner) => {
                    out.push('{');
                    members(b, inner, out, true)?;
                    out.push('}');
                }
                _ => push_string(out, b),
            }
            Ok(())
        })?,
        Kind::StrMap | Kind::BytesMap => map(field, message, values, out, first, |value, out| {
            match field.kind {
                Kind::BytesMap => {
                    out.push('"');
                    BASE64.encode_string(value, out);
                    out.push('"');
                }
                _ => push_string(out, value),
            }
            Ok(())
        })?,
    }
    Ok(())
}

/// A repeated field as a JSON array, each item written by `item`; none is `null` where Go
/// writes the member always (a slice without omitempty), and no member otherwise.
fn array<T>(
    field: &Field,
    items: &[T],
    out: &mut String,
    first: &mut bool,
    mut item: impl FnMut(&T, &mut String) -> Result<()>,
) -> Result<()> {
    if items.is_empty() {
        if field.presence == Presence::Always {
            member(out, first, field.json);
            out.push_str("null");
        }
        return Ok(());
    }
    member(out, first, field.json);
    out.push('[');
    for (i, v) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        item(v, out)?;
    }
    out.push(']');
    Ok(())
}

/// The value of a field of a kind the generated tables brought (the tables of the first kinds
/// need none of these).
fn generated_kind<'a>(
    field: &Field,
    message: &Message,
    values: &[Wire<'a>],
    out: &mut String,
    first: &mut bool,
) -> Result<()> {
    let presence = field.presence;
    let bytes = |w: &Wire<'a>| -> Result<&'a [u8]> {
        match w {
            Wire::Bytes(b) => Ok(b),
            other => Err(wire_error(message, field, other)),
        }
    };
    // The value of a field that is not repeated.
    let one = || single(message, field, values);
    match field.kind {
        Kind::Inline(inner) => {
            let body = one()?.as_ref().map(bytes).transpose()?.unwrap_or_default();
            members_at(body, inner, out, first)?;
        }
        Kind::Bytes => {
            let body = one()?.as_ref().map(bytes).transpose()?;
            let written = match presence {
                Presence::OmitEmpty => body.is_some_and(|b| !b.is_empty()),
                Presence::Always => true,
                Presence::Pointer | Presence::Nullable => body.is_some(),
            };
            if written {
                member(out, first, field.json);
                match body {
                    Some(b) => {
                        out.push('"');
                        BASE64.encode_string(b, out);
                        out.push('"');
                    }
                    None => out.push_str("null"),
                }
            }
        }
        Kind::Int32s | Kind::Int64s | Kind::Bools => {
            let mut numbers = Vec::new();
            for w in values {
                match w {
                    Wire::Varint(v) => numbers.push(*v),
                    Wire::Bytes(packed) => {
                        let mut rest = *packed;
                        while !rest.is_empty() {
                            let (v, n) = read_varint(rest)?
                                .ok_or(Error::Malformed("a packed varint cut short"))?;
                            numbers.push(v);
                            rest = &rest[n..];
                        }
                    }
                    other => return Err(wire_error(message, field, other)),
                }
            }
            array(field, &numbers, out, first, |v, out| {
                match field.kind {
                    Kind::Int32s => out.push_str(&(*v as i32).to_string()),
                    Kind::Int64s => out.push_str(&(*v as i64).to_string()),
                    // Go's decoder reads any non-zero varint as true.
                    _ => out.push_str(if *v != 0 { "true" } else { "false" }),
                }
                Ok(())
            })?;
        }
        Kind::Quantities => array(field, values, out, first, |w, out| quantity(bytes(w)?, out))?,
        Kind::TypeMeta(api_version, kind) => {
            if let Some(w) = values.first() {
                return Err(wire_error(message, field, w));
            }
            for (name, value) in [("kind", kind), ("apiVersion", api_version)] {
                member(out, first, name);
                push_string(out, value.as_bytes());
            }
        }
        Kind::Quantity | Kind::IntOrString | Kind::MicroTime | Kind::RawExtension => {
            let body = one()?.as_ref().map(bytes).transpose()?;
            let zero = body.is_none_or(<[u8]>::is_empty);
            let written = match presence {
                Presence::Always => true,
                Presence::OmitEmpty => !zero,
                Presence::Pointer | Presence::Nullable => body.is_some(),
            };
            if written {
                member(out, first, field.json);
                let body = body.unwrap_or_default();
                match field.kind {
                    Kind::Quantity => quantity(body, out)?,
                    Kind::IntOrString => int_or_string(body, out)?,
                    Kind::MicroTime if body.is_empty() => out.push_str("null"),
                    Kind::MicroTime => micro_time(body, out)?,
                    _ => raw_extension(body, out)?,
                }
            }
        }
        Kind::QuantityMap | Kind::TimeMap | Kind::StrsMap | Kind::MsgMap(_) => map(
            field,
            message,
            values,
            out,
            first,
            |value, out| match field.kind {
                Kind::QuantityMap => quantity(value, out),
                Kind::TimeMap if value.is_empty() => {
                    out.push_str("null");
                    Ok(())
                }
                Kind::TimeMap => time(value, out),
                Kind::MsgMap(inner) => {
                    out.push('{');
                    members(value, inner, out, true)?;
                    out.push('}');
                    Ok(())
                }
                _ => strings(value, out),
            },
        )?,
        _ => {
            return Err(Error::Value(format!(
                "{}.{}: not a generated kind",
                message.name, field.json
            )));
        }
    }
    Ok(())
}

/// A `resource.Quantity` (its string in field 1) as its JSON string; none is `"0"`.
fn quantity(buf: &[u8], out: &mut String) -> Result<()> {
    let mut text: &[u8] = b"0";
    for field in Fields::new(buf) {
        match field? {
            (1, Wire::Bytes(b)) if !b.is_empty() => text = b,
            (1, Wire::Bytes(_)) => {}
            _ => return Err(Error::Malformed("a Quantity with an unexpected field")),
        }
    }
    push_string(out, text);
    Ok(())
}

/// An `intstr.IntOrString`: the number when its type is 0, the string when it is 1.
fn int_or_string(buf: &[u8], out: &mut String) -> Result<()> {
    let (mut kind, mut int, mut text): (u64, u64, &[u8]) = (0, 0, b"");
    for field in Fields::new(buf) {
        match field? {
            (1, Wire::Varint(v)) => kind = v,
            (2, Wire::Varint(v)) => int = v,
            (3, Wire::Bytes(b)) => text = b,
            _ => return Err(Error::Malformed("an IntOrString with an unexpected field")),
        }
    }
    match kind {
        0 => out.push_str(&(int as i32).to_string()),
        1 => push_string(out, text),
        other => return Err(Error::Value(format!("an IntOrString of type {other}"))),
    }
    Ok(())
}

/// A `runtime.RawExtension` (raw JSON in field 1) as `encoding/json` embeds it; none is `null`.
fn raw_extension(buf: &[u8], out: &mut String) -> Result<()> {
    let mut raw = None;
    for field in Fields::new(buf) {
        match field? {
            (1, Wire::Bytes(b)) => raw = Some(b),
            _ => return Err(Error::Malformed("a RawExtension with an unexpected field")),
        }
    }
    match raw {
        Some(raw) => push_raw(out, raw),
        None => {
            out.push_str("null");
            Ok(())
        }
    }
}

/// The repeated strings of field 1 (a `map<string, []string>`'s value) as an array; none is
/// `null`, as Go's nil slice.
fn strings(buf: &[u8], out: &mut String) -> Result<()> {
    let mut items = Vec::new();
    for field in Fields::new(buf) {
        match field? {
            (1, Wire::Bytes(b)) => items.push(b),
            _ => return Err(Error::Malformed("a string list with an unexpected field")),
        }
    }
    if items.is_empty() {
        out.push_str("null");
        return Ok(());
    }
    out.push('[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_string(out, item);
    }
    out.push(']');
    Ok(())
}

/// A `Timestamp` as `metav1.MicroTime` writes it: UTC, six digits of fraction.
fn micro_time(buf: &[u8], out: &mut String) -> Result<()> {
    let (mut seconds, mut nanos) = (0i64, 0i64);
    for field in Fields::new(buf) {
        match field? {
            (1, Wire::Varint(v)) => seconds = v as i64,
            (2, Wire::Varint(v)) => nanos = i64::from(v as i32),
            _ => return Err(Error::Malformed("a Timestamp with an unexpected field")),
        }
    }
    if !(0..1_000_000_000).contains(&nanos) {
        return Err(Error::Value(format!("a time with {nanos} nanoseconds")));
    }
    let mut whole = String::new();
    time_seconds(seconds, &mut whole)?;
    // `"…:05Z"` → `"…:05.000000Z"`.
    out.push_str(&whole[..whole.len() - 2]);
    out.push_str(&format!(".{:06}Z\"", nanos / 1000));
    Ok(())
}

/// A map field (`values` are its entries) as a JSON object, keys sorted as Go writes them, a key
/// given twice keeping its last value; each value written by `value`. An empty map is left out,
/// or `null` when the field is always written.
fn map<'a>(
    field: &Field,
    message: &Message,
    values: &[Wire<'a>],
    out: &mut String,
    first: &mut bool,
    mut value: impl FnMut(&'a [u8], &mut String) -> Result<()>,
) -> Result<()> {
    let mut entries = Vec::with_capacity(values.len());
    for w in values {
        match w {
            Wire::Bytes(b) => entries.push(map_entry(b)?),
            other => return Err(wire_error(message, field, other)),
        }
    }
    entries.reverse();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    entries.dedup_by(|a, b| a.0 == b.0);
    if entries.is_empty() {
        if field.presence == Presence::Always {
            member(out, first, field.json);
            out.push_str("null");
        }
        return Ok(());
    }
    member(out, first, field.json);
    out.push('{');
    for (i, (key, entry)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_string(out, key);
        out.push(':');
        value(entry, out)?;
    }
    out.push('}');
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
    time_seconds(seconds, out)
}

/// `seconds` since the epoch as `metav1.Time` writes it: `"2006-01-02T15:04:05Z"`.
fn time_seconds(seconds: i64, out: &mut String) -> Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::f;

    static FLAGS: Message = Message {
        name: "Flags",
        fields: &[
            f(0, "", Kind::TypeMeta("v1", "Flags"), Presence::Always),
            f(1, "on", Kind::Bools, Presence::OmitEmpty),
            f(2, "always", Kind::Bools, Presence::Always),
        ],
    };

    fn render(buf: &[u8]) -> Result<String> {
        object(buf, &FLAGS, None)
    }

    #[test]
    fn repeated_bools_are_read_packed_and_unpacked() {
        const TYPE_META: &str = r#""kind":"Flags","apiVersion":"v1""#;
        // Field 1 unpacked: `08 01`, `08 00`; any non-zero varint is true, as Go reads it.
        assert_eq!(
            render(&[0x08, 0x01, 0x08, 0x00, 0x08, 0x02]).unwrap(),
            format!(r#"{{{TYPE_META},"on":[true,false,true],"always":null}}"#)
        );
        // Packed: `0a 03 01 00 01`; a packed run and a lone value of one field concatenate.
        assert_eq!(
            render(&[0x0a, 0x03, 0x01, 0x00, 0x01, 0x08, 0x00]).unwrap(),
            format!(r#"{{{TYPE_META},"on":[true,false,true,false],"always":null}}"#)
        );
        assert_eq!(
            render(&[0x12, 0x01, 0x00]).unwrap(),
            format!(r#"{{{TYPE_META},"always":[false]}}"#)
        );
        // A packed run cut short, and a bool as a fixed-width value, fail.
        assert!(render(&[0x0a, 0x02, 0x01]).is_err());
        assert!(render(&[0x0a, 0x01, 0x80]).is_err());
        assert!(render(&[0x0d, 0x01, 0x00, 0x00, 0x00]).is_err());
    }

    #[test]
    fn a_server_set_type_meta_is_written_first_and_never_read_from_the_wire() {
        assert_eq!(
            render(&[]).unwrap(),
            r#"{"kind":"Flags","apiVersion":"v1","always":null}"#
        );
        // Field 0 is no protobuf field: the wire reader refuses it before the table is asked.
        assert!(matches!(render(&[0x02, 0x00]), Err(Error::Malformed(_))));
    }
}
