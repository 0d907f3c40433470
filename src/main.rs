//! The `constrain` binary: a thin `main` over [`cli`]. Exit codes: 0 success,
//! 1 a negative answer (`check` rejected the text, `soak` found a failure),
//! 2 bad input (one `error:` line on stderr, nothing on stdout).

mod cli;

/// Compiling a big schema builds and drops millions of small regex syntax
/// nodes; mimalloc frees them several times faster than the system allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (15 in its `mi_option_t`; the sys
/// crate does not name it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

fn main() -> std::process::ExitCode {
    // Never hand freed memory back to the OS: a MaskBench run compiles
    // thousands of schemas of up to hundreds of MB each, and memory handed
    // back must be faulted in and zeroed again (measured: 4–10 % less compile
    // time over 12 big schemas).
    // SAFETY: sets a plain integer option; any value is valid.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    cli::main()
}
