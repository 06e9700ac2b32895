//! Protobuf response bodies read into the cache's objects: a LIST as its bytes arrive, and the
//! length-prefixed frames of a watch. Each object is rendered as the JSON the API server would
//! have sent and parsed by [`Object::parse`], so the cache holds the same bytes on either wire.

use futures::io::{AsyncBufRead, AsyncReadExt};

use crate::error::Result;
use crate::negotiate::Negotiation;
use crate::object::{Object, ParseOptions};

/// A protobuf LIST body, fed in pieces of any size. A body that does not decode turns the
/// resource to JSON through `negotiation` and fails the LIST.
pub(crate) struct ProtobufList<'p> {
    parse: &'p ParseOptions,
    negotiation: &'p Negotiation,
    reader: kubewasm_protobuf::ListReader,
    items: Vec<Object>,
}

impl<'p> ProtobufList<'p> {
    /// A reader of a list of `parse`'s kind.
    pub(crate) fn new(parse: &'p ParseOptions, negotiation: &'p Negotiation) -> Result<Self> {
        let (api_version, kind) = parse.type_meta.clone().unwrap_or_default();
        let reader = kubewasm_protobuf::ListReader::new(&api_version, &kind)
            .map_err(|e| negotiation.fall_back(e))?;
        Ok(ProtobufList {
            parse,
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
        for json in self.reader.take_items() {
            self.items.push(Object::parse(&json, self.parse)?);
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
