//! The batch fill's workers: a few persistent threads that fill bitmask rows
//! beside the calling thread.
//!
//! A batch of 64 Qwen rows is about 35 µs of copying on one thread (a row is
//! a 19 KB memory-bound copy), so what a helper costs to reach decides
//! whether it helps at all. A task handed to a sleeping pool (rayon, a
//! condition variable) waits for the kernel to wake a thread: tens of µs on
//! a busy machine, the whole batch. Here:
//!
//! * **Persistent workers that spin, then park.** After each job a worker
//!   watches the job counter for [`spin`] (default 200 µs, env
//!   `CONSTRAIN_FILL_SPIN_US`) before it parks, so a batch that follows
//!   soon after the last one (a serving loop under load, a benchmark) finds
//!   it awake: hand-off is one cache-line transfer. A parked worker is woken
//!   with `unpark` by the caller (one system call, only when some worker is
//!   parked), and each worker that joins wakes the next parked one while
//!   enough rows are left, so waking many is never on the caller's path.
//! * **The caller works too, and never waits for a worker that has not
//!   started.** Rows are claimed in groups of [`CLAIM`]: the caller from the
//!   front of the batch, workers from the back, so a late or descheduled
//!   worker just finds nothing left, and each thread fills about the same
//!   rows at every step of a serving loop (their cache lines stay in its
//!   core; claimed from one shared counter, rows moved between cores and two
//!   threads filled them at half speed). The caller then waits only for
//!   groups already claimed (a few µs; or, rarely, for a worker that has
//!   meanwhile joined the next caller's job, which is as short).
//! * **No allocation and no lock per call.** The job lives on the caller's
//!   stack and is published through one atomic pointer; a second batch
//!   arriving while one is published (another Python thread: the GIL is
//!   released) fills its rows alone instead of queueing.
//!
//! ## Why the job on the stack is safe
//!
//! A worker announces itself in `active` *before* it reads the job pointer;
//! the caller clears the pointer *before* it waits for `active` to reach
//! zero (all `SeqCst`). So a worker that read the pointer is counted until
//! it stops touching the job, and a worker counted after the caller saw
//! zero reads a null (or a later job's) pointer. Rows are written before the
//! worker's `active` decrement (release) and read by Python after the
//! caller's load that sees zero (acquire).

use crate::buffer::RowPtr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::OnceLock;
use std::thread::Thread;
use std::time::{Duration, Instant};

/// Rows a thread claims at a time (4 Qwen rows: ~2 µs).
pub const CLAIM: usize = 4;

/// Fewest rows per thread worth a helper (below that, the hand-off costs
/// about what the rows do).
pub const MIN_ROWS: usize = 8;

/// Most threads a batch fill uses, the caller included (more threads only
/// contend for memory bandwidth: a row is a straight copy).
const MAX_THREADS: usize = 8;

/// Longest gap between two clock reads of a spinning worker that counts as
/// spinning (64 polls take well under 1 µs; more is a deschedule).
const DESCHEDULED: Duration = Duration::from_micros(20);

/// Spins of a caller waiting for claimed rows before it yields (~10 µs; a
/// group of [`CLAIM`] rows takes ~2 µs, longer means the worker holding it
/// is descheduled, maybe on this very CPU). A spinning *worker* never
/// yields: on a busy machine a yield gives its CPU away for a time slice,
/// and it would miss the batches it spins for (measured: it joined 1 % of
/// them instead of 25 to 95 %).
const WAIT_SPINS: u32 = 512;

/// One batch fill: `(address of a constrain::Matcher, row)` per row.
pub struct Job<'a> {
    /// The unclaimed rows `front..back` of `work` (`front` in the low 32
    /// bits, `back` in the high ones): the caller claims from the front,
    /// workers from the back.
    ends: AtomicU64,
    /// Workers that may still join.
    tickets: AtomicUsize,
    /// A worker's fill panicked: its claimed rows may be unfilled, so the
    /// caller must not report the batch as filled.
    panicked: std::sync::atomic::AtomicBool,
    work: &'a [(usize, usize)],
    rows: RowPtr,
}

impl<'a> Job<'a> {
    fn new(work: &'a [(usize, usize)], rows: RowPtr, tickets: usize) -> Self {
        Job {
            ends: AtomicU64::new((work.len() as u64) << 32),
            tickets: AtomicUsize::new(tickets),
            panicked: std::sync::atomic::AtomicBool::new(false),
            work,
            rows,
        }
    }

    /// Claims up to [`CLAIM`] rows at one end: the front (the caller) or the
    /// back (workers). Each thread thus fills about the same rows at every
    /// step of a serving loop, whose bitmask lines then stay in its core's
    /// cache instead of moving between cores (measured: rows claimed from
    /// one shared counter were filled at half speed by two threads).
    fn claim(&self, back: bool) -> Option<std::ops::Range<usize>> {
        let mut v = self.ends.load(Relaxed);
        loop {
            let (f, b) = (v & 0xFFFF_FFFF, v >> 32);
            if f >= b {
                return None;
            }
            let (nf, nb, range) = if back {
                let nb = b.saturating_sub(CLAIM as u64).max(f);
                (f, nb, nb..b)
            } else {
                let nf = (f + CLAIM as u64).min(b);
                (nf, b, f..nf)
            };
            match self
                .ends
                .compare_exchange_weak(v, (nb << 32) | nf, Relaxed, Relaxed)
            {
                Ok(_) => return Some(range.start as usize..range.end as usize),
                Err(now) => v = now,
            }
        }
    }

    /// Rows not claimed yet.
    fn unclaimed(&self) -> usize {
        let v = self.ends.load(Relaxed);
        ((v >> 32).saturating_sub(v & 0xFFFF_FFFF)) as usize
    }

    /// Claims and fills groups of rows at one end until none is left;
    /// returns how many rows it filled.
    ///
    /// # Safety
    /// Until the caller's `run` returns, every matcher address is a live
    /// `constrain::Matcher` not mutated meanwhile, and every row is in range
    /// of the held export and named once.
    unsafe fn fill(&self, back: bool) -> usize {
        let mut filled = 0;
        while let Some(range) = self.claim(back) {
            filled += range.len();
            for &(m, i) in &self.work[range] {
                let m = &*(m as *const constrain::Matcher);
                // The row has exactly the words the core asks for (checked
                // by the buffer view), so the fill cannot fail.
                let _ = m.fill_bitmask(self.rows.row(i));
            }
        }
        filled
    }

    /// Whether rows enough for one more thread are unclaimed.
    fn wants_more(&self) -> bool {
        self.tickets.load(Relaxed) > 0 && self.unclaimed() >= 2 * MIN_ROWS
    }
}

// Counters since the start, for `_fill_stats` (whether the workers take part
// on this machine); relaxed increments off the rows' path.
/// Rows filled by workers.
pub static WORKER_ROWS: AtomicUsize = AtomicUsize::new(0);
/// Jobs a worker took part in.
pub static WORKER_JOBS: AtomicUsize = AtomicUsize::new(0);
/// Times a worker parked after its spin window.
pub static PARKS: AtomicUsize = AtomicUsize::new(0);
/// Times a parked worker was woken.
pub static WAKES: AtomicUsize = AtomicUsize::new(0);
/// Batch fills published to the workers.
pub static PUBLISHED: AtomicUsize = AtomicUsize::new(0);

struct Shared {
    /// The published job (null: none).
    slot: AtomicPtr<Job<'static>>,
    /// Bumped at every publication; workers watch it.
    epoch: AtomicUsize,
    /// Workers between announcing themselves and leaving a job.
    active: AtomicUsize,
    /// Per worker: parked (or about to park).
    parked: Vec<AtomicBool>,
    spin: Duration,
}

struct Pool {
    shared: &'static Shared,
    threads: Vec<Thread>,
    /// The process that started the workers: a child made by `fork` (e.g.
    /// `multiprocessing`) has none of them, and fills its batches alone.
    pid: u32,
}

/// The spin window of an idle worker before it parks.
fn spin() -> Duration {
    let us = std::env::var("CONSTRAIN_FILL_SPIN_US")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(200);
    Duration::from_micros(us)
}

/// Threads of a batch fill, the caller included: `CONSTRAIN_FILL_THREADS`,
/// else the CPUs this process may run on, at most [`MAX_THREADS`].
fn threads() -> usize {
    std::env::var("CONSTRAIN_FILL_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(MAX_THREADS)
        })
}

/// `CONSTRAIN_FILL_TEST_WORKERS_ONLY` (tests): the caller of a batch fill
/// offered to the workers fills nothing itself unless they have not claimed
/// every row within 5 s.
fn workers_only() -> bool {
    static ONLY: OnceLock<bool> = OnceLock::new();
    *ONLY.get_or_init(|| std::env::var_os("CONSTRAIN_FILL_TEST_WORKERS_ONLY").is_some())
}

/// The pool, started at the first batch fill that can use it (`None`: one
/// thread only, or no thread could be started).
static POOL: OnceLock<Option<Pool>> = OnceLock::new();

fn pool() -> Option<&'static Pool> {
    POOL.get_or_init(|| {
        let n = threads().saturating_sub(1);
        if n == 0 {
            return None;
        }
        let shared: &'static Shared = Box::leak(Box::new(Shared {
            slot: AtomicPtr::new(std::ptr::null_mut()),
            epoch: AtomicUsize::new(0),
            active: AtomicUsize::new(0),
            parked: (0..n).map(|_| AtomicBool::new(false)).collect(),
            spin: spin(),
        }));
        let mut threads = Vec::with_capacity(n);
        for me in 0..n {
            let spawned = std::thread::Builder::new()
                .name(format!("constrain-fill-{me}"))
                .stack_size(256 << 10)
                .spawn(move || worker(shared, me));
            match spawned {
                Ok(h) => threads.push(h.thread().clone()),
                Err(_) => break,
            }
        }
        if threads.is_empty() {
            return None;
        }
        Some(Pool {
            shared,
            threads,
            pid: std::process::id(),
        })
    })
    .as_ref()
}

impl Shared {
    /// Wakes one parked worker, if any.
    fn wake_one(&self) {
        // `get`, not `pool()`: never waits for (or starts) the pool.
        let Some(Some(pool)) = POOL.get() else { return };
        for (flag, t) in self.parked.iter().zip(&pool.threads) {
            if flag.load(SeqCst) && flag.swap(false, SeqCst) {
                WAKES.fetch_add(1, Relaxed);
                t.unpark();
                return;
            }
        }
    }

    /// Joins the published job, if there is one that wants a thread.
    fn enter(&self) {
        self.active.fetch_add(1, SeqCst);
        // Leaves `active` on every path, a panic included: a caller waits
        // for it to reach zero before its job's memory goes away.
        struct Leave<'a>(&'a AtomicUsize);
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Release);
            }
        }
        let _leave = Leave(&self.active);
        let p = self.slot.load(SeqCst);
        if !p.is_null() {
            // SAFETY: counted in `active` before reading `slot`, so the job
            // lives until the decrement below (see the module essay).
            let job = unsafe { &*p };
            if job
                .tickets
                .fetch_update(AcqRel, Acquire, |t| t.checked_sub(1))
                .is_ok()
            {
                if job.wants_more() {
                    self.wake_one();
                }
                // SAFETY: as `run`'s, which holds until `active` is zero.
                let filled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe {
                    job.fill(true)
                }));
                match filled {
                    Ok(filled) => {
                        WORKER_ROWS.fetch_add(filled, Relaxed);
                        WORKER_JOBS.fetch_add(1, Relaxed);
                    }
                    Err(_) => job.panicked.store(true, SeqCst),
                }
            }
        }
    }
}

fn worker(sh: &'static Shared, me: usize) {
    // 0, the epoch before any publication: a job published while this
    // thread was starting is still joined.
    let mut seen = 0;
    loop {
        // Spin while jobs keep coming: `spun` counts the time this thread
        // ran polling (a gap longer than [`DESCHEDULED`] between two looks
        // at the clock is time it was descheduled, not spinning), so a busy
        // machine does not send it to sleep between two close batches.
        let mut spun = Duration::ZERO;
        let mut last = Instant::now();
        let mut polls = 0u32;
        loop {
            let e = sh.epoch.load(Acquire);
            if e != seen {
                seen = e;
                sh.enter();
                spun = Duration::ZERO;
                last = Instant::now();
                continue;
            }
            polls = polls.wrapping_add(1);
            if polls % 64 == 0 {
                let now = Instant::now();
                spun += (now - last).min(DESCHEDULED);
                last = now;
                if spun >= sh.spin {
                    break;
                }
            }
            std::hint::spin_loop();
        }
        // Park until the next publication (`run` stores `epoch`, then reads
        // `parked`; this stores `parked`, then reads `epoch`: one of the two
        // sees the other). A spurious wake just spins again.
        sh.parked[me].store(true, SeqCst);
        if sh.epoch.load(SeqCst) == seen {
            PARKS.fetch_add(1, Relaxed);
            std::thread::park();
        }
        sh.parked[me].store(false, SeqCst);
    }
}

/// Fills `work` (`(address of a constrain::Matcher, row)` pairs) into
/// `rows`, on the calling thread and as many pool workers as the rows are
/// worth. Call with the GIL released.
///
/// # Safety
/// Every matcher address is a live `constrain::Matcher` that nothing mutates
/// until this returns, every row is in range of an export held until this
/// returns, and no row is named twice.
pub unsafe fn run(work: &[(usize, usize)], rows: RowPtr) {
    let helpers = (work.len() / MIN_ROWS).saturating_sub(1);
    let job = Job::new(work, rows, helpers);
    let published = if helpers > 0 {
        pool()
            .filter(|p| p.pid == std::process::id())
            .map(|p| p.shared)
            .filter(|sh| {
                let ptr = &job as *const Job<'_> as *mut Job<'static>;
                sh.slot
                    .compare_exchange(std::ptr::null_mut(), ptr, SeqCst, Relaxed)
                    .is_ok()
            })
    } else {
        None
    };
    if let Some(sh) = published {
        PUBLISHED.fetch_add(1, Relaxed);
        sh.epoch.fetch_add(1, SeqCst);
        if sh.parked.iter().any(|p| p.load(SeqCst)) {
            sh.wake_one();
        }
    }
    if published.is_some() && workers_only() {
        // Test hook: leave the rows to the workers (for at most 5 s), so a
        // test can check the rows they fill.
        let start = Instant::now();
        while job.unclaimed() > 0 && start.elapsed() < Duration::from_secs(5) {
            std::thread::yield_now();
        }
    }
    // Unpublishes and waits for the workers on every path, a panic in the
    // caller's own fill included: the job lives on this stack.
    struct Unpublish(Option<&'static Shared>);
    impl Drop for Unpublish {
        fn drop(&mut self) {
            let Some(sh) = self.0 else { return };
            sh.slot.store(std::ptr::null_mut(), SeqCst);
            let mut spins = 0u32;
            while sh.active.load(SeqCst) != 0 {
                spins += 1;
                if spins < WAIT_SPINS {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }
    }
    let unpublish = Unpublish(published);
    let _ = job.fill(false);
    drop(unpublish);
    if job.panicked.load(SeqCst) {
        // Rows a worker claimed may be unfilled: never hand them out as a
        // mask (pyo3 raises this as an exception).
        panic!("a bitmask fill worker panicked; the batch is not filled");
    }
}

/// The matchers are read from several threads at once.
const _: fn() = || {
    fn sync<T: Sync>() {}
    sync::<constrain::Matcher>();
};
