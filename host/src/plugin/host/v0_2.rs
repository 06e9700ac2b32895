//! Plugins of contract 0.2 in the plugin host: loading (checked and wired like 0.1 plugins,
//! through the same informers and indexes), the queue rules that feed each plugin's workqueue,
//! and replacing a version without losing queued work (the queue, the write client and the
//! event recorder belong to the plugin and are handed to the new version).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kubewasm_informer::{
    InformerKey, ObjectRef as InformerObject, Registration, ResourceEventHandler,
    SharedIndexInformer,
};
use tokio::task::JoinHandle;

use super::super::admission::AdmissionPolicy;
use super::super::client::{Resources, WriteClient};
use super::super::component::CompiledPlugin;
use super::super::declare::{Declared, declare_v0_2, v0_2_pre};
use super::super::events::{EventRecorder, RecorderOptions};
use super::super::handlers_v0_2::spawn_handlers;
use super::super::imports_v0_2::Context;
use super::super::inbox::{EventSink, Inbox};
use super::super::informers::QueueHandler;
use super::super::keys::{ObjectKey, QueueRule, keys_for};
use super::super::log_gate::LogGate;
use super::super::observer::{DropReason, PluginObserver};
use super::super::reconciler::{Recipe, spawn_workers};
use super::super::workqueue::WorkQueue;
use super::{
    PluginError, PluginHost, PluginId, PluginPolicy, PluginState, PluginStatus,
    describe_subscription,
};
use crate::admission::AdmissionRegistration;
use std::sync::atomic::Ordering;

/// A running 0.2 plugin.
pub(super) struct ControllerEntry {
    pub(super) source: PathBuf,
    name: String,
    hash: String,
    subscriptions: Vec<String>,
    keys: Vec<InformerKey>,
    indexes: Vec<(InformerKey, String)>,
    /// The plugin's queue, client and recorder: outlive versions.
    context: Arc<Context>,
    /// The handlers that feed the queue and the inbox; dropping them unregisters them.
    registrations: Vec<(SharedIndexInformer, Registration)>,
    /// The events of this version's handler subscriptions.
    inbox: Arc<Inbox>,
    /// Where the version's handler task reports (`None`: it has no handlers).
    handler_observer: Option<Arc<dyn PluginObserver>>,
    workers: Vec<JoinHandle<()>>,
    replace_error: Option<String>,
    /// The admission policy the webhook server answers with (contract 0.3); dropping it stops
    /// serving it unless a newer version took its place.
    admission: Option<AdmissionRegistration>,
}

impl ControllerEntry {
    /// Stops reconciling (a key being reconciled goes back to the queue) and removes the
    /// handlers that feed the queue.
    fn stop(&mut self) {
        for worker in &self.workers {
            worker.abort();
        }
        self.admission = None;
        for (informer, registration) in self.registrations.drain(..) {
            informer.remove_event_handler(&registration);
        }
        self.inbox.close();
    }

    /// Stops the version a new one replaces: the handler events it had not handled are
    /// dropped and counted (the new version's replay covers their objects; the queue, which
    /// both share, loses nothing).
    fn stop_replaced(&mut self) {
        self.stop();
        let abandoned = self.inbox.depth() as u64;
        if abandoned > 0 {
            tracing::info!(plugin = %self.name, events = abandoned, "handler events the replaced version had not handled are dropped; the new version's replay covers their objects");
            self.context
                .calls
                .drop_events(DropReason::Replaced, abandoned);
            if let Some(observer) = &self.handler_observer {
                observer.events_dropped(DropReason::Replaced, abandoned);
            }
        }
    }

    pub(super) fn ready(&self) -> bool {
        self.registrations.iter().all(|(_, r)| r.has_synced())
    }

    pub(super) fn status(&self, id: PluginId) -> PluginStatus {
        let stats = self.context.queue.stats();
        PluginStatus {
            queue_depth: stats.depth + self.inbox.depth(),
            state: if self.workers.iter().all(JoinHandle::is_finished) {
                PluginState::Stopped
            } else {
                PluginState::Running
            },
            replay_done: self.ready(),
            restarts: self.context.restarts.load(Ordering::Relaxed),
            last_error: self
                .replace_error
                .clone()
                .or_else(|| self.context.last_error.lock().clone()),
            workqueue: Some(stats),
            admission: self
                .admission
                .as_ref()
                .map(|r| r.policy().declaration().clone()),
            ..PluginStatus::new(
                id,
                &self.source,
                &self.name,
                &self.hash,
                &self.subscriptions,
                &self.context.calls,
            )
        }
    }
}

/// Queues the keys an informer event names under one subscription's rules (registered inline:
/// the workqueue is its buffer).
struct QueueFeeder {
    group: String,
    kind: String,
    rules: Vec<QueueRule>,
    queue: WorkQueue<ObjectKey>,
    plugin: Arc<str>,
}

impl QueueFeeder {
    fn queue(&self, object: &InformerObject) {
        match keys_for(&self.group, &self.kind, &self.rules, object.json()) {
            Ok(keys) => keys.into_iter().for_each(|k| self.queue.add(k)),
            Err(e) => {
                tracing::warn!(plugin = %self.plugin, kind = %self.kind, "an object without readable metadata queues nothing: {e}")
            }
        }
    }
}

impl ResourceEventHandler for QueueFeeder {
    fn on_add(&self, obj: &InformerObject, _in_initial_list: bool) {
        self.queue(obj);
    }

    fn on_update(&self, old: &InformerObject, new: &InformerObject) {
        self.queue(old);
        self.queue(new);
    }

    fn on_delete(&self, obj: &InformerObject, _final_state_unknown: bool) {
        self.queue(obj);
    }
}

impl PluginHost {
    /// Loads a 0.2 component: declares, wires its informers and indexes, registers its queue
    /// rules and starts its reconcile workers. `context`: the queue, client and recorder of the
    /// version it replaces (`None`: new ones).
    async fn start_v0_2(
        &self,
        source: &Path,
        compiled: CompiledPlugin,
        context: Option<Arc<Context>>,
    ) -> Result<ControllerEntry, PluginError> {
        let policy = self.inner.options.policy.policy(&compiled.file);
        let limits = policy.limits.unwrap_or(self.inner.options.limits);
        let Declared {
            info,
            rules,
            events,
            world,
        } = declare_v0_2(&compiled, &policy, &self.check_options()).await?;
        let (claims, access, _) = self.lease(&compiled.file, &info, &policy).await?;
        let name: Arc<str> = info.name.as_str().into();
        let context = context.unwrap_or_else(|| self.new_context(&name, &policy));
        let informers = self.inner.factory.informers();
        let mut registrations = Vec::new();
        let inbox = Arc::new(Inbox::default());
        let sink = EventSink::new(inbox.clone(), inbox.generation());
        for (handle, ((sub, rules), key)) in info
            .subscriptions
            .iter()
            .zip(rules)
            .zip(&claims.keys)
            .enumerate()
        {
            let Some((_, informer)) = informers.iter().find(|(k, _)| k == key) else {
                continue;
            };
            let resync = sub
                .resync_seconds
                .map(|s| std::time::Duration::from_secs(s.into()));
            if events[handle] {
                let handler = Arc::new(QueueHandler {
                    sink: sink.for_subscription(handle),
                });
                registrations.push((
                    informer.clone(),
                    informer.add_inline_event_handler(handler, resync),
                ));
            }
            if rules.is_empty() {
                continue;
            }
            let feeder = Arc::new(QueueFeeder {
                group: sub.gvk.group.clone(),
                kind: sub.gvk.kind.clone(),
                rules,
                queue: context.queue.clone(),
                plugin: name.clone(),
            });
            registrations.push((
                informer.clone(),
                informer.add_inline_event_handler(feeder, resync),
            ));
        }
        let pre = v0_2_pre(&compiled)?;
        let recipe = Recipe {
            pre: Arc::new(pre.clone()),
            file: compiled.file.clone(),
            name: name.clone(),
            config: policy.config.clone(),
            limits,
            access,
            log_gate: Arc::new(LogGate::new(self.inner.options.logs)),
            plugin: context.clone(),
            leader: if policy.reconcile.every_replica {
                crate::leader::LeaderGate::always()
            } else {
                self.inner.options.leader.clone()
            },
        };
        let admission = match pre.admission_indices() {
            Some(indices) => {
                let policy = AdmissionPolicy::start(recipe.clone(), indices.clone()).await?;
                Some(self.inner.options.admission.register(Arc::new(policy)))
            }
            None => None,
        };
        let mut workers = Vec::new();
        let mut handler_observer = None;
        if events.contains(&true) {
            let observer = self.observer(&info);
            workers.push(spawn_handlers(
                recipe.clone(),
                inbox.clone(),
                observer.clone(),
            ));
            handler_observer = Some(observer);
        }
        if world.has_reconcile() {
            workers.extend(spawn_workers(
                recipe,
                policy.reconcile.max_concurrent_reconciles,
            ));
        }
        self.inner.factory.start();
        Ok(ControllerEntry {
            source: source.to_owned(),
            name: name.to_string(),
            hash: compiled.hash.clone(),
            subscriptions: info
                .subscriptions
                .iter()
                .map(describe_subscription)
                .collect(),
            keys: claims.keys,
            indexes: claims.indexes,
            context,
            registrations,
            inbox,
            handler_observer,
            workers,
            replace_error: None,
            admission,
        })
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
        let client = Arc::new(
            WriteClient::new(
                kube.clone(),
                name.clone(),
                policy.writes.clone(),
                policy.reconcile.client.clone(),
                resources.clone(),
                self.inner.options.observer.writes(name),
            )
            .with_leader(self.inner.options.leader.clone()),
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

    /// Loads a compiled 0.2 component.
    pub(super) async fn load_v0_2(
        &self,
        source: &Path,
        compiled: CompiledPlugin,
    ) -> Result<PluginId, PluginError> {
        let entry = self.start_v0_2(source, compiled, None).await?;
        let id = PluginId(
            self.inner
                .next_id
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        );
        tracing::info!(plugin = %entry.name, id = id.0, file = %source.display(), "0.2 plugin loaded");
        self.inner.controllers.lock().insert(id, entry);
        Ok(id)
    }

    /// Replaces a 0.2 plugin: the new version is declared and wired and its queue rules are
    /// registered (replaying the cache into the queue) before the old version's are removed,
    /// so no change goes unqueued; the old workers are stopped (the key each held goes back to
    /// the queue) and the new ones take over the same queue.
    pub(super) async fn replace_v0_2(
        &self,
        id: PluginId,
        compiled: CompiledPlugin,
    ) -> Result<(), PluginError> {
        let (source, context) = {
            let controllers = self.inner.controllers.lock();
            let entry = controllers
                .get(&id)
                .ok_or(PluginError::UnknownPlugin(id.0))?;
            (entry.source.clone(), entry.context.clone())
        };
        let entry = match self.start_v0_2(&source, compiled, Some(context)).await {
            Ok(entry) => entry,
            Err(e) => {
                if let Some(entry) = self.inner.controllers.lock().get_mut(&id) {
                    entry.replace_error = Some(e.to_string());
                }
                return Err(e);
            }
        };
        tracing::info!(plugin = %entry.name, id = id.0, file = %source.display(), "0.2 plugin replaced");
        let old = self.inner.controllers.lock().insert(id, entry);
        if let Some(mut old) = old {
            old.stop_replaced();
            self.inner.leases.release(&old.keys, &old.indexes).await;
        }
        Ok(())
    }

    /// Whether a loaded 0.2 plugin is called `name`.
    pub(super) fn controller_named(&self, name: &str) -> bool {
        self.inner
            .controllers
            .lock()
            .values()
            .any(|e| e.name == name)
    }

    /// Unloads a 0.2 plugin: its workers stop, its queue is shut down. Answers its name, or
    /// `None` if `id` is not a 0.2 plugin.
    pub(super) async fn unload_v0_2(&self, id: PluginId) -> Option<String> {
        let entry = self.inner.controllers.lock().remove(&id);
        let mut entry = entry?;
        entry.stop();
        entry.context.queue.shut_down();
        tracing::info!(plugin = %entry.name, id = id.0, "0.2 plugin unloaded");
        self.inner.leases.release(&entry.keys, &entry.indexes).await;
        Some(entry.name)
    }

    /// Stops every 0.2 plugin.
    pub(super) fn shutdown_v0_2(&self) {
        let entries = std::mem::take(&mut *self.inner.controllers.lock());
        for mut entry in entries.into_values() {
            entry.stop();
            entry.context.queue.shut_down();
        }
    }
}
