//! The `admissionregistration.k8s.io/v1` webhook configurations that send the API server's
//! reviews to the host: for each plugin, a ValidatingWebhookConfiguration and a
//! MutatingWebhookConfiguration of its own (those of the kinds it declared), named
//! `PREFIX-LABEL`, each with the plugin's one webhook pointing at its path on the host's
//! webhook endpoint (a Service, or a URL), and the Service when one is named. A configuration
//! the API server refuses (too large, invalid) is then that plugin's alone: the others stay
//! configured. What `kubewasm webhooks` prints and the tests apply.

use base64::Engine as _;
use serde_json::{Value, json};

use kubewasm_runtime::admission::declaration::{Declaration, WebhookKind};

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

/// The longest plugin name kept as it is in a label; a longer one is cut and hashed.
const MAX_PLAIN_LABEL: usize = 40;

/// A DNS label for `plugin` that no other plugin name maps to: the name itself when it is a
/// DNS label of at most 40 characters without `--`; else the name made one (lowercase, other
/// characters `-`, cut to 40), then `--` and 10 hex digits of the name's SHA-256 (so `a_b`
/// and `a-b` differ, and no hashed label is a plain one: only hashed labels hold `--`).
pub fn webhook_label(plugin: &str) -> String {
    let plain = !plugin.is_empty()
        && plugin.len() <= MAX_PLAIN_LABEL
        && plugin
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !plugin.starts_with('-')
        && !plugin.ends_with('-')
        && !plugin.contains("--");
    if plain {
        return plugin.to_owned();
    }
    let mut base: String = plugin
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(MAX_PLAIN_LABEL)
        .collect();
    base = base.trim_matches('-').to_owned();
    if base.is_empty() {
        base = "plugin".into();
    }
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(plugin.as_bytes());
    let hash: String = digest[..5].iter().map(|b| format!("{b:02x}")).collect();
    format!("{base}--{hash}")
}

/// The webhook's name: the plugin's [`webhook_label`] in `kubewasm.dev` (kube-apiserver wants
/// a DNS subdomain of at least three segments).
pub fn webhook_name(plugin: &str) -> String {
    format!("{}.kubewasm.dev", webhook_label(plugin))
}

/// The name of `plugin`'s configurations (one of each kind): `PREFIX-LABEL`.
pub fn configuration_name(prefix: &str, plugin: &str) -> String {
    format!("{prefix}-{}", webhook_label(plugin))
}

/// The label every configuration made here carries, with the value `kubewasm`: what a
/// configurator lists to delete the configurations of plugins no longer loaded.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// The label naming the plugin a configuration is for (its [`webhook_label`]).
pub const PLUGIN_LABEL: &str = "kubewasm.dev/plugin";

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

/// The configurations (named `PREFIX-LABEL`, `prefix` being `name`) for `plugins`, and the
/// Service when `endpoint` names one.
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
    for (plugin, declaration) in plugins {
        out.extend(plugin_manifests(name, plugin, declaration, endpoint, trust));
    }
    out
}

/// `plugin`'s own configurations: one of each kind it declared, named
/// [`configuration_name`]`(prefix, plugin)`, with its one webhook.
pub fn plugin_manifests(
    prefix: &str,
    plugin: &str,
    declaration: &Declaration,
    endpoint: &Endpoint,
    trust: Trust<'_>,
) -> Vec<Value> {
    let mut out = Vec::new();
    for (kind, config_kind) in [
        (WebhookKind::Mutating, "MutatingWebhookConfiguration"),
        (WebhookKind::Validating, "ValidatingWebhookConfiguration"),
    ] {
        let Some(hook) = declaration.webhook(kind) else {
            continue;
        };
        let path = path(kind, plugin);
        let mut client = match endpoint {
            Endpoint::Service {
                namespace,
                name: service,
                ..
            } => {
                json!({"service": {"namespace": namespace, "name": service, "path": path, "port": 443}})
            }
            Endpoint::Url(base) => {
                json!({"url": format!("{}{path}", base.trim_end_matches('/'))})
            }
        };
        if let Trust::Bundle(ca) = trust {
            client["caBundle"] = base64::engine::general_purpose::STANDARD.encode(ca).into();
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
        let mut configuration = json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": config_kind,
            "metadata": {
                "name": configuration_name(prefix, plugin),
                "labels": {MANAGED_BY: "kubewasm", PLUGIN_LABEL: webhook_label(plugin)},
            },
            "webhooks": [webhook],
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
    use super::*;
    use kubewasm_runtime::admission::declaration::*;

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
        assert!(
            hook["name"].as_str().unwrap().starts_with("unique-host--"),
            "{hook}"
        );
        assert!(
            out[1]["metadata"]["name"]
                .as_str()
                .unwrap()
                .starts_with("kubewasm-unique-host--")
        );
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
        assert_eq!(out[0]["metadata"]["name"], "k-p");
    }

    #[test]
    fn each_plugin_gets_configurations_of_its_own() {
        let both = Declaration {
            mutating: declaration().validating,
            ..declaration()
        };
        let out = manifests(
            "kubewasm",
            &[("a".into(), both), ("b".into(), declaration())],
            &Endpoint::Url("https://127.0.0.1:1".into()),
            Trust::None,
        );
        let names: Vec<(&str, &str)> = out
            .iter()
            .map(|m| {
                (
                    m["kind"].as_str().unwrap(),
                    m["metadata"]["name"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                ("MutatingWebhookConfiguration", "kubewasm-a"),
                ("ValidatingWebhookConfiguration", "kubewasm-a"),
                ("ValidatingWebhookConfiguration", "kubewasm-b"),
            ]
        );
        assert!(
            out.iter()
                .all(|m| m["webhooks"].as_array().unwrap().len() == 1)
        );
        assert_eq!(out[2]["metadata"]["labels"][PLUGIN_LABEL], "b");
    }

    #[test]
    fn webhook_labels_are_unique_per_plugin_name() {
        assert_eq!(webhook_label("unique-ingress-host"), "unique-ingress-host");
        let names = [
            "a_b",
            "a-b",
            "A-b",
            "a--b",
            "a.b",
            "",
            "-",
            "_",
            &"x".repeat(41),
            &"x".repeat(42),
        ];
        let labels: std::collections::BTreeSet<String> =
            names.iter().map(|n| webhook_label(n)).collect();
        assert_eq!(labels.len(), names.len(), "{labels:?}");
        for label in &labels {
            assert!(label.len() <= 63, "{label}");
            assert!(
                label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
                "{label}"
            );
            assert!(!label.starts_with('-') && !label.ends_with('-'), "{label}");
        }
    }
}
