//! Objects rendered in the shape a cache keeps them (type meta added, `managedFields` left out),
//! with the places of the metadata a cache indexes recorded as the JSON is written, so the
//! cache builds its object without parsing the JSON again.

use std::ops::Range;

use crate::error::{Error, Result};
use crate::render::{member, members_with, single, value};
use crate::schema::{Field, Kind, Message, OBJECT_META, Presence};
use crate::wire::Wire;

/// How a cache shapes an object's JSON; the same edits the JSON path makes to the API
/// server's text.
#[derive(Debug, Clone, Default)]
pub struct Shape {
    /// Leave `metadata.managedFields` out.
    pub strip_managed_fields: bool,
    /// `(apiVersion, kind)` written first, `apiVersion` then `kind`, where the object does not
    /// carry them (a LIST's items do not), escaped as `serde_json` escapes strings.
    pub type_meta: Option<(String, String)>,
}

/// One object's JSON and where its metadata is in it.
#[derive(Debug, Clone, Default)]
pub struct Rendered {
    pub json: String,
    pub meta: MetaSpans,
}

/// Byte ranges into [`Rendered::json`]: a string's range includes its quotes (its text may
/// hold JSON escapes), a number's is its digits. `None`: the member was not written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetaSpans {
    pub name: Option<Range<usize>>,
    pub namespace: Option<Range<usize>>,
    pub uid: Option<Range<usize>>,
    pub resource_version: Option<Range<usize>>,
    pub generation: Option<Range<usize>>,
    /// `(key, value)` in the order written (Go's: sorted by key bytes).
    pub labels: Vec<(Range<usize>, Range<usize>)>,
    pub annotations: Vec<(Range<usize>, Range<usize>)>,
    pub owner_references: Vec<OwnerSpans>,
}

/// One `metadata.ownerReferences[]` entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnerSpans {
    pub api_version: Option<Range<usize>>,
    pub kind: Option<Range<usize>>,
    pub name: Option<Range<usize>>,
    pub uid: Option<Range<usize>>,
    /// `controller: true`.
    pub controller: bool,
}

/// Renders `buf`, a message of `message` whose Go value carried `go_type_meta`
/// (`(apiVersion, kind)`, written as the API server writes them: `kind` first, empty ones left
/// out), in `shape`. The text is written in `scratch` (reused from object to object) and
/// returned in an allocation of exactly its length: a cache keeps it for the object's life, and
/// a rendering buffer shrunk in place would leave its freed tail as a hole beside every cached
/// object (the allocator fills some of those holes, by chance; BENCHMARKS.md, "gzip's memory").
pub(crate) fn object(
    buf: &[u8],
    message: &Message,
    go_type_meta: Option<(&str, &str)>,
    shape: &Shape,
    scratch: &mut String,
) -> Result<Rendered> {
    scratch.clear();
    scratch.reserve(buf.len() + buf.len() / 8 + 64);
    let json = scratch;
    json.push('{');
    let mut first = true;
    let (go_api_version, go_kind) = go_type_meta.unwrap_or_default();
    if let Some((api_version, kind)) = &shape.type_meta {
        for (name, carried, value) in [
            ("apiVersion", go_api_version, api_version),
            ("kind", go_kind, kind),
        ] {
            if carried.is_empty() {
                member(json, &mut first, name);
                let quoted = serde_json::to_string(value)
                    .map_err(|e| Error::Value(format!("a type name: {e}")))?;
                json.push_str(&quoted);
            }
        }
    }
    for (name, value) in [("kind", go_kind), ("apiVersion", go_api_version)] {
        if !value.is_empty() {
            member(json, &mut first, name);
            crate::gojson::push_string(json, value.as_bytes());
        }
    }
    let mut meta = MetaSpans::default();
    members_with(
        buf,
        message,
        json,
        &mut first,
        |field, message, values, out, first| match field.kind {
            Kind::Msg(inner) if field.json == "metadata" && std::ptr::eq(inner, &OBJECT_META) => {
                object_meta(field, message, values, out, first, shape, &mut meta)
            }
            _ => value(field, message, values, out, first),
        },
    )?;
    json.push('}');
    Ok(Rendered {
        json: json.as_str().to_owned(),
        meta,
    })
}

/// The `metadata` member, its spans recorded in `meta`.
fn object_meta(
    field: &Field,
    message: &Message,
    values: &[Wire<'_>],
    out: &mut String,
    first: &mut bool,
    shape: &Shape,
    meta: &mut MetaSpans,
) -> Result<()> {
    let body = match single(message, field, values)? {
        Some(Wire::Bytes(b)) => Some(b),
        Some(other) => {
            return Err(Error::WireType {
                message: message.name,
                field: field.json,
                wire: other.number(),
            });
        }
        None => None,
    };
    if body.is_none() && field.presence != Presence::Always {
        return Ok(());
    }
    member(out, first, field.json);
    out.push('{');
    members_with(
        body.unwrap_or_default(),
        &OBJECT_META,
        out,
        &mut true,
        |field, message, values, out, first| {
            if shape.strip_managed_fields && field.json == "managedFields" {
                return Ok(());
            }
            let before = out.len();
            let comma = usize::from(!*first);
            value(field, message, values, out, first)?;
            if out.len() == before {
                return Ok(());
            }
            // `member` wrote `,"<name>":` (the comma unless first) before the value.
            let at = before + comma + field.json.len() + 3;
            let range = at..out.len();
            match field.json {
                "name" => meta.name = Some(range),
                "namespace" => meta.namespace = Some(range),
                "uid" => meta.uid = Some(range),
                "resourceVersion" => meta.resource_version = Some(range),
                "generation" => meta.generation = Some(range),
                "labels" => meta.labels = pairs(&objects(out, range)),
                "annotations" => meta.annotations = pairs(&objects(out, range)),
                "ownerReferences" => {
                    meta.owner_references = objects(out, range)
                        .iter()
                        .map(|members| owner(out, members))
                        .collect();
                }
                _ => {}
            }
            Ok(())
        },
    )?;
    out.push('}');
    Ok(())
}

/// The members of each flat object in `text[range]` (an object of scalars, or an array of
/// such objects, as this crate writes them: no whitespace, no nesting below that): each
/// member's name and value ranges.
fn objects(text: &str, range: Range<usize>) -> Vec<Vec<(Range<usize>, Range<usize>)>> {
    let b = text.as_bytes();
    let mut found: Vec<Vec<(Range<usize>, Range<usize>)>> = Vec::new();
    let mut name: Option<Range<usize>> = None;
    let mut i = range.start;
    while i < range.end {
        match b[i] {
            b'{' => {
                found.push(Vec::new());
                i += 1;
            }
            b'}' | b'[' | b']' | b',' | b':' => i += 1,
            start_byte => {
                let start = i;
                if start_byte == b'"' {
                    i += 1;
                    while i < range.end && b[i] != b'"' {
                        i += if b[i] == b'\\' { 2 } else { 1 };
                    }
                    i += 1;
                } else {
                    while i < range.end && !matches!(b[i], b',' | b'}' | b']') {
                        i += 1;
                    }
                }
                let scalar = start..i.min(range.end);
                match (name.take(), found.last_mut()) {
                    (None, _) => name = Some(scalar),
                    (Some(key), Some(members)) => members.push((key, scalar)),
                    (Some(_), None) => {}
                }
            }
        }
    }
    found
}

fn pairs(objects: &[Vec<(Range<usize>, Range<usize>)>]) -> Vec<(Range<usize>, Range<usize>)> {
    objects.first().cloned().unwrap_or_default()
}

fn owner(text: &str, members: &[(Range<usize>, Range<usize>)]) -> OwnerSpans {
    let mut spans = OwnerSpans::default();
    for (name, value) in members {
        let value = value.clone();
        match &text[name.clone()] {
            "\"apiVersion\"" => spans.api_version = Some(value),
            "\"kind\"" => spans.kind = Some(value),
            "\"name\"" => spans.name = Some(value),
            "\"uid\"" => spans.uid = Some(value),
            "\"controller\"" => spans.controller = &text[value] == "true",
            _ => {}
        }
    }
    spans
}
