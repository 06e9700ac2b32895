//! The webhook endpoint: HTTPS (rustls) on `--webhook-addr`, one path per plugin and webhook
//! kind, `POST /validate/{plugin}` and `POST /mutate/{plugin}`, answering
//! `admission.k8s.io/v1` AdmissionReviews.
//!
//! The body is hostile input: at most [`MAX_BODY_BYTES`], parsed into checked types
//! ([`review::parse`]); anything else is answered 400 (the API server then applies the
//! webhook's failure policy itself). Each review has a deadline inside the webhook's timeout
//! (the declared one, or the API server's `?timeout=` when shorter): a policy that traps,
//! runs past it, answers `err` or answers garbage gets its declared failure policy (`Fail`:
//! denied with a message naming the plugin; `Ignore`: allowed, with a warning), and is
//! counted.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;

use super::metrics::AdmissionMetrics;
use super::tls::ReloadingCert;
use kubewasm_runtime::FailureReason;
use kubewasm_runtime::admission::declaration::{FailurePolicy, WebhookKind};
use kubewasm_runtime::admission::registry::AdmissionRegistry;
use kubewasm_runtime::admission::review::{
    Answer, MAX_BODY_BYTES, {self},
};

/// What the server answers with.
#[derive(Clone)]
struct Shared {
    registry: AdmissionRegistry,
    metrics: AdmissionMetrics,
}

/// How long a TLS handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// The most handshakes in progress at once.
const MAX_HANDSHAKES: usize = 128;
/// The part of the webhook's timeout a review may use: the answer must still reach the API
/// server before it gives up.
const DEADLINE_SHARE: f64 = 0.8;

/// Binds `addr` and serves the policies of `registry` over TLS with the certificate of `cert`
/// until `cancel` fires. Answers the bound address (useful with port 0) and the server task.
pub async fn serve(
    addr: SocketAddr,
    cert: Arc<ReloadingCert>,
    registry: AdmissionRegistry,
    metrics: AdmissionMetrics,
    cancel: CancellationToken,
) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    serve_with(addr, cert.server_config()?, registry, metrics, cancel).await
}

/// [`serve`] with a TLS configuration of the caller's (e.g. a
/// [`LoopbackCert`](super::loopback_cert::LoopbackCert)'s).
pub async fn serve_with(
    addr: SocketAddr,
    config: rustls::ServerConfig,
    registry: AdmissionRegistry,
    metrics: AdmissionMetrics,
    cancel: CancellationToken,
) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} for admission webhooks"))?;
    let bound = listener.local_addr()?;
    let tls = TlsListener::start(
        listener,
        TlsAcceptor::from(Arc::new(config)),
        cancel.clone(),
    );
    let app = router(Shared { registry, metrics });
    let task = tokio::spawn(async move {
        let shutdown = async move { cancel.cancelled().await };
        if let Err(err) = axum::serve(tls, app).with_graceful_shutdown(shutdown).await {
            tracing::error!(error = %err, "admission webhook server failed");
        }
    });
    Ok((bound, task))
}

fn router(shared: Shared) -> Router {
    Router::new()
        .route("/validate/{plugin}", post(validate))
        .route("/mutate/{plugin}", post(mutate))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(shared)
}

/// Accepted TCP connections, their TLS handshakes done apart (a slow client holds up no
/// other), handed to axum as they complete.
struct TlsListener {
    done: tokio::sync::mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    fn start(listener: TcpListener, acceptor: TlsAcceptor, cancel: CancellationToken) -> Self {
        let local = listener
            .local_addr()
            .unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0)));
        let (tx, done) = tokio::sync::mpsc::channel(MAX_HANDSHAKES);
        let handshakes = Arc::new(tokio::sync::Semaphore::new(MAX_HANDSHAKES));
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    () = cancel.cancelled() => return,
                    a = listener.accept() => a,
                };
                let (tcp, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors and the like: wait rather than spin.
                        tracing::warn!("admission webhook accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let _ = tcp.set_nodelay(true);
                let Ok(permit) = handshakes.clone().acquire_owned().await else {
                    return;
                };
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    let _permit = permit;
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => {
                            let _ = tx.send((stream, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, "webhook TLS handshake failed: {e}"),
                        Err(_) => tracing::debug!(%peer, "webhook TLS handshake timed out"),
                    }
                });
            }
        });
        TlsListener { done, local }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.done.recv().await {
            Some(c) => c,
            // The accept loop stopped (shutdown): no connection will come again.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

#[derive(serde::Deserialize)]
struct ReviewQuery {
    /// The API server's timeout for the call, e.g. `10s`.
    timeout: Option<String>,
}

async fn validate(
    State(s): State<Shared>,
    Path(plugin): Path<String>,
    Query(q): Query<ReviewQuery>,
    body: Bytes,
) -> Response {
    answer(&s, WebhookKind::Validating, &plugin, q, &body).await
}

async fn mutate(
    State(s): State<Shared>,
    Path(plugin): Path<String>,
    Query(q): Query<ReviewQuery>,
    body: Bytes,
) -> Response {
    answer(&s, WebhookKind::Mutating, &plugin, q, &body).await
}

/// `10s`, `500ms`, `1m` as the API server writes durations; `None` if it is none of those.
fn parse_timeout(s: &str) -> Option<Duration> {
    let (digits, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit())?);
    let n: u64 = digits.parse().ok()?;
    match unit {
        "ms" => Some(Duration::from_millis(n)),
        "s" => Some(Duration::from_secs(n)),
        "m" => Some(Duration::from_secs(n.checked_mul(60)?)),
        _ => None,
    }
}

async fn answer(
    s: &Shared,
    kind: WebhookKind,
    plugin: &str,
    query: ReviewQuery,
    body: &[u8],
) -> Response {
    let started = Instant::now();
    let request = match review::parse(body) {
        Ok(r) => r,
        Err(e) => {
            s.metrics.refused("malformed");
            return (StatusCode::BAD_REQUEST, e.to_string()).into_response();
        }
    };
    let Some(policy) = s.registry.get(plugin) else {
        s.metrics.refused("unknown-plugin");
        return (
            StatusCode::NOT_FOUND,
            "no admission policy is loaded under this name".to_owned(),
        )
            .into_response();
    };
    let Some(webhook) = policy.declaration().webhook(kind) else {
        s.metrics.refused("unknown-plugin");
        return (
            StatusCode::NOT_FOUND,
            format!("the policy declares no {} webhook", kind.as_str()),
        )
            .into_response();
    };
    let declared = Duration::from_secs(webhook.timeout_seconds.into());
    let timeout = query
        .timeout
        .as_deref()
        .and_then(parse_timeout)
        .map_or(declared, |t| t.min(declared));
    let deadline = timeout
        .mul_f64(DEADLINE_SHARE)
        .max(Duration::from_millis(10));
    let failure_policy = webhook.failure_policy;
    let (answer, result) = match policy.review(kind, &request, deadline).await {
        Ok(a) => {
            let result = if a.allowed { "allowed" } else { "denied" };
            (a, result)
        }
        Err(failure) => {
            s.metrics
                .failed(policy.name(), kind.as_str(), failure.reason.as_str());
            tracing::warn!(
                plugin = policy.name(),
                webhook = kind.as_str(),
                reason = failure.reason.as_str(),
                uid = %request.uid,
                "admission policy failed, its failure policy answers: {}",
                kubewasm_runtime::escaped(review::cut(&failure.message, 512))
            );
            (
                failed(policy.name(), failure_policy, failure.reason),
                "failed",
            )
        }
    };
    s.metrics
        .reviewed(policy.name(), kind.as_str(), result, started.elapsed());
    axum::Json(answer.to_review(&request.uid)).into_response()
}

/// The answer of a failure policy for a review the policy `plugin` failed.
fn failed(plugin: &str, policy: FailurePolicy, reason: FailureReason) -> Answer {
    match policy {
        FailurePolicy::Fail => Answer::deny(
            500,
            &format!(
                "admission policy {plugin:?} failed ({}); its failurePolicy is Fail",
                reason.as_str()
            ),
        ),
        FailurePolicy::Ignore => Answer {
            warnings: vec![format!(
                "admission policy {plugin:?} failed ({}); allowed by its failurePolicy Ignore",
                reason.as_str()
            )],
            ..Answer::allow()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_server_timeouts_parse() {
        assert_eq!(parse_timeout("10s"), Some(Duration::from_secs(10)));
        assert_eq!(parse_timeout("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_timeout("1m"), Some(Duration::from_secs(60)));
        assert_eq!(parse_timeout("s"), None);
        assert_eq!(parse_timeout("10"), None);
        assert_eq!(parse_timeout("99999999999999999999s"), None);
    }

    #[test]
    fn a_failure_policy_answers_for_a_failed_policy() {
        let denied = failed("p", FailurePolicy::Fail, FailureReason::Trap);
        assert!(!denied.allowed);
        assert!(denied.message.contains("\"p\"") && denied.message.contains("trap"));
        let allowed = failed("p", FailurePolicy::Ignore, FailureReason::Timeout);
        assert!(allowed.allowed);
        assert!(allowed.warnings[0].contains("timeout"));
    }
}
