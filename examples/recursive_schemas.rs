//! Compile time of recursive JSON Schemas through the pushdown engine
//! (target ≤ 5 ms each) over the real Qwen vocabulary,
//! and acceptance of a depth-50 instance:
//! `cargo run --release --example recursive_schemas [RUNS]`.
//! Each compile is uncached (schema → fragments → automata → first mask);
//! the vocabulary's shared tries are built once before timing.

use constrain::schema::SchemaOptions;
use constrain::vocab::TokenId;
use constrain::{Compiler, CompilerConfig, Source};
use serde_json::{json, Value};
use std::time::Instant;

fn main() {
    let Some(vocab) = constrain_testkit::assets::qwen_vocab() else {
        eprintln!("skipping: no tokenizer.json in ~/.cache/constrain (scripts/fetch-assets)");
        return;
    };
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(30);
    let deep = |open: &str, leaf: &str, close: &str| {
        format!("{}{leaf}{}", open.repeat(50), close.repeat(50))
    };
    let cases: Vec<(&str, Value, String)> = vec![
        (
            "tree",
            json!({"type": "object",
                   "properties": {"children": {"type": "array", "items": {"$ref": "#"}}},
                   "required": ["children"], "additionalProperties": false}),
            deep(r#"{"children":["#, r#"{"children":[]}"#, "]}"),
        ),
        (
            "linked list",
            json!({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object",
                   "properties": {"value": {"type": "integer"},
                                  "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
                   "required": ["value", "next"], "additionalProperties": false}}}),
            deep(r#"{"value":1,"next":"#, "null", "}"),
        ),
        (
            "json value",
            json!({"$ref": "#/$defs/v", "$defs": {"v": {"anyOf": [
                {"type": "null"}, {"type": "boolean"}, {"type": "number"}, {"type": "string"},
                {"type": "array", "items": {"$ref": "#/$defs/v"}},
                {"type": "object", "additionalProperties": {"$ref": "#/$defs/v"}}]}}}),
            deep(r#"{"a":"#, "[true,null]", "}"),
        ),
    ];
    // The single-byte token of each byte (the walk goes byte by byte).
    let mut byte = [TokenId(0); 256];
    for (t, b) in vocab.text_tokens() {
        if let [b] = b {
            byte[*b as usize] = t;
        }
    }
    let compiler = Compiler::new(vocab.clone(), CompilerConfig::default());
    let opts = SchemaOptions::default().max_depth(64);
    // Warm the vocabulary's shared tries.
    compiler
        .compile_uncached(&Source::regex("x"))
        .expect("warm-up");
    println!("schema         fragments  compile p50   p90      depth-50 accepted  oracle");
    for (name, schema, text) in cases {
        let src = Source::json_schema(schema.clone()).with_schema_options(opts.clone());
        let mut times = Vec::with_capacity(runs);
        let mut last = None;
        for _ in 0..runs {
            let t = Instant::now();
            let c = compiler.compile_uncached(&src).expect("compiles");
            times.push(t.elapsed());
            last = Some(c);
        }
        times.sort();
        let c = last.expect("runs > 0");
        let mut m = c.matcher();
        let accepted = text.bytes().all(|b| m.accept_token(byte[b as usize])) && m.is_accepting();
        let oracle = jsonschema::validator_for(&schema)
            .unwrap()
            .is_valid(&serde_json::from_str(&text).unwrap());
        println!(
            "{name:<14} {:>9}  {:>8.2} ms  {:>6.2} ms  {accepted:<17}  {oracle}",
            c.stats().fragments,
            times[runs / 2].as_secs_f64() * 1e3,
            times[runs * 9 / 10].as_secs_f64() * 1e3,
        );
    }
}
