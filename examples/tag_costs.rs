//! What a structural tag costs over the real Qwen vocabulary, one thread:
//! the compile of a Qwen 3 tool-calling tag over ten tools (warm: the
//! vocabulary's tries built; then again from the cache), and the mask step
//! (`fill_bitmask` + `accept_token`) inside free text, p50 / p99 / max over a
//! long text of ordinary tokens.
//!
//! `cargo run --release --example tag_costs` (needs `scripts/fetch-assets`).

use constrain::index::IndexConfig;
use constrain::tools::{structural_tag, Reasoning, ToolChoice, ToolFormat};
use constrain::{bitmask_words, Compiler, CompilerConfig, Source};
use constrain_testkit::assets;
use serde_json::json;
use std::time::Instant;

fn tools(n: usize) -> serde_json::Value {
    (0..n)
        .map(|i| {
            json!({"type": "function", "function": {"name": format!("tool_{i}"), "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                    "mode": {"enum": ["fast", "exact"]},
                    "tags": {"type": "array", "items": {"type": "string"}}},
                "required": ["query"]}}})
        })
        .collect()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let (Some(vocab), Some(tok)) = (assets::qwen_vocab(), assets::qwen_tokenizer()) else {
        eprintln!("skipping: the Qwen tokenizer is not fetched (scripts/fetch-assets)");
        return;
    };
    let config = CompilerConfig::default().index(IndexConfig::default().threads(1));
    let compiler = Compiler::new(vocab.clone(), config);
    // Warm the vocabulary's shared tries.
    compiler.compile(&Source::regex("warm")).unwrap();
    let tag = |i: usize| {
        let mut t = tools(10);
        t[0]["function"]["name"] = json!(format!("first_{i}"));
        structural_tag(
            ToolFormat::Qwen3,
            &t,
            &ToolChoice::Auto,
            true,
            Reasoning::Enabled,
        )
        .unwrap()
    };
    let mut cold = Vec::new();
    for i in 0..20 {
        let src = Source::StructuralTag {
            tag: tag(i),
            options: constrain::tags::StructuralTag::schema_options(),
        };
        let t = Instant::now();
        let c = compiler.compile(&src).unwrap();
        cold.push(t.elapsed().as_secs_f64() * 1e3);
        let _ = c.matcher().allowed();
    }
    let src = Source::StructuralTag {
        tag: tag(0),
        options: constrain::tags::StructuralTag::schema_options(),
    };
    let t = Instant::now();
    let compiled = compiler.compile(&src).unwrap();
    let cached = t.elapsed().as_secs_f64() * 1e3;
    cold.sort_by(f64::total_cmp);
    println!(
        "compile, Qwen 3 tag over 10 tools, warm: p50 {:.2} ms, max {:.2} ms; from the cache {:.3} ms",
        percentile(&cold, 0.5),
        cold[cold.len() - 1],
        cached
    );

    // Free text inside the thinking, then after it.
    let text = "Let me think about which tool fits. The user asks for results about rust, \
        so the query is clear and the limit can stay at its default. "
        .repeat(40);
    let mut ids = tok.encode(&text).unwrap();
    let end = tok.encode("</think>\n\n").unwrap();
    ids.extend(end);
    ids.extend(tok.encode(&text).unwrap());
    let mut row = vec![0u32; bitmask_words(vocab.logits_width())];
    let mut m = compiled.matcher();
    let mut steps = Vec::with_capacity(ids.len());
    for &t in &ids {
        let s = Instant::now();
        m.fill_bitmask(&mut row).unwrap();
        let ok = m.accept_token(t);
        steps.push(s.elapsed().as_secs_f64() * 1e6);
        assert!(ok, "free text refused {}", vocab.describe(t));
    }
    steps.sort_by(f64::total_cmp);
    println!(
        "mask step in free text ({} tokens): p50 {:.2} us, p99 {:.2} us, max {:.1} us",
        steps.len(),
        percentile(&steps, 0.5),
        percentile(&steps, 0.99),
        steps[steps.len() - 1]
    );
}
