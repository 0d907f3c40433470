//! Masks computed during the model's pass (`GenerateConfig::mask_overlap`):
//! the output is bit-identical with and without the overlap, for the same
//! seed, under lazy, eager and pushdown indexes, tight budgets, jump-forward,
//! traces and guidance; and with a model whose pass takes a while, the steps
//! stop waiting for their masks.

use constrain::sampling::SamplingConfig;
use constrain::vocab::{TokenId, Vocabulary};
use constrain::{Compiler, CompilerConfig, DfaConfig, Matcher, Source, TokenIndex};
use constrain_model::generate::{
    generate, generate_guided, generate_traced, GenerateConfig, Generation, Guidance,
};
use constrain_model::{LanguageModel, ModelError};
use constrain_testkit::{tiny, FakeModel};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// The sources: a record schema (lazy past one state), a regex with a
/// counted repetition, a recursive grammar (pushdown).
fn sources() -> Vec<(&'static str, Source)> {
    let record = json!({
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 12},
            "days": {"type": "integer", "minimum": 1, "maximum": 400},
            "ok": {"type": "boolean"},
            "tags": {"type": "array", "items": {"enum": ["a b", "cd", "e"]}, "maxItems": 3}
        },
        "required": ["city", "days", "ok", "tags"],
        "additionalProperties": false
    });
    vec![
        ("record", Source::json_schema(record)),
        (
            "regex",
            Source::regex(r#"\{"id":[0-9]{1,6},"name":"[a-z ]{0,16}"\}"#),
        ),
        (
            "grammar",
            Source::gbnf(
                r#"root ::= "[" (v ("," v)*)? "]"
v ::= [0-9]+ | "[" (v ("," v)*)? "]""#,
            )
            .unwrap(),
        ),
    ]
}

/// A fresh compile (no shared cache), so that each run makes its lazy
/// index's first visits itself; `lazy`: every DFA past one state is lazy.
fn compile(source: &Source, vocab: &Arc<Vocabulary>, lazy: bool) -> Arc<TokenIndex> {
    let config = CompilerConfig::default().dfa(DfaConfig::default().lazy_states(if lazy {
        Some(1)
    } else {
        None
    }));
    let c = Compiler::new(vocab.clone(), config);
    c.compile(source).unwrap().index().clone()
}

/// Everything a generation returns that must not depend on the overlap.
fn same(a: &Generation, b: &Generation, what: &str) {
    assert_eq!(a.tokens, b.tokens, "{what}: tokens");
    assert_eq!(a.bytes, b.bytes, "{what}: bytes");
    assert_eq!(a.stop, b.stop, "{what}: stop");
    assert_eq!(a.accepted, b.accepted, "{what}: accepted");
    let (x, y) = (&a.stats, &b.stats);
    assert_eq!(x.forced_tokens, y.forced_tokens, "{what}: forced");
    assert_eq!(x.budget_redraws, y.budget_redraws, "{what}: redraws");
    assert_eq!(x.model_calls, y.model_calls, "{what}: model calls");
    assert_eq!(x.mask.steps, y.mask.steps, "{what}: masked steps");
}

#[test]
fn the_output_is_the_same_with_and_without_the_overlap() {
    let t = tiny::tokenizer().unwrap();
    let vocab = Arc::new(t.vocab.clone());
    let width = vocab.logits_width();
    let prompt = t.tokenizer.encode("Go.").unwrap();
    let mut runs = 0;
    let mut masked = 0;
    for (name, source) in sources() {
        for lazy in [true, false] {
            let needed = Matcher::from_index(compile(&source, &vocab, lazy))
                .tokens_to_accept()
                .unwrap() as usize;
            for max in [needed, needed + 3, 64] {
                for (seed, sampling) in [
                    (1, SamplingConfig::greedy()),
                    (2, SamplingConfig::default()),
                    (3, SamplingConfig::default()),
                ] {
                    for jump in [true, false] {
                        let run = |overlap: bool, traced: bool| {
                            let idx = compile(&source, &vocab, lazy);
                            let mut g = Matcher::from_index(idx);
                            let mut model = FakeModel::random(width, seed);
                            let cfg = GenerateConfig::default()
                                .max_tokens(max)
                                .sampling(sampling.clone())
                                .seed(seed)
                                .jump_forward(jump)
                                .mask_overlap(overlap);
                            let mut streamed = Vec::new();
                            let mut on = |b: &[u8]| streamed.extend_from_slice(b);
                            let (out, steps) = if traced {
                                generate_traced(
                                    &mut model,
                                    &vocab,
                                    Some(&t.tokenizer),
                                    Some(&mut g),
                                    &prompt,
                                    &cfg,
                                    &mut on,
                                )
                                .unwrap()
                            } else {
                                let o = generate(
                                    &mut model,
                                    &vocab,
                                    Some(&t.tokenizer),
                                    Some(&mut g),
                                    &prompt,
                                    &cfg,
                                    &mut on,
                                )
                                .unwrap();
                                (o, Vec::new())
                            };
                            assert_eq!(streamed, out.bytes);
                            (out, serde_json::to_string(&steps).unwrap())
                        };
                        let what = format!("{name} lazy={lazy} max={max} seed={seed} jump={jump}");
                        let (off, _) = run(false, false);
                        let (on, _) = run(true, false);
                        same(&off, &on, &what);
                        assert!(off.accepted, "{what}: not accepted");
                        // Without the overlap every masked step waits.
                        assert_eq!(off.stats.mask.waited, off.stats.mask.steps, "{what}");
                        if seed == 2 {
                            let (off_t, trace_off) = run(false, true);
                            let (on_t, trace_on) = run(true, true);
                            same(&off_t, &on_t, &format!("{what} traced"));
                            same(&off, &on_t, &format!("{what} traced vs plain"));
                            assert_eq!(trace_off, trace_on, "{what}: traces");
                        }
                        runs += 1;
                        masked += on.stats.mask.steps;
                    }
                }
            }
        }
    }
    assert_eq!(runs, 3 * 2 * 3 * 3 * 2);
    assert!(masked > runs, "too few masked steps: {masked}");
}

#[test]
fn guided_generation_is_the_same_with_and_without_the_overlap() {
    let t = tiny::tokenizer().unwrap();
    let vocab = Arc::new(t.vocab.clone());
    let width = vocab.logits_width();
    let prompt = t.tokenizer.encode("Go.").unwrap();
    for (name, source) in sources() {
        for seed in [4u64, 5] {
            let run = |overlap: bool, contrastive: bool| {
                let mut g = Matcher::from_index(compile(&source, &vocab, true));
                let mut model = FakeModel::random(width, seed);
                let mut second = FakeModel::random(width, seed + 100);
                let guidance = if contrastive {
                    Guidance::Contrastive {
                        amateur: &mut second,
                        alpha: 0.1,
                    }
                } else {
                    Guidance::ClassifierFree {
                        uncond: &mut second,
                        negative_prompt: Vec::new(),
                        scale: 1.5,
                    }
                };
                let cfg = GenerateConfig::default()
                    .max_tokens(48)
                    .seed(seed)
                    .mask_overlap(overlap);
                generate_guided(
                    &mut model,
                    &vocab,
                    Some(&t.tokenizer),
                    Some(&mut g),
                    &prompt,
                    &cfg,
                    guidance,
                    &mut |_| {},
                )
                .unwrap()
            };
            for contrastive in [false, true] {
                let what = format!("{name} seed={seed} contrastive={contrastive}");
                same(&run(false, contrastive), &run(true, contrastive), &what);
            }
        }
    }
}

/// A model whose pass takes `delay` (a real model's pass takes
/// milliseconds; the fake one's, microseconds).
struct Slow {
    inner: FakeModel,
    delay: Duration,
}

impl LanguageModel for Slow {
    fn forward(&mut self, tokens: &[TokenId], pos: usize) -> Result<Vec<f32>, ModelError> {
        std::thread::sleep(self.delay);
        self.inner.forward(tokens, pos)
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

#[test]
fn with_a_pass_that_takes_a_while_the_steps_do_not_wait_for_their_masks() {
    let t = tiny::tokenizer().unwrap();
    let vocab = Arc::new(t.vocab.clone());
    let width = vocab.logits_width();
    let prompt = t.tokenizer.encode("Go.").unwrap();
    let (_, source) = sources().remove(0);
    let run = |overlap: bool| {
        let mut g = Matcher::from_index(compile(&source, &vocab, true));
        let mut model = Slow {
            inner: FakeModel::random(width, 7),
            delay: Duration::from_millis(20),
        };
        let cfg = GenerateConfig::default()
            .max_tokens(40)
            .seed(7)
            .jump_forward(false)
            .mask_overlap(overlap);
        generate(
            &mut model,
            &vocab,
            Some(&t.tokenizer),
            Some(&mut g),
            &prompt,
            &cfg,
            &mut |_| {},
        )
        .unwrap()
    };
    let off = run(false);
    let on = run(true);
    same(&off, &on, "slow model");
    let steps = on.stats.mask.steps;
    assert!(steps >= 5, "{steps} masked steps");
    assert_eq!(off.stats.mask.waited, steps);
    // The worker needs microseconds of a 20 ms pass: a step that still
    // waits is one whose worker was not scheduled for the whole pass (a
    // loaded machine), allowed for a few.
    assert!(
        on.stats.mask.waited * 4 <= steps,
        "{} of {steps} steps waited with the overlap",
        on.stats.mask.waited
    );
}
