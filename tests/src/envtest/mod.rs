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
mod connection;
mod error;
mod etcd;
mod pki;
mod process;
mod server;
pub mod shared;

pub use audit::AuditEvent;
pub use connection::{Connection, User};
pub use error::{ASSETS_VAR, Error};
pub use server::{Envtest, SecondApiServer, assets_from_env};
pub use shared::SharedEnvtest;
