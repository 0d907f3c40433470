//! `Matcher`: XGrammar's `GrammarMatcher` over one `constrain::Matcher`, and
//! the batch fill.

use crate::buffer::{with_rows, Held};
use crate::compiler::Compiled;
use crate::pool;
use constrain::{bitmask_words, MatcherError, TokenId};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use std::cell::Cell;

/// The per-request cursor over a compiled constraint: fills the next token
/// bitmask, accepts tokens, rolls back. Cheap to create; not shared between
/// requests (concurrent use of one matcher raises, it never corrupts).
#[pyclass(module = "constrain")]
pub struct Matcher {
    inner: constrain::Matcher,
    terminate_without_stop_token: bool,
    max_rollback_tokens: i64,
    words: usize,
    /// The bitmask filled last, kept only where its buffer is opened by the
    /// Python helper (CPython < 3.11; see `buffer`), to skip the helper when
    /// the same array comes again (engines fill one bitmask every step).
    last: Option<Held>,
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
    /// Nothing is kept past the call on CPython >= 3.11; on older ones the
    /// matcher keeps the last bitmask it filled (and its buffer export, so
    /// numpy refuses to resize it meanwhile) to find its memory faster at
    /// the next step.
    #[pyo3(signature = (bitmask, index=0))]
    fn fill_next_token_bitmask(
        &mut self,
        py: Python<'_>,
        bitmask: &Bound<'_, PyAny>,
        index: isize,
    ) -> PyResult<()> {
        let inner = &self.inner;
        with_rows(bitmask, self.words, Some(&mut self.last), |view| {
            let i = view.row_index(index)?;
            let ptr = view.ptr();
            // SAFETY: `i` is in range, the export is held until `with_rows`
            // returns, and this is the only slice of the row. The row has
            // exactly `words` words (checked by `with_rows`), the size the
            // core asks for, so the fill cannot fail.
            py.detach(|| {
                let _ = inner.fill_bitmask(unsafe { ptr.row(i) });
            });
            Ok(())
        })
    }

    /// Takes token `token_id` if it is allowed: True when taken, False (and
    /// no change) otherwise. An id outside the vocabulary raises.
    fn accept_token(&mut self, token_id: i64) -> PyResult<bool> {
        let t = token(token_id, self.inner.index().vocab().logits_width())?;
        Ok(self.inner.accept_token(t))
    }

    /// Takes `text` (`str`, or `bytes` that need not end on a character
    /// boundary) as XGrammar's `accept_string` does: True when the whole
    /// text can follow, False (and no change) when the constraint refuses
    /// any of it. It counts as one step for `rollback`. `debug_print` is
    /// accepted for XGrammar's signature and does nothing (the library never
    /// prints).
    #[pyo3(signature = (text, *, debug_print=false))]
    fn accept_string(&mut self, text: &Bound<'_, PyAny>, debug_print: bool) -> PyResult<bool> {
        let _ = debug_print;
        if let Ok(s) = text.cast::<PyString>() {
            return Ok(self.inner.accept_bytes(s.to_cow()?.as_bytes()));
        }
        if let Ok(b) = text.cast::<PyBytes>() {
            return Ok(self.inner.accept_bytes(b.as_bytes()));
        }
        Err(PyTypeError::new_err(format!(
            "accept_string takes str or bytes, not {}",
            text.get_type().name()?
        )))
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

thread_local! {
    /// The batch fill's work list, reused from call to call.
    static WORK: Cell<Vec<(usize, usize)>> = const { Cell::new(Vec::new()) };
    /// Rows already named in this call (one bit a row), reused too.
    static SEEN: Cell<Vec<u64>> = const { Cell::new(Vec::new()) };
}

/// Fills row `i` of `bitmask` from `matchers[i]` (or row `indices[i]`),
/// rows in parallel (the calling thread and the pool's workers, see
/// `pool`), with the GIL released. Nothing is kept past the call.
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
    if let Some(ix) = &indices {
        if ix.len() != matchers.len() {
            return Err(PyValueError::new_err(format!(
                "{} indices for {} matchers",
                ix.len(),
                matchers.len()
            )));
        }
    }
    with_rows(bitmask, words, None, |view| {
        let mut work = WORK.take();
        let mut seen = SEEN.take();
        let r = (|| {
            work.clear();
            seen.clear();
            seen.resize(view.rows.div_ceil(64), 0);
            for (k, m) in matchers.iter().enumerate() {
                let i = match &indices {
                    Some(ix) => view.row_index(ix[k])?,
                    None => view.row_index(k as isize)?,
                };
                let bit = 1u64 << (i % 64);
                if seen[i / 64] & bit != 0 {
                    return Err(PyValueError::new_err(
                        "two matchers would fill the same bitmask row",
                    ));
                }
                seen[i / 64] |= bit;
                work.push((&m.inner as *const constrain::Matcher as usize, i));
            }
            let ptr = view.ptr();
            let work = &work[..];
            // SAFETY (of `pool::run`): every row is in range and named once
            // (checked above); the export is held until `with_rows` returns
            // and `matchers` holds the borrows of the matchers (no mutation
            // meanwhile) until after `run` returns.
            py.detach(|| unsafe { pool::run(work, ptr) });
            Ok(())
        })();
        WORK.set(work);
        SEEN.set(seen);
        r
    })
}

/// Counters of the batch fill's worker pool since the start, for
/// benchmarks and diagnostics (whether the workers take part on this
/// machine): `published` (batch fills offered to the workers), `joined`
/// (times a worker took part in one), `rows` (rows the workers filled),
/// `parks` (times a worker went to sleep after its spin window) and `wakes`
/// (times a caller or worker woke a sleeping one).
#[pyfunction]
pub fn _fill_stats(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
    use std::sync::atomic::Ordering::Relaxed;
    let d = pyo3::types::PyDict::new(py);
    d.set_item("published", pool::PUBLISHED.load(Relaxed))?;
    d.set_item("joined", pool::WORKER_JOBS.load(Relaxed))?;
    d.set_item("rows", pool::WORKER_ROWS.load(Relaxed))?;
    d.set_item("parks", pool::PARKS.load(Relaxed))?;
    d.set_item("wakes", pool::WAKES.load(Relaxed))?;
    Ok(d)
}
