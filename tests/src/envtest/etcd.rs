//! etcd's HTTP/JSON gateway (`/v3/...`), just enough to read the revision and compact.

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Error;

/// The etcd client endpoint on loopback (plain HTTP, no TLS).
pub struct Gateway {
    pub port: u16,
}

impl Gateway {
    /// The store's current revision (from the header of a range request).
    pub async fn revision(&self) -> Result<i64, Error> {
        // Any key will do: only the response header is read. "AA==" is the key "\0".
        let answer = self.post("/v3/kv/range", json!({"key": "AA=="})).await?;
        answer
            .pointer("/header/revision")
            .and_then(|r| r.as_str().and_then(|s| s.parse().ok()).or(r.as_i64()))
            .ok_or_else(|| Error::Etcd(format!("no revision in {answer}")))
    }

    /// Compacts history up to the current revision, physically, and returns that revision:
    /// every older revision is gone from etcd.
    pub async fn compact(&self) -> Result<i64, Error> {
        let revision = self.revision().await?;
        self.post(
            "/v3/kv/compaction",
            json!({"revision": revision.to_string(), "physical": true}),
        )
        .await?;
        Ok(revision)
    }

    async fn post(&self, path: &str, body: Value) -> Result<Value, Error> {
        let failed = |what: String| Error::Etcd(format!("POST {path}: {what}"));
        let body = body.to_string();
        let mut stream = TcpStream::connect(("127.0.0.1", self.port))
            .await
            .map_err(|e| failed(e.to_string()))?;
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.port,
            body.len()
        );
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| failed(e.to_string()))?;
        let mut response = Vec::new();
        stream
            .read_to_end(&mut response)
            .await
            .map_err(|e| failed(e.to_string()))?;
        let response = String::from_utf8_lossy(&response);
        let (head, body) = response
            .split_once("\r\n\r\n")
            .ok_or_else(|| failed(format!("malformed response {response:?}")))?;
        if !head.starts_with("HTTP/1.1 200") {
            return Err(failed(format!("{head}\n{body}")));
        }
        serde_json::from_str(dechunk(body).trim()).map_err(|e| failed(format!("{e}: {body}")))
    }
}

/// The gateway answers with a Content-Length; a chunked body is one JSON chunk between size
/// lines. Returns the JSON either way.
fn dechunk(body: &str) -> &str {
    match (body.find('{'), body.rfind('}')) {
        (Some(start), Some(end)) if start <= end => &body[start..=end],
        _ => body,
    }
}
