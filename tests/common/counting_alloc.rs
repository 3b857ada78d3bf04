//! A global allocator that counts the allocations of the current thread while
//! counting is on, for "allocates nothing" tests. Included with `#[path]` by
//! each test binary that needs it (a global allocator is per binary).
//!
//! Turn counting on with `ALLOCS.with(|c| c.set(Some(0)))`, read and turn it
//! off with `ALLOCS.with(|c| c.replace(None))`.

pub struct CountingAlloc;

thread_local! {
    pub static ALLOCS: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

// SAFETY: forwards to the system allocator unchanged; the bookkeeping only
// touches a const-initialised thread-local `Cell`, which never allocates.
unsafe impl std::alloc::GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get().map(|n| n + 1)));
        // SAFETY: same contract as the caller's.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;
