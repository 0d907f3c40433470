//! Chunked prefill and the prompt-prefix cache on the real forward pass: a
//! tiny random-weight Qwen2 GGUF (written here) served three ways (no
//! budget and no cache; small prefill chunks; chunks and the cache), the
//! same greedy requests (one system prompt, different user messages, a
//! schema or free text) sent to each one after the other: the answers are
//! identical, and the cached server really reused prompt prefixes.

mod common;

use common::post;
use constrain_server::batch::{BatchConfig, Batcher, QwenBatch};
use constrain_server::{ModelFactory, SeqModel, ServerConfig, ServerState};
use constrain_testkit::tiny::{write_tiny_gguf, TinySpec};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

fn serve(path: &Path, config: BatchConfig) -> (SocketAddr, Arc<Batcher<QwenBatch>>) {
    let loaded = constrain_model::load(path, &constrain_model::TokenizerSource::Gguf).unwrap();
    let batcher = Batcher::start_with(QwenBatch(loaded.model.weights().clone()), config);
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
    (
        constrain_server::spawn(state, "127.0.0.1:0").unwrap(),
        batcher,
    )
}

fn requests() -> Vec<Value> {
    let system = "You are a careful assistant. Answer with the data asked for, in the format asked for, and nothing else. Be brief.";
    let schema = json!({
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 10}, "n": {"type": "integer"}},
        "required": ["name", "n"],
        "additionalProperties": false
    });
    let mut out = Vec::new();
    for (i, q) in ["Give me a name.", "Give me a number.", "Give me a name."]
        .iter()
        .enumerate()
    {
        let mut body = json!({
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": q}],
            "max_tokens": 24,
            "temperature": 0.0,
        });
        if i != 1 {
            body["response_format"] =
                json!({"type": "json_schema", "json_schema": {"name": "o", "schema": schema}});
        }
        out.push(body);
    }
    out
}

fn answers(addr: SocketAddr) -> Vec<String> {
    requests()
        .iter()
        .map(|body| {
            let r = post(addr, body);
            assert_eq!(r.status, 200, "{}", r.body);
            let v = r.json();
            v["choices"][0]["message"]["content"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[test]
fn answers_are_the_same_with_chunked_prefill_and_the_prefix_cache() {
    let dir = std::env::temp_dir().join(format!("constrain-prefix-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tiny-qwen2.gguf");
    let spec = TinySpec {
        arch: "qwen2".into(),
        context: 1024,
        ..TinySpec::default()
    };
    write_tiny_gguf(&path, &spec).unwrap();

    let (plain, _) = serve(
        &path,
        BatchConfig::default()
            .prefill_chunk(0)
            .prefix_cache_bytes(0),
    );
    let (chunked, chunked_b) = serve(
        &path,
        BatchConfig::default()
            .prefill_chunk(7)
            .prefix_cache_bytes(0),
    );
    let (cached, cached_b) = serve(
        &path,
        BatchConfig::default()
            .prefill_chunk(7)
            .prefix_cache_bytes(64 << 20),
    );
    let want = answers(plain);
    assert!(want.iter().all(|a| !a.is_empty()), "{want:?}");
    assert_eq!(answers(chunked), want, "chunked prefill changed an answer");
    assert_eq!(answers(cached), want, "the prefix cache changed an answer");

    // The chunked servers fed the prompts in passes of at most 7 tokens
    // (and so ran more passes than the plain one would).
    let (steps, _) = chunked_b.batched();
    assert!(steps > 3 * 20, "{steps} passes");
    // The second and third prompts started from the first one's KV cache.
    let s = cached_b.prefix_stats();
    assert_eq!(s.misses, 1, "{s:?}");
    assert_eq!(s.hits, 2, "{s:?}");
    assert!(s.reused_tokens > 2 * 20, "{s:?}");
    assert!(s.entries >= 1 && s.bytes > 0, "{s:?}");
    assert!(
        cached_b.tokens_fed() + s.reused_tokens == chunked_b.tokens_fed(),
        "fed {} + reused {} != {} fed without the cache",
        cached_b.tokens_fed(),
        s.reused_tokens,
        chunked_b.tokens_fed()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
