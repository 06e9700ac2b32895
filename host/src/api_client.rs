//! The kube client the host talks to the API server with: how its connections find out they
//! are dead, and the User-Agent each request carries.
//!
//! kube's own builder opens plain HTTP/1.1 connections with no keepalive, no ping and Nagle's
//! algorithm on; a connection that stops carrying bytes (a proxy or a NAT that dropped it, a
//! peer that vanished) then goes unnoticed until something above gives up on it. This client
//! keeps kube's layers (base URL, retries, authentication with token refresh and exec, client
//! certificates, TLS settings, extra headers) over a connector of its own:
//! - `TCP_NODELAY` on every connection: small requests are sent at once instead of waiting
//!   for the ACK of the previous segment (Nagle meeting delayed ACKs stalls about 40 ms);
//! - TCP keepalive and `TCP_USER_TIMEOUT` on every connection: the kernel closes a connection
//!   whose peer stopped acknowledging (probes when idle, unacknowledged data when not);
//! - HTTP/2 where the server offers it over TLS (ALPN `h2`, as kube-apiserver does), with a
//!   PING after [`ConnectionOptions::http2_read_idle`] without a frame and the connection
//!   closed if the answer takes longer than [`ConnectionOptions::http2_ping_timeout`]:
//!   client-go's health check (30 s and 15 s), which finds a connection that is open at both
//!   ends but carries nothing. Plain-HTTP servers (the dev server) are spoken to in HTTP/1.1;
//! - a bound on each connect, TLS handshake included ([`ConnectionOptions::connect_timeout`]),
//!   so a path that silently drops new connections fails a connect within it instead of
//!   kube's 30 s, and the request is retried sooner.
//!
//! A watch whose connection dies under it (the PING above, a reset) is counted by its
//! informer as a dead connection and makes the host unready until the watch is open again
//! (see [`crate::health`]).
//!
//! Every request says who sent it: `kubewasm/VERSION` unless it already names a sender
//! ([`plugin_user_agent`](kubewasm_runtime::client::plugin_user_agent) for the writes made for a plugin), so an audit log attributes each
//! request to the host or to the plugin.

use std::time::Duration;

use http::header::{HeaderValue, USER_AGENT};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::retry::RetryPolicy;
use kube::client::{Body, ClientBuilder, ConfigExt as _};
use kubewasm_runtime::client::USER_AGENT_VALUE;
use tower::retry::RetryLayer;
use tower::{BoxError, ServiceBuilder};

/// How the client's connections are kept and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionOptions {
    /// Speak HTTP/2 to servers that offer it (TLS with ALPN `h2`); HTTP/1.1 otherwise.
    pub http2: bool,
    /// An HTTP/2 connection that receives no frame for this long is sent a PING
    /// (client-go's `ReadIdleTimeout`: 30 s).
    pub http2_read_idle: Duration,
    /// A PING unanswered for this long closes the connection and fails its requests, which
    /// are then retried on a new one (client-go's `PingTimeout`: 15 s).
    pub http2_ping_timeout: Duration,
    /// An idle connection is probed by TCP keepalive after this long, then every third of
    /// it; three unanswered probes close it.
    pub tcp_keepalive: Duration,
    /// Data left unacknowledged for this long closes the connection (`TCP_USER_TIMEOUT`,
    /// Linux); this also bounds the keepalive probes.
    pub tcp_user_timeout: Duration,
    /// A connect, TCP and TLS handshake together, that takes longer than this fails (kube's
    /// own: 30 s, which a path that drops new connections silently costs every reconnect).
    pub connect_timeout: Duration,
}

impl Default for ConnectionOptions {
    fn default() -> Self {
        ConnectionOptions {
            http2: true,
            http2_read_idle: Duration::from_secs(30),
            http2_ping_timeout: Duration::from_secs(15),
            tcp_keepalive: Duration::from_secs(15),
            tcp_user_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
        }
    }
}

impl ConnectionOptions {
    /// Checks every duration is positive; the message names the bad one.
    pub fn validate(&self) -> Result<(), String> {
        let durations = [
            ("http2-read-idle-seconds", self.http2_read_idle),
            ("http2-ping-timeout-seconds", self.http2_ping_timeout),
            ("tcp-keepalive-seconds", self.tcp_keepalive),
            ("tcp-user-timeout-seconds", self.tcp_user_timeout),
            ("connect-timeout-seconds", self.connect_timeout),
        ];
        match durations.iter().find(|(_, d)| d.is_zero()) {
            Some((key, _)) => Err(format!("[connection] {key} must be > 0")),
            None => Ok(()),
        }
    }
}

/// Why a client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// kube could not make the TLS, authentication or header settings of the config.
    #[error("cannot use the cluster configuration: {0}")]
    Config(#[source] kube::Error),
    /// The TLS server name set in the kubeconfig is not a valid server name.
    #[error("invalid tls-server-name {name:?} in the kubeconfig")]
    ServerName { name: String },
    /// The kubeconfig names a proxy; this build does not speak through proxies.
    #[error("the kubeconfig names proxy-url {0}: proxies are not supported")]
    Proxy(String),
}

/// Builds a client for `config` with `options`' connections (see the module docs).
///
/// Differs from `kube::Client::try_from(config)` in its connections (the config's
/// `connect_timeout` gives way to `options`') and User-Agent only, and
/// in two things the host does not use: it opens no tracing span per request, and it does not
/// record an exec credential's expiry (`Client::valid_until`). Like kube's, it logs each 5xx
/// attempt at ERROR under kube's target (see [`crate::logging`]); a transport failure is
/// reported by whoever made the request, with what it belongs to.
pub fn build(
    config: kube::Config,
    options: &ConnectionOptions,
) -> Result<kube::Client, ClientError> {
    if let Some(proxy) = &config.proxy_url {
        return Err(ClientError::Proxy(proxy.to_string()));
    }
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    tcp.set_keepalive(Some(options.tcp_keepalive));
    tcp.set_keepalive_interval(Some(options.tcp_keepalive / 3));
    tcp.set_keepalive_retries(Some(3));
    #[cfg(target_os = "linux")]
    tcp.set_tcp_user_timeout(Some(options.tcp_user_timeout));

    let tls = config.rustls_client_config().map_err(ClientError::Config)?;
    let mut tls = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http();
    if let Some(name) = &config.tls_server_name {
        let server_name = name
            .clone()
            .try_into()
            .map_err(|_| ClientError::ServerName { name: name.clone() })?;
        tls =
            tls.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(server_name));
    }
    let https = if options.http2 {
        tls.enable_all_versions().wrap_connector(tcp)
    } else {
        tls.enable_http1().wrap_connector(tcp)
    };
    let mut connector = hyper_timeout::TimeoutConnector::new(https);
    connector.set_connect_timeout(Some(options.connect_timeout));
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);

    let mut http = hyper_util::client::legacy::Client::builder(TokioExecutor::new());
    http.timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .http2_keep_alive_interval(options.http2_read_idle)
        .http2_keep_alive_timeout(options.http2_ping_timeout)
        .http2_keep_alive_while_idle(true);
    let http: hyper_util::client::legacy::Client<_, Body> = http.build(connector);

    let auth = config.auth_layer().map_err(ClientError::Config)?;
    let headers = config.extra_headers_layer().map_err(ClientError::Config)?;
    let service = ServiceBuilder::new()
        .map_request(default_user_agent)
        .layer(config.base_uri_layer())
        .option_layer(
            config
                .default_retry
                .then(|| RetryLayer::new(RetryPolicy::server_retry())),
        )
        .option_layer(auth)
        .layer(headers)
        .map_response(log_server_error)
        .map_err(BoxError::from)
        .service(http);
    Ok(ClientBuilder::new(service, config.default_namespace).build())
}

/// Logs a 5xx answer as kube's own client does, each attempt at ERROR under kube's target,
/// so the process log treats both alike ([`crate::logging`] turns the statuses kube's retry
/// layer retries into one WARN a minute and drops the rest, which the caller reports).
fn log_server_error<B>(response: http::Response<B>) -> http::Response<B> {
    let status = response.status();
    if status.is_server_error() {
        tracing::error!(target: crate::logging::KUBE_HTTP_TARGET, "failed with status {status}");
    }
    response
}

/// Names the host as the sender of a request that names none.
fn default_user_agent(mut request: http::Request<Body>) -> http::Request<Body> {
    request
        .headers_mut()
        .entry(USER_AGENT)
        .or_insert_with(|| HeaderValue::from_static(USER_AGENT_VALUE));
    request
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kubewasm_devserver::{DevServer, Options, Verb};

    use kubewasm_runtime::{
        ClientOptions, NoWriteObserver, ResourcePattern, Resources, WriteClient, WriteGrant,
        WriteGrants,
    };

    #[tokio::test]
    async fn the_hosts_requests_name_the_host_and_a_plugins_writes_name_the_plugin() {
        let server = DevServer::start(Options::default()).await.unwrap();
        let mut config = kube::Config::new(server.url().parse().unwrap());
        config.default_retry = false;
        let client = build(config, &ConnectionOptions::default()).unwrap();
        let writes = WriteClient::new(
            client.clone(),
            "pod-diff".into(),
            WriteGrants::only(vec![
                WriteGrant::new(ResourcePattern::new("", "ConfigMap"), None).unwrap(),
            ]),
            ClientOptions::default(),
            Arc::new(Resources::new(client.clone())),
            Arc::new(NoWriteObserver),
        );
        writes
            .create(
                r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"default"}}"#,
            )
            .await
            .unwrap();
        let api: kube::Api<ConfigMap> = kube::Api::namespaced(client, "default");
        api.get("a").await.unwrap();

        let agents: Vec<(Verb, String)> = server
            .requests()
            .into_iter()
            .map(|r| (r.verb, r.user_agent))
            .collect();
        let version = env!("CARGO_PKG_VERSION");
        assert_eq!(
            agents,
            [
                (Verb::Create, format!("kubewasm/{version} plugin/pod-diff")),
                (Verb::Get, format!("kubewasm/{version}")),
            ]
        );
        server.shutdown().await;
    }

    /// With an account, a plugin's writes (and its Events) say `Impersonate-User`; the host's
    /// own requests (here a GET, as an informer's) never do.
    #[tokio::test]
    async fn a_plugins_writes_impersonate_its_account_and_the_hosts_requests_do_not() {
        use kubewasm_runtime::{Namespace, PluginAccount};
        let server = DevServer::start(Options::default()).await.unwrap();
        let mut config = kube::Config::new(server.url().parse().unwrap());
        config.default_retry = false;
        let client = build(config, &ConnectionOptions::default()).unwrap();
        let account =
            PluginAccount::for_plugin(&Namespace::new("plugins").unwrap(), "mirror").unwrap();
        let writer = |account: Option<&PluginAccount>| {
            WriteClient::new(
                client.clone(),
                "mirror".into(),
                WriteGrants::only(vec![
                    WriteGrant::new(ResourcePattern::new("", "ConfigMap"), None).unwrap(),
                ]),
                ClientOptions::default(),
                Arc::new(Resources::new(client.clone())),
                Arc::new(NoWriteObserver),
            )
            .impersonating(account)
        };
        let object = |name: &str| {
            format!(
                r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"default"}}}}"#
            )
        };
        writer(Some(&account)).create(&object("a")).await.unwrap();
        writer(None).create(&object("b")).await.unwrap();
        let api: kube::Api<ConfigMap> = kube::Api::namespaced(client, "default");
        api.get("a").await.unwrap();

        let impersonated: Vec<(Verb, Option<String>)> = server
            .requests()
            .into_iter()
            .map(|r| (r.verb, r.impersonate_user))
            .collect();
        assert_eq!(
            impersonated,
            [
                (
                    Verb::Create,
                    Some("system:serviceaccount:plugins:plugin-mirror".to_owned())
                ),
                (Verb::Create, None),
                (Verb::Get, None),
            ]
        );
        server.shutdown().await;
    }

    #[test]
    fn zero_durations_are_refused_by_name() {
        assert!(ConnectionOptions::default().validate().is_ok());
        let err = ConnectionOptions {
            http2_ping_timeout: Duration::ZERO,
            ..ConnectionOptions::default()
        }
        .validate()
        .unwrap_err();
        assert!(err.contains("http2-ping-timeout-seconds"), "{err}");
    }
}
