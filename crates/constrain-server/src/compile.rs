//! # Compiles: a bounded pool, one flight per source, a cache of what served
//!
//! A request's constraint is compiled here, after every cheap check of the
//! request has passed (see `server.rs`):
//!
//! * **A bounded pool.** At most [`CompileLimits::threads`] compiles run at
//!   once (`--compile-threads`), each on a blocking thread of its own; the
//!   others wait for a turn. `/health` shows `compiling` (running) and
//!   `compiles_waiting`.
//! * **One flight per source.** A request for a source that is already
//!   being compiled waits for that compile (single-flight), keyed by a
//!   128-bit keyed hash of the source and its options.
//! * **A time budget** ([`CompileLimits::timeout`], `--compile-timeout-ms`),
//!   counted from the moment the compile starts running: past it the
//!   requests waiting for it hear [`CompileFailure::Timeout`] (a 400 that
//!   names the limit). The compile runs under a
//!   [`constrain::cancel::CancelToken`] with that deadline
//!   ([`Compiler::compile_cancellable`]): it stops itself at the next
//!   cancellation point of the core (between phases, at every
//!   determinized state, inside the eager index build) and frees its turn.
//! * **Abandoned with its clients.** When every request waiting for a
//!   compile has gone away, nobody waits for it any more: a compile still
//!   waiting for its turn never runs, a running one's token is cancelled
//!   and it stops at its next cancellation point.
//! * **A memory budget** ([`CompileLimits::memory_bytes`],
//!   `--compile-memory-mb`) caps each of the compile's large structures:
//!   the NFA, the determinizer's working memory, the DFA table and the
//!   token masks (the core compiler's limits); a compile past one is a 400
//!   that names it.
//! * **A cache of what served.** Nothing a compile builds is kept by the
//!   compile itself: a request that was answered with its artefact hands
//!   it to [`CompilePool::keep`], and only those are cached, least
//!   recently used first out, bounded in bytes (`--cache-mb`; the index
//!   memory as built, [`constrain::index::IndexStats`]`::memory_bytes`).
//!   An artefact bigger than the whole budget is not kept.
//! * **Scratch memory back to the system.** After a compile that ran long
//!   (a big one) or failed, its thread asks the allocator to return freed pages
//!   ([`crate::ServerConfig::release_memory`]: glibc's `malloc_trim` by
//!   default, mimalloc's `mi_collect` in `constrain serve`), so the heap of
//!   a refused schema does not stay in the process's resident set.

use constrain::cancel::CancelToken;
use constrain::vocab::Vocabulary;
use constrain::{CompileError, Compiled, Compiler, CompilerConfig, Source};
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{watch, Notify, Semaphore};

/// Default of [`CompileLimits::timeout`] (`--compile-timeout-ms`).
pub const DEFAULT_COMPILE_TIMEOUT: Duration = Duration::from_secs(10);
/// Default of [`CompileLimits::memory_bytes`] (`--compile-memory-mb`):
/// 1 GiB, the core compiler's own largest default limit.
pub const DEFAULT_COMPILE_MEMORY: usize = 1 << 30;
/// Default of [`CompileLimits::cache_bytes`] (`--cache-mb`).
pub const DEFAULT_CACHE_BYTES: usize = 512 << 20;
/// Default of [`CompileLimits::threads`] (`--compile-threads`).
pub const DEFAULT_COMPILE_THREADS: usize = 2;

/// A compile that ran at least this long (or failed) releases freed
/// memory to the system when it ends ([`release_memory`]).
const BIG_COMPILE: Duration = Duration::from_millis(200);

/// The compile limits (CLI flags).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct CompileLimits {
    /// Compiles running at once (`--compile-threads`, default 2).
    pub threads: usize,
    /// Time one compile may run (`--compile-timeout-ms`, default 10 s).
    pub timeout: Duration,
    /// Each large structure of one compile (NFA, determinizer, DFA table,
    /// masks) at most this many bytes (`--compile-memory-mb`, default 1 GiB).
    pub memory_bytes: usize,
    /// Bytes of compiled artefacts kept for later requests (`--cache-mb`,
    /// default 512 MiB; 0: nothing kept).
    pub cache_bytes: usize,
}

constrain::config_setters!(CompileLimits {
    threads: usize,
    timeout: Duration,
    memory_bytes: usize,
    cache_bytes: usize,
});

impl Default for CompileLimits {
    fn default() -> Self {
        CompileLimits {
            threads: DEFAULT_COMPILE_THREADS,
            timeout: DEFAULT_COMPILE_TIMEOUT,
            memory_bytes: DEFAULT_COMPILE_MEMORY,
            cache_bytes: DEFAULT_CACHE_BYTES,
        }
    }
}

impl CompileLimits {
    /// `base` with its memory limits capped at [`Self::memory_bytes`] and
    /// no cache of its own (the pool keeps the artefacts).
    pub fn compiler_config(&self, base: &CompilerConfig) -> CompilerConfig {
        let m = self.memory_bytes;
        let mut c = base.clone();
        c.dfa.nfa_size_limit = c.dfa.nfa_size_limit.min(m);
        c.dfa.determinize_size_limit = c.dfa.determinize_size_limit.min(m);
        c.dfa.dfa_size_limit = c.dfa.dfa_size_limit.min(m);
        c.index.max_mask_memory = c.index.max_mask_memory.min(m);
        c.cache_entries = 0;
        c
    }
}

/// Why a compile gave no artefact.
#[derive(Clone, Debug)]
pub enum CompileFailure {
    /// The source does not compile (or passes a size limit): the core
    /// compiler's message.
    Error(Arc<String>),
    /// A memory limit ([`CompileLimits::memory_bytes`]) was passed.
    Memory(Arc<String>),
    /// Past the time budget.
    Timeout(Duration),
    /// The pool failed (a compile thread panicked).
    Internal(String),
}

/// A compile's key: a 128-bit keyed hash of the source (kind, options,
/// text).
pub type Key = u128;

type Outcome = Result<Arc<Compiled>, CompileFailure>;

struct Flight {
    result: watch::Sender<Option<Outcome>>,
    /// Requests waiting for it.
    waiters: AtomicUsize,
    /// Set (and `gone` notified) when the last waiter has left.
    abandoned: AtomicBool,
    gone: Notify,
}

/// The pool, its flights and its cache.
pub struct CompilePool {
    vocab: Arc<Vocabulary>,
    config: CompilerConfig,
    limits: CompileLimits,
    turns: Arc<Semaphore>,
    running: Arc<AtomicUsize>,
    waiting: AtomicUsize,
    started: AtomicUsize,
    flights: Mutex<HashMap<Key, Arc<Flight>>>,
    cache: Mutex<Cache>,
    hash: (RandomState, RandomState),
    release: fn(),
}

impl CompilePool {
    /// A pool over `vocab`: the core compiler's settings `config` under
    /// `limits`; `release` returns freed memory to the system after a big
    /// compile (on its thread; see [`release_memory`]).
    pub fn new(
        vocab: Arc<Vocabulary>,
        config: &CompilerConfig,
        limits: CompileLimits,
        release: fn(),
    ) -> Self {
        CompilePool {
            vocab,
            config: limits.compiler_config(config),
            turns: Arc::new(Semaphore::new(limits.threads.max(1))),
            limits,
            running: Arc::new(AtomicUsize::new(0)),
            waiting: AtomicUsize::new(0),
            started: AtomicUsize::new(0),
            flights: Mutex::new(HashMap::new()),
            cache: Mutex::new(Cache::default()),
            hash: (RandomState::new(), RandomState::new()),
            release,
        }
    }

    /// The limits.
    pub fn limits(&self) -> &CompileLimits {
        &self.limits
    }

    /// Compiles running now.
    pub fn running(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }

    /// Compiles waiting for a turn.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    /// Compiles started so far (cache hits and shared flights start none).
    pub fn started(&self) -> usize {
        self.started.load(Ordering::SeqCst)
    }

    /// Artefacts in the cache, and their bytes.
    pub fn cached(&self) -> (usize, usize) {
        let c = lock(&self.cache);
        (c.map.len(), c.bytes)
    }

    fn key(&self, source: &Source) -> Key {
        let text = format!("{source:?}");
        let mut a = self.hash.0.build_hasher();
        let mut b = self.hash.1.build_hasher();
        a.write(text.as_bytes());
        b.write(text.as_bytes());
        (u128::from(a.finish()) << 64) | u128::from(b.finish())
    }

    /// The artefact of `source`: from the cache, from a compile already
    /// under way, or from a new compile in the pool. The returned key is
    /// for [`Self::keep`]. Dropping the future (the client went away)
    /// leaves the compile; when no one waits for it any more it is
    /// abandoned.
    pub async fn compile(self: &Arc<Self>, source: Source) -> (Key, Outcome) {
        let key = self.key(&source);
        if let Some(hit) = lock(&self.cache).get(key) {
            return (key, Ok(hit));
        }
        let (flight, lead) = {
            let mut flights = lock(&self.flights);
            match flights.get(&key) {
                Some(f) if !f.abandoned.load(Ordering::SeqCst) => {
                    f.waiters.fetch_add(1, Ordering::SeqCst);
                    (f.clone(), false)
                }
                _ => {
                    let f = Arc::new(Flight {
                        result: watch::channel(None).0,
                        waiters: AtomicUsize::new(1),
                        abandoned: AtomicBool::new(false),
                        gone: Notify::new(),
                    });
                    flights.insert(key, f.clone());
                    (f, true)
                }
            }
        };
        let mut rx = flight.result.subscribe();
        let _waiter = Waiter(flight.clone());
        if lead {
            let pool = self.clone();
            let f = flight.clone();
            tokio::spawn(async move { pool.fly(key, f, source).await });
        }
        let outcome = match rx.wait_for(Option::is_some).await {
            Ok(v) => v.clone().unwrap_or_else(|| {
                Err(CompileFailure::Internal("the compile gave nothing".into()))
            }),
            Err(_) => Err(CompileFailure::Internal("the compile was dropped".into())),
        };
        (key, outcome)
    }

    /// Runs one flight: waits for a turn, compiles on a blocking thread
    /// (the turn held until the compile returns), answers its waiters.
    async fn fly(self: Arc<Self>, key: Key, flight: Arc<Flight>, source: Source) {
        let outcome = self.run(&flight, source).await;
        {
            let mut flights = lock(&self.flights);
            if flights.get(&key).is_some_and(|f| Arc::ptr_eq(f, &flight)) {
                flights.remove(&key);
            }
        }
        if let Some(o) = outcome {
            flight.result.send_replace(Some(o));
        }
    }

    /// `None`: abandoned (no one to answer).
    async fn run(&self, flight: &Flight, source: Source) -> Option<Outcome> {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let turn = tokio::select! {
            t = self.turns.clone().acquire_owned() => t,
            _ = flight.gone.notified() => {
                self.waiting.fetch_sub(1, Ordering::SeqCst);
                return None;
            }
        };
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        let Ok(turn) = turn else {
            return Some(Err(CompileFailure::Internal(
                "the compile pool is shut down".into(),
            )));
        };
        if flight.abandoned.load(Ordering::SeqCst) {
            return None;
        }
        self.started.fetch_add(1, Ordering::SeqCst);
        let timeout = self.limits.timeout;
        let token = CancelToken::with_budget(timeout);
        let stop = token.clone();
        let config = self.config.clone();
        let vocab = self.vocab.clone();
        let running = self.running.clone();
        let memory = self.limits.memory_bytes;
        let release = self.release;
        running.fetch_add(1, Ordering::SeqCst);
        let job = tokio::task::spawn_blocking(move || {
            let t = Instant::now();
            let compiler = Compiler::new(vocab, config);
            let r = compiler.compile_cancellable(&source, &token);
            drop(compiler);
            drop(source);
            running.fetch_sub(1, Ordering::SeqCst);
            drop(turn);
            let r = r.map(Arc::new).map_err(|e| failure(e, memory, timeout));
            if r.is_err() || t.elapsed() >= BIG_COMPILE {
                // On the compile's own thread: a thread-caching allocator
                // (mimalloc) returns this thread's free pages. A failed
                // compile may have built much (an NFA up to its limit)
                // in little time.
                release();
            }
            r
        });
        // Past the budget or abandoned, the compile's token is fired too
        // (the deadline fires it anyway): it stops at its next
        // cancellation point and its thread gives back its turn.
        tokio::select! {
            r = job => Some(r.unwrap_or_else(|e| Err(CompileFailure::Internal(format!("the compile thread failed: {e}"))))),
            _ = tokio::time::sleep(timeout) => {
                stop.cancel();
                Some(Err(CompileFailure::Timeout(timeout)))
            }
            _ = flight.gone.notified() => {
                stop.cancel();
                None
            }
        }
    }

    /// Keeps `compiled` (which served a request) for later requests of the
    /// same source, within the cache's byte budget.
    pub fn keep(&self, key: Key, compiled: &Arc<Compiled>) {
        let bytes = compiled.index().stats().memory_bytes.max(1);
        lock(&self.cache).insert(key, compiled.clone(), bytes, self.limits.cache_bytes);
    }
}

/// The core compiler's error as a failure: a memory limit named as the
/// server's, a passed index deadline as the time budget.
fn failure(e: CompileError, memory: usize, timeout: Duration) -> CompileFailure {
    use constrain::dfa::DfaError;
    use constrain::index::IndexError;
    // A structure over its size limit is the memory budget's refusal,
    // whichever limit fired (the compiler's own for that structure, or the
    // budget where it is lower): said in the server's words, without the
    // library's knob.
    let over = |what: &str, limit: usize| {
        CompileFailure::Memory(Arc::new(if limit == memory {
            format!("the {what} would exceed it")
        } else {
            format!(
                "the {what} would exceed its own limit of {} MiB",
                limit.div_ceil(1 << 20)
            )
        }))
    };
    match &e {
        CompileError::Index(IndexError::Deadline) | CompileError::TimedOut { .. } => {
            CompileFailure::Timeout(timeout)
        }
        CompileError::Dfa(DfaError::TooBig { what, limit, .. })
        | CompileError::Index(IndexError::Dfa(DfaError::TooBig { what, limit, .. })) => {
            over(what, *limit)
        }
        CompileError::Index(IndexError::TooMuchMemory { limit }) => over("token masks", *limit),
        _ => CompileFailure::Error(Arc::new(e.to_string())),
    }
}

/// A request waiting for a flight; the last one to leave abandons it.
struct Waiter(Arc<Flight>);

impl Drop for Waiter {
    fn drop(&mut self) {
        if self.0.waiters.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.abandoned.store(true, Ordering::SeqCst);
            self.0.gone.notify_one();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every update is one insert or remove: a poisoned lock is consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A least-recently-used map bounded by bytes.
#[derive(Default)]
struct Cache {
    map: HashMap<Key, Entry>,
    clock: u64,
    bytes: usize,
}

struct Entry {
    compiled: Arc<Compiled>,
    bytes: usize,
    used: u64,
}

impl Cache {
    fn get(&mut self, key: Key) -> Option<Arc<Compiled>> {
        self.clock += 1;
        let e = self.map.get_mut(&key)?;
        e.used = self.clock;
        Some(e.compiled.clone())
    }

    fn insert(&mut self, key: Key, compiled: Arc<Compiled>, bytes: usize, budget: usize) {
        if bytes > budget || self.map.contains_key(&key) {
            return;
        }
        while self.bytes + bytes > budget {
            let Some((&old, _)) = self.map.iter().min_by_key(|(_, e)| e.used) else {
                break;
            };
            if let Some(e) = self.map.remove(&old) {
                self.bytes -= e.bytes;
            }
        }
        self.clock += 1;
        self.bytes += bytes;
        self.map.insert(
            key,
            Entry {
                compiled,
                bytes,
                used: self.clock,
            },
        );
    }
}

/// Returns freed heap memory to the system now: glibc's `malloc_trim` (the
/// system allocator, which the tests run on); nothing elsewhere. A binary
/// with another global allocator passes its own purge
/// ([`crate::ServerConfig::release_memory`]; `constrain serve`: mimalloc's
/// `mi_collect`).
pub fn release_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn malloc_trim(pad: usize) -> i32;
        }
        // SAFETY: malloc_trim only walks glibc's own heap under its lock;
        // it takes no pointer and may be called from any thread.
        unsafe {
            malloc_trim(0);
        }
    }
}
