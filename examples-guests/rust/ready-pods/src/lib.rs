//! ready-pods: on each Deployment or ReplicaSet event, reports from the host's cache how many of
//! its pods are ready. A ReplicaSet's pods are found through the declared index `by-owner` (pods
//! by owner UID); a Deployment's through its ReplicaSets (same index on ReplicaSets), then theirs.
//! No API call and no guest-side cache: the host keeps and indexes every object.

mod count;
mod objects;

use kubewasm_guest::{Cache, Controller, Error, Event, Index, Plugin, Subscription};

use count::Readiness;
use objects::{Deployment, Pod, ReplicaSet};

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
        let key = rs.metadata.key();
        if deleted {
            kubewasm_guest::info!("ReplicaSet {key} deleted");
            return Ok(());
        }
        // Asked before the count: a cache that syncs in between must not hide a partial count.
        let note = self.sync_note();
        let readiness = self.pods_of(&rs.metadata.uid)?;
        kubewasm_guest::info!("ReplicaSet {key}: {readiness} (want {}){note}", rs.wanted());
        Ok(())
    }

    fn on_deployment(&mut self, event: Event<Deployment>) -> Result<(), Error> {
        let deleted = event.is_delete();
        let deployment = event.into_object();
        let key = deployment.metadata.key();
        if deleted {
            kubewasm_guest::info!("Deployment {key} deleted");
            return Ok(());
        }
        let note = self.sync_note();
        let replica_sets = self
            .replica_sets
            .by_index(BY_OWNER, &deployment.metadata.uid)?;
        let mut readiness = Readiness::default();
        for rs in &replica_sets {
            readiness += self.pods_of(&rs.metadata.uid)?;
        }
        kubewasm_guest::info!(
            "Deployment {key}: {readiness} across {} ReplicaSet(s) (want {}){note}",
            replica_sets.len(),
            deployment.wanted()
        );
        Ok(())
    }

    /// A note when the pod or ReplicaSet cache has not finished its first list: counts may
    /// still grow.
    fn sync_note(&self) -> &'static str {
        let synced = |cache: Result<bool, Error>| cache.unwrap_or(false);
        if synced(self.pods.has_synced()) && synced(self.replica_sets.has_synced()) {
            ""
        } else {
            " (cache not synced yet)"
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
