//! Which wire a lister-watcher reads: protobuf for the built-in kinds `kubewasm-protobuf` has a
//! schema of (client-go's `Accept`, so a server without protobuf answers JSON), JSON for every
//! other kind, and JSON for good once a protobuf body of the resource fails to decode. LISTs
//! ask for gzip, as client-go does (the API server compresses answers over 128 KiB; it never
//! compresses a watch), and are decompressed as they arrive.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use futures::TryStreamExt;
use futures::io::{AsyncBufRead, AsyncReadExt};
use http_body_util::BodyExt;

use crate::error::{Error, Result};

/// Counts of the wires lists and watches were answered in, shared by every lister-watcher
/// made with the same [`ListWatchOptions`](crate::ListWatchOptions) (for metrics and tests).
#[derive(Debug, Clone, Default)]
pub struct WireCounters(Arc<Counts>);

#[derive(Debug, Default)]
struct Counts {
    protobuf_lists: AtomicU64,
    json_lists: AtomicU64,
    protobuf_watches: AtomicU64,
    json_watches: AtomicU64,
    fallbacks: AtomicU64,
    gzip_lists: AtomicU64,
    gzip_failures: AtomicU64,
    list_wire_bytes: AtomicU64,
    list_body_bytes: AtomicU64,
}

/// A snapshot of [`WireCounters`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WireStats {
    /// LIST responses read as protobuf.
    pub protobuf_lists: u64,
    /// LIST responses read as JSON.
    pub json_lists: u64,
    /// Watches whose stream was protobuf.
    pub protobuf_watches: u64,
    /// Watches whose stream was JSON.
    pub json_watches: u64,
    /// Resources switched to JSON because a protobuf body failed to decode.
    pub fallbacks: u64,
    /// LIST responses that arrived gzipped.
    pub gzip_lists: u64,
    /// Gzipped LIST bodies that did not decompress (cut short, a bad checksum, not deflate):
    /// each failed its LIST, which the reflector retries.
    pub gzip_failures: u64,
    /// Bytes of LIST bodies as they came over the wire (compressed, when gzipped).
    pub list_wire_bytes: u64,
    /// Bytes of LIST bodies after decompression: what the decoders read.
    pub list_body_bytes: u64,
}

impl WireCounters {
    /// The counts so far.
    pub fn snapshot(&self) -> WireStats {
        let c = &self.0;
        WireStats {
            protobuf_lists: c.protobuf_lists.load(Ordering::Relaxed),
            json_lists: c.json_lists.load(Ordering::Relaxed),
            protobuf_watches: c.protobuf_watches.load(Ordering::Relaxed),
            json_watches: c.json_watches.load(Ordering::Relaxed),
            fallbacks: c.fallbacks.load(Ordering::Relaxed),
            gzip_lists: c.gzip_lists.load(Ordering::Relaxed),
            gzip_failures: c.gzip_failures.load(Ordering::Relaxed),
            list_wire_bytes: c.list_wire_bytes.load(Ordering::Relaxed),
            list_body_bytes: c.list_body_bytes.load(Ordering::Relaxed),
        }
    }
}

/// The buffer a gzipped body is decompressed into: the decoders are fed this much at a time
/// (two HTTP/2 DATA frames' worth).
const DECODED_BUFFER: usize = 32 * 1024;

/// The wire of one lister-watcher.
pub(crate) struct Negotiation {
    protobuf: AtomicBool,
    gzip: bool,
    counters: WireCounters,
    resource: String,
}

/// A response: whether its body is protobuf, and the body.
pub(crate) type Answer = (bool, Box<dyn AsyncBufRead + Send + Unpin>);

impl Negotiation {
    /// Protobuf when `enabled` and the kind has a schema; gzip on LISTs when `gzip`.
    pub(crate) fn new(
        enabled: bool,
        gzip: bool,
        api_version: &str,
        kind: &str,
        resource: String,
        counters: WireCounters,
    ) -> Negotiation {
        Negotiation {
            protobuf: AtomicBool::new(enabled && kubewasm_protobuf::supports(api_version, kind)),
            gzip,
            counters,
            resource,
        }
    }

    /// Sends `request` (asking for protobuf when this resource reads it, and for gzip when it
    /// is a LIST) and answers the body, decompressed, with its wire; a failure status becomes
    /// [`Error::Api`] in either wire.
    pub(crate) async fn send(
        &self,
        client: &kube::Client,
        mut request: http::Request<Vec<u8>>,
        watch: bool,
    ) -> Result<Answer> {
        if self.protobuf.load(Ordering::Relaxed) {
            request.headers_mut().insert(
                http::header::ACCEPT,
                http::HeaderValue::from_static(kubewasm_protobuf::ACCEPT),
            );
        }
        if self.gzip && !watch {
            request.headers_mut().insert(
                http::header::ACCEPT_ENCODING,
                http::HeaderValue::from_static("gzip"),
            );
        }
        let response = client.send(request.map(kube::client::Body::from)).await?;
        let status = response.status();
        let protobuf = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(kubewasm_protobuf::is_protobuf);
        let gzipped = response
            .headers()
            .get(http::header::CONTENT_ENCODING)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|coding| coding.trim().eq_ignore_ascii_case("gzip"));
        let counts = Arc::clone(&self.counters.0);
        let body = response
            .into_body()
            .into_data_stream()
            .map_err(std::io::Error::other)
            .inspect_ok(move |chunk| {
                if !watch {
                    counts
                        .list_wire_bytes
                        .fetch_add(chunk.len() as u64, Ordering::Relaxed);
                }
            })
            .into_async_read();
        let mut reader: Box<dyn AsyncBufRead + Send + Unpin> = if gzipped {
            // Decompressed as it arrives: only the decoder's window and one buffer are held.
            Box::new(futures::io::BufReader::with_capacity(
                DECODED_BUFFER,
                Gunzip {
                    decoder: async_compression::futures::bufread::GzipDecoder::new(body),
                    counters: self.counters.clone(),
                },
            ))
        } else {
            Box::new(body)
        };
        if status.is_client_error() || status.is_server_error() {
            let mut text = Vec::new();
            (&mut reader)
                .take(1 << 20)
                .read_to_end(&mut text)
                .await
                .map_err(|e| Error::Response(format!("reading an error answer: {e}")))?;
            return Err(failure(status.as_u16(), &text, protobuf));
        }
        let counter = match (watch, protobuf) {
            (false, true) => &self.counters.0.protobuf_lists,
            (false, false) => &self.counters.0.json_lists,
            (true, true) => &self.counters.0.protobuf_watches,
            (true, false) => &self.counters.0.json_watches,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if gzipped && !watch {
            self.counters.0.gzip_lists.fetch_add(1, Ordering::Relaxed);
        }
        Ok((protobuf, reader))
    }

    /// `n` bytes of a LIST body were read (after decompression).
    pub(crate) fn count_list_body(&self, n: usize) {
        self.counters
            .0
            .list_body_bytes
            .fetch_add(n as u64, Ordering::Relaxed);
    }

    /// A protobuf body failed to decode: this resource reads JSON from now on, the fallback is
    /// counted and logged, and the error is returned for the reflector to retry.
    pub(crate) fn fall_back(&self, err: kubewasm_protobuf::Error) -> Error {
        if self.protobuf.swap(false, Ordering::Relaxed) {
            self.counters.0.fallbacks.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                resource = %self.resource,
                error = %err,
                "a protobuf answer could not be decoded; this resource is read as JSON from now on"
            );
        }
        Error::Protobuf(err)
    }
}

/// A gzipped body, decompressed. The decoder's own failures (the stream ends early, its
/// checksum or length is wrong, its bytes are not deflate) are counted and become
/// `InvalidData` errors that say the body is corrupt: the decoder reports a stream cut short
/// as a bare `UnexpectedEof`, which would otherwise pass for a connection that died. The
/// transport's failures pass through as they are.
struct Gunzip<R> {
    decoder: async_compression::futures::bufread::GzipDecoder<R>,
    counters: WireCounters,
}

impl<R: AsyncBufRead + Unpin> futures::io::AsyncRead for Gunzip<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut [u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let this = &mut *self;
        std::pin::Pin::new(&mut this.decoder)
            .poll_read(cx, buf)
            .map_err(|err| {
                if err.get_ref().is_some_and(|inner| inner.is::<kube::Error>()) {
                    return err;
                }
                this.counters
                    .0
                    .gzip_failures
                    .fetch_add(1, Ordering::Relaxed);
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("the gzipped body does not decompress: {err}"),
                )
            })
    }
}

#[derive(serde::Deserialize, Default)]
struct RawStatus {
    #[serde(default)]
    reason: String,
    #[serde(default)]
    message: String,
}

/// The `Status` of a failure answer, in JSON or protobuf; its text when it is neither.
fn failure(code: u16, body: &[u8], protobuf: bool) -> Error {
    let json = if protobuf {
        kubewasm_protobuf::object_json(body).ok()
    } else {
        std::str::from_utf8(body).ok().map(str::to_owned)
    };
    let status = json.and_then(|j| serde_json::from_str::<RawStatus>(&j).ok());
    match status {
        Some(s) => Error::Api {
            code,
            reason: s.reason,
            message: s.message,
        },
        None => Error::Api {
            code,
            reason: String::new(),
            message: String::from_utf8_lossy(body).trim().to_owned(),
        },
    }
}
