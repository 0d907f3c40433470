//! Tests of the extra-key language ([`super::object`]): a key matches exactly
//! when it is none of the declared names.

use super::*;
use crate::schema::Escapes;

#[test]
fn extra_keys_exclude_declared_names() {
    let re = regex::Regex::new(&format!(
        "^{}$",
        extra_key(&["a".into(), "ab".into(), "b\"c".into()], Escapes::ALL)
    ))
    .unwrap();
    for ok in [
        "\"\"",
        "\"x\"",
        "\"abc\"",
        "\"b\"",
        "\"aa\"",
        "\"b\\\"\"",
        "\"b\\\"cd\"",
    ] {
        assert!(re.is_match(ok), "{ok}");
    }
    for bad in ["\"a\"", "\"ab\"", "\"b\\\"c\""] {
        assert!(!re.is_match(bad), "{bad}");
    }
}

/// Random name sets over a small alphabet (shared prefixes, non-ASCII,
/// escapes, the empty name): a key matches exactly when it is none of
/// the names.
#[test]
fn extra_keys_match_exactly_the_other_keys() {
    use rand::{rngs::StdRng, Rng, SeedableRng};
    let alphabet = ['a', 'b', 'é', '"', '\\', '\n', '😀'];
    let mut rng = StdRng::seed_from_u64(7);
    let word = |rng: &mut StdRng| -> String {
        let n = rng.random_range(0..4);
        (0..n)
            .map(|_| alphabet[rng.random_range(0..alphabet.len())])
            .collect()
    };
    for _ in 0..200 {
        let names: Vec<String> = (0..rng.random_range(1..5))
            .map(|_| word(&mut rng))
            .collect();
        let re = regex::Regex::new(&format!("^{}$", extra_key(&names, Escapes::ALL))).unwrap();
        for _ in 0..50 {
            let k = word(&mut rng);
            let text = py_string(&k);
            assert_eq!(
                re.is_match(&text),
                !names.contains(&k),
                "key {text} names {names:?}"
            );
        }
    }
}

/// The generator's memos (product automata, `oneOf` proofs) change no
/// output: recursive definitions with a `oneOf` at every unrolled level
/// (proofs made at one depth, asked again at others, some cut by
/// `max_depth`), and the same pattern with length bounds or under `not` in
/// many places, compile to the same text, warnings and errors with the
/// memos as without, at every depth and in both modes.
#[test]
fn memos_change_no_output() {
    use crate::schema::{JsonMode, SchemaOptions};
    use serde_json::json;
    let id = json!({"type": "string", "pattern": "^[a-z]+$", "maxLength": 6});
    let schemas = [
        json!({
            "$defs": {
                "content": {"type": "object", "required": ["type"],
                    "properties": {"type": {"const": "story"}, "id": id,
                        "promo": {"$ref": "#/$defs/promo"}},
                    "additionalProperties": false},
                "reference": {"type": "object", "required": ["type", "id"],
                    "properties": {"type": {"const": "reference"}, "id": id},
                    "additionalProperties": false},
                "promo": {"type": "object", "properties": {
                    "basic": {"oneOf": [{"$ref": "#/$defs/content"}, {"$ref": "#/$defs/reference"}]},
                    "more": {"oneOf": [{"$ref": "#/$defs/content"},
                        {"type": "object", "properties": {"promo": {"$ref": "#/$defs/promo"}}}]}}}
            },
            "$ref": "#/$defs/content"
        }),
        json!({
            "$defs": {"node": {"oneOf": [
                {"type": "object", "required": ["x"], "properties": {"x": {"$ref": "#/$defs/node"}}},
                {"type": "object", "required": ["x"], "properties": {"x": {"type": "string"}}},
                {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}]}},
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/node"}, "b": {"$ref": "#/$defs/node"},
                "c": {"allOf": [{"$ref": "#/$defs/node"}, {"type": "object"}]}}
        }),
        json!({
            "$defs": {"node": {"oneOf": [
                {"type": "object", "required": ["x"], "properties": {"x": {"$ref": "#/$defs/node"}},
                    "additionalProperties": false},
                {"type": "object", "required": ["x"], "properties": {"x": {"type": "object"}},
                    "additionalProperties": false}]}},
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/node"}, "b": {"type": "array", "items": {"$ref": "#/$defs/node"}}}
        }),
        // Branches holding groups of their own: each side's group is
        // merged again for every branch of the other side.
        json!({
            "$defs": {
                "leaf": {"anyOf": [
                    {"type": "object", "required": ["k"], "properties": {"k": {"const": "a"}}},
                    {"type": "object", "required": ["k"], "properties": {"k": {"const": "b"}}}]},
                "tree": {"oneOf": [
                    {"$ref": "#/$defs/leaf"},
                    {"anyOf": [
                        {"type": "object", "required": ["k", "kids"], "properties": {
                            "k": {"const": "c"},
                            "kids": {"type": "array", "items": {"$ref": "#/$defs/tree"}}}},
                        {"type": "object", "required": ["k"], "properties": {"k": {"const": "d"}}}]},
                    {"oneOf": [{"type": "string"}, {"type": "integer"}]},
                    {"allOf": [{"$ref": "#/$defs/leaf"}, {"required": ["z"]}]}]}},
            "type": "object",
            "properties": {"t": {"$ref": "#/$defs/tree"},
                "u": {"type": "array", "items": {"$ref": "#/$defs/tree"}}}
        }),
        json!({
            "type": "object",
            "properties": {
                "a": id, "b": id,
                "c": {"type": "string", "pattern": "^[a-z]+$", "minLength": 2, "maxLength": 6},
                "d": {"type": "string", "not": {"pattern": "^ab"}},
                "e": {"type": "string", "not": {"pattern": "^ab"}, "pattern": "^[a-z]+$", "maxLength": 6},
                "f": {"type": "array", "items": {"type": "string", "not": {"pattern": "^ab"}}}
            }
        }),
    ];
    for schema in &schemas {
        for mode in [JsonMode::Strict, JsonMode::Compliant] {
            for depth in 0..=4 {
                let opts = SchemaOptions {
                    mode,
                    max_depth: depth,
                    ..Default::default()
                };
                let with = compile_memoised(schema, &opts, true);
                let without = compile_memoised(schema, &opts, false);
                match (with, without) {
                    (Ok(a), Ok(b)) => {
                        assert_eq!(a.regex, b.regex, "{mode:?} depth {depth}: {schema}");
                        assert_eq!(a.warnings.len(), b.warnings.len());
                    }
                    (a, b) => assert_eq!(
                        a.err().map(|e| e.to_string()),
                        b.err().map(|e| e.to_string()),
                        "{mode:?} depth {depth}: {schema}"
                    ),
                }
            }
        }
    }
}
