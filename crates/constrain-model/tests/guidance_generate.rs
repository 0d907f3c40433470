//! Guidance in the generation loop, with scripted models: classifier-free
//! guidance at G = 1 is plain decoding and never runs the second sequence; it
//! changes the pick exactly as `uncond + G · (cond − uncond)` says; guided and
//! contrastive outputs always validate against their JSON Schema (`jsonschema`
//! crate) within the budget, even when the expert prefers forbidden tokens;
//! contrastive decoding at α = 1 keeps only the expert's best admissible token
//! (so greedy equals plain greedy); bad values are errors.

use constrain::sampling::{SamplingConfig, SamplingError};
use constrain::vocab::{TokenId, Vocabulary};
use constrain::{Matcher, TokenIndex};
use constrain_model::generate::{
    generate, generate_guided, GenerateConfig, GenerateError, Generation, Guidance,
};
use constrain_model::LanguageModel;
use constrain_testkit::tiny::regex_index as index;
use constrain_testkit::{tiny, FakeModel};
use serde_json::{json, Value};
use std::sync::Arc;

const STR: &str = r#""([^"\\\x00-\x1F]|\\(["\\/bfnrt]|u[0-9a-fA-F]{4}))*""#;
const INT: &str = r"(0|-?[1-9][0-9]{0,8})";

fn record() -> (Value, String) {
    let schema = json!({
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer"},
            "ok": {"type": "boolean"}
        },
        "required": ["city", "days", "ok"],
        "additionalProperties": false
    });
    let re = format!(r#"\{{"city":{STR},"days":{INT},"ok":(true|false)\}}"#);
    (schema, re)
}

fn random_model(width: usize, salt: u64) -> FakeModel {
    FakeModel::random(width, salt)
}

/// Prefers what the guide forbids (+50), random otherwise.
fn forbidden_model(idx: Arc<TokenIndex>, prompt_len: usize, salt: u64) -> FakeModel {
    let width = idx.vocab().logits_width();
    let mut base = random_model(width, salt);
    FakeModel::new(width, move |seq| {
        let mut l = base.forward(seq, 0).unwrap();
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
    })
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

fn guided(
    s: &Setup,
    model: &mut FakeModel,
    cfg: &GenerateConfig,
    guidance: Guidance<'_>,
) -> Result<Generation, GenerateError> {
    let mut g = Matcher::from_index(s.idx.clone());
    generate_guided(
        model,
        &s.vocab,
        Some(&s.t.tokenizer),
        Some(&mut g),
        &s.prompt,
        cfg,
        guidance,
        &mut |_| {},
    )
}

fn plain(s: &Setup, model: &mut FakeModel, cfg: &GenerateConfig) -> Generation {
    let mut g = Matcher::from_index(s.idx.clone());
    generate(
        model,
        &s.vocab,
        Some(&s.t.tokenizer),
        Some(&mut g),
        &s.prompt,
        cfg,
        &mut |_| {},
    )
    .unwrap()
}

fn check_valid(out: &Generation, schema: &Value, max: usize, what: &str) {
    assert!(out.accepted, "{what}: not accepted: {:?}", out.text());
    assert!(out.tokens.len() <= max, "{what}");
    let text = std::str::from_utf8(&out.bytes).unwrap();
    let v: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{what}: {e}: {text:?}"));
    if let Err(e) = jsonschema::validator_for(schema).unwrap().validate(&v) {
        panic!("{what}: {text} does not validate: {e}");
    }
}

#[test]
fn cfg_at_scale_one_is_plain_decoding_without_a_second_pass() {
    let (_, re) = record();
    let s = setup(&re);
    let width = s.vocab.logits_width();
    for (seed, sampling) in [
        (0, SamplingConfig::greedy()),
        (5, SamplingConfig::default()),
    ] {
        for max in [s.needed, 40] {
            let cfg = GenerateConfig::default()
                .max_tokens(max)
                .sampling(sampling.clone())
                .seed(seed);
            let want = plain(&s, &mut random_model(width, 3), &cfg);
            let mut uncond = random_model(width, 4);
            let got = guided(
                &s,
                &mut random_model(width, 3),
                &cfg,
                Guidance::ClassifierFree {
                    uncond: &mut uncond,
                    negative_prompt: vec![TokenId(1)],
                    scale: 1.0,
                },
            )
            .unwrap();
            assert_eq!(got.tokens, want.tokens);
            assert_eq!(uncond.calls(), 0, "G = 1 skips the unconditional pass");
        }
    }
}

/// `(x|y)`: the model slightly prefers x (2.0 against 1.9), the negative
/// prompt strongly (3 against 0). Guided at G = 2: x = 3 + 2(2 − 3) = 1,
/// y = 0 + 2(1.9 − 0) = 3.8, so y; plain greedy says x. The second sequence
/// reads the negative prompt, not the prompt.
#[test]
fn cfg_follows_the_formula_and_reads_the_negative_prompt() {
    let s = setup("(x|y)");
    let width = s.vocab.logits_width();
    let id = |c: u8| {
        s.vocab
            .text_tokens()
            .find(|&(_, b)| b == [c])
            .map(|(t, _)| t)
            .unwrap()
    };
    let (x, y) = (id(b'x'), id(b'y'));
    let cond = move |a: f32, b: f32| {
        FakeModel::new(width, move |_| {
            let mut l = vec![-10.0; width];
            l[x.as_usize()] = a;
            l[y.as_usize()] = b;
            l
        })
    };
    let cfg = GenerateConfig::greedy(4);
    assert_eq!(plain(&s, &mut cond(2.0, 1.9), &cfg).text(), "x");
    let negative = vec![TokenId(7), TokenId(8)];
    let mut uncond = cond(3.0, 0.0);
    let out = guided(
        &s,
        &mut cond(2.0, 1.9),
        &cfg,
        Guidance::ClassifierFree {
            uncond: &mut uncond,
            negative_prompt: negative.clone(),
            scale: 2.0,
        },
    )
    .unwrap();
    assert_eq!(out.text(), "y");
    assert_eq!(&uncond.sequence()[..2], &negative[..]);
    assert!(uncond.calls() >= 1);
}

#[test]
fn guided_outputs_always_validate() {
    let (schema, re) = record();
    let s = setup(&re);
    let width = s.vocab.logits_width();
    let mut runs = 0;
    for salt in 0..3u64 {
        for max in [s.needed, s.needed + 2, 40] {
            for (seed, sampling) in [
                (1, SamplingConfig::greedy()),
                (2, SamplingConfig::default()),
            ] {
                let cfg = GenerateConfig::default()
                    .max_tokens(max)
                    .sampling(sampling)
                    .seed(seed)
                    .jump_forward(salt % 2 == 0)
                    .ignore_eos(false)
                    .mask_overlap(true);
                for scale in [0.0, 1.5, 3.0, -1.0] {
                    let mut uncond = random_model(width, salt + 100);
                    let mut m = forbidden_model(s.idx.clone(), s.prompt.len(), salt);
                    let out = guided(
                        &s,
                        &mut m,
                        &cfg,
                        Guidance::ClassifierFree {
                            uncond: &mut uncond,
                            negative_prompt: Vec::new(),
                            scale,
                        },
                    )
                    .unwrap();
                    check_valid(
                        &out,
                        &schema,
                        max,
                        &format!("cfg {scale} salt {salt} max {max}"),
                    );
                    runs += 1;
                }
                for alpha in [0.0, 0.1, 0.5, 1.0] {
                    let mut amateur = forbidden_model(s.idx.clone(), s.prompt.len(), salt + 7);
                    let mut m = forbidden_model(s.idx.clone(), s.prompt.len(), salt);
                    let out = guided(
                        &s,
                        &mut m,
                        &cfg,
                        Guidance::Contrastive {
                            amateur: &mut amateur,
                            alpha,
                        },
                    )
                    .unwrap();
                    check_valid(
                        &out,
                        &schema,
                        max,
                        &format!("contrastive {alpha} salt {salt} max {max}"),
                    );
                    assert!(amateur.calls() >= 1);
                    runs += 1;
                }
            }
        }
    }
    assert_eq!(runs, 3 * 3 * 2 * 8);
}

/// α = 1 keeps only the tokens with the expert's best admissible
/// probability, so greedy contrastive is greedy with the expert alone, even
/// where the expert's favourite is forbidden or breaks the budget.
#[test]
fn contrastive_at_alpha_one_is_the_experts_greedy() {
    let (_, re) = record();
    let s = setup(&re);
    let width = s.vocab.logits_width();
    for salt in 0..4u64 {
        for max in [s.needed, s.needed + 1, 40] {
            let cfg = GenerateConfig::greedy(max);
            let want = plain(
                &s,
                &mut forbidden_model(s.idx.clone(), s.prompt.len(), salt),
                &cfg,
            );
            let mut amateur = random_model(width, salt + 9);
            let got = guided(
                &s,
                &mut forbidden_model(s.idx.clone(), s.prompt.len(), salt),
                &cfg,
                Guidance::Contrastive {
                    amateur: &mut amateur,
                    alpha: 1.0,
                },
            )
            .unwrap();
            assert_eq!(got.tokens, want.tokens, "salt {salt} max {max}");
        }
    }
}

#[test]
fn bad_guidance_values_are_errors() {
    let (_, re) = record();
    let s = setup(&re);
    let width = s.vocab.logits_width();
    let cfg = GenerateConfig::greedy(40);
    let e = guided(
        &s,
        &mut random_model(width, 1),
        &cfg,
        Guidance::ClassifierFree {
            uncond: &mut random_model(width, 2),
            negative_prompt: Vec::new(),
            scale: f32::NAN,
        },
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            GenerateError::Sampling(SamplingError::InvalidParameter {
                name: "guidance_scale",
                ..
            })
        ),
        "{e}"
    );
    let e = guided(
        &s,
        &mut random_model(width, 1),
        &cfg,
        Guidance::Contrastive {
            amateur: &mut random_model(width, 2),
            alpha: 1.5,
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("contrastive_alpha"), "{e}");
    let e = guided(
        &s,
        &mut random_model(width, 1),
        &cfg,
        Guidance::Contrastive {
            amateur: &mut random_model(width + 3, 2),
            alpha: 0.1,
        },
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            GenerateError::SecondModelWidth {
                role: "amateur",
                ..
            }
        ),
        "{e}"
    );
}
