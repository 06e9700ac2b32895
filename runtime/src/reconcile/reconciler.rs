//! The reconcile workers of a 0.2 plugin: each owns one guest instance and takes keys from the
//! plugin's host-owned workqueue, one at a time, with client-go's semantics (the queue never
//! hands one key to two workers; a failed reconcile is retried with backoff; a requeue asked
//! for by the guest is honoured). A worker whose instance faults completes its key as a
//! failure and starts a fresh instance; a stopped worker's key goes back to the queue.

use crate::leader_gate::LeaderGate;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use kubewasm_informer::SharedIndexInformer;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::client::Refusal;
use crate::contracts::v0_2::exports::kubewasm::controller::reconcile::Action;
use crate::contracts::v0_2::kubewasm::controller::types as wit;
use crate::events::event_loop::restart_backoff;
use crate::guest::calls::Outcome;
use crate::guest::escape::escaped;
use crate::guest::instance::{Instance, shown};
use crate::model::declared::Gvk;
use crate::reconcile::context::Context;
use crate::reconcile::keys::ObjectKey;
use crate::reconcile::workqueue::{Completion, ReconcileResult};

/// What a 0.2 plugin version's reconcile workers are made from.
#[derive(Clone)]
pub(crate) struct Recipe {
    /// What each worker's instance is made from.
    pub(crate) instance: crate::guest::instance::Recipe,
    pub(crate) name: Arc<str>,
    pub(crate) plugin: Arc<Context>,
    /// Keys are taken from the queue only while this replica leads; a standby keeps its
    /// instance warm and its queue filled from the cache.
    pub(crate) leader: LeaderGate,
    /// The caches of the plugin's subscriptions: no key is taken before all have synced.
    pub(crate) caches: CacheSync,
}

/// The informers of a plugin's subscriptions, for its reconcile workers to wait on: a reconcile
/// reads the cache, and a cache that has not synced answers "absent" for objects that exist
/// (a controller would create what is there already). controller-runtime's and kube-runtime's
/// controllers wait the same way. The queue feeders are inline handlers, which have handled
/// their informer's initial list by the time it has synced, so the informers' sync covers the
/// handlers that fill the queue too.
#[derive(Clone, Default)]
pub(crate) struct CacheSync {
    informers: Arc<[SharedIndexInformer]>,
}

impl CacheSync {
    /// Waits on `informers`.
    pub(crate) fn new(informers: Vec<SharedIndexInformer>) -> Self {
        CacheSync {
            informers: informers.into(),
        }
    }

    /// Waits until every cache has synced; `false` if one of the informers stopped first.
    /// A server that cannot be reached keeps it waiting: the plugin's readiness says so.
    pub(crate) async fn wait(&self) -> bool {
        for informer in self.informers.iter() {
            if !informer.wait_synced().await {
                return false;
            }
        }
        true
    }
}

/// A fresh instance of `recipe`, initialised and connected, with the resource type of each
/// of its subscription handles.
async fn start_instance(recipe: &Recipe) -> Result<(Instance, Vec<Gvk>), String> {
    let instance = Instance::start(&recipe.instance).await?;
    let subscriptions = instance.resources().to_vec();
    Ok((instance, subscriptions))
}

/// The key as this instance names it: the handle of its subscription of the key's type.
fn wit_key(subscriptions: &[Gvk], key: &ObjectKey) -> Option<wit::Key> {
    let handle = subscriptions
        .iter()
        .position(|g| g.group == key.group && g.kind == key.kind)?;
    Some(wit::Key {
        subscription: u32::try_from(handle).ok()?,
        namespace: key.namespace.clone(),
        name: key.name.clone(),
    })
}

/// A fresh instance of `recipe` after `delay`.
async fn start_after(delay: Duration, recipe: &Recipe) -> Result<(Instance, Vec<Gvk>), String> {
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    start_instance(recipe).await
}

/// How long a worker waits before starting a new instance after the last one failed to start.
const RESTART_DELAY: Duration = Duration::from_secs(1);

/// Starts `count` workers reconciling the keys of `recipe.plugin`'s queue, and (with leader
/// election) the task releasing parked keys when their shard comes to be led here. Abort them
/// to stop: the key each holds goes back to the queue.
pub(crate) fn spawn_workers(recipe: Recipe, count: usize) -> Vec<JoinHandle<()>> {
    let mut tasks: Vec<_> = (0..count.max(1))
        .map(|_| tokio::spawn(work(recipe.clone())))
        .collect();
    if recipe.leader.elects() {
        tasks.push(tokio::spawn(unpark_on_leadership(recipe)));
    }
    tasks
}

/// Releases the parked keys of `recipe`'s queue whose shard this replica has come to lead, on
/// every leadership transition, until aborted.
async fn unpark_on_leadership(recipe: Recipe) {
    let mut transitions = recipe.leader.subscribe_shards();
    let queue = recipe.plugin.queue.clone();
    loop {
        let gate = &recipe.leader;
        queue.unpark(|key| gate.leads(key.namespace.as_deref(), &key.name));
        if transitions.changed().await.is_err() {
            return;
        }
    }
}

/// `namespace/name` (or `name`) of a key, for messages: escaped (a key the guest queued is
/// checked, but the log takes no chances).
fn key_name(key: &ObjectKey) -> String {
    let name = match &key.namespace {
        Some(ns) => format!("{ns}/{}", key.name),
        None => key.name.clone(),
    };
    escaped(&name).into_owned()
}

/// Faults of a worker's instances with no reconcile returning in between: the next instance
/// waits for a growing backoff (the handler task's), so a guest that traps on every key cannot
/// spin a core instantiating.
#[derive(Debug, Default)]
struct FaultBackoff {
    in_a_row: u32,
}

impl FaultBackoff {
    fn faulted(&mut self) {
        self.in_a_row = self.in_a_row.saturating_add(1);
    }

    fn returned(&mut self) {
        self.in_a_row = 0;
    }

    /// How long to wait before the next instance starts.
    fn delay(&self) -> Duration {
        if self.in_a_row == 0 {
            Duration::ZERO
        } else {
            restart_backoff(self.in_a_row)
        }
    }
}

/// How a reconcile ended, for the metrics: an error after a refused write is `Refused`.
fn result_of(outcome: &Outcome<Action>, refused: Option<Refusal>) -> ReconcileResult {
    match outcome {
        Outcome::Ok(Action::Done) => ReconcileResult::Ok,
        Outcome::Ok(Action::RequeueAfter(_)) => ReconcileResult::Requeue,
        Outcome::GuestError(_) if refused.is_some() => ReconcileResult::Refused,
        Outcome::GuestError(_) => ReconcileResult::Error,
        Outcome::Failed(..) => ReconcileResult::Fault,
    }
}

async fn work(recipe: Recipe) {
    let queue = recipe.plugin.queue.clone();
    let mut faults = FaultBackoff::default();
    if !recipe.caches.wait().await {
        tracing::warn!(plugin = %recipe.name, "an informer of the plugin stopped before its cache synced: its reconcile worker stops");
        return;
    }
    let mut current: Option<(Instance, Vec<Gvk>)> = None;
    // Whether the next instance replaces one that faulted (a restart).
    let mut replacing = false;
    loop {
        let (instance, subscriptions) = match &mut current {
            Some(c) => (&mut c.0, &c.1),
            None => match start_after(faults.delay(), &recipe).await {
                Ok(c) => {
                    if std::mem::take(&mut replacing) {
                        recipe.plugin.restarts.fetch_add(1, Ordering::Relaxed);
                    }
                    let c = current.insert(c);
                    (&mut c.0, &c.1)
                }
                Err(reason) => {
                    tracing::warn!(plugin = %recipe.name, "starting a reconcile instance: {reason}");
                    tokio::time::sleep(RESTART_DELAY).await;
                    continue;
                }
            },
        };
        recipe.leader.wait_leader().await;
        // The plugin's reconcile rate: the token is taken before the key, so no key is held
        // while its worker waits.
        let wait = recipe.plugin.reconciles.lock().reserve(Instant::now());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        let Some(item) = queue.get().await else {
            return;
        };
        let leads = |key: &ObjectKey| recipe.leader.leads(key.namespace.as_deref(), &key.name);
        if !leads(item.key()) {
            let key = item.key().clone();
            item.complete(Completion::Park);
            // Leadership may have come between the check and the park, its release run.
            if leads(&key) {
                queue.unpark(|k| *k == key);
            }
            continue;
        }
        let Some(key) = wit_key(subscriptions, item.key()) else {
            tracing::warn!(plugin = %recipe.name, key = %key_name(item.key()), "a queued key of a resource this version does not subscribe to: dropped");
            item.complete(Completion::Done);
            continue;
        };
        let started = Instant::now();
        let outcome = instance.reconcile(&key).await;
        let result = result_of(&outcome, instance.refused());
        queue.reconciled(result, started.elapsed());
        recipe.plugin.calls.count_reconcile(&outcome);
        match result {
            ReconcileResult::Fault => faults.faulted(),
            _ => faults.returned(),
        }
        match outcome {
            Outcome::Ok(Action::Done) => item.complete(Completion::Done),
            Outcome::Ok(Action::RequeueAfter(ms)) => {
                let delay = Duration::from_millis(ms.into()).max(recipe.plugin.min_requeue);
                item.complete(Completion::RequeueAfter(delay))
            }
            Outcome::GuestError(reason) => {
                let (key, reason) = (key_name(item.key()), shown(&reason));
                queue.reconcile_failed();
                if let Some(unlogged) = recipe
                    .instance
                    .log_gate
                    .admit_error(crate::guest::log_gate::GuestErrors::Reconcile)
                {
                    tracing::warn!(plugin = %recipe.name, %key, unlogged, "reconcile of {key} failed, retried with backoff: {reason}");
                }
                recipe
                    .plugin
                    .record_error(format!("reconcile {key}: {reason}"));
                item.complete(Completion::Retry);
            }
            Outcome::Failed(kind, reason) => {
                let (key, reason) = (key_name(item.key()), shown(&reason));
                tracing::warn!(plugin = %recipe.name, %key, "reconcile {}, a fresh instance takes over: {reason}", kind.as_str());
                recipe
                    .plugin
                    .record_error(format!("reconcile {key} {}: {reason}", kind.as_str()));
                item.complete(Completion::Retry);
                current = None;
                replacing = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observer::FailureKind;

    #[test]
    fn a_worker_backs_off_after_faults_in_a_row_and_not_after_a_returned_reconcile() {
        let mut faults = FaultBackoff::default();
        assert_eq!(
            faults.delay(),
            Duration::ZERO,
            "the first instance starts at once"
        );
        faults.faulted();
        assert_eq!(faults.delay(), Duration::from_millis(50));
        faults.faulted();
        faults.faulted();
        assert_eq!(faults.delay(), Duration::from_millis(200));
        for _ in 0..100 {
            faults.faulted();
        }
        assert_eq!(faults.delay(), Duration::from_secs(10), "capped");
        faults.returned();
        assert_eq!(faults.delay(), Duration::ZERO);
    }

    #[test]
    fn results_are_typed_and_an_error_after_a_refused_write_is_refused() {
        let error = Outcome::GuestError("boom".into());
        assert_eq!(result_of(&error, None), ReconcileResult::Error);
        assert_eq!(
            result_of(&error, Some(Refusal::RateLimited)),
            ReconcileResult::Refused
        );
        assert_eq!(
            result_of(&Outcome::Ok(Action::Done), Some(Refusal::NotLeader)),
            ReconcileResult::Ok,
            "a refusal the guest got over is no failure"
        );
        assert_eq!(
            result_of(&Outcome::Ok(Action::RequeueAfter(5)), None),
            ReconcileResult::Requeue
        );
        assert_eq!(
            result_of(&Outcome::Failed(FailureKind::Trap, "t".into()), None),
            ReconcileResult::Fault
        );
    }
}
