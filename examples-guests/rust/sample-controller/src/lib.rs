//! kubernetes/sample-controller as a kubewasm plugin (contract 0.2): a `Foo`
//! (`samplecontroller.k8s.io/v1alpha1`, CRD in `examples/manifests/50-foo-crd.yaml`) owns a
//! Deployment named `spec.deploymentName` running `spec.replicas` nginx pods; its
//! `status.availableReplicas` follows the Deployment's. A Deployment of that name not owned by the
//! Foo is left alone and a Warning Event on the Foo says so.
//!
//! Subscription 0 (Foo) queues each Foo's own key; subscription 1 (Deployment) queues the Foo
//! that controls it, so a Deployment changed or deleted by hand brings its Foo's reconcile back.

use std::collections::BTreeMap;

use kubewasm_guest_v0_2::bindings::kubewasm::controller::client as wit_client;
use kubewasm_guest_v0_2::bindings::kubewasm::controller::types::ObjectRef;
use kubewasm_guest_v0_2::bindings::kubewasm::controller::{cache, log};
use kubewasm_guest_v0_2::k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use kubewasm_guest_v0_2::k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use kubewasm_guest_v0_2::k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, ObjectMeta, OwnerReference,
};
use kubewasm_guest_v0_2::serde_json::{self, Value, json};
use kubewasm_guest_v0_2::{
    Action, Api, ApiError, Controller, Error, EventType, Gvk, Key, PluginInfo, QueueRule,
    Subscription, subscribe,
};

const FOO: u32 = 0;
const DEPLOYMENT: u32 = 1;

fn foo_gvk() -> Gvk {
    Gvk {
        group: "samplecontroller.k8s.io".into(),
        version: "v1alpha1".into(),
        kind: "Foo".into(),
    }
}

struct SampleController;

fn api_error(e: ApiError) -> Error {
    Error(format!("{e:?}"))
}

fn cached(subscription: u32, namespace: &str, name: &str) -> Result<Option<String>, Error> {
    cache::get(subscription, Some(namespace), name).map_err(|e| Error(format!("{e:?}")))
}

fn foo_event(owner: &Value, event_type: EventType, reason: &str, message: &str) {
    let meta = &owner["metadata"];
    let event = wit_client::Event {
        regarding: ObjectRef {
            gvk: foo_gvk(),
            namespace: meta["namespace"].as_str().map(str::to_owned),
            name: meta["name"].as_str().unwrap_or_default().to_owned(),
        },
        uid: meta["uid"].as_str().map(str::to_owned),
        event_type,
        reason: reason.into(),
        message: message.into(),
    };
    if let Err(e) = wit_client::record_event(&event) {
        log::log(log::Level::Warn, &format!("recording an event: {e:?}"));
    }
}

/// The Deployment a Foo wants: `replicas` nginx pods, owned by the Foo.
fn desired(owner: &Value, name: &str, replicas: i32) -> Deployment {
    let foo_name = owner["metadata"]["name"].as_str().unwrap_or_default();
    let labels = BTreeMap::from([
        ("app".to_owned(), "nginx".to_owned()),
        ("controller".to_owned(), foo_name.to_owned()),
    ]);
    Deployment {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: owner["metadata"]["namespace"].as_str().map(str::to_owned),
            owner_references: Some(vec![OwnerReference {
                api_version: "samplecontroller.k8s.io/v1alpha1".into(),
                kind: "Foo".into(),
                name: foo_name.to_owned(),
                uid: owner["metadata"]["uid"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "nginx".into(),
                        image: Some("nginx:latest".into()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

fn controlled_by(deployment: &Deployment, owner: &Value) -> bool {
    let uid = owner["metadata"]["uid"].as_str().unwrap_or_default();
    deployment
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.kind == "Foo" && o.uid == uid)
}

impl Controller for SampleController {
    fn init(_config: &str) -> Result<(Self, PluginInfo), Error> {
        let foos = Subscription {
            gvk: foo_gvk(),
            namespace: None,
            label_selector: None,
            field_selector: None,
            resync_seconds: None,
            events: false,
            queue: vec![QueueRule::OwnKey],
        };
        let info = PluginInfo {
            name: "sample-controller".into(),
            subscriptions: vec![
                foos,
                subscribe::<Deployment>(false, vec![QueueRule::ControllingOwner(FOO)]),
            ],
            indexes: Vec::new(),
        };
        Ok((SampleController, info))
    }

    fn reconcile(&mut self, key: Key) -> Result<Action, Error> {
        let namespace = key.namespace.clone().unwrap_or_default();
        let Some(owner) = cached(FOO, &namespace, &key.name)? else {
            // Gone: its Deployment goes with it (owner reference, garbage collection).
            return Ok(Action::Done);
        };
        let owner: Value = serde_json::from_str(&owner).map_err(|e| Error(e.to_string()))?;
        let Some(name) = owner["spec"]["deploymentName"]
            .as_str()
            .filter(|n| !n.is_empty())
        else {
            foo_event(
                &owner,
                EventType::Warning,
                "InvalidSpec",
                "spec.deploymentName is empty",
            );
            return Ok(Action::Done);
        };
        let replicas = owner["spec"]["replicas"]
            .as_i64()
            .and_then(|r| i32::try_from(r).ok())
            .unwrap_or(1);
        let api = Api::<Deployment>::namespaced(&namespace);
        let deployment = match cached(DEPLOYMENT, &namespace, name)? {
            None => {
                let created = api
                    .create(&desired(&owner, name, replicas))
                    .map_err(api_error)?;
                foo_event(
                    &owner,
                    EventType::Normal,
                    "Synced",
                    &format!("created Deployment {name}"),
                );
                created
            }
            Some(json) => {
                let mut current: Deployment =
                    serde_json::from_str(&json).map_err(|e| Error(e.to_string()))?;
                if !controlled_by(&current, &owner) {
                    foo_event(
                        &owner,
                        EventType::Warning,
                        "ErrResourceExists",
                        &format!("Resource {name:?} already exists and is not managed by Foo"),
                    );
                    return Ok(Action::Done);
                }
                let spec = current.spec.get_or_insert_with(DeploymentSpec::default);
                if spec.replicas != Some(replicas) {
                    spec.replicas = Some(replicas);
                    api.update(&current).map_err(api_error)?
                } else {
                    current
                }
            }
        };
        let available = deployment
            .status
            .as_ref()
            .and_then(|s| s.available_replicas)
            .unwrap_or(0);
        if owner["status"]["availableReplicas"].as_i64() != Some(available.into()) {
            let target = ObjectRef {
                gvk: foo_gvk(),
                namespace: Some(namespace),
                name: key.name.clone(),
            };
            let patch = json!({"status": {"availableReplicas": available}}).to_string();
            wit_client::patch_status(&target, &wit_client::PatchBody::Merge(patch))
                .map_err(|e| api_error(e.into()))?;
        }
        Ok(Action::Done)
    }
}

kubewasm_guest_v0_2::export_controller!(SampleController);
