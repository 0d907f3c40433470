//! Per-keyword behaviour of the schema compiler, checked at byte level.
//!
//! Every case lists instances that must be accepted and instances that must
//! be rejected. Each expectation is first checked against the independent
//! oracle (`jsonschema` with format validation), then every instance is
//! rendered under each whitespace policy and matched against the DFA. We never
//! look at the regex text.

mod schema_util;

use constrain::schema::{self, JsonMode, SchemaError, SchemaOptions, Whitespace};
use schema_util::*;
use serde_json::{json, Value};

const POLICIES: [Whitespace; 3] = [
    Whitespace::Compact,
    Whitespace::Python,
    Whitespace::Flexible { max: 2 },
];

fn check_modes(schema: Value, accept: &[Value], reject: &[Value], modes: &[JsonMode]) {
    let oracle = Oracle::new(&schema).expect("oracle compiles the schema");
    for v in accept {
        assert!(
            oracle.valid(v),
            "test data: {v} should be valid for {schema}"
        );
    }
    for v in reject {
        assert!(
            !oracle.valid(v),
            "test data: {v} should be invalid for {schema}"
        );
    }
    for &mode in modes {
        for ws in POLICIES {
            let c = schema::compile(&schema, &opts(ws, mode))
                .unwrap_or_else(|e| panic!("{schema} ({mode:?}): {e}"));
            let d = dfa(&c);
            for v in accept {
                let t = render(v, ws);
                assert!(
                    d.matches(t.as_bytes()),
                    "{mode:?} {ws:?}: {t} should match {schema}"
                );
            }
            for v in reject {
                let t = render(v, ws);
                assert!(
                    !d.matches(t.as_bytes()),
                    "{mode:?} {ws:?}: {t} should not match {schema}"
                );
            }
        }
    }
}

fn check(schema: Value, accept: &[Value], reject: &[Value]) {
    check_modes(
        schema,
        accept,
        reject,
        &[JsonMode::Strict, JsonMode::Compliant],
    );
}

fn err(schema: Value) -> SchemaError {
    match schema::compile(&schema, &SchemaOptions::default()) {
        Ok(c) => panic!(
            "{schema} should not compile, got {} bytes of regex",
            c.regex.len()
        ),
        Err(e) => e,
    }
}

#[test]
fn types_single_and_lists() {
    check(
        json!({"type": "integer"}),
        &[json!(0), json!(-17), json!(123456789)],
        &[json!(1.5), json!("1"), json!(null)],
    );
    check(
        json!({"type": "number"}),
        &[json!(0), json!(-1.25), json!(1e-7), json!(3e20)],
        &[json!("1"), json!(true)],
    );
    check(
        json!({"type": "string"}),
        &[json!(""), json!("héllo \"q\" \\ \n\t\u{1}"), json!("😀")],
        &[json!(1), json!(null)],
    );
    check(
        json!({"type": "boolean"}),
        &[json!(true), json!(false)],
        &[json!(0), json!("true")],
    );
    check(
        json!({"type": "null"}),
        &[json!(null)],
        &[json!(0), json!("null")],
    );
    check(
        json!({"type": ["string", "null"]}),
        &[json!("a"), json!(null)],
        &[json!(1), json!([])],
    );
    check(
        json!({"type": "array"}),
        &[json!([]), json!([1, "a", [null], {"k": 2}])],
        &[json!({}), json!("[]")],
    );
    check(
        json!({"type": "object"}),
        &[json!({}), json!({"a": [1, {"b": null}]})],
        &[json!([]), json!(1)],
    );
}

#[test]
fn enum_and_const() {
    check(
        json!({"enum": ["a", 1, null, [1, 2], {"k": "v"}]}),
        &[
            json!("a"),
            json!(1),
            json!(null),
            json!([1, 2]),
            json!({"k": "v"}),
        ],
        &[json!("b"), json!(2), json!([2, 1])],
    );
    check(json!({"const": "x\"y"}), &[json!("x\"y")], &[json!("xy")]);
    check(
        json!({"type": "string", "enum": ["a", 1, "bb"], "maxLength": 1}),
        &[json!("a")],
        &[json!(1), json!("bb")],
    );
}

#[test]
fn properties_required_additional() {
    let s = json!({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name"], "additionalProperties": false});
    check(
        s,
        &[json!({"name": "a"}), json!({"name": "a", "age": 3})],
        &[
            json!({}),
            json!({"age": 3}),
            json!({"name": "a", "x": 1}),
            json!({"name": 1}),
        ],
    );
    let s = json!({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}});
    check(
        s,
        &[
            json!({}),
            json!({"a": 1}),
            json!({"a": 1, "x": "s"}),
            json!({"x": "s", "y": "t"}),
        ],
        &[json!({"x": 1}), json!({"a": "s"}), json!({"a": 1, "x": 2})],
    );
    // No required keys, several optional ones: every ordered subset.
    let s = json!({"type": "object", "properties": {"a": {"const": 1}, "b": {"const": 2}, "c": {"const": 3}, "d": {"const": 4}}, "additionalProperties": false});
    check(
        s,
        &[
            json!({}),
            json!({"a": 1}),
            json!({"b": 2, "d": 4}),
            json!({"a": 1, "b": 2, "c": 3, "d": 4}),
        ],
        &[json!({"a": 2}), json!({"e": 5})],
    );
}

#[test]
fn strict_and_compliant_extras() {
    let s = json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]});
    // Compliant: extra keys with any value (after the declared ones).
    check_modes(
        s.clone(),
        &[json!({"a": 1, "zz": [1, {"q": null}]})],
        &[json!({"a": "x"}), json!({"zz": 1})],
        &[JsonMode::Compliant],
    );
    // Strict: no extra keys.
    let c = schema::compile(&s, &SchemaOptions::default()).unwrap();
    assert!(!dfa(&c).matches(br#"{"a":1,"zz":2}"#));
    assert!(dfa(&c).matches(br#"{"a":1}"#));
    // A declared key is never accepted again as an extra key.
    let c = schema::compile(&s, &opts(Whitespace::Compact, JsonMode::Compliant)).unwrap();
    assert!(!dfa(&c).matches(br#"{"a":1,"a":"x"}"#));
}

#[test]
fn compliant_any_order_for_small_objects() {
    let s = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a"]});
    check_modes(
        s,
        &[json!({"b": "x", "a": 1}), json!({"a": 1, "b": "x"})],
        &[json!({"b": "x"}), json!({"b": 1, "a": 1})],
        &[JsonMode::Compliant],
    );
}

#[test]
fn arrays() {
    check(
        json!({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3}),
        &[json!([1]), json!([1, 2, 3])],
        &[json!([]), json!([1, 2, 3, 4]), json!(["a"])],
    );
    check(
        json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false}),
        &[json!([]), json!(["a"]), json!(["a", 1])],
        &[json!([1]), json!(["a", 1, 2])],
    );
    check(
        json!({"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "boolean"}, "minItems": 2}),
        &[json!(["a", true]), json!(["a", true, false])],
        &[json!(["a"]), json!(["a", 1])],
    );
    // draft-07 tuple spelling
    check(
        json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "array", "items": [{"type": "integer"}], "additionalItems": false}),
        &[json!([]), json!([1])],
        &[json!([1, 2]), json!(["a"])],
    );
}

#[test]
fn string_lengths_count_code_points() {
    check(
        json!({"type": "string", "minLength": 2, "maxLength": 3}),
        &[json!("ab"), json!("é😀"), json!("a\"b"), json!("\n\t")],
        &[json!("a"), json!("😀"), json!("abcd")],
    );
}

#[test]
fn patterns() {
    check(
        json!({"type": "string", "pattern": "^[a-z]+-\\d{2}$"}),
        &[json!("ab-12")],
        &[json!("ab-1"), json!("AB-12"), json!("ab-12x")],
    );
    check(
        json!({"type": "string", "pattern": "b+"}),
        &[json!("abba"), json!("b")],
        &[json!("aaa"), json!("")],
    );
    check(
        json!({"type": "string", "pattern": "^[^a]*$", "maxLength": 3}),
        &[json!("\"\\/"), json!("")],
        &[json!("xa"), json!("xyzw")],
    );
    check(
        json!({"type": "string", "pattern": "^\\w+$", "minLength": 3, "maxLength": 5}),
        &[json!("abc"), json!("a_1b2")],
        &[json!("ab"), json!("abcdef"), json!("ab-c")],
    );
}

#[test]
fn formats() {
    let cases: &[(&str, &[Value], &[Value])] = &[
        (
            "date",
            &[json!("2024-02-29")],
            &[json!("2023-02-29"), json!("2024-2-1")],
        ),
        (
            "date-time",
            &[
                json!("2024-01-31T23:59:59Z"),
                json!("2024-01-31T23:59:59.5+01:00"),
            ],
            &[json!("2024-01-31 23:59:59Z")],
        ),
        ("time", &[json!("12:00:00Z")], &[json!("25:00:00Z")]),
        (
            "duration",
            &[json!("P3DT4H"), json!("PT0S"), json!("P2W")],
            &[json!("P"), json!("3D")],
        ),
        (
            "email",
            &[json!("a.b@example.com")],
            &[json!("a@@b"), json!("@example.com")],
        ),
        (
            "hostname",
            &[json!("example.com"), json!("a-b")],
            &[json!("-ab.com"), json!("a_b.com")],
        ),
        (
            "ipv4",
            &[json!("10.0.0.255")],
            &[json!("10.0.0.256"), json!("1.2.3")],
        ),
        (
            "ipv6",
            &[json!("::1"), json!("2001:db8::8a2e:370:7334")],
            &[json!("1::2::3"), json!("12345::")],
        ),
        (
            "uuid",
            &[json!("123e4567-e89b-12d3-a456-426614174000")],
            &[json!("123e4567e89b12d3a456426614174000")],
        ),
        (
            "uri",
            &[
                json!("https://example.com/a?b=c#d"),
                json!("urn:isbn:0451450523"),
            ],
            &[json!("not a uri"), json!("/relative")],
        ),
        (
            "uri-reference",
            &[json!("/relative/path"), json!("https://x.y")],
            &[json!("a b")],
        ),
    ];
    for (f, ok, bad) in cases {
        check(json!({"type": "string", "format": f}), ok, bad);
    }
    check(
        json!({"type": "string", "format": "email", "maxLength": 12}),
        &[json!("a@b.co")],
        &[json!("abcdef@example.com")],
    );
}

#[test]
fn numeric_ranges() {
    check(
        json!({"type": "integer", "minimum": -5, "maximum": 120}),
        &[json!(-5), json!(0), json!(120)],
        &[json!(-6), json!(121), json!(1.5)],
    );
    check(
        json!({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10}),
        &[json!(1), json!(9)],
        &[json!(0), json!(10)],
    );
    check(
        json!({"type": "number", "minimum": -1.5, "exclusiveMaximum": 2.25}),
        &[json!(-1.5), json!(0), json!(2.2), json!(2.249)],
        &[json!(-1.51), json!(2.25), json!(3)],
    );
    check(
        json!({"type": "number", "exclusiveMinimum": 0}),
        &[json!(0.001), json!(1e-7), json!(5)],
        &[json!(0), json!(-1e-7)],
    );
    // draft-04 boolean exclusiveMinimum
    check(
        json!({"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer", "minimum": 3, "exclusiveMinimum": true}),
        &[json!(4)],
        &[json!(3)],
    );
    check(
        json!({"type": "integer", "multipleOf": 5}),
        &[json!(0), json!(-15), json!(1005)],
        &[json!(7), json!(12)],
    );
    check(
        json!({"type": "integer", "multipleOf": 7, "minimum": 0, "maximum": 50}),
        &[json!(0), json!(49)],
        &[json!(50), json!(-7), json!(8)],
    );
}

#[test]
fn applicators() {
    check(
        json!({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}]}),
        &[json!(1), json!("a")],
        &[json!("ab"), json!(null)],
    );
    check(
        json!({"oneOf": [{"type": "integer"}, {"type": "string"}]}),
        &[json!(1), json!("a")],
        &[json!(null)],
    );
    // Discriminated union.
    let s = json!({"oneOf": [
        {"type": "object", "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind"]},
        {"type": "object", "properties": {"kind": {"const": "b"}, "y": {"type": "string"}}, "required": ["kind"]}
    ]});
    check(
        s,
        &[json!({"kind": "a", "x": 1}), json!({"kind": "b", "y": "s"})],
        &[json!({"kind": "c"}), json!({"kind": "a", "x": "s"})],
    );
    // oneOf told apart by a key the other branch requires.
    let s = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "oneOf": [{"required": ["a"]}, {"required": ["b"]}]});
    check(
        s,
        &[json!({"a": 1}), json!({"b": 1})],
        &[json!({"a": 1, "b": 2}), json!({})],
    );
    check(
        json!({"allOf": [{"type": "integer", "minimum": 0}, {"maximum": 10}]}),
        &[json!(0), json!(10)],
        &[json!(11), json!(-1)],
    );
    let s = json!({"allOf": [
        {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
        {"properties": {"b": {"type": "string"}}, "required": ["b"]}
    ]});
    check_modes(
        s,
        &[json!({"a": 1, "b": "x"})],
        &[json!({"a": 1}), json!({"b": "x"})],
        &[JsonMode::Strict, JsonMode::Compliant],
    );
}

#[test]
fn boolean_schemas_and_not() {
    check(
        json!({"type": "array", "items": true}),
        &[json!([1, "x"])],
        &[json!({})],
    );
    check(
        json!({"type": "object", "properties": {"a": false, "b": {"type": "integer"}}}),
        &[json!({"b": 1})],
        &[json!({"a": 1})],
    );
    check(
        json!({"not": {"type": "string"}, "type": ["string", "integer"]}),
        &[json!(1)],
        &[json!("a")],
    );
    check(
        json!({"type": "object", "properties": {"a": {"type": "integer"}}, "not": {"required": ["a"]}}),
        &[json!({})],
        &[json!({"a": 1})],
    );
    // One numeric bound under `not`: only numbers on the other side pass.
    check(
        json!({"not": {"maximum": 3}}),
        &[json!(4), json!(3.5), json!(100)],
        &[
            json!(3),
            json!(2.5),
            json!(-1),
            json!("x"),
            json!(null),
            json!([]),
        ],
    );
    check(
        json!({"allOf": [{"type": "integer"}, {"not": {"minimum": 1.1}}]}),
        &[json!(1), json!(0), json!(-5)],
        &[json!(2), json!(7), json!(true)],
    );
    check(
        json!({"type": "number", "not": {"exclusiveMaximum": 2}}),
        &[json!(2), json!(2.5)],
        &[json!(1.9), json!(0)],
    );
    check(
        json!({"type": "integer", "maximum": 10, "not": {"exclusiveMinimum": 0}}),
        &[json!(0), json!(-3)],
        &[json!(1), json!(10)],
    );
}

#[test]
fn refs_and_recursion() {
    let s = json!({
        "$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"$ref": "#/$defs/node"}}, "required": ["v"], "additionalProperties": false}},
        "$ref": "#/$defs/node"
    });
    check_modes(
        s.clone(),
        &[
            json!({"v": 1}),
            json!({"v": 1, "next": {"v": 2, "next": {"v": 3}}}),
        ],
        &[json!({"next": {"v": 1}}), json!({"v": 1, "next": {}})],
        &[JsonMode::Strict],
    );
    // Depth is bounded: with max_depth 1 a chain of 3 is not offered.
    let o = SchemaOptions::default().max_depth(1);
    let d = dfa(&schema::compile(&s, &o).unwrap());
    assert!(d.matches(br#"{"v":1,"next":{"v":2}}"#));
    assert!(!d.matches(br#"{"v":1,"next":{"v":2,"next":{"v":3}}}"#));
    // draft-07 definitions
    check(
        json!({"definitions": {"n": {"type": "integer"}}, "type": "array", "items": {"$ref": "#/definitions/n"}}),
        &[json!([1, 2])],
        &[json!(["a"])],
    );
}

#[test]
fn min_max_properties() {
    check(
        json!({"type": "object", "minProperties": 1, "maxProperties": 2, "additionalProperties": {"type": "integer"}}),
        &[json!({"a": 1}), json!({"a": 1, "b": 2})],
        &[json!({}), json!({"a": 1, "b": 2, "c": 3})],
    );
    check(
        json!({"type": "object", "properties": {"a": {"type": "integer"}}, "minProperties": 1, "additionalProperties": false}),
        &[json!({"a": 1})],
        &[json!({})],
    );
    // Two written keys may be one key twice: fail closed.
    let e = err(
        json!({"type": "object", "minProperties": 2, "additionalProperties": {"type": "integer"}}),
    );
    assert!(e.to_string().contains("minProperties"), "{e}");
}

#[test]
fn fail_closed_errors_name_keyword_and_pointer() {
    // (An integer `not: {multipleOf: 7}` over an unbounded range is
    // narrowed with a warning; a fractional one still fails.)
    let e = err(json!({"properties": {"age": {"type": "integer", "not": {"multipleOf": 0.5}}}}));
    assert!(
        e.to_string()
            .starts_with("unsupported keyword \"not\" at /properties/age")
            && e.to_string().contains("fractional \"multipleOf\""),
        "{e}"
    );
    assert!(e.pointer().as_str().starts_with("/properties/age"), "{e}");
    let e = err(json!({"type": "string", "if": {"format": "email"}, "then": {"minLength": 3}}));
    assert!(
        e.to_string()
            .starts_with("unsupported keyword \"if\" at (root)"),
        "{e}"
    );
    let e = err(json!({"type": "array", "uniqueItems": true}));
    assert_eq!(
        e.to_string(),
        "unsupported uniqueItems at (root): the items have no small finite set of values"
    );
    let e = err(json!({"type": "string", "maxlength": 3}));
    assert!(matches!(e, SchemaError::Unknown { .. }), "{e}");
    let e = err(json!({"type": "string", "pattern": "(?=a)b"}));
    assert!(
        matches!(e, SchemaError::Pattern { .. }) && e.pointer().as_str().is_empty(),
        "{e}"
    );
    let e = err(json!({"properties": {"p": {"type": "string", "pattern": "(a)\\1"}}}));
    assert_eq!(e.pointer().as_str(), "/properties/p");
    let e = err(json!({"type": "integer", "minimum": 5, "maximum": 1}));
    assert!(matches!(e, SchemaError::Contradiction { .. }), "{e}");
    let e = err(json!({"type": "object", "required": ["x"], "additionalProperties": false}));
    assert!(matches!(e, SchemaError::Contradiction { .. }), "{e}");
    let e = err(json!({"$ref": "http://example.com/other.json"}));
    assert!(matches!(e, SchemaError::Ref { .. }), "{e}");
    // Overlapping branches whose complement cannot be written (a format).
    let e = err(
        json!({"oneOf": [{"type": "string", "format": "email"}, {"type": "string", "minLength": 3}]}),
    );
    assert!(matches!(e, SchemaError::OneOfOverlap { .. }), "{e}");
}

#[test]
fn annotations_are_ignored_and_lenient_warns() {
    let s = json!({"title": "t", "description": "d", "default": 1, "examples": [1], "$comment": "c", "deprecated": true, "readOnly": true, "x-vendor": 1, "type": "integer"});
    let c = schema::compile(&s, &SchemaOptions::default()).unwrap();
    assert!(c.warnings.is_empty());
    let s = json!({"type": "integer", "not": {"multipleOf": 0.5}});
    let o = SchemaOptions::default().lenient(true);
    let c = schema::compile(&s, &o).unwrap();
    assert_eq!(c.warnings.len(), 1);
    assert!(
        c.warnings[0].to_string().contains("\"not\""),
        "{}",
        c.warnings[0]
    );
    let o = SchemaOptions::default().coerce_one_of(true);
    let c = schema::compile(
        &json!({"oneOf": [{"type": "integer"}, {"type": "number"}]}),
        &o,
    )
    .unwrap();
    assert_eq!(c.warnings.len(), 1);
}

#[test]
fn typed_outputs_through_schemars() {
    #[derive(schemars::JsonSchema, serde::Deserialize, Debug, PartialEq)]
    #[allow(dead_code)]
    enum Shape {
        Circle { r: u32 },
        Square { side: u32 },
    }
    #[derive(schemars::JsonSchema, serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Order {
        id: u64,
        note: Option<String>,
        tags: Vec<String>,
        shape: Shape,
    }
    let schema = schema::schema_for_type::<Order>();
    let oracle = Oracle::new(&schema).unwrap();
    let c = schema::compile_type::<Order>(&SchemaOptions::default()).unwrap();
    let d = dfa(&c);
    let w = Walker::new(&d);
    let mut r = rng(3);
    let mut n = 0;
    for _ in 0..200 {
        let Some(t) = w.walk(&mut r, 40) else {
            continue;
        };
        let text = String::from_utf8(t).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert!(oracle.valid(&v), "{text}");
        let _: Order = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        n += 1;
    }
    assert!(n > 100);
    assert!(d.matches(br#"{"id":7,"note":null,"tags":["a"],"shape":{"Circle":{"r":2}}}"#));
}

#[test]
fn random_walks_validate() {
    let schemas = [
        json!({"type": "object", "properties": {"name": {"type": "string", "maxLength": 8}, "age": {"type": "integer", "minimum": 0, "maximum": 150}, "email": {"type": "string", "format": "email"}}, "required": ["name"]}),
        json!({"type": "array", "items": {"type": "number", "minimum": -2.5, "maximum": 7.25}, "maxItems": 4}),
        json!({"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}, "ip": {"type": "string", "format": "ipv6"}, "id": {"type": "string", "format": "uuid"}, "d": {"type": "string", "format": "duration"}}}),
        json!({"type": "object", "properties": {"u": {"type": "string", "format": "uri"}, "r": {"type": "string", "format": "uri-reference"}, "h": {"type": "string", "format": "hostname"}, "t": {"type": "string", "format": "time"}}}),
        json!({"type": "string", "pattern": "^[A-Z][a-z]*( [A-Z][a-z]*)*$", "maxLength": 12}),
        json!({"anyOf": [{"type": "string", "pattern": "x\\d"}, {"type": "integer", "multipleOf": 25}]}),
        json!({}),
    ];
    for s in schemas {
        let oracle = Oracle::new(&s).unwrap();
        for mode in [JsonMode::Strict, JsonMode::Compliant] {
            for ws in POLICIES {
                let c = schema::compile(&s, &opts(ws, mode)).unwrap();
                let d = dfa(&c);
                let w = Walker::new(&d);
                let mut r = rng(11);
                for _ in 0..60 {
                    let Some(t) = w.walk(&mut r, 50) else {
                        continue;
                    };
                    let text = String::from_utf8(t).expect("UTF-8");
                    let v: Value =
                        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
                    assert!(oracle.valid(&v), "{mode:?} {ws:?} {s}: {text}");
                }
            }
        }
    }
}

#[test]
fn example_schemas() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        seen += 1;
        let s: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !s.is_object() {
            continue; // e.g. tools.json, a list of tool definitions
        }
        if name.starts_with("unsupported") {
            let e = schema::compile(&s, &SchemaOptions::default()).unwrap_err();
            assert!(
                e.to_string()
                    .starts_with("unsupported keyword \"not\" at /properties/age: "),
                "{e}"
            );
            continue;
        }
        let oracle = Oracle::new(&s).unwrap();
        for ws in POLICIES {
            let c = schema::compile(&s, &opts(ws, JsonMode::Strict))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let d = dfa(&c);
            let w = Walker::new(&d);
            let mut r = rng(5);
            for _ in 0..50 {
                let Some(t) = w.walk(&mut r, 40) else {
                    continue;
                };
                let text = String::from_utf8(t).unwrap();
                let v: Value =
                    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {text}: {e}"));
                assert!(oracle.valid(&v), "{name}: {text}");
            }
        }
    }
    assert!(seen >= 4);
}

#[test]
fn deep_and_long_schemas_fail_cleanly() {
    // A chain of 500 definitions, each referring to the next.
    let mut defs = serde_json::Map::new();
    for i in 0..500 {
        defs.insert(format!("d{i}"), json!({"type": "object", "properties": {"a": {"$ref": format!("#/$defs/d{}", i + 1)}}, "required": ["a"]}));
    }
    defs.insert("d500".into(), json!({"type": "integer"}));
    let s = json!({"$defs": defs, "$ref": "#/$defs/d0"});
    assert!(matches!(
        schema::compile(&s, &SchemaOptions::default()),
        Err(SchemaError::TooBig { .. })
    ));
    // A circular allOf.
    let s = json!({"$defs": {"a": {"allOf": [{"$ref": "#/$defs/b"}]}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"});
    let _ = schema::compile(&s, &SchemaOptions::default()); // an error or an empty language, never a hang
                                                            // 60 nested objects compile (within the generator's nesting bound).
    let mut s = json!({"type": "integer"});
    for _ in 0..60 {
        s = json!({"type": "object", "properties": {"a": s}, "required": ["a"]});
    }
    schema::compile(&s, &SchemaOptions::default()).unwrap();
}

#[test]
fn many_optional_properties_in_order() {
    let mut props = serde_json::Map::new();
    for i in 0..120 {
        props.insert(format!("p{i:03}"), json!({"type": "integer"}));
    }
    let s = json!({"type": "object", "properties": props, "additionalProperties": false});
    let mut all = serde_json::Map::new();
    for i in (0..120).step_by(7) {
        all.insert(format!("p{i:03}"), json!(i));
    }
    check_modes(
        s,
        &[json!({}), json!({"p119": 1}), Value::Object(all)],
        &[json!({"p120": 1}), json!({"p001": "x"})],
        &[JsonMode::Strict],
    );
    // Declared order only (120 properties is past any_order_max_properties).
    let c = schema::compile(
        &json!({"type": "object", "properties": {"a": {}, "b": {}}, "additionalProperties": false}),
        &SchemaOptions::default(),
    )
    .unwrap();
    assert!(!dfa(&c).matches(br#"{"b":1,"a":2}"#));
}
