//! Protobuf response bodies read into the cache's objects: a LIST as its bytes arrive, and the
//! length-prefixed frames of a watch. Each object is rendered as the JSON the API server would
//! have sent, shaped as [`Object::parse`] shapes it, and built with [`Object::from_rendered`]
//! from the metadata places recorded while rendering: the cache holds the same bytes on either
//! wire, and the text is not read a second time.

use futures::io::{AsyncBufRead, AsyncReadExt};

use crate::error::Result;
use crate::negotiate::Negotiation;
use crate::object::{Object, ParseOptions};

/// A protobuf LIST body, fed in pieces of any size. A body that does not decode turns the
/// resource to JSON through `negotiation` and fails the LIST.
pub(crate) struct ProtobufList<'p> {
    negotiation: &'p Negotiation,
    reader: kubewasm_protobuf::ListReader,
    items: Vec<Object>,
}

impl<'p> ProtobufList<'p> {
    /// A reader of a list of `parse`'s kind.
    pub(crate) fn new(parse: &'p ParseOptions, negotiation: &'p Negotiation) -> Result<Self> {
        let (api_version, kind) = parse.type_meta.clone().unwrap_or_default();
        let reader = kubewasm_protobuf::ListReader::shaped(&api_version, &kind, shape(parse))
            .map_err(|e| negotiation.fall_back(e))?;
        Ok(ProtobufList {
            negotiation,
            reader,
            items: Vec::new(),
        })
    }

    /// Reads the next piece.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Result<()> {
        self.reader
            .feed(bytes)
            .map_err(|e| self.negotiation.fall_back(e))?;
        for rendered in self.reader.take_shaped() {
            self.items.push(Object::from_rendered(rendered)?);
        }
        Ok(())
    }

    /// The objects, the list's resourceVersion and its continue token (`None` on the last page).
    pub(crate) fn finish(self) -> Result<(Vec<Object>, String, Option<String>)> {
        let meta = self
            .reader
            .finish()
            .map_err(|e| self.negotiation.fall_back(e))?;
        let token = Some(meta.continue_token).filter(|t| !t.is_empty());
        Ok((self.items, meta.resource_version, token))
    }
}

/// The protobuf renderer's shaping for objects parsed with `parse`.
pub(crate) fn shape(parse: &ParseOptions) -> kubewasm_protobuf::Shape {
    kubewasm_protobuf::Shape {
        strip_managed_fields: parse.strip_managed_fields,
        type_meta: parse.type_meta.clone(),
    }
}

/// The next frame of a protobuf watch; `None` at the end of the stream.
pub(crate) async fn next_frame(
    reader: &mut (dyn AsyncBufRead + Send + Unpin),
) -> std::io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < len.len() {
        let n = reader.read(&mut len[got..]).await?;
        if n == 0 {
            if got == 0 {
                return Ok(None);
            }
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the watch stream ended inside a frame's length",
            ));
        }
        got += n;
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > kubewasm_protobuf::MAX_FRAME {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a watch frame of {len} bytes"),
        ));
    }
    let mut frame = vec![0; len];
    reader.read_exact(&mut frame).await?;
    Ok(Some(frame))
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use serde_json::{Value, json};

    use super::*;

    /// Words with the characters whose escapes differ between encoders, and none.
    fn word(rng: &mut StdRng, max: usize) -> String {
        let alphabet: Vec<char> = "ab-_.z09\"\\/é€\n\t<>&\u{2028}\u{7f}{}:,".chars().collect();
        let n = rng.random_range(1..=max);
        if rng.random_bool(0.5) {
            return (0..n).map(|i| (b'a' + (i % 26) as u8) as char).collect();
        }
        (0..n)
            .map(|_| alphabet[rng.random_range(0..alphabet.len())])
            .collect()
    }

    fn config_map(rng: &mut StdRng) -> Value {
        let mut meta = json!({
            "name": word(rng, 12),
            "uid": word(rng, 10),
            "resourceVersion": rng.random_range(1..1_000_000u64).to_string(),
            "creationTimestamp": "2026-11-29T12:00:00Z",
        });
        if rng.random_bool(0.7) {
            meta["namespace"] = word(rng, 6).into();
        }
        if rng.random_bool(0.5) {
            meta["generation"] = rng.random_range(1..1_000_000i64).into();
        }
        for (member, max) in [("labels", 8), ("annotations", 40)] {
            if rng.random_bool(0.6) {
                let pairs: serde_json::Map<String, Value> = (0..rng.random_range(1..5))
                    .map(|_| (word(rng, 8), word(rng, max).into()))
                    .collect();
                meta[member] = pairs.into();
            }
        }
        if rng.random_bool(0.5) {
            let owners: Vec<Value> = (0..rng.random_range(1..4))
                .map(|_| {
                    let mut owner = json!({"apiVersion": word(rng, 5), "kind": word(rng, 4),
                        "name": word(rng, 6), "uid": word(rng, 6)});
                    if rng.random_bool(0.6) {
                        owner["controller"] = rng.random_bool(0.5).into();
                    }
                    if rng.random_bool(0.3) {
                        owner["blockOwnerDeletion"] = true.into();
                    }
                    owner
                })
                .collect();
            meta["ownerReferences"] = owners.into();
        }
        if rng.random_bool(0.3) {
            meta["finalizers"] = json!([word(rng, 8)]);
        }
        if rng.random_bool(0.6) {
            meta["managedFields"] = json!([{"manager": word(rng, 5), "operation": "Apply",
                "apiVersion": "v1", "time": "2026-11-29T12:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {".": {}, "f:k": {}}}}]);
        }
        let mut object = json!({"metadata": meta});
        if rng.random_bool(0.8) {
            object["data"] = json!({ word(rng, 6): word(rng, 60) });
        }
        object
    }

    /// Every accessor of the two objects agrees, and the JSON is the same text.
    fn assert_same(direct: &Object, parsed: &Object, source: &Value) {
        assert_eq!(direct.json(), parsed.json(), "{source}");
        assert_eq!(direct.key(), parsed.key(), "{source}");
        assert_eq!(direct.namespace(), parsed.namespace());
        assert_eq!(direct.name(), parsed.name());
        assert_eq!(direct.uid(), parsed.uid());
        assert_eq!(direct.resource_version(), parsed.resource_version());
        assert_eq!(direct.generation(), parsed.generation());
        assert!(direct.labels().eq(parsed.labels()), "{source}");
        assert!(direct.annotations().eq(parsed.annotations()), "{source}");
        assert!(direct.owner_uids().eq(parsed.owner_uids()), "{source}");
        assert_eq!(direct.controller(), parsed.controller(), "{source}");
        for (k, v) in parsed.labels() {
            assert_eq!(direct.label(k), Some(v));
        }
        assert_eq!(direct.heap_size(), parsed.heap_size(), "{source}");
    }

    #[test]
    fn objects_built_while_rendering_equal_the_parsed_rendering() {
        let mut rng = StdRng::seed_from_u64(37);
        for round in 0..400 {
            let items: Vec<Value> = (0..rng.random_range(1..4))
                .map(|_| config_map(&mut rng))
                .collect();
            let parse = ParseOptions {
                strip_managed_fields: round % 4 != 0,
                type_meta: Some(("v1".into(), "ConfigMap".into())),
            };
            let body = kubewasm_protobuf::encode_list(&items, "77", "", "v1", "ConfigMap").unwrap();
            let mut plain = kubewasm_protobuf::ListReader::new("v1", "ConfigMap").unwrap();
            let mut shaped =
                kubewasm_protobuf::ListReader::shaped("v1", "ConfigMap", shape(&parse)).unwrap();
            // Fed in uneven pieces, as a body arrives.
            for piece in body.chunks(rng.random_range(1..200)) {
                plain.feed(piece).unwrap();
                shaped.feed(piece).unwrap();
            }
            let parsed: Vec<Object> = plain
                .take_items()
                .map(|json| Object::parse(&json, &parse).unwrap())
                .collect();
            let direct: Vec<Object> = shaped
                .take_shaped()
                .map(|r| Object::from_rendered(r).unwrap())
                .collect();
            assert_eq!(direct.len(), items.len());
            for ((d, p), source) in direct.iter().zip(&parsed).zip(&items) {
                assert_same(d, p, source);
            }

            for (item, event) in items.iter().zip(["ADDED", "MODIFIED", "DELETED"]) {
                let frame =
                    kubewasm_protobuf::encode_watch_event(event, item, "v1", "ConfigMap").unwrap();
                let frame = &frame[4..];
                let (kind, json) = kubewasm_protobuf::watch_event(frame).unwrap();
                let parsed = Object::parse(&json, &parse).unwrap();
                let (shaped_kind, rendered) =
                    kubewasm_protobuf::watch_event_shaped(frame, &shape(&parse)).unwrap();
                assert_eq!((kind.as_str(), shaped_kind.as_str()), (event, event));
                assert_same(&Object::from_rendered(rendered).unwrap(), &parsed, item);
            }
        }
    }

    #[test]
    fn an_object_without_a_name_is_refused_on_both_paths() {
        let item = json!({"metadata": {"namespace": "ns", "uid": "u"}});
        let parse = ParseOptions::config_maps();
        let body = kubewasm_protobuf::encode_list([&item], "1", "", "v1", "ConfigMap").unwrap();
        let mut shaped =
            kubewasm_protobuf::ListReader::shaped("v1", "ConfigMap", shape(&parse)).unwrap();
        shaped.feed(&body).unwrap();
        let rendered = shaped.take_shaped().next().unwrap();
        assert!(matches!(
            Object::parse(&rendered.json, &parse),
            Err(crate::error::Error::MissingName)
        ));
        assert!(matches!(
            Object::from_rendered(rendered),
            Err(crate::error::Error::MissingName)
        ));
    }
}
