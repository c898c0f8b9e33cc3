//! Storage for queued packets: a slab of slots linked into per-flow FIFOs by index. Slots are
//! reused, so steady-state enqueue/dequeue allocates nothing.

use crate::tin::NIL;
use qdisc::{Instant, Packet};

/// One queued packet with its CAKE metadata (the kernel's skb cb).
#[derive(Debug, Default)]
pub struct Slot {
    /// The packet (its frame buffer is empty while the slot is free).
    pub pkt: Packet,
    /// Next slot in the same flow, or the next free slot.
    pub next: u32,
    /// Enqueue time.
    pub enqueued: Instant,
    /// Overhead-adjusted length.
    pub adj_len: u32,
    /// Memory charged for it.
    pub mem: u32,
    /// The packet's length ([`Packet::len`]) when it was stored; a queued packet's length
    /// does not change (the slot's last 4 bytes, which were padding).
    pub len: u32,
}

/// The slab.
#[derive(Debug, Default)]
pub struct Slab {
    slots: Vec<Slot>,
    free: u32,
}

/// Memory charged per queued packet on top of what its frame pins ([`Packet::truesize`]): our
/// own bookkeeping (the slot), as the kernel's skb truesize includes the `sk_buff` itself.
pub const SLOT_OVERHEAD: u32 = std::mem::size_of::<Slot>() as u32;

// The accounting tests (tests/stats_and_accounting.rs) assume a slot below 256 bytes (112
// today, as docs/fidelity.md says).
const _: () = assert!(SLOT_OVERHEAD < 256, "a queue slot of 256 bytes or more");

/// The memory charged for queued packet `pkt`: [`Packet::truesize`] plus [`SLOT_OVERHEAD`], each
/// sum saturating at `u32::MAX`, computed as one sum in 64 bits and saturated once (the same
/// value: every term is non-negative, and the 64-bit sum cannot overflow).
#[inline(always)]
fn charge(pkt: &Packet) -> u32 {
    let sum = pkt.data.capacity() as u64 + u64::from(pkt.meta.pad) + u64::from(SLOT_OVERHEAD);
    sum.min(u64::from(u32::MAX)) as u32
}

/// Slots [`Slab::shrink_empty`] keeps (about 110 KiB): enough for ordinary backlogs, so that
/// shrinking after each drain does not make the next burst allocate.
const KEEP_SLOTS: usize = 1024;

impl Slab {
    /// An empty slab.
    pub fn new() -> Self {
        Slab {
            slots: Vec::new(),
            free: NIL,
        }
    }

    /// Stores a packet of length `len` ([`Packet::len`]), returning its index and the memory
    /// charged for it (the slot's `mem`).
    #[inline(always)]
    pub fn insert(&mut self, pkt: Packet, len: u32, enqueued: Instant, adj_len: u32) -> (u32, u32) {
        debug_assert_eq!(len, pkt.len());
        let mem = charge(&pkt);
        if self.free != NIL {
            // Written field by field into the free slot: no slot-sized temporary.
            let i = self.free;
            let s = &mut self.slots[i as usize];
            self.free = s.next;
            // A free slot's buffer is empty (`free` took it, `Vec::new()` owns no memory):
            // nothing to drop, so the old packet is forgotten rather than dropped (which would
            // test its capacity for a deallocation that never happens).
            let old = std::mem::replace(&mut s.pkt, pkt);
            debug_assert_eq!(old.data.capacity(), 0, "a free slot holds a buffer");
            std::mem::forget(old);
            s.next = NIL;
            s.enqueued = enqueued;
            s.adj_len = adj_len;
            s.mem = mem;
            s.len = len;
            (i, mem)
        } else {
            // A new slot: only while the slab grows to the largest backlog it has held (each
            // slot is pushed once, then reused through the free list), so the hint: without
            // it the compiler arranged the caller's registers around the push.
            std::hint::cold_path();
            self.slots.push(Slot {
                pkt,
                next: NIL,
                enqueued,
                adj_len,
                mem,
                len,
            });
            ((self.slots.len() - 1) as u32, mem)
        }
    }

    /// Frees slot `i`, returning its packet. The slot's other fields are left as they are
    /// (the next `insert` overwrites them).
    #[inline(always)]
    pub fn free(&mut self, i: u32) -> Packet {
        let s = &mut self.slots[i as usize];
        // Only the frame buffer must leave the slot (it owns the allocation); the metadata is
        // plain data that the next `insert` overwrites, so it is copied rather than reset.
        let pkt = Packet {
            data: std::mem::take(&mut s.pkt.data),
            meta: s.pkt.meta,
        };
        s.next = self.free;
        self.free = i;
        pkt
    }

    /// Frees slot `i`, returning its packet with the slot's metadata.
    #[inline]
    pub fn remove(&mut self, i: u32) -> Slot {
        let s = &self.slots[i as usize];
        let (next, enqueued, adj_len, mem, len) = (s.next, s.enqueued, s.adj_len, s.mem, s.len);
        Slot {
            pkt: self.free(i),
            next,
            enqueued,
            adj_len,
            mem,
            len,
        }
    }

    /// Releases the slots beyond [`KEEP_SLOTS`] kept from a larger backlog; returns the bytes
    /// freed. Only while no slot holds a packet (the caller's queue is empty): every index
    /// handed out before is invalid afterwards.
    pub fn shrink_empty(&mut self) -> usize {
        let before = self.slots.capacity();
        if before <= KEEP_SLOTS {
            return 0;
        }
        // Free slots hold empty buffers, so clearing drops no allocation but the slot array.
        self.slots.clear();
        self.slots.shrink_to(KEEP_SLOTS);
        self.free = NIL;
        (before - self.slots.capacity()) * std::mem::size_of::<Slot>()
    }

    /// Packets in the chain that starts at slot `head` (NIL: none): a flow's queue length,
    /// counted along its links (only statistics read it, so no count is kept per packet).
    pub fn chain_len(&self, head: u32) -> u32 {
        let mut n = 0;
        let mut i = head;
        while i != NIL {
            n += 1;
            i = self.get(i).next;
        }
        n
    }

    /// Slot `i`.
    #[inline]
    pub fn get(&self, i: u32) -> &Slot {
        &self.slots[i as usize]
    }

    /// Slot `i`, mutably.
    #[inline]
    pub fn get_mut(&mut self, i: u32) -> &mut Slot {
        &mut self.slots[i as usize]
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn the_charge_is_the_saturating_truesize_plus_the_slot() {
        for cap in [0usize, 60, 2048, 65_536] {
            for pad in [
                0,
                1,
                1_000,
                u32::MAX - 200,
                u32::MAX - 112,
                u32::MAX - 111,
                u32::MAX,
            ] {
                let mut pkt = Packet::new(Vec::with_capacity(cap));
                pkt.meta.pad = pad;
                assert_eq!(
                    charge(&pkt),
                    pkt.truesize().saturating_add(SLOT_OVERHEAD),
                    "{cap} {pad}"
                );
            }
        }
    }

    #[test]
    fn shrink_empty_releases_all_but_the_reserve() {
        let mut s = Slab::new();
        let ids: Vec<u32> = (0..5_000)
            .map(|_| s.insert(Packet::new(vec![0; 60]), 60, Instant::ZERO, 60).0)
            .collect();
        for i in ids {
            s.remove(i);
        }
        let freed = s.shrink_empty();
        assert!(
            freed >= (5_000 - KEEP_SLOTS) * std::mem::size_of::<Slot>(),
            "{freed}"
        );
        assert_eq!(s.shrink_empty(), 0);
        let (i, mem) = s.insert(Packet::new(vec![1; 10]), 10, Instant::ZERO, 10);
        assert_eq!(mem, 10 + SLOT_OVERHEAD);
        assert_eq!(s.get(i).pkt.data, vec![1; 10]);
        assert_eq!(s.get(i).mem, 10 + SLOT_OVERHEAD);
    }
}
