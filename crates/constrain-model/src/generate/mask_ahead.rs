//! # The next mask, computed while the model's pass runs
//!
//! A step of the plain loop is: logits → mask → sample → advance the matcher
//! → forced continuation → the model's pass over the new tokens. The mask of
//! the *next* step depends only on the matcher's state after the token just
//! taken (and any forced tokens after it), which is known before the pass
//! starts; so it need not wait for the pass. [`MaskAhead`] computes it on a
//! worker thread while the pass runs, and the next step only waits for what
//! is left of it: `max(0, mask − pass)` instead of `mask`.
//!
//! ## Why the output cannot change
//!
//! The worker does not hand a mask over. It asks the shared index for the
//! mask of the matcher's state ([`TokenIndex::allowed`]), which computes it
//! on a first visit (lazy and pushdown engines) and caches it in the index;
//! the step then reads the mask through its matcher exactly as without the
//! worker ([`Matcher::allowed`]), a lookup where the worker got there first.
//! Between the job's start and its collection the loop's thread touches
//! neither the matcher nor the index (it is inside the model's pass), and the
//! step collects the job before its first index call: the index sees the same
//! calls in the same order with and without the worker, so even a lazy
//! index's state numbering is the same. Budget checks (`max_tokens`) read the
//! remaining budget at the step, as before; the worker knows nothing of it.
//!
//! ## Threads
//!
//! One worker per generation, started on the first pass that has a mask to
//! compute and joined when the generation ends. The model's pass runs its
//! matmuls on candle's pool (every core); the worker is one more thread, and
//! its job is usually a lookup (an eager index, a state seen before) and
//! occasionally a first visit of a lazy state (a walk of the token trie,
//! 0.1–50 ms on the Qwen vocabulary), so it takes at most that CPU time from the pass.
//!
//! ## What is measured
//!
//! Every masked step records whether it waited for its mask and how long
//! ([`MaskStats`]): with the worker, it waited when the job had not finished
//! by the time the logits arrived, and the wait is the time from then until
//! the mask is in hand; without it (or where a loop does not use it), every
//! masked step waits, for the mask's whole computation.

use super::types::MaskStats;
use constrain::index::{StateId, TokenIndex};
use constrain::matcher::Matcher;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A mask job: the index and the state whose mask to compute.
type Job = (Arc<TokenIndex>, StateId);

/// The worker that computes the next step's mask during the model's pass
/// (see the module docs); off, every mask is computed at its step.
pub(super) struct MaskAhead {
    enabled: bool,
    worker: Option<Worker>,
    /// A job sent and not yet collected.
    pending: bool,
    /// The mask of the current state was waited for inside the pass
    /// ([`MaskAhead::wait_in_pass`]): the step's wait is already counted.
    held: bool,
}

struct Worker {
    jobs: Option<Sender<Job>>,
    done: Receiver<()>,
    thread: Option<JoinHandle<()>>,
}

impl Worker {
    fn spawn() -> Option<Worker> {
        let (jobs, rx) = mpsc::channel::<Job>();
        let (tx, done) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("constrain-mask".into())
            .spawn(move || {
                for (index, s) in rx {
                    let _ = index.allowed(s);
                    if tx.send(()).is_err() {
                        break;
                    }
                }
            })
            .ok()?;
        Some(Worker {
            jobs: Some(jobs),
            done,
            thread: Some(thread),
        })
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Closing the channel ends the worker's loop after its job.
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl MaskAhead {
    /// A worker when `enabled` (started on first use), none otherwise.
    pub(super) fn new(enabled: bool) -> Self {
        MaskAhead {
            enabled,
            worker: None,
            pending: false,
            held: false,
        }
    }

    /// Just before the model's pass: starts computing the mask of `m`'s
    /// current state (nothing when off, or when `m` is terminated and allows
    /// nothing). A worker that cannot be started leaves the loop sequential.
    pub(super) fn start(&mut self, m: &Matcher) {
        if !self.enabled || m.is_terminated() {
            return;
        }
        if self.worker.is_none() {
            self.worker = Worker::spawn();
            if self.worker.is_none() {
                self.enabled = false;
                return;
            }
        }
        let sent = self
            .worker
            .as_ref()
            .and_then(|w| w.jobs.as_ref())
            .is_some_and(|j| j.send((m.index().clone(), m.state())).is_ok());
        self.pending = sent;
    }

    /// At the step, before any index call: collects the job started before
    /// the pass, waiting for it if need be. `Some(ready)`: there was one,
    /// and whether it had finished when the step began; `None`: there was
    /// none (the mask is computed at the step).
    fn collect(&mut self) -> Option<bool> {
        if !std::mem::take(&mut self.pending) {
            return None;
        }
        let w = self.worker.as_ref()?;
        if w.done.try_recv().is_ok() {
            return Some(true);
        }
        // A worker that died computed nothing: the step computes the mask.
        let _ = w.done.recv();
        Some(false)
    }

    /// The step's mask wait: collects the job, then reads the mask through
    /// `m` (a lookup when the job made it, the whole computation otherwise)
    /// and records the wait in `stats`.
    pub(super) fn wait(&mut self, m: &Matcher, stats: &mut MaskStats) {
        if std::mem::take(&mut self.held) {
            return;
        }
        let t = Instant::now();
        let ready = self.collect().unwrap_or(false);
        let _ = m.allowed();
        stats.record(!ready, t.elapsed());
    }

    /// [`MaskAhead::wait`] from inside the model's pass, when the model
    /// asks for the mask before its output head: the wait is counted once,
    /// here, and the step's own wait then reads the mask as it is.
    pub(super) fn wait_in_pass(&mut self, m: &Matcher, stats: &mut MaskStats) {
        self.held = false;
        self.wait(m, stats);
        self.held = true;
    }
}

impl MaskStats {
    /// Adds one masked step: whether it waited, and for how long.
    pub(super) fn record(&mut self, waited: bool, wait: Duration) {
        self.steps += 1;
        self.waited += usize::from(waited);
        self.wait_time += wait;
        self.max_wait = self.max_wait.max(wait);
    }
}
