//! A mutating admission policy: every container (and init container) of a Pod being created
//! gets the CPU and memory requests it does not set, from the plugin's config. The host turns
//! the returned object into the JSONPatch the API server applies.
//!
//! Config (JSON, optional): `{"name": "default-requests", "cpu": "100m", "memory": "128Mi"}`.
//! Pods in namespaces labelled `kubewasm.dev/default-requests: off` are left alone (a
//! namespace selector, evaluated by the API server).

wit_bindgen::generate!({
    path: ["../../../wit/0.2", "../../../wit/0.2.1", "../../../wit/0.3"],
    world: "kubewasm:controller/admission-policy@0.3.0",
    generate_all,
});

use exports::kubewasm::controller0_2_0::plugin;
use exports::kubewasm::controller0_3_0::admission;
use kubewasm::controller0_2_0::types::PluginInfo;
use kubewasm::controller0_3_0::admission_types::{
    AdmissionInfo, AdmissionRequest, FailurePolicy, LabelSelector, Mutation, Operation, Rule,
    Scope, SelectorOperator, SelectorRequirement, SideEffects, Verdict, Webhook,
};

use std::cell::RefCell;

#[derive(serde::Deserialize, Clone)]
#[serde(rename_all = "camelCase", default)]
struct Config {
    name: String,
    cpu: String,
    memory: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            name: "default-requests".into(),
            cpu: "100m".into(),
            memory: "128Mi".into(),
        }
    }
}

thread_local! {
    static CONFIG: RefCell<Config> = RefCell::new(Config::default());
}

struct Guest;

impl plugin::Guest for Guest {
    fn init(config: String) -> Result<PluginInfo, String> {
        let config: Config = if config.is_empty() {
            Config::default()
        } else {
            serde_json::from_str(&config).map_err(|e| format!("config: {e}"))?
        };
        let name = config.name.clone();
        CONFIG.with(|c| *c.borrow_mut() = config);
        Ok(PluginInfo {
            name,
            subscriptions: Vec::new(),
            indexes: Vec::new(),
        })
    }
}

fn allowed() -> Verdict {
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
            validating: None,
            mutating: Some(Webhook {
                rules: vec![Rule {
                    operations: vec![Operation::Create],
                    api_groups: vec![String::new()],
                    api_versions: vec!["v1".into()],
                    resources: vec!["pods".into()],
                    scope: Scope::Namespaced,
                }],
                // A Pod without defaults is better than no Pod.
                failure_policy: FailurePolicy::Ignore,
                side_effects: SideEffects::None,
                timeout_seconds: 5,
                namespace_selector: Some(LabelSelector {
                    match_labels: Vec::new(),
                    match_expressions: vec![SelectorRequirement {
                        key: "kubewasm.dev/default-requests".into(),
                        operator: SelectorOperator::NotIn,
                        values: vec!["off".into()],
                    }],
                }),
                object_selector: None,
            }),
        })
    }

    fn validate(_request: AdmissionRequest) -> Result<Verdict, String> {
        Err("this policy declares no validating webhook".into())
    }

    fn mutate(request: AdmissionRequest) -> Result<Mutation, String> {
        let object = request.object.as_deref().ok_or("no Pod to mutate")?;
        let mut pod: serde_json::Value =
            serde_json::from_str(object).map_err(|e| format!("not JSON: {e}"))?;
        let config = CONFIG.with(|c| c.borrow().clone());
        let mut defaulted = Vec::new();
        for list in ["initContainers", "containers"] {
            let Some(containers) = pod
                .pointer_mut(&format!("/spec/{list}"))
                .and_then(serde_json::Value::as_array_mut)
            else {
                continue;
            };
            for container in containers {
                let name = container["name"].as_str().unwrap_or_default().to_owned();
                let Some(c) = container.as_object_mut() else {
                    continue;
                };
                let requests = c
                    .entry("resources")
                    .or_insert_with(|| serde_json::json!({}))
                    .as_object_mut()
                    .ok_or("resources is not an object")?
                    .entry("requests")
                    .or_insert_with(|| serde_json::json!({}))
                    .as_object_mut()
                    .ok_or("resources.requests is not an object")?;
                for (resource, value) in [("cpu", &config.cpu), ("memory", &config.memory)] {
                    if !requests.contains_key(resource) {
                        requests.insert(resource.into(), value.clone().into());
                        defaulted.push(format!("{name}: {resource}={value}"));
                    }
                }
            }
        }
        if defaulted.is_empty() {
            return Ok(Mutation {
                verdict: allowed(),
                object: None,
            });
        }
        Ok(Mutation {
            verdict: Verdict {
                warnings: vec![format!("default requests set: {}", defaulted.join(", "))],
                ..allowed()
            },
            object: Some(pod.to_string()),
        })
    }
}

export!(Guest);
