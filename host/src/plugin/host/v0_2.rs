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

use super::super::bindings::v0_2::ControllerPre;
use super::super::bindings::v0_2::kubewasm::controller::types as wit;
use super::super::cache_api::Access;
use super::super::client::{Resources, WriteClient};
use super::super::component::{CompiledPlugin, Linked};
use super::super::events::{EventRecorder, RecorderOptions};
use super::super::handlers_v0_2::{EventForwarder, spawn_handlers};
use super::super::imports_v0_2::Context;
use super::super::keys::{ObjectKey, QueueRule, keys_for, resolve_rules};
use super::super::log_gate::LogGate;
use super::super::reconciler::{Recipe, ReconcilerInstance, spawn_workers};
use super::super::state::HostState;
use super::super::workqueue::WorkQueue;
use super::super::{Delivery, Gvk, IndexDecl, IndexSource, PluginInfo, Subscription};
use super::{
    Claims, DropReason, PluginError, PluginHost, PluginId, PluginPolicy, PluginState, PluginStatus,
    describe_subscription, init_outcome, label_of, validate,
};

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
    /// The handlers that feed the queue; dropping them unregisters them.
    registrations: Vec<(SharedIndexInformer, Registration)>,
    workers: Vec<JoinHandle<()>>,
    replace_error: Option<String>,
}

impl ControllerEntry {
    /// Stops reconciling (a key being reconciled goes back to the queue) and removes the
    /// handlers that feed the queue.
    fn stop(&mut self) {
        for worker in &self.workers {
            worker.abort();
        }
        for (informer, registration) in self.registrations.drain(..) {
            informer.remove_event_handler(&registration);
        }
    }

    pub(super) fn ready(&self) -> bool {
        self.registrations.iter().all(|(_, r)| r.has_synced())
    }

    pub(super) fn status(&self, id: PluginId) -> PluginStatus {
        let stats = self.context.queue.stats();
        let calls = &self.context.calls;
        let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        PluginStatus {
            id,
            source: self.source.clone(),
            name: self.name.clone(),
            content_hash: self.hash.clone(),
            subscriptions: self.subscriptions.clone(),
            events_delivered: load(&calls.returned),
            errors: load(&calls.errors),
            traps: load(&calls.traps),
            timeouts: load(&calls.timeouts),
            memory_faults: load(&calls.memory_faults),
            restarts: 0,
            queue_depth: stats.depth,
            state: if self.workers.iter().all(JoinHandle::is_finished) {
                PluginState::Stopped
            } else {
                PluginState::Running
            },
            failed: false,
            events_dropped: DropReason::ALL.iter().map(|r| (r.as_str(), 0)).collect(),
            replay_done: self.ready(),
            last_error: self.replace_error.clone(),
            workqueue: Some(stats),
        }
    }
}

/// Queues the keys an informer event names under one subscription's rules.
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

fn gvk(g: &wit::Gvk) -> Gvk {
    Gvk {
        group: g.group.clone(),
        version: g.version.clone(),
        kind: g.kind.clone(),
    }
}

/// The 0.2 declaration as the checks and the wiring shared with 0.1 read it: subscriptions by
/// type, indexes on the type of their subscription handle. Every subscription is wired as a
/// cache: its events reach the guest's handlers through an [`EventForwarder`] and its queue
/// rules feed the queue through a [`QueueFeeder`].
fn as_v0_1(info: &wit::PluginInfo) -> Result<PluginInfo, String> {
    let subscriptions: Vec<Subscription> = info
        .subscriptions
        .iter()
        .map(|s| Subscription {
            gvk: gvk(&s.gvk),
            namespace: s.namespace.clone(),
            label_selector: s.label_selector.clone(),
            field_selector: s.field_selector.clone(),
            resync_seconds: s.resync_seconds,
            delivery: Delivery::CacheOnly,
        })
        .collect();
    let indexes = info
        .indexes
        .iter()
        .map(|d| {
            let on = usize::try_from(d.subscription)
                .ok()
                .and_then(|h| subscriptions.get(h))
                .ok_or_else(|| {
                    format!(
                        "index {}: no subscription has handle {}",
                        d.name, d.subscription
                    )
                })?;
            Ok(IndexDecl {
                name: d.name.clone(),
                gvk: on.gvk.clone(),
                source: match &d.source {
                    wit::IndexSource::Label(k) => IndexSource::Label(k.clone()),
                    wit::IndexSource::Annotation(k) => IndexSource::Annotation(k.clone()),
                    wit::IndexSource::Field(p) => IndexSource::Field(p.clone()),
                    wit::IndexSource::OwnerUid => IndexSource::OwnerUid,
                },
            })
        })
        .collect::<Result<_, String>>()?;
    Ok(PluginInfo {
        name: info.name.clone(),
        subscriptions,
        indexes,
    })
}

/// A 0.2 plugin checked: its declaration in 0.1 terms (for the checks and the wiring) and the
/// queue rules of each subscription.
struct Declared {
    info: PluginInfo,
    rules: Vec<Vec<QueueRule>>,
    /// Whether each subscription asked for the event handlers.
    events: Vec<bool>,
}

impl PluginHost {
    /// Instantiates a throw-away instance, calls `init` and checks what it declared against
    /// `policy`.
    async fn declare_v0_2(
        &self,
        compiled: &CompiledPlugin,
        policy: &PluginPolicy,
    ) -> Result<Declared, PluginError> {
        let pre = v0_2_pre(compiled)?;
        let file = compiled.file.clone();
        let limits = policy.limits.unwrap_or(self.inner.options.limits);
        let mut instance = ReconcilerInstance::new(
            pre,
            &file,
            label_of(&file),
            limits,
            Arc::new(Access::empty(policy.grants.clone())),
            Arc::new(LogGate::new(self.inner.options.logs)),
        )
        .await?;
        let declared = init_outcome(file.clone(), instance.init(&policy.config).await)?;
        let invalid = |what: String| PluginError::InvalidDeclaration {
            file: file.clone(),
            plugin: declared.name.clone(),
            what,
        };
        let info = as_v0_1(&declared).map_err(invalid)?;
        validate(&file, &info, policy, &self.inner.options.declarations)?;
        let rules = resolve_rules(&declared.subscriptions).map_err(invalid)?;
        let events = declared.subscriptions.iter().map(|s| s.events).collect();
        Ok(Declared {
            info,
            rules,
            events,
        })
    }

    /// What `check` answers for a 0.2 component.
    pub(super) async fn check_v0_2(
        &self,
        compiled: &CompiledPlugin,
        policy: &PluginPolicy,
    ) -> Result<PluginInfo, PluginError> {
        Ok(self.declare_v0_2(compiled, policy).await?.info)
    }

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
        } = self.declare_v0_2(&compiled, &policy).await?;
        let mut claims = Claims::default();
        let access = match self.wire(&compiled.file, &info, &policy, &mut claims).await {
            Ok((access, _)) => access,
            Err(e) => {
                self.release_indexes(&claims.indexes);
                for key in &claims.created {
                    self.stop_if_unclaimed(key).await;
                }
                return Err(e);
            }
        };
        {
            let mut users = self.inner.informer_users.lock();
            for key in &claims.keys {
                users.entry(key.clone()).or_default().plugins += 1;
            }
        }
        let name: Arc<str> = info.name.as_str().into();
        let context = context.unwrap_or_else(|| self.new_context(&name, &policy));
        let informers = self.inner.factory.informers();
        let mut registrations = Vec::new();
        let (events_tx, events_rx) = tokio::sync::mpsc::unbounded_channel();
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
                let forwarder = Arc::new(EventForwarder {
                    subscription: u32::try_from(handle).unwrap_or(u32::MAX),
                    tx: events_tx.clone(),
                });
                registrations.push((
                    informer.clone(),
                    informer.add_event_handler(forwarder, resync),
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
            registrations.push((informer.clone(), informer.add_event_handler(feeder, resync)));
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
            leader: self.inner.options.leader.clone(),
        };
        let mut workers = Vec::new();
        if events.contains(&true) {
            workers.push(spawn_handlers(recipe.clone(), events_rx));
        }
        workers.extend(spawn_workers(
            recipe,
            policy.reconcile.max_concurrent_reconciles,
        ));
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
            workers,
            replace_error: None,
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
        let client = Arc::new(
            WriteClient::new(
                kube.clone(),
                name.clone(),
                policy.writes.clone(),
                policy.reconcile.client.clone(),
                Arc::new(Resources::new(kube)),
                self.inner.options.observer.writes(name),
            )
            .with_leader(self.inner.options.leader.clone()),
        );
        let recorder = Arc::new(EventRecorder::new(
            client.clone(),
            RecorderOptions::default(),
        ));
        Arc::new(Context {
            client,
            recorder,
            queue: WorkQueue::new(
                policy.reconcile.queue.clone(),
                self.inner.options.observer.queue(name),
            ),
            calls: Default::default(),
        })
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
            old.stop();
            self.release_indexes(&old.indexes);
            self.release(&old.keys).await;
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
        self.release_indexes(&entry.indexes);
        self.release(&entry.keys).await;
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

/// The 0.2 linking of `compiled`; an error if it is a 0.1 component.
fn v0_2_pre(compiled: &CompiledPlugin) -> Result<&ControllerPre<HostState>, PluginError> {
    match &*compiled.pre {
        Linked::V0_2(pre) => Ok(pre),
        Linked::V0_1(_) => Err(PluginError::Invalid {
            file: compiled.file.clone(),
            reason: "a 0.1 component cannot run as a 0.2 plugin".into(),
        }),
    }
}
