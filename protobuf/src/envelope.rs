//! The envelopes the API server wraps protobuf in: `k8s\0` + `runtime.Unknown` around an object
//! or a list, and the watch stream's `WatchEvent` frames.

use crate::error::{Error, Result};
use crate::kinds;
use crate::render;
use crate::schema::{self, LIST_META, Message};
use crate::shape::{self as shaping, Rendered, Shape};
use crate::wire::{Fields, Wire, read_varint};

/// The four bytes every Kubernetes protobuf body starts with.
pub const MAGIC: &[u8] = b"k8s\0";

/// The largest watch frame read (the API server's objects stay under etcd's 1.5 MiB).
pub const MAX_FRAME: usize = 64 * 1024 * 1024;

/// A `runtime.Unknown`: the type it names and its raw bytes.
struct Unknown<'a> {
    api_version: &'a str,
    kind: &'a str,
    raw: &'a [u8],
}

fn text(bytes: &[u8]) -> Result<&str> {
    std::str::from_utf8(bytes).map_err(|_| Error::Malformed("a type name that is not UTF-8"))
}

fn type_meta(buf: &[u8]) -> Result<(&str, &str)> {
    let (mut api_version, mut kind) = ("", "");
    for field in Fields::new(buf) {
        match field? {
            (1, Wire::Bytes(b)) => api_version = text(b)?,
            (2, Wire::Bytes(b)) => kind = text(b)?,
            _ => {}
        }
    }
    Ok((api_version, kind))
}

fn unknown(body: &[u8]) -> Result<Unknown<'_>> {
    let envelope = body
        .strip_prefix(MAGIC)
        .ok_or(Error::Malformed("a body without the k8s protobuf prefix"))?;
    let mut found = Unknown {
        api_version: "",
        kind: "",
        raw: &[],
    };
    for field in Fields::new(envelope) {
        match field? {
            (1, Wire::Bytes(b)) => (found.api_version, found.kind) = type_meta(b)?,
            (2, Wire::Bytes(b)) => found.raw = b,
            (3, Wire::Bytes(b)) if !b.is_empty() => {
                return Err(Error::Malformed("a content-encoded protobuf body"));
            }
            _ => {}
        }
    }
    Ok(found)
}

/// The message of `(api_version, kind)`, or the error naming it.
fn schema_of(api_version: &str, kind: &str) -> Result<&'static Message> {
    if (api_version, kind) == ("v1", "Status") {
        return Ok(&schema::STATUS);
    }
    kinds::for_kind(api_version, kind).ok_or_else(|| Error::UnknownKind {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
    })
}

/// One object body (`k8s\0` + `runtime.Unknown`) as the JSON the API server would have sent,
/// `kind` and `apiVersion` first.
pub fn object_json(body: &[u8]) -> Result<String> {
    let unknown = unknown(body)?;
    let message = schema_of(unknown.api_version, unknown.kind)?;
    render::object(
        unknown.raw,
        message,
        Some((unknown.api_version, unknown.kind)),
    )
}

/// One frame of a protobuf watch (a `WatchEvent`: type, then the object in a `RawExtension`):
/// the event type and the object as the API server's JSON watch would have carried it.
pub fn watch_event(frame: &[u8]) -> Result<(String, String)> {
    let (event_type, object) = watch_parts(frame)?;
    Ok((event_type, object_json(object)?))
}

/// A `WatchEvent`'s type and its object's body.
fn watch_parts(frame: &[u8]) -> Result<(String, &[u8])> {
    let (mut event_type, mut object) = (None, None);
    for field in Fields::new(frame) {
        match field? {
            (1, Wire::Bytes(b)) => event_type = Some(text(b)?.to_owned()),
            (2, Wire::Bytes(extension)) => {
                for inner in Fields::new(extension) {
                    if let (1, Wire::Bytes(raw)) = inner? {
                        object = Some(raw);
                    }
                }
            }
            _ => {}
        }
    }
    let event_type = event_type.ok_or(Error::Malformed("a watch event without a type"))?;
    let object = object.ok_or(Error::Malformed("a watch event without an object"))?;
    Ok((event_type, object))
}

/// One frame of a protobuf watch as [`watch_event`] reads it, its object rendered in `shape`
/// with its metadata's places ([`Rendered`]).
pub fn watch_event_shaped(frame: &[u8], shape: &Shape) -> Result<(String, Rendered)> {
    let (event_type, object) = watch_parts(frame)?;
    let unknown = unknown(object)?;
    let message = schema_of(unknown.api_version, unknown.kind)?;
    let rendered = shaping::object(
        unknown.raw,
        message,
        Some((unknown.api_version, unknown.kind)),
        shape,
        &mut String::new(),
    )?;
    Ok((event_type, rendered))
}

/// The list's own metadata.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ListMeta {
    pub resource_version: String,
    /// Empty on the last page.
    pub continue_token: String,
}

enum State {
    Magic,
    /// Reading `runtime.Unknown`'s fields.
    Envelope,
    /// Inside its `raw` field (the list message): this many bytes of it are left.
    List(u64),
}

/// A protobuf LIST body (`k8s\0` + `runtime.Unknown` around a `<Kind>List`) read as its bytes
/// arrive: each item is rendered as JSON as soon as it is complete, so only the item being
/// read is buffered.
pub struct ListReader {
    api_version: String,
    kind: String,
    item: &'static Message,
    buf: Vec<u8>,
    pos: usize,
    state: State,
    typed: bool,
    meta: ListMeta,
    items: Vec<String>,
    /// Set by [`ListReader::shaped`]: items are rendered in this shape into `shaped`.
    shape: Option<Shape>,
    shaped: Vec<Rendered>,
    /// The buffer items are rendered in, reused from item to item.
    scratch: String,
}

impl ListReader {
    /// A reader of a list of `kind` items; fails when the crate has no schema for it.
    pub fn new(api_version: &str, kind: &str) -> Result<ListReader> {
        Ok(ListReader {
            item: schema_of(api_version, kind)?,
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
            buf: Vec::new(),
            pos: 0,
            state: State::Magic,
            typed: false,
            meta: ListMeta::default(),
            items: Vec::new(),
            shape: None,
            shaped: Vec::new(),
            scratch: String::new(),
        })
    }

    /// A reader whose items are rendered in `shape`, with their metadata's places, for
    /// [`ListReader::take_shaped`].
    pub fn shaped(api_version: &str, kind: &str, shape: Shape) -> Result<ListReader> {
        let mut reader = ListReader::new(api_version, kind)?;
        reader.shape = Some(shape);
        Ok(reader)
    }

    /// The items completed so far by a [`ListReader::shaped`] reader, in order.
    pub fn take_shaped(&mut self) -> std::vec::Drain<'_, Rendered> {
        self.shaped.drain(..)
    }

    /// Reads the next piece of the body.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<()> {
        if self.pos > 0 && self.pos * 2 >= self.buf.len() {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
        while self.step()? {}
        Ok(())
    }

    /// The items completed so far, as the JSON of a JSON list's items (no `kind` or
    /// `apiVersion`), in order.
    pub fn take_items(&mut self) -> std::vec::Drain<'_, String> {
        self.items.drain(..)
    }

    /// The list's metadata, once the whole body has been fed.
    pub fn finish(self) -> Result<ListMeta> {
        let complete = matches!(self.state, State::Envelope) && self.pos == self.buf.len();
        if !complete || !self.typed {
            return Err(Error::Malformed("the list body ended early"));
        }
        Ok(self.meta)
    }

    /// A field's header at `pos`: `(number, wire type, header length)`.
    fn header(&self) -> Result<Option<(u64, u64, usize)>> {
        let Some((key, n)) = read_varint(&self.buf[self.pos..])? else {
            return Ok(None);
        };
        Ok(Some((key >> 3, key & 7, n)))
    }

    /// A length-delimited field at `pos`: `(number, header length, payload length)`.
    fn delimited(&self) -> Result<Option<(u64, usize, usize)>> {
        let Some((number, wire, n)) = self.header()? else {
            return Ok(None);
        };
        if wire != 2 {
            return Err(Error::Malformed(
                "a list field that is not length-delimited",
            ));
        }
        let Some((len, m)) = read_varint(&self.buf[self.pos + n..])? else {
            return Ok(None);
        };
        let len = usize::try_from(len).map_err(|_| Error::Malformed("a length too large"))?;
        Ok(Some((number, n + m, len)))
    }

    /// Consumes one unit (the prefix, a field header, a whole field) if it is complete.
    fn step(&mut self) -> Result<bool> {
        let available = self.buf.len() - self.pos;
        match self.state {
            State::Magic => {
                if available < MAGIC.len() {
                    return Ok(false);
                }
                if &self.buf[self.pos..self.pos + MAGIC.len()] != MAGIC {
                    return Err(Error::Malformed("a body without the k8s protobuf prefix"));
                }
                self.pos += MAGIC.len();
                self.state = State::Envelope;
                Ok(true)
            }
            State::Envelope => {
                if available == 0 {
                    return Ok(false);
                }
                let Some((number, header, len)) = self.delimited()? else {
                    return Ok(false);
                };
                if number == 2 {
                    if !self.typed {
                        return Err(Error::Malformed("a list body without its type"));
                    }
                    self.pos += header;
                    self.state = State::List(len as u64);
                    return Ok(true);
                }
                if available < header + len {
                    return Ok(false);
                }
                let payload = &self.buf[self.pos + header..self.pos + header + len];
                match number {
                    1 => {
                        let (api_version, kind) = type_meta(payload)?;
                        let list_kind = format!("{}List", self.kind);
                        if api_version != self.api_version || kind != list_kind {
                            return Err(Error::UnknownKind {
                                api_version: api_version.to_owned(),
                                kind: kind.to_owned(),
                            });
                        }
                        self.typed = true;
                    }
                    3 if !payload.is_empty() => {
                        return Err(Error::Malformed("a content-encoded protobuf body"));
                    }
                    _ => {}
                }
                self.pos += header + len;
                Ok(true)
            }
            State::List(0) => {
                self.state = State::Envelope;
                Ok(true)
            }
            State::List(left) => {
                if available == 0 {
                    return Ok(false);
                }
                let Some((number, header, len)) = self.delimited()? else {
                    return Ok(false);
                };
                let whole = header + len;
                if whole as u64 > left {
                    return Err(Error::Malformed("a list field longer than the list"));
                }
                if available < whole {
                    return Ok(false);
                }
                let payload = &self.buf[self.pos + header..self.pos + whole];
                match number {
                    1 => self.meta = list_meta(payload)?,
                    2 => match &self.shape {
                        Some(shape) => self.shaped.push(shaping::object(
                            payload,
                            self.item,
                            None,
                            shape,
                            &mut self.scratch,
                        )?),
                        None => self.items.push(render::object(payload, self.item, None)?),
                    },
                    number => {
                        return Err(Error::UnknownField {
                            message: "List",
                            number: number as u32,
                        });
                    }
                }
                self.pos += whole;
                self.state = State::List(left - whole as u64);
                Ok(true)
            }
        }
    }
}

fn list_meta(buf: &[u8]) -> Result<ListMeta> {
    let mut meta = ListMeta::default();
    for field in Fields::new(buf) {
        match field? {
            (2, Wire::Bytes(b)) => meta.resource_version = text(b)?.to_owned(),
            (3, Wire::Bytes(b)) => meta.continue_token = text(b)?.to_owned(),
            (1 | 4, _) => {}
            (number, _) => {
                return Err(Error::UnknownField {
                    message: LIST_META.name,
                    number,
                });
            }
        }
    }
    Ok(meta)
}
