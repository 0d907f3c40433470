//! The server on loopback with the tiny vocabulary and a fake model whose
//! logits are random (adversarial: any allowed token may come next). Every
//! constrained answer is checked by an independent oracle (`jsonschema`).

mod common;

use common::*;
use constrain_server::ServerConfig;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn schemas() -> Vec<Value> {
    vec![
        json!({"type": "object", "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 0, "maximum": 99}}, "required": ["ok", "n"], "additionalProperties": false}),
        json!({"type": "object", "properties": {"name": {"type": "string", "maxLength": 8}, "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3}}, "required": ["name", "tags"], "additionalProperties": false}),
        json!({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 4}),
    ]
}

#[test]
fn health_and_models() {
    let addr = start(ServerConfig::default(), Fake::default());
    let h = http(addr, "GET", "/health", None, &[]);
    assert_eq!(h.status, 200);
    assert_eq!(h.json()["status"], "ok");
    let m = http(addr, "GET", "/v1/models", None, &[]);
    assert_eq!(m.status, 200);
    let m = m.json();
    assert_eq!(m["object"], "list");
    assert_eq!(m["data"][0]["id"], "tiny-fake");
    assert_eq!(m["data"][0]["object"], "model");
    let page = http(addr, "GET", "/", None, &[]);
    assert_eq!(page.status, 200);
    assert!(page
        .header("content-type")
        .unwrap()
        .starts_with("text/html"));
    assert!(page.body.contains("<textarea") && page.body.contains("/v1/chat/completions"));
    assert!(
        !page.body.contains("<script src") && !page.body.contains("<link"),
        "the page loads nothing from elsewhere"
    );
    let missing = http(addr, "GET", "/nope", None, &[]);
    assert_eq!(missing.status, 404);
    assert!(missing.json()["error"]["message"].is_string());
}

#[test]
fn json_schema_answers_validate_under_random_logits() {
    let addr = start(ServerConfig::default(), Fake::default());
    for (k, schema) in schemas().iter().enumerate() {
        for seed in 0..6 {
            let r = post(
                addr,
                &json!({
                    "model": "anything",
                    "messages": user("Give me data."),
                    "response_format": {"type": "json_schema", "json_schema": {"name": "out", "schema": schema, "strict": true}},
                    "max_tokens": 120,
                    "seed": seed,
                    "temperature": 1.0,
                }),
            );
            assert_eq!(r.status, 200, "schema {k} seed {seed}: {}", r.body);
            let v = r.json();
            assert_eq!(v["object"], "chat.completion");
            assert!(v["id"].as_str().unwrap().starts_with("chatcmpl-"));
            assert!(v["created"].as_u64().unwrap() > 0);
            assert_eq!(v["model"], "tiny-fake");
            let c = &v["choices"][0];
            assert_eq!(c["index"], 0);
            assert_eq!(c["message"]["role"], "assistant");
            assert_eq!(
                c["finish_reason"], "stop",
                "a constrained answer is complete: {v}"
            );
            let text = c["message"]["content"].as_str().unwrap();
            let doc: Value = serde_json::from_str(text)
                .unwrap_or_else(|e| panic!("{text:?} does not parse: {e}"));
            assert_valid(schema, &doc);
            let u = &v["usage"];
            assert_eq!(
                u["total_tokens"].as_u64().unwrap(),
                u["prompt_tokens"].as_u64().unwrap() + u["completion_tokens"].as_u64().unwrap()
            );
            assert!(u["completion_tokens"].as_u64().unwrap() >= 1);
        }
    }
}

/// The minimum budget from the 400 message.
fn minimum(addr: std::net::SocketAddr, body: &Value) -> usize {
    let mut b = body.clone();
    b["max_tokens"] = json!(1);
    let r = post(addr, &b);
    assert_eq!(r.status, 400, "{}", r.body);
    let e = r.json();
    assert_eq!(e["error"]["param"], "max_tokens");
    let msg = e["error"]["message"].as_str().unwrap().to_string();
    let at = msg
        .find("at least ")
        .unwrap_or_else(|| panic!("no minimum in {msg:?}"))
        + "at least ".len();
    msg[at..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn exactly_the_minimum_budget_gives_a_complete_answer() {
    let addr = start(ServerConfig::default(), Fake::default());
    for schema in schemas() {
        let body = json!({
            "messages": user("x"),
            "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}},
        });
        let min = minimum(addr, &body);
        assert!(min > 1);
        for seed in 0..4 {
            let mut b = body.clone();
            b["max_tokens"] = json!(min);
            b["seed"] = json!(seed);
            let r = post(addr, &b);
            assert_eq!(r.status, 200, "{}", r.body);
            let v = r.json();
            let c = &v["choices"][0];
            assert_eq!(c["finish_reason"], "stop", "{v}");
            assert!(v["usage"]["completion_tokens"].as_u64().unwrap() as usize <= min);
            let doc: Value =
                serde_json::from_str(c["message"]["content"].as_str().unwrap()).unwrap();
            assert_valid(&schema, &doc);
        }
        // max_completion_tokens is the same budget under its newer name.
        let mut b = body.clone();
        b["max_completion_tokens"] = json!(min - 1);
        let r = post(addr, &b);
        assert_eq!(r.status, 400);
        assert_eq!(r.json()["error"]["param"], "max_completion_tokens");
    }
}

#[test]
fn json_object_and_structured_outputs() {
    let addr = start(ServerConfig::default(), Fake::default());
    for seed in 0..4 {
        let r = post(
            addr,
            &json!({"messages": user("x"), "response_format": {"type": "json_object"}, "max_tokens": 80, "seed": seed}),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let text = r.json()["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .to_string();
        let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert!(v.is_object(), "{v}");
    }
    let re = regex::Regex::new(r"^[0-9]{3}-[a-z]{2}$").unwrap();
    let r = post(
        addr,
        &json!({"messages": user("x"), "structured_outputs": {"regex": "[0-9]{3}-[a-z]{2}"}, "max_tokens": 20}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(re.is_match(
        r.json()["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
    ));
    let r = post(
        addr,
        &json!({"messages": user("x"), "structured_outputs": {"choice": ["yes", "no (maybe)"]}, "max_tokens": 20}),
    );
    let c = r.json()["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(c == "yes" || c == "no (maybe)", "{c:?}");
    // A GBNF grammar (a rule defined with ::=), under random logits.
    let list = regex::Regex::new(r"^[a-c]+(,[a-c]+)*$").unwrap();
    for seed in 0..4 {
        let r = post(
            addr,
            &json!({"messages": user("x"), "structured_outputs": {"grammar": "root ::= item (\",\" item)*\nitem ::= [a-c]+\n"}, "max_tokens": 12, "seed": seed}),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let c = r.json()["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(list.is_match(&c), "{c:?}");
    }
    // A malformed one is a 400 naming line and column.
    let r = post(
        addr,
        &json!({"messages": user("x"), "structured_outputs": {"grammar": "root ::= (\"a\"\n"}}),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["error"]["param"], "structured_outputs.grammar");
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("line "),
        "{}",
        r.body
    );
}

#[test]
fn streaming_chunks_reassemble_with_usage() {
    let addr = start(ServerConfig::default(), Fake::default());
    let schema = &schemas()[0];
    for seed in 0..3 {
        let r = post(
            addr,
            &json!({
                "messages": user("x"),
                "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}},
                "max_tokens": 60, "seed": seed, "stream": true, "stream_options": {"include_usage": true},
            }),
        );
        assert_eq!(r.status, 200);
        assert!(r
            .header("content-type")
            .unwrap()
            .starts_with("text/event-stream"));
        let events = r.events();
        assert_eq!(
            events.last().map(String::as_str),
            Some("[DONE]"),
            "{}",
            r.body
        );
        let mut text = String::new();
        let mut finish = None;
        let mut usage = None;
        let mut role = false;
        for e in &events[..events.len() - 1] {
            let c: Value = serde_json::from_str(e).unwrap();
            assert_eq!(c["object"], "chat.completion.chunk");
            assert_eq!(c["model"], "tiny-fake");
            if let Some(ch) = c["choices"].as_array().and_then(|a| a.first()) {
                assert_eq!(ch["index"], 0);
                role |= ch["delta"]["role"] == "assistant";
                if let Some(t) = ch["delta"]["content"].as_str() {
                    text.push_str(t);
                }
                if let Some(f) = ch["finish_reason"].as_str() {
                    finish = Some(f.to_string());
                }
            } else {
                usage = Some(c["usage"].clone());
            }
        }
        assert!(role);
        assert_eq!(finish.as_deref(), Some("stop"));
        let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert_valid(schema, &doc);
        let u = usage.expect("a usage chunk");
        assert!(u["completion_tokens"].as_u64().unwrap() >= 1);
    }
}

#[test]
fn free_text_with_stop_and_n() {
    let addr = start(ServerConfig::default(), Fake::default());
    let r = post(
        addr,
        &json!({"messages": user("x"), "max_tokens": 30, "n": 3, "seed": 5}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v["choices"].as_array().unwrap().len(), 3);
    for (i, c) in v["choices"].as_array().unwrap().iter().enumerate() {
        assert_eq!(c["index"], i);
        let f = c["finish_reason"].as_str().unwrap();
        assert!(f == "stop" || f == "length", "{f}");
    }
    // A stop string cuts the text before it. With random logits over bytes,
    // "e" turns up quickly.
    for seed in 0..5 {
        let r = post(
            addr,
            &json!({"messages": user("x"), "max_tokens": 200, "stop": ["e"], "seed": seed, "logit_bias": {"101": 6}}),
        );
        let c = &r.json()["choices"][0];
        assert!(
            !c["message"]["content"].as_str().unwrap().contains('e'),
            "{c}"
        );
    }
}

#[test]
fn errors_have_openai_shape_and_status() {
    let addr = start(
        ServerConfig::default().api_key(None).max_body_bytes(4096),
        Fake {
            context: 400,
            ..Fake::default()
        },
    );
    let check = |r: &Reply, status: u16, param: Option<&str>| {
        assert_eq!(r.status, status, "{}", r.body);
        let e = &r.json()["error"];
        assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()));
        assert!(e["type"].is_string());
        assert!(e.as_object().unwrap().contains_key("code"));
        assert_eq!(e["param"].as_str(), param, "{e}");
    };
    let raw = http(
        addr,
        "POST",
        "/v1/chat/completions",
        Some("{\"messages\": [}"),
        &[],
    );
    check(&raw, 400, None);
    assert!(raw.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("line 1"));
    check(
        &post(addr, &json!({"messages": user("x"), "temperature": 7})),
        400,
        Some("temperature"),
    );
    check(
        &post(addr, &json!({"messages": user("x"), "temperature": "hot"})),
        400,
        Some("temperature"),
    );
    check(
        &post(addr, &json!({"messages": "hi"})),
        400,
        Some("messages"),
    );
    check(
        &post(
            addr,
            &json!({"messages": user("x"), "response_format": {"type": "yaml"}}),
        ),
        400,
        Some("response_format.type"),
    );
    check(
        &post(
            addr,
            &json!({"messages": user("x"), "tool_choice": "sometimes", "tools": weather_tools()}),
        ),
        400,
        Some("tool_choice"),
    );
    check(
        &post(
            addr,
            &json!({"messages": [{"role": "wizard", "content": "x"}]}),
        ),
        400,
        Some("messages[0].role"),
    );
    // A stop string past the length bound (the streaming hold-back compares
    // every suffix with it on each token).
    check(
        &post(
            addr,
            &json!({"messages": user("x"), "stop": "s".repeat(257)}),
        ),
        400,
        Some("stop"),
    );
    // A schema that does not compile: the message names keyword and pointer.
    let r = post(
        addr,
        &json!({"messages": user("x"), "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "object", "properties": {"a": {"type": "string", "pattern": "(?=x)"}}}}}}),
    );
    check(&r, 400, Some("response_format.json_schema.schema"));
    let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(msg.contains("/properties/a"), "{msg}");
    // Prompt over the context (400 tokens).
    let r = post(
        addr,
        &json!({"messages": user(&"z".repeat(600)), "max_tokens": 5}),
    );
    check(&r, 400, Some("messages"));
    assert_eq!(r.json()["error"]["code"], "context_length_exceeded");
    let r = post(addr, &json!({"messages": user("x"), "max_tokens": 5000}));
    check(&r, 400, Some("max_tokens"));
    // Over the body limit.
    let big = json!({"messages": user(&"y".repeat(10_000))}).to_string();
    check(
        &http(addr, "POST", "/v1/chat/completions", Some(&big), &[]),
        413,
        None,
    );
    // The server still answers.
    assert_eq!(
        post(addr, &json!({"messages": user("x"), "max_tokens": 3})).status,
        200
    );
}

#[test]
fn api_key_is_required_when_set() {
    let addr = start(
        ServerConfig::default().api_key(Some("sekrit".into())),
        Fake::default(),
    );
    let body = json!({"messages": user("x"), "max_tokens": 3}).to_string();
    let none = http(addr, "POST", "/v1/chat/completions", Some(&body), &[]);
    assert_eq!(none.status, 401);
    assert_eq!(none.json()["error"]["type"], "authentication_error");
    let wrong = http(
        addr,
        "POST",
        "/v1/chat/completions",
        Some(&body),
        &[("Authorization", "Bearer nope")],
    );
    assert_eq!(wrong.status, 401);
    assert_eq!(http(addr, "GET", "/v1/models", None, &[]).status, 401);
    let ok = http(
        addr,
        "POST",
        "/v1/chat/completions",
        Some(&body),
        &[("Authorization", "Bearer sekrit")],
    );
    assert_eq!(ok.status, 200, "{}", ok.body);
    // Health stays open (for load balancers).
    assert_eq!(http(addr, "GET", "/health", None, &[]).status, 200);
}

#[test]
fn eight_concurrent_requests_all_validate() {
    let addr = start(ServerConfig::default().parallel(3), Fake::default());
    let schema = schemas()[1].clone();
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let schema = schema.clone();
            std::thread::spawn(move || {
                let stream = i % 2 == 0;
                let r = post(addr, &json!({
                    "messages": user("x"), "seed": i, "max_tokens": 80, "stream": stream,
                    "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}},
                }));
                assert_eq!(r.status, 200, "{}", r.body);
                let text = if stream {
                    r.events()
                        .iter()
                        .filter(|e| *e != "[DONE]")
                        .filter_map(|e| serde_json::from_str::<Value>(e).ok())
                        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str().map(str::to_string))
                        .collect::<String>()
                } else {
                    r.json()["choices"][0]["message"]["content"].as_str().unwrap().to_string()
                };
                let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
                assert_valid(&schema, &doc);
            })
        })
        .collect();
    for h in handles {
        h.join().expect("a request failed");
    }
}

#[test]
fn full_queue_answers_503_with_retry_after() {
    let addr = start(
        ServerConfig::default().parallel(1).max_queue(0),
        Fake {
            delay_ms: 20,
            ..Fake::default()
        },
    );
    let busy = std::thread::spawn(move || {
        post(
            addr,
            &json!({"messages": user("x"), "max_tokens": 40, "logit_bias": no_eos()}),
        )
    });
    // Wait until the slot is taken.
    let t = Instant::now();
    while http(addr, "GET", "/health", None, &[]).json()["active"] != 1 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the first request never started"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let r = post(addr, &json!({"messages": user("x"), "max_tokens": 3}));
    assert_eq!(r.status, 503, "{}", r.body);
    assert!(r.header("retry-after").is_some());
    assert_eq!(r.json()["error"]["type"], "server_error");
    assert_eq!(busy.join().unwrap().status, 200);
}

#[test]
fn a_client_that_disconnects_frees_its_slot() {
    use std::io::{Read, Write};
    let addr = start(
        ServerConfig::default().parallel(1),
        Fake {
            delay_ms: 10,
            ..Fake::default()
        },
    );
    for stream in [true, false] {
        // A long request (about 50 s if it ran to the end)...
        let body = json!({"messages": user("x"), "max_tokens": 5000, "stream": stream, "logit_bias": no_eos()}).to_string();
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        write!(s, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len()).unwrap();
        let t = Instant::now();
        while http(addr, "GET", "/health", None, &[]).json()["active"] != 1 {
            assert!(t.elapsed() < Duration::from_secs(10));
            std::thread::sleep(Duration::from_millis(5));
        }
        if stream {
            let mut buf = [0u8; 64];
            let _ = s.read(&mut buf);
        }
        // ...whose client goes away.
        drop(s);
        let t = Instant::now();
        while http(addr, "GET", "/health", None, &[]).json()["active"] != 0 {
            assert!(
                t.elapsed() < Duration::from_secs(5),
                "the slot was not freed (stream: {stream})"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let r = post(addr, &json!({"messages": user("x"), "max_tokens": 3}));
        assert_eq!(r.status, 200);
    }
}

#[test]
fn logprobs_report_the_models_distribution_and_what_the_mask_allowed() {
    let addr = start(ServerConfig::default(), Fake::default());
    let schema = &schemas()[0];
    for stream in [false, true] {
        let r = post(
            addr,
            &json!({
                "messages": user("x"), "max_tokens": 40, "seed": 2, "logprobs": true, "top_logprobs": 5, "stream": stream,
                "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}},
            }),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let (content, entries) = if stream {
            let mut text = String::new();
            let mut entries = Vec::new();
            for e in r.events().iter().filter(|e| *e != "[DONE]") {
                let c: Value = serde_json::from_str(e).unwrap();
                text.push_str(c["choices"][0]["delta"]["content"].as_str().unwrap_or(""));
                if let Some(l) = c["choices"][0]["logprobs"]["content"].as_array() {
                    entries.extend(l.iter().cloned());
                }
            }
            (text, entries)
        } else {
            let v = r.json();
            let c = &v["choices"][0];
            (
                c["message"]["content"].as_str().unwrap().to_string(),
                c["logprobs"]["content"].as_array().unwrap().clone(),
            )
        };
        assert!(!entries.is_empty());
        let mut bytes = Vec::new();
        for e in &entries {
            bytes.extend(
                e["bytes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|b| b.as_u64().unwrap() as u8),
            );
            assert!(e["logprob"].as_f64().unwrap() <= 0.0);
            let top = e["top_logprobs"].as_array().unwrap();
            assert_eq!(top.len(), 5);
            let lps: Vec<f64> = top.iter().map(|t| t["logprob"].as_f64().unwrap()).collect();
            assert!(lps.windows(2).all(|w| w[0] >= w[1]), "sorted: {lps:?}");
            assert!(lps.iter().map(|l| l.exp()).sum::<f64>() <= 1.0 + 1e-4);
            for t in top {
                assert!(t["allowed"].is_boolean());
                if t["token"] == e["token"] {
                    assert_eq!(t["allowed"], true, "the sampled token was allowed: {e}");
                }
            }
        }
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            content,
            "the entries spell the answer"
        );
    }
    let r = post(
        addr,
        &json!({"messages": user("x"), "max_tokens": 3, "logprobs": true, "top_logprobs": 21}),
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["param"], "top_logprobs");
}
