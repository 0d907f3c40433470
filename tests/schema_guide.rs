//! Compiled schemas at the token level, through `TokenIndex` and `Matcher`.
//!
//! - A hand-made byte-level vocabulary (offline): instances split into known
//!   tokens must walk through the guide and end where EOS is allowed; invalid
//!   ones must hit a disallowed token or end outside the language.
//! - The real Qwen tokenizer (skipped when `$CONSTRAIN_HOME` lacks it): the
//!   tokens of `json.dumps(instance)` walk through; random token walks over the
//!   guide end in documents that parse and validate.

mod schema_util;

use constrain::index::TokenIndex;
use constrain::matcher::Matcher;
use constrain::schema::{self, JsonMode, SchemaOptions, Whitespace};
use constrain::vocab::{TextTokenizer, TokenId, Vocabulary};
use constrain::{Compiler, CompilerConfig, Source};
use rand::Rng;
use schema_util::*;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;

fn home() -> PathBuf {
    match std::env::var_os("CONSTRAIN_HOME") {
        Some(h) => PathBuf::from(h),
        None => {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/constrain")
        }
    }
}

/// Walks `tokens`; Ok(true) when every token is allowed and EOS is allowed at the end.
fn walk(guide: &mut Matcher, tokens: &[TokenId], eos: TokenId) -> bool {
    for &t in tokens {
        if !guide.is_allowed(t) {
            return false;
        }
        guide.advance(t).unwrap();
    }
    guide.is_accepting() && guide.is_allowed(eos)
}

fn tiny_vocab() -> (Arc<Vocabulary>, Vec<String>) {
    // Printable ASCII maps to itself in the GPT-2 byte-level alphabet; 'Ġ' is a space.
    let words: Vec<String> = [
        "{", "}", "[", "]", "\"", ":", ",", "Ġ", "a", "b", "x", "1", "2", "0", "-", "true",
        "false", "null", "\"a\"", "\":", "\":Ġ", ",Ġ", "\"b", "12", "ab", "t", "r", "u", "e", "f",
        "l", "s", "n", "3", "4", "5", "6", "7", "8", "9",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let regular: Vec<(u32, String)> = words
        .iter()
        .enumerate()
        .map(|(i, w)| (i as u32, w.clone()))
        .collect();
    let eos_id = words.len() as u32;
    let v = Vocabulary::from_byte_level(
        regular,
        vec![(eos_id, "<eos>".into(), true)],
        Some(vec![TokenId(eos_id)]),
    )
    .unwrap();
    (Arc::new(v), words)
}

/// Splits text into tiny-vocabulary tokens, longest match first.
fn tiny_encode(text: &str, words: &[String]) -> Vec<TokenId> {
    let bytes: Vec<String> = words.iter().map(|w| w.replace('Ġ', " ")).collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        let (id, w) = bytes
            .iter()
            .enumerate()
            .filter(|(_, w)| text[i..].starts_with(w.as_str()))
            .max_by_key(|(_, w)| w.len())
            .unwrap_or_else(|| panic!("no token for {:?}", &text[i..]));
        out.push(TokenId(id as u32));
        i += w.len();
    }
    out
}

#[test]
fn tiny_vocabulary_walks() {
    let (vocab, words) = tiny_vocab();
    let eos = vocab.eos()[0];
    let s = json!({"type": "object", "properties": {"a": {"type": "integer", "minimum": -2, "maximum": 12}, "b": {"type": "boolean"}}, "required": ["a"], "additionalProperties": false});
    for ws in [
        Whitespace::Compact,
        Whitespace::Python,
        Whitespace::Flexible { max: 1 },
    ] {
        let c = schema::compile(&s, &opts(ws, JsonMode::Strict)).unwrap();
        let index = regex_index(&c.regex, &vocab);
        for (v, ok) in [
            (json!({"a": 12}), true),
            (json!({"a": -2, "b": true}), true),
            (json!({"a": 0, "b": null}), false),
            (json!({"a": 13}), false),
            (json!({"b": false}), false),
        ] {
            let text = render(&v, ws);
            let mut g = Matcher::from_index(index.clone());
            assert_eq!(
                walk(&mut g, &tiny_encode(&text, &words), eos),
                ok,
                "{ws:?} {text}"
            );
        }
    }
}

fn qwen() -> Option<(Arc<Vocabulary>, TextTokenizer)> {
    let p = home().join("tokenizer.json");
    if !p.exists() {
        eprintln!("skipping: {} not found (set CONSTRAIN_HOME)", p.display());
        return None;
    }
    let vocab = Vocabulary::from_tokenizer_json_file(&p).unwrap();
    let tok = TextTokenizer::from_file(&p).unwrap();
    Some((Arc::new(vocab), tok))
}

#[test]
fn qwen_tokens_walk_and_random_walks_validate() {
    let Some((vocab, tok)) = qwen() else { return };
    let eos = vocab.eos()[0];
    let cases = [
        (
            json!({"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer", "minimum": 0, "maximum": 130}, "email": {"type": "string", "format": "email"}}, "required": ["name", "age"]}),
            vec![
                json!({"name": "Ada Lovelace", "age": 36}),
                json!({"name": "Zoë", "age": 0, "email": "zoe@example.org"}),
            ],
            vec![
                json!({"name": "Ada", "age": 131}),
                json!({"age": 3}),
                json!({"name": "x", "age": 1, "email": "nope"}),
            ],
        ),
        (
            json!({"type": "array", "items": {"type": "string", "format": "date"}, "minItems": 1, "maxItems": 3}),
            vec![json!(["2024-02-29"]), json!(["2023-01-01", "1999-12-31"])],
            vec![json!([]), json!(["2023-02-29"])],
        ),
    ];
    let mut rng = rng(17);
    for (s, good, bad) in cases {
        let oracle = Oracle::new(&s).unwrap();
        let c = schema::compile(&s, &SchemaOptions::compliant()).unwrap();
        let index = regex_index(&c.regex, &vocab);
        for v in &good {
            let text = py_dumps(v);
            let mut g = Matcher::from_index(index.clone());
            assert!(
                walk(&mut g, &tok.encode(&text).unwrap(), eos),
                "{text} should walk through"
            );
        }
        for v in &bad {
            let text = py_dumps(v);
            let mut g = Matcher::from_index(index.clone());
            assert!(
                !walk(&mut g, &tok.encode(&text).unwrap(), eos),
                "{text} should be rejected"
            );
        }
        // Random token walks: stop at EOS or after 200 tokens, steering to the end.
        for _ in 0..20 {
            let mut g = Matcher::from_index(index.clone());
            let mut ids = Vec::new();
            loop {
                let allowed: Vec<TokenId> = g.allowed().iter().collect();
                if allowed.is_empty() {
                    let bytes: Vec<u8> = ids
                        .iter()
                        .flat_map(|t: &TokenId| vocab.token_bytes(*t).unwrap_or(b"?").to_vec())
                        .collect();
                    panic!(
                        "nothing allowed after {:?} {:?} (accepting: {})",
                        String::from_utf8_lossy(&bytes),
                        ids,
                        g.is_accepting()
                    );
                }
                if g.is_allowed(eos) && (ids.len() > 30 || rng.random_bool(0.2)) {
                    break;
                }
                let t = if ids.len() > 60 {
                    // Steer: the token that gets closest to acceptance.
                    *allowed
                        .iter()
                        .filter(|t| !vocab.eos().contains(t))
                        .min_by_key(|t| g.tokens_to_accept_after(**t).unwrap_or(u32::MAX))
                        .unwrap_or(&eos)
                } else {
                    let plain: Vec<&TokenId> = allowed
                        .iter()
                        .filter(|t| !vocab.eos().contains(t))
                        .collect();
                    if plain.is_empty() {
                        break;
                    }
                    *plain[rng.random_range(0..plain.len())]
                };
                if vocab.eos().contains(&t) {
                    break;
                }
                g.advance(t).unwrap();
                ids.push(t);
                assert!(ids.len() < 400, "walk did not end");
            }
            assert!(g.is_accepting());
            let bytes: Vec<u8> = ids
                .iter()
                .flat_map(|t| vocab.token_bytes(*t).unwrap().to_vec())
                .collect();
            let text = String::from_utf8(bytes).expect("UTF-8");
            let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert!(oracle.valid(&v), "{text}");
        }
    }
}

/// The index of a schema's regex, through the library's one compile path.
fn regex_index(re: &str, vocab: &Arc<Vocabulary>) -> Arc<TokenIndex> {
    let compiler = Compiler::new(vocab.clone(), CompilerConfig::default());
    compiler
        .compile(&Source::regex(re))
        .unwrap()
        .index()
        .clone()
}
