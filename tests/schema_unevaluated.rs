//! `unevaluatedProperties` / `unevaluatedItems` where the evaluated sets
//! are known statically: beside `properties`/`patternProperties`, through
//! `allOf` and `$ref`, distributed over `anyOf` (overlapping branches),
//! `oneOf` and `if`/`then`/`else`; `prefixItems` and `contains` for items;
//! nested ones see their own evaluation. Each instance's validity is first
//! checked against the `jsonschema` crate (the oracle), then matched byte by
//! byte on a single-byte vocabulary, in compliant mode (JSON Schema's own
//! meaning). What is not known statically is refused by name.

use constrain::schema::{JsonMode, SchemaOptions};
use constrain::vocab::Vocabulary;
use constrain::{CompileError, Compiled, Compiler, CompilerConfig, Source};
use constrain_testkit::budget::byte_accepts as accepts;
use constrain_testkit::budget::bytes_and;
use serde_json::{json, Value};
use std::sync::Arc;

fn vocab() -> Arc<Vocabulary> {
    bytes_and(&[]).0
}

fn compile(schema: &Value) -> Result<Arc<Compiled>, CompileError> {
    let o = SchemaOptions::default().mode(JsonMode::Compliant);
    Compiler::new(vocab(), CompilerConfig::default())
        .compile(&Source::json_schema(schema.clone()).with_schema_options(o))
}

/// The error of a compile that must fail.
fn refused(r: Result<Arc<Compiled>, CompileError>, why: &str) -> CompileError {
    match r {
        Ok(_) => panic!("compiled, but {why}"),
        Err(e) => e,
    }
}

fn check(schema: Value, cases: &[(&str, bool)]) {
    let o = jsonschema::validator_for(&schema).unwrap();
    let c = compile(&schema).unwrap_or_else(|e| panic!("{schema}: {e}"));
    for (t, valid) in cases {
        let v: Value = serde_json::from_str(t).unwrap();
        assert_eq!(o.is_valid(&v), *valid, "test data: {t} under {schema}");
        assert_eq!(accepts(&c, t), *valid, "{t} under {schema}");
    }
}

#[test]
fn flat_evaluation_through_all_of_and_refs() {
    check(
        json!({
            "type": "object",
            "allOf": [{"properties": {"a": {"type": "integer"}}}],
            "properties": {"b": {"type": "string"}},
            "unevaluatedProperties": false
        }),
        &[
            (r#"{"a":1,"b":"x"}"#, true),
            ("{}", true),
            (r#"{"c":1}"#, false),
            (r#"{"a":"x"}"#, false),
        ],
    );
    check(
        json!({
            "type": "object",
            "$ref": "#/$defs/base",
            "properties": {"c": true},
            "unevaluatedProperties": {"type": "integer"},
            "$defs": {"base": {"properties": {"a": true}}}
        }),
        // Declared keys in the order they are written (extra keys after them).
        &[
            (r#"{"c":"t","a":"s","d":1}"#, true),
            (r#"{"a":"s","d":1}"#, true),
            (r#"{"d":"x"}"#, false),
            (r#"{"c":"t","e":[]}"#, false),
        ],
    );
    check(
        json!({
            "type": "object",
            "allOf": [{"patternProperties": {"^x": true}}],
            "unevaluatedProperties": false
        }),
        &[(r#"{"x1":1}"#, true), (r#"{"y":1}"#, false)],
    );
    // `additionalProperties` evaluates every property: nothing is left.
    check(
        json!({"type": "object", "additionalProperties": true, "unevaluatedProperties": false}),
        &[(r#"{"x":1}"#, true)],
    );
}

#[test]
fn branches_are_distributed() {
    // Overlapping anyOf: every passing branch's properties count.
    check(
        json!({
            "type": "object",
            "anyOf": [
                {"properties": {"a": {"const": 1}}, "required": ["a"]},
                {"properties": {"b": {"const": 2}}, "required": ["b"]}
            ],
            "unevaluatedProperties": false
        }),
        &[
            (r#"{"a":1}"#, true),
            (r#"{"b":2}"#, true),
            (r#"{"a":1,"b":2}"#, true),
            (r#"{"a":1,"b":3}"#, false),
            (r#"{"a":1,"c":0}"#, false),
            ("{}", false),
        ],
    );
    check(
        json!({
            "type": "object",
            "oneOf": [
                {"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                {"properties": {"b": {"type": "integer"}}, "required": ["b"]}
            ],
            "unevaluatedProperties": false
        }),
        &[
            (r#"{"a":1}"#, true),
            (r#"{"b":1}"#, true),
            (r#"{"a":1,"b":2}"#, false),
            (r#"{"a":1,"c":1}"#, false),
        ],
    );
    check(
        json!({
            "type": "object",
            "if": {"properties": {"t": {"const": "x"}}, "required": ["t"]},
            "then": {"properties": {"x": {"type": "integer"}}},
            "else": {"properties": {"y": true}},
            "unevaluatedProperties": false
        }),
        &[
            (r#"{"t":"x","x":1}"#, true),
            (r#"{"y":1}"#, true),
            (r#"{"t":"z","y":1}"#, false),
            (r#"{"t":"x","y":1}"#, false),
        ],
    );
}

#[test]
fn nested_keywords_see_their_own_evaluation() {
    check(
        json!({
            "type": "object",
            "properties": {"o": {"type": "object", "properties": {"a": true}, "unevaluatedProperties": false}},
            "unevaluatedProperties": false
        }),
        &[
            (r#"{"o":{"a":1}}"#, true),
            (r#"{"o":{"b":1}}"#, false),
            (r#"{"p":1}"#, false),
        ],
    );
}

#[test]
fn unevaluated_items() {
    check(
        json!({
            "type": "array",
            "prefixItems": [{"type": "integer"}],
            "allOf": [{"prefixItems": [true, {"type": "string"}]}],
            "unevaluatedItems": false
        }),
        &[
            (r#"[1,"a"]"#, true),
            ("[1]", true),
            (r#"[1,"a",2]"#, false),
            (r#"["a"]"#, false),
        ],
    );
    check(
        json!({"type": "array", "contains": {"type": "string"}, "unevaluatedItems": {"type": "integer"}}),
        &[
            (r#"["a",1,2]"#, true),
            (r#"[1,"b"]"#, true),
            (r#"["a",null]"#, false),
            ("[1]", false),
        ],
    );
    check(
        json!({"type": "array", "items": {"type": "integer"}, "unevaluatedItems": false}),
        &[("[1,2]", true), (r#"["a"]"#, false)],
    );
}

#[test]
fn what_is_not_static_is_refused_by_name() {
    for (schema, at) in [
        (
            json!({"dependentSchemas": {"a": {"properties": {"b": true}}}, "unevaluatedProperties": false}),
            "(root)",
        ),
        (
            json!({"properties": {"p": {
                "anyOf": [{"anyOf": [{"properties": {"a": true}}]}, true],
                "unevaluatedProperties": false
            }}}),
            "/properties/p",
        ),
    ] {
        let e = refused(compile(&schema), "it is not exact").to_string();
        assert!(e.contains("unevaluatedProperties") && e.contains(at), "{e}");
    }
}
