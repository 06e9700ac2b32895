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

    /// Whether the handlers that feed the queue have handed over the informers' replay.
    pub(super) fn synced(&self) -> bool {
        self.registrations.iter().all(|(_, r)| r.has_synced())
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
