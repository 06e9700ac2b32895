//! The sample-controller written natively on kube-runtime's `Controller`, the yardstick for the
//! kubewasm guest in `examples-guests/rust/sample-controller`: the same reconcile (Deployment
//! created with a controller owner reference, replicas kept in step, `status.availableReplicas`
//! written, a `Synced` Event on create, a Warning Event and nothing else for a Deployment it
//! does not own), over a `Foo` read as a `DynamicObject`.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store, reflector};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, Resource as _, ResourceExt as _};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

/// Why a reconcile failed; kube-runtime requeues the Foo after a short delay.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("Foo {0} has no namespace")]
    NoNamespace(String),
    #[error("writing for Foo {key}: {source}")]
    Write { key: String, source: kube::Error },
}

struct Context {
    client: Client,
    resource: ApiResource,
    deployments: Store<Deployment>,
    recorder: Recorder,
}

/// The running controller; dropping it stops it.
pub struct Running {
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Starts the controller on `client`. Deployments are read from a reflector store of their own
/// (kube-runtime's `owns` only triggers, it keeps no store one can read without its unstable
/// stream features), so this controller watches Deployments twice.
pub fn start(client: Client) -> Running {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "samplecontroller.k8s.io",
        "v1alpha1",
        "Foo",
    ));
    let (deployments, writer) = reflector::store();
    let cache = reflector(
        writer,
        watcher(
            Api::<Deployment>::all(client.clone()),
            watcher::Config::default(),
        ),
    )
    .applied_objects()
    .for_each(|_| futures::future::ready(()));
    let context = Arc::new(Context {
        client: client.clone(),
        resource: resource.clone(),
        deployments,
        recorder: Recorder::new(
            client.clone(),
            Reporter {
                controller: "sample-controller-kube-runtime".into(),
                instance: None,
            },
        ),
    });
    let controller = Controller::new_with(
        Api::<DynamicObject>::all_with(client.clone(), &resource),
        watcher::Config::default(),
        resource,
    )
    .owns(Api::<Deployment>::all(client), watcher::Config::default())
    .run(reconcile, error_policy, context)
    .for_each(|_| futures::future::ready(()));
    Running {
        tasks: vec![tokio::spawn(cache), tokio::spawn(controller)],
    }
}

fn error_policy(_foo: Arc<DynamicObject>, error: &ReconcileError, _: Arc<Context>) -> Action {
    tracing::warn!(%error, "reconcile failed");
    Action::requeue(Duration::from_millis(5))
}

async fn publish(
    ctx: &Context,
    owner: &DynamicObject,
    type_: EventType,
    reason: &str,
    note: String,
) {
    let event = Event {
        type_,
        reason: reason.into(),
        note: Some(note),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(error) = ctx
        .recorder
        .publish(&event, &owner.object_ref(&ctx.resource))
        .await
    {
        tracing::warn!(%error, "recording an event");
    }
}

async fn reconcile(owner: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let foo_name = owner.name_any();
    let namespace = owner
        .namespace()
        .ok_or_else(|| ReconcileError::NoNamespace(foo_name.clone()))?;
    let write = |source| ReconcileError::Write {
        key: format!("{namespace}/{foo_name}"),
        source,
    };
    let Some(name) = owner.data["spec"]["deploymentName"]
        .as_str()
        .filter(|n| !n.is_empty())
    else {
        let note = "spec.deploymentName is empty".to_owned();
        publish(&ctx, &owner, EventType::Warning, "InvalidSpec", note).await;
        return Ok(Action::await_change());
    };
    let replicas = owner.data["spec"]["replicas"]
        .as_i64()
        .and_then(|r| i32::try_from(r).ok())
        .unwrap_or(1);
    let api = Api::<Deployment>::namespaced(ctx.client.clone(), &namespace);
    let deployment = match ctx
        .deployments
        .get(&ObjectRef::new(name).within(&namespace))
    {
        None => {
            let created = api
                .create(
                    &PostParams::default(),
                    &desired(&owner, &ctx.resource, name, replicas),
                )
                .await
                .map_err(write)?;
            let note = format!("created Deployment {name}");
            publish(&ctx, &owner, EventType::Normal, "Synced", note).await;
            created
        }
        Some(current) => {
            let uid = owner.uid().unwrap_or_default();
            let owned = current
                .owner_references()
                .iter()
                .any(|o| o.controller == Some(true) && o.kind == "Foo" && o.uid == uid);
            if !owned {
                let note = format!("Resource {name:?} already exists and is not managed by Foo");
                publish(&ctx, &owner, EventType::Warning, "ErrResourceExists", note).await;
                return Ok(Action::await_change());
            }
            let mut current = (*current).clone();
            let spec = current.spec.get_or_insert_with(DeploymentSpec::default);
            if spec.replicas == Some(replicas) {
                current
            } else {
                spec.replicas = Some(replicas);
                api.replace(name, &PostParams::default(), &current)
                    .await
                    .map_err(write)?
            }
        }
    };
    let available = deployment
        .status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0);
    if owner.data["status"]["availableReplicas"].as_i64() != Some(available.into()) {
        let foos =
            Api::<DynamicObject>::namespaced_with(ctx.client.clone(), &namespace, &ctx.resource);
        let patch: Value = json!({"status": {"availableReplicas": available}});
        foos.patch_status(&foo_name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(write)?;
    }
    Ok(Action::await_change())
}

/// The Deployment a Foo wants: `replicas` nginx pods, controlled by the Foo.
fn desired(owner: &DynamicObject, resource: &ApiResource, name: &str, replicas: i32) -> Deployment {
    let labels = std::collections::BTreeMap::from([
        ("app".to_owned(), "nginx".to_owned()),
        ("controller".to_owned(), owner.name_any()),
    ]);
    Deployment {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: owner.namespace(),
            owner_references: owner.controller_owner_ref(resource).map(|o| vec![o]),
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
