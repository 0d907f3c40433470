//! Tools, structural tags, grammars and reasoning through the server, on
//! loopback with the tiny vocabulary and a fake model whose logits are
//! random (adversarial: any allowed token may come next). Every call is
//! checked by an independent oracle (`jsonschema`).

mod common;

use common::*;
use constrain_server::ServerConfig;
use serde_json::{json, Value};

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
    // llguidance's grammar list, `@sub` naming a grammar of it.
    let grammars = json!({"grammars": [
        {"name": "main", "lark_grammar": "start: item (\",\" item)*\nitem: @sub\n"},
        {"name": "sub", "lark_grammar": "start: /[a-c]+/\n"},
    ]})
    .to_string();
    let r = post(
        addr,
        &json!({"messages": user("x"), "structured_outputs": {"grammar": grammars}, "max_tokens": 12, "seed": 1}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let c = r.json()["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(list.is_match(&c), "{c:?}");
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
