//! Speculative decoding in the generation loop, with scripted models whose
//! logits are a function of the sequence (so a model cannot tell how often
//! it was called): greedy speculative equals greedy with the target alone,
//! token for token, for several constraints, drafts (identical, noisy,
//! independent, adversarial), K, budgets and jump-forward on and off, also
//! when the models cannot rewind their KV cache; sampled outputs always
//! validate against their JSON Schema (`jsonschema` crate) within the budget;
//! the target verifies each round in one `forward_all` call; and, by
//! sampling many times, the output distribution equals the target's (a
//! chi-square test at significance 0.001, seeded).

use constrain::sampling::SamplingConfig;
use constrain::vocab::{TokenId, Vocabulary};
use constrain::{Matcher, TokenIndex};
use constrain_model::generate::{
    generate, generate_speculative, generate_speculative_traced, generate_traced, GenerateConfig,
    GenerateError, Generation, SpeculativeConfig,
};
use constrain_model::{LanguageModel, ModelError};
use constrain_testkit::tiny::regex_index as index;
use constrain_testkit::{tiny, FakeModel};
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::sync::Arc;

const STR: &str = r#""([^"\\\x00-\x1F]|\\(["\\/bfnrt]|u[0-9a-fA-F]{4}))*""#;
const INT: &str = r"(0|-?[1-9][0-9]{0,8})";

/// A record schema and the regex it compiles to (by hand, so these tests do
/// not depend on the schema compiler).
fn record() -> (Value, String) {
    let schema = json!({
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer"},
            "ok": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["city", "days", "ok", "tags"],
        "additionalProperties": false
    });
    let re = format!(
        r#"\{{"city":{STR},"days":{INT},"ok":(true|false),"tags":\[({STR}(,{STR})*)?\]\}}"#
    );
    (schema, re)
}

/// A two-tool call and its regex.
fn tool_call() -> (Value, String) {
    let schema = json!({"anyOf": [
        {"type": "object", "properties": {
            "name": {"const": "get_weather"},
            "arguments": {"type": "object", "properties": {
                "city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
                "required": ["city", "unit"], "additionalProperties": false}},
         "required": ["name", "arguments"], "additionalProperties": false},
        {"type": "object", "properties": {
            "name": {"const": "add"},
            "arguments": {"type": "object", "properties": {
                "a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"], "additionalProperties": false}},
         "required": ["name", "arguments"], "additionalProperties": false}
    ]});
    let re = format!(
        r#"\{{"name":"get_weather","arguments":\{{"city":{STR},"unit":"(celsius|fahrenheit)"\}}\}}|\{{"name":"add","arguments":\{{"a":{INT},"b":{INT}\}}\}}"#
    );
    (schema, re)
}

/// A list of small words: schema-free, checked with the `regex` crate.
const WORDS: &str = r#"\[("[a-z]{1,6}"(,"[a-z]{1,6}"){0,5})?\]"#;

fn hash(seq: &[TokenId], salt: u64) -> u64 {
    constrain_testkit::sequence_hash(seq, salt)
}

/// The drafts (and targets) the tests use; all are functions of the
/// sequence.
#[derive(Copy, Clone, Debug)]
enum Kind {
    /// Random logits in [-4, 4) seeded by the sequence and `salt`.
    Random(u64),
    /// `Random(salt)` plus noise of amplitude 2 (a draft that mostly agrees).
    Noisy(u64),
    /// Prefers exactly what the guide forbids (+50), random otherwise.
    Forbidden(u64),
    /// EOS and closing characters far above the rest.
    Eager(u64),
}

fn model(
    kind: Kind,
    vocab: &Arc<Vocabulary>,
    idx: &Arc<TokenIndex>,
    prompt_len: usize,
) -> FakeModel {
    let width = vocab.logits_width();
    let (vocab, idx) = (vocab.clone(), idx.clone());
    FakeModel::new(width, move |seq| {
        let random = |salt: u64, amp: f32| -> Vec<f32> {
            let mut rng = rand::rngs::StdRng::seed_from_u64(hash(seq, salt));
            (0..width).map(|_| rng.random_range(-amp..amp)).collect()
        };
        match kind {
            Kind::Random(s) => random(s, 4.0),
            Kind::Noisy(s) => random(s, 4.0)
                .into_iter()
                .zip(random(s ^ 0xdead, 2.0))
                .map(|(a, b)| a + b)
                .collect(),
            Kind::Forbidden(s) => {
                let mut l = random(s, 1.0);
                let mut g = Matcher::from_index(idx.clone());
                for &t in &seq[prompt_len.min(seq.len())..] {
                    if g.advance(t).is_err() {
                        break;
                    }
                }
                for (i, x) in l.iter_mut().enumerate() {
                    if !g.is_allowed(TokenId(i as u32)) {
                        *x += 50.0;
                    }
                }
                l
            }
            Kind::Eager(s) => {
                let mut l = random(s, 1.0);
                for &e in vocab.eos() {
                    l[e.as_usize()] = 60.0;
                }
                for (t, b) in vocab.text_tokens() {
                    if b.iter().any(|c| b"\"}]".contains(c)) {
                        l[t.as_usize()] += 30.0;
                    }
                }
                l
            }
        }
    })
}

/// Wraps a model: counts `forward_all` calls and can refuse to rewind.
struct Counting<M> {
    inner: M,
    forward_all_calls: usize,
    can_truncate: bool,
}

impl<M: LanguageModel> LanguageModel for Counting<M> {
    fn forward(&mut self, tokens: &[TokenId], pos: usize) -> Result<Vec<f32>, ModelError> {
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
    fn truncate(&mut self, len: usize) -> bool {
        self.can_truncate && self.inner.truncate(len)
    }
    fn forward_all(&mut self, tokens: &[TokenId], pos: usize) -> Result<Vec<Vec<f32>>, ModelError> {
        self.forward_all_calls += 1;
        self.inner.forward_all(tokens, pos)
    }
}

fn counting(inner: FakeModel, can_truncate: bool) -> Counting<FakeModel> {
    Counting {
        inner,
        forward_all_calls: 0,
        can_truncate,
    }
}

struct Setup {
    t: constrain_model::GgufTokenizer,
    vocab: Arc<Vocabulary>,
    idx: Arc<TokenIndex>,
    prompt: Vec<TokenId>,
    needed: usize,
}

fn setup(re: &str) -> Setup {
    let t = tiny::tokenizer().unwrap();
    let vocab = Arc::new(t.vocab.clone());
    let idx = index(re, &vocab);
    let prompt = t.tokenizer.encode("Go.").unwrap();
    let needed = Matcher::from_index(idx.clone()).tokens_to_accept().unwrap() as usize;
    Setup {
        t,
        vocab,
        idx,
        prompt,
        needed,
    }
}

fn plain(s: &Setup, target: Kind, cfg: &GenerateConfig) -> Generation {
    let mut m = model(target, &s.vocab, &s.idx, s.prompt.len());
    let mut g = Matcher::from_index(s.idx.clone());
    generate(
        &mut m,
        &s.vocab,
        Some(&s.t.tokenizer),
        Some(&mut g),
        &s.prompt,
        cfg,
        &mut |_| {},
    )
    .unwrap()
}

/// Runs speculative decoding; returns the generation, the streamed bytes,
/// and the target's `forward_all` calls.
fn speculative(
    s: &Setup,
    target: Kind,
    draft: Kind,
    k: usize,
    cfg: &GenerateConfig,
    can_truncate: bool,
) -> (Generation, Vec<u8>, usize) {
    let mut tm = counting(
        model(target, &s.vocab, &s.idx, s.prompt.len()),
        can_truncate,
    );
    let mut dm = counting(model(draft, &s.vocab, &s.idx, s.prompt.len()), can_truncate);
    let mut g = Matcher::from_index(s.idx.clone());
    let mut streamed = Vec::new();
    let out = generate_speculative(
        &mut tm,
        &mut dm,
        &s.vocab,
        Some(&s.t.tokenizer),
        Some(&mut g),
        &s.prompt,
        cfg,
        &SpeculativeConfig::fixed(k),
        &mut |b| streamed.extend_from_slice(b),
    )
    .unwrap_or_else(|e| panic!("target {target:?} draft {draft:?} K {k}: {e}"));
    (out, streamed, tm.forward_all_calls)
}

fn check_valid(out: &Generation, schema: &Value, what: &str) {
    assert!(out.accepted, "{what}: not accepted: {:?}", out.text());
    let text = std::str::from_utf8(&out.bytes).unwrap();
    let v: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{what}: {e}: {text:?}"));
    let validator = jsonschema::validator_for(schema).unwrap();
    if let Err(e) = validator.validate(&v) {
        panic!("{what}: {text} does not validate: {e}");
    }
}

const DRAFTS: [Kind; 5] = [
    Kind::Random(1),
    Kind::Noisy(1),
    Kind::Random(2),
    Kind::Forbidden(3),
    Kind::Eager(4),
];

#[test]
fn greedy_speculative_equals_greedy_with_the_target_alone() {
    let (_, record_re) = record();
    let (_, tool_re) = tool_call();
    let mut compared = 0;
    let mut rejected = 0;
    for re in [record_re.as_str(), tool_re.as_str(), WORDS] {
        let s = setup(re);
        for target in [Kind::Random(1), Kind::Forbidden(5)] {
            for max in [s.needed, s.needed + 3, 60] {
                for jump in [true, false] {
                    let cfg = GenerateConfig::greedy(max).jump_forward(jump);
                    let want = plain(&s, target, &cfg);
                    for draft in DRAFTS {
                        for k in [1, 3, 5] {
                            let what = format!("{re} target {target:?} draft {draft:?} K {k} max {max} jump {jump}");
                            let (got, streamed, _) = speculative(&s, target, draft, k, &cfg, true);
                            assert_eq!(got.tokens, want.tokens, "{what}");
                            assert_eq!(got.bytes, want.bytes, "{what}");
                            assert_eq!(got.stop, want.stop, "{what}");
                            assert_eq!(got.accepted, want.accepted, "{what}");
                            assert_eq!(streamed, got.bytes, "{what}: stream");
                            assert_eq!(got.stats.forced_tokens, want.stats.forced_tokens, "{what}");
                            let st = got.stats.speculative.clone().unwrap();
                            assert!(st.accepted <= st.drafted, "{what}");
                            rejected += st.drafted - st.accepted;
                            if matches!((target, draft), (Kind::Random(a), Kind::Random(b)) if a == b)
                            {
                                assert_eq!(
                                    st.accepted, st.drafted,
                                    "{what}: the target itself as draft"
                                );
                            }
                            compared += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(
        compared > 500 && rejected > 100,
        "{compared} runs, {rejected} rejections"
    );
}

/// Models that cannot rewind their KV cache are fed again from position 0:
/// slower, same output.
#[test]
fn models_that_cannot_rewind_give_the_same_output() {
    let (_, re) = record();
    let s = setup(&re);
    for k in [2, 4] {
        for max in [s.needed + 2, 50] {
            let cfg = GenerateConfig::greedy(max);
            let want = plain(&s, Kind::Random(7), &cfg);
            let (a, _, _) = speculative(&s, Kind::Random(7), Kind::Noisy(7), k, &cfg, false);
            let (b, _, _) = speculative(&s, Kind::Random(7), Kind::Noisy(7), k, &cfg, true);
            assert_eq!(a.tokens, want.tokens);
            assert_eq!(b.tokens, want.tokens);
            let sampled = GenerateConfig::default().seed(11);
            let sampled = sampled.max_tokens(max);
            let (a, _, _) = speculative(&s, Kind::Random(7), Kind::Noisy(7), k, &sampled, false);
            let (b, _, _) = speculative(&s, Kind::Random(7), Kind::Noisy(7), k, &sampled, true);
            assert_eq!(
                a.tokens, b.tokens,
                "the random stream does not depend on rewinding"
            );
        }
    }
}

/// Each round is verified in at most one `forward_all` call of the target;
/// with the target itself as draft every proposal is kept and a round yields
/// K + 1 tokens.
#[test]
fn one_verification_pass_per_round() {
    let s = setup("[a-z]{24}");
    let cfg = GenerateConfig::greedy(60).jump_forward(false);
    for k in [1, 2, 4, 8] {
        let (out, _, calls) = speculative(&s, Kind::Random(3), Kind::Random(3), k, &cfg, true);
        let st = out.stats.speculative.clone().unwrap();
        assert!(
            calls <= st.rounds,
            "K {k}: {calls} calls, {} rounds",
            st.rounds
        );
        assert_eq!(st.accepted, st.drafted);
        assert_eq!(out.bytes.len(), 24, "{:?}", out.text());
        // Every round but the last yields K + 1 tokens.
        assert!(
            out.tokens.len() + 1 >= (st.rounds - 1) * (k + 1),
            "K {k}: {} tokens in {} rounds",
            out.tokens.len(),
            st.rounds
        );
        assert!(st.mean_accepted_length() > 0.0 && st.acceptance_rate() == 1.0);
    }
}

#[test]
fn sampled_speculative_outputs_always_validate() {
    let configs = [
        SamplingConfig::default(),
        SamplingConfig::default()
            .temperature(0.7)
            .top_k(20)
            .top_p(0.9),
        SamplingConfig::default()
            .temperature(1.3)
            .min_p(0.05)
            .repetition_penalty(1.3),
    ];
    for (schema, re) in [record(), tool_call()] {
        let s = setup(&re);
        for target in [Kind::Random(1), Kind::Forbidden(2), Kind::Eager(3)] {
            for draft in DRAFTS {
                for max in [s.needed, s.needed + 2, 48] {
                    for (i, sampling) in configs.iter().enumerate() {
                        let cfg = GenerateConfig::default()
                            .max_tokens(max)
                            .sampling(sampling.clone())
                            .seed(i as u64 * 31 + max as u64)
                            .jump_forward(max % 2 == 0)
                            .ignore_eos(false)
                            .mask_overlap(true);
                        let what =
                            format!("target {target:?} draft {draft:?} max {max} config {i}");
                        let (out, streamed, _) = speculative(&s, target, draft, 3, &cfg, true);
                        check_valid(&out, &schema, &what);
                        assert!(out.tokens.len() <= max, "{what}");
                        assert_eq!(streamed, out.bytes, "{what}");
                        assert_eq!(s.vocab.decode(&out.tokens), out.bytes, "{what}");
                    }
                }
            }
        }
    }
}

/// On `[a-e][a-e]` with fixed (sequence-dependent) logits, the texts
/// speculative decoding produces are distributed as the target's masked
/// softmax (computed exactly): a chi-square test over the 25 texts at
/// significance 0.001 (critical value 51.18 for 24 degrees of freedom),
/// seeded, with a draft that disagrees often.
#[test]
fn output_distribution_is_the_targets() {
    let s = setup("[a-e][a-e]");
    let letters: Vec<TokenId> = (b'a'..=b'e')
        .map(|c| {
            s.vocab
                .text_tokens()
                .find(|&(_, b)| b == [c])
                .map(|(t, _)| t)
                .unwrap()
        })
        .collect();
    // Only single letters can spell the language (no merged pair exists).
    let allowed = Matcher::from_index(s.idx.clone()).allowed().len();
    assert_eq!(
        allowed, 5,
        "the first position allows the five letters only"
    );
    let width = s.vocab.logits_width();
    let target = Kind::Random(21);
    let target_logits = |seq: &[TokenId]| {
        let mut m = model(target, &s.vocab, &s.idx, s.prompt.len());
        m.forward(seq, 0).unwrap()
    };
    let softmax_over = |l: &[f32]| -> Vec<f64> {
        let xs: Vec<f64> = letters.iter().map(|t| l[t.as_usize()] as f64).collect();
        let m = xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = xs.iter().map(|x| (x - m).exp()).collect();
        let z: f64 = e.iter().sum();
        e.into_iter().map(|x| x / z).collect()
    };
    let mut expected = vec![0.0f64; 25];
    let p1 = softmax_over(&target_logits(&s.prompt));
    for (i, &a) in letters.iter().enumerate() {
        let seq: Vec<TokenId> = s.prompt.iter().copied().chain([a]).collect();
        let p2 = softmax_over(&target_logits(&seq));
        for j in 0..5 {
            expected[i * 5 + j] = p1[i] * p2[j];
        }
    }
    let n = 6000;
    let mut counts = vec![0usize; 25];
    let mut drafted = 0;
    let mut accepted = 0;
    for seed in 0..n {
        let cfg = GenerateConfig::default().max_tokens(2).seed(seed);
        let (out, _, _) = speculative(&s, target, Kind::Random(99), 2, &cfg, true);
        let b = &out.bytes;
        assert_eq!(b.len(), 2);
        counts[(b[0] - b'a') as usize * 5 + (b[1] - b'a') as usize] += 1;
        let st = out.stats.speculative.unwrap();
        drafted += st.drafted;
        accepted += st.accepted;
    }
    let chi2: f64 = counts
        .iter()
        .zip(&expected)
        .map(|(&o, &p)| {
            let e = p * n as f64;
            (o as f64 - e).powi(2) / e
        })
        .sum();
    assert!(
        chi2 < 51.18,
        "chi-square {chi2:.2} >= 51.18: counts {counts:?}, expected {expected:?}"
    );
    // The draft disagrees often enough for the residual to matter.
    assert!(accepted < drafted * 9 / 10, "{accepted}/{drafted} accepted");
    assert!(accepted > 0);
    let _ = width;
}

#[test]
fn bad_drafts_are_errors() {
    let s = setup(WORDS);
    let width = s.vocab.logits_width();
    let run = |draft: &mut FakeModel, k: usize| {
        let mut target = FakeModel::uniform(width);
        let mut g = Matcher::from_index(s.idx.clone());
        generate_speculative(
            &mut target,
            draft,
            &s.vocab,
            Some(&s.t.tokenizer),
            Some(&mut g),
            &s.prompt,
            &GenerateConfig::greedy(20),
            &SpeculativeConfig::fixed(k),
            &mut |_| {},
        )
    };
    let e = run(&mut FakeModel::uniform(width + 1), 2).unwrap_err();
    assert!(
        matches!(e, GenerateError::SecondModelWidth { role: "draft", .. }),
        "{e}"
    );
    assert!(e.to_string().contains("draft"), "{e}");
    let e = run(&mut FakeModel::uniform(width), 0).unwrap_err();
    assert!(matches!(e, GenerateError::ZeroDraftTokens), "{e}");
    let e = run(&mut FakeModel::uniform(width).with_context_length(5), 2).unwrap_err();
    assert!(matches!(e, GenerateError::ContextTooSmall { .. }), "{e}");
}

/// The matcher's rollback window: a window shorter than K is refused before
/// anything runs; a window of exactly K is enough, also where jump-forward
/// forces stretches longer than K (the draft asks a copy of the matcher
/// whether a forced continuation follows, never rolling them back), and
/// the output is the target's alone.
#[test]
fn a_rollback_window_of_k_is_enough_and_a_shorter_one_is_refused() {
    let (_, re) = record();
    let s = setup(&re);
    let cfg = GenerateConfig::greedy(60);
    let want = plain(&s, Kind::Random(1), &cfg);
    assert!(want.stats.forced_tokens > 3, "the record forces its keys");
    for k in [1, 2, 4] {
        for window in [k - 1, k, k + 3] {
            let mut tm = model(Kind::Random(1), &s.vocab, &s.idx, s.prompt.len());
            let mut dm = model(Kind::Noisy(1), &s.vocab, &s.idx, s.prompt.len());
            let mut g = Matcher::from_index(s.idx.clone()).with_max_rollback(window);
            let r = generate_speculative(
                &mut tm,
                &mut dm,
                &s.vocab,
                Some(&s.t.tokenizer),
                Some(&mut g),
                &s.prompt,
                &cfg,
                &SpeculativeConfig::fixed(k),
                &mut |_| {},
            );
            if window < k {
                let e = r.unwrap_err();
                assert!(
                    matches!(e, GenerateError::RollbackWindow { window: w, draft_tokens } if w == window && draft_tokens == k),
                    "{e}"
                );
                assert!(e.to_string().contains("with_max_rollback"), "{e}");
            } else {
                let out = r.unwrap_or_else(|e| panic!("K {k} window {window}: {e}"));
                assert_eq!(out.tokens, want.tokens, "K {k} window {window}");
                let st = out.stats.speculative.unwrap();
                assert!(st.drafted > st.accepted, "some proposals were rolled back");
            }
        }
    }
}

/// The adaptive schedule changes the draft length, never the output: under
/// greedy it equals the target alone for every draft, with rounds that
/// draft and (with a target whose passes cost more than a draft's gain)
/// plain steps counted apart.
#[test]
fn adaptive_draft_length_keeps_greedy_identity() {
    let (_, re) = record();
    let s = setup(&re);
    for max in [s.needed, 60] {
        let cfg = GenerateConfig::greedy(max);
        let want = plain(&s, Kind::Random(1), &cfg);
        for draft in DRAFTS {
            for k in [1, 4] {
                let mut tm = model(Kind::Random(1), &s.vocab, &s.idx, s.prompt.len());
                let mut dm = model(draft, &s.vocab, &s.idx, s.prompt.len());
                let mut g = Matcher::from_index(s.idx.clone());
                let out = generate_speculative(
                    &mut tm,
                    &mut dm,
                    &s.vocab,
                    Some(&s.t.tokenizer),
                    Some(&mut g),
                    &s.prompt,
                    &cfg,
                    &SpeculativeConfig::adaptive(k),
                    &mut |_| {},
                )
                .unwrap();
                assert_eq!(out.tokens, want.tokens, "{draft:?} K {k} max {max}");
                assert_eq!(out.stop, want.stop);
                let st = out.stats.speculative.unwrap();
                assert!(st.rounds >= 1, "the first round drafts");
                assert!(st.accepted <= st.drafted);
            }
        }
    }
}

/// `generate_speculative_traced` records the target's distribution: under
/// greedy its steps are the steps of the target traced alone (same tokens,
/// forced flags, log-probabilities, top logits and masses), for any draft
/// and K, and tracing changes nothing in the output.
#[test]
fn speculative_trace_is_the_targets_trace() {
    let (_, record_re) = record();
    for re in [record_re.as_str(), WORDS] {
        let s = setup(re);
        for max in [s.needed + 2, 60] {
            let cfg = GenerateConfig::greedy(max);
            let mut tm = model(Kind::Random(1), &s.vocab, &s.idx, s.prompt.len());
            let mut g = Matcher::from_index(s.idx.clone());
            let (want, want_steps) = generate_traced(
                &mut tm,
                &s.vocab,
                Some(&s.t.tokenizer),
                Some(&mut g),
                &s.prompt,
                &cfg,
                &mut |_| {},
            )
            .unwrap();
            assert_eq!(want_steps.len(), want.tokens.len());
            for draft in DRAFTS {
                for k in [1, 3] {
                    let what = format!("{re} {draft:?} K {k} max {max}");
                    let mut tm = model(Kind::Random(1), &s.vocab, &s.idx, s.prompt.len());
                    let mut dm = model(draft, &s.vocab, &s.idx, s.prompt.len());
                    let mut g = Matcher::from_index(s.idx.clone());
                    let (got, steps) = generate_speculative_traced(
                        &mut tm,
                        &mut dm,
                        &s.vocab,
                        Some(&s.t.tokenizer),
                        Some(&mut g),
                        &s.prompt,
                        &cfg,
                        &SpeculativeConfig::fixed(k),
                        &mut |_| {},
                    )
                    .unwrap();
                    assert_eq!(got.tokens, want.tokens, "{what}");
                    assert_eq!(steps, want_steps, "{what}");
                    let (untraced, _, _) = speculative(&s, Kind::Random(1), draft, k, &cfg, true);
                    assert_eq!(
                        untraced.tokens, got.tokens,
                        "{what}: tracing changed the output"
                    );
                    assert_eq!(
                        untraced.stats.speculative.map(|s| (s.drafted, s.accepted)),
                        got.stats.speculative.map(|s| (s.drafted, s.accepted)),
                        "{what}"
                    );
                }
            }
        }
    }
}

/// Sampled speculative decoding with a trace: one step per output token, in
/// order, each sampled step's token allowed by its own mask and listed with
/// its logit, forced steps with none; the output is the untraced one.
#[test]
fn sampled_speculative_trace_covers_every_token() {
    let (schema, re) = record();
    let s = setup(&re);
    for seed in 0..6 {
        let cfg = GenerateConfig::greedy(60)
            .sampling(SamplingConfig::default().temperature(0.9))
            .seed(seed);
        let mut tm = model(Kind::Random(1), &s.vocab, &s.idx, s.prompt.len());
        let mut dm = model(Kind::Noisy(1), &s.vocab, &s.idx, s.prompt.len());
        let mut g = Matcher::from_index(s.idx.clone());
        let (out, steps) = generate_speculative_traced(
            &mut tm,
            &mut dm,
            &s.vocab,
            Some(&s.t.tokenizer),
            Some(&mut g),
            &s.prompt,
            &cfg,
            &SpeculativeConfig::fixed(3),
            &mut |_| {},
        )
        .unwrap();
        check_valid(&out, &schema, "traced");
        let (untraced, _, _) = speculative(&s, Kind::Random(1), Kind::Noisy(1), 3, &cfg, true);
        assert_eq!(untraced.tokens, out.tokens, "seed {seed}");
        let eos = out.tokens.len() < steps.len();
        assert_eq!(steps.len(), out.tokens.len() + eos as usize, "seed {seed}");
        for (i, st) in steps.iter().enumerate() {
            assert_eq!(st.step, i);
            if let Some(&t) = out.tokens.get(i) {
                assert_eq!(st.token.id, t.0);
            }
            if st.forced {
                assert!(st.top.is_empty() && st.token.logit.is_none());
            } else {
                assert!(st.token.logit.is_some() && !st.top.is_empty());
                assert!(st.logprob <= 0.0 && st.logprob.is_finite(), "{st:?}");
            }
        }
    }
}
