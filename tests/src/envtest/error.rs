//! What went wrong starting or driving the servers, and the variable that names their assets
//! (the errors about missing assets name it).

use std::path::PathBuf;
use std::time::Duration;

/// The environment variable naming the folder with `kube-apiserver` and `etcd`.
pub const ASSETS_VAR: &str = "KUBEBUILDER_ASSETS";

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

pub(super) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}
