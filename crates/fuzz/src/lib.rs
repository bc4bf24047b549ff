//! Support for the decoder fuzz tests in `tests/`: an allocation probe and
//! the budget of cases.
//!
//! The property "no allocation driven by an untrusted length" is checked
//! by measuring: [`LargestAllocation`] wraps the system allocator and
//! records, per thread, the largest single allocation since the last
//! reset. A test binary installs it as its global allocator and asserts
//! that decoding `n` bytes never asks for much more than `n` at once; a
//! decoder that trusted a 4-byte length field would ask for gigabytes.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    /// The largest allocation this thread made since the last reset.
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn record(size: usize) {
    // `try_with`: allocations made while the thread is being torn down
    // are not measured (nothing is decoded then).
    let _ = LARGEST.try_with(|largest| largest.set(largest.get().max(size)));
}

/// The system allocator, recording each thread's largest allocation.
pub struct LargestAllocation;

// SAFETY: every call is passed to `System` unchanged; the wrapper only
// reads the requested size into a thread-local cell, which allocates
// nothing.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for LargestAllocation {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        record(new_size);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Runs `f` and returns its result with the largest single allocation it
/// made on this thread.
pub fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.with(|largest| largest.set(0));
    let result = f();
    (result, LARGEST.with(Cell::get))
}

/// The most a decoder may allocate at once for an input of `input_bytes`:
/// a fixed allowance plus a multiple of the input, never a size an
/// untrusted field chose.
pub fn allocation_bound(input_bytes: usize) -> usize {
    (1 << 20) + 64 * input_bytes
}

/// Cases per property: `BELLWETHER_FUZZ_CASES`, or 300 in the test suite
/// (`scripts/fuzz.sh` runs a long campaign).
pub fn cases() -> u32 {
    std::env::var("BELLWETHER_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}
