//! The batched decode loop end to end: a server over a tiny random-weight
//! Qwen2 GGUF (written here; its own tokenizer) with one shared copy of the
//! weights and one decode loop ([`constrain_server::batch`]), eight
//! concurrent JSON-Schema requests on four slots: every answer validates,
//! and the loop really ran steps holding several sequences.

mod common;

use common::{assert_valid, post, user};
use constrain_server::batch::{Batcher, QwenBatch};
use constrain_server::{ModelFactory, SeqModel, ServerConfig, ServerState};
use constrain_testkit::tiny::{write_tiny_gguf, TinySpec};
use serde_json::json;
use std::sync::Arc;

#[test]
fn concurrent_requests_share_batched_steps_and_all_validate() {
    let dir = std::env::temp_dir().join(format!("constrain-batched-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tiny-qwen2.gguf");
    let spec = TinySpec {
        arch: "qwen2".into(),
        context: 1024,
        ..TinySpec::default()
    };
    write_tiny_gguf(&path, &spec).unwrap();
    let loaded = constrain_model::load(&path, &constrain_model::TokenizerSource::Gguf).unwrap();
    let batcher = Batcher::start(QwenBatch(loaded.model.weights().clone()));
    let b = batcher.clone();
    let factory: ModelFactory = Arc::new(move || Ok(Box::new(b.handle()?) as SeqModel));
    let config = ServerConfig::default().parallel(4);
    let state = ServerState::new(
        config,
        "tiny-qwen2",
        loaded.tokenizer,
        loaded.vocab,
        factory,
    )
    .unwrap();
    let addr = constrain_server::spawn(state, "127.0.0.1:0").unwrap();

    let schema = json!({
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 12}, "n": {"type": "integer"}},
        "required": ["name", "n"],
        "additionalProperties": false
    });
    let threads: Vec<_> = (0..8)
        .map(|seed| {
            let schema = schema.clone();
            std::thread::spawn(move || {
                let r = post(
                    addr,
                    &json!({
                        "messages": user("Give me data."),
                        "response_format": {"type": "json_schema", "json_schema": {"name": "o", "schema": schema}},
                        "max_tokens": 60,
                        "seed": seed,
                        "temperature": 1.0,
                    }),
                );
                assert_eq!(r.status, 200, "{}", r.body);
                let v = r.json();
                assert_eq!(v["choices"][0]["finish_reason"], "stop", "{v}");
                let text = v["choices"][0]["message"]["content"].as_str().unwrap().to_string();
                let doc: serde_json::Value = serde_json::from_str(&text)
                    .unwrap_or_else(|e| panic!("{text:?} does not parse: {e}"));
                assert_valid(&schema, &doc);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let (steps, rows) = batcher.batched();
    assert!(
        steps > 0 && rows > steps,
        "{rows} rows in {steps} steps: nothing was batched"
    );
    // Every finished request left the loop.
    assert_eq!(batcher.active(), 0);
}
