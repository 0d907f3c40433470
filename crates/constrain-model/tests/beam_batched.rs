//! Beam search's batched path (all live hypotheses in one pass through a
//! [`SequenceBatch`]) gives exactly the output of the one-by-one path:
//!
//! * on scripted models: a model whose `sequence_batch` keeps one token list
//!   per hypothesis and is rearranged by `reorder` (so a wrong parent, a
//!   missing copy or a stale sequence changes the logits a hypothesis sees),
//!   against the same logits function behind `FakeModel` (no batch: one by
//!   one), over many random models, widths, budgets and length penalties;
//! * on the real Qwen2.5-Coder-0.5B (skips with a message when the GGUF file
//!   is absent): `QwenModel`'s batched pass against [`OneByOne`], on two
//!   an example schema (two with `CONSTRAIN_BEAM_REAL_ALL=1`), 4 beams.

use constrain::vocab::TokenId;
use constrain::{Compiler, CompilerConfig, Matcher, Source};
use constrain_model::generate::{beam_search, BeamConfig, BeamGeneration, OneByOne};
use constrain_model::{LanguageModel, ModelError, SequenceBatch};
use constrain_testkit::tiny::regex_index as index;
use constrain_testkit::{tiny, FakeModel};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

type Logits = Arc<dyn Fn(&[TokenId]) -> Vec<f32> + Send + Sync>;

fn random_logits(width: usize, salt: u64) -> Logits {
    Arc::new(constrain_testkit::hashed_logits(width, salt))
}

/// A scripted model with a batched pass: the logits are `f(sequence)`.
struct Batched {
    f: Logits,
    width: usize,
    seq: Vec<TokenId>,
    /// Batched steps taken, and the widest batch.
    steps: Arc<AtomicUsize>,
    widest: Arc<AtomicUsize>,
}

struct Seqs {
    f: Logits,
    seqs: Vec<Vec<TokenId>>,
    steps: Arc<AtomicUsize>,
    widest: Arc<AtomicUsize>,
}

impl SequenceBatch for Seqs {
    fn len(&self) -> usize {
        self.seqs.len()
    }
    fn reorder(&mut self, parents: &[usize]) -> Result<(), ModelError> {
        if parents.iter().any(|&p| p >= self.seqs.len()) {
            return Err(ModelError::Batch("parent out of range".into()));
        }
        self.seqs = parents.iter().map(|&p| self.seqs[p].clone()).collect();
        Ok(())
    }
    fn step(&mut self, tokens: &[TokenId]) -> Result<Vec<Vec<f32>>, ModelError> {
        assert_eq!(tokens.len(), self.seqs.len(), "one token per sequence");
        self.steps.fetch_add(1, Ordering::Relaxed);
        self.widest.fetch_max(tokens.len(), Ordering::Relaxed);
        Ok(self
            .seqs
            .iter_mut()
            .zip(tokens)
            .map(|(s, &t)| {
                s.push(t);
                (self.f)(s)
            })
            .collect())
    }
}

impl LanguageModel for Batched {
    fn forward(&mut self, tokens: &[TokenId], pos: usize) -> Result<Vec<f32>, ModelError> {
        if pos != 0 && pos != self.seq.len() {
            return Err(ModelError::Position {
                expected: self.seq.len(),
                got: pos,
            });
        }
        self.seq.truncate(pos);
        self.seq.extend_from_slice(tokens);
        Ok((self.f)(&self.seq))
    }
    fn reset(&mut self) {
        self.seq.clear();
    }
    fn logits_width(&self) -> usize {
        self.width
    }
    fn context_length(&self) -> usize {
        1 << 20
    }
    fn truncate(&mut self, len: usize) -> bool {
        if len > self.seq.len() {
            return false;
        }
        self.seq.truncate(len);
        true
    }
    fn sequence_batch(&self, len: usize) -> Option<Box<dyn SequenceBatch>> {
        Some(Box::new(Seqs {
            f: self.f.clone(),
            seqs: vec![self.seq.get(..len)?.to_vec()],
            steps: self.steps.clone(),
            widest: self.widest.clone(),
        }))
    }
}

fn same(a: &BeamGeneration, b: &BeamGeneration, what: &str) {
    assert_eq!(a.tokens, b.tokens, "{what}: tokens");
    assert_eq!(a.bytes, b.bytes, "{what}: bytes");
    assert_eq!(a.logprob.to_bits(), b.logprob.to_bits(), "{what}: logprob");
    assert_eq!(a.score.to_bits(), b.score.to_bits(), "{what}: score");
    assert_eq!(a.from_greedy, b.from_greedy, "{what}: from_greedy");
    assert_eq!(a.greedy, b.greedy, "{what}: greedy");
    assert_eq!(a.candidates, b.candidates, "{what}: candidates");
    assert_eq!(a.accepted, b.accepted, "{what}: accepted");
}

const RE: &str =
    r#"\{"name":"(alpha|beta|gamma)","tags":\[("[a-z]{1,4}"(,"[a-z]{1,4}"){0,3})?\]\}"#;

#[test]
fn batched_beam_equals_one_by_one_on_scripted_models() {
    let t = tiny::tokenizer().unwrap();
    let vocab = Arc::new(t.vocab.clone());
    let width = vocab.logits_width();
    let prompt = t.tokenizer.encode("tags please").unwrap();
    let (steps, widest) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    for re in [RE, "[ac][xyz]{1,3}", r#"(yes|no|maybe)( [a-z]{1,5}){0,4}"#] {
        let idx = index(re, &vocab);
        let needed = Matcher::from_index(idx.clone()).tokens_to_accept().unwrap() as usize;
        for salt in 0..5u64 {
            for beams in [2, 3, 4, 6] {
                for max_tokens in [needed, needed + 2, 40] {
                    for penalty in [0.0, 1.0, 2.0] {
                        let cfg = BeamConfig::default()
                            .beams(beams)
                            .length_penalty(penalty)
                            .max_tokens(max_tokens)
                            .jump_forward(true);
                        let f = random_logits(width, salt);
                        let g = f.clone();
                        let mut plain = FakeModel::new(width, move |s| g(s));
                        let mut batched = Batched {
                            f,
                            width,
                            seq: Vec::new(),
                            steps: steps.clone(),
                            widest: widest.clone(),
                        };
                        let m = Matcher::from_index(idx.clone());
                        let run = |model: &mut dyn LanguageModel| {
                            beam_search(model, &vocab, Some(&t.tokenizer), &m, &prompt, &cfg)
                                .unwrap()
                        };
                        let what =
                            format!("{re} salt {salt} beams {beams} max {max_tokens} A {penalty}");
                        same(&run(&mut batched), &run(&mut plain), &what);
                    }
                }
            }
        }
    }
    assert!(
        steps.load(Ordering::Relaxed) > 0,
        "the batched path never ran"
    );
    assert!(
        widest.load(Ordering::Relaxed) >= 4,
        "no batch held several hypotheses"
    );
}

fn home() -> std::path::PathBuf {
    match std::env::var_os("CONSTRAIN_HOME") {
        Some(h) => h.into(),
        None => std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
            .join(".cache/constrain"),
    }
}

/// `QwenModel`'s own batch (tiny random Qwen2 and Qwen3 GGUF files, F32):
/// the same output as one by one, and a bad reorder is an error.
#[test]
fn batched_beam_equals_one_by_one_on_tiny_qwen_files() {
    use constrain_testkit::tiny::{write_tiny_gguf, TinySpec};
    for arch in ["qwen2", "qwen3"] {
        for seed in [3u64, 11] {
            let path = std::env::temp_dir().join(format!(
                "constrain-beam-batched-{}-{arch}-{seed}.gguf",
                std::process::id()
            ));
            let spec = TinySpec {
                arch: arch.into(),
                seed,
                ..TinySpec::default()
            };
            write_tiny_gguf(&path, &spec).unwrap();
            let loaded =
                constrain_model::load(&path, &constrain_model::TokenizerSource::Gguf).unwrap();
            let _ = std::fs::remove_file(&path);
            let vocab = loaded.vocab.clone();
            let mut model = loaded.model;
            let prompt = loaded.tokenizer.encode("tags please").unwrap();
            let idx = index(r#"(yes|no|maybe)( [a-z]{1,5}){0,4}"#, &vocab);
            let m = Matcher::from_index(idx);
            for (beams, penalty) in [(2, 1.0), (4, 1.0), (4, 0.0)] {
                let cfg = BeamConfig::default()
                    .beams(beams)
                    .length_penalty(penalty)
                    .max_tokens(20)
                    .jump_forward(true);
                let b = beam_search(
                    &mut model,
                    &vocab,
                    Some(&loaded.tokenizer),
                    &m,
                    &prompt,
                    &cfg,
                )
                .unwrap();
                let o = beam_search(
                    &mut OneByOne(&mut model),
                    &vocab,
                    Some(&loaded.tokenizer),
                    &m,
                    &prompt,
                    &cfg,
                )
                .unwrap();
                same(
                    &b,
                    &o,
                    &format!("{arch} seed {seed} beams {beams} A {penalty}"),
                );
            }
            // The batch: past what was fed is none; a parent out of range is an error.
            model.forward(&prompt, 0).unwrap();
            assert!(model.sequence_batch(prompt.len() + 1).is_none());
            assert!(OneByOne(&mut model).sequence_batch(1).is_none());
            let mut batch = model.sequence_batch(prompt.len()).unwrap();
            assert!(matches!(batch.reorder(&[1]), Err(ModelError::Batch(_))));
            assert!(matches!(
                batch.step(&[TokenId(1), TokenId(2)]),
                Err(ModelError::Batch(_))
            ));
            // A parent named twice is copied: both children step alike.
            batch.reorder(&[0, 0]).unwrap();
            let rows = batch.step(&[TokenId(5), TokenId(5)]).unwrap();
            assert_eq!(rows[0], rows[1]);
            assert_eq!(rows[0], model.forward(&[TokenId(5)], prompt.len()).unwrap());
        }
    }
}

/// The real 0.5B, 4 beams on an example schema: batched == one by one,
/// bit for bit (`net/qmm.rs` makes a batched row the same as a single step).
#[test]
fn batched_beam_equals_one_by_one_on_the_real_model() {
    let path = home().join("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    if !path.exists() {
        eprintln!(
            "skipping: {} not found (scripts/fetch-assets)",
            path.display()
        );
        return;
    }
    let loaded = constrain_model::load(&path, &constrain_model::TokenizerSource::Gguf).unwrap();
    let (mut model, tok, vocab) = (loaded.model, loaded.tokenizer, loaded.vocab);
    let root = constrain_testkit::assets::repo_root();
    // One schema by default (the search runs twice, about a minute on a
    // loaded 2-core machine); CONSTRAIN_BEAM_REAL_ALL=1 adds a second.
    let mut cases = vec![("schemas/person.json", "Describe a person named Ada.")];
    if std::env::var_os("CONSTRAIN_BEAM_REAL_ALL").is_some() {
        cases.push((
            "schemas/tool_call.json",
            "Call a tool to get the weather in Paris.",
        ));
    } else {
        eprintln!("note: CONSTRAIN_BEAM_REAL_ALL=1 also runs schemas/tool_call.json");
    }
    for (schema, user) in cases {
        let Ok(text) = std::fs::read_to_string(root.join(schema)) else {
            eprintln!("skipping {schema}: not in this checkout");
            continue;
        };
        let schema_v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let index = Compiler::new(vocab.clone(), CompilerConfig::default())
            .compile(&Source::json_schema(schema_v.clone()))
            .unwrap()
            .index()
            .clone();
        let system = constrain_model::prompt::schema_system_message(&schema_v);
        use constrain_model::prompt::{chatml, Message};
        let p = tok
            .encode(&chatml(&[Message::system(&system), Message::user(user)]))
            .unwrap();
        let cfg = BeamConfig::default()
            .beams(4)
            .length_penalty(1.0)
            .max_tokens(40)
            .jump_forward(true);
        let m = Matcher::from_index(index);
        let b = beam_search(&mut model, &vocab, Some(&tok), &m, &p, &cfg).unwrap();
        let o = beam_search(&mut OneByOne(&mut model), &vocab, Some(&tok), &m, &p, &cfg).unwrap();
        same(&b, &o, schema);
        assert!(b.accepted, "{schema}: {}", b.text());
        assert!(
            b.stats.model_calls < o.stats.model_calls,
            "{schema}: not batched"
        );
    }
}
