//! # One decode loop, one batched forward pass per step
//!
//! With a model that can run several sequences in one pass (constrain's own
//! Qwen forward, `constrain_model::net`), the server keeps **one** copy of
//! the weights and **one** decode loop (a thread of its own). Each running
//! request holds a [`BatchedSeq`]: its own KV cache and position, seen by
//! the unchanged generation loop as a [`LanguageModel`]. Its `forward`
//! does not compute anything itself: it sends the sequence and the tokens to
//! the decode loop and waits for the logits.
//!
//! The loop, at each step, takes what has arrived, waits a moment (at most
//! [`GATHER`]) for the other *active* sequences' next tokens, and then:
//!
//! runs everything that arrived in **one** batched pass
//! ([`BatchModel::step_batch`]): single-token steps, jump-forward
//! stretches and new prompts alike, each sequence with its own chunk at its
//! own position; the matmuls run once over all the rows, attention per
//! sequence.
//!
//! ## Chunked prefill
//!
//! A ~200-token prompt is a pass of its own weight: fed whole, it would
//! stall every decoding sequence for as long as a few dozen of their steps.
//! So a pass holds at most [`BatchConfig::prefill_chunk`] tokens besides
//! one token per decoding sequence (vLLM's `max_num_batched_tokens`,
//! llama.cpp's `n_batch`): a longer prompt (or jump-forward stretch) is
//! fed a chunk per pass, oldest first, while the others keep stepping every
//! pass, and its request hears back (with the logits after its last token)
//! once the last chunk is in. A decode step never waits for room, and a
//! prompt advances by at least one token a pass.
//!
//! ## Prompt-prefix cache
//!
//! A new prompt (position 0) first looks in the loop's
//! [`PrefixCache`]: when an earlier prompt
//! shared its first tokens (the chat template, the system prompt, the
//! tools), the sequence starts from a copy of that one's KV cache and only
//! the rest is fed. Each finished prompt is offered to the cache. See
//! [`crate::prefix`].
//!
//! Admission is continuous: a request that gets a slot (see
//! [`crate::scheduler`]) joins at the next step. A sequence is *active*
//! from its first forward until it is reset (its slot is freed: the
//! request finished, failed, or its client went away), so the loop never
//! waits for a sequence that is gone.
//!
//! ## Cancellation
//!
//! A request carries its client's cancel flag (the thread's
//! [`crate::scheduler::current_cancel`] when it was sent). Before every
//! pass the loop answers each request whose flag is set with
//! [`ModelError::Interrupted`], so a client that goes away in the middle of
//! a long prompt or jump-forward stretch frees its slot after the pass in
//! flight, not after the whole prompt.
//!
//! A model without a batched pass (the fake model of the tests) fits too:
//! [`BatchModel::step_batch`]'s default runs the steps one by one.

use crate::prefix::{PrefixCache, PrefixStats};
use constrain::TokenId;
use constrain_model::net::QwenWeights;
use constrain_model::{LanguageModel, ModelError, QwenModel, Wanted};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the loop waits, after the first request of a step arrives, for
/// the other active sequences' requests.
pub const GATHER: Duration = Duration::from_millis(5);

/// A model the decode loop can run several sequences of at once.
pub trait BatchModel: Send + Sync + 'static {
    /// One sequence (its own KV cache and position).
    type Seq: LanguageModel + Send + 'static;

    /// A new, empty sequence.
    fn sequence(&self) -> Result<Self::Seq, ModelError>;

    /// Feeds `chunks[i]` (one token, a jump-forward stretch or a prompt) to
    /// `seqs[i]` at `positions[i]`; each one's logits after its last token
    /// (or its own error: one sequence's failure is not the others'). The
    /// default runs them one after the other.
    fn step_batch(
        &self,
        seqs: &mut [&mut Self::Seq],
        chunks: &[&[TokenId]],
        positions: &[usize],
    ) -> Vec<Result<Vec<f32>, ModelError>> {
        one_by_one(seqs, chunks, positions)
    }

    /// [`BatchModel::step_batch`] where the callers will read only the
    /// logits `wanted` names (called at most once, before the output head:
    /// the union of the rows' masks, or `None` for all; see
    /// [`LanguageModel::forward_masked`]). The default computes them all.
    fn step_batch_masked(
        &self,
        seqs: &mut [&mut Self::Seq],
        chunks: &[&[TokenId]],
        positions: &[usize],
        wanted: Wanted<'_>,
    ) -> Vec<Result<Vec<f32>, ModelError>> {
        let _ = wanted;
        self.step_batch(seqs, chunks, positions)
    }

    /// A copy of `seq` cut to its first `len` positions, continuing on its
    /// own (the prompt-prefix cache keeps and hands out such copies);
    /// `None` when the model cannot copy a sequence: nothing is cached.
    fn fork_prefix(&self, seq: &Self::Seq, len: usize) -> Option<Self::Seq> {
        let _ = (seq, len);
        None
    }

    /// Bytes a sequence holds (its KV cache): what the prefix cache counts.
    fn seq_bytes(&self, seq: &Self::Seq) -> usize {
        let _ = seq;
        0
    }
}

/// constrain's Qwen: shared weights, one batched pass per step.
pub struct QwenBatch(pub Arc<QwenWeights>);

impl BatchModel for QwenBatch {
    type Seq = QwenModel;

    fn sequence(&self) -> Result<QwenModel, ModelError> {
        Ok(QwenModel::from_weights(self.0.clone()))
    }

    fn step_batch(
        &self,
        seqs: &mut [&mut QwenModel],
        chunks: &[&[TokenId]],
        positions: &[usize],
    ) -> Vec<Result<Vec<f32>, ModelError>> {
        qwen_step(seqs, chunks, positions, None)
    }

    fn step_batch_masked(
        &self,
        seqs: &mut [&mut QwenModel],
        chunks: &[&[TokenId]],
        positions: &[usize],
        wanted: Wanted<'_>,
    ) -> Vec<Result<Vec<f32>, ModelError>> {
        qwen_step(seqs, chunks, positions, Some(wanted))
    }

    fn fork_prefix(&self, seq: &QwenModel, len: usize) -> Option<QwenModel> {
        seq.fork_prefix(len)
    }

    fn seq_bytes(&self, seq: &QwenModel) -> usize {
        seq.sequence().kv_bytes()
    }
}

/// [`QwenBatch`]'s pass: one batched pass where the sequences continue
/// where they are, each one alone otherwise (or when the pass failed: a
/// failed pass leaves every cache as it was), with its own error. `wanted`
/// may narrow the output head of the pass.
fn qwen_step(
    seqs: &mut [&mut QwenModel],
    chunks: &[&[TokenId]],
    positions: &[usize],
    mut wanted: Option<Wanted<'_>>,
) -> Vec<Result<Vec<f32>, ModelError>> {
    for (s, &p) in seqs.iter_mut().zip(positions) {
        if p == 0 {
            s.reset(); // a new prompt
        }
    }
    let plain = seqs
        .iter()
        .zip(positions)
        .all(|(s, &p)| p == s.sequence().len());
    if plain && seqs.len() > 1 {
        let rows = match wanted.as_deref_mut() {
            Some(w) => QwenModel::forward_batch_masked(seqs, chunks, w),
            None => QwenModel::forward_batch(seqs, chunks),
        };
        if let Ok(rows) = rows {
            return rows.into_iter().map(Ok).collect();
        }
    }
    if let (1, Some(w)) = (seqs.len(), wanted) {
        return vec![seqs[0].forward_masked(chunks[0], positions[0], w)];
    }
    one_by_one(seqs, chunks, positions)
}

/// Runs the chunks one sequence after the other (each `forward` on its own).
pub fn one_by_one<M: LanguageModel>(
    seqs: &mut [&mut M],
    chunks: &[&[TokenId]],
    positions: &[usize],
) -> Vec<Result<Vec<f32>, ModelError>> {
    seqs.iter_mut()
        .zip(chunks)
        .zip(positions)
        .map(|((s, t), &p)| s.forward(t, p))
        .collect()
}

/// Any per-sequence models made by a factory, stepped one by one.
pub struct Looped<F>(pub F);

impl<F, M> BatchModel for Looped<F>
where
    F: Fn() -> Result<M, ModelError> + Send + Sync + 'static,
    M: LanguageModel + Send + 'static,
{
    type Seq = M;
    fn sequence(&self) -> Result<M, ModelError> {
        (self.0)()
    }
}

struct Request<S> {
    seq: S,
    tokens: Vec<TokenId>,
    pos: usize,
    reply: Sender<(S, Result<Vec<f32>, ModelError>)>,
    /// Set when the request's client has gone away: the loop answers
    /// [`ModelError::Interrupted`] before the next chunk.
    cancel: Option<Arc<AtomicBool>>,
    /// Where the caller sends the ids it will read of the logits (a
    /// [`LanguageModel::forward_masked`] call); `None`: it reads them all.
    mask: Option<Receiver<Vec<u64>>>,
}

impl<S> Request<S> {
    fn cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::SeqCst))
    }
}

/// The decode loop's settings (`constrain serve --prefill-chunk`,
/// `--prefix-cache-mb`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchConfig {
    /// Tokens one pass feeds at most, besides one token per decoding
    /// sequence (vLLM's `max_num_batched_tokens`, llama.cpp's `n_batch`): a
    /// longer prompt or jump-forward stretch is fed in chunks over several
    /// passes while the other sequences keep stepping. 0: no limit (a
    /// prompt runs whole in one pass).
    pub prefill_chunk: usize,
    /// Bytes of KV cache the prompt-prefix cache may hold ([`crate::prefix`]);
    /// 0 turns it off.
    pub prefix_cache_bytes: usize,
    /// How long a new prompt that reaches an idle loop (no sequence
    /// decoding) waits for more new prompts before its pass: requests sent
    /// together are then fed together and decode in step. Zero: no wait.
    pub gather_new: Duration,
}

constrain::config_setters!(BatchConfig {
    prefill_chunk: usize,
    prefix_cache_bytes: usize,
    gather_new: Duration,
});

/// Default per-pass prefill budget (tokens), chosen by measurement on the
/// 0.5B model (see `docs/server.md`).
pub const DEFAULT_PREFILL_CHUNK: usize = 64;
/// Default wait of a new prompt at an idle loop for the rest of its burst
/// ([`BatchConfig::gather_new`]).
pub const DEFAULT_GATHER_NEW: Duration = Duration::from_millis(5);
/// While no sequence decodes, a pass feeds up to this many times
/// [`BatchConfig::prefill_chunk`] prompt tokens: no step waits on such a
/// pass, so the prompts of a burst go in together (and start decoding
/// together); the bound keeps a pass short for a request that arrives
/// meanwhile, and for a client that goes away.
pub const IDLE_PREFILL_CHUNKS: usize = 4;
/// Default prompt-prefix cache size: 256 MiB (about 10,000 positions of the
/// 0.5B model, whose KV cache takes 24 KiB a position).
pub const DEFAULT_PREFIX_CACHE_BYTES: usize = 256 << 20;

impl Default for BatchConfig {
    fn default() -> Self {
        BatchConfig {
            prefill_chunk: DEFAULT_PREFILL_CHUNK,
            prefix_cache_bytes: DEFAULT_PREFIX_CACHE_BYTES,
            gather_new: DEFAULT_GATHER_NEW,
        }
    }
}

/// Counters the loop keeps (all relaxed; for reports and tests).
#[derive(Default)]
struct Counters {
    steps: AtomicUsize,
    rows: AtomicUsize,
    tokens: AtomicUsize,
    prefix: std::sync::Mutex<PrefixStats>,
}

/// Sequences between their first forward and their reset (`active`), and
/// those of them still waiting for the answer to their first forward, their
/// prompt (`prompting`): the others are decoding.
#[derive(Default)]
struct Live {
    active: AtomicUsize,
    prompting: AtomicUsize,
}

impl Live {
    fn active(&self) -> usize {
        self.active.load(Ordering::SeqCst)
    }

    /// Whether some sequence has had its prompt answered and not been reset.
    fn decoding(&self) -> bool {
        self.active() > self.prompting.load(Ordering::SeqCst)
    }
}

/// The decode loop's mailbox and its count of active sequences.
pub struct Batcher<B: BatchModel> {
    model: Arc<B>,
    tx: std::sync::Mutex<Sender<Request<B::Seq>>>,
    live: Arc<Live>,
    counters: Arc<Counters>,
}

impl<B: BatchModel> Batcher<B> {
    /// Starts the decode loop with the default [`BatchConfig`].
    pub fn start(model: B) -> Arc<Batcher<B>> {
        Self::start_with(model, BatchConfig::default())
    }

    /// Starts the decode loop on a thread of its own; it ends when the
    /// batcher and every sequence handle are dropped.
    pub fn start_with(model: B, config: BatchConfig) -> Arc<Batcher<B>> {
        let model = Arc::new(model);
        let (tx, rx) = mpsc::channel();
        let live = Arc::new(Live::default());
        let counters = Arc::new(Counters::default());
        {
            let (model, live, counters) = (model.clone(), live.clone(), counters.clone());
            std::thread::Builder::new()
                .name("constrain-decode".into())
                .spawn(move || decode_loop(&*model, rx, &live, &counters, config))
                .expect("spawning the decode thread");
        }
        Arc::new(Batcher {
            model,
            tx: std::sync::Mutex::new(tx),
            live,
            counters,
        })
    }

    /// A new sequence handle (own KV cache; the weights shared).
    pub fn handle(&self) -> Result<BatchedSeq<B::Seq>, ModelError> {
        let seq = self.model.sequence()?;
        Ok(BatchedSeq {
            width: seq.logits_width(),
            context: seq.context_length(),
            seq: Some(seq),
            tx: self.tx.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            live: self.live.clone(),
            registered: false,
            prompting: false,
        })
    }

    /// Sequences between their first forward and their reset.
    pub fn active(&self) -> usize {
        self.live.active()
    }

    /// Batched passes run so far, and the sequences they held (their ratio
    /// is the mean batch size).
    pub fn batched(&self) -> (usize, usize) {
        (
            self.counters.steps.load(Ordering::Relaxed),
            self.counters.rows.load(Ordering::Relaxed),
        )
    }

    /// Tokens fed by all passes so far (prompt tokens reused from the
    /// prefix cache are not fed).
    pub fn tokens_fed(&self) -> usize {
        self.counters.tokens.load(Ordering::Relaxed)
    }

    /// The prompt-prefix cache's counters.
    pub fn prefix_stats(&self) -> PrefixStats {
        *self
            .counters
            .prefix
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }
}

/// A request in the loop: how much of its tokens has been fed, and whether
/// it is a new prompt (position 0: the prefix cache's business).
struct Work<S> {
    req: Request<S>,
    fed: usize,
    fresh: bool,
}

impl<S> Work<S> {
    fn left(&self) -> usize {
        self.req.tokens.len() - self.fed
    }
}

/// The logits a pass's callers will read, for the model's output head: the
/// union of their masks; `None` (all of them) when one reads every logit
/// or its mask has not come yet (the pass does not wait for it).
fn union(reading: &[Option<Receiver<Vec<u64>>>]) -> Option<Vec<u64>> {
    let mut all: Vec<u64> = Vec::new();
    for rx in reading {
        let words = rx.as_ref()?.try_recv().ok()?;
        if all.len() < words.len() {
            all.resize(words.len(), 0);
        }
        for (a, w) in all.iter_mut().zip(&words) {
            *a |= w;
        }
    }
    Some(all)
}

/// Takes a request into the loop: a new prompt starts from the longest
/// cached prefix when there is one.
fn admit<B: BatchModel>(
    model: &B,
    cache: &mut PrefixCache<B::Seq>,
    r: Request<B::Seq>,
) -> Work<B::Seq> {
    let fresh = r.pos == 0;
    let mut w = Work {
        req: r,
        fed: 0,
        fresh,
    };
    if fresh {
        if let Some((entry, len)) = cache.lookup(&w.req.tokens) {
            if let Some(seq) = model.fork_prefix(entry, len) {
                w.req.seq = seq;
                w.fed = len;
            }
        }
    }
    w
}

/// How many tokens of each work item go into this pass: one for every
/// item with one token left (a decode step never waits), then the older
/// items first, a chunk each from what is left of `budget` (at least one
/// token a pass, so a prompt always advances).
fn plan(left: &[usize], budget: usize) -> Vec<usize> {
    if budget == 0 {
        return left.to_vec();
    }
    let singles = left.iter().filter(|&&l| l <= 1).count();
    let mut room = budget.saturating_sub(singles).max(1);
    left.iter()
        .map(|&l| {
            if l <= 1 {
                l
            } else {
                let take = l.min(room);
                room -= take;
                take
            }
        })
        .collect()
}

fn decode_loop<B: BatchModel>(
    model: &B,
    rx: Receiver<Request<B::Seq>>,
    live: &Live,
    counters: &Counters,
    config: BatchConfig,
) {
    let mut cache: PrefixCache<B::Seq> = PrefixCache::new(config.prefix_cache_bytes);
    // Requests being fed in chunks (and any that had no room in a pass),
    // oldest first.
    let mut carry: Vec<Work<B::Seq>> = Vec::new();
    loop {
        let mut arrived = Vec::new();
        if carry.is_empty() {
            match rx.recv() {
                Ok(r) => arrived.push(r),
                Err(_) => return,
            }
        }
        let deadline = Instant::now() + GATHER;
        while arrived.len() + carry.len() < live.active() {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            match rx.recv_timeout(deadline - now) {
                Ok(r) => arrived.push(r),
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        // New prompts at a loop where no sequence decodes: wait a moment for
        // the rest of a burst, so that they are fed, and then decode,
        // together.
        if carry.is_empty()
            && !arrived.is_empty()
            && arrived.iter().all(|r| r.pos == 0)
            && !live.decoding()
        {
            let deadline = Instant::now() + config.gather_new;
            while let Some(left) = deadline.checked_duration_since(Instant::now()) {
                match rx.recv_timeout(left) {
                    Ok(r) => arrived.push(r),
                    Err(_) => break,
                }
            }
        }
        while let Ok(r) = rx.try_recv() {
            arrived.push(r);
        }
        let mut work = std::mem::take(&mut carry);
        work.extend(arrived.into_iter().map(|r| admit(model, &mut cache, r)));
        // A request whose client went away leaves now, between chunks: its
        // caller hears `Interrupted` and frees the slot.
        let (gone, kept): (Vec<_>, Vec<_>) = work.into_iter().partition(|w| w.req.cancelled());
        let work = kept;
        for mut w in gone {
            if w.fed > 0 {
                let _ = w.req.seq.truncate(w.req.pos);
            }
            let _ = w.req.reply.send((
                w.req.seq,
                Err(ModelError::Interrupted("the client went away".into())),
            ));
        }
        if work.is_empty() {
            continue;
        }
        // Everything that arrived goes into one pass (single-token steps,
        // jump-forward stretches and prompts alike), long ones in chunks.
        let lefts: Vec<usize> = work.iter().map(Work::left).collect();
        // No sequence decoding: no step to hold up, so a larger pass.
        let budget = match config.prefill_chunk {
            0 => 0,
            b if live.decoding() || work.iter().any(|w| !w.fresh) => b,
            b => b * IDLE_PREFILL_CHUNKS,
        };
        let takes = plan(&lefts, budget);
        let mut in_pass = Vec::new();
        let mut sizes = Vec::new();
        for (w, take) in work.into_iter().zip(takes) {
            if take == 0 {
                carry.push(w);
            } else {
                in_pass.push(w);
                sizes.push(take);
            }
        }
        let chunks: Vec<Vec<TokenId>> = in_pass
            .iter()
            .zip(&sizes)
            .map(|(w, &n)| w.req.tokens[w.fed..w.fed + n].to_vec())
            .collect();
        let chunk_refs: Vec<&[TokenId]> = chunks.iter().map(Vec::as_slice).collect();
        let positions: Vec<usize> = in_pass.iter().map(|w| w.req.pos + w.fed).collect();
        // The masks of the requests that get their logits from this pass
        // (their last chunk); the others read none of it.
        let reading: Vec<Option<Receiver<Vec<u64>>>> = in_pass
            .iter_mut()
            .zip(&sizes)
            .filter(|(w, &n)| w.fed + n == w.req.tokens.len())
            .map(|(w, _)| w.req.mask.take())
            .collect();
        // A panic inside the model must not take the only decode thread
        // (and so every later request) down: the requests of this pass get
        // an error and the loop goes on.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut seqs: Vec<&mut B::Seq> = in_pass.iter_mut().map(|w| &mut w.req.seq).collect();
            model.step_batch_masked(&mut seqs, &chunk_refs, &positions, &mut || union(&reading))
        }))
        .unwrap_or_else(|_| {
            (0..in_pass.len())
                .map(|_| {
                    Err(ModelError::Interrupted(
                        "the model panicked during a batched pass".into(),
                    ))
                })
                .collect()
        });
        counters.steps.fetch_add(1, Ordering::Relaxed);
        counters.rows.fetch_add(in_pass.len(), Ordering::Relaxed);
        counters
            .tokens
            .fetch_add(sizes.iter().sum(), Ordering::Relaxed);
        let mut finished = Vec::new();
        for ((mut w, n), out) in in_pass.into_iter().zip(sizes).zip(result) {
            match out {
                Ok(logits) if w.fed + n < w.req.tokens.len() => {
                    // More chunks to come; these logits are not needed.
                    drop(logits);
                    w.fed += n;
                    finished.push(None);
                    carry.push(w);
                }
                out => {
                    if out.is_err() && w.fed > 0 {
                        // Earlier chunks of this request went in: cut them
                        // back so the caller's position is the cache's.
                        let _ = w.req.seq.truncate(w.req.pos);
                    }
                    if out.is_ok() && w.fresh && cache.wants(&w.req.tokens) {
                        if let Some(copy) = model.fork_prefix(&w.req.seq, w.req.tokens.len()) {
                            let bytes = model.seq_bytes(&copy);
                            cache.insert(std::mem::take(&mut w.req.tokens), copy, bytes);
                        }
                    }
                    finished.push(Some((w.req.reply, w.req.seq, out)));
                }
            }
        }
        if cache.enabled() {
            *counters.prefix.lock().unwrap_or_else(|e| e.into_inner()) = cache.stats();
        }
        for (reply, seq, out) in finished.into_iter().flatten() {
            let _ = reply.send((seq, out));
        }
    }
}

/// One request's sequence in the shared decode loop (see the module docs).
pub struct BatchedSeq<S> {
    seq: Option<S>,
    tx: Sender<Request<S>>,
    live: Arc<Live>,
    registered: bool,
    /// Registered, its first forward not answered yet.
    prompting: bool,
    width: usize,
    context: usize,
}

impl<S> BatchedSeq<S> {
    fn deregister(&mut self) {
        self.answered();
        if self.registered {
            self.registered = false;
            self.live.active.fetch_sub(1, Ordering::SeqCst);
        }
    }

    fn answered(&mut self) {
        if self.prompting {
            self.prompting = false;
            self.live.prompting.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl<S> Drop for BatchedSeq<S> {
    fn drop(&mut self) {
        self.deregister();
    }
}

fn gone() -> ModelError {
    ModelError::Batch("the decode loop has stopped".into())
}

impl<S: LanguageModel + Send> BatchedSeq<S> {
    /// Sends the chunk to the decode loop and waits for its logits; with
    /// `wanted`, the caller's mask follows the request (while the pass
    /// runs), for the loop to narrow the output head.
    fn send(
        &mut self,
        tokens: &[TokenId],
        pos: usize,
        wanted: Option<Wanted<'_>>,
    ) -> Result<Vec<f32>, ModelError> {
        if tokens.is_empty() {
            // Nothing to feed: a request with no tokens would never leave
            // the loop's carry-over.
            return Err(ModelError::EmptyBatch);
        }
        let seq = self.seq.take().ok_or_else(gone)?;
        if !self.registered {
            self.registered = true;
            self.prompting = true;
            self.live.prompting.fetch_add(1, Ordering::SeqCst);
            self.live.active.fetch_add(1, Ordering::SeqCst);
        }
        let (reply, answer) = mpsc::channel();
        let (mask_tx, mask) = match wanted {
            Some(_) => {
                let (tx, rx) = mpsc::channel();
                (Some(tx), Some(rx))
            }
            None => (None, None),
        };
        let req = Request {
            seq,
            tokens: tokens.to_vec(),
            pos,
            reply,
            cancel: crate::scheduler::current_cancel(),
            mask,
        };
        if self.tx.send(req).is_err() {
            self.deregister();
            return Err(gone());
        }
        if let (Some(tx), Some(wanted)) = (mask_tx, wanted) {
            match wanted() {
                Some(words) => {
                    let _ = tx.send(words);
                }
                // Every logit: the loop finds no mask and computes them all.
                None => drop(tx),
            }
        }
        match answer.recv() {
            Ok((seq, out)) => {
                self.seq = Some(seq);
                self.answered();
                out
            }
            Err(_) => {
                self.deregister();
                Err(gone())
            }
        }
    }
}

impl<S: LanguageModel + Send> LanguageModel for BatchedSeq<S> {
    fn forward(&mut self, tokens: &[TokenId], pos: usize) -> Result<Vec<f32>, ModelError> {
        self.send(tokens, pos, None)
    }

    fn forward_masked(
        &mut self,
        tokens: &[TokenId],
        pos: usize,
        wanted: Wanted<'_>,
    ) -> Result<Vec<f32>, ModelError> {
        self.send(tokens, pos, Some(wanted))
    }

    fn reset(&mut self) {
        if let Some(s) = &mut self.seq {
            s.reset();
        }
        self.deregister();
    }

    fn truncate(&mut self, len: usize) -> bool {
        self.seq.as_mut().is_some_and(|s| s.truncate(len))
    }

    fn logits_width(&self) -> usize {
        self.width
    }

    fn context_length(&self) -> usize {
        self.context
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model whose logits record the sequence it saw: logit `i` is the
    /// token fed at position `i` (plus one), so a mixed-up batch shows.
    struct Echo {
        seen: Vec<TokenId>,
    }
    impl LanguageModel for Echo {
        fn forward(&mut self, tokens: &[TokenId], pos: usize) -> Result<Vec<f32>, ModelError> {
            if pos != 0 && pos != self.seen.len() {
                return Err(ModelError::Position {
                    expected: self.seen.len(),
                    got: pos,
                });
            }
            self.seen.truncate(pos);
            self.seen.extend_from_slice(tokens);
            let mut l = vec![0.0; 64];
            for (i, t) in self.seen.iter().enumerate().take(64) {
                l[i] = t.0 as f32 + 1.0;
            }
            Ok(l)
        }
        fn reset(&mut self) {
            self.seen.clear();
        }
        fn logits_width(&self) -> usize {
            64
        }
        fn context_length(&self) -> usize {
            64
        }
    }

    #[test]
    fn sequences_in_the_loop_keep_their_own_histories() {
        let b = Batcher::start(Looped(|| Ok(Echo { seen: Vec::new() })));
        let threads: Vec<_> = (0..4u32)
            .map(|k| {
                let mut h = b.handle().unwrap();
                std::thread::spawn(move || {
                    let prompt = vec![TokenId(k), TokenId(k + 10)];
                    h.forward(&prompt, 0).unwrap();
                    for i in 0..20u32 {
                        let l = h.forward(&[TokenId(k * 100 + i)], 2 + i as usize).unwrap();
                        assert_eq!(l[0], k as f32 + 1.0);
                        assert_eq!(l[2 + i as usize], (k * 100 + i) as f32 + 1.0);
                    }
                    assert!(matches!(
                        h.forward(&[TokenId(1)], 5),
                        Err(ModelError::Position { .. })
                    ));
                    h.reset();
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(b.active(), 0);
        let (steps, rows) = b.batched();
        assert!(
            rows == 4 * 22 && steps <= rows,
            "{steps} steps, {rows} rows"
        );
    }

    #[test]
    fn the_head_reads_the_union_of_the_masks_sent_in_time() {
        let sent = |w: Vec<u64>| {
            let (tx, rx) = mpsc::channel();
            tx.send(w).unwrap();
            Some(rx)
        };
        // No caller reads logits: no column of the head is needed.
        assert_eq!(union(&[]), Some(vec![]));
        assert_eq!(
            union(&[sent(vec![0b1010, 0]), sent(vec![0b0001, 1 << 63])]),
            Some(vec![0b1011, 1 << 63])
        );
        // A caller that reads every logit, or whose mask is late: all.
        assert_eq!(union(&[sent(vec![1]), None]), None);
        let (_late_tx, late) = mpsc::channel();
        assert_eq!(union(&[sent(vec![1]), Some(late)]), None);
    }

    #[test]
    fn a_pass_plan_keeps_every_step_and_chunks_long_feeds() {
        // Three decoders and a 200-token prompt under a 64-token budget.
        assert_eq!(plan(&[1, 1, 200, 1], 64), vec![1, 1, 61, 1]);
        // The older prompt (first) takes the room before the newer one.
        assert_eq!(plan(&[100, 50, 1], 64), vec![63, 0, 1]);
        assert_eq!(plan(&[10, 50, 1], 64), vec![10, 50, 1]);
        // More decoders than budget: still one prompt token a pass.
        assert_eq!(plan(&[1, 1, 1, 30], 2), vec![1, 1, 1, 1]);
        // 0: no budget, everything whole.
        assert_eq!(plan(&[1, 300, 7], 0), vec![1, 300, 7]);
    }
}
