//! Events in batches, for guests that take them (0.2.1 `batch-handler`): how many of the
//! waiting events the next call carries ([`BatchSizer`]) and how a batch is lowered into the
//! two lists of numbers `on-events` takes ([`lower_batch`]).

use std::mem::MaybeUninit;
use std::time::Duration;

use kubewasm_informer::ObjectRef;
use wasmtime::ValRaw;
use wasmtime::component::__internal::{
    CanonicalAbiInfo, InstanceType, InterfaceType, LowerContext,
};
use wasmtime::component::{ComponentType, Lower};

use crate::events::inbox::{Event, Queued, same_document};
use crate::model::grants::Limits;

/// The most events one batch carries.
const MAX_BATCH_EVENTS: usize = 256;

/// The most JSON one batch carries (unless its first event alone is larger): the host copies a
/// batch's objects from the cache into the guest's memory, which fits a core's L2 cache at
/// this size. Past a few dozen events a call's own cost is spread thin already.
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
        // In u64 nanoseconds (584 years): a u128 division is a library call, on every event of
        // a plugin that takes one per call.
        let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let per_event = nanos(elapsed) / u64::try_from(n.max(1)).unwrap_or(u64::MAX);
        let by_time = match nanos(self.budget).checked_div(per_event) {
            Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
            None => MAX_BATCH_EVENTS,
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

/// A batch as `on-events` takes it (0.2.1's `event-batch` record), borrowing the cache's
/// objects: lowering it copies each object once, from the cache into the guest's memory.
#[derive(ComponentType, Lower)]
#[component(record)]
pub(crate) struct EventBatch<'a> {
    #[component(name = "documents")]
    pub(crate) documents: Documents<'a>,
    #[component(name = "events")]
    pub(crate) events: &'a [u32],
}

/// `event-batch.documents` (`list<u8>`): the JSON of the batch's objects one after another,
/// held as the cache's own bytes. A `&[u8]` would need them copied into one host buffer
/// first, and wasmtime would copy that buffer again.
pub(crate) struct Documents<'a> {
    pieces: Vec<&'a [u8]>,
    /// The sum of the pieces' lengths (under 4 GiB).
    len: usize,
}

impl Documents<'_> {
    /// Allocates the list in the guest's memory (its `cabi_realloc`) and copies the pieces
    /// into it; answers where it starts.
    fn copy_into<T>(&self, cx: &mut LowerContext<'_, T>) -> wasmtime::Result<usize> {
        let start = cx.realloc(0, 0, 1, self.len)?;
        let Some(mut rest) = cx
            .as_slice_mut()
            .get_mut(start..)
            .and_then(|m| m.get_mut(..self.len))
        else {
            wasmtime::bail!("the guest allocated a batch's objects outside its memory");
        };
        for (i, piece) in self.pieces.iter().enumerate() {
            if let Some(next) = self.pieces.get(i + 1) {
                prefetch(next);
            }
            let Some((to, tail)) = rest.split_at_mut_checked(piece.len()) else {
                wasmtime::bail!("a batch's objects are longer than their sum");
            };
            to.copy_from_slice(piece);
            rest = tail;
        }
        Ok(start)
    }
}

// SAFETY: lowered as `list<u8>` is (a pointer and a length, two flat values, the canonical
// ABI's pointer pair), and type-checked as `list<u8>`.
unsafe impl ComponentType for Documents<'_> {
    type Lower = [ValRaw; 2];

    const ABI: CanonicalAbiInfo = CanonicalAbiInfo::POINTER_PAIR;

    fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> wasmtime::Result<()> {
        <[u8] as ComponentType>::typecheck(ty, types)
    }
}

// SAFETY: writes both flat values, or the pointer pair at `offset` (which wasmtime has
// checked is in bounds), as the lowering of a `list<u8>` does.
unsafe impl Lower for Documents<'_> {
    fn linear_lower_to_flat<T>(
        &self,
        cx: &mut LowerContext<'_, T>,
        _ty: InterfaceType,
        dst: &mut MaybeUninit<[ValRaw; 2]>,
    ) -> wasmtime::Result<()> {
        let start = self.copy_into(cx)?;
        dst.write([
            ValRaw::i64(i64::try_from(start)?),
            ValRaw::i64(i64::try_from(self.len)?),
        ]);
        Ok(())
    }

    fn linear_lower_to_memory<T>(
        &self,
        cx: &mut LowerContext<'_, T>,
        _ty: InterfaceType,
        offset: usize,
    ) -> wasmtime::Result<()> {
        let start = self.copy_into(cx)?;
        *cx.get::<4>(offset) = u32::try_from(start)?.to_le_bytes();
        *cx.get::<4>(offset + 4) = u32::try_from(self.len)?.to_le_bytes();
        Ok(())
    }
}

/// A batch as `on-events` takes it: the JSON of its objects one after another (each object
/// once per event: a resync's old and new, the same object, once), and the events,
/// [`EVENT_WORDS`] numbers each, into `words` (emptied first). An error if the batch does
/// not fit the 4 GiB the offsets can address.
pub(crate) fn lower_batch<'a>(
    events: &'a [Queued],
    words: &mut Vec<u32>,
) -> Result<Documents<'a>, String> {
    const ADDED: u32 = 0;
    const UPDATED: u32 = 1;
    const DELETED: u32 = 2;
    const FLAG: u32 = 4;
    words.clear();
    words.reserve(events.len() * EVENT_WORDS);
    let mut documents = Documents {
        pieces: Vec::with_capacity(events.len()),
        len: 0,
    };
    let mut place = |doc: &'a ObjectRef| -> Result<[u32; 2], String> {
        let json = doc.json().as_bytes();
        let offset = u32::try_from(documents.len).map_err(|_| "a batch over 4 GiB")?;
        let len = u32::try_from(json.len()).map_err(|_| "an object over 4 GiB")?;
        offset.checked_add(len).ok_or("a batch over 4 GiB")?;
        documents.pieces.push(json);
        documents.len += json.len();
        Ok([offset, len])
    };
    for queued in events {
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
    Ok(documents)
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
    fn a_lowered_batch_names_each_object_where_it_lies_and_a_resync_object_once() {
        let add = config_map("a", "added", 1, &[]);
        let resynced = config_map("a", "resynced", 2, &[]);
        let (old, new) = (
            config_map("a", "changed", 3, &[]),
            config_map("a", "changed", 4, &[]),
        );
        let gone = config_map("b", "gone", 5, &[]);
        let q = |subscription, event| Queued {
            generation: 0,
            subscription,
            event,
        };
        let events = [
            q(
                0,
                Event::Add {
                    object: add.clone(),
                    in_initial_list: true,
                },
            ),
            q(
                1,
                Event::Update {
                    old: resynced.clone(),
                    new: resynced.clone(),
                },
            ),
            q(
                0,
                Event::Update {
                    old: old.clone(),
                    new: new.clone(),
                },
            ),
            q(
                2,
                Event::Delete {
                    object: gone.clone(),
                    final_state_unknown: false,
                },
            ),
        ];
        let mut words = vec![99];
        let documents = lower_batch(&events, &mut words).unwrap();
        let bytes = documents.pieces.concat();
        assert_eq!(bytes.len(), documents.len);
        let json = |o: &ObjectRef| o.json().as_bytes().to_vec();
        assert_eq!(
            bytes,
            [
                json(&add),
                json(&resynced),
                json(&new),
                json(&old),
                json(&gone)
            ]
            .concat(),
            "each object once, in event order, an update's new before its old"
        );
        let at = |offset: u32, len: u32| bytes[offset as usize..][..len as usize].to_vec();
        assert_eq!(words.len(), events.len() * EVENT_WORDS);
        let event = |i: usize| &words[i * EVENT_WORDS..][..EVENT_WORDS];
        assert_eq!(event(0)[..2], [0, 4], "added, in the initial list");
        assert_eq!(at(event(0)[2], event(0)[3]), json(&add));
        assert_eq!(event(0)[4..], [0, 0]);
        assert_eq!(event(1)[..2], [1, 1]);
        assert_eq!(event(1)[2..4], event(1)[4..], "a resync's old is its new");
        assert_eq!(at(event(1)[2], event(1)[3]), json(&resynced));
        assert_eq!(at(event(2)[2], event(2)[3]), json(&new));
        assert_eq!(at(event(2)[4], event(2)[5]), json(&old));
        assert_eq!(event(3)[..2], [2, 2], "deleted, state known");
        assert_eq!(at(event(3)[2], event(3)[3]), json(&gone));
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
