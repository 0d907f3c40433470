//! Generation under a recursive JSON Schema compiled through the pushdown
//! engine: a scripted model that always prefers opening
//! another level (`[` / `{`) runs into every `max_tokens` budget, and each
//! output is still a complete document that the `jsonschema` crate
//! validates — `max_tokens` never cuts a recursive structure in half.

use constrain::schema::SchemaOptions;
use constrain::vocab::TokenId;
use constrain::{Compiler, CompilerConfig, Matcher, Source};
use constrain_model::generate::{generate, GenerateConfig};
use constrain_testkit::{tiny, FakeModel};
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

fn schemas() -> Vec<Value> {
    vec![
        json!({
            "type": "object",
            "properties": {"children": {"type": "array", "items": {"$ref": "#"}}},
            "required": ["children"],
            "additionalProperties": false
        }),
        json!({
            "$ref": "#/$defs/v",
            "$defs": {"v": {"anyOf": [
                {"type": "null"}, {"type": "integer"},
                {"type": "array", "items": {"$ref": "#/$defs/v"}},
                {"type": "object", "additionalProperties": {"$ref": "#/$defs/v"}}
            ]}}
        }),
    ]
}

#[test]
fn budget_safe_generation_under_recursion_ends_valid() {
    let t = tiny::tokenizer().unwrap();
    let vocab = Arc::new(t.vocab.clone());
    let openers: Vec<bool> = (0..vocab.logits_width())
        .map(|i| {
            vocab
                .token_bytes(TokenId(i as u32))
                .is_some_and(|b| b.iter().any(|c| b"[{".contains(c)))
        })
        .collect();
    let compiler = Compiler::new(vocab.clone(), CompilerConfig::default());
    for schema in schemas() {
        let opts = SchemaOptions::default().max_depth(64);
        let c = compiler
            .compile(&Source::json_schema(schema.clone()).with_schema_options(opts))
            .unwrap();
        if c.stats().fragments == 0 {
            eprintln!("skipping: the tiny tokenizer lacks single-byte tokens (no pushdown path)");
            return;
        }
        let oracle = jsonschema::validator_for(&schema).unwrap();
        let need = c.matcher().tokens_to_accept().unwrap() as usize;
        for (k, max_tokens) in (need..need + 40).step_by(3).enumerate() {
            let rng = Mutex::new(rand::rngs::StdRng::seed_from_u64(k as u64));
            let op = openers.clone();
            let width = vocab.logits_width();
            let mut model = FakeModel::new(width, move |_seq| {
                let mut rng = rng.lock().unwrap();
                (0..width)
                    .map(|i| rng.random::<f32>() + if op[i] { 20.0 } else { 0.0 })
                    .collect()
            });
            let mut g: Matcher = c.matcher();
            let out = generate(
                &mut model,
                &vocab,
                Some(&t.tokenizer),
                Some(&mut g),
                &[TokenId(1)],
                &GenerateConfig::greedy(max_tokens),
                &mut |_| {},
            )
            .unwrap();
            assert!(out.accepted, "max_tokens {max_tokens}: {}", out.text());
            let v: Value = serde_json::from_str(&out.text())
                .unwrap_or_else(|e| panic!("max_tokens {max_tokens}: {e}: {}", out.text()));
            assert!(
                oracle.is_valid(&v),
                "max_tokens {max_tokens}: {}",
                out.text()
            );
        }
    }
}
