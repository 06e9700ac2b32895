//! A running API server as the tests reach it: its users, clients, kubeconfigs and audit log.

use std::path::{Path, PathBuf};

use super::audit::{self, AuditEvent};
use super::error::{Error, io};

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

/// A running API server as the tests see it: its URL, clients and kubeconfigs for both users,
/// and its audit log, all from the harness's directory (which holds the CA, the kubeconfigs and
/// the audit log). It neither starts nor stops anything.
pub struct Connection {
    dir: PathBuf,
    pub(super) api_port: u16,
    pub(super) admin: kube::Client,
    restricted: kube::Client,
}

impl Connection {
    /// Clients for the API server on `api_port` whose harness directory is `dir`.
    pub(super) async fn open(dir: &Path, api_port: u16) -> Result<Connection, Error> {
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

/// A kubeconfig for `name` with a bearer token, trusting the harness's CA.
pub(super) fn kubeconfig(url: &str, ca: &Path, name: &str, token: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: envtest\n  cluster:\n    server: {url}\n    \
         certificate-authority: {}\nusers:\n- name: {name}\n  user:\n    token: {token}\n\
         contexts:\n- name: {name}\n  context:\n    cluster: envtest\n    user: {name}\n\
         current-context: {name}\n",
        ca.display()
    )
}

/// A client from the kubeconfig at `path`.
pub(super) async fn client_from(path: &Path) -> Result<kube::Client, Error> {
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
