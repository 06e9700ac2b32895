//! Plugins of contract 0.2 in the plugin host: preparing one (checked and wired like 0.1
//! plugins, through the same informers and indexes, its events through the same event loop),
//! the queue rules that feed each plugin's workqueue, and its reconcile workers. The queue, the
//! write client and the event recorder belong to the plugin ([`Context`]) and are handed to
//! the version that replaces it, whatever the contract version of the one replaced.

use std::path::Path;
use std::sync::Arc;

use kubewasm_informer::{
    ObjectRef as InformerObject, Registration, ResourceEventHandler, SharedIndexInformer,
};
use tokio::task::JoinHandle;

use crate::admission::policy::{AdmissionPolicy, Authority};
use crate::admission::registry::AdmissionRegistration;
use crate::client::events::{EventRecorder, RecorderOptions};
use crate::client::{Resources, WriteClient};
use crate::events::event_loop::ActorConfig;
use crate::events::informers::InformerSubscriber;
use crate::guest::declare::{Declared, declare_v0_2, v0_2_pre};
use crate::guest::instance::Recipe;
use crate::manager::plugin_host::{Entry, PluginError, PluginHost, PluginPolicy, Prepared};
use crate::model::identity::PluginKey;
use crate::reconcile::context::Context;
use crate::reconcile::keys::{ObjectKey, QueueRule, keys_for};
use crate::reconcile::predicates::UpdateFilter;
use crate::reconcile::reconciler::{
    CacheSync, spawn_workers, {self},
};
use crate::reconcile::workqueue::WorkQueue;
use crate::wasm::component::CompiledPlugin;

/// What a running 0.2 plugin has besides its event loop: its context (queue, client,
/// recorder, counters), the handlers that feed its queue and its reconcile workers.
pub(super) struct Controller {
    /// The plugin's queue, client and recorder: outlive versions.
    pub(super) context: Arc<Context>,
    /// The handlers that feed the queue; removed on [`stop`](Self::stop).
    registrations: Vec<(SharedIndexInformer, Registration)>,
    workers: Vec<JoinHandle<()>>,
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
struct QueueFeeder {
    group: String,
    kind: String,
    rules: Vec<QueueRule>,
    /// The updates each rule queues on (contract 0.2.2's predicates).
    filters: Vec<UpdateFilter>,
    queue: WorkQueue<ObjectKey>,
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

impl PluginHost {
    /// Prepares a 0.2 component: declares it, wires its informers and indexes, registers its
    /// queue rules and starts its reconcile workers; its event loop (for subscriptions with
    /// events) is left for [`start`](PluginHost::start). `context`: the queue, client and
    /// recorder of the 0.2 version it replaces (`None`: new ones).
    pub(super) async fn prepare_v0_2(
        &self,
        source: &Path,
        compiled: CompiledPlugin,
        context: Option<Arc<Context>>,
    ) -> Result<Prepared, PluginError> {
        let key = PluginKey::of(source)?;
        let policy = self.inner.options.policy.policy(&compiled.file);
        let limits = policy.limits.unwrap_or(self.inner.options.limits);
        let Declared {
            info,
            rules,
            filters,
            events,
            world,
            mut instance,
        } = declare_v0_2(&compiled, &policy, &self.check_options()).await?;
        let (claims, access, mut sources) = self.lease(&compiled.file, &info, &policy).await?;
        let name = key.to_arc();
        let context = context.unwrap_or_else(|| self.new_context(&name, &policy));
        let informers = self.inner.factory.informers();
        let mut registrations = Vec::new();
        let mut caches = Vec::new();
        for (((sub, rules), filters), key) in info
            .subscriptions
            .iter()
            .zip(rules)
            .zip(filters)
            .zip(&claims.keys)
        {
            let Some((_, informer)) = informers.iter().find(|(k, _)| k == key) else {
                continue;
            };
            caches.push(informer.clone());
            if rules.is_empty() {
                continue;
            }
            let resync = sub
                .resync_seconds
                .map(|s| std::time::Duration::from_secs(s.into()));
            let feeder = Arc::new(QueueFeeder {
                group: sub.gvk.group.clone(),
                kind: sub.gvk.kind.clone(),
                rules,
                filters,
                queue: context.queue.clone(),
            });
            registrations.push((
                informer.clone(),
                informer.add_inline_event_handler(feeder, resync),
            ));
        }
        instance.set_access(access.clone());
        instance.connect(context.clone());
        let log_gate = instance.log_gate();
        let recipe = Recipe {
            compiled: compiled.clone(),
            name: name.clone(),
            config: policy.config.clone(),
            limits,
            access,
            log_gate: log_gate.clone(),
            memory: instance.memory_use(),
            context: Some(context.clone()),
        };
        let memory = recipe.memory.clone();
        // Subscriptions with queue rules only feed the queue: the event loop takes the ones
        // that asked for events.
        sources.retain(|s| events.get(s.subscription).copied().unwrap_or(false));
        // The log gate counts what it drops and suppresses for reconcile-only plugins too.
        let observer = self.observer(&key, &info);
        log_gate.set_observer(observer.clone());
        let actor = if sources.is_empty() {
            None
        } else {
            let config = ActorConfig {
                recipe: recipe.clone(),
                resources: info.subscriptions.iter().map(|s| s.gvk.clone()).collect(),
                subscriber: Box::new(InformerSubscriber { sources }),
                observer,
                restart: self.inner.options.restart,
            };
            Some((config, instance))
        };
        let admission = match v0_2_pre(&compiled)?.admission_indices() {
            Some(indices) => {
                let authority = Authority {
                    key: key.as_str(),
                    writes: &policy.writes,
                    discovery: Some(&self.inner.client),
                };
                let policy =
                    AdmissionPolicy::start(recipe.clone(), indices.clone(), authority).await?;
                Some(self.inner.options.admission.register(Arc::new(policy)))
            }
            None => None,
        };
        let mut workers = Vec::new();
        if world.has_reconcile() {
            let workers_recipe = reconciler::Recipe {
                instance: recipe,
                name: name.clone(),
                plugin: context.clone(),
                leader: if policy.reconcile.every_replica {
                    crate::leader_gate::LeaderGate::always()
                } else {
                    self.inner.options.leader.clone()
                },
                caches: CacheSync::new(caches),
            };
            workers = spawn_workers(workers_recipe, policy.reconcile.max_concurrent_reconciles);
        }
        let mut entry = Entry::new(key, &compiled, &info, claims, limits, &policy, memory);
        entry.controller = Some(Controller {
            context,
            registrations,
            workers,
            admission,
        });
        Ok(Prepared { entry, actor })
    }

    /// A new plugin's queue, write client (its write grants, kube's retries off when the host
    /// was given such a client) and event recorder.
    fn new_context(&self, name: &Arc<str>, policy: &PluginPolicy) -> Arc<Context> {
        let kube = self
            .inner
            .options
            .write_client
            .clone()
            .unwrap_or_else(|| self.inner.client.clone());
        let resources = Arc::new(Resources::new(kube.clone()));
        // A plugin whose account is invalid and that has write grants was refused at load;
        // without write grants nothing is sent for it.
        let account = policy.impersonate.as_ref().and_then(|a| a.as_ref().ok());
        let client = Arc::new(
            WriteClient::new(
                kube.clone(),
                name.clone(),
                policy.writes.clone(),
                policy.reconcile.client.clone(),
                resources.clone(),
                self.inner.options.observer.writes(name),
            )
            .with_leader(self.inner.options.leader.clone())
            .impersonating(account),
        );
        // Events have a write budget of their own (the recorder paces its background writes),
        // so recording them takes nothing from the plugin's writes.
        let events = Arc::new(
            WriteClient::new(
                kube,
                name.clone(),
                policy.writes.clone(),
                policy.reconcile.client.clone(),
                resources,
                self.inner.options.observer.writes(name),
            )
            .with_leader(self.inner.options.leader.clone())
            .impersonating(account)
            .unmetered(),
        );
        let recorder = Arc::new(EventRecorder::new(events, RecorderOptions::default()));
        Arc::new(Context::new(
            client,
            recorder,
            &policy.reconcile,
            self.inner.options.observer.queue(name),
        ))
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
