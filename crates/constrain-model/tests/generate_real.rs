//! Constrained generation with the real Qwen2.5-Coder-0.5B GGUF (skipped with
//! a message when `$CONSTRAIN_HOME` lacks it). Greedy and short, so that it
//! stays fast on 2 cores; the model is loaded once for the whole file.

use constrain_model::generate::{tools_schema, Engine, GenerateConfig};
use constrain_model::{prompt, QwenModel, TokenizerSource};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

fn home() -> PathBuf {
    match std::env::var_os("CONSTRAIN_HOME") {
        Some(h) => PathBuf::from(h),
        None => {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/constrain")
        }
    }
}

fn engine() -> Option<&'static Mutex<Engine<QwenModel>>> {
    static E: OnceLock<Option<Mutex<Engine<QwenModel>>>> = OnceLock::new();
    E.get_or_init(|| {
        let p = home().join("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
        if !p.exists() {
            eprintln!("skipping: {} not found (set CONSTRAIN_HOME)", p.display());
            return None;
        }
        Some(Mutex::new(
            Engine::load(&p, &TokenizerSource::Gguf).unwrap(),
        ))
    })
    .as_ref()
}

fn schema(name: &str) -> Value {
    let p = constrain_testkit::assets::repo_root()
        .join("schemas")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn validate(schema: &Value, v: &Value) {
    let val = jsonschema::validator_for(schema).unwrap();
    if let Err(e) = val.validate(v) {
        panic!("{v} does not validate: {e}");
    }
}

/// Generates greedily under `schema`, with the schema-showing system message.
fn run(
    e: &mut Engine<QwenModel>,
    schema: &Value,
    system: &str,
    user: &str,
    max: usize,
) -> (Value, Vec<u8>) {
    let (index, _) = e.schema_index(schema).unwrap();
    let p = e.prompt_tokens(user, Some(system), false).unwrap();
    let out = e
        .generate(&p, Some(index), &GenerateConfig::greedy(max), &mut |_| {})
        .unwrap();
    assert!(out.accepted, "{:?}", out.text());
    let v: Value =
        serde_json::from_slice(&out.bytes).unwrap_or_else(|err| panic!("{err}: {}", out.text()));
    validate(schema, &v);
    (v, out.bytes)
}

#[test]
fn tool_call_names_the_city_asked_about() {
    let Some(e) = engine() else { return };
    let mut e = e.lock().unwrap();
    let s = schema("tool.json");
    let sys = prompt::schema_system_message(&s);
    for (q, city) in [
        (
            "What's the weather like in Paris right now, in celsius?",
            "Paris",
        ),
        ("Is it cold in Tokyo today? Use fahrenheit.", "Tokyo"),
    ] {
        let (v, _) = run(&mut e, &s, &sys, q, 48);
        let got = v["arguments"]["city"].as_str().unwrap();
        assert!(got.contains(city), "{q} -> {v}");
    }
}

#[test]
fn tools_array_picks_the_right_tool() {
    let Some(e) = engine() else { return };
    let mut e = e.lock().unwrap();
    let tools = schema("tools.json");
    let s = tools_schema(&tools).unwrap();
    let sys = prompt::tools_system_message(tools.as_array().unwrap());
    let (v, _) = run(
        &mut e,
        &s,
        &sys,
        "What's the weather in Berlin? Celsius please.",
        48,
    );
    assert_eq!(v["name"], "get_weather", "{v}");
    assert!(
        v["arguments"]["city"].as_str().unwrap().contains("Berlin"),
        "{v}"
    );
}

#[test]
fn nested_record_is_valid_and_greedy_is_deterministic() {
    let Some(e) = engine() else { return };
    let mut e = e.lock().unwrap();
    let s = schema("record.json");
    let sys = prompt::schema_system_message(&s);
    let q = "Alice Martin, 34, lives at 12 Rue de Rivoli in Paris, France. She has been a data engineer at Acme since 2019. Tags: rust, hiking.";
    let (v, a) = run(&mut e, &s, &sys, q, 120);
    let (_, b) = run(&mut e, &s, &sys, q, 120);
    assert_eq!(a, b, "greedy output differs across runs");
    assert!(v["name"].as_str().unwrap().contains("Alice"), "{v}");
    assert_eq!(v["age"], 34, "{v}");
}

#[test]
fn regex_constraint_with_the_real_model() {
    let Some(e) = engine() else { return };
    let mut e = e.lock().unwrap();
    let re = r#"\{"city":"[A-Z][a-z]{1,20}","unit":"(celsius|fahrenheit)"\}"#;
    let index = e.regex_index(re).unwrap();
    let p = e
        .prompt_tokens(
            "What's the weather in Madrid, in celsius?",
            Some(&prompt::regex_system_message(re)),
            false,
        )
        .unwrap();
    let out = e
        .generate(&p, Some(index), &GenerateConfig::greedy(30), &mut |_| {})
        .unwrap();
    assert!(out.accepted);
    assert!(regex::Regex::new(&format!("^({re})$"))
        .unwrap()
        .is_match(&out.text()));
    assert!(out.text().contains("Madrid"), "{}", out.text());
    assert!(
        out.stats.forced_tokens > 0,
        "jump-forward used: {:?}",
        out.stats
    );
}
