//! A hint to the processor that a piece of memory is about to be used.
//!
//! The one `unsafe` block of the crate: `core::hint::prefetch_read` does this safely but is not
//! stable yet, and the architecture's intrinsic is declared `unsafe` only because it takes a
//! raw pointer.

/// Asks the processor to bring the cache line that holds `place` into its caches. A hint: it
/// changes nothing the program computes, whatever `place` is.
#[inline(always)]
pub(crate) fn prefetch<T>(place: *const T) {
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    // SAFETY: PREFETCHT0 neither reads nor writes anything the program can observe and never
    // faults, whatever the address, so no pointer it is given can cause undefined behaviour.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(place.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = place;
}
