//! The operator-facing HTTP endpoint: `/metrics`, `/healthz`, `/readyz`, `/plugins`, and the
//! status page (`/` and `/plugin/KEY`, see [`crate::status_page`]).

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
use crate::status_page::StatusPage;

/// What the endpoint reports on.
#[derive(Clone)]
pub struct Probes {
    pub metrics: Arc<Metrics>,
    /// Every informer synced and reaching the API server, and every plugin's replay
    /// delivered; else why not.
    pub ready: Arc<dyn Fn() -> Result<(), String> + Send + Sync>,
    /// The plugins and plugin files with their state, as JSON.
    pub plugins: Arc<dyn Fn() -> serde_json::Value + Send + Sync>,
    /// The status page.
    pub status: Arc<StatusPage>,
}

/// Binds `addr` and serves until `cancel` fires. Returns the bound address (useful with port 0).
pub async fn serve(
    addr: SocketAddr,
    probes: Probes,
    cancel: CancellationToken,
) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} for metrics and health"))?;
    let bound = listener.local_addr()?;
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/plugins", get(plugins))
        .route("/", get(status))
        .route("/plugin/{key}", get(plugin_page))
        .with_state(probes);
    let task = tokio::spawn(async move {
        let shutdown = async move { cancel.cancelled().await };
        if let Err(err) = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
        {
            tracing::error!(error = %err, "metrics endpoint failed");
        }
    });
    Ok((bound, task))
}

async fn metrics(State(p): State<Probes>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        p.metrics.encode(),
    )
}

async fn readyz(State(p): State<Probes>) -> impl IntoResponse {
    match (p.ready)() {
        Ok(()) => (StatusCode::OK, "ready".to_owned()),
        Err(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {reason}"),
        ),
    }
}

async fn plugins(State(p): State<Probes>) -> impl IntoResponse {
    axum::Json((p.plugins)())
}

/// The status page for a browser (`Accept` names `text/html`), else the same as plain text.
async fn status(State(p): State<Probes>, headers: HeaderMap) -> Response {
    let html = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/html"));
    if html {
        Html(p.status.overview_html()).into_response()
    } else {
        // Guest text in a plain answer stays plain: no browser may sniff it into HTML.
        (
            [(header::X_CONTENT_TYPE_OPTIONS, "nosniff")],
            p.status.overview_text(),
        )
            .into_response()
    }
}

async fn plugin_page(State(p): State<Probes>, Path(key): Path<String>) -> Response {
    match p.status.plugin_html(&key) {
        Ok(page) => Html(page).into_response(),
        Err(page) => (StatusCode::NOT_FOUND, Html(page)).into_response(),
    }
}
