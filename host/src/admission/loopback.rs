//! The webhook endpoint on loopback, for an API server on the same machine (the embedded one of
//! `kubewasm test` and `kubewasm dev`): served on an ephemeral port of 127.0.0.1 with a
//! [`LoopbackCert`], and the webhook configurations `kubewasm webhooks --url` would print
//! (pointed at it, its CA as `caBundle`) kept in that API server in step with the policies
//! loaded, so its admission chain calls the plugins as a cluster's would.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use anyhow::Context as _;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::configuration::{
    Endpoint, Trust, {self},
};
use super::loopback_cert::LoopbackCert;
use super::metrics::AdmissionMetrics;
use kubewasm_runtime::admission::declaration::Declaration;
use kubewasm_runtime::admission::registry::AdmissionRegistry;

/// The prefix of each plugin's configurations, `kubewasm-LABEL` (as `kubewasm webhooks`
/// names them).
pub const CONFIGURATION_PREFIX: &str = "kubewasm";
/// The name of the two configurations every policy shared before each got its own: deleted
/// when found.
const LEGACY_NAME: &str = "kubewasm";
/// The field manager the configurations are applied as.
const FIELD_MANAGER: &str = "kubewasm";
/// How soon configurations that could not be stored are tried again without a change.
const RETRY: std::time::Duration = std::time::Duration::from_secs(10);

/// What one [`LoopbackWebhooks::sync_each`] stored.
#[derive(Debug, Default)]
pub struct Synced {
    /// Webhooks configured, over every plugin whose configurations were stored.
    pub configured: usize,
    /// Why a plugin's configurations could not be stored, by plugin name (the configurations
    /// it had stay as they were).
    pub failed: BTreeMap<String, String>,
    /// Why configurations of plugins no longer loaded could not be deleted.
    pub cleanup: Option<String>,
}

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
            CONFIGURATION_PREFIX,
            declarations,
            &Endpoint::Url(self.url.clone()),
            Trust::Bundle(self.cert.ca_pem().as_bytes()),
        )
    }

    /// [`sync_each`](Self::sync_each), an error naming every plugin whose configurations
    /// could not be stored; else how many webhooks are configured.
    pub async fn sync(&self, declarations: &[(String, Declaration)]) -> anyhow::Result<usize> {
        let synced = self.sync_each(declarations).await;
        if !synced.failed.is_empty() {
            let failed: Vec<String> = synced
                .failed
                .iter()
                .map(|(p, e)| format!("{p:?}: {e}"))
                .collect();
            anyhow::bail!(
                "the webhook configurations of {} could not be stored: {}",
                if failed.len() == 1 {
                    "a policy"
                } else {
                    "policies"
                },
                failed.join("; ")
            );
        }
        if let Some(cleanup) = synced.cleanup {
            anyhow::bail!(cleanup);
        }
        Ok(synced.configured)
    }

    /// Makes the API server's configurations those of `declarations`, each plugin's apart:
    /// each plugin's own configurations applied (created or replaced; one the server refuses
    /// fails that plugin alone), and every other configuration made here (of plugins no
    /// longer loaded, of a kind a plugin no longer declares, and the shared ones named
    /// `kubewasm` of earlier versions) deleted.
    pub async fn sync_each(&self, declarations: &[(String, Declaration)]) -> Synced {
        let mut synced = Synced::default();
        let mut wanted: BTreeSet<(String, String)> = BTreeSet::new();
        let mutating: Api<MutatingWebhookConfiguration> = Api::all(self.client.clone());
        let validating: Api<ValidatingWebhookConfiguration> = Api::all(self.client.clone());
        let endpoint = Endpoint::Url(self.url.clone());
        let trust = Trust::Bundle(self.cert.ca_pem().as_bytes());
        for (plugin, declaration) in declarations {
            let manifests = configuration::plugin_manifests(
                CONFIGURATION_PREFIX,
                plugin,
                declaration,
                &endpoint,
                trust,
            );
            let mut result = Ok(());
            for manifest in &manifests {
                let kind = manifest["kind"].as_str().unwrap_or_default().to_owned();
                let name = manifest["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                wanted.insert((kind.clone(), name));
                if result.is_ok() {
                    result = match kind.as_str() {
                        "MutatingWebhookConfiguration" => apply(&mutating, manifest).await,
                        _ => apply(&validating, manifest).await,
                    };
                }
            }
            match result {
                Ok(()) => synced.configured += manifests.len(),
                Err(err) => {
                    synced.failed.insert(plugin.clone(), format!("{err:#}"));
                }
            }
        }
        let cleaned = async {
            delete_others(&mutating, "MutatingWebhookConfiguration", &wanted).await?;
            delete_others(&validating, "ValidatingWebhookConfiguration", &wanted).await
        };
        if let Err(err) = cleaned.await {
            synced.cleanup = Some(format!("{err:#}"));
        }
        synced
    }

    /// Keeps the configurations in step with `registry` (a plugin loaded, replaced or
    /// unloaded) until `cancel` fires. A plugin whose configurations cannot be stored is
    /// logged once per change of its error, recorded in `registry` (for `/plugins` and
    /// `/readyz`), and tried again at the next change or after a while; the others are
    /// configured all the same.
    pub async fn follow(self, registry: AdmissionRegistry, cancel: CancellationToken) {
        let mut changes = registry.subscribe();
        changes.mark_changed();
        let mut configured = 0;
        let mut failed: BTreeMap<String, String> = BTreeMap::new();
        loop {
            let waiting = !failed.is_empty();
            let retry = async move {
                if !waiting {
                    std::future::pending::<()>().await;
                }
                tokio::time::sleep(RETRY).await;
            };
            tokio::select! {
                () = cancel.cancelled() => break,
                changed = changes.changed() => if changed.is_err() { break },
                () = retry => {}
            }
            let declarations = registry.declarations();
            let synced = self.sync_each(&declarations).await;
            for (plugin, error) in &synced.failed {
                if failed.get(plugin) != Some(error) {
                    tracing::warn!(
                        plugin = %plugin,
                        error = %error,
                        "cannot store this admission policy's webhook configurations in the \
                         development API server: it is not called (the other policies are)"
                    );
                }
            }
            for plugin in failed.keys() {
                if !synced.failed.contains_key(plugin)
                    && declarations.iter().any(|(p, _)| p == plugin)
                {
                    tracing::info!(
                        plugin = %plugin,
                        "this admission policy's webhook configurations are stored now"
                    );
                }
            }
            if let Some(cleanup) = &synced.cleanup {
                tracing::warn!(
                    error = %cleanup,
                    "cannot delete the webhook configurations of admission policies no longer \
                     loaded from the development API server"
                );
            }
            registry.set_unconfigured(synced.failed.clone());
            failed = synced.failed;
            let n = synced.configured;
            if n == 0 && configured > 0 {
                tracing::info!(
                    "no admission policy is configured: the webhook configurations were \
                     removed from the development API server"
                );
            } else if n != configured {
                let plugins: Vec<&str> = declarations
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .filter(|n| !failed.contains_key(*n))
                    .collect();
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
        let _ = self.task.await;
    }
}

/// Applies `manifest` (server-side apply, forced) as the configuration it names.
async fn apply<K>(api: &Api<K>, manifest: &Value) -> anyhow::Result<()>
where
    K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let name = manifest["metadata"]["name"].as_str().unwrap_or_default();
    let kind = manifest["kind"].as_str().unwrap_or_default();
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(manifest),
    )
    .await
    .with_context(|| format!("applying the {kind} {name}"))?;
    Ok(())
}

/// Deletes every configuration of `api` made here (labelled as such) that `wanted` does not
/// name, and the shared one of earlier versions.
async fn delete_others<K>(
    api: &Api<K>,
    kind: &str,
    wanted: &BTreeSet<(String, String)>,
) -> anyhow::Result<()>
where
    K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let selector = format!("{}=kubewasm", configuration::MANAGED_BY);
    let listed = api
        .list_metadata(&ListParams::default().labels(&selector))
        .await
        .with_context(|| format!("listing the {kind}s"))?;
    let mut names: Vec<String> = listed
        .items
        .into_iter()
        .filter_map(|m| m.metadata.name)
        .filter(|n| !wanted.contains(&(kind.to_owned(), n.clone())))
        .collect();
    names.push(LEGACY_NAME.to_owned());
    for name in names {
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(err) => {
                return Err(err).with_context(|| format!("deleting the {kind} {name}"));
            }
        }
    }
    Ok(())
}
