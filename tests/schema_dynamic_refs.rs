//! `$dynamicRef` whose target depends on the dynamic scope, compiled as one
//! copy of the referenced subschema per distinct scope, and `$recursiveRef`
//! where it resolves statically. Instances are checked against the
//! `jsonschema` crate (the oracle), then against the compiled index byte by
//! byte on a single-byte vocabulary (recursion on the pushdown engine).

use constrain::schema::{Documents, SchemaOptions};
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
    Compiler::new(vocab(), CompilerConfig::default())
        .compile(&Source::json_schema(schema.clone()).with_schema_options(SchemaOptions::default()))
}

/// The error of a compile that must fail.
fn refused(r: Result<Arc<Compiled>, CompileError>, why: &str) -> CompileError {
    match r {
        Ok(_) => panic!("compiled, but {why}"),
        Err(e) => e,
    }
}

fn check(schema: Value, docs: &[(&str, Value)], cases: &[(&str, bool)]) {
    let mut o = jsonschema::options();
    let mut reg = Documents::new();
    for (uri, d) in docs {
        o = o.with_resource(
            *uri,
            jsonschema::Resource::from_contents(d.clone()).unwrap(),
        );
        reg.insert(uri, d.clone()).unwrap();
    }
    let o = o.build(&schema).unwrap();
    let c = compile(&reg.bundle(&schema).unwrap()).unwrap_or_else(|e| panic!("{schema}: {e}"));
    for (t, valid) in cases {
        let v: Value = serde_json::from_str(t).unwrap();
        assert_eq!(o.is_valid(&v), *valid, "test data: {t} under {schema}");
        assert_eq!(accepts(&c, t), *valid, "{t} under {schema}");
    }
}

/// A tree whose nodes are "whatever `#node` is in the dynamic scope", and
/// a stricter tree that re-anchors `node` to require `data` at every level.
fn trees() -> Vec<(&'static str, Value)> {
    vec![
        (
            "https://example.com/tree",
            json!({
                "$id": "https://example.com/tree",
                "$dynamicAnchor": "node",
                "type": "object",
                "properties": {
                    "data": {"type": "integer"},
                    "children": {"type": "array", "items": {"$dynamicRef": "#node"}}
                },
                "additionalProperties": false
            }),
        ),
        (
            "https://example.com/strict-tree",
            json!({
                "$id": "https://example.com/strict-tree",
                "$dynamicAnchor": "node",
                "$ref": "tree",
                "required": ["data"]
            }),
        ),
    ]
}

#[test]
fn the_outermost_dynamic_anchor_in_scope_wins() {
    let docs = trees();
    let deep_missing = r#"{"data":1,"children":[{"data":2,"children":[{"children":[]}]}]}"#;
    let deep_full = r#"{"data":1,"children":[{"data":2,"children":[{"data":3}]}]}"#;
    // Entered through the strict tree: every level requires `data`.
    check(
        json!({"$ref": "https://example.com/strict-tree"}),
        &docs,
        &[
            (deep_full, true),
            (deep_missing, false),
            (r#"{"children":[]}"#, false),
            (r#"{"data":1,"x":2}"#, false),
        ],
    );
    // Entered through the plain tree: no level does.
    check(
        json!({"$ref": "https://example.com/tree"}),
        &docs,
        &[
            (deep_full, true),
            (deep_missing, true),
            (r#"{"data":"a"}"#, false),
        ],
    );
    // Both in one schema: each property keeps its own scope.
    check(
        json!({
            "type": "object",
            "properties": {
                "loose": {"$ref": "https://example.com/tree"},
                "strict": {"$ref": "https://example.com/strict-tree"}
            },
            "additionalProperties": false
        }),
        &docs,
        &[
            (
                r#"{"loose":{"children":[{}]},"strict":{"data":1,"children":[{"data":2}]}}"#,
                true,
            ),
            (
                r#"{"loose":{"children":[{}]},"strict":{"data":1,"children":[{}]}}"#,
                false,
            ),
        ],
    );
}

#[test]
fn a_pointer_into_a_nested_resource_enters_that_resource_only() {
    // The root resource anchors `items` to strings, but a pointer into it
    // that lands in the list's own resource (`$id: list`) enters that
    // resource only: the list's own anchor stays outermost, its items are
    // lists again.
    let from_root = json!({
        "$id": "https://example.com/root",
        "$dynamicAnchor": "items",
        "type": "string",
        "$defs": {
            "list": {
                "$id": "list",
                "$dynamicAnchor": "items",
                "type": "array",
                "items": {"$dynamicRef": "#items"}
            }
        },
        "anyOf": [{"maxLength": 3}]
    });
    let wrapped = json!({
        "$id": "https://example.com/wrap",
        "type": "object",
        "properties": {"l": {"$ref": "https://example.com/root#/$defs/list"}},
        "required": ["l"],
        "additionalProperties": false
    });
    check(
        wrapped,
        &[("https://example.com/root", from_root)],
        &[(r#"{"l":[[[]]]}"#, true), (r#"{"l":["ab"]}"#, false)],
    );
}

#[test]
fn recursive_refs_resolve_statically_or_are_refused_by_name() {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2019-09/schema",
        "$recursiveAnchor": true,
        "type": "object",
        "properties": {"next": {"anyOf": [{"type": "null"}, {"$recursiveRef": "#"}]}},
        "required": ["next"],
        "additionalProperties": false
    });
    let o = jsonschema::validator_for(&schema).unwrap();
    let c = compile(&schema).unwrap();
    for (t, valid) in [
        (r#"{"next":null}"#, true),
        (r#"{"next":{"next":{"next":null}}}"#, true),
        (r#"{"next":{"next":1}}"#, false),
        (r#"{"next":{}}"#, false),
    ] {
        assert_eq!(o.is_valid(&serde_json::from_str(t).unwrap()), valid, "{t}");
        assert_eq!(accepts(&c, t), valid, "{t}");
    }
    // Two resources with `$recursiveAnchor: true`: refused, by name.
    let two = json!({
        "$id": "https://example.com/a", "$recursiveAnchor": true,
        "$defs": {"b": {"$id": "b", "$recursiveAnchor": true,
                        "type": "array", "items": {"$recursiveRef": "#"}}},
        "$ref": "b"
    });
    let e = refused(compile(&two), "it is not exact").to_string();
    assert!(
        e.contains("$recursiveRef") && e.contains("/$defs/b/items"),
        "{e}"
    );
}

#[test]
fn the_2020_12_meta_schema_is_refused_only_for_what_is_not_exact() {
    let e = refused(
        compile(&json!({"$ref": "https://json-schema.org/draft/2020-12/schema"})),
        "the meta-schema's uniqueItems over strings is not exact",
    )
    .to_string();
    assert!(
        !e.contains("$dynamicRef") && !e.contains("unresolvable"),
        "{e}"
    );
    assert!(e.contains("2020-12") && e.contains("uniqueItems"), "{e}");
}
