//! The steady-state benchmark loop must not touch the heap: a counting global allocator counts
//! allocations made by this thread while the loop runs.
#![allow(unsafe_code)] // A GlobalAlloc impl is unsafe by definition; it only forwards to System.

use cake::bench::{BenchQdisc, EngineBench};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

fn note() {
    // `try_with`: thread-locals may be gone during thread teardown. Const-initialised Cells
    // never allocate, so this cannot recurse.
    if COUNTING.try_with(Cell::get).unwrap_or(false) {
        let _ = ALLOCS.try_with(|a| a.set(a.get() + 1));
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by `f` on this thread.
fn allocations_during(f: impl FnOnce()) -> u64 {
    ALLOCS.with(|a| a.set(0));
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    ALLOCS.with(Cell::get)
}

fn steady_state_allocations(kind: BenchQdisc, flows: usize) -> u64 {
    // `new` builds the packets and runs the warm-up.
    let mut b = EngineBench::new(kind, flows);
    allocations_during(|| b.run(20_000))
}

#[test]
fn counting_allocator_sees_allocations() {
    assert!(allocations_during(|| drop(std::hint::black_box(vec![1u8; 64]))) >= 1);
}

#[test]
fn cake_steady_state_with_1024_flows_does_not_allocate() {
    assert_eq!(steady_state_allocations(BenchQdisc::Cake, 1024), 0);
}

#[test]
fn cake_steady_state_with_1_and_10000_flows_does_not_allocate() {
    assert_eq!(steady_state_allocations(BenchQdisc::Cake, 1), 0);
    assert_eq!(steady_state_allocations(BenchQdisc::Cake, 10_000), 0);
}

#[test]
fn baselines_steady_state_with_1024_flows_do_not_allocate() {
    for kind in BenchQdisc::ALL {
        assert_eq!(steady_state_allocations(kind, 1024), 0, "{}", kind.name());
    }
}
