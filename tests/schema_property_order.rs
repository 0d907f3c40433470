//! Objects whose properties come in any order (compliant mode, and
//! `SchemaOptions::property_order` `Any` in strict mode): each declared key
//! at most once, every required one present, extra keys anywhere, exact
//! against the `jsonschema` crate on random objects in random order through
//! the whole compiler (the member sets of `constrain::dfa::regs` run only
//! there, not in the regex text `schema::compile` writes). Generation under
//! a tight `max_tokens` with adversarial choices always ends complete and
//! valid (the budget sees the required keys still missing).

use constrain::schema::{JsonMode, PropertyOrder, SchemaOptions};
use constrain::vocab::{TokenId, Vocabulary};
use constrain::{Compiled, Compiler, CompilerConfig, Source};
use constrain_testkit::budget::byte_accepts as accepts;
use constrain_testkit::budget::{adversarial_run, bytes_and};
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde_json::{json, Value};
use std::sync::Arc;

fn tiny_vocab() -> (Arc<Vocabulary>, TokenId) {
    bytes_and(&[
        "{\"", "\":", ",\"", "\"}", "},", "}}", "true", "12", "\"a\"", "\"b\"",
    ])
}

fn compile(v: &Arc<Vocabulary>, schema: &Value, o: SchemaOptions) -> Arc<Compiled> {
    Compiler::new(v.clone(), CompilerConfig::default())
        .compile(&Source::json_schema(schema.clone()).with_schema_options(o))
        .unwrap_or_else(|e| panic!("{schema}: {e}"))
}

fn schemas() -> Vec<Value> {
    vec![
        // Five declared, two required, nothing else.
        json!({"type": "object", "additionalProperties": false,
               "properties": {"a": {"type": "integer"}, "b": {"type": "string"},
                              "c": {"type": "boolean"}, "d": {"type": "integer"},
                              "e": {"type": "string"}},
               "required": ["b", "d"]}),
        // Extra keys with a schema of their own, one required.
        json!({"type": "object", "additionalProperties": {"type": "integer"},
               "properties": {"a": {"type": "string"}, "b": {"type": "boolean"},
                              "c": {"type": "string"}, "d": {"type": "boolean"}},
               "required": ["c"]}),
        // Nested: an object in any order inside one.
        json!({"type": "object",
               "properties": {"x": {"type": "object",
                                    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
                                                   "c": {"type": "integer"}, "d": {"type": "integer"}},
                                    "required": ["a", "d"], "additionalProperties": false},
                              "y": {"type": "integer"}, "z": {"type": "string"},
                              "w": {"type": "boolean"}},
               "required": ["x", "w"], "additionalProperties": false}),
        // No key required.
        json!({"type": "object", "additionalProperties": false,
               "properties": {"p": {"type": "integer"}, "q": {"type": "integer"},
                              "r": {"type": "integer"}, "s": {"type": "integer"}}}),
    ]
}

/// A random instance of `schema`: mostly valid (required keys mostly in,
/// values mostly of their type), sometimes not, with extra keys at times.
fn instance(schema: &Value, rng: &mut StdRng) -> Value {
    let wrong = rng.random_bool(0.1);
    match schema["type"].as_str() {
        Some("object") => {
            let required: Vec<&str> = schema["required"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut m = serde_json::Map::new();
            if let Some(props) = schema["properties"].as_object() {
                for (k, s) in props {
                    let p = if required.contains(&k.as_str()) {
                        0.95
                    } else {
                        0.5
                    };
                    if rng.random_bool(p) {
                        m.insert(k.clone(), instance(s, rng));
                    }
                }
            }
            if rng.random_bool(0.25) {
                let extra = &schema["additionalProperties"];
                let s = if extra.is_object() {
                    extra.clone()
                } else {
                    json!({"type": "integer"})
                };
                m.insert(
                    ["k", "m", "n"][rng.random_range(0..3)].into(),
                    instance(&s, rng),
                );
            }
            if wrong && rng.random_bool(0.5) {
                Value::Null
            } else {
                Value::Object(m)
            }
        }
        _ if wrong => {
            [json!(null), json!("a"), json!(3), json!(true)][rng.random_range(0..4)].clone()
        }
        Some("integer") => json!(rng.random_range(0..20)),
        Some("string") => json!(["a", "b"][rng.random_range(0..2)]),
        Some("boolean") => json!(rng.random_bool(0.5)),
        _ => json!(12),
    }
}

/// The compact text of an object with its keys shuffled (keys are unique:
/// serde_json's map holds each once).
fn shuffled(v: &Value, rng: &mut StdRng) -> String {
    match v {
        Value::Object(m) => {
            let mut members: Vec<String> = m
                .iter()
                .map(|(k, x)| format!("{}:{}", json!(k), shuffled(x, rng)))
                .collect();
            for i in (1..members.len()).rev() {
                members.swap(i, rng.random_range(0..=i));
            }
            format!("{{{}}}", members.join(","))
        }
        other => other.to_string(),
    }
}

fn any_order_options() -> Vec<(&'static str, SchemaOptions)> {
    vec![
        (
            "compliant",
            SchemaOptions::default().mode(JsonMode::Compliant),
        ),
        (
            "strict, any order",
            SchemaOptions::default().property_order(PropertyOrder::Any),
        ),
    ]
}

#[test]
fn any_order_matches_the_oracle_on_random_objects() {
    let (v, _) = tiny_vocab();
    let mut rng = StdRng::seed_from_u64(7);
    for schema in schemas() {
        let oracle = jsonschema::validator_for(&schema).unwrap();
        for (name, o) in any_order_options() {
            let strict = o.mode == JsonMode::Strict;
            let c = compile(&v, &schema, o);
            let (mut valid_seen, mut accepted) = (0, 0);
            for _ in 0..600 {
                let inst = instance(&schema, &mut rng);
                let text = shuffled(&inst, &mut rng);
                let want = oracle.is_valid(&inst);
                let got = accepts(&c, &text);
                valid_seen += usize::from(want);
                accepted += usize::from(got);
                if strict && want && !got {
                    // Strict mode's narrowings (no implicit extra keys,
                    // inferred types): never wider, may be narrower.
                    continue;
                }
                assert_eq!(got, want, "{schema} ({name}): {text}");
            }
            assert!(
                accepted > 20,
                "{schema} ({name}): {accepted} of {valid_seen} accepted"
            );
        }
    }
}

#[test]
fn a_key_twice_is_refused_and_schema_order_is_the_default() {
    let (v, _) = tiny_vocab();
    let schema = &schemas()[0];
    for (name, o) in any_order_options() {
        let c = compile(&v, schema, o);
        assert!(accepts(&c, r#"{"d":1,"b":"a"}"#), "{name}");
        assert!(
            accepts(&c, r#"{"e":"a","d":1,"c":true,"b":"b","a":0}"#),
            "{name}"
        );
        assert!(!accepts(&c, r#"{"d":1,"b":"a","d":2}"#), "{name}");
        assert!(!accepts(&c, r#"{"b":"a","a":1,"a":1,"d":1}"#), "{name}");
        assert!(!accepts(&c, r#"{"a":1,"b":"a"}"#), "{name}: d is required");
    }
    // Strict mode by default keeps the schema's order.
    let c = compile(&v, schema, SchemaOptions::default());
    assert!(accepts(&c, r#"{"b":"a","d":1}"#));
    assert!(!accepts(&c, r#"{"d":1,"b":"a"}"#));
}

/// Generation with a tight budget and choices that open objects when they
/// can: every output is complete and valid, and an object's required keys
/// are always written before its budget runs out.
#[test]
fn budget_counts_the_required_keys_still_missing() {
    let (v, eos) = tiny_vocab();
    let mut rng = StdRng::seed_from_u64(11);
    for schema in schemas() {
        let oracle = jsonschema::validator_for(&schema).unwrap();
        for (name, o) in any_order_options() {
            let c = compile(&v, &schema, o);
            let start = c.matcher().tokens_to_accept().unwrap() as usize;
            for max_tokens in start..start + 30 {
                for _ in 0..3 {
                    let out = adversarial_run(&c, eos, max_tokens, 0.3, &mut rng)
                        .unwrap_or_else(|e| panic!("{schema} ({name}): {e}"));
                    let text = String::from_utf8(out).unwrap();
                    let value: Value = serde_json::from_str(&text)
                        .unwrap_or_else(|e| panic!("{schema} ({name}): {text}: {e}"));
                    assert!(oracle.is_valid(&value), "{schema} ({name}): {text}");
                }
            }
        }
    }
}

/// The lazy index shares what it learns of a state with the states that
/// differ from it only in the keys written so far (its siblings: plain
/// levels). Its masks must stay those of the eager index over the whole
/// DFA: random walks over the Qwen vocabulary, each writing its own keys in
/// its own order (so later walks meet the siblings of earlier walks'
/// states), compare the two at every step.
#[test]
fn lazy_masks_equal_the_eager_ones_whatever_keys_were_written() {
    let Some(v) = constrain_testkit::assets::qwen_vocab() else {
        eprintln!("skipping: the Qwen tokenizer is not in $CONSTRAIN_HOME (scripts/fetch-assets)");
        return;
    };
    let schemas = [
        // Values of every kind.
        json!({"type": "object", "additionalProperties": false,
               "properties": {"name": {"type": "string"}, "count": {"type": "integer"},
                              "ok": {"type": "boolean"},
                              "kind": {"enum": ["undefined", "fixed", "taught"]},
                              "ratio": {"type": "number"}},
               "required": ["name"]}),
        // Extra keys with integer values beside short names.
        json!({"type": "object", "additionalProperties": {"type": "integer"},
               "properties": {"a": {"type": "string"}, "b": {"type": "boolean"},
                              "c": {"enum": ["x", "y"]}, "d": {"type": "string"}}}),
        // An object in any order inside one, extra keys closed.
        json!({"type": "object", "additionalProperties": false,
               "properties": {"inner": {"type": "object", "additionalProperties": false,
                                        "properties": {"a": {"type": "integer"}, "b": {"type": "string"},
                                                       "c": {"type": "boolean"}, "d": {"type": "integer"}}},
                              "label": {"type": "string"}, "size": {"type": "integer"},
                              "flag": {"type": "boolean"}}}),
    ];
    let words = constrain::bitmask_words(v.logits_width());
    let mut rng = StdRng::seed_from_u64(11);
    let mut siblings = 0;
    for schema in schemas {
        let o = SchemaOptions::default().property_order(PropertyOrder::Any);
        let build = |lazy: Option<usize>| {
            let mut cfg = CompilerConfig::default();
            cfg.dfa.lazy_states = lazy;
            Compiler::new(v.clone(), cfg)
                .compile(&Source::json_schema(schema.clone()).with_schema_options(o.clone()))
                .unwrap_or_else(|e| panic!("{schema}: {e}"))
        };
        let (eager, lazy) = (build(None), build(Some(1)));
        assert!(lazy.is_lazy() && !eager.is_lazy());
        let (mut row_e, mut row_l) = (vec![0u32; words], vec![0u32; words]);
        for walk in 0..24 {
            let (mut ge, mut gl) = (eager.matcher(), lazy.matcher());
            for step in 0..120 {
                ge.fill_bitmask(&mut row_e).unwrap();
                gl.fill_bitmask(&mut row_l).unwrap();
                assert_eq!(row_e, row_l, "{schema}: walk {walk}, step {step}");
                let allowed: Vec<TokenId> = ge.allowed().iter().collect();
                if allowed.is_empty() || ge.is_finished() {
                    break;
                }
                // Mostly short tokens, so that walks write many keys.
                let pick = |rng: &mut StdRng| allowed[rng.random_range(0..allowed.len())];
                let mut t = pick(&mut rng);
                for _ in 0..3 {
                    if v.token_bytes(t).map_or(0, <[u8]>::len) <= 3 {
                        break;
                    }
                    t = pick(&mut rng);
                }
                if v.is_eos(t) {
                    break;
                }
                ge.advance(t).unwrap();
                gl.advance(t).unwrap();
            }
        }
        siblings += lazy.index().masks_from_siblings();
    }
    assert!(siblings > 0, "no mask was made from a sibling's");
}
