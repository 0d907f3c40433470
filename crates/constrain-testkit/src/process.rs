//! Process-wide settings for the schema commands, shared by the binary and
//! the development examples (which must measure what the binary runs).

/// mimalloc's `mi_option_purge_delay` (15 in its `mi_option_t`; the sys
/// crate does not name it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Never hand freed memory back to the OS: a MaskBench run compiles
/// thousands of schemas of up to hundreds of MB each, and memory handed back
/// must be faulted in and zeroed again (measured: 4–10 % less compile time
/// over 12 big schemas). Only has an effect with mimalloc as the global
/// allocator.
pub fn keep_freed_memory() {
    // SAFETY: sets a plain integer option; any value is valid.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
}

/// Asks Linux not to back this process's memory with transparent huge pages.
/// The schema compiler and the lazy index grow big vectors (regex syntax
/// trees, NFA and DFA tables) by doubling; with huge pages every first touch
/// of a fresh 2 MiB page zeroes all of it. Measured on the 25 MaskBench
/// schemas with the most slow token steps: the kernel's page zeroing fell
/// from 35 % of the run to under 2 %, and the run from 27.6 s to 22.4 s.
/// Called for the schema commands, not for generation (the model's weights
/// are read once and gain from huge pages' fewer TLB misses).
pub fn no_huge_pages() {
    #[cfg(target_os = "linux")]
    {
        extern "C" {
            fn prctl(option: std::ffi::c_int, ...) -> std::ffi::c_int;
        }
        const PR_SET_THP_DISABLE: std::ffi::c_int = 41;
        // SAFETY: PR_SET_THP_DISABLE takes one integer argument; a failure
        // (an old kernel) only leaves the default in place.
        unsafe {
            prctl(
                PR_SET_THP_DISABLE,
                1 as std::ffi::c_ulong,
                0 as std::ffi::c_ulong,
                0 as std::ffi::c_ulong,
                0 as std::ffi::c_ulong,
            );
        }
    }
}
