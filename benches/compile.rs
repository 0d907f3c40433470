//! The compile pipeline and the matcher's per-step cost, over the real Qwen
//! vocabulary, single-threaded (criterion): `cargo bench --bench compile`.
//!
//! * `compile_uncached/NAME`: source → regex → DFA → index, the vocabulary's
//!   shared tries already built (what every compile after the first pays);
//! * `compile_cached/NAME`: the same source again through the cache (what a
//!   server pays for a schema it has seen);
//! * `matcher_step/NAME`: `fill_bitmask` (XGrammar layout, 4,748 words) plus
//!   `accept_token`, along the tokens of a valid instance.
//!
//! Schemas: `schemas/record.json`, and from `../shared/corpora/maskbench-dev`
//! (when present) a Kubernetes and a BFCL schema. Skips with a message when
//! the tokenizer is absent.

use constrain::index::IndexConfig;
use constrain::schema::SchemaOptions;
use constrain::{bitmask_words, Compiler, CompilerConfig, Source};
use constrain_testkit::assets;
use constrain_testkit::maskbench::python_dumps;
use criterion::{black_box, criterion_group, Criterion};
use std::path::Path;

/// (name, schema, a valid instance as MaskBench writes it, options)
fn cases() -> Vec<(String, serde_json::Value, String, SchemaOptions)> {
    let root = assets::repo_root();
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("schemas/record.json")).unwrap())
            .unwrap();
    let instance = r#"{"name":"Ada Lovelace","age":36,"address":{"street":"12 St James's Square","city":"London","country":"UK"},"employment":{"company":"Analytical Engines","title":"Programmer","since":1950},"tags":["math","poetry"]}"#;
    let mut out = vec![(
        "record".to_string(),
        record,
        instance.to_string(),
        SchemaOptions::default(),
    )];
    if let Some(corpora) = assets::corpora() {
        for (name, file) in [
            ("kubernetes", "Kubernetes---kb_1000_Normalized.json"),
            ("bfcl_java_66", "BFCL_java_66.json"),
        ] {
            let p = corpora.join("maskbench-dev").join(file);
            let Some((schema, inst)) = load(&p) else {
                eprintln!(
                    "compile bench: skipping {name}: cannot read {}",
                    p.display()
                );
                continue;
            };
            out.push((name.into(), schema, inst, SchemaOptions::compliant()));
        }
    }
    out
}

fn load(p: &Path) -> Option<(serde_json::Value, String)> {
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()?;
    let inst = v["tests"].as_array()?.iter().find(|t| t["valid"] == true)?;
    Some((v["schema"].clone(), python_dumps(&inst["data"])))
}

fn bench(c: &mut Criterion) {
    let (Some(vocab), Some(tok)) = (assets::qwen_vocab(), assets::qwen_tokenizer()) else {
        eprintln!("compile bench: skipped (no tokenizer; run scripts/fetch-assets)");
        return;
    };
    let compiler = Compiler::new(
        vocab.clone(),
        CompilerConfig::default().index(IndexConfig::default().threads(1)),
    );
    let words = bitmask_words(vocab.logits_width());
    let mut g = c.benchmark_group("compile");
    for (name, schema, instance, options) in cases() {
        let source = Source::json_schema(schema).with_schema_options(options);
        let compiled = match compiler.compile(&source) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("compile bench: {name} does not compile: {e}");
                continue;
            }
        };
        g.bench_function(format!("compile_uncached/{name}"), |b| {
            b.iter(|| black_box(compiler.compile_uncached(&source).unwrap()))
        });
        g.bench_function(format!("compile_cached/{name}"), |b| {
            b.iter(|| black_box(compiler.compile(&source).unwrap()))
        });
        let tokens = tok.encode(&instance).unwrap();
        {
            let mut m = compiled.matcher();
            assert!(
                tokens.iter().all(|&t| m.accept_token(t)),
                "{name}: the instance is accepted"
            );
        }
        let mut row = vec![0u32; words];
        g.bench_function(format!("matcher_step/{name}"), |b| {
            let mut m = compiled.matcher();
            let mut i = 0;
            b.iter(|| {
                if i == tokens.len() {
                    m.reset();
                    i = 0;
                }
                m.fill_bitmask(&mut row).unwrap();
                black_box(&row);
                assert!(m.accept_token(tokens[i]));
                i += 1;
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
