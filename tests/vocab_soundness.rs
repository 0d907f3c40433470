//! # Soundness over vocabularies beyond Qwen
//!
//! `tests/tokenizers.rs` checks that each non-Qwen `tokenizer.json` (Llama 3,
//! DeepSeek V3 and gpt-oss: byte-level BPE; Llama 2 and Gemma 3:
//! SentencePiece with byte fallback) maps ids to the right bytes. This file
//! checks what a user of such a vocabulary relies on: **the output always
//! parses**. For each tokenizer fetched by `scripts/fetch-assets
//! --tokenizers` (each absent one skips with a message), a handful of
//! MaskBench dev schemas and a few regexes are compiled through the one way in
//! (`Compiler::compile`), then:
//!
//! * **Generation with adversarial logits.** The `Matcher` is driven to the
//!   end, by the bitmask it fills (XGrammar's layout, the one engines apply),
//!   under several logit policies meant to break it: random noise over the
//!   whole width (special, added and padded ids included), stop tokens and
//!   special tokens pushed to the top, the longest tokens first, the tokens
//!   the mask refuses pushed to the top, and structural bytes (`"`, `\`,
//!   brackets, whitespace runs, lone UTF-8 bytes of the byte-fallback tokens)
//!   pushed to the top. Each output has a random `max_tokens` budget (text
//!   tokens, as the generation loop counts them), every third one exactly
//!   the fewest the matcher says it needs, and tokens are picked budget-safe
//!   (one after which the remaining budget cannot reach acceptance is
//!   redrawn, as `constrain_model::generate` does): the output ends with a
//!   stop token or with the budget spent on a complete text, never cut, and
//!   its text must validate (the `jsonschema` crate for schemas, the `regex`
//!   crate for regexes).
//! * **No dead end, EOS only when complete.** At every step the filled
//!   bitmask is compared, on a rotating sample of ids plus every id when the
//!   mask is small, with an independent byte oracle: regex-automata's own
//!   dense DFA of the same regex (not the project's determinizer, not the
//!   index), explored by a plain fixpoint. A text token is allowed exactly
//!   when the text followed by its bytes can still reach acceptance, a stop
//!   token exactly when the text is complete, any other id never. Every
//!   vocabulary here holds a token for each single byte (checked), so a
//!   byte-level completion is also a token-level one: no allowed token leads
//!   to a dead end.
//! * **The tokenizer's own encodings are accepted.** Every valid MaskBench
//!   instance of the selected files, as the `tokenizers` crate encodes it
//!   for output (`TextTokenizer::encode`: the file's tokenizer with its
//!   prefix-space rule off, since output continues a prompt; for Gemma 3,
//!   which has no such rule, the ids are also checked to be exactly the
//!   untouched `tokenizers::Tokenizer`'s), has every token set in the filled
//!   bitmask and then a stop token; every invalid instance (as the
//!   `jsonschema` crate judges it) is refused somewhere.
//!
//! Fast enough for the default `cargo test` (a few seconds per vocabulary in
//! release mode).

use constrain::dfa::{ByteDfa, DfaConfig};
use constrain::matcher::bitmask_words;
use constrain::schema::SchemaOptions;
use constrain::vocab::{TextTokenizer, TokenId, Vocabulary};
use constrain::{Compiled, Compiler, CompilerConfig, Matcher, Source};
use constrain_testkit::assets::{constrain_home, corpora};
use constrain_testkit::check::Oracle;
use constrain_testkit::maskbench::{load_file, python_dumps};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::PathBuf;
use std::sync::Arc;

/// MaskBench dev files: small, varied schemas (enums and formats,
/// Kubernetes objects, nested arrays, strings with patterns, oneOf).
const FILES: &[&str] = &[
    "Snowplow---sp_160_Normalized.json",
    "Kubernetes---kb_61_Normalized.json",
    "WashingtonPost---wp_88_Normalized.json",
    "Snowplow---sp_39_Normalized.json",
    "MCPspec---JSONRPCNotification.json",
    "Handwritten---oneof5.json",
];

/// Regexes with their valid and invalid texts: multi-byte UTF-8 (which
/// byte-fallback vocabularies spell with lone byte tokens), whitespace runs
/// (Gemma's added `\n\n` and `▁▁▁` tokens), and texts complete in the
/// middle of longer ones (EOS must be allowed there and only there).
const REGEXES: &[(&str, &[&str], &[&str])] = &[
    (
        r"[A-Z][a-z]{1,8}( [0-9]{1,3}){0,3}\.",
        &["Ab.", "Paris 1 22 333."],
        &["ab.", "Paris 1 22 333 4.", "Paris"],
    ),
    (
        r"(héllo|日本語|ü+|\n\n|   x){1,4}",
        &["héllo", "日本語\n\nüü", "   x   x"],
        &["", "hello", "\n", "日本"],
    ),
    (
        r"-?(0|[1-9][0-9]{0,5})(\.[0-9]{1,3})?(e[+-]?[0-9]{1,2})?",
        &["0", "-12.5", "123456e+12"],
        &["01", "1.", "1e", "1234567"],
    ),
];

const SAMPLES_PER_SOURCE: usize = 10;

fn tokenizer_dir(name: &str) -> Option<PathBuf> {
    let d = constrain_home().join("tokenizers").join(name);
    if d.join("tokenizer.json").exists() {
        Some(d)
    } else {
        eprintln!(
            "skipping: {name} tokenizer not found at {} (run scripts/fetch-assets --tokenizers)",
            d.display()
        );
        None
    }
}

/// How an output is judged by an engine that is not constrain.
enum Judge {
    Schema(jsonschema::Validator),
    Regex(regex::Regex),
}

impl Judge {
    fn accepts(&self, text: &[u8]) -> bool {
        let Ok(s) = std::str::from_utf8(text) else {
            return false;
        };
        match self {
            Judge::Schema(v) => {
                serde_json::from_str::<serde_json::Value>(s).is_ok_and(|j| v.is_valid(&j))
            }
            Judge::Regex(r) => r.is_match(s),
        }
    }
}

/// One thing to compile, with its oracles and its labelled texts.
struct Case {
    name: String,
    source: Source,
    /// The regex the byte oracle is built from.
    regex: String,
    judge: Judge,
    /// (text, valid) pairs (valid texts of a schema the compiler narrowed,
    /// with a warning, are left out).
    texts: Vec<(String, bool)>,
}

fn cases() -> Option<Vec<Case>> {
    let dir = corpora()?.join("maskbench-dev");
    // The byte oracle is the DFA of the regex `schema::compile` writes
    // (free-form values as depth-bounded copies), so the compiled source
    // keeps those copies too, whatever the default (with `free_form_calls`
    // or `deep_free_form`,
    // over a vocabulary with every byte, free-form values are exact at any
    // depth through the pushdown engine: a larger language than this
    // oracle's; `tests/pda_split.rs` and `tests/schema_free_form.rs` check
    // that path).
    // Member sets (properties in any order past a few) are left off: no
    // regex syntax writes them, so the oracle's regex-automata DFA could
    // not read their language (`tests/schema_property_order.rs` checks
    // them through the compiler).
    let opts = SchemaOptions::compliant()
        .free_form_calls(false)
        .deep_free_form(false)
        .member_sets(false);
    let mut out = Vec::new();
    for f in FILES {
        let cs = load_file(&dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        for c in cs {
            let regex = constrain::schema::compile(&c.schema, &opts)
                .unwrap_or_else(|e| panic!("{f}: {e}"))
                .regex;
            let judge = Judge::Schema(
                jsonschema::validator_for(&c.schema).unwrap_or_else(|e| panic!("{f}: {e}")),
            );
            let texts = c
                .instances
                .iter()
                .map(|i| (python_dumps(&i.data), i.valid))
                .collect();
            out.push(Case {
                name: f.to_string(),
                source: Source::json_schema(c.schema.clone()).with_schema_options(opts.clone()),
                regex,
                judge,
                texts,
            });
        }
    }
    for (p, good, bad) in REGEXES {
        let texts = good
            .iter()
            .map(|t| (t.to_string(), true))
            .chain(bad.iter().map(|t| (t.to_string(), false)))
            .collect();
        out.push(Case {
            name: format!("regex {p:?}"),
            source: Source::regex(*p),
            regex: p.to_string(),
            judge: Judge::Regex(regex::Regex::new(&format!("^(?:{p})$")).unwrap()),
            texts,
        });
    }
    Some(out)
}

fn bit(row: &[u32], t: TokenId) -> bool {
    row[t.as_usize() / 32] >> (t.0 % 32) & 1 == 1
}

/// The logit policies (see the module docs).
#[derive(Clone, Copy, Debug)]
enum Policy {
    Noise,
    StopsAndSpecials,
    Longest,
    Refused,
    Structure,
}

const POLICIES: [Policy; 5] = [
    Policy::Noise,
    Policy::StopsAndSpecials,
    Policy::Longest,
    Policy::Refused,
    Policy::Structure,
];

/// What is fixed per vocabulary: the noise table and each id's static
/// preference under each policy.
struct Logits {
    width: usize,
    noise: Vec<f32>,
    stops_specials: Vec<f32>,
    longest: Vec<f32>,
    structure: Vec<f32>,
}

impl Logits {
    fn new(v: &Vocabulary, rng: &mut StdRng) -> Logits {
        let width = v.logits_width();
        let noise = (0..2 * width)
            .map(|_| (0..4).map(|_| rng.random::<f32>()).sum::<f32>() * 4.0 - 8.0)
            .collect();
        let per_id = |f: &dyn Fn(TokenId) -> f32| -> Vec<f32> {
            (0..width).map(|i| f(TokenId(i as u32))).collect()
        };
        let stops_specials = per_id(&|t| match v.token_bytes(t) {
            _ if v.is_eos(t) => 60.0,
            None => 50.0,
            Some(_) => 0.0,
        });
        let longest = per_id(&|t| v.token_bytes(t).map_or(0.0, |b| 3.0 * b.len() as f32));
        let structure = per_id(&|t| match v.token_bytes(t) {
            Some([b]) if *b >= 0x80 => 30.0,
            Some(b) if b.iter().all(|c| c.is_ascii_whitespace()) => 25.0,
            Some(b) if b.iter().any(|c| b"\"\\{}[],:".contains(c)) => 20.0,
            _ => 0.0,
        });
        Logits {
            width,
            noise,
            stops_specials,
            longest,
            structure,
        }
    }

    fn fill(&self, policy: Policy, row: &[u32], rng: &mut StdRng, out: &mut Vec<f32>) {
        let off = rng.random_range(0..self.width);
        out.clear();
        out.extend_from_slice(&self.noise[off..off + self.width]);
        let add = |out: &mut Vec<f32>, bias: &[f32]| {
            for (x, b) in out.iter_mut().zip(bias) {
                *x += b;
            }
        };
        match policy {
            Policy::Noise => {}
            Policy::StopsAndSpecials => add(out, &self.stops_specials),
            Policy::Longest => add(out, &self.longest),
            Policy::Structure => add(out, &self.structure),
            Policy::Refused => {
                for (i, x) in out.iter_mut().enumerate() {
                    if !bit(row, TokenId(i as u32)) {
                        *x += 100.0;
                    }
                }
            }
        }
    }
}

/// XGrammar's `apply_token_bitmask_inplace`: −∞ where the bit is clear.
fn apply_bitmask(logits: &mut [f32], row: &[u32]) {
    for (i, x) in logits.iter_mut().enumerate() {
        if !bit(row, TokenId(i as u32)) {
            *x = f32::NEG_INFINITY;
        }
    }
}

/// The highest-logit allowed token that fits the remaining budget (a
/// redraw from the same logits restricted to tokens that still fit).
fn pick(m: &Matcher, logits: &[f32], remaining: usize) -> Option<TokenId> {
    let argmax = logits
        .iter()
        .enumerate()
        .filter(|x| x.1.is_finite())
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|x| TokenId(x.0 as u32))?;
    if m.fits(argmax, remaining) {
        return Some(argmax);
    }
    let mut ranked: Vec<(usize, f32)> = logits
        .iter()
        .copied()
        .enumerate()
        .filter(|x| x.1.is_finite())
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    ranked
        .into_iter()
        .map(|x| TokenId(x.0 as u32))
        .find(|&t| m.fits(t, remaining))
}

/// Checks the filled `row` against the byte oracle at automaton state `d`
/// (text so far: `text`), on `ids`.
fn check_row<A: constrain::index::ByteAutomaton>(
    what: &str,
    v: &Vocabulary,
    oracle: &Oracle<A>,
    d: A::State,
    text: &[u8],
    row: &[u32],
    ids: impl Iterator<Item = TokenId>,
) {
    let complete = oracle.is_accepting(d);
    for t in ids {
        let want = match v.token_bytes(t) {
            Some(b) if !b.is_empty() => oracle.is_live(oracle.after(d, b)),
            Some(_) => false,
            None => v.is_eos(t) && complete,
        };
        assert_eq!(
            bit(row, t),
            want,
            "{what}: token {t} ({}) after {:?}: the bitmask says {} but the oracle says {}",
            v.describe(t),
            String::from_utf8_lossy(text),
            bit(row, t),
            want
        );
    }
}

/// Generates `SAMPLES_PER_SOURCE` outputs of `compiled` under the policies,
/// checking every step against `oracle` and every output with `judge`.
/// Returns the number of steps taken; counts in `ends` the outputs that
/// ended with the budget spent (`[0]`) and with a stop token (`[1]`).
fn generate<A: constrain::index::ByteAutomaton>(
    name: &str,
    compiled: &Compiled,
    oracle: &Oracle<A>,
    judge: &Judge,
    logits: &Logits,
    rng: &mut StdRng,
    ends: &mut [usize; 2],
) -> usize {
    let v = compiled.vocab().clone();
    let width = v.logits_width();
    let mut row = vec![0u32; bitmask_words(width)];
    let mut buf = Vec::with_capacity(width);
    let mut steps = 0;
    for k in 0..SAMPLES_PER_SOURCE {
        let policy = POLICIES[k % POLICIES.len()];
        let what = format!("{name}, sample {k} ({policy:?})");
        let mut m = compiled.matcher();
        let fewest = m
            .tokens_to_accept()
            .unwrap_or_else(|| panic!("{what}: no completion from the start"))
            as usize;
        // `max_tokens` as the generation loop counts it: text tokens (a stop
        // token may follow). Every third output gets exactly the fewest the
        // matcher says it needs.
        let budget = fewest
            + if k % 3 == 0 {
                0
            } else {
                rng.random_range(1..40)
            };
        let mut d = oracle.start();
        let mut text: Vec<u8> = Vec::new();
        let mut stopped = false;
        for step in 0..=budget {
            m.fill_bitmask(&mut row).unwrap();
            // A rotating sample of every id, the stop ids, the ids past the
            // tokenizer, and all allowed ids when there are few.
            let stride = 53;
            let sample = (step % stride..width)
                .step_by(stride)
                .map(|i| TokenId(i as u32));
            let allowed: Vec<TokenId> = (0..width)
                .map(|i| TokenId(i as u32))
                .filter(|&t| bit(&row, t))
                .collect();
            assert!(
                !allowed.is_empty(),
                "{what}: nothing allowed after {:?}",
                String::from_utf8_lossy(&text)
            );
            let few = if allowed.len() <= 2048 {
                &allowed[..]
            } else {
                &[]
            };
            check_row(
                &what,
                &v,
                oracle,
                d,
                &text,
                &row,
                sample
                    .chain(v.eos().iter().copied())
                    .chain((v.num_ids()..width).map(|i| TokenId(i as u32)))
                    .chain(few.iter().copied()),
            );
            if step == budget {
                // The budget is spent: the text must be complete as it is.
                break;
            }
            logits.fill(policy, &row, rng, &mut buf);
            apply_bitmask(&mut buf, &row);
            let remaining = budget - step;
            let t = pick(&m, &buf, remaining).unwrap_or_else(|| {
                panic!(
                    "{what}: no allowed token fits the remaining {remaining} tokens after {:?}",
                    String::from_utf8_lossy(&text)
                )
            });
            // The picked token, whatever the sample: its successor is live.
            check_row(&what, &v, oracle, d, &text, &row, std::iter::once(t));
            m.advance(t).unwrap();
            steps += 1;
            if m.is_stop_token(t) {
                stopped = true;
                assert!(
                    m.is_terminated(),
                    "{what}: not terminated after the stop token"
                );
                break;
            }
            let b = v.token_bytes(t).expect("an allowed non-stop token is text");
            text.extend_from_slice(b);
            d = oracle.after(d, b);
        }
        ends[stopped as usize] += 1;
        assert!(
            stopped || m.is_accepting(),
            "{what}: the budget of {budget} tokens cut the output {:?}",
            String::from_utf8_lossy(&text)
        );
        assert!(
            oracle.accepts(&text),
            "{what}: the oracle refuses the output {:?}",
            String::from_utf8_lossy(&text)
        );
        assert!(
            judge.accepts(&text),
            "{what}: the output {:?} does not validate",
            String::from_utf8_lossy(&text)
        );
    }
    steps
}

/// Walks `ids` through a fresh matcher by its filled bitmask: `Ok` when every
/// id is set and a stop token is set at the end, else where it was refused.
fn walk(compiled: &Compiled, ids: &[TokenId]) -> Result<(), String> {
    let v = compiled.vocab();
    let mut row = vec![0u32; bitmask_words(v.logits_width())];
    let mut m = compiled.matcher();
    for (i, &t) in ids.iter().enumerate() {
        m.fill_bitmask(&mut row).unwrap();
        if !bit(&row, t) {
            return Err(format!("token {i} {} is masked", v.describe(t)));
        }
        m.advance(t).map_err(|e| format!("token {i}: {e}"))?;
    }
    m.fill_bitmask(&mut row).unwrap();
    if v.eos().iter().any(|&e| bit(&row, e)) {
        Ok(())
    } else {
        Err("no stop token at the end".into())
    }
}

fn run(name: &str, seed: u64) {
    let Some(dir) = tokenizer_dir(name) else {
        return;
    };
    let Some(cases) = cases() else {
        eprintln!("skipping: {name}: ../shared/corpora/maskbench-dev not found");
        return;
    };
    let path = dir.join("tokenizer.json");
    let vocab = Arc::new(Vocabulary::from_tokenizer_json_file(&path).expect("vocabulary loads"));
    let tk = TextTokenizer::from_file(&path).expect("tokenizer loads");
    let raw = tokenizers::Tokenizer::from_file(&path).expect("tokenizers loads");
    let mut single = [false; 256];
    for (_, b) in vocab.text_tokens() {
        if let [c] = b {
            single[*c as usize] = true;
        }
    }
    assert!(
        single.iter().all(|&x| x),
        "{name}: some byte has no token of its own, so byte liveness is not token liveness"
    );
    assert!(!vocab.eos().is_empty(), "{name}: no stop token");

    let compiler = Compiler::new(vocab.clone(), CompilerConfig::default());
    let mut rng = StdRng::seed_from_u64(seed);
    let logits = Logits::new(&vocab, &mut rng);
    let dfa_config = DfaConfig::default();
    let (mut steps, mut accepted, mut refused, mut narrowed) = (0, 0, 0, 0);
    let mut ends = [0; 2];
    for c in &cases {
        let what = format!("{name}: {}", c.name);
        let compiled = compiler
            .compile(&c.source)
            .unwrap_or_else(|e| panic!("{what}: does not compile: {e}"));
        let dfa = ByteDfa::new_reference(&c.regex, &dfa_config)
            .unwrap_or_else(|e| panic!("{what}: reference DFA: {e}"));
        let oracle = Oracle::new(&dfa, 200_000)
            .unwrap_or_else(|| panic!("{what}: the reference DFA is too big for the oracle"));
        steps += generate(
            &what, &compiled, &oracle, &c.judge, &logits, &mut rng, &mut ends,
        );

        for (text, valid) in &c.texts {
            let ids = tk.encode(text).unwrap();
            if name == "gemma3" {
                let own: Vec<TokenId> = raw
                    .encode(text.as_str(), false)
                    .unwrap()
                    .get_ids()
                    .iter()
                    .map(|&i| TokenId(i))
                    .collect();
                assert_eq!(ids, own, "{what}: output tokenization of {text:?}");
            }
            assert_eq!(vocab.decode(&ids), text.as_bytes(), "{what}: {text:?}");
            let r = walk(&compiled, &ids);
            if *valid {
                if !compiled.warnings().is_empty() {
                    narrowed += 1;
                    continue;
                }
                r.unwrap_or_else(|e| panic!("{what}: valid {text:?} refused: {e}"));
                accepted += 1;
            } else if !c.judge.accepts(text.as_bytes()) {
                assert!(r.is_err(), "{what}: invalid {text:?} accepted");
                refused += 1;
            }
        }
    }
    eprintln!(
        "{name}: {} sources, {} outputs ({steps} steps; {} stopped, {} spent the budget) \
         validate; {accepted} valid texts accepted, {refused} invalid refused ({narrowed} \
         valid left out: schema narrowed)",
        cases.len(),
        cases.len() * SAMPLES_PER_SOURCE,
        ends[1],
        ends[0]
    );
    assert!(
        ends[0] > 0 && ends[1] > 0,
        "{name}: every output ended the same way"
    );
    assert!(
        accepted >= 10 && refused >= 10,
        "{name}: too few texts checked"
    );
}

#[test]
fn llama3() {
    run("llama3", 1);
}

#[test]
fn llama2() {
    run("llama2", 2);
}

#[test]
fn gemma3() {
    run("gemma3", 3);
}

#[test]
fn deepseek_v3() {
    run("deepseek_v3", 4);
}

#[test]
fn gptoss() {
    run("gptoss", 5);
}
