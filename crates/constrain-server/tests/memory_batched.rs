//! Server memory stays flat over 1,000 sequential requests through the
//! batched decode loop with chunked prefill and a small prompt-prefix cache
//! that keeps evicting (a tiny random-weight Qwen2 GGUF written here; its
//! own test binary, so that no other test allocates in the process).

mod common;

use common::post;
use constrain_server::batch::{BatchConfig, Batcher, QwenBatch};
use constrain_server::{ModelFactory, SeqModel, ServerConfig, ServerState};
use constrain_testkit::tiny::{write_tiny_gguf, TinySpec};
use serde_json::json;
use std::sync::Arc;

fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

#[test]
fn memory_is_flat_over_a_thousand_requests_with_the_prefix_cache_evicting() {
    if rss_bytes().is_none() {
        eprintln!("skipping: /proc/self/statm is not available on this system");
        return;
    }
    let dir = std::env::temp_dir().join(format!("constrain-membatch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tiny-qwen2.gguf");
    let spec = TinySpec {
        arch: "qwen2".into(),
        context: 1024,
        ..TinySpec::default()
    };
    write_tiny_gguf(&path, &spec).unwrap();
    let loaded = constrain_model::load(&path, &constrain_model::TokenizerSource::Gguf).unwrap();
    const CACHE: usize = 64 << 10;
    let batcher = Batcher::start_with(
        QwenBatch(loaded.model.weights().clone()),
        BatchConfig::default()
            .prefill_chunk(16)
            .prefix_cache_bytes(CACHE),
    );
    let b = batcher.clone();
    let factory: ModelFactory = Arc::new(move || Ok(Box::new(b.handle()?) as SeqModel));
    let state = ServerState::new(
        ServerConfig::default().parallel(2),
        "tiny-qwen2",
        loaded.tokenizer,
        loaded.vocab,
        factory,
    )
    .unwrap();
    let addr = constrain_server::spawn(state, "127.0.0.1:0").unwrap();
    let schema =
        json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]});
    let one = |i: usize| {
        // Every prompt its own (the cache stores each and evicts), sharing
        // the system prompt (the cache reuses it).
        let mut body = json!({
            "messages": [
                {"role": "system", "content": "Answer briefly."},
                {"role": "user", "content": format!("Question number {i}?")}
            ],
            "max_tokens": 8, "seed": i, "stream": i % 3 == 0,
        });
        if i % 2 == 0 {
            body["response_format"] =
                json!({"type": "json_schema", "json_schema": {"name": "s", "schema": schema}});
        }
        let r = post(addr, &body);
        assert_eq!(r.status, 200, "{}", r.body);
    };
    for i in 0..200 {
        one(i);
    }
    let before = rss_bytes().unwrap();
    for i in 200..1200 {
        one(i);
    }
    let after = rss_bytes().unwrap();
    let s = batcher.prefix_stats();
    eprintln!(
        "rss after 200 requests: {} KiB, after 1,200: {} KiB; prefix cache {s:?}",
        before / 1024,
        after / 1024
    );
    assert!(s.bytes <= CACHE, "{s:?}");
    assert!(
        s.hits >= 1000,
        "the shared system prompt was not reused: {s:?}"
    );
    let growth = after.saturating_sub(before);
    assert!(
        growth < 8 << 20,
        "memory grew by {} KiB over 1,000 requests",
        growth / 1024
    );
    let _ = std::fs::remove_dir_all(&dir);
}
