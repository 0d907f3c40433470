//! `constrain_trace: true` (constrain's extension) on a server on loopback
//! over the tiny vocabulary and a random fake model: each choice carries the
//! step trace `constrain --trace` writes (`model`, `prompt`, `settings`,
//! `steps`, `sequence_logprob`), whose chosen tokens spell the answer, each
//! step's top 16 marked allowed or masked by the constraint (checked with an
//! independent matcher replaying the tokens), in plain and streamed answers;
//! the OpenAI fields are as without it. And the playground page carries the
//! inspector component `constrain view` uses (its style and script, whole).

mod common;

use common::*;
use constrain::{Compiler, CompilerConfig, Source};
use constrain_server::ServerConfig;
use constrain_testkit::tiny;
use serde_json::{json, Value};
use std::sync::Arc;

fn schema() -> Value {
    json!({"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
        "ok": {"type": "boolean"}}, "required": ["name", "ok"], "additionalProperties": false})
}

/// Checks a trace against the answer text and the schema's constraint.
fn check_trace(t: &Value, content: &str, completion_tokens: u64) {
    let steps = t["steps"].as_array().expect("steps");
    assert_eq!(steps.len() as u64, completion_tokens, "one step per token");
    let tok = tiny::tokenizer().unwrap();
    let vocab = Arc::new(tok.vocab.clone());
    let compiled = Compiler::new(vocab.clone(), CompilerConfig::default())
        .compile(&Source::json_schema(schema()))
        .unwrap();
    let mut m = compiled.matcher();
    let mut text = Vec::new();
    let mut sum = 0.0;
    for (i, s) in steps.iter().enumerate() {
        assert_eq!(s["step"], i, "{s}");
        assert_eq!(s["forced"], false, "jump-forward is off under a trace");
        let id = s["token"]["id"].as_u64().unwrap() as u32;
        let top = s["top"].as_array().unwrap();
        assert_eq!(top.len(), 16, "{s}");
        for x in top {
            let tid = constrain::TokenId(x["id"].as_u64().unwrap() as u32);
            assert_eq!(x["allowed"], m.is_allowed(tid), "step {i}: {x}");
        }
        let logits: Vec<f64> = top.iter().map(|x| x["logit"].as_f64().unwrap()).collect();
        assert!(
            logits.windows(2).all(|w| w[0] >= w[1]),
            "best first: {logits:?}"
        );
        assert_eq!(
            s["allowed_count"].as_u64().unwrap() as usize,
            m.allowed().len(),
            "step {i}"
        );
        let lp = s["logprob"].as_f64().unwrap();
        assert!(lp <= 1e-9 && lp.is_finite(), "{s}");
        sum += lp;
        let b: Vec<u8> = s["token"]["bytes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u8)
            .collect();
        text.extend_from_slice(&b);
        assert!(
            m.is_allowed(constrain::TokenId(id)),
            "step {i}: chose a masked token"
        );
        m.advance(constrain::TokenId(id)).unwrap();
    }
    assert_eq!(String::from_utf8(text).unwrap(), content);
    assert!((t["sequence_logprob"].as_f64().unwrap() - sum).abs() < 1e-6);
    assert_eq!(t["model"], "tiny-fake");
    assert!(t["prompt"].as_str().unwrap().contains("Name someone."));
    assert!(t["settings"]["max_tokens"].is_u64());
}

fn request(stream: bool, trace: bool) -> Value {
    let mut b = json!({
        "model": "m",
        "messages": user("Name someone."),
        "max_tokens": 40,
        "seed": 5,
        "stream": stream,
        "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": schema(), "strict": true}},
    });
    if trace {
        b["constrain_trace"] = json!(true);
    }
    b
}

#[test]
fn a_choice_carries_its_step_trace() {
    let addr = start(ServerConfig::default(), Fake::default());
    for _ in 0..3 {
        let r = post(addr, &request(false, true));
        assert_eq!(r.status, 200, "{}", r.body);
        let v = r.json();
        let c = &v["choices"][0];
        let content = c["message"]["content"].as_str().unwrap();
        assert_valid(&schema(), &serde_json::from_str(content).unwrap());
        assert_eq!(c["logprobs"], Value::Null, "OpenAI's logprobs untouched");
        check_trace(
            &c["constrain_trace"],
            content,
            v["usage"]["completion_tokens"].as_u64().unwrap(),
        );
    }
    // Without the extension: no trace field.
    let r = post(addr, &request(false, false)).json();
    assert!(r["choices"][0].get("constrain_trace").is_none(), "{r}");
    // A bad value is a 400 naming nothing else broken.
    let mut bad = request(false, true);
    bad["constrain_trace"] = json!("yes");
    assert_eq!(post(addr, &bad).status, 400);
}

#[test]
fn a_stream_carries_the_trace_in_its_last_chunk() {
    let addr = start(ServerConfig::default(), Fake::default());
    let r = post(addr, &request(true, true));
    assert_eq!(r.status, 200);
    let mut content = String::new();
    let mut trace = None;
    let events = r.events();
    for e in &events {
        if e == "[DONE]" {
            continue;
        }
        let c: Value = serde_json::from_str(e).unwrap();
        let ch = &c["choices"][0];
        if let Some(s) = ch["delta"]["content"].as_str() {
            content.push_str(s);
        }
        if let Some(t) = ch.get("constrain_trace") {
            assert!(
                ch["finish_reason"].is_string(),
                "the trace comes with the finish"
            );
            trace = Some(t.clone());
        }
    }
    let t = trace.expect("a trace in the stream");
    let n = t["steps"].as_array().unwrap().len() as u64;
    check_trace(&t, &content, n);
    assert_valid(&schema(), &serde_json::from_str(&content).unwrap());
}

#[test]
fn the_playground_embeds_the_inspector_component() {
    let addr = start(ServerConfig::default(), Fake::default());
    let page = http(addr, "GET", "/", None, &[]);
    assert_eq!(page.status, 200);
    assert!(
        !page.body.contains("/*CONSTRAIN_INSPECTOR"),
        "placeholders left"
    );
    assert!(page.body.contains(constrain_model::inspector::STYLE.trim()));
    assert!(page
        .body
        .contains(constrain_model::inspector::SCRIPT.trim()));
    assert!(page.body.contains("constrain_trace = true"));
    assert!(page
        .body
        .contains("window.constrainInspector.render(trace)"));
}
