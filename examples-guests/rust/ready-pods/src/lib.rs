//! ready-pods: on each Deployment or ReplicaSet event, reports from the host's cache how many of
//! its pods are ready. A ReplicaSet's pods are found through the declared index `by-owner` (pods
//! by owner UID); a Deployment's through its ReplicaSets (same index on ReplicaSets), then theirs.
//! No API call and no guest-side cache: the host keeps and indexes every object.

mod count;

use kubewasm_guest::k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kubewasm_guest::k8s_openapi::api::core::v1::Pod;
use kubewasm_guest::{Cache, Controller, Error, Event, Index, Plugin, Subscription};

use count::Readiness;

/// The index both Pods and ReplicaSets are declared with: objects by the UID of their owners.
const BY_OWNER: &str = "by-owner";

/// Cache handles; no other state.
#[derive(Default)]
struct ReadyPods {
    pods: Cache<Pod>,
    replica_sets: Cache<ReplicaSet>,
}

impl ReadyPods {
    /// The pods owned by the object with `uid`.
    fn pods_of(&self, uid: &str) -> Result<Readiness, Error> {
        Ok(Readiness::of(&self.pods.by_index(BY_OWNER, uid)?))
    }

    fn on_replica_set(&mut self, event: Event<ReplicaSet>) -> Result<(), Error> {
        let deleted = event.is_delete();
        let rs = event.into_object();
        let key = key(&rs.metadata.namespace, &rs.metadata.name);
        if deleted {
            kubewasm_guest::info!("ReplicaSet {key} deleted");
            return Ok(());
        }
        let readiness = self.pods_of(rs.metadata.uid.as_deref().unwrap_or_default())?;
        let wanted = rs.spec.as_ref().and_then(|spec| spec.replicas).unwrap_or(1);
        kubewasm_guest::info!(
            "ReplicaSet {key}: {} (want {wanted}){}",
            readiness,
            self.sync_note()
        );
        Ok(())
    }

    fn on_deployment(&mut self, event: Event<Deployment>) -> Result<(), Error> {
        let deleted = event.is_delete();
        let deployment = event.into_object();
        let key = key(&deployment.metadata.namespace, &deployment.metadata.name);
        if deleted {
            kubewasm_guest::info!("Deployment {key} deleted");
            return Ok(());
        }
        let uid = deployment.metadata.uid.as_deref().unwrap_or_default();
        let replica_sets = self.replica_sets.by_index(BY_OWNER, uid)?;
        let mut readiness = Readiness::default();
        for rs in &replica_sets {
            readiness += self.pods_of(rs.metadata.uid.as_deref().unwrap_or_default())?;
        }
        let wanted = deployment
            .spec
            .as_ref()
            .and_then(|spec| spec.replicas)
            .unwrap_or(1);
        kubewasm_guest::info!(
            "Deployment {key}: {readiness} across {} ReplicaSet(s) (want {wanted}){}",
            replica_sets.len(),
            self.sync_note()
        );
        Ok(())
    }

    /// A note when the pod cache has not finished its first list: counts may still grow.
    fn sync_note(&self) -> &'static str {
        match self.pods.has_synced() {
            Ok(true) => "",
            _ => " (pods not synced yet)",
        }
    }
}

impl Controller for ReadyPods {
    fn init(_config: &str) -> Result<Plugin<Self>, Error> {
        Ok(Plugin::new("ready-pods", ReadyPods::default())
            .watch(Subscription::to::<Deployment>(), Self::on_deployment)
            .watch(Subscription::to::<ReplicaSet>(), Self::on_replica_set)
            .subscribe(Subscription::to::<Pod>())
            .index(Index::owner_uid::<Pod>(BY_OWNER))
            .index(Index::owner_uid::<ReplicaSet>(BY_OWNER)))
    }
}

kubewasm_guest::export_controller!(ReadyPods);

fn key(namespace: &Option<String>, name: &Option<String>) -> String {
    let name = name.as_deref().unwrap_or("?");
    match namespace {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name.to_owned(),
    }
}
