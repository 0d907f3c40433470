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

fn weather_tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}, "unit": {"enum": ["c", "f"]}}, "required": ["city", "unit"], "additionalProperties": false}}},
        {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 6}}, "required": ["zone"], "additionalProperties": false}}}
    ])
}

/// Every call of choice `c` names a tool and its arguments validate.
fn assert_calls_valid(c: &Value, tools: &Value) {
    for call in c["message"]["tool_calls"].as_array().unwrap() {
        let args: Value =
            serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
        assert_valid(
            &tool_params(tools, call["function"]["name"].as_str().unwrap()),
            &args,
        );
    }
}

fn tool_params(tools: &Value, name: &str) -> Value {
    tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == name)
        .unwrap_or_else(|| panic!("the model called {name:?}, which is not a tool"))["function"]
        ["parameters"]
        .clone()
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
fn tools_with_each_tool_choice() {
    let addr = start(ServerConfig::default(), Fake::default());
    let tools = weather_tools();
    let ask = |choice: Value, seed: u64, parallel: bool| {
        post(
            addr,
            &json!({
                "messages": [
                    {"role": "system", "content": "Use tools."},
                    {"role": "user", "content": "Weather in Paris?"},
                    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_time", "arguments": "{\"zone\":\"CET\"}"}}]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "12:00"},
                    {"role": "user", "content": "And the weather?"}
                ],
                "tools": tools, "tool_choice": choice, "parallel_tool_calls": parallel,
                "max_tokens": 120, "seed": seed,
            }),
        )
    };
    let check_calls = |msg: &Value| -> usize {
        let calls = msg["tool_calls"].as_array().unwrap();
        for c in calls {
            assert_eq!(c["type"], "function");
            assert!(c["id"].as_str().unwrap().starts_with("call_"));
            let args: Value =
                serde_json::from_str(c["function"]["arguments"].as_str().unwrap()).unwrap();
            assert_valid(
                &tool_params(&tools, c["function"]["name"].as_str().unwrap()),
                &args,
            );
        }
        calls.len()
    };
    for seed in 0..4 {
        // required: at least one call, valid.
        let r = ask(json!("required"), seed, false);
        assert_eq!(r.status, 200, "{}", r.body);
        let c = &r.json()["choices"][0];
        assert_eq!(c["finish_reason"], "tool_calls", "{c}");
        assert_eq!(check_calls(&c["message"]), 1);
        // named: exactly that function.
        let r = ask(
            json!({"type": "function", "function": {"name": "get_time"}}),
            seed,
            true,
        );
        let c = &r.json()["choices"][0];
        assert_eq!(c["finish_reason"], "tool_calls");
        assert_eq!(check_calls(&c["message"]), 1);
        assert_eq!(
            c["message"]["tool_calls"][0]["function"]["name"],
            "get_time"
        );
        // none: text, never a call.
        let r = ask(json!("none"), seed, true);
        let c = &r.json()["choices"][0];
        assert!(c["message"]["tool_calls"].is_null(), "{c}");
        assert!(!c["message"]["content"]
            .as_str()
            .unwrap()
            .contains("<tool_call>"));
        // auto: text or calls; calls always validate.
        let r = ask(json!("auto"), seed, true);
        assert_eq!(r.status, 200, "{}", r.body);
        let c = &r.json()["choices"][0];
        if c["message"]["tool_calls"].is_array() {
            assert_eq!(c["finish_reason"], "tool_calls");
            assert!(check_calls(&c["message"]) >= 1);
        } else {
            assert!(!c["message"]["content"]
                .as_str()
                .unwrap()
                .contains("<tool_call>"));
        }
    }
}

#[test]
fn auto_calls_validate_when_the_model_starts_one() {
    // A model that wants to call: it begins with "<tool_call>\n" and is
    // random from there on.
    let addr = start(
        ServerConfig::default(),
        Fake {
            prefer: Some("<tool_call>\n"),
            ..Fake::default()
        },
    );
    let tools = weather_tools();
    let mut calls = 0;
    for seed in 0..8 {
        let r = post(
            addr,
            &json!({
                "messages": user("Weather?"), "tools": tools, "max_tokens": 150, "seed": seed,
            }),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let c = &r.json()["choices"][0];
        if let Some(cs) = c["message"]["tool_calls"].as_array() {
            calls += 1;
            assert_eq!(c["finish_reason"], "tool_calls");
            for call in cs {
                let args: Value =
                    serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
                assert_valid(
                    &tool_params(&tools, call["function"]["name"].as_str().unwrap()),
                    &args,
                );
            }
        }
    }
    assert_eq!(calls, 8, "a model that opens a call gets a call under auto");
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
fn auto_streams_text_then_a_valid_call() {
    let addr = start(
        ServerConfig::default(),
        Fake {
            prefer: Some("Ok.<tool_call>\n"),
            ..Fake::default()
        },
    );
    let tools = weather_tools();
    for seed in 0..4 {
        let r = post(
            addr,
            &json!({
                "messages": user("Weather?"), "tools": tools, "max_tokens": 150, "seed": seed,
                "stream": true,
            }),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let mut content = String::new();
        let mut calls = Vec::new();
        let mut finish = None;
        for e in r.events().iter().filter(|e| *e != "[DONE]") {
            let c: Value = serde_json::from_str(e).unwrap();
            let ch = &c["choices"][0];
            if let Some(t) = ch["delta"]["content"].as_str() {
                content.push_str(t);
            }
            for call in ch["delta"]["tool_calls"].as_array().into_iter().flatten() {
                calls.push(call.clone());
            }
            if let Some(f) = ch["finish_reason"].as_str() {
                finish = Some(f.to_string());
            }
        }
        assert_eq!(
            content, "Ok.",
            "the text before the call streams as content, the call never does"
        );
        assert!(!calls.is_empty());
        assert_eq!(finish.as_deref(), Some("tool_calls"));
        for (k, call) in calls.iter().enumerate() {
            assert_eq!(call["index"], k);
            let args: Value =
                serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
            assert_valid(
                &tool_params(&tools, call["function"]["name"].as_str().unwrap()),
                &args,
            );
        }
    }
}

#[test]
fn auto_takes_a_bare_name_object_as_a_call() {
    // Small Qwen models often answer with a bare {"name": ...} object.
    let addr = start(
        ServerConfig::default(),
        Fake {
            prefer: Some("{\"name\": "),
            ..Fake::default()
        },
    );
    let tools = weather_tools();
    for seed in 0..4 {
        let r = post(
            addr,
            &json!({"messages": user("Weather?"), "tools": tools, "max_tokens": 150, "seed": seed}),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let c = &r.json()["choices"][0];
        assert_eq!(c["finish_reason"], "tool_calls", "{c}");
        assert!(c["message"]["content"].is_null(), "{c}");
        // Streamed, the bare object never shows as content.
        let s = post(
            addr,
            &json!({"messages": user("Weather?"), "tools": tools, "max_tokens": 150, "seed": seed, "stream": true}),
        );
        for e in s.events().iter().filter(|e| *e != "[DONE]") {
            let ch: Value = serde_json::from_str(e).unwrap();
            let t = ch["choices"][0]["delta"]["content"].as_str().unwrap_or("");
            assert!(t.is_empty(), "content {t:?} leaked from a call");
        }
        assert!(s.body.contains("\"tool_calls\""));
        assert_calls_valid(c, &tools);
    }
}

#[test]
fn auto_never_returns_a_call_cut_by_the_budget() {
    // The model opens a call after 11 tokens; with 14 tokens in all, no
    // complete call fits, so the answer is text, finish_reason "length".
    let addr = start(
        ServerConfig::default(),
        Fake {
            prefer: Some("<tool_call>\n"),
            ..Fake::default()
        },
    );
    let r = post(
        addr,
        &json!({"messages": user("Weather?"), "tools": weather_tools(), "max_tokens": 14, "seed": 1}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let c = &r.json()["choices"][0];
    assert!(c["message"]["tool_calls"].is_null(), "{c}");
    assert_eq!(c["finish_reason"], "length");
    assert!(!c["message"]["content"]
        .as_str()
        .unwrap()
        .contains("<tool_call>"));
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

#[test]
fn structural_tags_through_response_format_and_structured_outputs() {
    let addr = start(ServerConfig::default(), Fake::default());
    let args =
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
    let format = json!({"type": "triggered_tags", "triggers": ["<f="], "at_least_one": true,
        "stop_after_first": true,
        "tags": [{"begin": "<f=a>", "content": {"type": "json_schema", "json_schema": args}, "end": "</f>"}]});
    let validator = jsonschema::validator_for(&args).unwrap();
    let tag = json!({"type": "structural_tag", "format": format});
    for (seed, body) in [
        json!({"response_format": tag.clone()}),
        json!({"structured_outputs": {"structural_tag": tag.to_string()}}),
    ]
    .into_iter()
    .enumerate()
    {
        let mut req = body.as_object().unwrap().clone();
        req.insert("messages".into(), user("x"));
        req.insert("max_tokens".into(), json!(40));
        req.insert("seed".into(), json!(seed));
        let r = post(addr, &Value::Object(req));
        assert_eq!(r.status, 200, "{}", r.body);
        let c = r.json()["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .to_string();
        // at_least_one and stop_after_first: exactly one call, nothing around it.
        let inner = c
            .strip_prefix("<f=a>")
            .and_then(|s| s.strip_suffix("</f>"))
            .unwrap_or_else(|| panic!("{c:?}"));
        let v: Value = serde_json::from_str(inner).unwrap_or_else(|e| panic!("{c:?}: {e}"));
        assert!(validator.is_valid(&v), "{c:?}");
    }
    // A malformed tag is a 400 naming the field and the pointer inside it.
    let bad = json!({"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<f="],
        "tags": [{"begin": "<g>", "content": {"type": "const_string", "value": "x"}, "end": "</g>"}]}});
    let r = post(
        addr,
        &json!({"messages": user("x"), "response_format": bad}),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["error"]["param"], "response_format");
    let m = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(m.contains("/format/tags/0/begin"), "{m}");
}

#[test]
fn structured_outputs_grammar_tells_lark_from_gbnf() {
    let addr = start(ServerConfig::default(), Fake::default());
    let list = regex::Regex::new(r"^[a-c]+(,[a-c]+)*$").unwrap();
    for seed in 0..3 {
        let r = post(
            addr,
            &json!({"messages": user("x"), "structured_outputs": {"grammar": "start: item (\",\" item)*\nitem: /[a-c]+/\n"}, "max_tokens": 12, "seed": seed}),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let c = r.json()["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(list.is_match(&c), "{c:?}");
    }
    let r = post(
        addr,
        &json!({"messages": user("x"), "structured_outputs": {"grammar": "start: item\nitem: \"a\" @sub\n"}}),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["error"]["param"], "structured_outputs.grammar");
}

#[test]
fn tool_formats_go_through_one_structural_tag() {
    // With --tool-format the tools are one structural tag: a model that
    // opens a call in the format gets a complete, valid call, read back
    // by the format's parser; under `required` every answer is calls.
    use constrain::tools::ToolFormat;
    for (format, opener) in [
        (ToolFormat::Llama, "{\"name\": "),
        (ToolFormat::Qwen3Coder, "<tool_call>\n<function="),
        (ToolFormat::Mistral, "[TOOL_CALLS]"),
        (ToolFormat::Qwen3, "<tool_call>\n"),
    ] {
        let mut tools = weather_tools();
        if format == ToolFormat::Qwen3Coder {
            // Raw XML strings with constraints (maxLength) are refused by
            // name: this format's tools take plain strings.
            for t in tools.as_array_mut().unwrap() {
                let props = t["function"]["parameters"]["properties"]
                    .as_object_mut()
                    .unwrap();
                for p in props.values_mut() {
                    p.as_object_mut().unwrap().remove("maxLength");
                }
            }
        }
        let addr = start(
            ServerConfig::default().tool_format(Some(format)),
            Fake {
                prefer: Some(opener),
                ..Fake::default()
            },
        );
        for (choice, seed) in [
            (json!("auto"), 1),
            (json!("required"), 2),
            (json!("auto"), 3),
        ] {
            let r = post(
                addr,
                &json!({"messages": user("Weather?"), "tools": tools, "tool_choice": choice,
                        "max_tokens": 300, "seed": seed}),
            );
            assert_eq!(r.status, 200, "{format:?} {}", r.body);
            let c = &r.json()["choices"][0];
            assert_eq!(c["finish_reason"], "tool_calls", "{format:?} {c}");
            assert_calls_valid(c, &tools);
            let content = c["message"]["content"].as_str().unwrap_or("");
            assert!(
                !content.contains(opener.trim()),
                "{format:?}: a call left in the content: {content:?}"
            );
        }
        // `none`: text that never opens a call.
        let r = post(
            addr,
            &json!({"messages": user("Weather?"), "tools": tools, "tool_choice": "none",
                    "max_tokens": 40, "seed": 4}),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let c = &r.json()["choices"][0];
        assert!(c["message"]["tool_calls"].is_null(), "{format:?} {c}");
    }
}

#[test]
fn reasoning_comes_back_apart_and_the_schema_holds_after_it() {
    // --reasoning: the model thinks first (random logits inside the block,
    // which only its closing marker constrains), then the schema applies;
    // the thinking is `reasoning_content`, streamed as its own deltas.
    let addr = start(
        ServerConfig::default().reasoning(true),
        Fake {
            prefer: Some("<think>\nLet me see"),
            ..Fake::default()
        },
    );
    let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}},
                        "required": ["ok"], "additionalProperties": false});
    for seed in 0..3 {
        let body = json!({"messages": user("x"), "max_tokens": 60, "seed": seed,
            "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}});
        let r = post(addr, &body);
        assert_eq!(r.status, 200, "{}", r.body);
        let m = &r.json()["choices"][0]["message"];
        let thinking = m["reasoning_content"].as_str().expect("reasoning_content");
        assert!(thinking.starts_with("Let me see"), "{m}");
        assert!(!thinking.contains("</think>"), "{m}");
        let content: Value = serde_json::from_str(m["content"].as_str().unwrap())
            .unwrap_or_else(|e| panic!("{e}: {m}"));
        assert_valid(&schema, &content);
        // Streamed (the fake model draws anew): the thinking and the
        // content, each in its own deltas.
        let mut b = body.clone();
        b["stream"] = json!(true);
        let s = post(addr, &b);
        let (mut think, mut text) = (String::new(), String::new());
        for e in s.events().iter().filter(|e| *e != "[DONE]") {
            let ch: Value = serde_json::from_str(e).unwrap();
            let d = &ch["choices"][0]["delta"];
            think.push_str(d["reasoning_content"].as_str().unwrap_or(""));
            text.push_str(d["content"].as_str().unwrap_or(""));
        }
        assert!(
            think.starts_with("Let me see") && !think.contains("</think>"),
            "{think:?}"
        );
        let streamed: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text:?}"));
        assert_valid(&schema, &streamed);
    }
    // With tools: thinking, then the calls (Qwen's format through a tag).
    let tools_addr = start(
        ServerConfig::default().reasoning(true),
        Fake {
            prefer: Some("<think>\nA call.</think>\n\n<tool_call>\n"),
            ..Fake::default()
        },
    );
    let tools = weather_tools();
    let r = post(
        tools_addr,
        &json!({"messages": user("Weather?"), "tools": tools, "max_tokens": 200, "seed": 5}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let c = &r.json()["choices"][0];
    assert_eq!(c["message"]["reasoning_content"], "A call.", "{c}");
    assert_eq!(c["finish_reason"], "tool_calls", "{c}");
    assert_calls_valid(c, &tools);
    // Without --reasoning nothing is split off.
    let plain = start(ServerConfig::default(), Fake::default());
    let r = post(
        plain,
        &json!({"messages": user("x"), "max_tokens": 8, "seed": 1}),
    );
    assert!(r.json()["choices"][0]["message"]["reasoning_content"].is_null());
    // ... and a thinking budget is a 400 naming the field.
    let r = post(
        plain,
        &json!({"messages": user("x"), "max_tokens": 8, "thinking_budget": 4}),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["error"]["param"], "thinking_budget", "{}", r.body);
}

#[test]
fn a_thinking_budget_cuts_a_model_that_would_think_on() {
    // The model would think for ever; `thinking_budget` closes the block
    // after so many tokens, and then the schema, the calls or free text.
    let long = "<think>\nLet me see if this goes on and on and on and on and on and on";
    let addr = start(
        ServerConfig::default().reasoning(true),
        Fake {
            prefer: Some(long),
            ..Fake::default()
        },
    );
    let thought = &long["<think>\n".len()..];
    let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}},
                        "required": ["ok"], "additionalProperties": false});
    let bodies = [
        json!({"messages": user("x"), "max_tokens": 80, "seed": 1, "thinking_budget": 4,
            "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}}),
        json!({"messages": user("x"), "max_tokens": 80, "seed": 2, "thinking_token_budget": 4}),
        json!({"messages": user("Weather?"), "max_tokens": 200, "seed": 3, "thinking_budget": 4,
            "tools": weather_tools(), "tool_choice": "required"}),
    ];
    for (i, body) in bodies.iter().enumerate() {
        let r = post(addr, body);
        assert_eq!(r.status, 200, "{}", r.body);
        let c = &r.json()["choices"][0];
        let thinking = c["message"]["reasoning_content"]
            .as_str()
            .unwrap_or_else(|| panic!("reasoning_content: {c}"));
        // Four tokens at most: "\n", "Let", " me", " see" (or fewer).
        assert!(
            thought.starts_with(thinking.trim_end()) && thinking.len() <= "Let me see".len(),
            "{i}: {thinking:?}"
        );
        match i {
            0 => assert_valid(
                &schema,
                &serde_json::from_str(c["message"]["content"].as_str().unwrap()).unwrap(),
            ),
            2 => assert_calls_valid(c, &weather_tools()),
            _ => {}
        }
    }
    let r = post(
        addr,
        &json!({"messages": user("x"), "max_tokens": 8, "thinking_budget": -1}),
    );
    assert_eq!(r.status, 400, "{}", r.body);
}
