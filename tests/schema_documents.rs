//! `$ref`s into other documents: registered ones ([`Documents`]) and the
//! bundled meta-schemas. Each registered case is checked against the
//! `jsonschema` crate given the same documents as resources (the oracle),
//! on listed instances valid and invalid; compiled texts are matched byte
//! by byte on a single-byte vocabulary (so recursion takes the pushdown
//! engine). Nothing is fetched: an unregistered URI stays an error.

use constrain::schema::{Documents, SchemaError, SchemaOptions};
use constrain::vocab::Vocabulary;
use constrain::{CompileError, Compiled, Compiler, CompilerConfig, Source};
use constrain_testkit::budget::byte_accepts as accepts;
use constrain_testkit::budget::bytes_and;
use serde_json::{json, Value};
use std::sync::Arc;

fn vocab() -> Arc<Vocabulary> {
    bytes_and(&[]).0
}

fn compile(schema: &Value, o: SchemaOptions) -> Result<Arc<Compiled>, CompileError> {
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

fn oracle(schema: &Value, docs: &[(&str, Value)]) -> jsonschema::Validator {
    let mut o = jsonschema::options();
    for (uri, d) in docs {
        o = o.with_resource(
            *uri,
            jsonschema::Resource::from_contents(d.clone()).unwrap(),
        );
    }
    o.build(schema).unwrap()
}

/// Compiles `schema` with `docs` registered, checks each instance's
/// expected validity against the oracle, then against the compiled index.
fn check(schema: Value, docs: &[(&str, Value)], accept: &[&str], reject: &[&str]) {
    let o = oracle(&schema, docs);
    let mut reg = Documents::new();
    for (uri, d) in docs {
        reg.insert(uri, d.clone()).unwrap();
    }
    let bundled = reg.bundle(&schema).unwrap();
    let c = compile(&bundled, SchemaOptions::default()).unwrap_or_else(|e| panic!("{schema}: {e}"));
    for t in accept {
        let v: Value = serde_json::from_str(t).unwrap();
        assert!(o.is_valid(&v), "test data: {t} should be valid");
        assert!(accepts(&c, t), "{t} should be accepted by {schema}");
    }
    for t in reject {
        let v: Value = serde_json::from_str(t).unwrap();
        assert!(!o.is_valid(&v), "test data: {t} should be invalid");
        assert!(!accepts(&c, t), "{t} should be rejected by {schema}");
    }
}

fn address() -> Value {
    json!({
        "$id": "https://example.com/address.json",
        "type": "object",
        "properties": {
            "street": {"$ref": "#/$defs/street"},
            "zip": {"$ref": "#zip"},
            "pos": {"$ref": "types.json#/$defs/pos"}
        },
        "required": ["street"],
        "additionalProperties": false,
        "$defs": {
            "street": {"type": "string", "maxLength": 4},
            "zip": {"$anchor": "zip", "type": "string", "pattern": "^[0-9]{2}$"}
        }
    })
}

fn types() -> Value {
    json!({"$defs": {"pos": {"type": "integer", "minimum": 0, "maximum": 9}}})
}

#[test]
fn references_resolve_into_registered_documents() {
    let docs = [
        ("https://example.com/address.json", address()),
        ("https://example.com/types.json", types()),
    ];
    // The whole document, then pieces of it by pointer and by anchor.
    check(
        json!({"$ref": "https://example.com/address.json"}),
        &docs,
        &[
            r#"{"street":"ab"}"#,
            r#"{"street":"ab","zip":"12","pos":3}"#,
        ],
        &[
            r#"{"street":"abcde"}"#,
            r#"{"zip":"12"}"#,
            r#"{"street":"a","zip":"123"}"#,
            r#"{"street":"a","pos":10}"#,
        ],
    );
    check(
        json!({
            "type": "object",
            "properties": {
                "s": {"$ref": "https://example.com/address.json#/$defs/street"},
                "z": {"$ref": "https://example.com/address.json#zip"}
            },
            "required": ["s", "z"],
            "additionalProperties": false
        }),
        &docs,
        &[r#"{"s":"x","z":"00"}"#],
        &[r#"{"s":"xxxxx","z":"00"}"#, r#"{"s":"x","z":"0"}"#],
    );
    // A relative reference resolves against the main document's `$id`.
    check(
        json!({"$id": "https://example.com/main.json", "$ref": "types.json#/$defs/pos"}),
        &docs,
        &["0", "9"],
        &["10", "-1", "\"1\""],
    );
}

#[test]
fn recursion_through_a_registered_document() {
    let node = json!({
        "type": "object",
        "properties": {"kids": {"type": "array", "items": {"$ref": "main.json"}}},
        "required": ["kids"],
        "additionalProperties": false
    });
    check(
        json!({"$id": "https://example.com/main.json", "$ref": "node.json"}),
        &[("https://example.com/node.json", node)],
        &[r#"{"kids":[]}"#, r#"{"kids":[{"kids":[{"kids":[]}]}]}"#],
        &[r#"{"kids":[{"kid":[]}]}"#, r#"{}"#],
    );
}

#[test]
fn unregistered_and_misregistered_documents_are_errors() {
    let e = refused(
        compile(
            &json!({"$ref": "https://example.com/absent.json"}),
            SchemaOptions::default(),
        ),
        "an unregistered document is not fetched",
    );
    assert!(e.to_string().contains("unresolvable $ref"), "{e}");
    let mut docs = Documents::new();
    let e = docs
        .insert(
            "https://example.com/a.json",
            json!({"$id": "https://example.com/b.json"}),
        )
        .unwrap_err();
    assert!(
        matches!(e, SchemaError::Invalid { .. }) && e.to_string().contains("b.json"),
        "{e}"
    );
    assert!(docs.insert("relative.json", json!({})).is_err());
    assert!(docs
        .insert("https://example.com/x.json#frag", json!({}))
        .is_err());
    assert_eq!(
        docs.insert_by_id(json!({"$id": "https://example.com/c.json#", "type": "null"}))
            .unwrap(),
        "https://example.com/c.json"
    );
}

#[test]
fn meta_schema_references_resolve_to_the_bundled_copies() {
    // Every draft's meta-schema is found without any fetch; those that
    // cannot be compiled exactly (`uniqueItems` over strings) are refused
    // by a pointer that names the meta-schema.
    for (uri, named) in [
        ("http://json-schema.org/draft-04/schema#", "draft-04"),
        ("http://json-schema.org/draft-06/schema#", "draft-06"),
        ("http://json-schema.org/draft-07/schema#", "draft-07"),
        ("https://json-schema.org/draft/2019-09/schema", "2019-09"),
        ("https://json-schema.org/draft/2020-12/schema", "2020-12"),
    ] {
        let e = refused(
            compile(&json!({"$ref": uri}), SchemaOptions::default()),
            &format!("{uri}: its uniqueItems are not exact"),
        );
        let msg = e.to_string();
        eprintln!("{uri}: {msg}");
        assert!(!msg.contains("unresolvable"), "{uri}: {msg}");
        assert!(
            msg.contains(named),
            "{uri}: the error names the meta-schema: {msg}"
        );
    }
    // A piece of a meta-schema that is exact compiles exactly.
    let schema =
        json!({"$ref": "http://json-schema.org/draft-07/schema#/definitions/nonNegativeInteger"});
    let c = compile(&schema, SchemaOptions::default()).unwrap();
    let draft7: Value =
        serde_json::from_str(include_str!("../src/schema/metaschemas/draft7.json")).unwrap();
    let o = oracle(
        &schema,
        &[("http://json-schema.org/draft-07/schema", draft7)],
    );
    for (t, ok) in [
        ("0", true),
        ("7", true),
        ("-1", false),
        ("1.5", false),
        ("\"3\"", false),
    ] {
        assert_eq!(o.is_valid(&serde_json::from_str(t).unwrap()), ok, "{t}");
        assert_eq!(accepts(&c, t), ok, "{t}");
    }
}

#[test]
fn a_nested_schema_keyword_does_not_turn_ids_into_bases() {
    // Real schemas carry a draft-04 `$schema` and an `id` deep inside a
    // document whose pointers are written from the root: the `id` there
    // is not a base (only the root's `$schema` decides).
    let schema = json!({
        "definitions": {"lemon": {
            "$schema": "http://json-schema.org/draft-04/schema",
            "id": "schema/lemon",
            "definitions": {"ripe": {"type": "boolean"}},
            "type": "object",
            "properties": {"ripe": {"$ref": "#/definitions/lemon/definitions/ripe"}},
            "additionalProperties": false
        }},
        "$ref": "#/definitions/lemon"
    });
    let c = compile(&schema, SchemaOptions::default()).unwrap();
    assert!(accepts(&c, r#"{"ripe":true}"#));
    assert!(!accepts(&c, r#"{"ripe":1}"#));
}
