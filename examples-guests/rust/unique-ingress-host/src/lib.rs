//! A context-aware validating admission policy: an Ingress may not claim a host that another
//! Ingress, in any namespace, already claims.
//!
//! `init` subscribes to Ingresses as a cache-only dependency (no events, no reconcile) and
//! declares the index `host` on `spec.rules.host`; `validate` looks each host of the reviewed
//! Ingress up in that index, in the host's memory, instead of listing Ingresses from the API
//! server. The webhook takes creates and updates of `networking.k8s.io/v1` Ingresses and fails
//! closed (a policy that cannot answer denies).
//!
//! Config (JSON, optional): `{"name": "unique-ingress-host", "timeoutSeconds": 5}`.

wit_bindgen::generate!({
    path: ["../../../wit/0.2", "../../../wit/0.2.1", "../../../wit/0.3"],
    world: "kubewasm:controller/admission-policy@0.3.0",
    generate_all,
});

use exports::kubewasm::controller0_2_0::plugin;
use exports::kubewasm::controller0_3_0::admission;
use kubewasm::controller0_2_0::cache;
use kubewasm::controller0_2_0::types::{
    Gvk, IndexDecl, IndexSource, PageRequest, PluginInfo, Subscription,
};
use kubewasm::controller0_3_0::admission_types::{
    AdmissionInfo, AdmissionRequest, FailurePolicy, Mutation, Operation, Rule, Scope, SideEffects,
    Verdict, Webhook,
};

use std::cell::Cell;

/// The subscription handle of Ingresses (the only subscription).
const INGRESSES: u32 = 0;
const HOST_INDEX: &str = "host";

thread_local! {
    static TIMEOUT: Cell<u32> = const { Cell::new(5) };
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct Config {
    name: Option<String>,
    timeout_seconds: Option<u32>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Ingress {
    metadata: Metadata,
    spec: Spec,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Metadata {
    name: String,
    namespace: String,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Spec {
    rules: Vec<IngressRule>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct IngressRule {
    host: Option<String>,
}

struct Guest;

impl plugin::Guest for Guest {
    fn init(config: String) -> Result<PluginInfo, String> {
        let config: Config = if config.is_empty() {
            Config::default()
        } else {
            serde_json::from_str(&config).map_err(|e| format!("config: {e}"))?
        };
        TIMEOUT.with(|t| t.set(config.timeout_seconds.unwrap_or(5)));
        Ok(PluginInfo {
            name: config.name.unwrap_or_else(|| "unique-ingress-host".into()),
            subscriptions: vec![Subscription {
                gvk: Gvk {
                    group: "networking.k8s.io".into(),
                    version: "v1".into(),
                    kind: "Ingress".into(),
                },
                namespace: None,
                label_selector: None,
                field_selector: None,
                resync_seconds: None,
                events: false,
                queue: Vec::new(),
            }],
            indexes: vec![IndexDecl {
                subscription: INGRESSES,
                name: HOST_INDEX.into(),
                source: IndexSource::Field("spec.rules.host".into()),
            }],
        })
    }
}

impl admission::Guest for Guest {
    fn declare() -> Result<AdmissionInfo, String> {
        Ok(AdmissionInfo {
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
                timeout_seconds: TIMEOUT.with(Cell::get),
                namespace_selector: None,
                object_selector: None,
            }),
            mutating: None,
        })
    }

    fn validate(request: AdmissionRequest) -> Result<Verdict, String> {
        let object = request.object.as_deref().ok_or("no object to validate")?;
        let ingress: Ingress =
            serde_json::from_str(object).map_err(|e| format!("not an Ingress: {e}"))?;
        if !cache::has_synced(INGRESSES).map_err(|e| format!("cache: {e:?}"))? {
            // Answering from a cache still filling would let a duplicate through.
            return Err("the Ingress cache has not synced yet".into());
        }
        let namespace = request.namespace.unwrap_or_default();
        let name = request.name.unwrap_or(ingress.metadata.name);
        for host in ingress.spec.rules.iter().filter_map(|r| r.host.as_deref()) {
            let page = cache::by_index(
                INGRESSES,
                HOST_INDEX,
                host,
                &PageRequest {
                    limit: 2,
                    continue_token: None,
                },
            )
            .map_err(|e| format!("cache: {e:?}"))?;
            for other in page.objects {
                let other: Ingress =
                    serde_json::from_str(&other).map_err(|e| format!("cached Ingress: {e}"))?;
                if other.metadata.namespace != namespace || other.metadata.name != name {
                    return Ok(Verdict {
                        allowed: false,
                        code: 409,
                        message: format!(
                            "host {host:?} is already used by Ingress {}/{}",
                            other.metadata.namespace, other.metadata.name
                        ),
                        warnings: Vec::new(),
                    });
                }
            }
        }
        Ok(Verdict {
            allowed: true,
            code: 0,
            message: String::new(),
            warnings: Vec::new(),
        })
    }

    fn mutate(_request: AdmissionRequest) -> Result<Mutation, String> {
        Err("this policy declares no mutating webhook".into())
    }
}

export!(Guest);
