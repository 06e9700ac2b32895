//! A plugin's inbox: the events its handlers push (as the guest receives them) and the one
//! queue they push into, which its actor pulls from in batches.
//!
//! The handlers are registered inline on the shared informers (no thread of their own), so the
//! inbox is the plugin's processorListener buffer: unbounded, per plugin, its depth visible.
//! A push never wakes the consumer; the end of the informer's batch ([`EventSink::flush`])
//! does, once, so a burst costs one wake-up rather than one per event.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use kubewasm_informer::ObjectRef;
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::observer::EventKind;

/// One event as the guest receives it.
#[derive(Clone)]
pub(crate) enum Event {
    Add {
        object: ObjectRef,
        in_initial_list: bool,
    },
    Update {
        old: ObjectRef,
        new: ObjectRef,
    },
    Delete {
        object: ObjectRef,
        final_state_unknown: bool,
    },
}

impl Event {
    pub(crate) fn kind(&self) -> EventKind {
        match self {
            Event::Add { .. } => EventKind::Add,
            Event::Update { .. } => EventKind::Update,
            Event::Delete { .. } => EventKind::Delete,
        }
    }

    /// The bytes of JSON the event carries into the guest (in a batch, a resync's old and
    /// new object once).
    pub(crate) fn json_len(&self) -> usize {
        match self {
            Event::Add { object, .. } | Event::Delete { object, .. } => object.json().len(),
            Event::Update { old, new } if same_document(old, new) => new.json().len(),
            Event::Update { old, new } => old.json().len() + new.json().len(),
        }
    }

    /// The object the event is about (the new version for updates).
    pub(crate) fn object(&self) -> &ObjectRef {
        match self {
            Event::Add { object, .. } | Event::Delete { object, .. } => object,
            Event::Update { new, .. } => new,
        }
    }
}

/// Whether `a` and `b` are one cached object (a resync's old and new).
pub(crate) fn same_document(a: &ObjectRef, b: &ObjectRef) -> bool {
    Arc::ptr_eq(a, b)
}

/// One queued event, stamped with the instance generation it was registered for.
pub(crate) struct Queued {
    pub(crate) generation: u64,
    /// Index of the subscription in the plugin's `init` result.
    pub(crate) subscription: usize,
    pub(crate) event: Event,
}

/// The events pushed and not yet taken, and how many of them are resyncs, per subscription.
#[derive(Default)]
struct Queue {
    events: VecDeque<Queued>,
    resyncs: Vec<usize>,
}

/// The queue and what the plugin's status reads of it.
#[derive(Default)]
pub(crate) struct Inbox {
    queued: Mutex<Queue>,
    /// Resyncs a subscription declined because its previous one was still queued.
    resyncs_skipped: AtomicU64,
    /// The consumer sleeps (or is about to): the next flush wakes it.
    waiting: AtomicBool,
    wake: Notify,
    closed: AtomicBool,
    /// Events pushed and not yet handled (queued, or taken in a batch and not yet handled).
    depth: AtomicUsize,
    /// The instance generation whose handlers are registered; older events are skipped.
    generation: AtomicU64,
    /// Initial-list adds pushed for the current generation.
    replay_pushed: AtomicU64,
}

impl Inbox {
    /// Events waiting to be handled.
    pub(crate) fn depth(&self) -> usize {
        self.depth.load(Ordering::Relaxed)
    }

    /// The generation whose events are delivered.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Makes `generation` current: events of older ones are skipped, and its replay is
    /// counted from zero.
    pub(crate) fn set_generation(&self, generation: u64) {
        self.replay_pushed.store(0, Ordering::Release);
        self.generation.store(generation, Ordering::Release);
    }

    /// Initial-list adds pushed for the current generation.
    pub(crate) fn replay_pushed(&self) -> u64 {
        self.replay_pushed.load(Ordering::Acquire)
    }

    /// Resyncs declined because the subscription's previous one was still queued.
    pub(crate) fn resyncs_skipped(&self) -> u64 {
        self.resyncs_skipped.load(Ordering::Relaxed)
    }

    /// Whether `subscription` takes a resync now: not while resync events of it are still
    /// queued (a guest slower than its resync period would otherwise have the whole cache
    /// queued once more every period, without end). A declined resync is counted.
    fn takes_resync(&self, subscription: usize) -> bool {
        let queued = self
            .queued
            .lock()
            .resyncs
            .get(subscription)
            .copied()
            .unwrap_or(0);
        if queued > 0 {
            self.resyncs_skipped.fetch_add(1, Ordering::Relaxed);
        }
        queued == 0
    }

    /// One event taken out of the queue is handled (or skipped).
    pub(crate) fn handled(&self, n: usize) {
        self.depth.fetch_sub(n, Ordering::AcqRel);
    }

    /// No more pushes are taken; the consumer's next [`take`](Self::take) answers `false`
    /// once the queue is empty.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    /// Waits until events are queued, then moves them all into `into` (in order). `false`
    /// when the inbox is closed and empty.
    pub(crate) async fn take(&self, into: &mut VecDeque<Queued>) -> bool {
        loop {
            let notified = self.wake.notified();
            tokio::pin!(notified);
            {
                let mut queued = self.queued.lock();
                if !queued.events.is_empty() {
                    self.waiting.store(false, Ordering::Release);
                    std::mem::swap(into, &mut queued.events);
                    queued.resyncs.fill(0);
                    return true;
                }
                if self.closed.load(Ordering::Acquire) {
                    return false;
                }
                self.waiting.store(true, Ordering::Release);
            }
            notified.as_mut().await;
        }
    }

    fn push(&self, queued: Queued) {
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        self.depth.fetch_add(1, Ordering::AcqRel);
        let resync = matches!(&queued.event, Event::Update { old, new } if same_document(old, new));
        let mut queue = self.queued.lock();
        if resync {
            let subscription = queued.subscription;
            if queue.resyncs.len() <= subscription {
                queue.resyncs.resize(subscription + 1, 0);
            }
            queue.resyncs[subscription] += 1;
        }
        queue.events.push_back(queued);
    }

    fn flush(&self) {
        if self.waiting.swap(false, Ordering::AcqRel) {
            self.wake.notify_one();
        }
    }
}

/// Where the handlers of one subscription push events. Pushing never blocks: the queue is
/// unbounded and its depth is reported.
#[derive(Clone)]
pub(crate) struct EventSink {
    inbox: Arc<Inbox>,
    generation: u64,
    subscription: usize,
}

impl EventSink {
    /// Pushes of `generation` into `inbox`, for subscription 0.
    pub(crate) fn new(inbox: Arc<Inbox>, generation: u64) -> Self {
        EventSink {
            inbox,
            generation,
            subscription: 0,
        }
    }

    /// The same queue for another subscription of the plugin.
    pub(crate) fn for_subscription(&self, subscription: usize) -> Self {
        EventSink {
            subscription,
            ..self.clone()
        }
    }

    /// Queues `event`; the consumer sees it after the next [`flush`](Self::flush).
    pub(crate) fn push(&self, event: Event) {
        if matches!(
            event,
            Event::Add {
                in_initial_list: true,
                ..
            }
        ) && self.inbox.generation() == self.generation
        {
            self.inbox.replay_pushed.fetch_add(1, Ordering::AcqRel);
        }
        self.inbox.push(Queued {
            generation: self.generation,
            subscription: self.subscription,
            event,
        });
    }

    /// Wakes the consumer if it sleeps: the end of a batch of pushes.
    pub(crate) fn flush(&self) {
        self.inbox.flush();
    }

    /// Whether this subscription takes the resync that is due: not while its previous one
    /// is still queued.
    pub(crate) fn takes_resync(&self) -> bool {
        self.inbox.takes_resync(self.subscription)
    }
}

/// Handlers registered for one instance generation; dropping it unregisters them.
pub(crate) trait Subscribed: Send + Sync {
    /// Whether every source has synced and handed over its replay.
    fn synced(&self) -> bool;
}

/// Registers a plugin's handlers on its event sources.
pub(crate) trait Subscriber: Send + Sync {
    /// Registers a handler per `events` subscription that pushes into `sink` (subscription
    /// index set per handler). Each handler first receives every cached object as an
    /// initial-list add, then live events, none lost or doubled.
    fn subscribe(&self, sink: &EventSink) -> Box<dyn Subscribed>;
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::testing::config_map;

    fn add(name: &str, initial: bool) -> Event {
        Event::Add {
            object: config_map("a", name, 1, &[]),
            in_initial_list: initial,
        }
    }

    fn resync(name: &str) -> Event {
        let object = config_map("a", name, 1, &[]);
        Event::Update {
            old: object.clone(),
            new: object,
        }
    }

    #[test]
    fn a_subscription_declines_a_resync_while_its_last_one_is_still_queued() {
        let inbox = Arc::new(Inbox::default());
        inbox.set_generation(1);
        let first = EventSink::new(inbox.clone(), 1);
        let second = first.for_subscription(1);
        assert!(first.takes_resync() && second.takes_resync());
        first.push(resync("x"));
        first.push(resync("y"));
        // A real update (two versions) is no resync.
        second.push(Event::Update {
            old: config_map("a", "z", 1, &[]),
            new: config_map("a", "z", 2, &[]),
        });
        assert!(!first.takes_resync(), "two resync events of it queued");
        assert!(second.takes_resync(), "its queued update is no resync");
        assert_eq!(inbox.resyncs_skipped(), 1);
        let mut taken = VecDeque::new();
        let took = futures::executor::block_on(inbox.take(&mut taken));
        assert!(took && taken.len() == 3);
        assert!(
            first.takes_resync(),
            "taken by the consumer: the next is welcome"
        );
        assert_eq!(inbox.resyncs_skipped(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_batch_wakes_the_consumer_once_and_arrives_whole_and_in_order() {
        let inbox = Arc::new(Inbox::default());
        inbox.set_generation(1);
        let sink = EventSink::new(inbox.clone(), 1);
        let consumer = {
            let inbox = inbox.clone();
            tokio::spawn(async move {
                let mut batches = Vec::new();
                let mut batch = VecDeque::new();
                while inbox.take(&mut batch).await {
                    let n = batch.len();
                    batches.push(batch.drain(..).map(|q| q.subscription).collect::<Vec<_>>());
                    inbox.handled(n);
                }
                batches
            })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        sink.push(add("x", true));
        sink.for_subscription(1).push(add("y", false));
        // Pushed but not flushed: the consumer still sleeps.
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(inbox.depth(), 2);
        assert_eq!(inbox.replay_pushed(), 1);
        sink.flush();
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(inbox.depth(), 0);
        // A stale generation's initial add is queued but not counted as this replay's.
        EventSink::new(inbox.clone(), 0).push(add("z", true));
        sink.flush();
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(inbox.replay_pushed(), 1);
        inbox.close();
        sink.push(add("late", false));
        assert_eq!(consumer.await.unwrap(), vec![vec![0, 1], vec![0]]);
        assert_eq!(inbox.depth(), 0);
    }
}
