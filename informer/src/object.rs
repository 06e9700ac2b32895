//! The compact cached object: the API server's JSON plus the parsed metadata indexes need.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use serde::Deserialize;
use serde::de::{DeserializeOwned, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::error::{Error, Result};

/// A cached object shared by every reader; never mutated once built.
pub type ObjectRef = Arc<Object>;

/// An immutable Kubernetes object as the cache holds it.
///
/// It keeps the API server's JSON text (what plugins receive, serialised once) and, next to it,
/// only the metadata that keys and indexes need: positions into the JSON rather than copies, so
/// an object costs little more than its JSON.
///
/// # Memory usage
/// One allocation for the JSON, one small one for the key (plus the rare string that had JSON
/// escapes), one for the metadata positions, 64 bytes of header. With `managedFields` stripped
/// a typical object takes less memory than the JSON the API server sent.
pub struct Object {
    json: Box<str>,
    /// `key` first (`namespace/name` or `name`), then unescaped copies of escaped strings.
    arena: Box<str>,
    /// `[uid, resourceVersion, generation, (label key, value)*, (annotation key, value)*,
    /// owner uid*]`, labels and annotations sorted by key, then, for an object with a
    /// controlling owner, `[apiVersion, kind, name, uid]` of that owner reference.
    spans: Box<[Span]>,
    /// The key's length; the `CONTROLLED` bit says the spans end with the controlling owner.
    key_len: u32,
    /// Length of the namespace prefix of the key, or `NO_NAMESPACE`.
    ns_len: u32,
    n_labels: u32,
    n_annotations: u32,
}

const NO_NAMESPACE: u32 = u32::MAX;
const IN_ARENA: u32 = 1 << 31;
/// In `key_len`: free, as a key is shorter than the JSON, which is shorter than `IN_ARENA`.
const CONTROLLED: u32 = 1 << 31;
/// The spans before the labels: uid, resourceVersion, generation.
const FIXED: usize = 3;
/// The spans of the controlling owner reference: apiVersion, kind, name, uid.
const CONTROLLER_SPANS: usize = 4;

/// An owner reference of an object (`metadata.ownerReferences[]`), borrowed from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnerReference<'a> {
    /// `apps/v1`, or `v1` for the core group.
    pub api_version: &'a str,
    pub kind: &'a str,
    /// The owner's name (in the object's namespace, or cluster-scoped).
    pub name: &'a str,
    /// `""` when absent.
    pub uid: &'a str,
}

/// A string's place: in `json`, or (high bit of `start` set) in `arena`.
#[derive(Clone, Copy, Debug)]
struct Span {
    start: u32,
    len: u32,
}

impl Span {
    const EMPTY: Span = Span { start: 0, len: 0 };
}

/// How [`Object::parse`] shapes the stored JSON.
#[derive(Debug, Clone, Default)]
pub struct ParseOptions {
    /// Drop `metadata.managedFields` (server-side apply bookkeeping, often a fifth of an object
    /// and never needed by controllers). The informer's default transform.
    pub strip_managed_fields: bool,
    /// `(apiVersion, kind)` written into objects that lack them: items of a LIST response do,
    /// and plugins should see the same JSON whether an object came from a list or a watch.
    pub type_meta: Option<(String, String)>,
}

impl Object {
    /// Builds an object from the API server's JSON, keeping the text exactly as given.
    pub fn from_json(raw: &str) -> Result<Object> {
        Object::parse(raw, &ParseOptions::default())
    }

    /// Builds an object from JSON, shaping the stored text as `options` say.
    pub fn parse(raw: &str, options: &ParseOptions) -> Result<Object> {
        if raw.len() >= IN_ARENA as usize {
            return Err(Error::TooLarge(raw.len()));
        }
        let body_start = match raw.find(|c: char| !c.is_ascii_whitespace()) {
            Some(i) if raw.as_bytes()[i] == b'{' => i + 1,
            _ => {
                return Err(Error::InvalidObject(serde::de::Error::custom(
                    "expected a JSON object",
                )));
            }
        };
        let top: RawTop<'_> = serde_json::from_str(raw).map_err(Error::InvalidObject)?;
        let meta = top.metadata.unwrap_or_default();
        let name = meta.name.as_ref().map(|s| s.0.as_ref()).unwrap_or("");
        if name.is_empty() {
            return Err(Error::MissingName);
        }
        let namespace = meta
            .namespace
            .as_ref()
            .map(|s| s.0.as_ref())
            .filter(|ns| !ns.is_empty());

        // The edits to the text: type meta inserted after the opening brace, managedFields cut.
        let mut insert = String::new();
        if let Some((api_version, kind)) = &options.type_meta {
            let mut parts = Vec::new();
            if top.api_version.is_none() {
                parts.push(format!("\"apiVersion\":{}", json_string(api_version)));
            }
            if top.kind.is_none() {
                parts.push(format!("\"kind\":{}", json_string(kind)));
            }
            if !parts.is_empty() {
                insert = parts.join(",");
                let rest = raw[body_start..].trim_start();
                if !rest.starts_with('}') {
                    insert.push(',');
                }
            }
        }
        let cut = match (options.strip_managed_fields, meta.managed_fields) {
            (true, Some(value)) => managed_fields_cut(raw, value),
            _ => None,
        };
        let (cut_start, cut_end) = cut.unwrap_or((raw.len(), raw.len()));
        let mut json = String::with_capacity(raw.len() + insert.len() - (cut_end - cut_start));
        json.push_str(&raw[..body_start]);
        json.push_str(&insert);
        json.push_str(&raw[body_start..cut_start]);
        json.push_str(&raw[cut_end..]);
        // Where a position of `raw` lands in `json`.
        let shift = |pos: usize| -> usize {
            let mut moved = pos;
            if pos >= body_start {
                moved += insert.len();
            }
            if pos >= cut_end {
                moved -= cut_end - cut_start;
            }
            moved
        };

        let mut arena = String::new();
        if let Some(ns) = namespace {
            arena.push_str(ns);
            arena.push('/');
        }
        arena.push_str(name);
        let key_len = arena.len() as u32;
        let ns_len = namespace.map_or(NO_NAMESPACE, |ns| ns.len() as u32);

        let mut place = |s: &Str<'_>| -> Span {
            match &s.0 {
                Cow::Borrowed(b) => {
                    let offset = b.as_ptr() as usize - raw.as_ptr() as usize;
                    Span {
                        start: shift(offset) as u32,
                        len: b.len() as u32,
                    }
                }
                Cow::Owned(o) => {
                    let start = arena.len() as u32 | IN_ARENA;
                    arena.push_str(o);
                    Span {
                        start,
                        len: o.len() as u32,
                    }
                }
            }
        };
        let labels = meta.labels.map(|p| p.0).unwrap_or_default();
        let annotations = meta.annotations.map(|p| p.0).unwrap_or_default();
        let owners = meta.owner_references.unwrap_or_default();
        // client-go's `GetControllerOf`: the first reference with `controller: true`.
        let controller = owners
            .iter()
            .find(|o| o.controller.is_some_and(|c| c.get() == "true"));
        let mut spans = Vec::with_capacity(
            FIXED
                + 2 * (labels.len() + annotations.len())
                + owners.len()
                + controller.map_or(0, |_| CONTROLLER_SPANS),
        );
        spans.push(meta.uid.as_ref().map_or(Span::EMPTY, &mut place));
        spans.push(
            meta.resource_version
                .as_ref()
                .map_or(Span::EMPTY, &mut place),
        );
        spans.push(match meta.generation {
            Some(value) if integer(value.get()).is_some() => {
                let offset = value.get().as_ptr() as usize - raw.as_ptr() as usize;
                Span {
                    start: shift(offset) as u32,
                    len: value.get().len() as u32,
                }
            }
            _ => Span::EMPTY,
        });
        for (k, v) in &labels {
            spans.push(place(k));
            spans.push(place(v));
        }
        for (k, v) in &annotations {
            spans.push(place(k));
            spans.push(place(v));
        }
        for owner in &owners {
            if let Some(uid) = &owner.uid {
                spans.push(place(uid));
            }
        }
        if let Some(owner) = controller {
            for field in [&owner.api_version, &owner.kind, &owner.name, &owner.uid] {
                spans.push(field.as_ref().map_or(Span::EMPTY, &mut place));
            }
        }
        Ok(Object::assemble(
            json,
            arena,
            spans,
            key_len | controller.map_or(0, |_| CONTROLLED),
            ns_len,
            labels.len(),
            annotations.len(),
        ))
    }

    /// Builds an object from JSON rendered from protobuf already in the cache's shape, with
    /// its metadata's places recorded as it was written: the object [`Object::parse`] builds
    /// from the same text with the same shaping, without reading the text again.
    pub fn from_rendered(rendered: kubewasm_protobuf::Rendered) -> Result<Object> {
        let kubewasm_protobuf::Rendered { json, meta } = rendered;
        if json.len() >= IN_ARENA as usize {
            return Err(Error::TooLarge(json.len()));
        }
        let mut arena = String::new();
        let mut spans = Vec::with_capacity(
            FIXED
                + 2 * (meta.labels.len() + meta.annotations.len())
                + meta.owner_references.len()
                + CONTROLLER_SPANS,
        );
        // The key first: the namespace (when not empty), then the name.
        let key_part = |range: &Option<std::ops::Range<usize>>| -> Result<Option<String>> {
            range
                .as_ref()
                .map(|r| unquote(&json, r.clone()).map(Cow::into_owned))
                .transpose()
        };
        let name = key_part(&meta.name)?.filter(|n| !n.is_empty());
        let Some(name) = name else {
            return Err(Error::MissingName);
        };
        let namespace = key_part(&meta.namespace)?.filter(|ns| !ns.is_empty());
        if let Some(ns) = &namespace {
            arena.push_str(ns);
            arena.push('/');
        }
        arena.push_str(&name);
        let key_len = arena.len() as u32;
        let ns_len = namespace.map_or(NO_NAMESPACE, |ns| ns.len() as u32);

        let mut place = |range: &std::ops::Range<usize>| -> Result<Span> {
            Ok(match unquote(&json, range.clone())? {
                Cow::Borrowed(_) => Span {
                    start: range.start as u32 + 1,
                    len: (range.len() - 2) as u32,
                },
                Cow::Owned(text) => {
                    let start = arena.len() as u32 | IN_ARENA;
                    arena.push_str(&text);
                    Span {
                        start,
                        len: text.len() as u32,
                    }
                }
            })
        };
        for string in [&meta.uid, &meta.resource_version] {
            spans.push(match string {
                Some(range) => place(range)?,
                None => Span::EMPTY,
            });
        }
        spans.push(match &meta.generation {
            Some(range) if integer(&json[range.clone()]).is_some() => Span {
                start: range.start as u32,
                len: range.len() as u32,
            },
            _ => Span::EMPTY,
        });
        for (k, v) in meta.labels.iter().chain(&meta.annotations) {
            spans.push(place(k)?);
            spans.push(place(v)?);
        }
        for owner in &meta.owner_references {
            if let Some(uid) = &owner.uid {
                spans.push(place(uid)?);
            }
        }
        // client-go's `GetControllerOf`: the first reference with `controller: true`.
        let controller = meta.owner_references.iter().find(|o| o.controller);
        if let Some(owner) = controller {
            for field in [&owner.api_version, &owner.kind, &owner.name, &owner.uid] {
                spans.push(match field {
                    Some(range) => place(range)?,
                    None => Span::EMPTY,
                });
            }
        }
        Ok(Object::assemble(
            json,
            arena,
            spans,
            key_len | controller.map_or(0, |_| CONTROLLED),
            ns_len,
            meta.labels.len(),
            meta.annotations.len(),
        ))
    }

    /// The object from its text, arena and spans (`[fixed, (label key, value)*, (annotation
    /// key, value)*, ...]` in the order met), with the label and annotation pairs sorted by key:
    /// the last step of [`Object::parse`] and [`Object::from_rendered`].
    fn assemble(
        json: String,
        arena: String,
        mut spans: Vec<Span>,
        key_len: u32,
        ns_len: u32,
        n_labels: usize,
        n_annotations: usize,
    ) -> Object {
        let mut object = Object {
            json: json.into_boxed_str(),
            arena: arena.into_boxed_str(),
            spans: Box::default(),
            key_len,
            ns_len,
            n_labels: n_labels as u32,
            n_annotations: n_annotations as u32,
        };
        sort_pairs(&object, &mut spans[FIXED..FIXED + 2 * n_labels]);
        let a_start = FIXED + 2 * n_labels;
        sort_pairs(&object, &mut spans[a_start..a_start + 2 * n_annotations]);
        object.spans = spans.into_boxed_slice();
        object
    }

    /// The stored JSON: what plugins receive.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// The store key: `namespace/name`, or `name` for cluster-scoped objects.
    pub fn key(&self) -> &str {
        &self.arena[..(self.key_len & !CONTROLLED) as usize]
    }

    /// `metadata.namespace`, if the object has one.
    pub fn namespace(&self) -> Option<&str> {
        (self.ns_len != NO_NAMESPACE).then(|| &self.arena[..self.ns_len as usize])
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        match self.ns_len {
            NO_NAMESPACE => self.key(),
            n => &self.key()[n as usize + 1..],
        }
    }

    /// `metadata.uid`, or `""` when absent.
    pub fn uid(&self) -> &str {
        self.text(self.spans[0])
    }

    /// `metadata.resourceVersion`, or `""` when absent.
    pub fn resource_version(&self) -> &str {
        self.text(self.spans[1])
    }

    /// `metadata.generation`; `None` when absent (or not an integer).
    pub fn generation(&self) -> Option<i64> {
        integer(self.text(self.spans[2]))
    }

    /// The value of label `key`.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.lookup(self.label_spans(), key)
    }

    /// The value of annotation `key`.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.lookup(self.annotation_spans(), key)
    }

    /// Every label as `(key, value)`, sorted by key.
    pub fn labels(&self) -> impl Iterator<Item = (&str, &str)> {
        self.label_spans()
            .chunks_exact(2)
            .map(|p| (self.text(p[0]), self.text(p[1])))
    }

    /// Every annotation as `(key, value)`, sorted by key.
    pub fn annotations(&self) -> impl Iterator<Item = (&str, &str)> {
        self.annotation_spans()
            .chunks_exact(2)
            .map(|p| (self.text(p[0]), self.text(p[1])))
    }

    /// The UIDs of `metadata.ownerReferences`, in order.
    pub fn owner_uids(&self) -> impl Iterator<Item = &str> {
        let start = FIXED + 2 * (self.n_labels + self.n_annotations) as usize;
        let end = self.spans.len() - self.controller_spans().len();
        self.spans[start..end].iter().map(|s| self.text(*s))
    }

    /// The owner reference with `controller: true` (the first, as client-go's
    /// `metav1.GetControllerOf`): the object whose controller manages this one.
    pub fn controller(&self) -> Option<OwnerReference<'_>> {
        match self.controller_spans() {
            [api_version, kind, name, uid] => Some(OwnerReference {
                api_version: self.text(*api_version),
                kind: self.text(*kind),
                name: self.text(*name),
                uid: self.text(*uid),
            }),
            _ => None,
        }
    }

    /// Deserializes the JSON into a typed value (a k8s-openapi type, `serde_json::Value`, ...).
    pub fn deserialize<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_str(&self.json).map_err(Error::Deserialize)
    }

    /// The value at a dotted field path such as `spec.nodeName`: strings as they are, numbers
    /// and booleans as their JSON text; `None` when absent, null, an object or an array.
    pub fn field(&self, path: &str) -> Option<String> {
        let mut current: &RawValue = serde_json::from_str(&self.json).ok()?;
        for segment in path.split('.') {
            let members: Members<'_> = serde_json::from_str(current.get()).ok()?;
            current = members
                .0
                .into_iter()
                .find(|(k, _)| k.0 == segment)
                .map(|(_, v)| v)?;
        }
        let text = current.get();
        match text.as_bytes().first()? {
            b'"' => serde_json::from_str::<String>(text).ok(),
            b'{' | b'[' | b'n' => None,
            _ => Some(text.to_string()),
        }
    }

    /// Every value a dotted field path reaches, as a `field` index files the object: a string,
    /// number or bool as its text (as [`Object::field`]), a list of those as each element, and
    /// a path through a list of objects as each element's value (`spec.containers.image` is
    /// every container's image). Objects and nulls give nothing; duplicates are dropped.
    pub fn field_values(&self, path: &str) -> Vec<String> {
        let mut values = Vec::new();
        if let Ok(root) = serde_json::from_str::<&RawValue>(&self.json) {
            let segments: Vec<&str> = path.split('.').collect();
            collect_field_values(root, &segments, &mut values);
        }
        let mut seen = std::collections::HashSet::new();
        values.retain(|v| seen.insert(v.clone()));
        values
    }

    /// Bytes of heap and header this object holds (for memory accounting and metrics).
    pub fn heap_size(&self) -> usize {
        std::mem::size_of::<Object>()
            + self.json.len()
            + self.arena.len()
            + self.spans.len() * std::mem::size_of::<Span>()
    }

    fn label_spans(&self) -> &[Span] {
        &self.spans[FIXED..FIXED + 2 * self.n_labels as usize]
    }

    fn annotation_spans(&self) -> &[Span] {
        let start = FIXED + 2 * self.n_labels as usize;
        &self.spans[start..start + 2 * self.n_annotations as usize]
    }

    fn controller_spans(&self) -> &[Span] {
        if self.key_len & CONTROLLED == 0 {
            return &[];
        }
        &self.spans[self.spans.len() - CONTROLLER_SPANS..]
    }

    fn lookup(&self, pairs: &[Span], key: &str) -> Option<&str> {
        let n = pairs.len() / 2;
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.text(pairs[2 * mid]).cmp(key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(self.text(pairs[2 * mid + 1])),
            }
        }
        None
    }

    fn text(&self, span: Span) -> &str {
        if span.start & IN_ARENA != 0 {
            let start = (span.start & !IN_ARENA) as usize;
            &self.arena[start..start + span.len as usize]
        } else {
            let start = span.start as usize;
            &self.json[start..start + span.len as usize]
        }
    }
}

impl fmt::Debug for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Object")
            .field("key", &self.key())
            .field("resource_version", &self.resource_version())
            .field("json_len", &self.json.len())
            .finish()
    }
}

impl PartialEq for Object {
    fn eq(&self, other: &Self) -> bool {
        self.json == other.json
    }
}

impl Eq for Object {}

fn sort_pairs(object: &Object, pairs: &mut [Span]) {
    let mut as_pairs: Vec<(Span, Span)> = pairs.chunks_exact(2).map(|p| (p[0], p[1])).collect();
    if as_pairs.is_sorted_by(|a, b| object.text(a.0) <= object.text(b.0)) {
        return;
    }
    as_pairs.sort_by(|a, b| object.text(a.0).cmp(object.text(b.0)));
    for (i, (k, v)) in as_pairs.into_iter().enumerate() {
        pairs[2 * i] = k;
        pairs[2 * i + 1] = v;
    }
}

/// The text of the JSON string at `json[range]` (quotes included): borrowed when it has no
/// escapes, as `serde_json` borrows it.
fn unquote(json: &str, range: std::ops::Range<usize>) -> Result<Cow<'_, str>> {
    let quoted = json.get(range).ok_or_else(|| {
        Error::InvalidObject(serde::de::Error::custom(
            "a metadata place outside the object",
        ))
    })?;
    let inner = quoted
        .strip_prefix('"')
        .and_then(|q| q.strip_suffix('"'))
        .filter(|_| quoted.len() >= 2)
        .ok_or_else(|| {
            Error::InvalidObject(serde::de::Error::custom(
                "a metadata place that is not a string",
            ))
        })?;
    if !inner.contains('\\') {
        return Ok(Cow::Borrowed(inner));
    }
    serde_json::from_str::<String>(quoted)
        .map(Cow::Owned)
        .map_err(Error::InvalidObject)
}

/// A JSON integer's text as an `i64`; `None` for anything else.
fn integer(text: &str) -> Option<i64> {
    text.parse().ok()
}

fn json_string(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

fn skip_ws_back(b: &[u8], mut i: usize) -> usize {
    while i > 0 && b[i - 1].is_ascii_whitespace() {
        i -= 1;
    }
    i
}

/// The byte range to remove so that the `managedFields` member whose value is `value` disappears
/// from `raw` (its key, colon, value and one separating comma). `None` if the text around it is
/// not what a plain member looks like, in which case nothing is stripped.
fn managed_fields_cut(raw: &str, value: &RawValue) -> Option<(usize, usize)> {
    const KEY: &[u8] = b"\"managedFields\"";
    let b = raw.as_bytes();
    let value_start = value.get().as_ptr() as usize - raw.as_ptr() as usize;
    let value_end = value_start + value.get().len();
    let mut i = skip_ws_back(b, value_start);
    if i == 0 || b[i - 1] != b':' {
        return None;
    }
    i = skip_ws_back(b, i - 1);
    if i < KEY.len() || &b[i - KEY.len()..i] != KEY {
        return None;
    }
    let key_start = i - KEY.len();
    let before = skip_ws_back(b, key_start);
    match b.get(before.wrapping_sub(1)) {
        Some(b',') => Some((before - 1, value_end)),
        Some(b'{') => {
            let mut after = value_end;
            while after < b.len() && b[after].is_ascii_whitespace() {
                after += 1;
            }
            if b.get(after) == Some(&b',') {
                Some((key_start, after + 1))
            } else {
                Some((key_start, value_end))
            }
        }
        _ => None,
    }
}

/// Appends the values `path` reaches from `value` (see [`Object::field_values`]); a list met on
/// the way, or at the end, is walked element by element.
fn collect_field_values(value: &RawValue, path: &[&str], out: &mut Vec<String>) {
    let text = value.get();
    match text.as_bytes().first() {
        Some(b'[') => {
            if let Ok(elements) = serde_json::from_str::<Vec<&RawValue>>(text) {
                for element in elements {
                    collect_field_values(element, path, out);
                }
            }
        }
        Some(b'{') => {
            let Some((segment, rest)) = path.split_first() else {
                return;
            };
            if let Ok(members) = serde_json::from_str::<Members<'_>>(text)
                && let Some((_, next)) = members.0.into_iter().find(|(k, _)| k.0 == *segment)
            {
                collect_field_values(next, rest, out);
            }
        }
        Some(b'"') if path.is_empty() => out.extend(serde_json::from_str::<String>(text).ok()),
        Some(b'n') | None => {}
        Some(_) if path.is_empty() => out.push(text.to_string()),
        Some(_) => {}
    }
}

#[cfg(test)]
impl ParseOptions {
    /// What a ConfigMap informer parses with: managedFields stripped, `v1` / `ConfigMap` added.
    pub(crate) fn config_maps() -> ParseOptions {
        ParseOptions {
            strip_managed_fields: true,
            type_meta: Some(("v1".into(), "ConfigMap".into())),
        }
    }
}

/// A JSON string that borrows from the input when it has no escapes.
struct Str<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StrVisitor<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for StrVisitor<'a> {
            type Value = Str<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Str<'a>, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Str<'a>, E> {
                Ok(Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Str<'a>, E> {
                Ok(Str(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(StrVisitor(PhantomData))
    }
}

/// A JSON object of strings as `(key, value)` pairs in text order; null values are skipped.
struct Pairs<'a>(Vec<(Str<'a>, Str<'a>)>);

impl<'de: 'a, 'a> Deserialize<'de> for Pairs<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PairsVisitor<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for PairsVisitor<'a> {
            type Value = Pairs<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of strings")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Pairs<'a>, A::Error> {
                let mut pairs = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some((k, v)) = map.next_entry::<Str<'a>, Option<Str<'a>>>()? {
                    if let Some(v) = v {
                        pairs.push((k, v));
                    }
                }
                Ok(Pairs(pairs))
            }
        }
        deserializer.deserialize_map(PairsVisitor(PhantomData))
    }
}

/// A JSON object's members as `(key, raw value)` in text order.
struct Members<'a>(Vec<(Str<'a>, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for Members<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MembersVisitor<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for MembersVisitor<'a> {
            type Value = Members<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'a>, A::Error> {
                let mut members = Vec::new();
                while let Some(entry) = map.next_entry::<Str<'a>, &'a RawValue>()? {
                    members.push(entry);
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(MembersVisitor(PhantomData))
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawTop<'a> {
    #[serde(borrow, default)]
    metadata: Option<RawMeta<'a>>,
    #[serde(default)]
    api_version: Option<IgnoredAny>,
    #[serde(default)]
    kind: Option<IgnoredAny>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawMeta<'a> {
    #[serde(borrow, default)]
    name: Option<Str<'a>>,
    #[serde(borrow, default)]
    namespace: Option<Str<'a>>,
    #[serde(borrow, default)]
    uid: Option<Str<'a>>,
    #[serde(borrow, default)]
    resource_version: Option<Str<'a>>,
    #[serde(borrow, default)]
    generation: Option<&'a RawValue>,
    #[serde(borrow, default)]
    labels: Option<Pairs<'a>>,
    #[serde(borrow, default)]
    annotations: Option<Pairs<'a>>,
    #[serde(borrow, default)]
    owner_references: Option<Vec<RawOwner<'a>>>,
    #[serde(borrow, default)]
    managed_fields: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawOwner<'a> {
    #[serde(borrow, default)]
    api_version: Option<Str<'a>>,
    #[serde(borrow, default)]
    kind: Option<Str<'a>>,
    #[serde(borrow, default)]
    name: Option<Str<'a>>,
    #[serde(borrow, default)]
    uid: Option<Str<'a>>,
    /// Read as text: only `true` counts, and no other value fails the object.
    #[serde(borrow, default)]
    controller: Option<&'a RawValue>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const CM: &str = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm1","namespace":"default","uid":"u-1","resourceVersion":"42","labels":{"b":"2","a":"1"},"annotations":{"note":"x\"y"},"ownerReferences":[{"uid":"o1","name":"p"},{"uid":"o2"}],"managedFields":[{"manager":"kubectl","operation":"Apply"}]},"data":{"k":"v"}}"#;

    #[test]
    fn parses_key_and_metadata() {
        let o = Object::from_json(CM).unwrap();
        assert_eq!(o.key(), "default/cm1");
        assert_eq!(o.namespace(), Some("default"));
        assert_eq!(o.name(), "cm1");
        assert_eq!(o.uid(), "u-1");
        assert_eq!(o.resource_version(), "42");
        assert_eq!(o.label("a"), Some("1"));
        assert_eq!(o.label("b"), Some("2"));
        assert_eq!(o.label("c"), None);
        assert_eq!(o.annotation("note"), Some("x\"y"));
        assert_eq!(o.owner_uids().collect::<Vec<_>>(), vec!["o1", "o2"]);
        assert_eq!(o.labels().collect::<Vec<_>>(), vec![("a", "1"), ("b", "2")]);
        assert_eq!(o.json(), CM);
    }

    #[test]
    fn strips_managed_fields_and_keeps_json_valid() {
        let o = Object::parse(
            CM,
            &ParseOptions {
                strip_managed_fields: true,
                type_meta: None,
            },
        )
        .unwrap();
        assert!(!o.json().contains("managedFields"));
        let v: serde_json::Value = o.deserialize().unwrap();
        assert_eq!(v["metadata"]["ownerReferences"][1]["uid"], "o2");
        assert_eq!(v["data"]["k"], "v");
        assert_eq!(o.resource_version(), "42");
        assert_eq!(o.annotation("note"), Some("x\"y"));
        assert_eq!(o.owner_uids().collect::<Vec<_>>(), vec!["o1", "o2"]);
    }

    #[test]
    fn strips_managed_fields_when_first_or_only_member() {
        let first =
            r#"{"metadata":{ "managedFields" : [{"a":1}] , "name":"n","resourceVersion":"7"}}"#;
        let o = Object::parse(
            first,
            &ParseOptions {
                strip_managed_fields: true,
                type_meta: None,
            },
        )
        .unwrap();
        let v: serde_json::Value = o.deserialize().unwrap();
        assert_eq!(
            v,
            serde_json::json!({"metadata":{"name":"n","resourceVersion":"7"}})
        );
        assert_eq!(o.resource_version(), "7");
        assert_eq!(o.key(), "n");
        assert_eq!(o.namespace(), None);
    }

    #[test]
    fn inserts_missing_type_meta_for_list_items() {
        let item = r#"{"metadata":{"name":"n","namespace":"ns","labels":{"app":"web"}},"spec":{"nodeName":"node-1","replicas":3}}"#;
        let o = Object::parse(
            item,
            &ParseOptions {
                strip_managed_fields: true,
                type_meta: Some(("v1".into(), "Pod".into())),
            },
        )
        .unwrap();
        let v: serde_json::Value = o.deserialize().unwrap();
        assert_eq!(v["apiVersion"], "v1");
        assert_eq!(v["kind"], "Pod");
        assert_eq!(o.label("app"), Some("web"));
        assert_eq!(o.field("spec.nodeName").as_deref(), Some("node-1"));
        assert_eq!(o.field("spec.replicas").as_deref(), Some("3"));
        assert_eq!(o.field("spec.missing"), None);
        assert_eq!(o.field("metadata.labels"), None);
    }

    #[test]
    fn rejects_objects_without_name_or_not_objects() {
        assert!(matches!(
            Object::from_json(r#"{"metadata":{}}"#),
            Err(Error::MissingName)
        ));
        assert!(Object::from_json(r#"["metadata"]"#).is_err());
        assert!(Object::from_json(r#"{"metadata":{"name":1}}"#).is_err());
    }

    #[test]
    fn escaped_strings_are_unescaped_into_the_arena() {
        let o = Object::from_json(
            r#"{"metadata":{"name":"a\u0062c","namespace":"n\u0073","labels":{"k\u00e9":"v\n"}}}"#,
        )
        .unwrap();
        assert_eq!(o.key(), "ns/abc");
        assert_eq!(o.name(), "abc");
        assert_eq!(o.label("ké"), Some("v\n"));
    }

    #[test]
    fn deserializes_into_k8s_openapi_types() {
        let o = Object::from_json(CM).unwrap();
        let cm: k8s_openapi::api::core::v1::ConfigMap = o.deserialize().unwrap();
        assert_eq!(cm.metadata.name.as_deref(), Some("cm1"));
        assert_eq!(cm.data.unwrap()["k"], "v");
    }

    #[test]
    fn accessors_agree_with_serde_json_on_random_objects() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};
        let mut rng = StdRng::seed_from_u64(42);
        let alphabet: Vec<char> = "ab-_.z09\"\\/é€\n\t{}:,".chars().collect();
        let word = |rng: &mut StdRng, max: usize| -> String {
            let n = rng.random_range(1..=max);
            (0..n)
                .map(|_| alphabet[rng.random_range(0..alphabet.len())])
                .collect()
        };
        for _ in 0..500 {
            let labels: serde_json::Map<String, serde_json::Value> = (0..rng.random_range(0..5))
                .map(|_| (word(&mut rng, 8), word(&mut rng, 8).into()))
                .collect();
            let annotations: serde_json::Map<String, serde_json::Value> = (0..rng
                .random_range(0..4))
                .map(|_| (word(&mut rng, 8), word(&mut rng, 30).into()))
                .collect();
            let owners: Vec<serde_json::Value> = (0..rng.random_range(0..3))
                .map(|_| {
                    let mut owner = serde_json::json!({"uid": word(&mut rng, 6), "kind": word(&mut rng, 4),
                        "apiVersion": word(&mut rng, 5), "name": word(&mut rng, 6)});
                    if rng.random_bool(0.5) {
                        owner["controller"] = rng.random_bool(0.5).into();
                    }
                    owner
                })
                .collect();
            let mut meta = serde_json::json!({
                "name": word(&mut rng, 10),
                "uid": word(&mut rng, 10),
                "resourceVersion": rng.random_range(1..1_000_000u64).to_string(),
                "labels": labels,
                "annotations": annotations,
                "ownerReferences": owners,
            });
            if rng.random_bool(0.5) {
                meta["namespace"] = word(&mut rng, 6).into();
            }
            if rng.random_bool(0.5) {
                meta["generation"] = rng.random_range(1..1_000_000i64).into();
            }
            if rng.random_bool(0.7) {
                meta["managedFields"] = serde_json::json!([{"manager": word(&mut rng, 5)}]);
            }
            let mut source =
                serde_json::json!({"metadata": meta, "data": {"k": word(&mut rng, 50)}});
            let with_type = rng.random_bool(0.5);
            if with_type {
                source["kind"] = "Thing".into();
            }
            let raw = if rng.random_bool(0.5) {
                serde_json::to_string_pretty(&source).unwrap()
            } else {
                source.to_string()
            };
            let o = Object::parse(
                &raw,
                &ParseOptions {
                    strip_managed_fields: true,
                    type_meta: Some(("v9".into(), "Other".into())),
                },
            )
            .unwrap();
            let m = &source["metadata"];
            assert_eq!(o.name(), m["name"]);
            assert_eq!(o.namespace(), m["namespace"].as_str());
            assert_eq!(o.uid(), m["uid"]);
            assert_eq!(o.resource_version(), m["resourceVersion"]);
            for (k, v) in m["labels"].as_object().unwrap() {
                assert_eq!(o.label(k), v.as_str(), "label {k:?}");
            }
            for (k, v) in m["annotations"].as_object().unwrap() {
                assert_eq!(o.annotation(k), v.as_str(), "annotation {k:?}");
            }
            let owner_uids: Vec<&str> = m["ownerReferences"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["uid"].as_str().unwrap())
                .collect();
            assert_eq!(o.owner_uids().collect::<Vec<_>>(), owner_uids);
            let controller = m["ownerReferences"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["controller"] == true);
            assert_eq!(
                o.controller()
                    .map(|c| (c.api_version, c.kind, c.name, c.uid)),
                controller.map(|r| (
                    r["apiVersion"].as_str().unwrap(),
                    r["kind"].as_str().unwrap(),
                    r["name"].as_str().unwrap(),
                    r["uid"].as_str().unwrap()
                ))
            );
            assert_eq!(o.generation(), m["generation"].as_i64());
            let mut expected = source.clone();
            if let Some(meta) = expected["metadata"].as_object_mut() {
                meta.remove("managedFields");
            }
            expected["apiVersion"] = "v9".into();
            if !with_type {
                expected["kind"] = "Other".into();
            }
            let stored: serde_json::Value = serde_json::from_str(o.json()).unwrap();
            assert_eq!(stored, expected, "{raw}");
        }
    }

    #[test]
    fn the_controller_is_the_first_reference_with_controller_true() {
        let with = |owners: &str| {
            Object::from_json(&format!(
                r#"{{"metadata":{{"name":"rs","namespace":"ns","labels":{{"a":"1"}},"ownerReferences":{owners}}}}}"#
            ))
            .unwrap()
        };
        let several = with(
            r#"[{"apiVersion":"v1","kind":"ConfigMap","name":"c","uid":"u1"},
                {"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":"u2","controller":true,"blockOwnerDeletion":true},
                {"apiVersion":"x/v1","kind":"Other","name":"o","uid":"u3","controller":true}]"#,
        );
        assert_eq!(
            several.controller(),
            Some(OwnerReference {
                api_version: "apps/v1",
                kind: "Deployment",
                name: "web",
                uid: "u2",
            })
        );
        assert_eq!(several.owner_uids().collect::<Vec<_>>(), ["u1", "u2", "u3"]);
        assert_eq!(several.label("a"), Some("1"));
        for none in [
            "[]",
            "null",
            r#"[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":"u2","controller":false}]"#,
            r#"[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":"u2","controller":null}]"#,
            r#"[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":"u2"}]"#,
        ] {
            let o = with(none);
            assert_eq!(o.controller(), None, "{none}");
            assert_eq!(o.key(), "ns/rs", "{none}");
        }
        // A reference without a uid is still the controller; it has no owner uid to index.
        let no_uid = with(r#"[{"apiVersion":"v1","kind":"Foo","name":"f","controller":true}]"#);
        assert_eq!(
            no_uid.controller().map(|c| (c.name, c.uid)),
            Some(("f", ""))
        );
        assert_eq!(no_uid.owner_uids().count(), 0);
    }

    #[test]
    fn an_escaped_controller_reference_is_unescaped() {
        let o = Object::from_json(
            r#"{"metadata":{"name":"x","ownerReferences":[{"apiVersion":"g\u002fv1","kind":"K\u0069nd","name":"n\"q","uid":"\u0075","controller":true}],"managedFields":[{}]},"spec":{}}"#,
        )
        .unwrap();
        assert_eq!(
            o.controller(),
            Some(OwnerReference {
                api_version: "g/v1",
                kind: "Kind",
                name: "n\"q",
                uid: "u",
            })
        );
        assert_eq!(o.owner_uids().collect::<Vec<_>>(), ["u"]);
    }

    #[test]
    fn generation_is_read_when_it_is_an_integer() {
        let at = |generation: &str| {
            Object::parse(
                &format!(
                    r#"{{"metadata":{{"managedFields":[{{"m":1}}],"name":"n","generation":{generation}}},"spec":{{}}}}"#
                ),
                &ParseOptions {
                    strip_managed_fields: true,
                    type_meta: Some(("v1".into(), "Thing".into())),
                },
            )
            .unwrap()
        };
        assert_eq!(at("7").generation(), Some(7));
        assert_eq!(at("9223372036854775807").generation(), Some(i64::MAX));
        for odd in ["null", "\"7\"", "7.5", "{}", "99999999999999999999"] {
            assert_eq!(at(odd).generation(), None, "{odd}");
        }
        assert_eq!(Object::from_json(CM).unwrap().generation(), None, "absent");
    }

    #[test]
    fn the_header_stays_64_bytes_and_heap_size_counts_the_spans() {
        assert_eq!(std::mem::size_of::<Object>(), 64);
        let plain = Object::from_json(r#"{"metadata":{"name":"n"}}"#).unwrap();
        assert_eq!(plain.heap_size(), 64 + plain.json().len() + 1 + 3 * 8);
        let owned = Object::from_json(
            r#"{"metadata":{"name":"n","ownerReferences":[{"apiVersion":"v1","kind":"K","name":"o","uid":"u","controller":true}]}}"#,
        )
        .unwrap();
        // uid, resourceVersion, generation, one owner uid and the controller's four.
        assert_eq!(owned.heap_size(), 64 + owned.json().len() + 1 + 8 * 8);
    }

    #[test]
    fn a_typical_object_costs_less_than_its_json() {
        let value = "x".repeat(1000);
        let raw = format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"bench-000001","namespace":"default","uid":"5d3c1f6e-0000-4000-8000-000000000001","resourceVersion":"12345","creationTimestamp":"2026-11-29T12:00:00Z","labels":{{"app.kubernetes.io/name":"bench"}},"annotations":{{"bench.kubewasm.io/note":"object number 1"}},"managedFields":[{{"apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{{"f:data":{{".":{{}},"f:value":{{}}}}}},"manager":"kubectl","operation":"Update","time":"2026-11-29T12:00:00Z"}}]}},"data":{{"value":"{value}"}}}}"#
        );
        let o = Object::parse(
            &raw,
            &ParseOptions {
                strip_managed_fields: true,
                type_meta: None,
            },
        )
        .unwrap();
        assert!(
            o.heap_size() < raw.len(),
            "{} >= {}",
            o.heap_size(),
            raw.len()
        );
    }
}
