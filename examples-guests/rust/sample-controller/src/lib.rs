//! kubernetes/sample-controller as a kubewasm plugin (contract 0.2): a `Foo`
//! (`samplecontroller.k8s.io/v1alpha1`, CRD in `examples/manifests/50-foo-crd.yaml`) owns a
//! Deployment named `spec.deploymentName` running `spec.replicas` nginx pods; its
//! `status.availableReplicas` follows the Deployment's. A Deployment of that name not owned by the
//! Foo is left alone and a Warning Event on the Foo says so.
//!
//! Subscription 0 (Foo) queues each Foo's own key when its generation changes (a spec change:
//! the controller's own status writes queue nothing); subscription 1 (Deployment) queues the Foo
//! that controls it on any change, so a Deployment scaled, rolled out or deleted by hand brings
//! its Foo's reconcile back. Written with the SDK only: typed cache reads, typed writes, Events.

use std::collections::BTreeMap;

use kubewasm_guest_v0_2::k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use kubewasm_guest_v0_2::k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use kubewasm_guest_v0_2::k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, ObjectMeta, OwnerReference,
};
use kubewasm_guest_v0_2::k8s_openapi::{Metadata, NamespaceResourceScope, Resource};
use kubewasm_guest_v0_2::serde_json::json;
use kubewasm_guest_v0_2::{
    Action, Api, Cache, Controller, Error, EventType, Key, Patch, PluginInfo, Predicate, QueueRule,
    Subscription, gvk, record_event, subscribe, warn,
};
use serde::{Deserialize, Serialize};

const FOO: u32 = 0;
const DEPLOYMENT: u32 = 1;

/// A Foo, as far as the controller reads it: a type of its own for the SDK's typed cache,
/// writes and Events.
#[derive(Deserialize, Serialize)]
struct Foo {
    metadata: ObjectMeta,
    #[serde(default)]
    spec: FooSpec,
    #[serde(default)]
    status: FooStatus,
}

#[derive(Deserialize, Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct FooSpec {
    #[serde(default)]
    deployment_name: String,
    replicas: Option<i64>,
}

#[derive(Deserialize, Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct FooStatus {
    available_replicas: Option<i64>,
}

impl Resource for Foo {
    const API_VERSION: &'static str = "samplecontroller.k8s.io/v1alpha1";
    const GROUP: &'static str = "samplecontroller.k8s.io";
    const KIND: &'static str = "Foo";
    const VERSION: &'static str = "v1alpha1";
    const URL_PATH_SEGMENT: &'static str = "foos";
    type Scope = NamespaceResourceScope;
}

impl Metadata for Foo {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

struct SampleController {
    foos: Cache<Foo>,
    deployments: Cache<Deployment>,
}

fn foo_event(owner: &Foo, event_type: EventType, reason: &str, message: &str) {
    if let Err(e) = record_event(owner, event_type, reason, message) {
        warn!("recording an event: {e}");
    }
}

/// The Deployment a Foo wants: `replicas` nginx pods, owned by the Foo.
fn desired(owner: &Foo, name: &str, replicas: i32) -> Deployment {
    let foo_name = owner.metadata.name.clone().unwrap_or_default();
    let labels = BTreeMap::from([
        ("app".to_owned(), "nginx".to_owned()),
        ("controller".to_owned(), foo_name.clone()),
    ]);
    Deployment {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: owner.metadata.namespace.clone(),
            owner_references: Some(vec![OwnerReference {
                api_version: "samplecontroller.k8s.io/v1alpha1".into(),
                kind: "Foo".into(),
                name: foo_name,
                uid: owner.metadata.uid.clone().unwrap_or_default(),
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

fn controlled_by(deployment: &Deployment, owner: &Foo) -> bool {
    let uid = owner.metadata.uid.as_deref().unwrap_or_default();
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
            gvk: gvk::<Foo>(),
            namespace: None,
            label_selector: None,
            field_selector: None,
            resync_seconds: None,
            events: false,
            // Only spec changes: the controller's own status writes queue nothing.
            queue: vec![QueueRule::OwnKey.when(&[Predicate::Generation])],
        };
        let info = PluginInfo {
            name: "sample-controller".into(),
            subscriptions: vec![
                foos,
                subscribe::<Deployment>(false, [QueueRule::ControllingOwner(FOO)]),
            ],
            indexes: Vec::new(),
        };
        let controller = SampleController {
            foos: Cache::new(FOO),
            deployments: Cache::new(DEPLOYMENT),
        };
        Ok((controller, info))
    }

    fn reconcile(&mut self, key: Key) -> Result<Action, Error> {
        let namespace = key.namespace.clone().unwrap_or_default();
        let Some(owner) = self.foos.get(Some(&namespace), &key.name)? else {
            // Gone: its Deployment goes with it (owner reference, garbage collection).
            return Ok(Action::Done);
        };
        let name = owner.spec.deployment_name.clone();
        if name.is_empty() {
            foo_event(
                &owner,
                EventType::Warning,
                "InvalidSpec",
                "spec.deploymentName is empty",
            );
            return Ok(Action::Done);
        }
        let replicas = owner
            .spec
            .replicas
            .and_then(|r| i32::try_from(r).ok())
            .unwrap_or(1);
        let api = Api::<Deployment>::namespaced(&namespace);
        let deployment = match self.deployments.get(Some(&namespace), &name)? {
            None => {
                let created = api.create(&desired(&owner, &name, replicas))?;
                foo_event(
                    &owner,
                    EventType::Normal,
                    "Synced",
                    &format!("created Deployment {name}"),
                );
                created
            }
            Some(mut current) => {
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
                    api.update(&current)?
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
        if owner.status.available_replicas != Some(available.into()) {
            let status = json!({"status": {"availableReplicas": available}});
            Api::<Foo>::namespaced(&namespace).patch_status(&key.name, &Patch::Merge(status))?;
        }
        Ok(Action::Done)
    }
}

kubewasm_guest_v0_2::export_controller!(SampleController);
