//! Events in batches, for guests that take them (0.2.1 `batch-handler`): how many of the
//! waiting events the next call carries ([`BatchSizer`]) and how a batch is lowered into the
//! two lists of numbers `on-events` takes ([`lower_batch`]).

use std::time::Duration;

use kubewasm_informer::ObjectRef;

use crate::events::inbox::{Event, Queued, same_document};
use crate::model::grants::Limits;

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
pub(crate) struct BatchSizer {
    /// Guest time one batch may be expected to take.
    budget: Duration,
    /// JSON bytes one batch may carry (a batch of one event carries it whatever its size).
    max_bytes: usize,
    /// The most events the next batch may carry.
    limit: usize,
}

impl BatchSizer {
    pub(crate) fn new(limits: &Limits) -> Self {
        BatchSizer {
            budget: limits.call_deadline / 8,
            max_bytes: (limits.memory / 16).clamp(1, MAX_BATCH_BYTES),
            limit: 1,
        }
    }

    /// How many of the first of the `waiting` events go in the next batch: at least one.
    pub(crate) fn next_len<'a>(&self, waiting: impl Iterator<Item = &'a Queued>) -> usize {
        let mut bytes = 0;
        let mut n = 0;
        for q in waiting.take(self.limit) {
            bytes += q.event.json_len();
            if n > 0 && bytes > self.max_bytes {
                break;
            }
            n += 1;
        }
        n.max(1)
    }

    /// A batch of `n` events returned after `elapsed`.
    pub(crate) fn returned(&mut self, n: usize, elapsed: Duration) {
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
    pub(crate) fn faulted(&mut self) {
        self.limit = 1;
    }
}

/// Asks the CPU to start loading the first bytes of `bytes` into its cache: the next object's
/// JSON arrives while this one is copied (objects are scattered over the heap, so the hardware
/// prefetcher cannot guess where the next one starts).
fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for line in bytes.chunks(64).take(8) {
        // SAFETY: prefetching is a hint: it reads nothing, faults on nothing.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                line.as_ptr().cast(),
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// Numbers per event in `event-batch.events`.
const EVENT_WORDS: usize = 6;

/// A batch as `on-events` takes it: the JSON of its objects one after another into
/// `documents`, each object once per event (a resync's old and new, the same object, once),
/// and the events, [`EVENT_WORDS`] numbers each, into `words` (both emptied first). An error
/// if the batch does not fit the 4 GiB the offsets can address.
pub(crate) fn lower_batch(
    events: &[Queued],
    documents: &mut Vec<u8>,
    words: &mut Vec<u32>,
) -> Result<(), String> {
    const ADDED: u32 = 0;
    const UPDATED: u32 = 1;
    const DELETED: u32 = 2;
    const FLAG: u32 = 4;
    documents.clear();
    words.clear();
    words.reserve(events.len() * EVENT_WORDS);
    let mut place = |doc: &ObjectRef| -> Result<[u32; 2], String> {
        let json = doc.json().as_bytes();
        let offset = u32::try_from(documents.len()).map_err(|_| "a batch over 4 GiB")?;
        let len = u32::try_from(json.len()).map_err(|_| "an object over 4 GiB")?;
        documents.extend_from_slice(json);
        Ok([offset, len])
    };
    for (i, queued) in events.iter().enumerate() {
        if let Some(next) = events.get(i + 1) {
            prefetch(next.event.object().json().as_bytes());
        }
        let subscription =
            u32::try_from(queued.subscription).map_err(|_| "a subscription handle over u32")?;
        let event = &queued.event;
        let flagged = |what: u32, flag: bool| if flag { what | FLAG } else { what };
        let (what, [offset, len], [old_offset, old_len]) = match event {
            Event::Add {
                object,
                in_initial_list,
            } => (flagged(ADDED, *in_initial_list), place(object)?, [0, 0]),
            Event::Update { old, new } => {
                let placed = place(new)?;
                let old = if same_document(old, new) {
                    placed
                } else {
                    place(old)?
                };
                (UPDATED, placed, old)
            }
            Event::Delete {
                object,
                final_state_unknown,
            } => (
                flagged(DELETED, *final_state_unknown),
                place(object)?,
                [0, 0],
            ),
        };
        words.extend_from_slice(&[subscription, what, offset, len, old_offset, old_len]);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;
    use crate::testing::config_map;

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
            let n = s.next_len(waiting.iter());
            sizes.push(n);
            s.returned(n, Duration::from_micros(n as u64));
        }
        assert_eq!(sizes, [1, 2, 4, 8, 16, 32, 64, 128, 256, 256]);
        s.faulted();
        assert_eq!(s.next_len(waiting.iter()), 1);
        // Never more than is waiting, never none.
        assert_eq!(
            sizer(Duration::from_secs(1), 64 << 20).next_len(queued(0).iter()),
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
        assert_eq!(s.next_len(waiting.iter()), 10);
        // Slower than the budget per event: one event per call, with the whole deadline.
        s.returned(10, Duration::from_millis(2000));
        assert_eq!(s.next_len(waiting.iter()), 1);
    }

    #[test]
    fn a_batch_carries_at_most_a_sixteenth_of_the_memory_cap_but_always_one_event() {
        let waiting = queued(100);
        let one = waiting[0].event.json_len();
        let mut s = sizer(Duration::from_secs(1), one * 16 * 5);
        s.limit = 100;
        assert_eq!(s.next_len(waiting.iter()), 5);
        let mut tiny = sizer(Duration::from_secs(1), 16);
        tiny.limit = 100;
        assert_eq!(tiny.next_len(waiting.iter()), 1);
    }
}
