//! `Matcher`: XGrammar's `GrammarMatcher` over one `constrain::Matcher`, and
//! the batch fill.

use crate::buffer::{RowPtr, Rows};
use crate::compiler::Compiled;
use constrain::{bitmask_words, MatcherError, TokenId};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Fewest rows per thread of a batch fill (below that, handing rows to
/// another thread costs more than copying them).
const PARALLEL_MIN_ROWS: usize = 8;

/// Rows a thread of a batch fill claims at a time.
const CLAIM: usize = 4;

/// One batch fill shared by the calling thread and its helpers. The caller
/// never waits for a helper that has not started: rows are claimed in
/// groups of [`CLAIM`] from `next`, the caller claims too, and it waits only
/// until `done` counts every row, i.e. for groups already claimed and being
/// filled. A helper that starts after that finds nothing to claim and
/// touches nothing but the counters (this `Arc`), so the matchers and the
/// buffer (raw addresses here) are never read or written once the caller has
/// returned. A worker pool woken every step starts late (tens of µs on a
/// busy machine), longer than a batch of 64 Qwen rows takes one thread.
///
/// Helpers are woken one by one: the caller spawns the first, each helper
/// spawns the next while enough rows are unclaimed, so waking the pool
/// (a system call per sleeping thread) is not on the caller's path.
struct Shared {
    next: AtomicUsize,
    done: AtomicUsize,
    /// Helpers that may still be spawned.
    helpers: AtomicUsize,
    /// (address of the matcher, row) per row to fill.
    work: Vec<(usize, usize)>,
    rows: RowPtr,
}

impl Shared {
    /// Spawns a helper onto the rayon pool when one may still be spawned
    /// and enough rows are unclaimed to be worth it.
    fn spawn_helper(self: &Arc<Self>) {
        let unclaimed = self
            .work
            .len()
            .saturating_sub(self.next.load(Ordering::Acquire));
        if unclaimed < 2 * PARALLEL_MIN_ROWS {
            return;
        }
        if self
            .helpers
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |h| h.checked_sub(1))
            .is_ok()
        {
            let s = self.clone();
            // SAFETY: as for `fill`; a helper that starts late claims nothing.
            rayon::spawn(move || {
                s.spawn_helper();
                unsafe { s.fill() }
            });
        }
    }

    /// Claims and fills groups of rows until none is left.
    ///
    /// # Safety
    /// While any row is unclaimed, every matcher address is live and the rows
    /// are in range, distinct and writable (the caller waits for `done`).
    unsafe fn fill(&self) {
        let n = self.work.len();
        loop {
            let start = self.next.fetch_add(CLAIM, Ordering::AcqRel);
            if start >= n {
                return;
            }
            let end = (start + CLAIM).min(n);
            for &(m, i) in &self.work[start..end] {
                let m = &*(m as *const constrain::Matcher);
                // The row has exactly the words the core asks for (checked
                // by `Rows::of`), so the fill cannot fail.
                let _ = m.fill_bitmask(self.rows.row(i));
            }
            self.done.fetch_add(end - start, Ordering::Release);
        }
    }

    /// Waits until every row is filled (only for claimed groups in flight).
    fn wait(&self) {
        let mut spins = 0u32;
        while self.done.load(Ordering::Acquire) < self.work.len() {
            spins += 1;
            if spins < 1 << 10 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// The per-request cursor over a compiled constraint: fills the next token
/// bitmask, accepts tokens, rolls back. Cheap to create; not shared between
/// requests (concurrent use of one matcher raises, it never corrupts).
#[pyclass(module = "constrain")]
pub struct Matcher {
    inner: constrain::Matcher,
    terminate_without_stop_token: bool,
    max_rollback_tokens: i64,
    words: usize,
    /// The bitmask filled last (engines fill one bitmask every step).
    last: Option<Rows>,
}

fn token(id: i64, width: usize) -> PyResult<TokenId> {
    match u32::try_from(id) {
        Ok(t) if (t as usize) < width => Ok(TokenId(t)),
        _ => Err(PyValueError::new_err(format!(
            "token id {id} is out of range: the vocabulary has {width} ids"
        ))),
    }
}

impl Matcher {
    fn tokens(&self, ids: Vec<i64>) -> PyResult<Vec<TokenId>> {
        let width = self.inner.index().vocab().logits_width();
        ids.into_iter().map(|t| token(t, width)).collect()
    }

    fn fill_row(&self, row: &mut [u32]) {
        // The row has exactly `words` words (checked by `Rows::of`), the
        // size the core asks for, so the fill cannot fail.
        let _ = self.inner.fill_bitmask(row);
    }
}

#[pymethods]
impl Matcher {
    /// `override_stop_tokens`: the ids that end the output instead of the
    /// tokenizer's stop tokens. `terminate_without_stop_token`:
    /// `is_terminated()` is also true once the text is complete and nothing
    /// can follow it. `max_rollback_tokens`: how many tokens `rollback` may
    /// undo (0: none, as XGrammar; -1: unbounded).
    #[new]
    #[pyo3(signature = (compiled, override_stop_tokens=None, terminate_without_stop_token=false, max_rollback_tokens=0))]
    fn new(
        compiled: &Compiled,
        override_stop_tokens: Option<Vec<i64>>,
        terminate_without_stop_token: bool,
        max_rollback_tokens: i64,
    ) -> PyResult<Self> {
        let mut inner = compiled.inner.matcher();
        let width = inner.index().vocab().logits_width();
        if let Some(stop) = override_stop_tokens {
            if stop.is_empty() {
                return Err(PyValueError::new_err(
                    "override_stop_tokens is empty: give at least one id, or None",
                ));
            }
            let stop: Vec<TokenId> = stop
                .into_iter()
                .map(|t| token(t, width))
                .collect::<PyResult<_>>()?;
            inner = inner
                .with_stop_tokens(stop)
                .map_err(|e| PyValueError::new_err(e.to_string()))?;
        }
        if max_rollback_tokens < -1 {
            return Err(PyValueError::new_err(format!(
                "max_rollback_tokens must be -1 (unbounded) or at least 0, not {max_rollback_tokens}"
            )));
        }
        if max_rollback_tokens >= 0 {
            inner = inner.with_max_rollback(max_rollback_tokens as usize);
        }
        Ok(Matcher {
            inner,
            terminate_without_stop_token,
            max_rollback_tokens,
            words: bitmask_words(width),
            last: None,
        })
    }

    /// Writes the allowed next tokens into row `index` of `bitmask` (int32,
    /// shape `(batch, ceil(vocab_size / 32))` or `(ceil(vocab_size / 32),)`;
    /// token t is bit t % 32 of word t // 32, 1 = allowed). Releases the GIL.
    /// The matcher keeps a reference to the last bitmask it filled (and its
    /// buffer export, so numpy refuses to resize it meanwhile) to find the
    /// memory of the same bitmask faster at the next step.
    #[pyo3(signature = (bitmask, index=0))]
    fn fill_next_token_bitmask(
        &mut self,
        py: Python<'_>,
        bitmask: &Bound<'_, PyAny>,
        index: isize,
    ) -> PyResult<()> {
        let rows = match self.last.take() {
            Some(r) if r.is_of(bitmask) => r,
            _ => Rows::of(bitmask, self.words)?,
        };
        let i = rows.row_index(index);
        let ptr = rows.ptr();
        self.last = Some(rows);
        let i = i?;
        let this = &*self;
        // SAFETY: `i` is in range, `self.last` holds the buffer export until
        // after the fill, and this is the only slice of the row.
        py.detach(|| this.fill_row(unsafe { ptr.row(i) }));
        Ok(())
    }

    /// Takes token `token_id` if it is allowed: True when taken, False (and
    /// no change) otherwise. An id outside the vocabulary raises.
    fn accept_token(&mut self, token_id: i64) -> PyResult<bool> {
        let t = token(token_id, self.inner.index().vocab().logits_width())?;
        Ok(self.inner.accept_token(t))
    }

    /// Takes all of `token_ids` (True) or none of them (False).
    fn accept_tokens(&mut self, token_ids: Vec<i64>) -> PyResult<bool> {
        let ids = self.tokens(token_ids)?;
        Ok(self.inner.accept_tokens(&ids).is_ok())
    }

    /// How many leading `token_ids` would be accepted one after the other
    /// (nothing is taken): the valid part of a speculative draft.
    fn validate_tokens(&self, token_ids: Vec<i64>) -> PyResult<usize> {
        let ids = self.tokens(token_ids)?;
        Ok(self.inner.validate_tokens(&ids))
    }

    /// Undoes the last `num_tokens` tokens (a stop token included); at most
    /// `max_rollback_tokens`.
    #[pyo3(signature = (num_tokens=1))]
    fn rollback(&mut self, num_tokens: i64) -> PyResult<()> {
        let n = usize::try_from(num_tokens)
            .map_err(|_| PyValueError::new_err(format!("cannot roll back {num_tokens} tokens")))?;
        self.inner.rollback(n).map_err(|e| match e {
            MatcherError::Rollback {
                requested,
                available,
            } => PyValueError::new_err(format!(
                "cannot roll back {requested} tokens: only {available} can be undone \
                 (max_rollback_tokens={})",
                self.max_rollback_tokens
            )),
            e => PyValueError::new_err(e.to_string()),
        })
    }

    /// Whether a stop token was taken (or, with
    /// `terminate_without_stop_token`, the text is complete and nothing can
    /// follow it).
    fn is_terminated(&self) -> bool {
        self.inner.is_terminated() || self.terminate_without_stop_token && self.inner.is_finished()
    }

    /// Whether the text so far is complete (a stop token may follow).
    fn is_accepting(&self) -> bool {
        self.inner.is_accepting()
    }

    /// Back to the start.
    fn reset(&mut self) {
        self.inner.reset()
    }

    /// The text every continuation must start with ("" when there is a
    /// choice); a partial UTF-8 character at its end is left out.
    fn find_jump_forward_string(&self) -> String {
        let bytes = self.inner.forced_bytes();
        match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => {
                let valid = e.utf8_error().valid_up_to();
                let mut b = e.into_bytes();
                b.truncate(valid);
                String::from_utf8(b).unwrap_or_default()
            }
        }
    }

    /// The ids that end the output for this matcher (sorted).
    #[getter]
    fn stop_token_ids(&self) -> Vec<u32> {
        let vocab = self.inner.index().vocab();
        (0..vocab.logits_width() as u32)
            .map(TokenId)
            .filter(|&t| self.inner.is_stop_token(t))
            .map(|t| t.0)
            .collect()
    }

    /// Number of tokens taken since the start.
    #[getter]
    fn num_tokens(&self) -> usize {
        self.inner.num_tokens()
    }
}

/// Fills row `i` of `bitmask` from `matchers[i]` (or row `indices[i]`),
/// rows in parallel (the calling thread and rayon helpers, see [`Shared`]),
/// with the GIL released. The bitmask's buffer view is kept for the next
/// call with the same array, as a matcher keeps its own.
#[pyfunction]
#[pyo3(signature = (matchers, bitmask, indices=None))]
pub fn fill_next_token_bitmask_batch(
    py: Python<'_>,
    matchers: Vec<PyRef<'_, Matcher>>,
    bitmask: &Bound<'_, PyAny>,
    indices: Option<Vec<isize>>,
) -> PyResult<()> {
    let Some(first) = matchers.first() else {
        return Ok(());
    };
    let words = first.words;
    if let Some(m) = matchers.iter().find(|m| m.words != words) {
        return Err(PyValueError::new_err(format!(
            "matchers over vocabularies of different sizes ({} and {} bitmask words)",
            words, m.words
        )));
    }
    // The bitmask filled by the last batch call, reused when it comes again
    // (as it does every step of an engine), as a matcher does for its own.
    // The lock is held only with the GIL and never across the fill (a
    // thread waiting for it while holding the GIL would block the filler's
    // return).
    static LAST: Mutex<Option<Rows>> = Mutex::new(None);
    let cached = LAST.lock().unwrap_or_else(|e| e.into_inner()).take();
    let rows = match cached {
        Some(r) if r.is_of(bitmask) && r.cols == words => r,
        _ => Rows::of(bitmask, words)?,
    };
    let targets: Vec<usize> = match indices {
        Some(ix) => {
            if ix.len() != matchers.len() {
                return Err(PyTypeError::new_err(format!(
                    "{} indices for {} matchers",
                    ix.len(),
                    matchers.len()
                )));
            }
            ix.into_iter()
                .map(|i| rows.row_index(i))
                .collect::<PyResult<_>>()?
        }
        None => (0..matchers.len())
            .map(|i| rows.row_index(i as isize))
            .collect::<PyResult<_>>()?,
    };
    let mut seen = targets.clone();
    seen.sort_unstable();
    if seen.windows(2).any(|w| w[0] == w[1]) {
        return Err(PyValueError::new_err(
            "two matchers would fill the same bitmask row",
        ));
    }
    let work: Vec<(&Matcher, usize)> = matchers.iter().map(|m| &**m).zip(targets).collect();
    let shared = Arc::new(Shared {
        next: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
        work: work
            .iter()
            .map(|&(m, i)| (&m.inner as *const constrain::Matcher as usize, i))
            .collect(),
        rows: rows.ptr(),
        helpers: AtomicUsize::new(
            rayon::current_num_threads()
                .min(work.len() / PARALLEL_MIN_ROWS)
                .saturating_sub(1),
        ),
    });
    // SAFETY (of `Shared::fill`): every target row is in range and distinct
    // (checked above); `rows` holds the buffer export and `matchers` the
    // borrows of the matchers until after `wait` (see `Shared`).
    py.detach(|| {
        shared.spawn_helper();
        unsafe { shared.fill() };
        shared.wait();
    });
    *LAST.lock().unwrap_or_else(|e| e.into_inner()) = Some(rows);
    Ok(())
}
