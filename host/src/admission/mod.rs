//! Admission: plugins of contract 0.3 answer the API server's validating and mutating
//! webhooks (`admission.k8s.io/v1`) from the same shared cache the controllers read.
//!
//! [`declaration`] is what a policy declares (rules, failure policy, selectors, timeout),
//! (whether its rules stay inside its plugin's grants is the plugin runtime's question,
//! `plugin/webhook_grants.rs`),
//! [`review`] the AdmissionReview request and response, [`registry`] the policies being
//! served, [`server`] the HTTPS endpoint (`--webhook-addr`), [`tls`] its certificate, re-read
//! when its files change, and [`configuration`] the webhook configurations `kubewasm webhooks`
//! prints. [`loopback_cert`] is a certificate made in memory for an endpoint on loopback, and
//! [`loopback`] such an endpoint with its configurations kept in an API server on the same
//! machine (`kubewasm test`, and `kubewasm dev` without `--webhook-cert`).

pub mod configuration;
pub mod declaration;
pub mod loopback;
pub mod loopback_cert;
pub mod metrics;
pub mod registry;
pub mod review;
pub mod server;
pub mod tls;

pub use declaration::{Declaration, FailurePolicy, WebhookKind};
pub use metrics::AdmissionMetrics;
pub(crate) use registry::AdmissionRegistration;
pub use registry::AdmissionRegistry;
