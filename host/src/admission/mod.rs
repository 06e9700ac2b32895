//! Admission: plugins of contract 0.3 answer the API server's validating and mutating
//! webhooks (`admission.k8s.io/v1`) from the same shared cache the controllers read.
//!
//! The plugin runtime (`kubewasm_runtime::admission`) owns what a policy declares, the
//! AdmissionReview types and the registry of policies being served; this module is the host's
//! side: [`server`] the HTTPS endpoint (`--webhook-addr`), [`tls`] its certificate, re-read
//! when its files change, and [`configuration`] the webhook configurations `kubewasm webhooks`
//! prints. [`loopback_cert`] is a certificate made in memory for an endpoint on loopback, and
//! [`loopback`] such an endpoint with its configurations kept in an API server on the same
//! machine (`kubewasm test`, and `kubewasm dev` without `--webhook-cert`).

pub mod configuration;
pub mod loopback;
pub mod loopback_cert;
pub mod metrics;
pub mod server;
pub mod tls;

pub use metrics::AdmissionMetrics;
