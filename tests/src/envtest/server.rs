//! etcd and kube-apiserver started from the envtest assets, stopped, restarted and compacted.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::distr::{Alphanumeric, SampleString};

use super::connection::{Connection, User, client_from, kubeconfig};
use super::error::{ASSETS_VAR, Error, io};
use super::process::Process;
use super::{audit, etcd, pki};

/// How long the API server may take to answer `/readyz` with 200 (it takes about 3 s).
const READY_TIMEOUT: Duration = Duration::from_secs(90);

/// etcd and kube-apiserver on free loopback ports, in a temporary directory.
///
/// Dropping it kills both processes and removes the directory (also when a test panics); if
/// the test process is killed instead, the kernel kills the servers. What a test reads and
/// writes through is its [`Connection`] (`Deref`), the same as a
/// [`SharedEnvtest`](super::SharedEnvtest)'s.
pub struct Envtest {
    /// `None` while stopped ([`Envtest::stop_api_server`]).
    api_server: Mutex<Option<Process>>,
    etcd_process: Process,
    etcd: etcd::Gateway,
    assets: PathBuf,
    /// kube-apiserver flags added to the harness's own.
    extra_flags: Vec<String>,
    pub(super) connection: Connection,
    /// Dropped last: the processes above still write into it until they are killed.
    pub(super) dir: tempfile::TempDir,
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

    /// As [`Envtest::start`], kube-apiserver also given `flags` (such as
    /// `--feature-gates=DRAListTypeAttributes=true` or `--runtime-config=...`): for the fields
    /// and API versions a default server leaves out.
    pub async fn start_with_flags(flags: &[&str]) -> Result<Envtest, Error> {
        Envtest::start_in(&assets_from_env()?, flags).await
    }

    /// As [`Envtest::start`], with the assets folder given.
    pub async fn start_with(assets: &Path) -> Result<Envtest, Error> {
        Envtest::start_in(assets, &[]).await
    }

    async fn start_in(assets: &Path, flags: &[&str]) -> Result<Envtest, Error> {
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
            extra_flags: flags.iter().map(|f| (*f).to_owned()).collect(),
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
        let mut args = vec![
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
        args.extend(self.extra_flags.iter().cloned());
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
