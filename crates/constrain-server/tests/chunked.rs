//! The decode loop's pass composition, seen through a recording fake
//! [`BatchModel`]: a long prompt is fed in chunks of the per-pass budget
//! while a decoding sequence keeps stepping every pass, and a prompt that
//! shares its start with an earlier one is fed only from where they part
//! (prompt-prefix cache), with the same logits either way. While no
//! sequence decodes, a pass takes several chunks, and prompts sent together
//! go into one pass.

use constrain::TokenId;
use constrain_model::{LanguageModel, ModelError};
use constrain_server::batch::{one_by_one, BatchConfig, BatchModel, Batcher, IDLE_PREFILL_CHUNKS};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

const WIDTH: usize = 512;

/// A model whose logits record the sequence it holds: logit `i` is the
/// token at position `i` plus one (so a lost or mixed-up chunk shows).
#[derive(Clone)]
struct Echo {
    id: u32,
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
        let mut l = vec![0.0; WIDTH];
        for (i, t) in self.seen.iter().enumerate().take(WIDTH) {
            l[i] = t.0 as f32 + 1.0;
        }
        Ok(l)
    }
    fn reset(&mut self) {
        self.seen.clear();
    }
    fn truncate(&mut self, len: usize) -> bool {
        if len > self.seen.len() {
            return false;
        }
        self.seen.truncate(len);
        true
    }
    fn logits_width(&self) -> usize {
        WIDTH
    }
    fn context_length(&self) -> usize {
        WIDTH
    }
}

/// One row of a pass: (sequence id, position, tokens fed).
type Row = (u32, usize, usize);

/// Echo sequences, every pass logged.
struct Recorder {
    next_id: AtomicU32,
    log: Arc<Mutex<Vec<Vec<Row>>>>,
    forks: bool,
}

impl BatchModel for Recorder {
    type Seq = Echo;
    fn sequence(&self) -> Result<Echo, ModelError> {
        Ok(Echo {
            id: self.next_id.fetch_add(1, Ordering::SeqCst),
            seen: Vec::new(),
        })
    }
    fn step_batch(
        &self,
        seqs: &mut [&mut Echo],
        chunks: &[&[TokenId]],
        positions: &[usize],
    ) -> Vec<Result<Vec<f32>, ModelError>> {
        let rows = seqs
            .iter()
            .zip(chunks)
            .zip(positions)
            .map(|((s, c), &p)| (s.id, p, c.len()))
            .collect();
        self.log.lock().unwrap().push(rows);
        one_by_one(seqs, chunks, positions)
    }
    fn fork_prefix(&self, seq: &Echo, len: usize) -> Option<Echo> {
        if !self.forks || len > seq.seen.len() {
            return None;
        }
        let mut copy = seq.clone();
        copy.seen.truncate(len);
        Some(copy)
    }
    fn seq_bytes(&self, seq: &Echo) -> usize {
        seq.seen.len() * 4
    }
}

fn recorder(forks: bool) -> (Recorder, Arc<Mutex<Vec<Vec<Row>>>>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    (
        Recorder {
            next_id: AtomicU32::new(0),
            log: log.clone(),
            forks,
        },
        log,
    )
}

/// A recording loop feeding at most `budget` prompt tokens a pass beside
/// decoding sequences, with no prefix cache.
fn chunked(
    budget: usize,
    config: BatchConfig,
) -> (Arc<Batcher<Recorder>>, Arc<Mutex<Vec<Vec<Row>>>>) {
    let (model, log) = recorder(false);
    let b = Batcher::start_with(model, config.prefill_chunk(budget).prefix_cache_bytes(0));
    (b, log)
}

fn toks(range: std::ops::Range<u32>) -> Vec<TokenId> {
    range.map(TokenId).collect()
}

fn assert_echoes(logits: &[f32], seq: &[TokenId]) {
    for (i, t) in seq.iter().enumerate() {
        assert_eq!(logits[i], t.0 as f32 + 1.0, "position {i}");
    }
    assert_eq!(
        logits[seq.len()],
        0.0,
        "nothing past position {}",
        seq.len()
    );
}

#[test]
fn a_decoding_sequence_keeps_stepping_while_a_long_prompt_is_fed_in_chunks() {
    const BUDGET: usize = 8;
    let (b, log) = chunked(BUDGET, BatchConfig::default());
    let mut a = b.handle().unwrap(); // sequence 0
    let mut long = b.handle().unwrap(); // sequence 1
    let steps = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let decoder = {
        let (steps, done) = (steps.clone(), done.clone());
        std::thread::spawn(move || {
            let mut seq = vec![TokenId(1), TokenId(2)];
            a.forward(&seq, 0).unwrap();
            while !done.load(Ordering::SeqCst) && seq.len() < 400 {
                let t = TokenId(300 + seq.len() as u32 % 100);
                let l = a.forward(&[t], seq.len()).unwrap();
                seq.push(t);
                assert_echoes(&l, &seq);
                steps.fetch_add(1, Ordering::SeqCst);
            }
            a.reset();
        })
    };
    while steps.load(Ordering::SeqCst) < 3 {
        std::thread::yield_now();
    }
    let prompt = toks(100..164);
    let l = long.forward(&prompt, 0).unwrap();
    done.store(true, Ordering::SeqCst);
    assert_echoes(&l, &prompt);
    long.reset();
    decoder.join().unwrap();

    let log = log.lock().unwrap();
    let prompt_passes: Vec<&Vec<Row>> = log.iter().filter(|p| p.iter().any(|r| r.0 == 1)).collect();
    let fed: Vec<(usize, usize)> = prompt_passes
        .iter()
        .flat_map(|p| p.iter().filter(|r| r.0 == 1).map(|r| (r.1, r.2)))
        .collect();
    // The chunks cover the prompt in order, none past the budget.
    let mut at = 0;
    for &(pos, n) in &fed {
        assert_eq!(pos, at, "chunks out of order: {fed:?}");
        assert!((1..=BUDGET).contains(&n), "a chunk of {n} tokens: {fed:?}");
        at += n;
    }
    assert_eq!(at, 64);
    assert!(fed.len() >= 64 / BUDGET, "{fed:?}");
    // The decoder kept stepping: it has a row in (nearly) every pass that
    // fed the prompt, and then the pass kept within the budget.
    let with_decoder = prompt_passes
        .iter()
        .filter(|p| p.iter().any(|r| r.0 == 0 && r.2 == 1))
        .count();
    assert!(
        with_decoder * 2 >= prompt_passes.len(),
        "the decoder stepped in only {with_decoder} of the {} passes feeding the prompt: {log:?}",
        prompt_passes.len()
    );
    for p in &prompt_passes {
        let total: usize = p.iter().map(|r| r.2).sum();
        assert!(total <= BUDGET, "a pass of {total} tokens: {p:?}");
    }
}

#[test]
fn without_a_budget_a_prompt_is_one_pass() {
    let (b, log) = chunked(0, BatchConfig::default());
    let mut h = b.handle().unwrap();
    let prompt = toks(10..110);
    assert_echoes(&h.forward(&prompt, 0).unwrap(), &prompt);
    assert_eq!(*log.lock().unwrap(), vec![vec![(0, 0, 100)]]);
}

#[test]
fn while_no_sequence_decodes_a_pass_takes_several_chunks() {
    const BUDGET: usize = 8;
    let (b, log) = chunked(BUDGET, BatchConfig::default());
    let mut h = b.handle().unwrap();
    let idle = BUDGET * IDLE_PREFILL_CHUNKS;
    let prompt = toks(10..10 + idle as u32 + 5);
    assert_echoes(&h.forward(&prompt, 0).unwrap(), &prompt);
    assert_eq!(
        *log.lock().unwrap(),
        vec![vec![(0, 0, idle)], vec![(0, idle, 5)]]
    );
}

#[test]
fn prompts_sent_together_to_an_idle_loop_are_fed_in_one_pass() {
    const BUDGET: usize = 8;
    const N: usize = 4;
    // The prompts come 20 ms apart; a wide window, so that they stay
    // inside it on a loaded machine.
    let (b, log) = chunked(
        BUDGET,
        BatchConfig::default().gather_new(Duration::from_millis(300)),
    );
    let len = BUDGET * IDLE_PREFILL_CHUNKS / N;
    let start = Arc::new(Barrier::new(N));
    let threads: Vec<_> = (0..N as u32)
        .map(|k| {
            let mut h = b.handle().unwrap();
            let start = start.clone();
            std::thread::spawn(move || {
                let mut seq = toks(100 * k..100 * k + len as u32);
                start.wait();
                std::thread::sleep(Duration::from_millis(20 * k as u64));
                assert_echoes(&h.forward(&seq, 0).unwrap(), &seq);
                for i in 0..3u32 {
                    let t = TokenId(1000 + i);
                    let l = h.forward(&[t], seq.len()).unwrap();
                    seq.push(t);
                    assert_echoes(&l, &seq);
                }
                h.reset();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let log = log.lock().unwrap();
    // The four prompts, whole, in the first pass (four times the budget of
    // a pass beside decoding sequences).
    let mut first = log[0].clone();
    first.sort();
    let want: Vec<Row> = (0..N as u32).map(|k| (k, 0, len)).collect();
    assert_eq!(first, want, "{log:?}");
    assert_eq!(b.active(), 0);
}

/// Feeds `prompts` one after the other on one handle (as sequential
/// requests do), each followed by one decode step; the rows that fed each
/// prompt, and each prompt's logits.
fn run_prompts(
    forks: bool,
    cache: usize,
    prompts: &[Vec<TokenId>],
) -> (Vec<Vec<Row>>, Vec<Vec<f32>>, Arc<Batcher<Recorder>>) {
    let (model, log) = recorder(forks);
    let b = Batcher::start_with(
        model,
        BatchConfig::default()
            .prefill_chunk(16)
            .prefix_cache_bytes(cache),
    );
    let mut h = b.handle().unwrap();
    let mut rows = Vec::new();
    let mut out = Vec::new();
    for p in prompts {
        let before = log.lock().unwrap().len();
        let l = h.forward(p, 0).unwrap();
        rows.push(log.lock().unwrap()[before..].concat());
        let l2 = h.forward(&[TokenId(7)], p.len()).unwrap();
        let mut all = p.clone();
        all.push(TokenId(7));
        assert_echoes(&l2, &all);
        out.push(l);
        h.reset();
    }
    (rows, out, b)
}

fn starts_and_tokens(rows: &[Vec<Row>]) -> Vec<(usize, usize)> {
    rows.iter()
        .map(|r| (r[0].1, r.iter().map(|x| x.2).sum()))
        .collect()
}

#[test]
fn a_shared_prompt_prefix_is_fed_once_and_the_logits_do_not_change() {
    let system = toks(100..140); // 40 shared tokens
    let mut p1 = system.clone();
    p1.extend(toks(200..210));
    let mut p2 = system.clone();
    p2.extend(toks(300..305));
    let p3 = p2.clone(); // the very same prompt again
    let prompts = [p1, p2, p3];

    let (rows_off, logits_off, _) = run_prompts(true, 0, &prompts);
    let (rows_on, logits_on, b) = run_prompts(true, 1 << 20, &prompts);
    assert_eq!(logits_on, logits_off, "the cache changed the logits");
    for (l, p) in logits_on.iter().zip(&prompts) {
        assert_echoes(l, p);
    }
    // Without the cache every prompt is fed from 0; with it, the second
    // starts where it parts from the first (40) and the third, identical to
    // the second, feeds only its last token.
    assert_eq!(
        starts_and_tokens(&rows_off),
        vec![(0, 50), (0, 45), (0, 45)]
    );
    assert_eq!(starts_and_tokens(&rows_on), vec![(0, 50), (40, 5), (44, 1)]);
    let s = b.prefix_stats();
    assert_eq!((s.hits, s.misses, s.reused_tokens), (2, 1, 40 + 44));
    assert_eq!(s.entries, 2, "{s:?}");
    assert_eq!(s.bytes, (50 + 45) * 4, "{s:?}");
    assert_eq!(b.tokens_fed(), 50 + 5 + 1 + 3);
}

#[test]
fn a_model_that_cannot_fork_caches_nothing() {
    let system = toks(100..140);
    let prompts = [system.clone(), system];
    let (rows, logits, b) = run_prompts(false, 1 << 20, &prompts);
    assert_eq!(logits[0], logits[1]);
    assert_eq!(starts_and_tokens(&rows), vec![(0, 40), (0, 40)]);
    assert_eq!(b.prefix_stats().entries, 0);
}
