//! # constrain-model: running a network under a constraint
//!
//! The model side of constrain: the [`LanguageModel`] trait, candle's quantized
//! Qwen over GGUF ([`QwenModel`]), the chat template ([`prompt`]) and the
//! constrained generation loop ([`generate`]). The core library (`constrain`)
//! knows nothing of models; the fake and tiny models tests use are in
//! `constrain-testkit`.
//!
//! ## Language models
//!
//! The generation loop ([`crate::generate`]) needs one thing from a model: given
//! a batch of new tokens placed at a position, the logits of the *last* of them.
//! [`LanguageModel`] says exactly that, so the loop runs unchanged over the real
//! candle Qwen model ([`QwenModel`]) and over the scripted `FakeModel` (in `constrain-testkit`) that
//! the tests and doc examples use.
//!
//! ## The contract of [`LanguageModel::forward`]
//!
//! * `forward(tokens, 0)` starts a new sequence (the KV cache is cleared);
//! * `forward(tokens, pos)` with `pos > 0` continues it, and `pos` must equal the
//!   number of tokens fed so far, or the length [`LanguageModel::truncate`]
//!   rewound it to (a model that can rewind its KV cache says so by returning
//!   `true`; the default cannot, and callers such as beam search then restart
//!   at position 0);
//! * the result is the logits for the token that follows `tokens`, a
//!   `Vec<f32>` of exactly [`LanguageModel::logits_width`] values;
//! * a batch of several tokens is one forward pass (prefill, jump-forward).
//!
//! ## The candle implementation
//!
//! [`QwenModel::load`] reads a quantized GGUF file (llama.cpp format) and picks
//! the architecture from `general.architecture`: `qwen2` (Qwen2 / Qwen2.5, the
//! default Qwen2.5-Coder-0.5B-Instruct) or `qwen3`, run by constrain's own
//! forward pass on candle's quantized matmuls ([`net`], ported from
//! candle-transformers' `quantized_qwen2` / `quantized_qwen3` and tested
//! against them): the weights are shared behind an `Arc`, each sequence's KV
//! cache is a value of its own that truncates ([`LanguageModel::truncate`])
//! and forks ([`QwenModel::fork`]), [`LanguageModel::forward_all`] scores
//! several positions in one pass, and [`QwenModel::step_batch`] steps several
//! sequences at different positions in one pass. Anything else is
//! [`ModelError::UnsupportedArchitecture`].
//! The file is checked before any weight is read: a missing file, a header that
//! does not parse, or tensor data running past the end of the file (a truncated
//! download) are typed errors naming the path.
//!
//! The tokenizer travels with the model: [`gguf_tokenizer`] rebuilds a
//! `tokenizers::Tokenizer` (byte-level BPE with Qwen's pre-tokenizer regex) and
//! a [`Vocabulary`] from the `tokenizer.ggml.*`
//! metadata, so a GGUF file alone is enough. [`check_compatible`] verifies that a
//! tokenizer (from the GGUF or from a separate `tokenizer.json`) fits the model:
//! every id below the logits width, and the EOS ids are ids the model knows.
//!
//! ## Threads
//!
//! candle runs CPU kernels on process-global pools that are sized once, on
//! first use, from the environment (`CANDLE_NUM_THREADS`, then
//! `RAYON_NUM_THREADS`, then the number of physical cores); rayon's global pool
//! is likewise fixed when first used. [`set_threads`] sets both variables and
//! builds rayon's global pool; call it once, before loading a model. After a
//! model has run, the pools exist and the call fails with
//! [`ModelError::ThreadsFixed`] rather than silently doing nothing. The own
//! forward pass (`net`) runs its matmuls and attention on a pool of its own
//! of the same size, whose calls never wait for a thread that has not
//! started (see `net::pool`); loading a model sets candle's
//! `CANDLE_BARRIER_POOL_SPIN_LIMIT` to 2,000 unless it is set.
//!
//! ## Prompts
//!
//! [`prompt`] renders the ChatML template Qwen was trained on (system / user /
//! assistant turns) and the default system message that shows the model the
//! schema it must follow.

#![deny(missing_docs)]
pub mod generate;
pub mod gguf;
mod gguf_tokenizer;
pub mod inspector;
pub mod net;
pub mod prompt;
mod qwen;
pub mod trace;

pub use gguf_tokenizer::{gguf_tokenizer, GgufTokenizer};
pub use qwen::{load, Architecture, LoadedModel, QwenModel, TokenizerSource};

use constrain::vocab::{TokenId, Vocabulary};
use std::sync::atomic::{AtomicBool, Ordering};

/// What [`LanguageModel::forward_masked`]'s caller will read of the
/// logits: called at most once, before the output head; a bitset of ids
/// (the words of a [`constrain::vocab::TokenSet`]), or `None` for all.
pub type Wanted<'a> = &'a mut dyn FnMut() -> Option<Vec<u64>>;

/// A causal language model seen from the generation loop.
pub trait LanguageModel {
    /// Feeds `tokens` at positions `pos..pos + tokens.len()` and returns the
    /// logits that follow the last of them ([`Self::logits_width`] values).
    /// `pos == 0` starts a new sequence; otherwise `pos` must be the number of
    /// tokens fed since the last start. `tokens` must not be empty.
    fn forward(&mut self, tokens: &[TokenId], pos: usize) -> Result<Vec<f32>, ModelError>;

    /// [`Self::forward`] where the caller will read only some of the
    /// logits: `wanted`, called at most once after the model's layers and
    /// before its output head, returns a bitset of the ids it will read (the
    /// words of a [`constrain::vocab::TokenSet`]: bit `i % 64` of word
    /// `i / 64`), or `None` for all. The model may then compute only those
    /// logits (bitwise as [`Self::forward`] would) and leave others at
    /// `-inf`. A constrained generation passes its next mask, computed
    /// while the layers run. The default computes every logit.
    fn forward_masked(
        &mut self,
        tokens: &[TokenId],
        pos: usize,
        wanted: Wanted<'_>,
    ) -> Result<Vec<f32>, ModelError> {
        let _ = wanted;
        self.forward(tokens, pos)
    }

    /// Forgets the sequence (clears the KV cache).
    fn reset(&mut self);

    /// Number of logits per position (Qwen: 151,936).
    fn logits_width(&self) -> usize;

    /// Longest sequence (prompt + output) the model accepts.
    fn context_length(&self) -> usize;

    /// Rewinds the sequence to its first `len` tokens (`0 < len <=` tokens
    /// fed), so the next `forward` continues at position `len`; returns
    /// whether the model did it. The default cannot (returns `false`): the
    /// caller then restarts at position 0 with the whole sequence. Beam
    /// search uses it to move between hypotheses that share a prefix.
    fn truncate(&mut self, len: usize) -> bool {
        let _ = len;
        false
    }

    /// Feeds `tokens` at positions `pos..pos + tokens.len()` like
    /// [`Self::forward`], but returns the logits after *each* of them (one
    /// row per token). Speculative decoding verifies a draft with it. The
    /// default feeds one token at a time (correct for every model, no faster);
    /// a model that scores several positions in one pass overrides it.
    fn forward_all(&mut self, tokens: &[TokenId], pos: usize) -> Result<Vec<Vec<f32>>, ModelError> {
        if tokens.is_empty() {
            return Err(ModelError::EmptyBatch);
        }
        let mut rows = Vec::with_capacity(tokens.len());
        for (i, t) in tokens.iter().enumerate() {
            rows.push(self.forward(std::slice::from_ref(t), pos + i)?);
        }
        Ok(rows)
    }

    /// A [`SequenceBatch`] of one sequence holding this model's first `len`
    /// positions, whose sequences then step together in one pass (beam
    /// search steps all its hypotheses with it). `None` (the default) when
    /// the model has no batched pass or has fed fewer than `len` tokens: the
    /// caller then steps sequences one by one with [`Self::truncate`] and
    /// [`Self::forward`]. The model itself is left as it was.
    fn sequence_batch(&self, len: usize) -> Option<Box<dyn SequenceBatch>> {
        let _ = len;
        None
    }
}

/// Several sequences over one model's weights, stepped together: one token
/// for each in one batched pass ([`LanguageModel::sequence_batch`]). Beam
/// search keeps sequence `j` in step with hypothesis `j`, and after each
/// selection rearranges the batch like Hugging Face's `_reorder_cache`.
pub trait SequenceBatch {
    /// The number of sequences.
    fn len(&self) -> usize;

    /// Whether the batch holds no sequence.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Rearranges the batch: new sequence `j` continues old sequence
    /// `parents[j]` (a parent named twice is copied, one named once is
    /// moved, one not named is dropped). An index past the batch is
    /// [`ModelError::Batch`].
    fn reorder(&mut self, parents: &[usize]) -> Result<(), ModelError>;

    /// Feeds `tokens[j]` to sequence `j`, all in one pass; each one's
    /// logits. As many tokens as sequences, or [`ModelError::Batch`].
    fn step(&mut self, tokens: &[TokenId]) -> Result<Vec<Vec<f32>>, ModelError>;
}

/// [`SequenceBatch::reorder`] over any per-sequence state: new item `j`
/// continues old item `parents[j]`; the last use of a parent moves it, the
/// others take `fork(parent)` (cheap for token lists, a KV copy for a
/// model). An index past the batch is [`ModelError::Batch`] and leaves
/// `items` untouched.
pub fn reorder_batch<T>(
    items: &mut Vec<T>,
    parents: &[usize],
    fork: impl Fn(&T) -> T,
) -> Result<(), ModelError> {
    let n = items.len();
    if let Some(&p) = parents.iter().find(|&&p| p >= n) {
        return Err(ModelError::Batch(format!(
            "reorder names sequence {p} of a batch of {n}"
        )));
    }
    let mut uses = vec![0usize; n];
    for &p in parents {
        uses[p] += 1;
    }
    let mut old: Vec<Option<T>> = std::mem::take(items).into_iter().map(Some).collect();
    for &p in parents {
        uses[p] -= 1;
        let s = if uses[p] == 0 {
            old[p].take()
        } else {
            old[p].as_ref().map(&fork)
        };
        // (A parent is taken by its last use only: never `None`.)
        items.extend(s);
    }
    Ok(())
}

/// The check every [`SequenceBatch::step`] makes: one token per sequence.
pub fn check_step_width(sequences: usize, tokens: &[TokenId]) -> Result<(), ModelError> {
    if tokens.len() != sequences {
        return Err(ModelError::Batch(format!(
            "{sequences} sequences but {} tokens",
            tokens.len()
        )));
    }
    Ok(())
}

impl<M: LanguageModel + ?Sized> LanguageModel for &mut M {
    fn forward(&mut self, tokens: &[TokenId], pos: usize) -> Result<Vec<f32>, ModelError> {
        (**self).forward(tokens, pos)
    }
    fn forward_masked(
        &mut self,
        tokens: &[TokenId],
        pos: usize,
        wanted: Wanted<'_>,
    ) -> Result<Vec<f32>, ModelError> {
        (**self).forward_masked(tokens, pos, wanted)
    }
    fn reset(&mut self) {
        (**self).reset()
    }
    fn logits_width(&self) -> usize {
        (**self).logits_width()
    }
    fn context_length(&self) -> usize {
        (**self).context_length()
    }
    fn truncate(&mut self, len: usize) -> bool {
        (**self).truncate(len)
    }
    fn forward_all(&mut self, tokens: &[TokenId], pos: usize) -> Result<Vec<Vec<f32>>, ModelError> {
        (**self).forward_all(tokens, pos)
    }
    fn sequence_batch(&self, len: usize) -> Option<Box<dyn SequenceBatch>> {
        (**self).sequence_batch(len)
    }
}

impl<M: LanguageModel + ?Sized> LanguageModel for Box<M> {
    fn forward(&mut self, tokens: &[TokenId], pos: usize) -> Result<Vec<f32>, ModelError> {
        (**self).forward(tokens, pos)
    }
    fn forward_masked(
        &mut self,
        tokens: &[TokenId],
        pos: usize,
        wanted: Wanted<'_>,
    ) -> Result<Vec<f32>, ModelError> {
        (**self).forward_masked(tokens, pos, wanted)
    }
    fn reset(&mut self) {
        (**self).reset()
    }
    fn logits_width(&self) -> usize {
        (**self).logits_width()
    }
    fn context_length(&self) -> usize {
        (**self).context_length()
    }
    fn truncate(&mut self, len: usize) -> bool {
        (**self).truncate(len)
    }
    fn forward_all(&mut self, tokens: &[TokenId], pos: usize) -> Result<Vec<Vec<f32>>, ModelError> {
        (**self).forward_all(tokens, pos)
    }
    fn sequence_batch(&self, len: usize) -> Option<Box<dyn SequenceBatch>> {
        (**self).sequence_batch(len)
    }
}

/// Errors loading or running a model.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The model file does not exist.
    #[error("model file {path} does not exist (scripts/fetch-assets fetches the default model)")]
    NotFound {
        /// Path of the missing model file.
        path: String,
    },
    /// The model file exists but could not be read.
    #[error("cannot read model file {path}: {source}")]
    Io {
        /// Path of the model file.
        path: String,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a well-formed GGUF file.
    #[error("{path} is not a valid GGUF file: {reason}")]
    Corrupt {
        /// Path of the model file.
        path: String,
        /// What is wrong with the file.
        reason: String,
    },
    /// A tensor extends past the end of the file.
    #[error(
        "{path} is truncated: tensor {tensor:?} ends at byte {needed} but the file has {actual} bytes"
    )]
    Truncated {
        /// Path of the model file.
        path: String,
        /// Name of the tensor that runs past the end.
        tensor: String,
        /// Byte offset at which the tensor's data ends.
        needed: u64,
        /// Actual size of the file in bytes.
        actual: u64,
    },
    /// The GGUF file's `general.architecture` is not one this crate implements.
    #[error(
        "{path} has architecture {arch:?}; supported architectures are \"qwen2\" and \"qwen3\""
    )]
    UnsupportedArchitecture {
        /// Path of the model file.
        path: String,
        /// The architecture named in the file.
        arch: String,
    },
    /// A required GGUF metadata key is absent or has an unexpected type.
    #[error("{path}: metadata key {key:?} is missing or has the wrong type ({detail})")]
    Metadata {
        /// Path of the model file.
        path: String,
        /// The metadata key that was looked up.
        key: String,
        /// Why the value could not be used.
        detail: String,
    },
    /// The tokenizer described by the GGUF metadata could not be built.
    #[error("cannot build the tokenizer stored in the GGUF file: {0}")]
    Tokenizer(String),
    /// The tokenizer does not fit the model (more ids than logits, no
    /// end-of-sequence token, or a different end-of-sequence token).
    #[error("tokenizer does not match the model: {0}")]
    Mismatch(String),
    /// candle failed to load the weights from the file.
    #[error("loading the weights of {path} failed: {source}")]
    Load {
        /// Path of the model file.
        path: String,
        /// The underlying candle error.
        #[source]
        source: candle_core::Error,
    },
    /// candle failed during a forward pass.
    #[error("model forward pass failed at position {pos}: {source}")]
    Forward {
        /// Position (in tokens) of the first token of the failed pass.
        pos: usize,
        /// The underlying candle error.
        #[source]
        source: candle_core::Error,
    },
    /// A forward pass started at a position other than the number of tokens
    /// fed so far (or 0).
    #[error("forward pass at position {got}, but {expected} tokens have been fed (positions must be contiguous, or 0 to restart)")]
    Position {
        /// Number of tokens fed so far, the position a continuing pass must use.
        expected: usize,
        /// Position the pass was called with.
        got: usize,
    },
    /// A forward pass was called with no tokens.
    #[error("empty batch: forward needs at least one token")]
    EmptyBatch,
    /// A batched pass was called with parts that do not fit together
    /// (sequences and tokens of different counts, a sequence made for other
    /// weights).
    #[error("batched forward pass: {0}")]
    Batch(String),
    /// A token id is not below the model's logits width.
    #[error("token {token} is outside the model's {width} logits")]
    TokenOutOfRange {
        /// The offending token id.
        token: TokenId,
        /// Number of logits the model produces per position.
        width: usize,
    },
    /// A sequence would grow beyond the model's context length.
    #[error("sequence of {needed} tokens exceeds the model's context length of {context}")]
    ContextOverflow {
        /// Number of tokens the sequence would hold.
        needed: usize,
        /// The model's context length in tokens.
        context: usize,
    },
    /// The thread count was set after candle's thread pools were built.
    #[error(
        "threads must be set before the first model runs (candle's thread pools are already built)"
    )]
    ThreadsFixed,
    /// A thread count of zero was requested.
    #[error("invalid thread count 0")]
    ZeroThreads,
    /// The caller stopped the sequence (a server whose client went away, a
    /// stop string that matched); returned by wrappers around a model.
    #[error("generation interrupted: {0}")]
    Interrupted(String),
    /// A vocabulary error from the `constrain` crate.
    #[error(transparent)]
    Vocab(#[from] constrain::vocab::VocabError),
}

static POOLS_USED: AtomicBool = AtomicBool::new(false);

/// Marks candle's global pools as built (the first forward pass does that).
pub(crate) fn mark_pools_used() {
    // candle's pool (still under the matmuls the own kernels do not cover)
    // spins 25,000 times for its next job before it parks: on a machine
    // whose cores are busy, that spinning takes the CPU the model's own
    // threads (`net::pool`) need. Park sooner, unless the user said.
    if std::env::var_os("CANDLE_BARRIER_POOL_SPIN_LIMIT").is_none() {
        std::env::set_var("CANDLE_BARRIER_POOL_SPIN_LIMIT", "2000");
    }
    POOLS_USED.store(true, Ordering::Relaxed);
}

/// Sets the number of CPU threads candle and rayon use for the model. Must be
/// called before the first model runs in this process (see the module docs).
pub fn set_threads(n: usize) -> Result<(), ModelError> {
    if n == 0 {
        return Err(ModelError::ZeroThreads);
    }
    if POOLS_USED.load(Ordering::Relaxed) {
        return Err(ModelError::ThreadsFixed);
    }
    // candle reads these once, when it first builds its pools.
    std::env::set_var("CANDLE_NUM_THREADS", n.to_string());
    std::env::set_var("RAYON_NUM_THREADS", n.to_string());
    rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .build_global()
        .map_err(|_| ModelError::ThreadsFixed)
}

/// The number of threads candle will use (or uses) for CPU kernels.
pub fn threads() -> usize {
    std::env::var("CANDLE_NUM_THREADS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(candle_core::utils::get_num_threads)
}

/// Checks that a tokenizer's vocabulary fits a model: every token id below the
/// logits width and at least one EOS id. Returns the vocabulary widened to the
/// model's logits width (ids past the tokenizer are always masked).
pub fn check_compatible(vocab: Vocabulary, logits_width: usize) -> Result<Vocabulary, ModelError> {
    if vocab.num_ids() > logits_width {
        return Err(ModelError::Mismatch(format!(
            "the tokenizer has {} token ids but the model has only {} logits",
            vocab.num_ids(),
            logits_width
        )));
    }
    if vocab.eos().is_empty() {
        return Err(ModelError::Mismatch(
            "the tokenizer has no end-of-sequence token".into(),
        ));
    }
    Ok(vocab.with_logits_width(logits_width)?)
}

/// The README's Rust examples, compiled as doc tests of this crate (which
/// sees the core library, the model crate and the test kit).
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The Rust example of docs/grammars.md, compiled as a doc test.
#[doc = include_str!("../../../docs/grammars.md")]
#[cfg(doctest)]
pub struct GrammarsDoctests;

/// The Rust example of docs/architecture.md, compiled as a doc test.
#[doc = include_str!("../../../docs/architecture.md")]
#[cfg(doctest)]
pub struct ArchitectureDoctests;
