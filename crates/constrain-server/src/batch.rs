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
//! Admission is continuous: a request that gets a slot (see
//! [`crate::scheduler`]) joins at the next step. A sequence is *active*
//! from its first forward until it is reset (its slot is freed: the
//! request finished, failed, or its client went away), so the loop never
//! waits for a sequence that is gone.
//!
//! A model without a batched pass (the fake model of the tests) fits too:
//! [`BatchModel::step_batch`]'s default runs the steps one by one.

use constrain::TokenId;
use constrain_model::net::QwenWeights;
use constrain_model::{LanguageModel, ModelError, QwenModel};
use std::sync::atomic::{AtomicUsize, Ordering};
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
            // A failed pass leaves every cache as it was: retry alone below.
            if let Ok(rows) = QwenModel::forward_batch(seqs, chunks) {
                return rows.into_iter().map(Ok).collect();
            }
        }
        // One sequence, not a plain continuation, or the pass failed: each
        // one alone, with its own error.
        one_by_one(seqs, chunks, positions)
    }
}

fn one_by_one<M: LanguageModel>(
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
}

/// The decode loop's mailbox and its count of active sequences.
pub struct Batcher<B: BatchModel> {
    model: Arc<B>,
    tx: std::sync::Mutex<Sender<Request<B::Seq>>>,
    active: Arc<AtomicUsize>,
    steps: Arc<AtomicUsize>,
    batched_rows: Arc<AtomicUsize>,
}

impl<B: BatchModel> Batcher<B> {
    /// Starts the decode loop on a thread of its own; it ends when the
    /// batcher and every sequence handle are dropped.
    pub fn start(model: B) -> Arc<Batcher<B>> {
        let model = Arc::new(model);
        let (tx, rx) = mpsc::channel();
        let active = Arc::new(AtomicUsize::new(0));
        let steps = Arc::new(AtomicUsize::new(0));
        let batched_rows = Arc::new(AtomicUsize::new(0));
        {
            let (model, active, steps, rows) = (
                model.clone(),
                active.clone(),
                steps.clone(),
                batched_rows.clone(),
            );
            std::thread::Builder::new()
                .name("constrain-decode".into())
                .spawn(move || decode_loop(&*model, rx, &active, &steps, &rows))
                .expect("spawning the decode thread");
        }
        Arc::new(Batcher {
            model,
            tx: std::sync::Mutex::new(tx),
            active,
            steps,
            batched_rows,
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
            active: self.active.clone(),
            registered: false,
        })
    }

    /// Sequences between their first forward and their reset.
    pub fn active(&self) -> usize {
        self.active.load(Ordering::SeqCst)
    }

    /// Batched passes run so far, and the sequences they held (their ratio
    /// is the mean batch size).
    pub fn batched(&self) -> (usize, usize) {
        (
            self.steps.load(Ordering::Relaxed),
            self.batched_rows.load(Ordering::Relaxed),
        )
    }
}

fn decode_loop<B: BatchModel>(
    model: &B,
    rx: Receiver<Request<B::Seq>>,
    active: &AtomicUsize,
    steps: &AtomicUsize,
    rows: &AtomicUsize,
) {
    while let Ok(first) = rx.recv() {
        let mut pending = vec![first];
        let deadline = Instant::now() + GATHER;
        while pending.len() < active.load(Ordering::SeqCst) {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            match rx.recv_timeout(deadline - now) {
                Ok(r) => pending.push(r),
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        while let Ok(r) = rx.try_recv() {
            pending.push(r);
        }
        // Everything that arrived goes into one pass: single-token steps,
        // jump-forward stretches and new prompts alike.
        let chunks: Vec<Vec<TokenId>> = pending.iter().map(|r| r.tokens.clone()).collect();
        let chunk_refs: Vec<&[TokenId]> = chunks.iter().map(Vec::as_slice).collect();
        let positions: Vec<usize> = pending.iter().map(|r| r.pos).collect();
        // A panic inside the model must not take the only decode thread
        // (and so every later request) down: the requests of this pass get
        // an error and the loop goes on.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut seqs: Vec<&mut B::Seq> = pending.iter_mut().map(|r| &mut r.seq).collect();
            model.step_batch(&mut seqs, &chunk_refs, &positions)
        }))
        .unwrap_or_else(|_| {
            (0..pending.len())
                .map(|_| {
                    Err(ModelError::Interrupted(
                        "the model panicked during a batched pass".into(),
                    ))
                })
                .collect()
        });
        steps.fetch_add(1, Ordering::Relaxed);
        rows.fetch_add(pending.len(), Ordering::Relaxed);
        for (r, out) in pending.into_iter().zip(result) {
            let _ = r.reply.send((r.seq, out));
        }
    }
}

/// One request's sequence in the shared decode loop (see the module docs).
pub struct BatchedSeq<S> {
    seq: Option<S>,
    tx: Sender<Request<S>>,
    active: Arc<AtomicUsize>,
    registered: bool,
    width: usize,
    context: usize,
}

impl<S> BatchedSeq<S> {
    fn deregister(&mut self) {
        if self.registered {
            self.registered = false;
            self.active.fetch_sub(1, Ordering::SeqCst);
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

impl<S: LanguageModel + Send> LanguageModel for BatchedSeq<S> {
    fn forward(&mut self, tokens: &[TokenId], pos: usize) -> Result<Vec<f32>, ModelError> {
        let seq = self.seq.take().ok_or_else(gone)?;
        if !self.registered {
            self.registered = true;
            self.active.fetch_add(1, Ordering::SeqCst);
        }
        let (reply, answer) = mpsc::channel();
        let req = Request {
            seq,
            tokens: tokens.to_vec(),
            pos,
            reply,
        };
        if self.tx.send(req).is_err() {
            self.deregister();
            return Err(gone());
        }
        match answer.recv() {
            Ok((seq, out)) => {
                self.seq = Some(seq);
                out
            }
            Err(_) => {
                self.deregister();
                Err(gone())
            }
        }
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
}
