//! A validating admission policy of the 0.3.0 world `admission-policy`: a new Pod's service
//! account (`spec.serviceAccountName`, `default` when unset) must be a `ServiceAccount` subject
//! of at least one RoleBinding in the Pod's namespace.
//!
//! `init` subscribes to RoleBindings in every namespace as a cache-only dependency and declares
//! the index `subject` on `subjects.name`; `validate` looks the account's name up in that index
//! (in the host's memory) and pages through the bindings with that subject name until one in
//! the Pod's namespace names the account. This is the shape of Kubewarden's RoleBinding-lookup
//! benchmark (a policy answering from thousands of cached RoleBindings). Fails closed.
//!
//! Config (JSON, optional): `{"name": "bound-service-account"}`.

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

/// The subscription handle of RoleBindings (the only subscription).
const ROLE_BINDINGS: u32 = 0;
const SUBJECT_INDEX: &str = "subject";
/// Bindings read per index page.
const PAGE: u32 = 64;

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Config {
    name: Option<String>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Metadata {
    namespace: String,
}

#[derive(serde::Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct PodSpec {
    service_account_name: Option<String>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Pod {
    spec: PodSpec,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Subject {
    kind: String,
    name: String,
    namespace: Option<String>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct RoleBinding {
    metadata: Metadata,
    subjects: Vec<Subject>,
}

impl RoleBinding {
    /// Whether this binding, in `namespace`, names the service account `account` there.
    fn binds(&self, namespace: &str, account: &str) -> bool {
        self.metadata.namespace == namespace
            && self.subjects.iter().any(|s| {
                s.kind == "ServiceAccount"
                    && s.name == account
                    && s.namespace.as_deref().unwrap_or(namespace) == namespace
            })
    }
}

struct Guest;

impl plugin::Guest for Guest {
    fn init(config: String) -> Result<PluginInfo, String> {
        let config: Config = if config.is_empty() {
            Config::default()
        } else {
            serde_json::from_str(&config).map_err(|e| format!("config: {e}"))?
        };
        Ok(PluginInfo {
            name: config
                .name
                .unwrap_or_else(|| "bound-service-account".into()),
            subscriptions: vec![Subscription {
                gvk: Gvk {
                    group: "rbac.authorization.k8s.io".into(),
                    version: "v1".into(),
                    kind: "RoleBinding".into(),
                },
                namespace: None,
                label_selector: None,
                field_selector: None,
                resync_seconds: None,
                events: false,
                queue: Vec::new(),
            }],
            indexes: vec![IndexDecl {
                subscription: ROLE_BINDINGS,
                name: SUBJECT_INDEX.into(),
                source: IndexSource::Field("subjects.name".into()),
            }],
        })
    }
}

fn allow() -> Verdict {
    Verdict {
        allowed: true,
        code: 0,
        message: String::new(),
        warnings: Vec::new(),
    }
}

impl admission::Guest for Guest {
    fn declare() -> Result<AdmissionInfo, String> {
        Ok(AdmissionInfo {
            validating: Some(Webhook {
                rules: vec![Rule {
                    operations: vec![Operation::Create],
                    api_groups: vec![String::new()],
                    api_versions: vec!["v1".into()],
                    resources: vec!["pods".into()],
                    scope: Scope::Namespaced,
                }],
                failure_policy: FailurePolicy::Fail,
                side_effects: SideEffects::None,
                timeout_seconds: 5,
                namespace_selector: None,
                object_selector: None,
            }),
            mutating: None,
        })
    }

    fn validate(request: AdmissionRequest) -> Result<Verdict, String> {
        let object = request.object.as_deref().ok_or("no object to validate")?;
        let pod: Pod = serde_json::from_str(object).map_err(|e| format!("not a Pod: {e}"))?;
        if !cache::has_synced(ROLE_BINDINGS).map_err(|e| format!("cache: {e:?}"))? {
            // Answering from a cache still filling would deny a bound account.
            return Err("the RoleBinding cache has not synced yet".into());
        }
        let namespace = request.namespace.unwrap_or_default();
        let account = pod
            .spec
            .service_account_name
            .filter(|a| !a.is_empty())
            .unwrap_or_else(|| "default".into());
        let mut continue_token = None;
        loop {
            let page = cache::by_index(
                ROLE_BINDINGS,
                SUBJECT_INDEX,
                &account,
                &PageRequest {
                    limit: PAGE,
                    continue_token,
                },
            )
            .map_err(|e| format!("cache: {e:?}"))?;
            for binding in page.objects {
                let binding: RoleBinding = serde_json::from_str(&binding)
                    .map_err(|e| format!("cached RoleBinding: {e}"))?;
                if binding.binds(&namespace, &account) {
                    return Ok(allow());
                }
            }
            match page.continue_token {
                Some(token) => continue_token = Some(token),
                None => break,
            }
        }
        Ok(Verdict {
            allowed: false,
            code: 403,
            message: format!(
                "service account {namespace}/{account} is the subject of no RoleBinding in {namespace}"
            ),
            warnings: Vec::new(),
        })
    }

    fn mutate(_request: AdmissionRequest) -> Result<Mutation, String> {
        Err("this policy declares no mutating webhook".into())
    }
}

export!(Guest);
