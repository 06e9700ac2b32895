//! The `admissionregistration.k8s.io/v1` webhook configurations that send the API server's
//! reviews to the host: one ValidatingWebhookConfiguration and one
//! MutatingWebhookConfiguration, each with one webhook per plugin that declared one, pointing at
//! the plugin's path on the host's webhook endpoint (a Service, or a URL), and the Service when
//! one is named. What `kubewasm webhooks` prints and the tests apply.

use base64::Engine as _;
use serde_json::{Value, json};

use super::declaration::{Declaration, WebhookKind};

/// How the API server reaches the host's webhook endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A Service in front of the host's pods (`--service NS/NAME`): port 443 to `target_port`.
    Service {
        namespace: String,
        name: String,
        target_port: u16,
    },
    /// A URL (`--url https://host:port`), the plugin's path appended.
    Url(String),
}

/// The label the Service selects the host's pods by (as `deploy/kubernetes/kubewasm.yaml`).
pub const POD_LABEL: (&str, &str) = ("app.kubernetes.io/name", "kubewasm");

/// The path of `plugin`'s webhook of `kind` on the endpoint, its name percent-encoded.
pub fn path(kind: WebhookKind, plugin: &str) -> String {
    format!(
        "/{}/{}",
        kind.path_segment(),
        kubewasm_informer::path_segment(plugin)
    )
}

/// The webhook's name: the plugin's, made a DNS subdomain of `kubewasm.dev` (kube-apiserver
/// wants at least three segments).
pub fn webhook_name(plugin: &str) -> String {
    let mut label: String = plugin
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    label.truncate(50);
    let label = label.trim_matches('-');
    let label = if label.is_empty() { "plugin" } else { label };
    format!("{label}.kubewasm.dev")
}

/// How the API server verifies the endpoint's certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust<'a> {
    /// This PEM is the `caBundle`.
    Bundle(&'a [u8]),
    /// cert-manager's CA injector fills the `caBundle` in from this Certificate
    /// (`NAMESPACE/NAME`), through the annotation `cert-manager.io/inject-ca-from`.
    InjectFrom(&'a str),
    /// Left out (filled in by other means).
    None,
}

/// The configurations (named `name`) for `plugins`, and the Service when `endpoint` names one.
pub fn manifests(
    name: &str,
    plugins: &[(String, Declaration)],
    endpoint: &Endpoint,
    trust: Trust<'_>,
) -> Vec<Value> {
    let mut out = Vec::new();
    if let Endpoint::Service {
        namespace,
        name: service,
        target_port,
    } = endpoint
    {
        out.push(json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": service, "namespace": namespace},
            "spec": {
                "selector": {POD_LABEL.0: POD_LABEL.1},
                "ports": [{"name": "webhook", "port": 443, "targetPort": target_port}],
            },
        }));
    }
    for (kind, config_kind) in [
        (WebhookKind::Mutating, "MutatingWebhookConfiguration"),
        (WebhookKind::Validating, "ValidatingWebhookConfiguration"),
    ] {
        let hooks: Vec<Value> = plugins
            .iter()
            .filter_map(|(plugin, d)| Some((plugin, d.webhook(kind)?)))
            .map(|(plugin, hook)| {
                let path = path(kind, plugin);
                let mut client = match endpoint {
                    Endpoint::Service {
                        namespace,
                        name: service,
                        ..
                    } => json!({"service": {"namespace": namespace, "name": service, "path": path, "port": 443}}),
                    Endpoint::Url(base) => {
                        json!({"url": format!("{}{path}", base.trim_end_matches('/'))})
                    }
                };
                if let Trust::Bundle(ca) = trust {
                    client["caBundle"] = base64::engine::general_purpose::STANDARD
                        .encode(ca)
                        .into();
                }
                let mut webhook = json!({
                    "name": webhook_name(plugin),
                    "admissionReviewVersions": ["v1"],
                    "clientConfig": client,
                    "rules": hook.rules,
                    "failurePolicy": hook.failure_policy,
                    "sideEffects": hook.side_effects,
                    "timeoutSeconds": hook.timeout_seconds,
                    "matchPolicy": "Exact",
                });
                if let Some(s) = &hook.namespace_selector {
                    webhook["namespaceSelector"] = json!(s);
                }
                if let Some(s) = &hook.object_selector {
                    webhook["objectSelector"] = json!(s);
                }
                webhook
            })
            .collect();
        if hooks.is_empty() {
            continue;
        }
        let mut configuration = json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": config_kind,
            "metadata": {"name": name},
            "webhooks": hooks,
        });
        if let Trust::InjectFrom(certificate) = trust {
            configuration["metadata"]["annotations"] =
                json!({"cert-manager.io/inject-ca-from": certificate});
        }
        out.push(configuration);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::declaration::*;
    use super::*;

    fn declaration() -> Declaration {
        Declaration {
            validating: Some(Webhook {
                rules: vec![Rule {
                    operations: vec![Operation::Create, Operation::Update],
                    api_groups: vec!["networking.k8s.io".into()],
                    api_versions: vec!["v1".into()],
                    resources: vec!["ingresses".into()],
                    scope: Scope::Namespaced,
                }],
                failure_policy: FailurePolicy::Fail,
                side_effects: SideEffects::None,
                timeout_seconds: 5,
                namespace_selector: None,
                object_selector: None,
            }),
            mutating: None,
        }
    }

    #[test]
    fn a_service_endpoint_gets_its_service_and_one_webhook_per_declared_kind() {
        let out = manifests(
            "kubewasm",
            &[("Unique Host".into(), declaration())],
            &Endpoint::Service {
                namespace: "kubewasm".into(),
                name: "kubewasm-webhooks".into(),
                target_port: 8443,
            },
            Trust::Bundle(b"PEM"),
        );
        assert_eq!(out.len(), 2, "the Service and the validating configuration");
        assert_eq!(out[0]["kind"], "Service");
        assert_eq!(out[0]["spec"]["ports"][0]["targetPort"], 8443);
        let hook = &out[1]["webhooks"][0];
        assert_eq!(out[1]["kind"], "ValidatingWebhookConfiguration");
        assert_eq!(hook["name"], "unique-host.kubewasm.dev");
        assert_eq!(
            hook["clientConfig"]["service"]["path"],
            "/validate/Unique%20Host"
        );
        assert_eq!(hook["clientConfig"]["caBundle"], "UEVN");
        assert_eq!(hook["rules"][0]["operations"], json!(["CREATE", "UPDATE"]));
        assert_eq!(hook["rules"][0]["scope"], "Namespaced");
        assert_eq!(hook["failurePolicy"], "Fail");
        assert_eq!(hook["sideEffects"], "None");
        assert_eq!(hook["timeoutSeconds"], 5);
    }

    #[test]
    fn a_url_endpoint_takes_the_path() {
        let out = manifests(
            "k",
            &[("p".into(), declaration())],
            &Endpoint::Url("https://127.0.0.1:8443/".into()),
            Trust::InjectFrom("kubewasm/kubewasm-webhook"),
        );
        assert_eq!(out.len(), 1);
        assert_eq!(
            out[0]["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            "kubewasm/kubewasm-webhook"
        );
        assert!(
            out[0]["webhooks"][0]["clientConfig"]
                .get("caBundle")
                .is_none()
        );
        assert_eq!(
            out[0]["webhooks"][0]["clientConfig"]["url"],
            "https://127.0.0.1:8443/validate/p"
        );
    }
}
