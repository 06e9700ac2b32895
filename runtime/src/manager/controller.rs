//! A running 0.2 plugin's parts besides its event loop: its context (queue, client,
//! recorder, counters), the handlers that feed its workqueue by its queue rules, and its
//! reconcile workers. The context belongs to the plugin and is handed to the version that
//! replaces it, whatever the contract version of the one replaced.

use std::sync::Arc;

use kubewasm_informer::{
    ObjectRef as InformerObject, Registration, ResourceEventHandler, SharedIndexInformer,
};
use tokio::task::JoinHandle;

use crate::admission::registry::AdmissionRegistration;
use crate::reconcile::context::Context;
use crate::reconcile::keys::{ObjectKey, QueueRule, keys_for};
use crate::reconcile::predicates::UpdateFilter;
use crate::reconcile::workqueue::WorkQueue;

/// What a running 0.2 plugin has besides its event loop: its context (queue, client,
/// recorder, counters), the handlers that feed its queue and its reconcile workers.
pub(crate) struct Controller {
    /// The plugin's queue, client and recorder: outlive versions.
    pub(super) context: Arc<Context>,
    /// The handlers that feed the queue; removed on [`stop`](Self::stop).
    pub(super) registrations: Vec<(SharedIndexInformer, Registration)>,
    /// The informer of every subscription, cache-only ones included: a policy answering from
    /// a cache still filling would answer wrongly, so it is not ready until each has synced.
    pub(super) caches: Vec<SharedIndexInformer>,
    pub(super) workers: Vec<JoinHandle<()>>,
    /// The admission policy the webhook server answers with (contract 0.3); dropping it stops
    /// serving it unless a newer version took its place.
    pub(super) admission: Option<AdmissionRegistration>,
}

impl Controller {
    /// Stops reconciling (a key being reconciled goes back to the queue) and removes the
    /// handlers that feed the queue.
    pub(super) fn stop(&mut self) {
        for worker in &self.workers {
            worker.abort();
        }
        self.admission = None;
        for (informer, registration) in self.registrations.drain(..) {
            informer.remove_event_handler(&registration);
        }
    }

    /// Whether every cache it reads has synced and the handlers that feed the queue have
    /// handed over the informers' replay.
    pub(super) fn synced(&self) -> bool {
        self.caches.iter().all(SharedIndexInformer::has_synced)
            && self.registrations.iter().all(|(_, r)| r.has_synced())
    }

    /// Whether a reconcile worker runs.
    pub(super) fn working(&self) -> bool {
        !self.workers.iter().all(JoinHandle::is_finished)
    }
}

/// Queues the keys an informer event names under one subscription's rules (registered inline:
/// the workqueue is its buffer).
pub(crate) struct QueueFeeder {
    pub(super) group: String,
    pub(super) kind: String,
    pub(super) rules: Vec<QueueRule>,
    /// The updates each rule queues on (contract 0.2.2's predicates).
    pub(super) filters: Vec<UpdateFilter>,
    pub(super) queue: WorkQueue<ObjectKey>,
}

impl QueueFeeder {
    fn queue(&self, object: &InformerObject) {
        self.queue_by(&self.rules, object);
    }

    fn queue_by(&self, rules: &[QueueRule], object: &InformerObject) {
        for key in keys_for(&self.group, &self.kind, rules, object) {
            self.queue.add(key);
        }
    }
}

impl ResourceEventHandler for QueueFeeder {
    fn on_add(&self, obj: &InformerObject, _in_initial_list: bool) {
        self.queue(obj);
    }

    /// Queues under the rules whose filter passes the update (a resync passes only the rules
    /// without a predicate, or with `resource-version`).
    fn on_update(&self, old: &InformerObject, new: &InformerObject) {
        if self.filters.iter().all(UpdateFilter::passes_all) {
            self.queue(old);
            self.queue(new);
            return;
        }
        let rules: Vec<QueueRule> = self
            .rules
            .iter()
            .zip(&self.filters)
            .filter(|(_, filter)| filter.queues(old, new))
            .map(|(rule, _)| rule.clone())
            .collect();
        if !rules.is_empty() {
            self.queue_by(&rules, old);
            self.queue_by(&rules, new);
        }
    }

    fn on_delete(&self, obj: &InformerObject, _final_state_unknown: bool) {
        self.queue(obj);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use kubewasm_tests::wait_until;
    use serde_json::json;

    use super::*;
    use crate::reconcile::predicates::Predicate;
    use crate::reconcile::workqueue::{Completion, NoQueueMetrics, QueueOptions};
    use crate::testing::TestInformer;

    const WAIT: Duration = Duration::from_secs(30);

    fn deployment(name: &str, generation: i64, labels: serde_json::Value, status: u32) -> String {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"namespace": "shop", "name": name, "generation": generation,
                         "labels": labels,
                         "ownerReferences": [{"apiVersion": "samplecontroller.k8s.io/v1alpha1",
                                              "kind": "Foo", "name": "foo", "uid": "u1",
                                              "controller": true}]},
            "status": {"availableReplicas": status},
        })
        .to_string()
    }

    /// Upserts a new object `marker` (its own key queues on add), waits until it is queued
    /// (so every earlier event has been handled), then takes every queued key: the names.
    async fn queued_through(
        objects: &TestInformer,
        queue: &WorkQueue<ObjectKey>,
        marker: &str,
    ) -> Vec<String> {
        objects.upsert(json!({"metadata": {"namespace": "shop", "name": marker}}).to_string());
        let mut names = Vec::new();
        while !names.iter().any(|n| n == marker) {
            let taken = tokio::time::timeout(WAIT, queue.get()).await;
            let key = taken.expect("the marker is queued").expect("a key");
            names.push(key.key().name.clone());
            key.complete(Completion::Done);
        }
        names.sort();
        names
    }

    /// The queue rules on a real informer: each update queues under the rules whose
    /// predicate its objects' metadata (as the informer parsed it) passes.
    #[tokio::test]
    async fn a_feeder_on_an_informer_queues_by_the_cached_objects_metadata() {
        let objects = TestInformer::new();
        objects.upsert(deployment("web", 1, json!({"a": "1"}), 0));
        objects.start().await;
        let queue = WorkQueue::new(QueueOptions::default(), Arc::new(NoQueueMetrics));
        let feeder = Arc::new(QueueFeeder {
            group: "apps".into(),
            kind: "Deployment".into(),
            rules: vec![
                QueueRule::OwnKey,
                QueueRule::ControllingOwner {
                    group: "samplecontroller.k8s.io".into(),
                    kind: "Foo".into(),
                },
            ],
            filters: vec![
                UpdateFilter::new(vec![Predicate::Generation]),
                UpdateFilter::new(vec![Predicate::Labels]),
            ],
            queue: queue.clone(),
        });
        let registration = objects.informer.add_inline_event_handler(feeder, None);
        assert!(wait_until(WAIT, || registration.has_synced()).await);
        // The replay queues the object and its controller (adds pass every filter).
        assert_eq!(
            queued_through(&objects, &queue, "m0").await,
            ["foo", "m0", "web"]
        );
        // A status write changes neither generation nor labels: nothing.
        objects.upsert(deployment("web", 1, json!({"a": "1"}), 3));
        assert_eq!(queued_through(&objects, &queue, "m1").await, ["m1"]);
        // A label change passes the owner's rule only; a spec change the object's only.
        objects.upsert(deployment("web", 1, json!({"a": "2"}), 3));
        assert_eq!(queued_through(&objects, &queue, "m2").await, ["foo", "m2"]);
        objects.upsert(deployment("web", 2, json!({"a": "2"}), 3));
        assert_eq!(queued_through(&objects, &queue, "m3").await, ["m3", "web"]);
        // A delete queues under every rule.
        objects.delete("shop/web");
        assert_eq!(
            queued_through(&objects, &queue, "m4").await,
            ["foo", "m4", "web"]
        );
        objects.informer.remove_event_handler(&registration);
    }
}
