//! A LIST response body parsed as its bytes arrive: each item becomes a compact [`Object`] as
//! soon as it is complete, so a one-answer list of 100,000 objects never sits in memory as text.

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::list_page::ListPage;
use crate::object::{Object, ParseOptions};

/// The top-level member whose value is being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Member {
    Items,
    Metadata,
    Other,
}

/// What the bytes being copied will become.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Capture {
    Item,
    Metadata,
}

/// Splits a `<Kind>List` body (`{"metadata":{...},"items":[{...},...]}`, members in any order)
/// fed in pieces of any size. Only the item being read is buffered; finished items are parsed
/// at once.
pub(crate) struct ListBody<'p> {
    parse: &'p ParseOptions,
    items: Vec<Object>,
    metadata: Option<RawListMeta>,
    /// Open objects and arrays around the current byte.
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// At depth 1, the next string is a member name.
    expect_key: bool,
    reading_key: bool,
    key: Vec<u8>,
    member: Member,
    /// Inside the `items` array (depth 2 holds its elements).
    in_items: bool,
    /// The value being copied, and the depth it closes at.
    capture: Option<(Capture, usize)>,
    buffer: Vec<u8>,
    seen_top: bool,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawListMeta {
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default, rename = "continue")]
    continue_token: Option<String>,
}

impl<'p> ListBody<'p> {
    pub(crate) fn new(parse: &'p ParseOptions) -> Self {
        ListBody {
            parse,
            items: Vec::new(),
            metadata: None,
            depth: 0,
            in_string: false,
            escaped: false,
            expect_key: false,
            reading_key: false,
            key: Vec::new(),
            member: Member::Other,
            in_items: false,
            capture: None,
            buffer: Vec::new(),
            seen_top: false,
        }
    }

    /// Reads the next piece of the body.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Result<()> {
        let mut copy_from = self.capture.map(|_| 0);
        let mut i = 0;
        while i < bytes.len() {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                    if self.reading_key {
                        self.key.push(bytes[i]);
                    }
                    i += 1;
                    continue;
                }
                let Some(at) = memchr::memchr2(b'"', b'\\', &bytes[i..]) else {
                    if self.reading_key {
                        self.key.extend_from_slice(&bytes[i..]);
                    }
                    break;
                };
                let end = i + at;
                if self.reading_key {
                    self.key.extend_from_slice(&bytes[i..end]);
                }
                if bytes[end] == b'\\' {
                    self.escaped = true;
                    if self.reading_key {
                        self.key.push(b'\\');
                    }
                } else {
                    self.in_string = false;
                    if self.reading_key {
                        self.reading_key = false;
                        self.member = match self.key.as_slice() {
                            b"items" => Member::Items,
                            b"metadata" => Member::Metadata,
                            _ => Member::Other,
                        };
                    }
                }
                i = end + 1;
                continue;
            }
            let b = bytes[i];
            match b {
                b'"' => {
                    self.in_string = true;
                    if self.depth == 1 && self.expect_key {
                        self.reading_key = true;
                        self.key.clear();
                    }
                    self.check_item_start(b)?;
                }
                b'{' | b'[' => {
                    if self.depth == 0 {
                        if b != b'{' || self.seen_top {
                            return Err(malformed("the body is not one JSON object"));
                        }
                        self.seen_top = true;
                        self.expect_key = true;
                    } else if self.depth == 1 && !self.expect_key {
                        match (self.member, b) {
                            (Member::Items, b'[') => self.in_items = true,
                            (Member::Metadata, b'{') => {
                                self.capture = Some((Capture::Metadata, 1));
                                copy_from = Some(i);
                            }
                            _ => {}
                        }
                    } else if self.depth == 2 && self.in_items && self.capture.is_none() {
                        if b != b'{' {
                            return Err(malformed("a list item is not an object"));
                        }
                        self.capture = Some((Capture::Item, 2));
                        copy_from = Some(i);
                    }
                    self.depth += 1;
                }
                b'}' | b']' => {
                    self.depth = self
                        .depth
                        .checked_sub(1)
                        .ok_or_else(|| malformed("unbalanced brackets"))?;
                    if let Some((what, depth)) = self.capture
                        && depth == self.depth
                    {
                        let from = copy_from.take().unwrap_or(0);
                        self.buffer.extend_from_slice(&bytes[from..=i]);
                        self.capture = None;
                        self.finish_capture(what)?;
                    }
                    if self.depth == 1 && self.in_items {
                        self.in_items = false;
                    }
                }
                b':' if self.depth == 1 => self.expect_key = false,
                b',' if self.depth == 1 => self.expect_key = true,
                b',' | b':' => {}
                b if b.is_ascii_whitespace() => {}
                _ => self.check_item_start(b)?,
            }
            i += 1;
        }
        if let (Some(from), Some(_)) = (copy_from, self.capture) {
            self.buffer.extend_from_slice(&bytes[from..]);
        }
        Ok(())
    }

    /// The page, once the whole body has been fed.
    pub(crate) fn finish(self) -> Result<ListPage> {
        if !self.seen_top || self.depth != 0 || self.in_string {
            return Err(malformed("the body ended early"));
        }
        let metadata = self.metadata.unwrap_or_default();
        Ok(ListPage {
            items: self.items,
            resource_version: metadata.resource_version.unwrap_or_default(),
            continue_token: metadata.continue_token.filter(|t| !t.is_empty()),
        })
    }

    /// A scalar where an item should start.
    fn check_item_start(&self, _byte: u8) -> Result<()> {
        if self.depth == 2 && self.in_items && self.capture.is_none() {
            return Err(malformed("a list item is not an object"));
        }
        Ok(())
    }

    fn finish_capture(&mut self, what: Capture) -> Result<()> {
        let text =
            std::str::from_utf8(&self.buffer).map_err(|e| malformed(&format!("not UTF-8: {e}")))?;
        match what {
            Capture::Item => self.items.push(Object::parse(text, self.parse)?),
            Capture::Metadata => {
                let meta = serde_json::from_str(text)
                    .map_err(|e| malformed(&format!("list metadata: {e}")))?;
                self.metadata = Some(meta);
            }
        }
        self.buffer.clear();
        Ok(())
    }
}

fn malformed(what: &str) -> Error {
    Error::Response(format!("LIST body: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> ParseOptions {
        ParseOptions::config_maps()
    }

    fn parse_in_pieces(body: &str, piece: usize) -> Result<ListPage> {
        let options = opts();
        let mut list = ListBody::new(&options);
        for chunk in body.as_bytes().chunks(piece) {
            list.feed(chunk)?;
        }
        list.finish()
    }

    #[test]
    fn any_split_of_the_body_gives_the_same_page() {
        let body = r#" {"kind":"ConfigMapList","items":[{"metadata":{"name":"a]{\"","namespace":"n","managedFields":[{}]},"data":{"k":"}]\\"}},
            {"metadata":{"name":"b","namespace":"n"}}],"apiVersion":"v1","metadata":{"resourceVersion":"10","continue":"t\"ok"}} "#;
        let whole = parse_in_pieces(body, body.len()).unwrap();
        assert_eq!(whole.resource_version, "10");
        assert_eq!(whole.continue_token.as_deref(), Some("t\"ok"));
        let names: Vec<&str> = whole.items.iter().map(|o| o.name()).collect();
        assert_eq!(names, ["a]{\"", "b"]);
        assert_eq!(
            whole.items[0].json(),
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a]{\"","namespace":"n"},"data":{"k":"}]\\"}}"#
        );
        for piece in 1..40 {
            let page = parse_in_pieces(body, piece).unwrap();
            assert_eq!(page.items, whole.items, "pieces of {piece}");
            assert_eq!(page.continue_token, whole.continue_token);
            assert_eq!(page.resource_version, whole.resource_version);
        }
    }

    #[test]
    fn null_or_missing_items_are_an_empty_page() {
        for body in [
            r#"{"metadata":{"resourceVersion":"3"},"items":null}"#,
            r#"{"metadata":{"resourceVersion":"3"}}"#,
        ] {
            let page = parse_in_pieces(body, 7).unwrap();
            assert!(page.items.is_empty());
            assert_eq!(page.resource_version, "3");
        }
    }

    #[test]
    fn truncated_or_malformed_bodies_are_errors() {
        for body in [
            r#"{"metadata":{"resourceVersion":"3"},"items":[{"metadata":{"name":"a"}}"#,
            r#"{"items":[1]}"#,
            r#"{"items":["a"]}"#,
            r#"[]"#,
            r#"{"items":[{"metadata":{}}]}"#,
            "",
        ] {
            assert!(parse_in_pieces(body, 5).is_err(), "{body}");
        }
    }
}
