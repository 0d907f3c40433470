//! The pushdown engine's split masks: a configuration's
//! mask is the union over its stacks of the top frame's context-independent
//! tokens and its exit tokens resolved against the frames below. Each mask
//! must equal what the real configuration allows token by token
//! (`Matcher::is_allowed` walks the token's bytes through the whole stack,
//! no mask involved), on every grammar shipped in `grammars/`, on a tiny
//! vocabulary whose tokens cross rule boundaries and on the Qwen vocabulary,
//! under choices that push the stack deep.

use constrain::grammar::gbnf::{Gbnf, GbnfOptions};
use constrain::vocab::{TokenId, Vocabulary};
use constrain::{Compiled, Compiler, CompilerConfig, Source};
use constrain_testkit::budget::bytes_and;
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::sync::Arc;

/// Single bytes, then multi-byte tokens that cross rule boundaries
/// (closing several frames, closing one and opening the next); EOS last.
fn tiny_vocab() -> (Arc<Vocabulary>, TokenId) {
    bytes_and(&[
        "((", "))", ")))", "[[", "]]", "]]]", "],", "},", "}}", "}]", "]}", "\"}", "\":", "{\"",
        "x)", "(x", "true]", "1,", "12", "1]", "null}", ",\"", ", ", "+(", ")*", "a+", "()", "[]",
        "{}", "e4", "Nf3", "O-O", "x=", "1;", ";\n", "+1)", "0)",
    ])
}

/// Every `.gbnf` file in `grammars/`, with a byte that opens a frame.
fn shipped() -> Vec<(String, String, u8)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/grammars");
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "gbnf") {
            let text = std::fs::read_to_string(&p).unwrap();
            let opener = if text.contains("\"[\"") { b'[' } else { b'(' };
            out.push((p.display().to_string(), text, opener));
        }
    }
    out.sort();
    assert!(out.len() >= 4, "grammars/ holds the shipped GBNF examples");
    out
}

fn compile(vocab: &Arc<Vocabulary>, text: &str) -> Arc<Compiled> {
    let c = Compiler::new(vocab.clone(), CompilerConfig::default());
    c.compile(&Source::Gbnf {
        grammar: Gbnf::parse("t", text).unwrap(),
        options: GbnfOptions::default(),
    })
    .unwrap()
}

/// Random walks that open frames when they can; at each step the mask is
/// compared with `is_allowed` for every id in `check`.
fn agree(
    c: &Compiled,
    name: &str,
    opener: u8,
    seed: u64,
    runs: usize,
    steps: usize,
    check: &[TokenId],
) {
    let v = c.vocab().clone();
    let mut rng = StdRng::seed_from_u64(seed);
    for run in 0..runs {
        let mut m = c.matcher();
        let mut text = Vec::new();
        for step in 0..steps {
            let mask = m.allowed().clone();
            for &t in check {
                assert_eq!(
                    mask.contains(t),
                    m.is_allowed(t),
                    "{name}: token {:?} after {:?} (run {run}, step {step})",
                    v.describe(t),
                    String::from_utf8_lossy(&text)
                );
            }
            let allowed: Vec<TokenId> = mask.iter().filter(|&t| !v.is_eos(t)).collect();
            if allowed.is_empty() {
                break;
            }
            let open = TokenId(opener as u32);
            let t = if step < steps / 2 && m.is_allowed(open) && rng.random_bool(0.5) {
                open
            } else {
                allowed[rng.random_range(0..allowed.len())]
            };
            assert!(m.accept_token(t));
            text.extend_from_slice(v.token_bytes(t).unwrap());
        }
    }
}

#[test]
fn split_masks_equal_token_walks_on_every_shipped_grammar() {
    let (v, _) = tiny_vocab();
    let all: Vec<TokenId> = (0..v.logits_width() as u32).map(TokenId).collect();
    for (i, (name, text, opener)) in shipped().into_iter().enumerate() {
        let c = compile(&v, &text);
        agree(&c, &name, opener, 100 + i as u64, 20, 60, &all);
    }
}

#[test]
fn split_masks_equal_token_walks_over_the_qwen_vocabulary() {
    let Some(v) = constrain_testkit::assets::qwen_vocab() else {
        eprintln!("skipping: no tokenizer.json in ~/.cache/constrain (scripts/fetch-assets)");
        return;
    };
    // Every id is checked at each step: masks of ~150k tokens, so few steps.
    let all: Vec<TokenId> = (0..v.logits_width() as u32).map(TokenId).collect();
    for (i, (name, text, opener)) in shipped().into_iter().enumerate() {
        let c = compile(&v, &text);
        agree(&c, &name, opener, 200 + i as u64, 2, 14, &all);
    }
}

fn compile_with(vocab: &Arc<Vocabulary>, text: &str, split: bool) -> Arc<Compiled> {
    let mut cfg = CompilerConfig::default();
    cfg.index.pda_split = split;
    Compiler::new(vocab.clone(), cfg)
        .compile(&Source::Gbnf {
            grammar: Gbnf::parse("t", text).unwrap(),
            options: GbnfOptions::default(),
        })
        .unwrap()
}

/// The same random token path through the split engine and the one that
/// walks the trie once per configuration: every mask equal.
fn same_masks(
    v: &Arc<Vocabulary>,
    name: &str,
    text: &str,
    opener: u8,
    seed: u64,
    runs: usize,
    steps: usize,
) {
    let split = compile_with(v, text, true);
    let whole = compile_with(v, text, false);
    let mut rng = StdRng::seed_from_u64(seed);
    for run in 0..runs {
        let (mut a, mut b) = (split.matcher(), whole.matcher());
        for step in 0..steps {
            let (ma, mb) = (a.allowed().clone(), b.allowed().clone());
            assert!(ma == mb, "{name}: masks differ at run {run}, step {step}");
            let allowed: Vec<TokenId> = ma.iter().filter(|&t| !v.is_eos(t)).collect();
            if allowed.is_empty() {
                break;
            }
            let open = TokenId(opener as u32);
            let t = if step < steps / 2 && a.is_allowed(open) && rng.random_bool(0.5) {
                open
            } else {
                allowed[rng.random_range(0..allowed.len())]
            };
            assert!(a.accept_token(t) && b.accept_token(t));
        }
    }
}

#[test]
fn masks_are_identical_with_and_without_the_split() {
    let (v, _) = tiny_vocab();
    for (i, (name, text, opener)) in shipped().into_iter().enumerate() {
        same_masks(&v, &name, &text, opener, 300 + i as u64, 20, 80);
    }
    let Some(q) = constrain_testkit::assets::qwen_vocab() else {
        eprintln!("skipping the Qwen half: no tokenizer.json in ~/.cache/constrain (scripts/fetch-assets)");
        return;
    };
    for (i, (name, text, opener)) in shipped().into_iter().enumerate() {
        same_masks(&q, &name, &text, opener, 400 + i as u64, 3, 40);
    }
}

/// `schema` in compliant mode with free-form values as calls (the pushdown
/// engine), masks split per top frame or walked whole.
fn schema_split(v: &Arc<Vocabulary>, schema: &serde_json::Value, split: bool) -> Arc<Compiled> {
    let mut cfg = CompilerConfig::default();
    cfg.index.pda_split = split;
    Compiler::new(v.clone(), cfg)
        .compile(&Source::json_schema(schema.clone()).with_schema_options(
            constrain::schema::SchemaOptions::compliant().free_form_calls(true),
        ))
        .unwrap()
}

/// Schemas over the pushdown engine (free-form values as calls of the
/// shared "any JSON value" fragment, a recursive `$ref`, string bodies in
/// every fragment): the same random path through the split engine and the
/// whole walks, every mask equal, on the tiny and the Qwen vocabulary.
#[test]
fn schema_masks_are_identical_with_and_without_the_split() {
    use serde_json::json;
    let schemas = [
        json!({"type": "object", "properties": {"name": {"type": "string"}, "meta": {},
               "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["name"]}),
        json!({"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#"}},
               "label": {"type": "string", "maxLength": 5}, "extra": true}}),
        json!({"type": "array", "items": true}),
    ];
    let (tiny, _) = tiny_vocab();
    let qwen = constrain_testkit::assets::qwen_vocab();
    if qwen.is_none() {
        eprintln!("skipping the Qwen half: no tokenizer.json in ~/.cache/constrain (scripts/fetch-assets)");
    }
    for (i, schema) in schemas.iter().enumerate() {
        for (v, runs, steps) in [(Some(tiny.clone()), 12, 60), (qwen.clone(), 3, 30)] {
            let Some(v) = v else { continue };
            let (split, whole) = (
                schema_split(&v, schema, true),
                schema_split(&v, schema, false),
            );
            assert!(split.stats().fragments >= 2, "schema {i} uses fragments");
            let mut rng = StdRng::seed_from_u64(500 + i as u64);
            for run in 0..runs {
                let (mut a, mut b) = (split.matcher(), whole.matcher());
                for step in 0..steps {
                    let (ma, mb) = (a.allowed().clone(), b.allowed().clone());
                    assert!(
                        ma == mb,
                        "schema {i}: masks differ at run {run}, step {step}"
                    );
                    let allowed: Vec<TokenId> = ma.iter().filter(|&t| !v.is_eos(t)).collect();
                    if allowed.is_empty() {
                        break;
                    }
                    let open = TokenId(if step % 2 == 0 { b'[' } else { b'{' } as u32);
                    let t = if step < steps / 2 && a.is_allowed(open) && rng.random_bool(0.5) {
                        open
                    } else {
                        allowed[rng.random_range(0..allowed.len())]
                    };
                    assert!(a.accept_token(t) && b.accept_token(t));
                }
            }
        }
    }
}

/// Property names beside extra keys on the pushdown engine: the frame of a
/// name no plain text kills takes every plain token at once and walks only
/// the others (settling the tokens that enter the free key's string body
/// by that body's frame). Along texts that write declared names, their
/// prefixes, extra keys (after the declared ones) and escaped values, in the document and in objects nested
/// through a recursive `$ref` (frames over the stack below), every mask
/// equals the whole walk's, on the tiny and the Qwen vocabulary.
#[test]
fn property_names_past_plain_text_equal_the_whole_walks() {
    use serde_json::json;
    let schema = json!({
        "type": "object",
        "properties": {
            "alpha": {},
            "alpha_beta": {"type": "string"},
            "alphabet": {"type": "integer"},
            "gamma": {"type": "array", "items": {"$ref": "#"}},
            "déjà": {"type": "boolean"}
        }
    });
    let texts = [
        r#"{"alpha": 1, "alpha_beta": "x", "alphabet": 2, "extra": null, "al": 3}"#,
        r#"{"alpha": [1], "alpha_beta": "a\"b\\cé", "alphabetic": {"a": 1}}"#,
        r#"{"gamma": [{"alpha_beta": "y", "gamma": [{"z": 0}], "alpha_b": 1, "gam": []}]}"#,
        r#"{"déjà": false, "déjàvu": "ok", "d": 1, "": 2, "gammas": "g"}"#,
    ];
    let (tiny, _) = tiny_vocab();
    let qwen = constrain_testkit::assets::qwen_vocab();
    if qwen.is_none() {
        eprintln!("skipping the Qwen half: no tokenizer.json in ~/.cache/constrain (scripts/fetch-assets)");
    }
    for v in [Some(tiny), qwen].into_iter().flatten() {
        let (split, whole) = (
            schema_split(&v, &schema, true),
            schema_split(&v, &schema, false),
        );
        assert!(split.stats().fragments >= 2, "the schema uses fragments");
        // Each byte's own single-byte token.
        let mut byte_token = [None; 256];
        for (id, bytes) in v.text_tokens() {
            if let [b] = bytes {
                byte_token[*b as usize].get_or_insert(id);
            }
        }
        for text in texts {
            let (mut a, mut b) = (split.matcher(), whole.matcher());
            for (k, &byte) in text.as_bytes().iter().enumerate() {
                assert!(
                    a.allowed() == b.allowed(),
                    "masks differ after {:?}",
                    &text[..k]
                );
                let t = byte_token[byte as usize].expect("every byte is a token");
                assert!(a.accept_token(t) && b.accept_token(t), "{text} at byte {k}");
            }
            assert!(a.allowed() == b.allowed() && a.is_accepting(), "{text}");
        }
        assert!(
            split.index().frames_past_plain_text() > 0,
            "some frames took the plain tokens at once"
        );
        assert_eq!(whole.index().frames_past_plain_text(), 0);
    }
}
