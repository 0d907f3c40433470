//! OpenAI custom tools over HTTP with the fake model (random logits): the
//! call's input is in the tool's grammar (checked by a parser written here
//! and by the `regex` crate, independent of constrain), for each
//! `tool_choice`, streamed or not; a bad grammar is a 400 naming the field,
//! the line and the column.

mod common;

use common::*;
use constrain_server::ServerConfig;
use serde_json::{json, Value};

/// `expr: term ("+" term)*`, `term: NUM | "(" expr ")"`: recursive, so the
/// pushdown engine serves it.
const ARITH: &str =
    "start: expr\nexpr: term (\"+\" term)*\nterm: NUM | \"(\" expr \")\"\nNUM: /[0-9]{1,3}/\n";
const CODE: &str = r"[A-Z]{2}-[0-9]{2,4}";

/// A recognizer for [`ARITH`], by hand.
fn arith(s: &str) -> bool {
    fn expr(b: &[u8], i: &mut usize, depth: usize) -> bool {
        if depth > 200 || !term(b, i, depth) {
            return false;
        }
        while b.get(*i) == Some(&b'+') {
            *i += 1;
            if !term(b, i, depth) {
                return false;
            }
        }
        true
    }
    fn term(b: &[u8], i: &mut usize, depth: usize) -> bool {
        if b.get(*i) == Some(&b'(') {
            *i += 1;
            if !expr(b, i, depth + 1) || b.get(*i) != Some(&b')') {
                return false;
            }
            *i += 1;
            return true;
        }
        let n = b[*i..].iter().take_while(|c| c.is_ascii_digit()).count();
        *i += n;
        (1..=3).contains(&n)
    }
    let b = s.as_bytes();
    let mut i = 0;
    expr(b, &mut i, 0) && i == b.len()
}

fn tools() -> Value {
    json!([
        {"type": "custom", "custom": {"name": "calc", "description": "Adds numbers.",
            "format": {"type": "grammar", "grammar": {"syntax": "lark", "definition": ARITH}}}},
        {"type": "custom", "custom": {"name": "ticket",
            "format": {"type": "grammar", "grammar": {"syntax": "regex", "definition": CODE}}}},
    ])
}

fn in_language(name: &str, input: &str) -> bool {
    match name {
        "calc" => arith(input),
        "ticket" => regex::Regex::new(&format!("^(?:{CODE})$"))
            .unwrap()
            .is_match(input),
        _ => false,
    }
}

fn ask(addr: std::net::SocketAddr, choice: Value, seed: u64, stream: bool) -> Reply {
    post(
        addr,
        &json!({"messages": user("Add 2 and 3."), "tools": tools(), "tool_choice": choice,
            "max_tokens": 60, "seed": seed, "stream": stream}),
    )
}

/// The one custom call of a message, checked against its grammar.
fn check_call(msg: &Value) -> (String, String) {
    let calls = msg["tool_calls"]
        .as_array()
        .unwrap_or_else(|| panic!("no calls: {msg}"));
    assert_eq!(calls.len(), 1, "{msg}");
    let c = &calls[0];
    assert_eq!(c["type"], "custom", "{c}");
    assert!(c["id"].as_str().unwrap().starts_with("call_"));
    assert!(c.get("function").is_none(), "{c}");
    let name = c["custom"]["name"].as_str().unwrap().to_string();
    let input = c["custom"]["input"].as_str().unwrap().to_string();
    assert!(
        in_language(&name, &input),
        "{name}: {input:?} is not in the grammar's language"
    );
    (name, input)
}

#[test]
fn a_named_custom_tool_gets_an_input_in_its_grammar() {
    let addr = start(ServerConfig::default(), Fake::default());
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..12 {
        let r = ask(
            addr,
            json!({"type": "custom", "custom": {"name": "calc"}}),
            seed,
            false,
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let c = &r.json()["choices"][0];
        assert_eq!(c["finish_reason"], "tool_calls", "{c}");
        assert!(c["message"]["content"].is_null(), "{c}");
        let (name, input) = check_call(&c["message"]);
        assert_eq!(name, "calc");
        seen.insert(input);
    }
    // Random logits explore the grammar: more than one input came out.
    assert!(seen.len() > 1, "{seen:?}");
}

#[test]
fn required_calls_one_of_the_tools_and_none_never_calls() {
    let addr = start(ServerConfig::default(), Fake::default());
    let mut names = std::collections::BTreeSet::new();
    for seed in 0..12 {
        let r = ask(addr, json!("required"), seed, false);
        assert_eq!(r.status, 200, "{}", r.body);
        let c = &r.json()["choices"][0];
        assert_eq!(c["finish_reason"], "tool_calls", "{c}");
        names.insert(check_call(&c["message"]).0);
        let r = ask(addr, json!("none"), seed, false);
        let c = &r.json()["choices"][0];
        assert!(c["message"]["tool_calls"].is_null(), "{c}");
        assert!(!c["message"]["content"]
            .as_str()
            .unwrap()
            .contains("<tool_call>"));
    }
    assert_eq!(names.len(), 2, "{names:?}");
}

#[test]
fn auto_constrains_the_call_once_the_model_opens_one() {
    let addr = start(
        ServerConfig::default(),
        Fake {
            prefer: Some("<tool_call>\n"),
            ..Fake::default()
        },
    );
    for seed in 0..8 {
        let r = ask(addr, json!("auto"), seed, false);
        assert_eq!(r.status, 200, "{}", r.body);
        let c = &r.json()["choices"][0];
        assert_eq!(c["finish_reason"], "tool_calls", "{c}");
        check_call(&c["message"]);
    }
    // Without a preference the answer is text or a valid call.
    let addr = start(ServerConfig::default(), Fake::default());
    for seed in 0..8 {
        let r = ask(addr, Value::Null, seed, false);
        let c = &r.json()["choices"][0];
        if c["message"]["tool_calls"].is_array() {
            check_call(&c["message"]);
        } else {
            assert!(!c["message"]["content"]
                .as_str()
                .unwrap()
                .contains("<tool_call>"));
        }
    }
}

#[test]
fn a_streamed_custom_call_arrives_whole_and_no_input_leaks_as_content() {
    let addr = start(ServerConfig::default(), Fake::default());
    for seed in 0..4 {
        let r = ask(
            addr,
            json!({"type": "custom", "custom": {"name": "ticket"}}),
            seed,
            true,
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let mut calls = Vec::new();
        let mut finish = None;
        for e in r.events() {
            if e == "[DONE]" {
                continue;
            }
            let v: Value = serde_json::from_str(&e).unwrap();
            let ch = &v["choices"][0];
            if let Some(t) = ch["delta"]["content"].as_str() {
                assert!(
                    t.is_empty(),
                    "content streamed under a named custom tool: {t:?}"
                );
            }
            if let Some(cs) = ch["delta"]["tool_calls"].as_array() {
                calls.extend(cs.iter().cloned());
            }
            if let Some(f) = ch["finish_reason"].as_str() {
                finish = Some(f.to_string());
            }
        }
        assert_eq!(finish.as_deref(), Some("tool_calls"));
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0]["index"], 0);
        check_call(&json!({"tool_calls": [calls[0].clone()]}));
    }
}

#[test]
fn text_format_takes_any_text() {
    let addr = start(ServerConfig::default(), Fake::default());
    let r = post(
        addr,
        &json!({"messages": user("hi"), "max_tokens": 20, "seed": 1,
            "tools": [{"type": "custom", "custom": {"name": "note", "format": {"type": "text"}}}],
            "tool_choice": "required"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let c = &r.json()["choices"][0];
    let call = &c["message"]["tool_calls"][0];
    assert_eq!(call["custom"]["name"], "note");
    assert!(call["custom"]["input"].is_string(), "{c}");
}

#[test]
fn bad_custom_tools_are_400s_in_openais_shape() {
    let addr = start(ServerConfig::default(), Fake::default());
    let bad = |tools: Value, choice: Value| {
        let r = post(
            addr,
            &json!({"messages": user("hi"), "tools": tools, "tool_choice": choice}),
        );
        assert_eq!(r.status, 400, "{}", r.body);
        let e = r.json()["error"].clone();
        assert_eq!(e["type"], "invalid_request_error", "{e}");
        e
    };
    let lark = |def: &str| {
        json!([{"type": "custom", "custom": {"name": "g",
            "format": {"type": "grammar", "grammar": {"syntax": "lark", "definition": def}}}}])
    };
    // A syntax error: line and column.
    let e = bad(lark("start: a\na: \"x\" (\n"), json!("required"));
    assert_eq!(
        e["param"], "tools[0].custom.format.grammar.definition",
        "{e}"
    );
    let m = e["message"].as_str().unwrap();
    assert!(m.contains("line 2") && m.contains("column"), "{m}");
    // A refused construct, by name.
    let e = bad(lark("start: <|end|>\n"), json!("required"));
    assert!(
        e["message"].as_str().unwrap().contains("special token"),
        "{e}"
    );
    // A bad regex.
    let e = bad(
        json!([{"type": "custom", "custom": {"name": "r",
            "format": {"type": "grammar", "grammar": {"syntax": "regex", "definition": "[a-"}}}}]),
        json!("required"),
    );
    assert!(e["message"].as_str().unwrap().contains("regex"), "{e}");
    // An unknown syntax, an unknown name, a function choice.
    let e = bad(
        json!([{"type": "custom", "custom": {"name": "r",
            "format": {"type": "grammar", "grammar": {"syntax": "ebnf", "definition": "x"}}}}]),
        json!("auto"),
    );
    assert_eq!(e["param"], "tools[0].custom.format.grammar.syntax");
    let e = bad(
        lark("start: \"x\""),
        json!({"type": "custom", "custom": {"name": "nope"}}),
    );
    assert_eq!(e["param"], "tool_choice");
    let e = bad(
        lark("start: \"x\""),
        json!({"type": "function", "function": {"name": "g"}}),
    );
    assert_eq!(e["param"], "tool_choice");
}

#[test]
fn the_recognizer_here_is_strict() {
    for ok in ["1", "12+3", "(1+(22))+333"] {
        assert!(arith(ok), "{ok}");
    }
    for bad in ["", "1+", "1234", "(1", "1)", "1 + 2", "+1"] {
        assert!(!arith(bad), "{bad}");
    }
}
