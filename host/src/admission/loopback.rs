//! The webhook endpoint on loopback, for an API server on the same machine (the embedded one of
//! `kubewasm test` and `kubewasm dev`): served on an ephemeral port of 127.0.0.1 with a
//! [`LoopbackCert`], and the webhook configurations `kubewasm webhooks --url` would print
//! (pointed at it, its CA as `caBundle`) kept in that API server in step with the policies
//! loaded, so its admission chain calls the plugins as a cluster's would.

use std::net::SocketAddr;

use anyhow::Context as _;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::configuration::{self, Endpoint, Trust};
use super::declaration::Declaration;
use super::loopback_cert::LoopbackCert;
use super::metrics::AdmissionMetrics;
use super::registry::AdmissionRegistry;

/// The name of the two webhook configurations (as `kubewasm webhooks` names them).
pub const CONFIGURATION_NAME: &str = "kubewasm";
/// The field manager the configurations are applied as.
const FIELD_MANAGER: &str = "kubewasm";

/// The running endpoint and the API server it configures.
pub struct LoopbackWebhooks {
    url: String,
    cert: LoopbackCert,
    client: kube::Client,
    task: tokio::task::JoinHandle<()>,
}

impl LoopbackWebhooks {
    /// Makes a certificate and serves the policies of `registry` on 127.0.0.1 (a free port)
    /// until `cancel` fires; [`sync`](Self::sync) configures the API server of `client`.
    pub async fn start(
        registry: AdmissionRegistry,
        metrics: AdmissionMetrics,
        client: kube::Client,
        cancel: CancellationToken,
    ) -> anyhow::Result<LoopbackWebhooks> {
        let cert = LoopbackCert::generate()?;
        let (addr, task) = super::server::serve_with(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            cert.server_config()?,
            registry,
            metrics,
            cancel,
        )
        .await?;
        Ok(LoopbackWebhooks {
            url: format!("https://{addr}"),
            cert,
            client,
            task,
        })
    }

    /// The endpoint's base URL, `https://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The configurations for `declarations`, pointed at this endpoint.
    pub fn manifests(&self, declarations: &[(String, Declaration)]) -> Vec<Value> {
        configuration::manifests(
            CONFIGURATION_NAME,
            declarations,
            &Endpoint::Url(self.url.clone()),
            Trust::Bundle(self.cert.ca_pem().as_bytes()),
        )
    }

    /// Makes the API server's two configurations those of `declarations`: each kind some
    /// policy declares is applied (created or replaced), a kind none declares is deleted.
    /// Answers how many webhooks are configured.
    pub async fn sync(&self, declarations: &[(String, Declaration)]) -> anyhow::Result<usize> {
        let manifests = self.manifests(declarations);
        let of_kind = |kind: &str| manifests.iter().find(|m| m["kind"] == kind);
        let mutating: Api<MutatingWebhookConfiguration> = Api::all(self.client.clone());
        let validating: Api<ValidatingWebhookConfiguration> = Api::all(self.client.clone());
        put(&mutating, of_kind("MutatingWebhookConfiguration")).await?;
        put(&validating, of_kind("ValidatingWebhookConfiguration")).await?;
        Ok(manifests
            .iter()
            .filter_map(|m| m["webhooks"].as_array())
            .map(Vec::len)
            .sum())
    }

    /// Keeps the configurations in step with `registry` (a plugin loaded, replaced or
    /// unloaded) until `cancel` fires; a failed sync is logged and tried at the next change.
    pub async fn follow(self, registry: AdmissionRegistry, cancel: CancellationToken) {
        let mut changes = registry.subscribe();
        changes.mark_changed();
        let mut configured = 0;
        loop {
            tokio::select! {
                () = cancel.cancelled() => break,
                changed = changes.changed() => if changed.is_err() { break },
            }
            let declarations = registry.declarations();
            match self.sync(&declarations).await {
                Ok(n) => {
                    if n == 0 && configured > 0 {
                        tracing::info!(
                            "no admission policy is loaded: the webhook configurations were \
                             removed from the development API server"
                        );
                    } else if n != configured {
                        let plugins: Vec<&str> =
                            declarations.iter().map(|(n, _)| n.as_str()).collect();
                        tracing::info!(
                            url = %self.url,
                            webhooks = n,
                            plugins = %plugins.join(", "),
                            "admission webhooks configured in the development API server, served \
                             on loopback with a certificate made for this run"
                        );
                    }
                    configured = n;
                }
                Err(err) => tracing::warn!(
                    error = %format!("{err:#}"),
                    "cannot store the webhook configurations in the development API server"
                ),
            }
        }
        let _ = self.task.await;
    }
}

/// Applies `manifest` as the configuration of its kind, or deletes that configuration when
/// there is none.
async fn put<K>(api: &Api<K>, manifest: Option<&Value>) -> anyhow::Result<()>
where
    K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    match manifest {
        Some(manifest) => {
            api.patch(
                CONFIGURATION_NAME,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(manifest),
            )
            .await
            .with_context(|| format!("applying the {}", manifest["kind"]))?;
        }
        None => match api
            .delete(CONFIGURATION_NAME, &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(err) => return Err(err).context("deleting a webhook configuration"),
        },
    }
    Ok(())
}
