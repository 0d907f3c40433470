//! `uniqueItems` over items of any kind, checked at run time by the
//! matcher: exact against the `jsonschema` crate on instances with equal
//! items spelled alike and apart (`1` / `1.0`, `"a"` / `"\u0061"`, object
//! keys in another order), only
//! where the place of the array says it is checked, and with no dead end:
//! generation under a tight `max_tokens` with adversarial choices always
//! ends complete and valid, also where few values are left to choose from.

use constrain::schema::{JsonMode, SchemaOptions, Whitespace};
use constrain::vocab::{TokenId, Vocabulary};
use constrain::{Compiled, Compiler, CompilerConfig, Source};
use constrain_testkit::budget::byte_accepts as accepts;
use constrain_testkit::budget::{adversarial_run, bytes_and};
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde_json::{json, Value};
use std::sync::Arc;

fn tiny_vocab() -> (Arc<Vocabulary>, TokenId) {
    bytes_and(&[
        "\"a\"",
        "\"b\"",
        "\"ab",
        "\", \"",
        "1, ",
        "12",
        "[\"",
        "\"]",
        ", 1",
        "\"a\", \"a\"",
    ])
}

fn compile(v: &Arc<Vocabulary>, schema: &Value, o: SchemaOptions) -> Arc<Compiled> {
    Compiler::new(v.clone(), CompilerConfig::default())
        .compile(&Source::json_schema(schema.clone()).with_schema_options(o))
        .unwrap_or_else(|e| panic!("{schema}: {e}"))
}

/// JSON Schema semantics and `json.dumps` spacing.
fn compliant() -> SchemaOptions {
    SchemaOptions::default()
        .mode(JsonMode::Compliant)
        .whitespace(Whitespace::Python)
}

#[test]
fn equal_items_are_refused_however_spelled() {
    let (v, _) = tiny_vocab();
    let schema = json!({"type": "object", "properties": {
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
        "nums": {"type": "array", "items": {"type": "number"}, "uniqueItems": true},
        "free": {"type": "array", "items": {"type": "string"}},
        "objs": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}, "uniqueItems": true},
        "any": {"type": "array", "uniqueItems": true}
    }, "additionalProperties": false});
    let oracle = jsonschema::validator_for(&schema).unwrap();
    let c = compile(&v, &schema, compliant());
    let cases = [
        r#"{"tags": ["a", "b", "ab"]}"#,
        r#"{"tags": ["a", "b", "a"]}"#,
        r#"{"tags": ["a", "\u0061"]}"#,
        r#"{"tags": ["\n", "\u000a"]}"#,
        r#"{"tags": ["", " "]}"#,
        r#"{"tags": ["", ""]}"#,
        r#"{"nums": [1, 2, 1.0]}"#,
        r#"{"nums": [1, 10, 100, 1e1]}"#,
        r#"{"nums": [0, -0]}"#,
        r#"{"nums": [0.5, 5e-1]}"#,
        r#"{"nums": [1, 1.5, 15e-1]}"#,
        r#"{"nums": [12, 1.2e1]}"#,
        r#"{"nums": [-1, 1]}"#,
        r#"{"free": ["a", "a"], "tags": ["a"]}"#,
        r#"{"tags": ["x"], "free": ["x", "x"], "nums": [3, 4]}"#,
        r#"{"objs": [{"a": 1, "b": "x"}, {"b": "x"}, {"a": 1}]}"#,
        r#"{"objs": [{}, {"a": 2}, {}]}"#,
        r#"{"any": [[1, "a"], ["a", 1], [1, "a"]]}"#,
        r#"{"any": [[1, "a"], ["a", 1], {"x": [1]}, {"x": [1.0]}]}"#,
        r#"{"any": [null, true, "true", 0, false, [], {}, [[]], [{}]]}"#,
        r#"{"any": [null, true, "true", 0, false, [], {}, [[]], [{}], [ ]]}"#,
    ];
    // Objects equal but for their key order are equal items (JSON
    // Schema's equality; the `jsonschema` crate, with `serde_json`'s
    // insertion-ordered maps, compares them in order and calls them apart).
    for text in [
        r#"{"objs": [{"a": 1, "b": "x"}, {"b": "x", "a": 1}]}"#,
        r#"{"objs": [{"a": 1, "b": "x"}, {"b": "x", "a": 1.0}]}"#,
        r#"{"any": [{"p": [1, {"q": null, "r": 2}]}, {"p": [1.0, {"r": 2, "q": null}]}]}"#,
    ] {
        assert!(!accepts(&c, text), "{text}");
    }
    for text in cases {
        let value: Value = serde_json::from_str(text).unwrap();
        assert_eq!(
            accepts(&c, text),
            oracle.is_valid(&value),
            "{text} (oracle says {})",
            oracle.is_valid(&value)
        );
    }
}

/// Random arrays over a few strings and numbers (so repeats are common),
/// in several places, against the oracle.
#[test]
fn random_arrays_match_the_oracle() {
    let (v, _) = tiny_vocab();
    let schemas = [
        json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true}),
        json!({"type": "array", "items": {"type": ["string", "integer", "number"]}, "uniqueItems": true, "maxItems": 5}),
        json!({"type": "object", "properties": {"x": {"type": "array",
            "items": {"type": "array", "items": {"type": "number"}, "uniqueItems": true}}}}),
        json!({"type": "array", "prefixItems": [{"type": "number"}], "items": {"type": "string"}, "uniqueItems": true}),
        json!({"type": "array", "items": {"type": ["string", "number"]}, "contains": {"const": "a"}, "uniqueItems": true}),
        json!({"$defs": {"t": {"type": "array", "items": {"type": "string", "maxLength": 2}, "uniqueItems": true}},
               "type": "object", "properties": {"a": {"$ref": "#/$defs/t"}, "b": {"anyOf": [{"$ref": "#/$defs/t"}, {"type": "null"}]}}}),
    ];
    let atoms = [
        json!("a"),
        json!("b"),
        json!("ab"),
        json!(""),
        json!(1),
        json!(1.0),
        json!(2),
        json!(10),
        json!(0.5),
    ];
    let mut rng = StdRng::seed_from_u64(7);
    for schema in schemas {
        let oracle = jsonschema::validator_for(&schema).unwrap();
        let c = compile(&v, &schema, compliant());
        let arr = |rng: &mut StdRng| -> Value {
            let n = rng.random_range(0..5);
            Value::Array(
                (0..n)
                    .map(|_| atoms[rng.random_range(0..atoms.len())].clone())
                    .collect(),
            )
        };
        let (mut valid, mut invalid) = (0, 0);
        for _ in 0..300 {
            let inst = match schema["type"].as_str() {
                Some("array") => arr(&mut rng),
                _ if schema["properties"].get("x").is_some() => {
                    let n = rng.random_range(0..3);
                    json!({"x": (0..n).map(|_| arr(&mut rng)).collect::<Vec<_>>()})
                }
                _ => json!({"a": arr(&mut rng), "b": arr(&mut rng)}),
            };
            let text = constrain_testkit::maskbench::python_dumps(&inst);
            let want = oracle.is_valid(&inst);
            assert_eq!(accepts(&c, &text), want, "{schema}: {text}");
            if want {
                valid += 1;
            } else {
                invalid += 1;
            }
        }
        assert!(
            valid > 20 && invalid > 20,
            "{schema}: {valid} valid, {invalid} invalid"
        );
    }
}

/// Members whose key a `patternProperties` pattern matches take its
/// schema, with a declared one's, and `additionalProperties` only where
/// neither applies: the check follows each key the matcher writes to the
/// schemas that apply to its value, as JSON Schema does.
#[test]
fn pattern_properties_keys_choose_the_checked_arrays() {
    let (v, _) = tiny_vocab();
    let schema = json!({
        "type": "object",
        "properties": {"a": {"type": "array", "items": {"type": "string"}}},
        "patternProperties": {
            "^x": {"type": "array", "items": {"type": ["string", "number"]}, "uniqueItems": true},
            "b$": {"type": "array", "maxItems": 3}
        },
        "additionalProperties": {"type": "array", "items": {"type": ["string", "number"]}, "uniqueItems": true}
    });
    let oracle = jsonschema::validator_for(&schema).unwrap();
    let c = compile(&v, &schema, compliant());
    let atoms = [json!("a"), json!("b"), json!(1), json!(1.0), json!(2)];
    // "xb" matches both patterns, "b" and "ab" only the second (so no
    // additionalProperties: repeats allowed), "y" none.
    let keys = ["xa", "xb", "b", "ab", "y"];
    let mut rng = StdRng::seed_from_u64(11);
    let (mut valid, mut invalid) = (0, 0);
    let mut repeats_kept = 0;
    for _ in 0..400 {
        let mut m = serde_json::Map::new();
        let arr = |rng: &mut StdRng| -> Value {
            let n = rng.random_range(0..4);
            Value::Array(
                (0..n)
                    .map(|_| atoms[rng.random_range(0..atoms.len())].clone())
                    .collect(),
            )
        };
        if rng.random_bool(0.3) {
            m.insert("a".into(), json!(["s", "s"]));
        }
        for k in keys {
            if rng.random_bool(0.4) {
                m.insert(k.into(), arr(&mut rng));
            }
        }
        let inst = Value::Object(m);
        let text = constrain_testkit::maskbench::python_dumps(&inst);
        let want = oracle.is_valid(&inst);
        assert_eq!(accepts(&c, &text), want, "{text}");
        if want {
            valid += 1;
            let only_b = ["b", "ab"].iter().any(|k| {
                inst.get(*k).and_then(Value::as_array).is_some_and(|a| {
                    a.iter()
                        .enumerate()
                        .any(|(i, x)| a[..i].iter().any(|y| y == x))
                })
            });
            repeats_kept += usize::from(only_b);
        } else {
            invalid += 1;
        }
    }
    assert!(
        valid > 40 && invalid > 40,
        "{valid} valid, {invalid} invalid"
    );
    assert!(
        repeats_kept > 5,
        "arrays only b$ governs may repeat: {repeats_kept}"
    );
}

/// Where the place alone does not say the array is checked, the keyword
/// is refused as before; a regex alone cannot check it either.
#[test]
fn places_the_matcher_cannot_tell_are_refused() {
    let (v, _) = tiny_vocab();
    let ambiguous = json!({"anyOf": [
        {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
        {"type": "array", "items": {"type": "integer"}}
    ]});
    let under_not = json!({"type": "object", "properties": {"a": {"not": {"type": "array", "uniqueItems": true}}}});
    for schema in [ambiguous, under_not] {
        let e = Compiler::new(v.clone(), CompilerConfig::default())
            .compile(&Source::json_schema(schema.clone()))
            .expect_err("refused");
        assert!(e.to_string().contains("uniqueItems"), "{schema}: {e}");
    }
    let strings = json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true});
    assert!(constrain::schema::compile(&strings, &SchemaOptions::default()).is_err());
    let off = SchemaOptions::default().unique_items_check(false);
    assert!(Compiler::new(v.clone(), CompilerConfig::default())
        .compile(&Source::json_schema(strings).with_schema_options(off))
        .is_err());
}

/// Few values to choose from (a pattern of 8 one-letter strings, integers
/// 0..=9, strings of at most 2 letters `a`/`b`) and a minimum count: an
/// adversarial generator under a tight `max_tokens` never meets a dead end
/// and always ends complete, valid and without repeats.
#[test]
fn generation_never_meets_a_dead_end() {
    let (v, eos) = tiny_vocab();
    let schemas = [
        json!({"type": "array", "items": {"type": "string", "pattern": "^[a-h]$"}, "uniqueItems": true, "minItems": 7}),
        json!({"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "uniqueItems": true, "minItems": 9}),
        json!({"type": "array", "items": {"type": "string", "pattern": "^[ab]{0,2}$"}, "uniqueItems": true, "minItems": 6}),
        json!({"type": "object", "properties": {"t": {"type": "array", "items": {"type": "string", "maxLength": 1}, "uniqueItems": true, "minItems": 3}}, "required": ["t"], "additionalProperties": false}),
        // Objects of two booleans: four values, all of them wanted.
        json!({"type": "array", "uniqueItems": true, "minItems": 4, "items": {"type": "object",
               "properties": {"p": {"type": "boolean"}, "q": {"type": "boolean"}},
               "required": ["p", "q"], "additionalProperties": false}}),
    ];
    let mut rng = StdRng::seed_from_u64(3);
    for schema in schemas {
        let oracle = jsonschema::validator_for(&schema).unwrap();
        let c = compile(&v, &schema, SchemaOptions::default());
        // The bound counts distinct items from an array's opening bracket:
        // a budget gives them room from the start.
        let slack = c.index().unique_items().expect("checked").max_slack() as usize;
        let start = c.matcher().tokens_to_accept().unwrap() as usize + slack;
        for max_tokens in start..start + 24 {
            for _ in 0..4 {
                let out = adversarial_run(&c, eos, max_tokens, 0.3, &mut rng)
                    .unwrap_or_else(|e| panic!("{schema} at {max_tokens}: {e}"));
                let text = String::from_utf8(out).unwrap();
                let value: Value =
                    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{schema}: {text}: {e}"));
                assert!(oracle.is_valid(&value), "{schema}: {text}");
            }
        }
    }
}

/// The matcher's other ways in agree with its mask: a refused token is
/// refused by `advance`, `validate_tokens` stops at it, `accept_bytes`
/// refuses a duplicate, and rollback brings back the earlier items.
#[test]
fn every_entry_point_keeps_the_check() {
    let (v, _) = tiny_vocab();
    let schema = json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true});
    let c = compile(&v, &schema, compliant());
    let id = |s: &str| {
        v.spellings()
            .find(|(_, b)| *b == s.as_bytes())
            .map(|(t, _)| t)
            .unwrap()
    };
    let mut m = c.matcher();
    m.advance(id("[\"")).unwrap();
    m.advance(id("a")).unwrap();
    m.advance(id("\", \"")).unwrap();
    m.advance(id("a")).unwrap();
    // `"a"` again: the closing quote is refused everywhere.
    let quote = id("\"");
    assert!(!m.allows(quote) && !m.is_allowed(quote) && !m.allowed().contains(quote));
    let mut row = vec![0u32; constrain::bitmask_words(v.logits_width())];
    m.fill_bitmask(&mut row).unwrap();
    assert_eq!(row[quote.as_usize() / 32] >> (quote.0 % 32) & 1, 0);
    assert!(m.advance(quote).is_err());
    assert!(!m.accept_bytes(b"\"]"));
    assert_eq!(m.validate_tokens(&[id("b"), quote]), 2);
    assert_eq!(m.validate_tokens(&[quote]), 0);
    // Back inside the first item: no item written yet.
    m.rollback(2).unwrap();
    assert!(m.allows(quote));
    let sep = id("\", \"");
    assert_eq!(m.validate_tokens(&[sep, id("a"), quote]), 2);
    assert_eq!(m.validate_tokens(&[sep, id("b"), quote]), 3);
    m.reset();
    assert!(m.accept_bytes(b"[\"a\", "));
    assert!(!m.accept_bytes(b"\"a\""));
    assert!(m.accept_bytes(b"\"b\"]"));
    assert!(m.is_accepting());
    // A token holding two equal items is refused whole.
    let mut m = c.matcher();
    m.advance(id("[")).unwrap();
    assert!(!m.allows(id("\"a\", \"a\"")));
    assert!(m.allows(id("\"a\"")));
}

/// Over the real Qwen vocabulary: random walks that prefer tokens closing
/// an item end valid, and the mask narrows only where an earlier item
/// could be repeated.
#[test]
fn qwen_walks_end_valid() {
    let Some(v) = constrain_testkit::assets::qwen_vocab() else {
        eprintln!("skipping: the Qwen tokenizer is not in $CONSTRAIN_HOME (scripts/fetch-assets)");
        return;
    };
    let schema = json!({"type": "object", "properties": {
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "uniqueItems": true, "minItems": 4, "maxItems": 6},
        "ids": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 12}, "uniqueItems": true, "minItems": 3, "maxItems": 6}
    }, "required": ["tags", "ids"], "additionalProperties": false});
    let oracle = jsonschema::validator_for(&schema).unwrap();
    let c = compile(&v, &schema, compliant());
    let mut rng = StdRng::seed_from_u64(5);
    for walk in 0..30 {
        let mut m = c.matcher();
        let mut text = Vec::new();
        for _ in 0..200 {
            let allowed: Vec<TokenId> = m.allowed().iter().collect();
            assert!(
                !allowed.is_empty(),
                "walk {walk}: dead end after {}",
                String::from_utf8_lossy(&text)
            );
            // Short tokens and ones that close an item, so repeats are tried.
            let short: Vec<TokenId> = allowed
                .iter()
                .copied()
                .filter(|&t| {
                    v.token_bytes(t)
                        .is_some_and(|b| b.len() <= 2 || b.contains(&b'"'))
                })
                .collect();
            let pool = if short.is_empty() { &allowed } else { &short };
            let t = pool[rng.random_range(0..pool.len())];
            m.advance(t).unwrap();
            if v.is_eos(t) {
                break;
            }
            text.extend_from_slice(v.token_bytes(t).unwrap());
        }
        let text = String::from_utf8(text).unwrap();
        let value: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("walk {walk}: {text}: {e}"));
        assert!(oracle.is_valid(&value), "walk {walk}: {text}");
    }
}

/// A recursive schema: arrays at every depth are checked (the places form
/// a cycle), and `prefixItems` beside the keyword changes nothing.
#[test]
fn recursive_and_tuple_arrays_are_checked() {
    let (v, _) = tiny_vocab();
    let schema = json!({"type": "object", "properties": {
        "tags": {"type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "string"}, "uniqueItems": true},
        "child": {"$ref": "#"}
    }, "additionalProperties": false});
    let oracle = jsonschema::validator_for(&schema).unwrap();
    let c = compile(&v, &schema, compliant());
    for text in [
        r#"{"tags": [1, "a", "b"]}"#,
        r#"{"tags": [1, "a", "a"]}"#,
        r#"{"child": {"tags": [2, "b", "b"]}}"#,
        r#"{"child": {"child": {"tags": [2, "a", "b"]}}, "tags": [1, "a"]}"#,
        r#"{"child": {"child": {"tags": [2, "a", "a"]}}, "tags": [1, "a"]}"#,
    ] {
        let value: Value = serde_json::from_str(text).unwrap();
        assert_eq!(accepts(&c, text), oracle.is_valid(&value), "{text}");
    }
}
