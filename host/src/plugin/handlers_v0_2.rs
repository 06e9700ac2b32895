//! The event handlers of a 0.2 plugin (`on-add` / `on-update` / `on-delete`), for the
//! subscriptions whose `init` asked for events: informer callbacks go, in order, into the
//! version's [`Inbox`] (handlers registered inline, as for 0.1 plugins), and one task calls the
//! guest's handlers with the subscription handle, one event at a time, on an instance of its
//! own (reconcile runs beside it). A failed handler call is logged and the next event goes on;
//! a faulted instance is replaced.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use super::inbox::Inbox;
use super::instance::Outcome;
use super::observer::PluginObserver;
use super::reconciler::{Recipe, ReconcilerInstance, start_instance};

/// How long the task waits before trying a new instance after one failed to start.
const RESTART_DELAY: Duration = Duration::from_secs(1);

/// Starts the task calling the guest's handlers with the events of `inbox`, until the inbox
/// is closed, each call reported to `observer` as a 0.1 plugin's are. Abort it to stop at
/// once.
pub(crate) fn spawn_handlers(
    recipe: Recipe,
    inbox: Arc<Inbox>,
    observer: Arc<dyn PluginObserver>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut current: Option<ReconcilerInstance> = None;
        let mut batch = VecDeque::new();
        while inbox.take(&mut batch).await {
            while let Some(queued) = batch.pop_front() {
                let instance = loop {
                    match &mut current {
                        Some(i) => break i,
                        None => match start_instance(&recipe).await {
                            Ok((i, _)) => current = Some(i),
                            Err(reason) => {
                                tracing::warn!(plugin = %recipe.name, "starting a handler instance: {reason}");
                                tokio::time::sleep(RESTART_DELAY).await;
                            }
                        },
                    }
                };
                let subscription = u32::try_from(queued.subscription).unwrap_or(u32::MAX);
                let started = std::time::Instant::now();
                let outcome = instance.deliver(subscription, &queued.event).await;
                let ok = matches!(outcome, Outcome::Ok(()));
                observer.event_handled(
                    queued.subscription,
                    queued.event.kind(),
                    started.elapsed(),
                    ok,
                );
                inbox.handled(1);
                recipe.plugin.calls.count(&outcome);
                match outcome {
                    Outcome::Ok(()) => {}
                    Outcome::GuestError(reason) => {
                        tracing::debug!(plugin = %recipe.name, "handler returned an error: {reason}");
                    }
                    Outcome::Failed(kind, reason) => {
                        tracing::warn!(plugin = %recipe.name, "handler {}, a fresh instance takes over: {reason}", kind.as_str());
                        current = None;
                    }
                }
            }
        }
    })
}
