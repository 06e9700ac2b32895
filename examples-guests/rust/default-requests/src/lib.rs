//! A mutating admission policy on the Rust SDK `kubewasm-guest-v0-3`: every container (and init
//! container) of a Pod being created gets the CPU and memory requests it does not set, from the
//! plugin's config. The host turns the returned object into the JSONPatch the API server applies.
//!
//! Config (JSON, optional): `{"name": "default-requests", "cpu": "100m", "memory": "128Mi"}`.
//! Pods in namespaces labelled `kubewasm.dev/default-requests: off` are left alone (a
//! namespace selector, evaluated by the API server).

use kubewasm_guest_v0_3::k8s_openapi::api::core::v1::Pod;
use kubewasm_guest_v0_3::serde_json::{self, Value};
use kubewasm_guest_v0_3::{
    AdmissionInfo, Error, FailurePolicy, LabelSelector, Mutation, Operation, Patch, PluginInfo,
    Policy, Review, Rule, Webhook, export_policy,
};

#[derive(serde::Deserialize)]
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

struct DefaultRequests {
    config: Config,
}

impl Policy for DefaultRequests {
    fn init(config: &str) -> Result<(Self, PluginInfo), Error> {
        let config: Config = if config.is_empty() {
            Config::default()
        } else {
            serde_json::from_str(config).map_err(|e| Error(format!("config: {e}")))?
        };
        let info = PluginInfo {
            name: config.name.clone(),
            subscriptions: Vec::new(),
            indexes: Vec::new(),
        };
        Ok((DefaultRequests { config }, info))
    }

    fn webhooks(&self) -> Result<AdmissionInfo, Error> {
        let pods = Webhook::new([Rule::of::<Pod>().on(&[Operation::Create])])
            // A Pod without defaults is better than no Pod.
            .failure_policy(FailurePolicy::Ignore)
            .timeout_seconds(5)
            .namespaces(LabelSelector::not_in(
                "kubewasm.dev/default-requests",
                &["off"],
            ));
        Ok(AdmissionInfo {
            validating: None,
            mutating: Some(pods),
        })
    }

    fn mutate(&mut self, review: &Review) -> Result<Mutation, Error> {
        let pod = review
            .object
            .as_ref()
            .ok_or_else(|| Error("no Pod to mutate".into()))?;
        let mut patch = Patch::new();
        let mut defaulted = Vec::new();
        for list in ["initContainers", "containers"] {
            let Some(containers) = pod["spec"][list].as_array() else {
                continue;
            };
            for (i, container) in containers.iter().enumerate() {
                if !container.is_object() {
                    continue;
                }
                let name = container["name"].as_str().unwrap_or_default();
                let requests = &container["resources"]["requests"];
                for (resource, value) in
                    [("cpu", &self.config.cpu), ("memory", &self.config.memory)]
                {
                    if requests.get(resource).is_none() {
                        let index = i.to_string();
                        let path = ["spec", list, &index, "resources", "requests", resource];
                        patch = patch.set(&path, Value::from(value.as_str()));
                        defaulted.push(format!("{name}: {resource}={value}"));
                    }
                }
            }
        }
        if defaulted.is_empty() {
            return Ok(Mutation::unchanged());
        }
        let warning = format!("default requests set: {}", defaulted.join(", "));
        Ok(review.patched(&patch)?.with_warning(warning))
    }
}

export_policy!(DefaultRequests);
