//! The generation loop with scripted models: adversarial logits (the model
//! prefers exactly what the guide forbids, random logits, logits that always
//! favour EOS or whitespace or never want to stop), tight budgets,
//! jump-forward, streaming and the error paths. Every constrained output must
//! parse as JSON and validate against its JSON Schema (`jsonschema` crate).

use constrain::sampling::SamplingConfig;
use constrain::vocab::{TokenId, Vocabulary};
use constrain::{Compiler, CompilerConfig, Matcher, Source, TokenIndex};
use constrain_model::generate::{
    generate, tools_schema, Engine, GenerateConfig, GenerateError, Generation, StopReason,
};
use constrain_model::GgufTokenizer;
use constrain_testkit::{tiny, FakeModel};
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

/// JSON string content: any Unicode scalar but `"`, `\` and controls, or an escape.
const STR: &str = r#""([^"\\\x00-\x1F]|\\(["\\/bfnrt]|u[0-9a-fA-F]{4}))*""#;
const INT: &str = r"(0|-?[1-9][0-9]{0,8})";
const WS: &str = r"[ ]?";

/// A record schema and the regex it compiles to (written by hand so these
/// tests do not depend on the schema compiler).
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
        r#"\{{{WS}"city"{WS}:{WS}{STR}{WS},{WS}"days"{WS}:{WS}{INT}{WS},{WS}"ok"{WS}:{WS}(true|false){WS},{WS}"tags"{WS}:{WS}\[({WS}{STR}({WS},{WS}{STR})*)?{WS}\]{WS}\}}"#
    );
    (schema, re)
}

/// A tool-call schema (two tools) and its regex.
fn tool_call() -> (Value, String) {
    let tools = json!([
        {"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"], "additionalProperties": false}}},
        {"type": "function", "function": {"name": "add", "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"], "additionalProperties": false}}}
    ]);
    let schema = tools_schema(&tools).unwrap();
    let re = format!(
        r#"\{{"name":"get_weather","arguments":\{{"city":{STR},"unit":"(celsius|fahrenheit)"\}}\}}|\{{"name":"add","arguments":\{{"a":{INT},"b":{INT}\}}\}}"#
    );
    (schema, re)
}

fn tok() -> GgufTokenizer {
    tiny::tokenizer().unwrap()
}

fn index(re: &str, vocab: &Arc<Vocabulary>) -> Arc<TokenIndex> {
    let compiler = Compiler::new(vocab.clone(), CompilerConfig::default());
    compiler
        .compile(&Source::regex(re))
        .unwrap()
        .index()
        .clone()
}

fn check_valid(out: &Generation, schema: &Value, what: &str) -> Value {
    assert!(out.accepted, "{what}: not accepted: {:?}", out.text());
    let text = std::str::from_utf8(&out.bytes).unwrap_or_else(|_| panic!("{what}: invalid UTF-8"));
    let v: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{what}: {e}: {text:?}"));
    let validator = jsonschema::validator_for(schema).unwrap();
    if let Err(e) = validator.validate(&v) {
        panic!("{what}: {text} does not validate: {e}");
    }
    v
}

/// The kinds of scripted models.
#[derive(Copy, Clone, Debug)]
enum Adversary {
    /// Prefers every token the guide forbids (replays the guide on the output).
    Forbidden,
    /// Independent random logits per step.
    Random,
    /// EOS far above everything.
    Eos,
    /// Whitespace tokens far above everything.
    Whitespace,
    /// Never wants to stop: EOS and closing brackets/quotes are disfavoured.
    Endless,
}

fn adversary(
    kind: Adversary,
    vocab: Arc<Vocabulary>,
    idx: Arc<TokenIndex>,
    prompt_len: usize,
    seed: u64,
) -> FakeModel {
    let width = vocab.logits_width();
    let rng = Mutex::new(rand::rngs::StdRng::seed_from_u64(seed));
    FakeModel::new(width, move |seq| {
        let mut rng = rng.lock().unwrap();
        let mut l: Vec<f32> = (0..width).map(|_| rng.random::<f32>()).collect();
        match kind {
            Adversary::Forbidden => {
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
            }
            Adversary::Random => {
                for x in l.iter_mut() {
                    *x *= 8.0;
                }
            }
            Adversary::Eos => {
                for &e in vocab.eos() {
                    l[e.as_usize()] = 100.0;
                }
            }
            Adversary::Whitespace => {
                for (t, b) in vocab.text_tokens() {
                    if b.iter().all(|c| c.is_ascii_whitespace()) {
                        l[t.as_usize()] = 100.0;
                    }
                }
            }
            Adversary::Endless => {
                for &e in vocab.eos() {
                    l[e.as_usize()] = -100.0;
                }
                for (t, b) in vocab.text_tokens() {
                    if b.iter().any(|c| b"\"}]".contains(c)) {
                        l[t.as_usize()] = -50.0;
                    } else if b.iter().all(|c| c.is_ascii_alphanumeric()) {
                        l[t.as_usize()] += 20.0;
                    }
                }
            }
        }
        l
    })
}

fn run_adversaries(schema: &Value, re: &str, budgets: &[usize]) -> usize {
    let t = tok();
    let vocab = Arc::new(t.vocab.clone());
    let idx = index(re, &vocab);
    let prompt = t.tokenizer.encode("Go.").unwrap();
    let kinds = [
        Adversary::Forbidden,
        Adversary::Random,
        Adversary::Eos,
        Adversary::Whitespace,
        Adversary::Endless,
    ];
    let needed = Matcher::from_index(idx.clone()).tokens_to_accept().unwrap() as usize;
    let mut redraws = 0;
    for &kind in &kinds {
        for &max in budgets {
            let max = max.max(needed);
            for (seed, sampling) in [
                (1, SamplingConfig::greedy()),
                (2, SamplingConfig::default()),
                (3, SamplingConfig::default()),
            ] {
                for jump in [true, false] {
                    let mut model = adversary(kind, vocab.clone(), idx.clone(), prompt.len(), seed);
                    let mut g = Matcher::from_index(idx.clone());
                    let cfg = GenerateConfig::default()
                        .max_tokens(max)
                        .sampling(sampling.clone())
                        .seed(seed)
                        .jump_forward(jump)
                        .ignore_eos(false)
                        .mask_overlap(seed % 2 == 1);
                    let mut streamed = Vec::new();
                    let out = generate(
                        &mut model,
                        &vocab,
                        Some(&t.tokenizer),
                        Some(&mut g),
                        &prompt,
                        &cfg,
                        &mut |b| streamed.extend_from_slice(b),
                    )
                    .unwrap_or_else(|e| panic!("{kind:?} max {max}: {e}"));
                    let what = format!("{kind:?} max {max} seed {seed} jump {jump}");
                    check_valid(&out, schema, &what);
                    assert!(
                        out.tokens.len() <= max,
                        "{what}: {} tokens",
                        out.tokens.len()
                    );
                    assert_eq!(streamed, out.bytes, "{what}: stream differs");
                    assert_eq!(vocab.decode(&out.tokens), out.bytes);
                    if !jump {
                        assert_eq!(out.stats.forced_tokens, 0);
                    }
                    redraws += out.stats.budget_redraws;
                }
            }
        }
    }
    redraws
}

#[test]
fn adversarial_models_always_produce_valid_records() {
    let (schema, re) = record();
    let redraws = run_adversaries(&schema, &re, &[0, 1, 3, 12, 40, 200]);
    assert!(redraws > 0, "tight budgets exercised the redraw");
}

#[test]
fn adversarial_models_always_produce_valid_tool_calls() {
    let (schema, re) = tool_call();
    // The regex and the schema agree on a hand-written call.
    let v = json!({"name": "add", "arguments": {"a": 1, "b": 2}});
    assert!(jsonschema::validator_for(&schema).unwrap().is_valid(&v));
    let redraws = run_adversaries(&schema, &re, &[0, 2, 9, 30]);
    assert!(redraws > 0, "tight budgets exercised the redraw");
}

#[test]
fn budget_below_the_minimum_fails_before_generating_and_names_it() {
    let (_, re) = record();
    let t = tok();
    let vocab = Arc::new(t.vocab.clone());
    let idx = index(&re, &vocab);
    let needed = Matcher::from_index(idx.clone()).tokens_to_accept().unwrap();
    assert!(needed > 5, "the record needs several tokens ({needed})");
    let mut model = FakeModel::uniform(vocab.logits_width());
    let mut g = Matcher::from_index(idx);
    let cfg = GenerateConfig::greedy(needed as usize - 1);
    let e = generate(
        &mut model,
        &vocab,
        Some(&t.tokenizer),
        Some(&mut g),
        &[TokenId(1)],
        &cfg,
        &mut |_| {},
    )
    .unwrap_err();
    assert!(
        matches!(e, GenerateError::BudgetTooSmall { needed: n, .. } if n == needed),
        "{e}"
    );
    assert!(e.to_string().contains(&needed.to_string()));
    assert_eq!(model.calls(), 0, "nothing ran");
    // Exactly the minimum works, and the output is complete.
    let mut model = FakeModel::uniform(vocab.logits_width());
    let mut g = Matcher::from_index(g.index().clone());
    let cfg = GenerateConfig::greedy(needed as usize);
    let out = generate(
        &mut model,
        &vocab,
        Some(&t.tokenizer),
        Some(&mut g),
        &[TokenId(1)],
        &cfg,
        &mut |_| {},
    )
    .unwrap();
    assert!(out.accepted);
}

#[test]
fn jump_forward_appends_forced_text_in_batched_passes() {
    let t = tok();
    let vocab = Arc::new(t.vocab.clone());
    // Long forced stretches around two free choices.
    let re =
        r#"\{"name":"get_weather","arguments":\{"unit":"(celsius|fahrenheit)","days":[1-9]\}\}"#;
    let idx = index(re, &vocab);
    let run = |jump: bool| {
        let mut model = FakeModel::uniform(vocab.logits_width());
        let mut g = Matcher::from_index(idx.clone());
        let cfg = GenerateConfig::greedy(100).jump_forward(jump);
        let out = generate(
            &mut model,
            &vocab,
            Some(&t.tokenizer),
            Some(&mut g),
            &[TokenId(1)],
            &cfg,
            &mut |_| {},
        )
        .unwrap();
        (out, model.calls())
    };
    let (with, calls_with) = run(true);
    let (without, calls_without) = run(false);
    assert!(with.accepted && without.accepted);
    assert_eq!(with.stop, StopReason::Complete);
    assert!(with.stats.forced_tokens > 10, "{:?}", with.stats);
    assert_eq!(without.stats.forced_tokens, 0);
    assert!(
        calls_with * 3 < calls_without,
        "jump-forward: {calls_with} passes, without: {calls_without}"
    );
    assert_eq!(with.stats.model_calls, calls_with);
}

#[test]
fn unconstrained_generation_stops_at_eos_or_budget() {
    let t = tok();
    let vocab = Arc::new(t.vocab.clone());
    let width = vocab.logits_width();
    let eos = vocab.eos()[0];
    // Prefers EOS: stops at once, unless told to ignore it.
    let mut model = FakeModel::new(width, move |_| {
        let mut l = vec![0.0; width];
        l[eos.as_usize()] = 10.0;
        l
    });
    let out = generate(
        &mut model,
        &vocab,
        None,
        None,
        &[TokenId(1)],
        &GenerateConfig::greedy(7),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(out.stop, StopReason::Complete);
    assert!(out.tokens.is_empty() && !out.accepted);
    let cfg = GenerateConfig::greedy(7).ignore_eos(true);
    let out = generate(
        &mut model,
        &vocab,
        None,
        None,
        &[TokenId(1)],
        &cfg,
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(out.stop, StopReason::MaxTokens);
    assert_eq!(out.tokens.len(), 7);
    assert!(out.tokens.iter().all(|&t| !vocab.is_eos(t)));
}

#[test]
fn context_and_width_problems_are_errors() {
    let t = tok();
    let vocab = Arc::new(t.vocab.clone());
    let width = vocab.logits_width();
    let cfg = GenerateConfig::greedy(10);
    let mut small = FakeModel::uniform(width).with_context_length(8);
    let e = generate(
        &mut small,
        &vocab,
        None,
        None,
        &[TokenId(1); 8],
        &cfg,
        &mut |_| {},
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            GenerateError::PromptTooLong {
                prompt: 8,
                context: 8
            }
        ),
        "{e}"
    );
    let e = generate(
        &mut small,
        &vocab,
        None,
        None,
        &[TokenId(1); 3],
        &cfg,
        &mut |_| {},
    )
    .unwrap_err();
    assert!(matches!(e, GenerateError::ContextTooSmall { .. }), "{e}");
    assert!(e.to_string().contains("at most 5"), "{e}");
    let e = generate(&mut small, &vocab, None, None, &[], &cfg, &mut |_| {}).unwrap_err();
    assert!(matches!(e, GenerateError::EmptyPrompt));
    let mut wide = FakeModel::uniform(width + 1);
    let e = generate(
        &mut wide,
        &vocab,
        None,
        None,
        &[TokenId(1)],
        &cfg,
        &mut |_| {},
    )
    .unwrap_err();
    assert!(matches!(e, GenerateError::WidthMismatch { .. }), "{e}");
    // A tokenizer with more ids than the model has logits.
    let e = Engine::new(FakeModel::uniform(10), t.tokenizer, t.vocab)
        .err()
        .unwrap();
    assert!(e.to_string().contains("logits"), "{e}");
}

#[test]
fn engine_prompts_are_chatml_and_seeded_runs_repeat() {
    let t = tok();
    let vocab = Arc::new(t.vocab.clone());
    let (schema, re) = record();
    let idx = index(&re, &vocab);
    let mut engine = Engine::new(
        adversary(Adversary::Random, vocab.clone(), idx.clone(), 0, 9),
        t.tokenizer,
        t.vocab,
    )
    .unwrap();
    let p = engine.prompt_tokens("hi", Some("sys"), false).unwrap();
    let tk = engine.tokenizer();
    let id = |s: &str| tk.token_to_id(s).unwrap();
    let mut expected = vec![id("<|im_start|>")];
    expected.extend(tk.encode("system\nsys").unwrap());
    expected.push(id("<|im_end|>"));
    expected.extend(tk.encode("\n").unwrap());
    expected.push(id("<|im_start|>"));
    expected.extend(tk.encode("user\nhi").unwrap());
    expected.push(id("<|im_end|>"));
    expected.extend(tk.encode("\n").unwrap());
    expected.push(id("<|im_start|>"));
    expected.extend(tk.encode("assistant\n").unwrap());
    assert_eq!(p, expected, "control markers are single special tokens");
    let raw = engine.prompt_tokens("hi", None, true).unwrap();
    assert_eq!(engine.vocab().decode(&raw), b"hi");
    let out = engine
        .generate(
            &p,
            Some(idx.clone()),
            &GenerateConfig::greedy(60),
            &mut |_| {},
        )
        .unwrap();
    check_valid(&out, &schema, "engine");
    // Same model, same seed: same output.
    let mut runs = Vec::new();
    for _ in 0..2 {
        let mut m = adversary(Adversary::Random, vocab.clone(), idx.clone(), 0, 5);
        let cfg = GenerateConfig::default().seed(11);
        let mut g = Matcher::from_index(idx.clone());
        let out = generate(
            &mut m,
            &vocab,
            Some(engine.tokenizer()),
            Some(&mut g),
            &p,
            &cfg,
            &mut |_| {},
        )
        .unwrap();
        runs.push(out.bytes);
    }
    assert_eq!(runs[0], runs[1]);
}

#[test]
fn tools_schema_accepts_exactly_one_tool_shape() {
    let tools = json!([
        {"type": "function", "function": {"name": "a", "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}},
        {"name": "b", "parameters": {"type": "object", "properties": {}}}
    ]);
    let s = tools_schema(&tools).unwrap();
    let v = jsonschema::validator_for(&s).unwrap();
    assert!(v.is_valid(&json!({"name": "a", "arguments": {"x": 1}})));
    assert!(v.is_valid(&json!({"name": "b", "arguments": {}})));
    assert!(!v.is_valid(&json!({"name": "c", "arguments": {}})));
    assert!(!v.is_valid(&json!({"name": "a", "arguments": {}})));
    assert!(!v.is_valid(&json!({"name": "a"})));
    // One tool: no anyOf.
    let one = tools_schema(&json!([tools[0].clone()])).unwrap();
    assert!(one.get("anyOf").is_none());
    assert!(tools_schema(&json!({})).is_err());
    assert!(tools_schema(&json!([])).is_err());
    assert!(tools_schema(&json!([{"function": {}}]))
        .unwrap_err()
        .to_string()
        .contains("name"));
}

#[test]
fn engine_widens_the_vocabulary_to_a_wider_model() {
    let t = tok();
    let w = t.vocab.logits_width();
    let e = Engine::new(FakeModel::uniform(w + 3), t.tokenizer, t.vocab).unwrap();
    assert_eq!(e.vocab().logits_width(), w + 3);
}

#[test]
fn typed_generation_returns_a_valid_value_under_adversarial_models() {
    #[derive(serde::Deserialize, schemars::JsonSchema, Debug)]
    #[allow(dead_code)]
    enum Unit {
        Celsius,
        Fahrenheit,
    }
    #[derive(serde::Deserialize, schemars::JsonSchema, Debug)]
    #[allow(dead_code)]
    struct Reading {
        city: String,
        unit: Unit,
        values: Vec<i32>,
        note: Option<String>,
        level: u8,
    }
    for kind in [Adversary::Random, Adversary::Endless, Adversary::Forbidden] {
        for max in [60, 400] {
            let t = tok();
            let vocab = Arc::new(t.vocab.clone());
            let dummy = index("a", &vocab);
            let model = adversary(kind, vocab.clone(), dummy, 0, 4);
            let mut engine = Engine::new(model, t.tokenizer, t.vocab).unwrap();
            let cfg = GenerateConfig::default().max_tokens(max).seed(3);
            match engine.generate_typed::<Reading>("Weather?", &cfg) {
                Ok(r) => assert!(r.level as u32 <= 255),
                // A budget the schema cannot fit is the only acceptable failure.
                Err(GenerateError::BudgetTooSmall { .. }) => assert_eq!(max, 60),
                Err(e) => panic!("{kind:?} {max}: {e}"),
            }
        }
    }
}

/// A compiler whose lazy automata stop at `bytes` (determinized from the
/// first state on).
fn limited(bytes: usize) -> CompilerConfig {
    CompilerConfig::default().dfa(
        constrain::DfaConfig::default()
            .lazy_states(Some(1))
            .dfa_size_limit(bytes),
    )
}

/// Random-logit generations over `idx`, one per seed: each must end
/// accepted or fail naming the limit. Returns (limits, accepted).
fn run_past_limit(
    vocab: &Arc<Vocabulary>,
    idx: &Arc<TokenIndex>,
    seeds: std::ops::Range<u64>,
    max_tokens: usize,
    what: &str,
) -> (usize, usize) {
    let (mut limits, mut accepted) = (0, 0);
    for seed in seeds {
        let width = vocab.logits_width();
        let mut m = FakeModel::new(width, constrain_testkit::hashed_logits(width, seed));
        let mut g = Matcher::from_index(idx.clone());
        let cfg = GenerateConfig::default().seed(seed).max_tokens(max_tokens);
        match generate(
            &mut m,
            vocab,
            None,
            Some(&mut g),
            &[TokenId(0)],
            &cfg,
            &mut |_| {},
        ) {
            Ok(out) => {
                assert!(
                    out.accepted,
                    "{what}, seed {seed}: {:?}",
                    String::from_utf8_lossy(&out.bytes)
                );
                accepted += 1;
            }
            Err(GenerateError::LimitHit { .. }) => limits += 1,
            Err(e) => panic!("{what}, seed {seed}: {e}"),
        }
    }
    (limits, accepted)
}

/// A lazy automaton that outgrows its size limit while outputs are made
/// from it: every generation either ends accepted or fails naming the limit
/// (never an output the constraint does not accept, never "the sampler
/// ignored the mask" for a token the limit cut off).
#[test]
fn a_lazy_limit_hit_while_generating_is_named_never_an_unfinished_output() {
    let t = tok();
    let vocab = Arc::new(t.vocab.clone());
    // 2^13 states after the first `a`s: far past a 16 KiB table.
    let re = "(?:a|b| |c)*a(?:a|b| |c){12}";
    let idx = Compiler::new(vocab.clone(), limited(16 << 10))
        .compile(&Source::regex(re))
        .unwrap()
        .index()
        .clone();
    let (limits, accepted) = run_past_limit(&vocab, &idx, 0..40, 40, "regex");
    assert!(limits > 0, "the limit was reached ({accepted} accepted)");
}

/// The same over a schema whose masks take plain tokens at once (string
/// values, keys in any order, whitespace between tokens): a token such a
/// mask let in may meet the limit on its own walk, and an output may run
/// out of budget once distances are cut off.
#[test]
fn a_lazy_limit_hit_under_a_schema_is_named_never_an_unfinished_output() {
    let t = tok();
    let vocab = Arc::new(t.vocab.clone());
    let schema = json!({"type": "object", "properties": {
        "alpha": {"type": "string"}, "beta": {"type": "string"}, "gamma": {"type": "string"},
        "delta": {"type": "string"}, "epsilon": {"type": "integer"}, "zeta": {"type": "string"}}});
    let mut limits = 0;
    for kib in [64usize, 128, 256] {
        let options = constrain::schema::SchemaOptions::compliant();
        let Ok(c) = Compiler::new(vocab.clone(), limited(kib << 10))
            .compile(&Source::json_schema(schema.clone()).with_schema_options(options))
        else {
            continue;
        };
        limits += run_past_limit(&vocab, c.index(), 0..24, 60, &format!("{kib} KiB")).0;
    }
    assert!(limits > 0, "a limit was reached");
}

#[test]
fn a_model_given_the_mask_before_its_head_gives_the_same_output() {
    let (schema, re) = record();
    let t = tok();
    let vocab = Arc::new(t.vocab.clone());
    let idx = index(&re, &vocab);
    let prompt = t.tokenizer.encode("Go.").unwrap();
    for kind in [Adversary::Forbidden, Adversary::Random, Adversary::Endless] {
        for (seed, sampling) in [
            (1, SamplingConfig::greedy()),
            (2, SamplingConfig::default()),
            (3, SamplingConfig::default()),
        ] {
            for (jump, overlap) in [(false, true), (true, false), (false, false)] {
                let cfg = GenerateConfig::default()
                    .max_tokens(60)
                    .sampling(sampling.clone())
                    .seed(seed)
                    .jump_forward(jump)
                    .mask_overlap(overlap);
                let run = |model: &mut dyn constrain_model::LanguageModel| {
                    let mut g = Matcher::from_index(idx.clone());
                    generate(
                        model,
                        &vocab,
                        Some(&t.tokenizer),
                        Some(&mut g),
                        &prompt,
                        &cfg,
                        &mut |_| {},
                    )
                    .unwrap()
                };
                let what = format!("{kind:?} seed {seed} jump {jump} overlap {overlap}");
                let plain = run(&mut adversary(
                    kind,
                    vocab.clone(),
                    idx.clone(),
                    prompt.len(),
                    seed,
                ));
                // Every logit the loop's mask leaves out is -inf.
                let mut strict = adversary(kind, vocab.clone(), idx.clone(), prompt.len(), seed)
                    .with_strict_masks();
                let masked = run(&mut strict);
                assert_eq!(masked.tokens, plain.tokens, "{what}");
                check_valid(&masked, &schema, &what);
                assert_eq!(
                    strict.masks(),
                    masked.stats.model_calls,
                    "{what}: one mask a pass"
                );
                assert_eq!(masked.stats.mask.steps, plain.stats.mask.steps, "{what}");
            }
        }
    }
}
