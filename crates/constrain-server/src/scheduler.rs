//! # Sequence slots, the queue, and cancellation
//!
//! The server runs at most `parallel` sequences at once. Each running
//! sequence holds a [`Slot`]: a permit of the slot semaphore and a model
//! instance of its own (its own KV cache and position), taken from a pool
//! that the [`ModelFactory`] fills on demand and that a finished sequence
//! refills. A request that finds every slot busy waits in a bounded queue
//! (admission is continuous: a slot freed by any sequence goes to the next
//! waiter at once); past `max_queue` waiters it is refused with 503 and
//! `Retry-After`, without touching the running sequences.
//!
//! Sequences decode on tokio's blocking pool, each through the unchanged
//! `constrain_model::generate` loop (budget safety, jump-forward and EOS
//! rules included) over an [`Interruptible`] model: a wrapper whose
//! `forward` fails with [`ModelError::Interrupted`] once the request's
//! cancel flag is set. The flag is set when the client goes away (the
//! handler's future or the SSE stream is dropped, see [`CancelOnDrop`]), so
//! the sequence stops before its next forward pass and its slot is free;
//! within a pass fed in chunks (a long prompt, a jump-forward stretch in
//! the shared decode loop), before its next chunk ([`current_cancel`]).
//!
//! The "model instance" of a slot is whatever the factory makes: for the
//! Qwen model a [`crate::batch::BatchedSeq`], a sequence handle over one
//! shared copy of the weights whose forward passes the shared decode loop
//! batches with the other slots' (one matmul per step for all of them);
//! for the fake model of the tests, a model of its own.

use crate::error::ApiError;
use constrain::TokenId;
use constrain_model::{LanguageModel, ModelError, Wanted};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A model instance per sequence.
pub type SeqModel = Box<dyn LanguageModel + Send>;

/// Makes a fresh model instance (own KV cache) for a new slot.
pub type ModelFactory = Arc<dyn Fn() -> Result<SeqModel, ModelError> + Send + Sync>;

/// The slots and the queue.
pub struct Scheduler {
    permits: Arc<Semaphore>,
    parallel: usize,
    max_queue: usize,
    waiting: AtomicUsize,
    pool: Mutex<Vec<SeqModel>>,
    factory: ModelFactory,
}

impl Scheduler {
    /// `parallel` slots, `max_queue` waiters at most; `first` is a model
    /// already made (kept in the pool).
    pub fn new(
        parallel: usize,
        max_queue: usize,
        factory: ModelFactory,
        first: Option<SeqModel>,
    ) -> Self {
        Scheduler {
            permits: Arc::new(Semaphore::new(parallel.max(1))),
            parallel: parallel.max(1),
            max_queue,
            waiting: AtomicUsize::new(0),
            pool: Mutex::new(first.into_iter().collect()),
            factory,
        }
    }

    /// Sequences running now.
    pub fn active(&self) -> usize {
        self.parallel - self.permits.available_permits()
    }

    /// Requests waiting for a slot.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    /// The slot count.
    pub fn parallel(&self) -> usize {
        self.parallel
    }

    /// Waits for a free slot (503 when the queue is full).
    pub async fn acquire(self: &Arc<Self>) -> Result<Slot, ApiError> {
        let permit = match self.permits.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                if self.waiting.fetch_add(1, Ordering::SeqCst) >= self.max_queue {
                    self.waiting.fetch_sub(1, Ordering::SeqCst);
                    return Err(ApiError::overloaded(self.max_queue, 1));
                }
                let _w = Waiting(&self.waiting);
                self.permits
                    .clone()
                    .acquire_owned()
                    .await
                    .map_err(|_| ApiError::internal("the scheduler is shut down"))?
            }
        };
        let pooled = self.pool.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let model = match pooled {
            Some(m) => m,
            None => {
                let f = self.factory.clone();
                tokio::task::spawn_blocking(move || f())
                    .await
                    .map_err(|e| {
                        ApiError::internal(format!("loading a model instance failed: {e}"))
                    })?
                    .map_err(|e| {
                        ApiError::internal(format!("loading a model instance failed: {e}"))
                    })?
            }
        };
        Ok(Slot {
            model: Some(model),
            sched: self.clone(),
            _permit: permit,
        })
    }
}

struct Waiting<'a>(&'a AtomicUsize);
impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A running sequence's slot: its model; dropping it frees the slot and
/// returns the model to the pool.
pub struct Slot {
    model: Option<SeqModel>,
    sched: Arc<Scheduler>,
    _permit: OwnedSemaphorePermit,
}

impl Slot {
    /// The slot's model.
    pub fn model(&mut self) -> &mut SeqModel {
        self.model
            .as_mut()
            .expect("a slot holds its model until dropped")
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(mut m) = self.model.take() {
            m.reset();
            self.sched
                .pool
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(m);
        }
    }
}

/// Sets a cancel flag when dropped: held by a request's handler future and
/// by its SSE stream, which the HTTP server drops when the client goes away.
pub struct CancelOnDrop(pub Arc<AtomicBool>);
impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

thread_local! {
    /// The cancel flag of the request whose forward pass this thread is in
    /// (set by [`Interruptible::forward`] around its inner call).
    static CANCEL: std::cell::RefCell<Option<Arc<AtomicBool>>> =
        const { std::cell::RefCell::new(None) };
}

/// The cancel flag of the request whose forward pass the calling thread
/// is running, if any. A model that works through a call in several steps
/// (the shared decode loop feeds a prompt in chunks, see
/// [`crate::batch`]) reads it to stop between steps: the model behind a
/// slot is a `dyn LanguageModel`, whose trait carries no cancel flag, and
/// the forward pass runs on the thread of its request.
pub fn current_cancel() -> Option<Arc<AtomicBool>> {
    CANCEL.with(|c| c.borrow().clone())
}

/// Sets [`current_cancel`] for its lifetime; restores the one before.
struct CancelScope(Option<Arc<AtomicBool>>);

impl CancelScope {
    fn enter(flag: Arc<AtomicBool>) -> Self {
        CancelScope(CANCEL.with(|c| c.borrow_mut().replace(flag)))
    }
}

impl Drop for CancelScope {
    fn drop(&mut self) {
        let before = self.0.take();
        CANCEL.with(|c| *c.borrow_mut() = before);
    }
}

/// A model whose forward pass fails with [`ModelError::Interrupted`] once
/// `cancel` (client gone) or `stop` (a stop string matched) is set, and
/// that keeps a copy of the last logits in `last` when asked (logprobs: the
/// model's own distribution, before any mask or sampling stage). During
/// the inner forward pass `cancel` is the thread's [`current_cancel`], so
/// that a pass fed in chunks stops between them.
pub struct Interruptible<'a, M: LanguageModel + ?Sized> {
    /// The wrapped model.
    pub inner: &'a mut M,
    /// Set when the client goes away.
    pub cancel: &'a Arc<AtomicBool>,
    /// Set when a stop string matched.
    pub stop: &'a AtomicBool,
    /// Receives a copy of the logits of each forward pass's last position;
    /// `None` keeps none.
    pub last: Option<&'a std::cell::RefCell<Vec<f32>>>,
}

impl<M: LanguageModel + ?Sized> Interruptible<'_, M> {
    /// The inner model's pass, unless the client went away or a stop
    /// string matched; with `wanted` (and no copy of the logits kept), the
    /// inner model may compute only the masked logits.
    fn pass(
        &mut self,
        tokens: &[TokenId],
        pos: usize,
        wanted: Option<Wanted<'_>>,
    ) -> Result<Vec<f32>, ModelError> {
        if self.cancel.load(Ordering::SeqCst) {
            return Err(ModelError::Interrupted("the client went away".into()));
        }
        if self.stop.load(Ordering::SeqCst) {
            return Err(ModelError::Interrupted("a stop string matched".into()));
        }
        let logits = {
            let _scope = CancelScope::enter(self.cancel.clone());
            match wanted {
                Some(w) if self.last.is_none() => self.inner.forward_masked(tokens, pos, w)?,
                _ => self.inner.forward(tokens, pos)?,
            }
        };
        if let Some(l) = self.last {
            let mut l = l.borrow_mut();
            l.clear();
            l.extend_from_slice(&logits);
        }
        Ok(logits)
    }
}

impl<M: LanguageModel + ?Sized> LanguageModel for Interruptible<'_, M> {
    fn forward(&mut self, tokens: &[TokenId], pos: usize) -> Result<Vec<f32>, ModelError> {
        self.pass(tokens, pos, None)
    }
    fn forward_masked(
        &mut self,
        tokens: &[TokenId],
        pos: usize,
        wanted: Wanted<'_>,
    ) -> Result<Vec<f32>, ModelError> {
        self.pass(tokens, pos, Some(wanted))
    }
    fn reset(&mut self) {
        self.inner.reset()
    }
    fn logits_width(&self) -> usize {
        self.inner.logits_width()
    }
    fn context_length(&self) -> usize {
        self.inner.context_length()
    }
}
