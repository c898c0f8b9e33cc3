//! Frame buffers: where the code that builds frames (GSO segmentation, rejoining) gets them and
//! gives them back ([`Buffers`]), and the size-class [`Pool`] a dataplane keeps them in, so that
//! what a queued frame pins stays within about twice its length and steady-state forwarding
//! allocates nothing.
//!
//! [`Unpooled`] allocates each buffer at exactly the length asked for and frees what comes back:
//! what [`Qdisc::enqueue`](crate::Qdisc::enqueue) and [`segment`](super::segment) use, so a
//! caller that keeps no pool (the simulator, the tests) sees each segment charged its exact
//! length.
//!
//! A dataplane's frame arrives in a receive slot of [`RX_BUF`] bytes (room for a 64 KiB GRO
//! super-packet). Frames up to [`LARGEST_CLASS`] bytes are copied into a buffer of the smallest
//! class that holds them (128 bytes to 32 KiB, powers of two); a longer frame keeps the receive
//! slot's buffer, which then holds at most twice its length (plus 256 bytes), and the slot gets
//! a fresh one. Segments cut from a super-packet come from the same classes ([`Pool`]'s
//! [`Buffers::take`]). Queued frames are charged their buffer's capacity by the qdiscs that
//! limit memory (CAKE's `memlimit`, see [`Packet::truesize`](super::Packet::truesize)), so a
//! flood of 60-byte frames pins 128-byte buffers, not 2 KiB or 64 KiB ones.
//!
//! Buffers of sent and dropped frames come back with [`Pool::put`] and are reused. The pool keeps
//! at most [`HIGH_WATER`] bytes of free buffers; once the queues have drained the dataplane calls
//! [`Pool::trim`] to keep only [`LOW_WATER`], and hands the freed memory back to the system.

/// Where frame-building code gets empty buffers and returns the ones it no longer needs.
/// Implemented by [`Pool`] (a dataplane's) and [`Unpooled`] (exact allocations, no reuse).
pub trait Buffers {
    /// An empty buffer with room for at least `len` bytes. Called once per frame built (once
    /// per segment cut from a super-packet), so it should not allocate in steady state.
    fn take(&mut self, len: usize) -> Vec<u8>;
    /// Takes back a buffer no longer needed (a super-packet's, once cut; a segment's, once
    /// joined into another). Its contents are discarded.
    fn recycle(&mut self, v: Vec<u8>);
}

/// [`Buffers`] without a pool: each buffer is allocated with exactly the capacity asked for and
/// returned ones are freed (so a frame's [`truesize`](super::Packet::truesize) is its length).
#[derive(Clone, Copy, Debug, Default)]
pub struct Unpooled;

impl Buffers for Unpooled {
    #[inline]
    fn take(&mut self, len: usize) -> Vec<u8> {
        Vec::with_capacity(len)
    }
    #[inline]
    fn recycle(&mut self, v: Vec<u8>) {
        drop(v);
    }
}

/// Receive slot size: the largest GRO super-packet (64 KiB) plus Ethernet/VLAN headers.
pub const RX_BUF: usize = 65_536 + 256;

/// The copy classes: a frame is copied into the smallest that holds it.
const CLASSES: [usize; 9] = [128, 256, 512, 1024, 2048, 4096, 8192, 16_384, 32_768];

/// Frames longer than this keep their receive slot's buffer ([`RX_BUF`], about twice their
/// length) instead of being copied.
pub const LARGEST_CLASS: usize = CLASSES[CLASSES.len() - 1];

/// Free-list index of receive-slot buffers.
const SLOT: usize = CLASSES.len();

/// Free buffer bytes the pool keeps at most while forwarding (beyond that, returned buffers are
/// freed): enough for every buffer in flight in a few batches of either direction.
pub const HIGH_WATER: usize = 16 << 20;

/// Free buffer bytes [`Pool::trim`] keeps at most: a batch of receive slots' worth, so that the
/// next burst after a drain starts without allocating much.
pub const LOW_WATER: usize = 4 << 20;

/// Free buffers of one class [`Pool::trim`] keeps at most: two batches. Few, because small
/// buffers left scattered over the heap would each keep a whole page from going back to the
/// system.
pub const KEEP_PER_CLASS: usize = 128;

/// The pool: one free list per class plus one of receive-slot buffers. Owned by one dataplane
/// thread; the frames it hands out go to the qdiscs and come back with [`Pool::put`] once sent
/// or dropped.
#[derive(Debug, Default)]
pub struct Pool {
    free: [Vec<Vec<u8>>; CLASSES.len() + 1],
    /// Bytes of capacity in the free lists.
    held: usize,
    /// Bytes of buffers freed (dropped, not kept) since the last [`Pool::take_freed`].
    freed: usize,
}

/// The free-list index for a buffer of capacity `cap`, if it is exactly a class or slot size.
fn index_of_capacity(cap: usize) -> Option<usize> {
    if cap == RX_BUF {
        Some(SLOT)
    } else {
        CLASSES.iter().position(|&c| c == cap)
    }
}

fn size_of_index(i: usize) -> usize {
    CLASSES.get(i).copied().unwrap_or(RX_BUF)
}

impl Pool {
    /// An empty buffer to copy a frame of `len` bytes into, with the capacity of the smallest
    /// class that holds it; `None` when `len` exceeds [`LARGEST_CLASS`] (keep the receive
    /// slot's buffer instead, and replace it with [`Pool::slot`]).
    pub fn for_frame(&mut self, len: usize) -> Option<Vec<u8>> {
        if len > LARGEST_CLASS {
            return None;
        }
        let i = CLASSES.iter().position(|&c| c >= len)?;
        Some(self.pop_class(i))
    }

    /// An empty receive-slot buffer ([`RX_BUF`] bytes of capacity).
    pub fn slot(&mut self) -> Vec<u8> {
        self.pop_class(SLOT)
    }

    fn pop_class(&mut self, i: usize) -> Vec<u8> {
        match self.free[i].pop() {
            Some(v) => {
                self.held -= v.capacity();
                v
            }
            None => Vec::with_capacity(size_of_index(i)),
        }
    }

    /// Returns a buffer for reuse. Kept when its capacity is a class or slot size and the pool
    /// holds less than [`HIGH_WATER`]; freed otherwise.
    pub fn put(&mut self, mut v: Vec<u8>) {
        let cap = v.capacity();
        match index_of_capacity(cap) {
            Some(i) if self.held + cap <= HIGH_WATER => {
                v.clear();
                self.held += cap;
                self.free[i].push(v);
            }
            _ => self.freed += cap,
        }
    }

    /// Frees free buffers, the largest first, until at most `keep` bytes and at most
    /// [`KEEP_PER_CLASS`] buffers of each class remain, and the spare room of free lists a burst
    /// grew; returns the bytes freed (0, allocating and freeing nothing, when there is nothing
    /// to trim).
    pub fn trim(&mut self, keep: usize) -> usize {
        let before = self.held;
        for i in (0..self.free.len()).rev() {
            while self.held > keep || self.free[i].len() > KEEP_PER_CLASS {
                match self.free[i].pop() {
                    Some(v) => self.held -= v.capacity(),
                    None => break,
                }
            }
            // Only a list a burst grew: shrinking an ordinary one would reallocate it after
            // every drain at low load.
            if self.free[i].capacity() > 2 * KEEP_PER_CLASS {
                self.free[i].shrink_to(KEEP_PER_CLASS);
            }
        }
        let n = before - self.held;
        self.freed += n;
        n
    }

    /// Bytes of capacity in the free lists.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.held
    }

    /// Bytes of buffers the pool freed since the last call (kept out by [`HIGH_WATER`], by an
    /// odd capacity, or by [`Pool::trim`]), and resets the count.
    pub fn take_freed(&mut self) -> usize {
        std::mem::take(&mut self.freed)
    }
}

impl Buffers for Pool {
    /// A buffer of the smallest class that holds `len` bytes, a receive slot's beyond
    /// [`LARGEST_CLASS`] up to [`RX_BUF`], else (never for a frame of at most 64 KiB plus
    /// headers) one of exactly `len` bytes that [`Pool::put`] will free.
    #[inline]
    fn take(&mut self, len: usize) -> Vec<u8> {
        match self.for_frame(len) {
            Some(v) => v,
            None if len <= RX_BUF => self.slot(),
            None => Vec::with_capacity(len),
        }
    }
    #[inline]
    fn recycle(&mut self, v: Vec<u8>) {
        self.put(v);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn frames_get_the_smallest_class_that_holds_them_at_most_twice_their_length() {
        let mut p = Pool::default();
        for len in [1, 60, 128, 129, 1514, 2063, 9000, 32_768] {
            let v = p.for_frame(len).expect("a class");
            assert!(v.capacity() >= len, "{len}");
            assert!(v.capacity() <= 2 * len.max(64), "{len}: {}", v.capacity());
        }
        assert!(p.for_frame(LARGEST_CLASS + 1).is_none());
        // The slot a longer frame keeps is at most twice its length, plus the slot's room for
        // headers beyond 64 KiB.
        const { assert!(RX_BUF <= 2 * (LARGEST_CLASS + 1) + 256) };
    }

    #[test]
    fn buffers_are_reused_up_to_the_high_water_mark_and_trim_keeps_the_low_one() {
        let mut p = Pool::default();
        let v = p.for_frame(60).unwrap();
        let ptr = v.as_ptr();
        p.put(v);
        assert_eq!(p.held(), 128);
        let again = p.for_frame(100).unwrap();
        assert_eq!(again.as_ptr(), ptr, "not reused");
        assert_eq!(p.held(), 0);
        // An odd capacity is freed, not kept.
        p.put(Vec::with_capacity(1_000));
        assert_eq!((p.held(), p.take_freed()), (0, 1_000));
        // Fill past the high-water mark: the excess is freed.
        let n = HIGH_WATER / RX_BUF + 10;
        let slots: Vec<Vec<u8>> = (0..n).map(|_| p.slot()).collect();
        for v in slots {
            p.put(v);
        }
        assert!(p.held() <= HIGH_WATER);
        assert!(p.held() + RX_BUF > HIGH_WATER);
        assert_eq!(p.take_freed(), n * RX_BUF - p.held());
        let freed = p.trim(LOW_WATER);
        assert!(p.held() <= LOW_WATER && freed > 0);
        assert_eq!(p.take_freed(), freed);
        assert_eq!(p.trim(LOW_WATER), 0);
    }

    /// At low load the queues drain after nearly every packet: trimming a pool that holds
    /// little must then free and reallocate nothing (not even its free lists).
    #[test]
    fn trimming_a_small_pool_touches_nothing() {
        let mut p = Pool::default();
        let bufs: Vec<Vec<u8>> = (0..5).map(|_| p.for_frame(60).unwrap()).collect();
        for b in bufs {
            p.put(b);
        }
        let list = p.free[0].as_ptr();
        let cap = p.free[0].capacity();
        assert_eq!(p.trim(LOW_WATER), 0);
        assert_eq!((p.free[0].as_ptr(), p.free[0].capacity()), (list, cap));
        assert_eq!(p.held(), 5 * 128);
    }
}
