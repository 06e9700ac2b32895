//! The event handlers of a 0.2 plugin, for the subscriptions whose `init` asked for events:
//! informer callbacks go, in order, into the version's [`Inbox`] (handlers registered inline,
//! as for 0.1 plugins), and one task calls the guest on an instance of its own (reconcile runs
//! beside it) with the subscription handle: `on-add` / `on-update` / `on-delete` one event per
//! call (0.2.0 `handler`), or `on-events` with every waiting event in one call (0.2.1
//! `batch-handler`), batches sized by [`BatchSizer`]. A failed event is logged and counted and
//! the next goes on; a faulted instance is replaced.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use super::actor::restart_backoff;
use super::grants::Limits;
use super::inbox::{Inbox, Queued};
use super::instance::Outcome;
use super::observer::{DropReason, PluginObserver};
use super::reconciler::{Recipe, ReconcilerInstance, cut, start_instance};

/// How long the task waits before trying a new instance after one failed to start.
const RESTART_DELAY: Duration = Duration::from_secs(1);

/// The most events one batch carries.
const MAX_BATCH_EVENTS: usize = 256;

/// The most JSON one batch carries (unless its first event alone is larger): the host copies a
/// batch's objects into one buffer and that into the guest's memory, and both fit a core's L2
/// cache at this size. Past a few dozen events a call's own cost is spread thin already.
const MAX_BATCH_BYTES: usize = 128 << 10;

/// Sizes a batch-handler plugin's batches from what its earlier ones took.
///
/// A batch has the deadline of one call, so its expected guest time is kept to an eighth of
/// the deadline: a guest slow on every event gets batches of one and the whole deadline for
/// each. A batch is copied into the guest's memory at once, so its objects are kept to a
/// sixteenth of the memory cap, and to [`MAX_BATCH_BYTES`]. Sizes grow by doubling (a burst
/// reaches full batches in a few calls) and fall back to one after a fault.
#[derive(Debug)]
struct BatchSizer {
    /// Guest time one batch may be expected to take.
    budget: Duration,
    /// JSON bytes one batch may carry (a batch of one event carries it whatever its size).
    max_bytes: usize,
    /// The most events the next batch may carry.
    limit: usize,
}

impl BatchSizer {
    fn new(limits: &Limits) -> Self {
        BatchSizer {
            budget: limits.call_deadline / 8,
            max_bytes: (limits.memory / 16).clamp(1, MAX_BATCH_BYTES),
            limit: 1,
        }
    }

    /// How many of the first events of `queued` go in the next batch: at least one.
    fn next_len(&self, queued: &VecDeque<Queued>) -> usize {
        let mut bytes = 0;
        let mut n = 0;
        for q in queued.iter().take(self.limit) {
            bytes += q.event.json_len();
            if n > 0 && bytes > self.max_bytes {
                break;
            }
            n += 1;
        }
        n.max(1)
    }

    /// A batch of `n` events returned after `elapsed`.
    fn returned(&mut self, n: usize, elapsed: Duration) {
        let per_event = elapsed / u32::try_from(n.max(1)).unwrap_or(u32::MAX);
        let by_time = if per_event.is_zero() {
            MAX_BATCH_EVENTS
        } else {
            usize::try_from(self.budget.as_nanos() / per_event.as_nanos()).unwrap_or(usize::MAX)
        };
        self.limit = by_time
            .min(self.limit.max(n).saturating_mul(2))
            .clamp(1, MAX_BATCH_EVENTS);
    }

    /// The instance faulted: start again from batches of one.
    fn faulted(&mut self) {
        self.limit = 1;
    }
}

/// Starts the task calling the guest's handlers with the events of `inbox`, until the inbox
/// is closed, each event and call reported to `observer` as a 0.1 plugin's are. Abort it to
/// stop at once.
pub(crate) fn spawn_handlers(
    recipe: Recipe,
    inbox: Arc<Inbox>,
    observer: Arc<dyn PluginObserver>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut current: Option<ReconcilerInstance> = None;
        // Faults with no call returning in between: the next instance waits for a growing
        // backoff, so a guest that faults on every event cannot spin a core instantiating.
        let mut faults_in_a_row = 0u32;
        // Whether the next instance replaces one that faulted (a restart).
        let mut replacing = false;
        let mut sizer = BatchSizer::new(&recipe.limits);
        // Events of a batch the instance faulted on: delivered again one per call, so that
        // only the event that faults is dropped.
        let mut singles = 0usize;
        let mut queued = VecDeque::new();
        let mut chunk = Vec::new();
        while inbox.take(&mut queued).await {
            while !queued.is_empty() {
                let instance = loop {
                    match &mut current {
                        Some(i) => break i,
                        None => {
                            if faults_in_a_row > 0 {
                                tokio::time::sleep(restart_backoff(faults_in_a_row)).await;
                            }
                            match start_instance(&recipe).await {
                                Ok((i, _)) => {
                                    if std::mem::take(&mut replacing) {
                                        recipe.plugin.restarts.fetch_add(1, Ordering::Relaxed);
                                    }
                                    current = Some(i);
                                }
                                Err(reason) => {
                                    tracing::warn!(plugin = %recipe.name, "starting a handler instance: {reason}");
                                    tokio::time::sleep(RESTART_DELAY).await;
                                }
                            }
                        }
                    }
                };
                let n = if singles > 0 || !instance.takes_batches() {
                    1
                } else {
                    sizer.next_len(&queued)
                };
                chunk.clear();
                chunk.extend(queued.drain(..n));
                let faulted = deliver(&recipe, instance, &observer, &chunk, &mut sizer).await;
                singles = singles.saturating_sub(n);
                if !faulted {
                    faults_in_a_row = 0;
                    inbox.handled(n);
                    continue;
                }
                faults_in_a_row += 1;
                current = None;
                replacing = true;
                sizer.faulted();
                if n > 1 {
                    singles = n;
                    for q in chunk.drain(..).rev() {
                        queued.push_front(q);
                    }
                    continue;
                }
                recipe.plugin.calls.drop_events(DropReason::Fault, 1);
                observer.events_dropped(DropReason::Fault, 1);
                inbox.handled(1);
            }
        }
    })
}

/// Delivers `chunk` (one event, or a batch to a batch-handler guest), reporting each event
/// and the call. `true` when the instance faulted: a batch's events were not handled, a single
/// event is lost.
async fn deliver(
    recipe: &Recipe,
    instance: &mut ReconcilerInstance,
    observer: &Arc<dyn PluginObserver>,
    chunk: &[Queued],
    sizer: &mut BatchSizer,
) -> bool {
    let handle = |q: &Queued| u32::try_from(q.subscription).unwrap_or(u32::MAX);
    let started = Instant::now();
    let outcome = match chunk {
        [one] if !instance.takes_batches() => {
            match instance.deliver(handle(one), &one.event).await {
                Outcome::Ok(()) => Outcome::Ok(Vec::new()),
                Outcome::GuestError(reason) => Outcome::Ok(vec![(0, reason)]),
                Outcome::Failed(kind, reason) => Outcome::Failed(kind, reason),
            }
        }
        _ => {
            let events: Vec<_> = chunk.iter().map(|q| (handle(q), &q.event)).collect();
            instance.deliver_batch(&events).await
        }
    };
    let elapsed = started.elapsed();
    observer.handler_called(elapsed);
    match outcome {
        Outcome::Ok(failed) => {
            sizer.returned(chunk.len(), elapsed);
            recipe
                .plugin
                .calls
                .returned_events(chunk.len(), failed.len());
            let mut failed = failed.into_iter().peekable();
            for (i, q) in chunk.iter().enumerate() {
                let ok = match failed.next_if(|(f, _)| *f <= i) {
                    Some((_, reason)) => {
                        let reason = cut(&reason);
                        tracing::debug!(plugin = %recipe.name, "handler returned an error: {reason}");
                        recipe
                            .plugin
                            .record_error(format!("{} event: {reason}", q.event.kind().as_str()));
                        // A guest naming one event twice or out of order fails it once.
                        while failed.next_if(|(f, _)| *f <= i).is_some() {}
                        false
                    }
                    None => true,
                };
                observer.event_handled(q.subscription, q.event.kind(), ok);
            }
            false
        }
        // A batch answers a list, never one error; a single event's error became a list above.
        Outcome::GuestError(reason) => {
            tracing::warn!(plugin = %recipe.name, "handler call refused: {reason}");
            for q in chunk {
                observer.event_handled(q.subscription, q.event.kind(), false);
            }
            recipe
                .plugin
                .calls
                .returned_events(chunk.len(), chunk.len());
            false
        }
        Outcome::Failed(kind, reason) => {
            let what = if chunk.len() > 1 {
                format!("a batch of {} events", chunk.len())
            } else {
                "an event".to_owned()
            };
            let reason = cut(&reason).to_owned();
            tracing::warn!(plugin = %recipe.name, "handler {} on {what}, a fresh instance takes over: {reason}", kind.as_str());
            recipe
                .plugin
                .record_error(format!("handler {} on {what}: {reason}", kind.as_str()));
            recipe
                .plugin
                .calls
                .count(&Outcome::<()>::Failed(kind, reason));
            observer.instance_failed(kind);
            if chunk.len() == 1 {
                observer.event_handled(chunk[0].subscription, chunk[0].event.kind(), false);
            }
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::instance::Event;
    use super::super::testing::config_map;
    use super::*;

    fn queued(n: usize) -> VecDeque<Queued> {
        (0..n)
            .map(|i| Queued {
                generation: 0,
                subscription: 0,
                event: Event::Add {
                    object: config_map("a", &format!("cm-{i}"), 1, &[]),
                    in_initial_list: true,
                },
            })
            .collect()
    }

    fn sizer(deadline: Duration, memory: usize) -> BatchSizer {
        BatchSizer::new(&Limits {
            call_deadline: deadline,
            memory,
            ..Limits::default()
        })
    }

    #[test]
    fn batches_start_at_one_double_while_fast_and_fall_back_to_one_after_a_fault() {
        let mut s = sizer(Duration::from_secs(1), 64 << 20);
        let waiting = queued(1000);
        let mut sizes = Vec::new();
        for _ in 0..10 {
            let n = s.next_len(&waiting);
            sizes.push(n);
            s.returned(n, Duration::from_micros(n as u64));
        }
        assert_eq!(sizes, [1, 2, 4, 8, 16, 32, 64, 128, 256, 256]);
        s.faulted();
        assert_eq!(s.next_len(&waiting), 1);
        // Never more than is waiting, never none.
        assert_eq!(
            sizer(Duration::from_secs(1), 64 << 20).next_len(&queued(0)),
            1
        );
    }

    #[test]
    fn a_slow_guest_gets_batches_within_an_eighth_of_its_deadline() {
        let mut s = sizer(Duration::from_millis(800), 64 << 20);
        let waiting = queued(1000);
        // 10 ms per event: 100 ms (an eighth of the deadline) holds 10 events.
        s.limit = 64;
        s.returned(64, Duration::from_millis(640));
        assert_eq!(s.next_len(&waiting), 10);
        // Slower than the budget per event: one event per call, with the whole deadline.
        s.returned(10, Duration::from_millis(2000));
        assert_eq!(s.next_len(&waiting), 1);
    }

    #[test]
    fn a_batch_carries_at_most_a_sixteenth_of_the_memory_cap_but_always_one_event() {
        let waiting = queued(100);
        let one = waiting[0].event.json_len();
        let mut s = sizer(Duration::from_secs(1), one * 16 * 5);
        s.limit = 100;
        assert_eq!(s.next_len(&waiting), 5);
        let mut tiny = sizer(Duration::from_secs(1), 16);
        tiny.limit = 100;
        assert_eq!(tiny.next_len(&waiting), 1);
    }
}
