//! The boolean algebra of the schema compiler (`not`, `if`/`then`/`else`,
//! `dependentRequired`/`dependentSchemas`/`dependencies`, `contains`,
//! exactly-one `oneOf`), checked against the `jsonschema` crate:
//!
//! * listed instances: each expectation is first confirmed by the oracle,
//!   then matched against the DFA under every whitespace policy and mode;
//! * random walks of the DFA: every text it accepts parses and validates;
//! * random JSON values (valid and invalid) built from the schema's own
//!   names and constants: whatever the DFA accepts validates, and both
//!   outcomes occur (the test cannot pass vacuously).

mod schema_util;

use constrain::schema::{self, JsonMode, SchemaError, SchemaOptions};
use schema_util::logic::*;
use schema_util::*;
use serde_json::{json, Value};

#[test]
fn dependent_required_and_draft7_dependencies() {
    let s = json!({"type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
        "dependentRequired": {"a": ["b"]}});
    check(
        s,
        &[
            json!({}),
            json!({"b": "x"}),
            json!({"a": 1, "b": "x"}),
            json!({"a": 1, "b": "", "c": true}),
        ],
        &[json!({"a": 1}), json!({"a": 1, "c": false})],
    );
    let s = json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
        "properties": {"card": {"type": "string"}, "addr": {"type": "string"}},
        "dependencies": {"card": ["addr"]}});
    check(
        s,
        &[json!({"addr": "x"}), json!({"card": "1", "addr": "y"})],
        &[json!({"card": "1"})],
    );
    // Schema-form dependencies / dependentSchemas.
    let s = json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
        "properties": {"kind": {"type": "string"}, "n": {"type": "integer"}},
        "dependencies": {"kind": {"properties": {"n": {"minimum": 10}}, "required": ["n"]}}});
    check(
        s,
        &[json!({}), json!({"n": 1}), json!({"kind": "a", "n": 10})],
        &[json!({"kind": "a"}), json!({"kind": "a", "n": 9})],
    );
    let s = json!({"type": "object",
        "properties": {"kind": {"type": "string"}, "n": {"type": "integer"}},
        "required": ["kind"],
        "dependentSchemas": {"kind": {"properties": {"n": {"maximum": 3}}}}});
    check(
        s,
        &[json!({"kind": "a"}), json!({"kind": "a", "n": 3})],
        &[json!({"kind": "a", "n": 4}), json!({})],
    );
}

#[test]
fn if_then_else_is_exact() {
    let s = json!({"type": "object",
        "properties": {"mode": {"type": "string", "enum": ["a", "b"]}, "x": {"type": "integer"}},
        "required": ["mode"],
        "if": {"properties": {"mode": {"const": "a"}}},
        "then": {"required": ["x"]},
        "else": {"properties": {"x": {"maximum": 0}}}});
    check(
        s,
        &[
            json!({"mode": "a", "x": 5}),
            json!({"mode": "b"}),
            json!({"mode": "b", "x": -1}),
        ],
        &[json!({"mode": "a"}), json!({"mode": "b", "x": 1})],
    );
    // `if` over a scalar: numbers ≥ 10 must be even-tens... expressed as
    // ranges: if ≥ 10 then ≤ 20 else ≥ 0.
    let s = json!({"type": "integer", "if": {"minimum": 10}, "then": {"maximum": 20}, "else": {"minimum": 0}});
    check(
        s,
        &[json!(0), json!(9), json!(10), json!(20)],
        &[json!(-1), json!(21), json!(1.5)],
    );
    // `then` alone.
    let s = json!({"if": {"type": "string"}, "then": {"minLength": 2}});
    check(
        s,
        &[json!("ab"), json!(1), json!(null)],
        &[json!("a"), json!("")],
    );
}

#[test]
fn not_is_the_complement() {
    check(
        json!({"not": {"type": "integer"}}),
        &[json!(1.5), json!("1"), json!(null), json!([])],
        &[json!(1), json!(-3)],
    );
    check(
        json!({"not": {"enum": ["a", 1, null, true]}}),
        &[
            json!("b"),
            json!("ab"),
            json!(""),
            json!(2),
            json!(0.5),
            json!(false),
            json!({}),
        ],
        &[json!("a"), json!(1), json!(null), json!(true)],
    );
    check(
        json!({"type": "string", "not": {"minLength": 3}}),
        &[json!(""), json!("ab")],
        &[json!("abc")],
    );
    check(
        json!({"type": "object", "properties": {"a": {"type": "integer"}}, "not": {"required": ["a", "b"]}}),
        &[json!({}), json!({"a": 1})],
        &[json!({"a": 1, "b": 2})],
    );
    check(
        json!({"not": {"properties": {"x": {"type": "string"}}}}),
        &[json!({"x": 1}), json!({"x": null})],
        &[json!({}), json!({"x": "s"}), json!(1), json!("s")],
    );
    check(
        json!({"not": {"anyOf": [{"type": "string"}, {"type": "number"}]}}),
        &[json!(null), json!(true), json!([1])],
        &[json!("s"), json!(1), json!(2.5)],
    );
    check(
        json!({"not": {"allOf": [{"type": "number"}, {"minimum": 5}]}}),
        &[json!(4), json!("x"), json!(4.5)],
        &[json!(5), json!(7.5)],
    );
    check(
        json!({"not": {"not": {"type": "boolean"}}}),
        &[json!(true), json!(false)],
        &[json!(1), json!(null)],
    );
    check(
        json!({"type": "array", "not": {"items": {"type": "integer"}}}),
        &[json!(["a"]), json!([1, null])],
        &[json!([]), json!([1, 2])],
    );
    check(
        json!({"type": "array", "not": {"minItems": 2}}),
        &[json!([]), json!([1])],
        &[json!([1, 2])],
    );
    check(
        json!({"not": {"oneOf": [{"type": "integer"}, {"minimum": 2}]}}),
        &[json!(1.5), json!(-0.5), json!(3), json!(7)],
        &[json!(1), json!(2.5), json!("s")],
    );
    // Through a $ref.
    check(
        json!({"$defs": {"s": {"type": "string"}}, "not": {"$ref": "#/$defs/s"}}),
        &[json!(1), json!(null)],
        &[json!("x")],
    );
}

#[test]
fn one_of_is_exactly_one() {
    // Overlapping branches: integers are numbers, so only non-integers match.
    check(
        json!({"oneOf": [{"type": "integer"}, {"type": "number"}]}),
        &[json!(1.5), json!(-0.25)],
        &[json!(1), json!("x")],
    );
    check(
        json!({"type": "integer", "oneOf": [{"minimum": 5}, {"maximum": 10}]}),
        &[json!(11), json!(4)],
        &[json!(5), json!(10), json!(7)],
    );
    check(
        json!({"type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}),
        &[json!({"a": 1}), json!({"b": 2})],
        &[json!({"a": 1, "b": 2}), json!({})],
    );
    // coerce_one_of keeps compiling it as anyOf.
    let s = json!({"oneOf": [{"type": "integer"}, {"type": "number"}]});
    let o = SchemaOptions::default().coerce_one_of(true);
    let c = schema::compile(&s, &o).unwrap();
    assert_eq!(c.warnings.len(), 1);
    assert!(dfa(&c).matches(b"1"));
}

#[test]
fn contains_counts_matching_items() {
    check(
        json!({"type": "array", "contains": {"type": "string"}}),
        &[json!(["a"]), json!([1, "a", 2])],
        &[json!([]), json!([1, 2])],
    );
    check(
        json!({"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 5}, "minContains": 2, "maxContains": 3}),
        &[json!([5, 6]), json!([1, 5, 2, 6, 7])],
        &[json!([5]), json!([5, 6, 7, 8]), json!([1, 2])],
    );
    check(
        json!({"type": "array", "contains": {"const": 1}, "minContains": 0, "maxContains": 1}),
        &[json!([]), json!([2]), json!([1, 2])],
        &[json!([1, 1])],
    );
}

#[test]
fn limits_and_unsupported_complements_name_not_and_pointer() {
    let e = schema::compile(
        &json!({"properties": {"a": {"not": {"format": "email"}}}}),
        &SchemaOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(e, SchemaError::UnsupportedValue { .. }), "{e}");
    assert!(e.to_string().contains("\"not\""), "{e}");
    assert_eq!(e.pointer().as_str(), "/properties/a");
    assert!(e.to_string().contains("(at /properties/a/not)"), "{e}");
    // A recursive $ref under `not` cannot be cut.
    let e = schema::compile(
        &json!({"$defs": {"t": {"type": "object", "properties": {"c": {"$ref": "#/$defs/t"}}}},
                "not": {"$ref": "#/$defs/t"}}),
        &SchemaOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            SchemaError::TooBig {
                knob: "max_depth",
                ..
            }
        ),
        "{e}"
    );
    // The complement's size is bounded by max_branches.
    let e = schema::compile(
        &json!({"not": {"required": ["a", "b", "c", "d"]}}),
        &SchemaOptions::default().max_branches(3),
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            SchemaError::TooBig {
                knob: "max_branches",
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("\"not\""), "{e}");
}

#[test]
fn property_names_filter_declared_and_extra_keys() {
    // Declared names: those failing propertyNames are never written.
    check_in(
        json!({"type": "object", "properties": {"ab": {"type": "integer"}, "abcd": {"type": "integer"}},
               "propertyNames": {"maxLength": 3}}),
        &[
            json!({}),
            json!({"ab": 1}),
            json!({"x": [1]}),
            json!({"ab": 1, "abc": null}),
        ],
        &[json!({"abcd": 1}), json!({"long": 1})],
        &[JsonMode::Compliant],
    );
    // Extra keys take the name schema's language.
    check(
        json!({"type": "object", "additionalProperties": {"type": "integer"},
               "propertyNames": {"pattern": "^[a-z]+$"}}),
        &[json!({}), json!({"abc": 1}), json!({"x": 2})],
        &[json!({"A": 1}), json!({"1": 1}), json!({"abc": "s"})],
    );
    // An enum of names: each one an optional key.
    check(
        json!({"type": "object", "additionalProperties": {"type": "boolean"},
               "propertyNames": {"enum": ["ID", "BeforeID"]}}),
        &[
            json!({}),
            json!({"ID": true}),
            json!({"ID": true, "BeforeID": false}),
        ],
        &[json!({"Other": true}), json!({"ID": 1})],
    );
    // `false`: only the empty object.
    check(
        json!({"type": "object", "propertyNames": false}),
        &[json!({})],
        &[json!({"a": 1})],
    );
}

#[test]
fn pattern_algebra_through_product_automata() {
    // not: {pattern}: the complement among strings.
    check(
        json!({"type": "string", "not": {"pattern": "a1"}}),
        &[json!(""), json!("a"), json!("1a"), json!("é1")],
        &[json!("a1"), json!("xa1y"), json!(3)],
    );
    // Two patterns on one string: their intersection.
    check(
        json!({"type": "string", "pattern": "^a", "allOf": [{"pattern": "b$"}]}),
        &[json!("ab"), json!("axb")],
        &[json!("a"), json!("b"), json!("ba")],
    );
    // propertyNames: {not: {pattern}}.
    check_in(
        json!({"type": "object", "propertyNames": {"not": {"pattern": "a1"}}}),
        &[json!({}), json!({"b": 1}), json!({"a": 1, "1": 2})],
        &[json!({"a1": 1}), json!({"xa1": 1})],
        &[JsonMode::Compliant],
    );
    // Non-integers within bounds (oneOf over integer/number).
    check(
        json!({"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0, "maximum": 10}]}),
        &[json!(1.5), json!(9.75), json!(0.001), json!(-4), json!(12)],
        &[json!(1), json!(10), json!(11.5), json!(-0.5)],
    );
    // A bounded product: the error names the knob and the pointer.
    let e = schema::compile(
        &json!({"properties": {"s": {"type": "string", "not": {"pattern": "^[a-z]{3,9}[0-9]{2}$"}}}}),
        &SchemaOptions::default().max_product_states(4),
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            SchemaError::TooBig {
                knob: "max_product_states",
                ..
            }
        ),
        "{e}"
    );
    assert!(e.pointer().as_str().starts_with("/properties/s"), "{e}");
}

#[test]
fn unique_items_over_finite_item_languages() {
    check(
        json!({"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": true}),
        &[
            json!([]),
            json!(["a"]),
            json!(["c", "a"]),
            json!(["b", "c", "a"]),
        ],
        &[json!(["a", "a"]), json!(["a", "b", "a"]), json!(["d"])],
    );
    check(
        json!({"type": "array", "items": {"type": "boolean"}, "uniqueItems": true, "minItems": 1}),
        &[json!([true]), json!([false, true])],
        &[json!([]), json!([true, true])],
    );
    check(
        json!({"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 4}, "uniqueItems": true, "maxItems": 2}),
        &[json!([1, 4]), json!([3])],
        &[json!([2, 2]), json!([1, 2, 3]), json!([5])],
    );
    // Too many values: narrowed to the listed order, with a warning naming
    // the knob...
    let c = schema::compile(
        &json!({"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "uniqueItems": true}),
        &SchemaOptions::default(),
    )
    .unwrap();
    assert!(
        c.warnings
            .iter()
            .any(|w| w.message.contains("max_unique_values")),
        "{:?}",
        c.warnings
    );
    // ... and where the counts ask for what the listed order cannot promise
    // (two items or more), an error naming the knob.
    let e = schema::compile(
        &json!({"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "uniqueItems": true, "minItems": 2}),
        &SchemaOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            SchemaError::TooBig {
                knob: "max_unique_values",
                ..
            }
        ),
        "{e}"
    );
}

// ------------------------------------------------------------------
// Regressions from MaskBench dev files, each a minimal schema.

#[test]
fn overlapping_pattern_properties_meet_every_matching_schema() {
    // Github_easy---o67010: several patternProperties with real schemas.
    check(
        json!({
            "type": "object",
            "definitions": {"login": {"type": "object", "properties": {"u": {"type": "string"}},
                                      "required": ["u"], "additionalProperties": false}},
            "patternProperties": {"^fritzbox(\\..*)?$": {"$ref": "#/definitions/login"},
                                  "^influx(\\..*)?$": {"$ref": "#/definitions/login"}}
        }),
        &[
            json!({}),
            json!({"fritzbox": {"u": "a"}}),
            json!({"influx.x": {"u": ""}}),
        ],
        &[
            json!({"fritzbox": {}}),
            json!({"influx": 3}),
            json!({"fritzbox.1": {"u": 1}}),
        ],
    );
    // Overlapping patterns and a declared key matching both.
    check(
        json!({
            "type": "object",
            "properties": {"ab": {"maximum": 10}},
            "patternProperties": {"^a": {"type": "integer"}, "b$": {"type": ["number", "string"], "minimum": 0}},
            "additionalProperties": {"type": "string"}
        }),
        &[
            json!({"ab": 5}),
            json!({"a1": -3}),
            json!({"xb": 3.5}),
            json!({"xb": "s"}),
            json!({"q": "s", "axb": 0}),
        ],
        &[
            json!({"ab": 11}),
            json!({"ab": -1}),
            json!({"ab": 1.5}),
            json!({"a1": "x"}),
            json!({"q": 1}),
            json!({"axb": -1}),
            json!({"xb": -2}),
        ],
    );
}

#[test]
fn compliant_contradictions_are_empty_languages() {
    // Github_easy---o81530: an optional property whose bounds contradict.
    check_in(
        json!({"type": "object", "properties": {
            "r": {"type": "integer", "minimum": 5, "maximum": 2},
            "s": {"type": ["string", "null"], "minLength": 3, "maxLength": 1}}}),
        &[json!({}), json!({"x": 1}), json!({"s": null})],
        &[json!({"r": 3}), json!({"r": 5}), json!({"s": "ab"})],
        &[JsonMode::Compliant],
    );
    // Strict generation keeps the error.
    let e = schema::compile(
        &json!({"type": "integer", "minimum": 5, "maximum": 2}),
        &SchemaOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(e, SchemaError::Contradiction { .. }), "{e}");
}

#[test]
fn compliant_mode_ignores_misspelt_keywords_like_validators() {
    // Github_easy---o36222 (`maxlength`), o89608 (`requires`).
    check_in(
        json!({"type": "object", "properties": {"p": {"type": "string", "maxlength": 3}},
               "requires": ["p"]}),
        &[json!({}), json!({"p": "abcdef"})],
        &[json!({"p": 1})],
        &[JsonMode::Compliant],
    );
    let e = schema::compile(
        &json!({"type": "string", "maxlength": 3}),
        &SchemaOptions::default().allow_unknown_keywords(true),
    )
    .unwrap_err();
    assert!(matches!(e, SchemaError::Unknown { .. }), "{e}");
}

#[test]
fn pattern_with_length_bounds_is_exact_by_product() {
    // Github_easy---o10013: an unanchored pattern with an exact length.
    check(
        json!({"type": "string", "pattern": "[0-9a-fA-F]+", "minLength": 12, "maxLength": 12}),
        &[
            json!("0123456789ab"),
            json!("zz01234567zz"),
            json!("zzzzzzzzzzzA"),
        ],
        &[
            json!("0123456789a"),
            json!("zzzzzzzzzzzz"),
            json!("0123456789abc"),
        ],
    );
    // Used to be narrowed (open repetitions capped): now every fitting
    // string is offered.
    check(
        json!({"type": "string", "pattern": "^[a-z]+(-[a-z]+)*$", "maxLength": 5}),
        &[json!("ab-cd"), json!("a-b-c"), json!("abcde"), json!("a")],
        &[json!("ab-cde"), json!("-ab"), json!(""), json!("abcdef")],
    );
}

#[test]
fn compliant_free_form_objects_nest_as_deep_as_free_form_values() {
    // Github_easy---o14464: `{"type": "object"}` holding a nested document.
    check_in(
        json!({"type": "object", "properties": {"schema": {"type": "object"}}}),
        &[
            json!({"schema": {"properties": {"p": {"type": "string"}}}}),
            json!({"schema": {"a": [1, {"b": 2}]}}),
        ],
        &[json!({"schema": 1}), json!({"schema": []})],
        &[JsonMode::Compliant],
    );
}

#[test]
fn recursion_unrolls_less_deep_to_fit_the_regex_limit() {
    // Github_hard---o21156: a recursive definition referenced from many
    // properties repeats its unrolled text past `max_regex_len`.
    let schema = json!({
        "$defs": {"t": {"type": "object", "properties": {
            "a": {"$ref": "#/$defs/t"}, "b": {"$ref": "#/$defs/t"}, "n": {"type": "integer"}}}},
        "$ref": "#/$defs/t"
    });
    let len_at = |d: usize| {
        schema::compile(&schema, &SchemaOptions::default().max_depth(d))
            .unwrap()
            .regex
            .len()
    };
    let (shallow, deep) = (len_at(1), len_at(3));
    assert!(shallow < deep);
    let o = SchemaOptions::default().max_regex_len(shallow);
    let c = schema::compile(&schema, &o).unwrap();
    assert_eq!(c.regex.len(), shallow);
    assert!(
        c.warnings
            .iter()
            .any(|w| w.message.contains("unrolled to depth 1")),
        "{:?}",
        c.warnings
    );
    let d = dfa(&c);
    let oracle = Oracle::new(&schema).unwrap();
    for v in [json!({"a": {"n": 1}}), json!({"b": {}, "n": 2})] {
        assert!(oracle.valid(&v));
        assert!(d.matches(compact(&v).as_bytes()), "{v}");
    }
    // Deeper nesting is no longer offered (sound), and bad values never are.
    for v in [json!({"a": {"a": {"a": {}}}}), json!({"n": "x"})] {
        assert!(!d.matches(compact(&v).as_bytes()), "{v}");
    }
    let w = Walker::new(&d);
    let mut r = rng(3);
    for _ in 0..200 {
        if let Some(t) = w.walk(&mut r, 60) {
            let v: Value = serde_json::from_str(std::str::from_utf8(&t).unwrap()).unwrap();
            assert!(oracle.valid(&v), "{v}");
        }
    }
    // Under a limit that not even depth 0 fits: the error names the knob.
    let e = schema::compile(&schema, &SchemaOptions::default().max_regex_len(10)).unwrap_err();
    assert!(
        matches!(
            e,
            SchemaError::TooBig {
                knob: "max_regex_len",
                ..
            }
        ),
        "{e}"
    );
}

/// `allOf` of object schemas: a key that one side matches with a pattern
/// and the other side neither declares nor matches must pass the other
/// side's `additionalProperties`; a pattern both sides name takes both
/// schemas (llguidance's `test_json_pattern_properties` cases).
#[test]
fn all_of_pattern_properties_meet_the_other_sides_additional_properties() {
    check(
        json!({"allOf": [{"additionalProperties": false},
                         {"patternProperties": {"^f": {"type": "integer"}}}]}),
        &[json!({})],
        &[json!({"foo": 42}), json!({"bar": 1})],
    );
    check(
        json!({"allOf": [{"patternProperties": {"^f": {"type": "integer", "minimum": 0}}},
                         {"patternProperties": {"^f": {"type": "integer", "maximum": 3}}}]}),
        &[json!({"foo": 0}), json!({"foo": 3, "fox": 1})],
        &[
            json!({"foo": 4}),
            json!({"foo": -1}),
            json!({"fox": 1, "foo": 5}),
        ],
    );
    check(
        json!({"allOf": [{"properties": {"fa": {}},
                          "patternProperties": {"^g": {}},
                          "additionalProperties": {"type": "string"}},
                         {"patternProperties": {"^f": {"type": "integer"}}}]}),
        &[json!({"fa": 1}), json!({"g": 2}), json!({"x": "y"})],
        &[json!({"fb": 1}), json!({"fa": "x"}), json!({"x": 1})],
    );
}

/// `propertyNames` beside `patternProperties`: every key is in the name
/// language, and a key takes the schemas of the patterns it matches (else
/// `additionalProperties`); a finite name set becomes declared keys.
#[test]
fn property_names_with_pattern_properties() {
    check(
        json!({"type": "object", "propertyNames": {"maxLength": 3},
               "patternProperties": {"^a": {"type": "integer"}}}),
        &[json!({"ab": 1}), json!({})],
        &[json!({"abcd": 1}), json!({"ab": "x"})],
    );
    check(
        json!({"type": "object", "propertyNames": {"pattern": "^[a-z]+$"},
               "patternProperties": {"^a": {"type": "integer"}, "b$": {"maximum": 3}},
               "additionalProperties": {"type": "string"}}),
        &[json!({"ab": 1, "c": "x"}), json!({"ab": 2})],
        &[
            json!({"ab": 1, "c": 2}),
            json!({"aB": 1}),
            json!({"C": "x"}),
            json!({"ab": 4}),
        ],
    );
    check(
        json!({"type": "object", "propertyNames": {"enum": ["ab", "c", "d"]},
               "patternProperties": {"^a": {"type": "integer"}},
               "additionalProperties": {"type": "string"}, "required": ["ab"]}),
        &[json!({"ab": 1, "c": "x"}), json!({"ab": 1})],
        &[
            json!({"ab": "x"}),
            json!({"e": "x", "ab": 1}),
            json!({"c": "x"}),
        ],
    );
}
