//! # pool: a parallel loop over chunks that never waits for a thread that has not started
//!
//! The matmuls of a pass split their output columns into chunks that the
//! calling thread and the pool's workers take from one shared cursor.
//! candle's barrier pool (what the kernels ran on before) then waits, at
//! the end of every matmul, until *each* worker has signalled that it is
//! done, even a worker that never got a CPU and so never took a chunk. On
//! an idle machine that wait is a few hundred nanoseconds; on a machine
//! whose cores are shared with other processes (a laptop building code,
//! a CI runner, a 2-core VM), a worker descheduled for a time slice holds
//! up every matmul of the pass by that slice, some 170 times a token, and
//! its spinning before it parks takes the very CPU the others need: with
//! 2 threads on such a machine, decoding ran at a sixth of its 1-thread
//! speed.
//!
//! Here a job is *open* while the caller works on it. A worker that wakes
//! joins it (one compare-and-swap on the pool's state word, which counts
//! the participants) only while it is open; the caller, once the cursor is
//! exhausted, closes the job and waits only for the workers that joined,
//! each finishing the one chunk it holds. A worker that wakes later finds
//! the job closed and goes back to sleep. So a matmul never waits for a
//! thread that did not start, and the caller does the whole matmul itself
//! when it is the only thread that gets a CPU.
//!
//! Which thread computes which chunk changes nothing in the result: each
//! output is written by exactly one chunk, computed by the same code.
//!
//! The state word: generation (high 32 bits, one per job), the open flag
//! (bit 31), the count of participants (low 31 bits). Workers spin a
//! moment for the next job (the matmuls of a pass come back to back), then
//! park; the caller unparks them when it opens a job. Calls from several
//! threads at once are allowed: the one that finds the pool busy, or a call
//! from inside a worker, runs its loop alone.

use std::cell::{Cell, UnsafeCell};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::thread::Thread;

const OPEN: u64 = 1 << 31;
const COUNT: u64 = OPEN - 1;
/// Spins a worker waits for the next job before it parks.
const SPINS: u32 = 2_000;

/// The job a call opens: its chunks and the closure that computes one.
struct Job {
    run: unsafe fn(*const (), Range<usize>),
    data: *const (),
    n: usize,
    chunk: usize,
    cursor: AtomicUsize,
}

impl Job {
    /// Takes chunks from the cursor until none is left.
    fn work(&self) {
        loop {
            let start = self.cursor.fetch_add(self.chunk, Ordering::Relaxed);
            if start >= self.n {
                return;
            }
            // SAFETY: `data` is the `F` of `run` (see `for_chunks`), alive
            // while the job is open or has participants.
            unsafe { (self.run)(self.data, start..self.n.min(start + self.chunk)) };
        }
    }
}

struct Pool {
    state: AtomicU64,
    /// The open job (written by the caller before it opens the job).
    job: UnsafeCell<*const Job>,
    workers: OnceLock<Vec<Thread>>,
    /// Held by the calling thread; its value is the last generation.
    call: Mutex<u64>,
}

// SAFETY: `job` is written only by the thread holding `call` while no job is
// open and no worker participates; workers read it only after joining.
unsafe impl Sync for Pool {}
unsafe impl Send for Pool {}

thread_local! {
    static IN_POOL: Cell<bool> = const { Cell::new(false) };
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<&'static Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let workers = crate::threads().saturating_sub(1);
        let pool: &'static Pool = Box::leak(Box::new(Pool {
            state: AtomicU64::new(0),
            job: UnsafeCell::new(std::ptr::null()),
            workers: OnceLock::new(),
            call: Mutex::new(0),
        }));
        let handles: Vec<Thread> = (0..workers)
            .map(|i| {
                std::thread::Builder::new()
                    .name(format!("constrain-mm-{i}"))
                    .spawn(move || worker(pool))
                    .expect("spawning a matmul worker")
                    .thread()
                    .clone()
            })
            .collect();
        let _ = pool.workers.set(handles);
        pool
    })
}

fn worker(pool: &'static Pool) {
    IN_POOL.with(|f| f.set(true));
    let mut seen = 0u64;
    let mut spins = 0u32;
    loop {
        let s = pool.state.load(Ordering::Acquire);
        let gen = s >> 32;
        if gen != seen && s & OPEN != 0 {
            if pool
                .state
                .compare_exchange_weak(s, s + 1, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                continue;
            }
            seen = gen;
            // SAFETY: joined an open job: the caller keeps it alive until
            // the participants are back to zero.
            let job = unsafe { &**pool.job.get() };
            job.work();
            pool.state.fetch_sub(1, Ordering::Release);
            spins = 0;
            continue;
        }
        // A job closed before this worker saw it: not this worker's.
        seen = gen;
        spins += 1;
        if spins < SPINS {
            std::hint::spin_loop();
        } else {
            spins = 0;
            std::thread::park();
        }
    }
}

unsafe fn trampoline<F: Fn(Range<usize>)>(data: *const (), r: Range<usize>) {
    (*(data as *const F))(r)
}

/// Runs `f` over `0..n` in chunks, on the calling thread and whichever
/// pool workers join in time; returns when every chunk is done.
pub(crate) fn for_chunks<F: Fn(Range<usize>) + Sync>(n: usize, f: F) {
    if n == 0 {
        return;
    }
    let pool = pool();
    let workers = pool.workers.get().map_or(&[][..], Vec::as_slice);
    if workers.is_empty() || n == 1 || IN_POOL.with(|c| c.get()) {
        return f(0..n);
    }
    let Ok(mut last) = pool.call.try_lock() else {
        return f(0..n);
    };
    // ~8 chunks per thread, as candle's `execute_chunked`.
    let threads = workers.len() + 1;
    let job = Job {
        run: trampoline::<F>,
        data: &f as *const F as *const (),
        n,
        chunk: n.div_ceil(threads * 8).max(1),
        cursor: AtomicUsize::new(0),
    };
    let gen = (*last + 1) & 0xffff_ffff;
    let gen = if gen == 0 { 1 } else { gen };
    *last = gen;
    // SAFETY: no job is open and no worker participates (the previous
    // call waited for them), so no worker reads `job` now.
    unsafe { *pool.job.get() = &job };
    pool.state.store(gen << 32 | OPEN, Ordering::Release);
    for w in workers {
        w.unpark();
    }
    job.work();
    // Close the job; then wait for the workers that joined it.
    let mut s = pool.state.load(Ordering::Acquire);
    while let Err(now) =
        pool.state
            .compare_exchange_weak(s, s & !OPEN, Ordering::AcqRel, Ordering::Acquire)
    {
        s = now;
    }
    let mut spins = 0u32;
    while pool.state.load(Ordering::Acquire) & COUNT != 0 {
        spins += 1;
        if spins < SPINS {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// Runs `f(i, row)` for each row `i` of `data` (rows of `width` values) in
/// parallel, as [`for_chunks`] does.
pub(crate) fn for_rows_mut<F: Fn(usize, &mut [f32]) + Sync>(data: &mut [f32], width: usize, f: F) {
    if width == 0 {
        return;
    }
    let rows = data.len() / width;
    let base = RowsPtr(data.as_mut_ptr());
    for_chunks(rows, |range| {
        let base = &base;
        for i in range {
            // SAFETY: rows are disjoint and within `data`; each row index
            // is handed to exactly one chunk.
            let row = unsafe { std::slice::from_raw_parts_mut(base.0.add(i * width), width) };
            f(i, row);
        }
    });
}

struct RowsPtr(*mut f32);
// SAFETY: the chunks write disjoint rows (see `for_rows_mut`).
unsafe impl Sync for RowsPtr {}

#[cfg(test)]
mod tests {
    use super::for_chunks;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn every_item_once_whoever_calls() {
        for n in [0, 1, 2, 7, 64, 1000] {
            let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
            for_chunks(n, |r| {
                for i in r {
                    hits[i].fetch_add(1, Ordering::Relaxed);
                }
            });
            assert!(
                hits.iter().all(|h| h.load(Ordering::Relaxed) == 1),
                "n = {n}"
            );
        }
        // Several callers at once: each loop still covers its items once.
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..200 {
                        let hits: Vec<AtomicUsize> = (0..97).map(|_| AtomicUsize::new(0)).collect();
                        for_chunks(97, |r| {
                            for i in r {
                                hits[i].fetch_add(1, Ordering::Relaxed);
                            }
                        });
                        assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
                    }
                });
            }
        });
    }
}
