//! The simulator's event queue: a priority queue on `(time, sequence number)` that pops in
//! exactly the order a binary heap would, built for many far-off timers.
//!
//! Most pending events are timers far in the future (a TCP retransmission timer per flow, tens
//! of milliseconds to seconds ahead), while the events that fire are mostly near ones. A single
//! binary heap makes every pop walk `log2(n)` levels of a large heap (cache misses at 10,000
//! flows). Here only events in the current *bucket* (2^20 ns, about 1 ms) or earlier live in a
//! small binary heap; later ones wait unsorted in a ring of buckets (a calendar queue, as in
//! timer wheels), and ones beyond the ring's horizon (about 4.3 s) in an overflow heap. A bucket
//! is moved into the heap before the first event at or after its start time is popped, so the
//! heap always holds every event that can be next: the pop order is the total order of
//! `(at, seq)`, independent of where events waited.

use qdisc::Instant;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// log2 of a bucket's width in ns.
const SHIFT: u32 = 20;
/// Buckets in the ring (its horizon is `RING << SHIFT` ns).
const RING: u64 = 4096;

/// What an event does (see [`crate::Sim`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum What {
    /// The head packet of a link's pipe arrives at the far end.
    Arrive(u32),
    /// A link's transmitter or shaper may be able to send.
    Wake(u32),
    /// A physical entry for an application's timer; it fires only when its `(at, seq)` equals
    /// the application's logical timer.
    Timer(u32),
    /// An application starts.
    Start(u32),
}

/// One scheduled event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ev {
    pub(crate) at: Instant,
    pub(crate) seq: u64,
    pub(crate) what: What,
}

impl Ord for Ev {
    fn cmp(&self, o: &Self) -> Ordering {
        // Min-heap on (time, insertion order): ties resolve in scheduling order.
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}
impl PartialOrd for Ev {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

#[inline]
fn bucket(at: Instant) -> u64 {
    at.as_nanos() >> SHIFT
}

/// The event queue (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct EventQueue {
    /// Every event of a bucket before `cursor`.
    near: BinaryHeap<Ev>,
    /// Buckets `cursor .. cursor + RING`, each at index `bucket % RING` (allocated on first
    /// use).
    ring: Vec<Vec<Ev>>,
    /// Events in `ring`.
    ring_len: usize,
    /// Events of buckets from `cursor + RING` on.
    later: BinaryHeap<Ev>,
    /// The first bucket not yet moved into `near`.
    cursor: u64,
}

impl EventQueue {
    /// Schedules `ev`.
    #[inline]
    pub(crate) fn push(&mut self, ev: Ev) {
        let b = bucket(ev.at);
        if b < self.cursor {
            self.near.push(ev);
        } else if b < self.cursor + RING {
            if self.ring.is_empty() {
                self.ring = (0..RING).map(|_| Vec::new()).collect();
            }
            self.ring[(b % RING) as usize].push(ev);
            self.ring_len += 1;
        } else {
            self.later.push(ev);
        }
    }

    /// Removes and returns the first event (smallest `(at, seq)`) if it is due at or before `t`.
    #[inline]
    pub(crate) fn pop_due(&mut self, t: Instant) -> Option<Ev> {
        loop {
            let start = self.cursor.saturating_mul(1 << SHIFT);
            let waiting = self.ring_len > 0 || !self.later.is_empty();
            if waiting
                && start <= t.as_nanos()
                && self.near.peek().is_none_or(|e| e.at.as_nanos() >= start)
            {
                self.advance();
                continue;
            }
            return match self.near.peek() {
                Some(e) if e.at <= t => self.near.pop(),
                _ => None,
            };
        }
    }

    /// Moves bucket `cursor` into the heap and steps the cursor; jumps over an empty ring to
    /// the overflow's first bucket.
    fn advance(&mut self) {
        if self.ring_len == 0 {
            if let Some(e) = self.later.peek() {
                self.cursor = self.cursor.max(bucket(e.at));
            }
        } else {
            let slot = &mut self.ring[(self.cursor % RING) as usize];
            self.ring_len -= slot.len();
            for ev in slot.drain(..) {
                self.near.push(ev);
            }
        }
        self.cursor += 1;
        while let Some(e) = self.later.peek() {
            if bucket(e.at) >= self.cursor + RING {
                break;
            }
            if let Some(e) = self.later.pop() {
                self.push(e);
            }
        }
    }

    /// Events waiting.
    pub(crate) fn len(&self) -> usize {
        self.near.len() + self.ring_len + self.later.len()
    }

    /// Bytes allocated for events (capacities).
    pub(crate) fn memory(&self) -> usize {
        let ev = std::mem::size_of::<Ev>();
        (self.near.capacity() + self.later.capacity()) * ev
            + self.ring.capacity() * std::mem::size_of::<Vec<Ev>>()
            + self.ring.iter().map(Vec::capacity).sum::<usize>() * ev
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qdisc::Rng;

    /// Pops in `(at, seq)` order exactly as a binary heap does, whatever the mix of near, ring
    /// and overflow events and however pops and pushes interleave.
    #[test]
    // `is_multiple_of` is newer than the workspace's rust-version (1.80).
    #[allow(clippy::manual_is_multiple_of)]
    fn pops_in_the_same_order_as_a_binary_heap() {
        let mut rng = Rng::new(7);
        let mut q = EventQueue::default();
        let mut reference = BinaryHeap::new();
        let mut seq = 0u64;
        let mut now = 0u64;
        let mut popped = 0;
        for step in 0..200_000u64 {
            if rng.next_u32() % 3 != 0 {
                // Near (ns to µs), ring (ms to s) and overflow (beyond 4.3 s) delays.
                let delay = match rng.next_u32() % 10 {
                    0..=4 => u64::from(rng.next_u32() % 10_000),
                    5..=8 => u64::from(rng.next_u32() % 2_000_000_000),
                    _ => 4_000_000_000 + u64::from(rng.next_u32()) * 8,
                };
                // Equal times are common: quantise some.
                let at = if step % 5 == 0 {
                    (now + delay) / 1_000_000 * 1_000_000
                } else {
                    now + delay
                }
                .max(now);
                seq += 1;
                let ev = Ev {
                    at: Instant::from_nanos(at),
                    seq,
                    what: What::Wake(step as u32),
                };
                q.push(ev);
                reference.push(ev);
            } else {
                let t = Instant::from_nanos(now + u64::from(rng.next_u32() % 3_000_000));
                let a = q.pop_due(t);
                let b = reference.peek().filter(|e| e.at <= t).copied();
                if b.is_some() {
                    reference.pop();
                }
                assert_eq!(a, b, "step {step}");
                if let Some(e) = a {
                    now = e.at.as_nanos();
                    popped += 1;
                }
            }
            assert_eq!(q.len(), reference.len());
        }
        while let Some(b) = reference.pop() {
            assert_eq!(q.pop_due(Instant::from_nanos(u64::MAX)), Some(b));
        }
        assert_eq!(q.pop_due(Instant::from_nanos(u64::MAX)), None);
        assert!(popped > 10_000, "{popped}");
    }

    #[test]
    fn nothing_is_popped_before_its_time() {
        let mut q = EventQueue::default();
        for (i, at) in [5_000_000_000u64, 3, 2_000_000, 2_000_000]
            .into_iter()
            .enumerate()
        {
            q.push(Ev {
                at: Instant::from_nanos(at),
                seq: i as u64,
                what: What::Timer(i as u32),
            });
        }
        assert_eq!(q.pop_due(Instant::from_nanos(2)), None);
        assert_eq!(q.pop_due(Instant::from_nanos(3)).map(|e| e.seq), Some(1));
        assert_eq!(q.pop_due(Instant::from_nanos(1_999_999)), None);
        assert_eq!(
            q.pop_due(Instant::from_nanos(2_000_000)).map(|e| e.seq),
            Some(2)
        );
        assert_eq!(
            q.pop_due(Instant::from_nanos(2_000_000)).map(|e| e.seq),
            Some(3)
        );
        assert_eq!(q.pop_due(Instant::from_nanos(4_999_999_999)), None);
        assert_eq!(q.len(), 1);
        assert_eq!(
            q.pop_due(Instant::from_nanos(5_000_000_000)).map(|e| e.seq),
            Some(0)
        );
        assert_eq!(q.len(), 0);
    }
}
