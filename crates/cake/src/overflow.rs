//! The max-heap of flow backlogs used to find the fattest queue (across all tins) when the
//! memory limit is exceeded. Like the kernel's, it is rebuilt lazily: only kept up to date while
//! overflows are recent.

use crate::params::MAX_TINS;
use crate::tin::QUEUES;

const N: usize = MAX_TINS * QUEUES;

/// Flat flow id: `tin * 1024 + flow`.
pub type FlatId = u16;

/// The heap plus each flow's position in it.
#[derive(Clone, Debug)]
pub struct OverflowHeap {
    heap: Vec<FlatId>,
    pos: Vec<u16>,
    /// Dequeues left before the heap is considered stale (0 = rebuild before use).
    pub timeout: u32,
}

impl Default for OverflowHeap {
    fn default() -> Self {
        OverflowHeap {
            heap: (0..N as u16).collect(),
            pos: (0..N as u16).collect(),
            timeout: 0,
        }
    }
}

impl OverflowHeap {
    #[inline]
    fn swap(&mut self, i: usize, j: usize) {
        self.heap.swap(i, j);
        self.pos[self.heap[i] as usize] = i as u16;
        self.pos[self.heap[j] as usize] = j as u16;
    }

    /// Sifts entry `i` down.
    pub fn heapify(&mut self, mut i: usize, backlog: &impl Fn(FlatId) -> u32) {
        loop {
            let l = 2 * i + 1;
            let r = l + 1;
            let mut m = i;
            let mut mb = backlog(self.heap[i]);
            if l < N {
                let lb = backlog(self.heap[l]);
                if lb > mb {
                    m = l;
                    mb = lb;
                }
            }
            if r < N && backlog(self.heap[r]) > mb {
                m = r;
            }
            if m == i {
                return;
            }
            self.swap(i, m);
            i = m;
        }
    }

    /// Sifts the entry for flow `id` up (after its backlog grew).
    pub fn heapify_up_flow(&mut self, id: FlatId, backlog: &impl Fn(FlatId) -> u32) {
        let mut i = self.pos[id as usize] as usize;
        while i > 0 {
            let p = (i - 1) / 2;
            if backlog(self.heap[i]) <= backlog(self.heap[p]) {
                break;
            }
            self.swap(i, p);
            i = p;
        }
    }

    /// Sifts the entry for flow `id` down (after its backlog shrank).
    pub fn heapify_flow(&mut self, id: FlatId, backlog: &impl Fn(FlatId) -> u32) {
        let i = self.pos[id as usize] as usize;
        self.heapify(i, backlog);
    }

    /// Rebuilds the whole heap.
    pub fn rebuild(&mut self, backlog: &impl Fn(FlatId) -> u32) {
        for i in (0..N / 2).rev() {
            self.heapify(i, backlog);
        }
    }

    /// The flow with the most backlog (if the heap is current).
    #[inline]
    pub fn top(&self) -> FlatId {
        self.heap[0]
    }
}
