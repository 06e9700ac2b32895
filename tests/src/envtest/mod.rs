//! A real Kubernetes API server for tests: etcd and kube-apiserver started from the envtest
//! assets (`KUBEBUILDER_ASSETS`, the folder controller-runtime's `setup-envtest` fills), with
//! generated certificates, an admin and a restricted user, an audit log of LISTs and WATCHes,
//! and the faults a real cluster has: an API server restart and an etcd compaction.
//!
//! ```no_run
//! # async fn demo() -> Result<(), kubewasm_tests::envtest::Error> {
//! use kubewasm_tests::envtest::Envtest;
//! let server = Envtest::start().await?; // about 3 s
//! let client = server.admin();           // a kube::Client (system:masters)
//! # let _ = client;
//! server.restart_api_server().await?;    // every watch ends; etcd keeps the data
//! server.compact_etcd().await?;          // every resourceVersion so far answers 410 Gone
//! # Ok(()) }
//! ```

mod audit;
mod etcd;
mod pki;
mod process;
pub mod shared;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::distr::{Alphanumeric, SampleString};

pub use audit::AuditEvent;
use process::Process;
pub use shared::SharedEnvtest;

/// The environment variable naming the folder with `kube-apiserver` and `etcd`.
pub const ASSETS_VAR: &str = "KUBEBUILDER_ASSETS";

/// How long the API server may take to answer `/readyz` with 200 (it takes about 3 s).
const READY_TIMEOUT: Duration = Duration::from_secs(90);

/// What went wrong starting or driving the servers.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The variable is unset: there is no real API server to test against.
    #[error(
        "{ASSETS_VAR} is not set: point it at a folder holding kube-apiserver and etcd \
         (this repository's CI uses ../shared/envtest/bin; setup-envtest prints one)"
    )]
    NoAssets,
    /// The assets folder lacks a binary.
    #[error("{binary} is not in {ASSETS_VAR}={}", .dir.display())]
    MissingBinary { binary: &'static str, dir: PathBuf },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("generating certificates and keys: {0}")]
    Pki(#[from] rcgen::Error),
    /// A server process ended while it was being waited for.
    #[error("{name} exited ({status}) before it was ready\n{log}")]
    Exited {
        name: &'static str,
        status: String,
        log: String,
    },
    #[error("kube-apiserver did not answer /readyz with 200 within {timeout:?}\n{log}")]
    NotReady { timeout: Duration, log: String },
    #[error("building a client from {}: {source}", .kubeconfig.display())]
    Client {
        kubeconfig: PathBuf,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("requesting a token for service account {account}: {source}")]
    Token {
        account: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("etcd gateway: {0}")]
    Etcd(String),
    /// The shared API server could not be started or reached.
    #[error("the shared API server: {0}")]
    Shared(String),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

/// Who a client or kubeconfig authenticates as (static tokens).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum User {
    /// `admin`, in `system:masters`: allowed everything.
    Admin,
    /// `restricted`, in no group but `system:authenticated`: allowed nothing until RBAC grants
    /// it, so a test can check that generated RBAC is enough and no more.
    Restricted,
}

impl User {
    /// The user name the API server sees (and audits).
    pub fn name(self) -> &'static str {
        match self {
            User::Admin => "admin",
            User::Restricted => "restricted",
        }
    }
}

/// etcd and kube-apiserver on free loopback ports, in a temporary directory.
///
/// Dropping it kills both processes and removes the directory (also when a test panics); if
/// the test process is killed instead, the kernel kills the servers. What a test reads and
/// writes through is its [`Connection`] (`Deref`), the same as a [`SharedEnvtest`]'s.
pub struct Envtest {
    /// `None` while stopped ([`Envtest::stop_api_server`]).
    api_server: Mutex<Option<Process>>,
    etcd_process: Process,
    etcd: etcd::Gateway,
    assets: PathBuf,
    connection: Connection,
    /// Dropped last: the processes above still write into it until they are killed.
    dir: tempfile::TempDir,
}

/// A running API server as the tests see it: its URL, clients and kubeconfigs for both users,
/// and its audit log, all from the harness's directory (which holds the CA, the kubeconfigs and
/// the audit log). It neither starts nor stops anything.
pub struct Connection {
    dir: PathBuf,
    api_port: u16,
    admin: kube::Client,
    restricted: kube::Client,
}

impl Connection {
    /// Clients for the API server on `api_port` whose harness directory is `dir`.
    async fn open(dir: &Path, api_port: u16) -> Result<Connection, Error> {
        Ok(Connection {
            admin: client_from(&dir.join("admin.kubeconfig")).await?,
            restricted: client_from(&dir.join("restricted.kubeconfig")).await?,
            dir: dir.to_owned(),
            api_port,
        })
    }

    /// The API server's URL, e.g. `https://127.0.0.1:41234`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.api_port)
    }

    /// A client authenticated as [`User::Admin`].
    pub fn admin(&self) -> kube::Client {
        self.admin.clone()
    }

    /// A client authenticated as [`User::Restricted`].
    pub fn restricted(&self) -> kube::Client {
        self.restricted.clone()
    }

    /// A kubeconfig file for `user` (for `kubectl --kubeconfig`, `kubewasm run --kubeconfig`
    /// or `KUBECONFIG`). It stays valid across API server restarts.
    pub fn kubeconfig(&self, user: User) -> PathBuf {
        self.dir.join(format!("{}.kubeconfig", user.name()))
    }

    /// A kubeconfig file that authenticates as service account `namespace/name`, with a token
    /// from the TokenRequest API (the harness runs no token controller, so no token Secret
    /// appears by itself). The account must exist; the token is valid for an hour and across
    /// API server restarts. Run a host as the account its generated RBAC binds to with this.
    pub async fn service_account_kubeconfig(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<PathBuf, Error> {
        use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
        use k8s_openapi::api::core::v1::ServiceAccount;
        let request = TokenRequest {
            spec: TokenRequestSpec {
                expiration_seconds: Some(3600),
                ..TokenRequestSpec::default()
            },
            ..TokenRequest::default()
        };
        let answer = kube::Api::<ServiceAccount>::namespaced(self.admin(), namespace)
            .create_token_request(name, &Default::default(), &request)
            .await
            .map_err(|e| Error::Token {
                account: format!("{namespace}/{name}"),
                source: Box::new(e),
            })?;
        let token = answer.status.map(|s| s.token).unwrap_or_default();
        let user = format!("sa-{namespace}-{name}");
        let path = self.dir.join(format!("{user}.kubeconfig"));
        let text = kubeconfig(&self.url(), &self.dir.join("ca.crt"), &user, &token);
        std::fs::write(&path, text).map_err(io(format!("writing {}", path.display())))?;
        Ok(path)
    }

    /// Every LIST and WATCH the API server received so far, oldest first, across restarts.
    pub fn audit_events(&self) -> Result<Vec<AuditEvent>, Error> {
        let path = self.dir.join("audit.log");
        audit::read(&path).map_err(io(format!("reading {}", path.display())))
    }
}

impl std::ops::Deref for Envtest {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        &self.connection
    }
}

impl Envtest {
    /// Starts etcd and kube-apiserver from the folder named by `KUBEBUILDER_ASSETS` and waits
    /// until the API server is ready.
    pub async fn start() -> Result<Envtest, Error> {
        Envtest::start_with(&assets_from_env()?).await
    }

    /// As [`Envtest::start`], with the assets folder given.
    pub async fn start_with(assets: &Path) -> Result<Envtest, Error> {
        for binary in ["etcd", "kube-apiserver"] {
            if !assets.join(binary).is_file() {
                return Err(Error::MissingBinary {
                    binary,
                    dir: assets.to_owned(),
                });
            }
        }
        let dir = tempfile::Builder::new()
            .prefix("kubewasm-envtest-")
            .tempdir()
            .map_err(io("creating the envtest directory"))?;
        let root = dir.path();
        let pki = pki::Pki::generate()?;
        let admin_token = Alphanumeric.sample_string(&mut rand::rng(), 32);
        let restricted_token = Alphanumeric.sample_string(&mut rand::rng(), 32);
        let files = [
            ("ca.crt", pki.ca_cert.clone()),
            ("serving.crt", pki.serving_cert),
            ("serving.key", pki.serving_key),
            ("sa.key", pki.service_account_key),
            ("sa.pub", pki.service_account_public_key),
            ("audit-policy.yaml", audit::POLICY.to_owned()),
            (
                "tokens.csv",
                format!(
                    "{admin_token},admin,admin,system:masters\n\
                     {restricted_token},restricted,restricted\n"
                ),
            ),
        ];
        for (name, text) in files {
            std::fs::write(root.join(name), text).map_err(io(format!("writing {name}")))?;
        }
        let [etcd_port, peer_port, api_port] = free_ports()?;
        let etcd = Process::spawn(
            "etcd",
            &assets.join("etcd"),
            etcd_args(root, etcd_port, peer_port),
            root.join("etcd.log"),
        )
        .map_err(io("starting etcd"))?;
        let url = format!("https://127.0.0.1:{api_port}");
        let ca = root.join("ca.crt");
        let admin_config = root.join("admin.kubeconfig");
        let restricted_config = root.join("restricted.kubeconfig");
        for (path, user, token) in [
            (&admin_config, User::Admin, &admin_token),
            (&restricted_config, User::Restricted, &restricted_token),
        ] {
            std::fs::write(path, kubeconfig(&url, &ca, user.name(), token))
                .map_err(io(format!("writing {}", path.display())))?;
        }
        let server = Envtest {
            api_server: Mutex::new(None),
            etcd_process: etcd,
            etcd: etcd::Gateway { port: etcd_port },
            assets: assets.to_owned(),
            connection: Connection::open(root, api_port).await?,
            dir,
        };
        server.start_api_server().await?;
        Ok(server)
    }

    /// Kills the API server (as a crash would): every open watch ends and requests are refused
    /// until [`Envtest::start_api_server`]. etcd and its data stay.
    pub fn stop_api_server(&self) {
        drop(self.lock_api_server().take());
    }

    /// Starts the API server again on the same port, if it is stopped, and waits until it is
    /// ready. Its watch cache starts afresh at the latest write: a watch from an older
    /// resourceVersion answers 410 Gone.
    pub async fn start_api_server(&self) -> Result<(), Error> {
        {
            let mut running = self.lock_api_server();
            if running.is_some() {
                return Ok(());
            }
            *running = Some(self.spawn_api_server(
                self.connection.api_port,
                "audit.log",
                "kube-apiserver.log",
            )?);
        }
        self.wait_ready(&self.connection.admin, || {
            let mut guard = self.lock_api_server();
            let process = guard.as_mut()?;
            process.exited().map(|status| Error::Exited {
                name: "kube-apiserver",
                status,
                log: process.log_tail(),
            })
        })
        .await
    }

    /// [`Envtest::stop_api_server`] then [`Envtest::start_api_server`].
    pub async fn restart_api_server(&self) -> Result<(), Error> {
        self.stop_api_server();
        self.start_api_server().await
    }

    /// A second API server on the same etcd and another port, ready. Writes made through it
    /// while the main one is stopped are changes that the main one's watchers never saw.
    pub async fn second_api_server(&self) -> Result<SecondApiServer, Error> {
        let port = free_ports::<1>()?[0];
        let mut process =
            self.spawn_api_server(port, "audit-second.log", "kube-apiserver-second.log")?;
        let admin = std::fs::read_to_string(self.kubeconfig(User::Admin))
            .map_err(io("reading the admin kubeconfig"))?;
        let config = self.dir.path().join("second.kubeconfig");
        let text = admin.replace(&self.url(), &format!("https://127.0.0.1:{port}"));
        std::fs::write(&config, text).map_err(io("writing second.kubeconfig"))?;
        let client = client_from(&config).await?;
        self.wait_ready(&client, || {
            process.exited().map(|status| Error::Exited {
                name: "second kube-apiserver",
                status,
                log: process.log_tail(),
            })
        })
        .await?;
        Ok(SecondApiServer {
            _process: process,
            client,
        })
    }

    /// Compacts etcd's history up to its current revision (which it returns): a watch or list
    /// from an older resourceVersion can no longer be served from etcd.
    pub async fn compact_etcd(&self) -> Result<i64, Error> {
        self.etcd.compact().await
    }

    /// etcd's current revision (what the API server hands out as resourceVersions).
    pub async fn etcd_revision(&self) -> Result<i64, Error> {
        self.etcd.revision().await
    }

    /// The ids of the running etcd and kube-apiserver processes (each leads its own process
    /// group), for checking that nothing outlives the harness.
    pub fn process_ids(&self) -> Vec<u32> {
        let api_server = self.lock_api_server().as_ref().map(Process::id);
        std::iter::once(self.etcd_process.id())
            .chain(api_server)
            .collect()
    }

    fn lock_api_server(&self) -> std::sync::MutexGuard<'_, Option<Process>> {
        self.api_server.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn spawn_api_server(&self, port: u16, audit_log: &str, log: &str) -> Result<Process, Error> {
        let root = self.dir.path();
        let path = |name: &str| root.join(name).display().to_string();
        let args = vec![
            format!("--etcd-servers=http://127.0.0.1:{}", self.etcd.port),
            format!("--cert-dir={}", path("certs")),
            format!("--tls-cert-file={}", path("serving.crt")),
            format!("--tls-private-key-file={}", path("serving.key")),
            "--bind-address=127.0.0.1".to_owned(),
            format!("--secure-port={port}"),
            "--service-account-issuer=https://kubernetes.default.svc".to_owned(),
            format!("--service-account-key-file={}", path("sa.pub")),
            format!("--service-account-signing-key-file={}", path("sa.key")),
            "--service-cluster-ip-range=10.0.0.0/24".to_owned(),
            "--authorization-mode=RBAC".to_owned(),
            format!("--token-auth-file={}", path("tokens.csv")),
            "--disable-admission-plugins=ServiceAccount".to_owned(),
            format!("--audit-policy-file={}", path("audit-policy.yaml")),
            format!("--audit-log-path={}", path(audit_log)),
        ];
        Process::spawn(
            "kube-apiserver",
            &self.assets.join("kube-apiserver"),
            args,
            root.join(log),
        )
        .map_err(io("starting kube-apiserver"))
    }

    /// Polls `/readyz` every 100 ms until it answers 200, `exited` reports the process gone,
    /// or [`READY_TIMEOUT`] passes.
    async fn wait_ready(
        &self,
        client: &kube::Client,
        mut exited: impl FnMut() -> Option<Error>,
    ) -> Result<(), Error> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(error) = exited() {
                return Err(error);
            }
            let request = http::Request::get("/readyz").body(Vec::new());
            if let Ok(request) = request
                && client.request_text(request).await.is_ok()
            {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let log = self.lock_api_server().as_ref().map(Process::log_tail);
                return Err(Error::NotReady {
                    timeout: READY_TIMEOUT,
                    log: log.unwrap_or_default(),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// An extra API server on the harness's etcd; killed when dropped.
pub struct SecondApiServer {
    _process: Process,
    client: kube::Client,
}

impl SecondApiServer {
    /// A client for it, authenticated as [`User::Admin`].
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }
}

/// The assets folder named by `KUBEBUILDER_ASSETS` (relative paths are taken from the current
/// directory).
pub fn assets_from_env() -> Result<PathBuf, Error> {
    let dir = std::env::var_os(ASSETS_VAR)
        .filter(|v| !v.is_empty())
        .ok_or(Error::NoAssets)?;
    std::path::absolute(PathBuf::from(dir)).map_err(io("resolving the assets path"))
}

fn etcd_args(root: &Path, port: u16, peer_port: u16) -> Vec<String> {
    vec![
        format!("--data-dir={}", root.join("etcd").display()),
        format!("--listen-client-urls=http://127.0.0.1:{port}"),
        format!("--advertise-client-urls=http://127.0.0.1:{port}"),
        format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"),
        format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"),
        "--unsafe-no-fsync".to_owned(),
        "--log-level=warn".to_owned(),
    ]
}

/// `N` distinct free loopback ports (held together while chosen, so they differ).
fn free_ports<const N: usize>() -> Result<[u16; N], Error> {
    let listeners = (0..N)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(io("finding a free port"))?;
    let mut ports = [0; N];
    for (port, listener) in ports.iter_mut().zip(&listeners) {
        *port = listener
            .local_addr()
            .map_err(io("finding a free port"))?
            .port();
    }
    Ok(ports)
}

fn kubeconfig(url: &str, ca: &Path, name: &str, token: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: envtest\n  cluster:\n    server: {url}\n    \
         certificate-authority: {}\nusers:\n- name: {name}\n  user:\n    token: {token}\n\
         contexts:\n- name: {name}\n  context:\n    cluster: envtest\n    user: {name}\n\
         current-context: {name}\n",
        ca.display()
    )
}

async fn client_from(path: &Path) -> Result<kube::Client, Error> {
    let failed = |source: Box<dyn std::error::Error + Send + Sync>| Error::Client {
        kubeconfig: path.to_owned(),
        source,
    };
    let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(|e| failed(e.into()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .map_err(|e| failed(e.into()))?;
    kube::Client::try_from(config).map_err(|e| failed(e.into()))
}
