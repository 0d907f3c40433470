//! Regression tests for MaskBench dev files that used to fail,
//! each reduced from the named file and checked against the `jsonschema`
//! oracle with valid and invalid instances (the harness of
//! `schema_util::logic`: listed instances confirmed by the oracle, then
//! random walks and random values checked for soundness, in both modes and
//! every whitespace policy).

mod schema_util;

use schema_util::logic::*;
use schema_util::*;
use serde_json::{json, Value};

/// `s` compiled in strict mode, compact whitespace, with a warning whose
/// message holds every one of `needles`.
fn strict_with_warning(s: &Value, needles: &[&str]) -> constrain::schema::CompiledSchema {
    let c = constrain::schema::compile(
        s,
        &opts(
            constrain::schema::Whitespace::Compact,
            constrain::schema::JsonMode::Strict,
        ),
    )
    .unwrap();
    assert!(
        c.warnings
            .iter()
            .any(|w| needles.iter().all(|n| w.message.contains(n))),
        "{:?}",
        c.warnings.iter().map(|w| &w.message).collect::<Vec<_>>()
    );
    c
}

/// `Synthesized---draft2019_09_nonvalid_maxProperties_id1_subschema1_not_2`:
/// an `enum` object under `not: {not: {maxProperties}}` is decided by
/// validating the listed value (was "enum/const values together with array
/// or object keywords").
#[test]
fn enum_objects_under_not_are_validated_value_by_value() {
    check(
        json!({"allOf": [{"enum": [{"foo": 1}, {"foo": 1, "bar": 2, "baz": 3}]},
                         {"not": {"not": {"maxProperties": 2}}}]}),
        &[json!({"foo": 1})],
        &[
            json!({"foo": 1, "bar": 2, "baz": 3}),
            json!({"foo": 1, "bar": null}),
            json!({"foo": 2}),
        ],
    );
}

/// `Synthesized---draft2019_09_valid_patternProperties_id3_subschema1_not_2`:
/// the complement of `patternProperties` is never needed when the node is
/// an `enum` (was "the complement of patternProperties is not supported").
#[test]
fn enum_objects_decide_a_not_pattern_properties() {
    check(
        json!({"allOf": [{"enum": [{"foo": "bar", "fooooo": 2}, {"foo": 1, "fooooo": 2}]},
                         {"not": {"patternProperties": {"f.*o": {"type": "integer"}}}}]}),
        &[json!({"foo": "bar", "fooooo": 2})],
        &[
            json!({"foo": 1, "fooooo": 2}),
            json!({"foo": "bar", "fooooo": 3}),
        ],
    );
}

/// `Handwritten---key5`: array `enum`s intersected through `allOf` and
/// `$ref`, with `if`/`then`/`else` on `minItems`.
#[test]
fn enum_arrays_with_if_then_else_and_refs() {
    check(
        json!({"type": "array",
               "allOf": [{"$ref": "#/definitions/x"}, {"$ref": "#/definitions/y"}],
               "if": {"minItems": 1}, "then": {"minItems": 2}, "else": {"minItems": 1},
               "definitions": {
                   "x": {"enum": [[1], [1, 2], [2, 3], [1, 2, 3], []]},
                   "y": {"enum": [[1], [1, 2], [2, 3], [3]]}}}),
        &[json!([1, 2]), json!([2, 3])],
        &[json!([1]), json!([]), json!([1, 2, 3]), json!([3])],
    );
}

/// `oneOf` over `enum` values with array and object keywords: exactly one
/// branch must hold for each listed value.
#[test]
fn enum_under_one_of_counts_matching_branches() {
    check(
        json!({"enum": [[1, 2], [1], [1, 1], [2], {"a": 1}, {"a": 1, "b": 2}, {"b": 1}, "s"],
               "oneOf": [{"type": "array", "minItems": 2},
                         {"type": "array", "items": {"const": 1}},
                         {"type": "object", "required": ["b"]},
                         {"type": "object", "maxProperties": 1}]}),
        &[
            json!([1, 2]),
            json!([1]),
            json!({"a": 1}),
            json!({"a": 1, "b": 2}),
        ],
        &[json!([1, 1]), json!([2]), json!({"b": 1}), json!("s")],
    );
}

/// `uniqueItems`, `contains`, dependencies and a `not` over `propertyNames`
/// (whose complement is unsupported), each decided per listed value.
#[test]
fn enum_with_uniqueness_contains_and_dependencies() {
    check(
        json!({"enum": [[1, 1], [1, 2], [2, 3], {"a": 1}, {"a": 1, "b": 2}, {"b": 1}],
               "uniqueItems": true,
               "contains": {"const": 2},
               "dependentRequired": {"a": ["b"]},
               "not": {"type": "object", "propertyNames": {"maxLength": 0}}}),
        &[
            json!([1, 2]),
            json!([2, 3]),
            json!({"a": 1, "b": 2}),
            json!({"b": 1}),
        ],
        &[json!([1, 1]), json!({"a": 1}), json!({})],
    );
}

/// `Github_easy---o74185`: `oneOf` over two closed objects
/// (`additionalProperties: false`) overlapping only at `{}`. Exactly-one
/// needs the complement of `additionalProperties` ("some key outside the
/// declared ones"), which against a closed branch is an `anyOf` of its
/// other keys (was "the complement of additionalProperties is not
/// supported").
#[test]
fn one_of_closed_objects_uses_the_complement_of_additional_properties() {
    check(
        json!({"type": "object",
               "oneOf": [{"$ref": "#/definitions/add"}, {"$ref": "#/definitions/replace"}],
               "definitions": {
                   "add": {"type": "object",
                           "properties": {"delete": {"type": "array", "minItems": 1,
                                                     "items": {"type": "string"}},
                                          "set": {"type": "object", "minProperties": 1}},
                           "additionalProperties": false},
                   "replace": {"type": "object", "properties": {"replace": {"type": "object"}},
                               "additionalProperties": false}}}),
        &[
            json!({"set": {"a": 1}}),
            json!({"replace": {}}),
            json!({"delete": ["x"], "set": {"a": 1}}),
            json!({"delete": ["x"]}),
        ],
        &[
            json!({}),
            json!({"set": {"a": 1}, "replace": {}}),
            json!({"x": 1}),
            json!({"delete": []}),
        ],
    );
}

/// `not` over an object with `additionalProperties: false` inside a closed
/// object: some declared key outside the negated schema's names must be
/// present; with open keys (compliant mode, no `additionalProperties`) one
/// witness key is offered, and where none can be written it is an error
/// naming `not`.
#[test]
fn not_additional_properties_needs_closed_keys() {
    check(
        json!({"type": "object",
               "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
                              "c": {"type": "string"}},
               "additionalProperties": false,
               "not": {"properties": {"a": {}}, "additionalProperties": {"type": "integer"}}}),
        &[json!({"c": "x"}), json!({"a": 1, "c": "y"})],
        &[json!({}), json!({"a": 1}), json!({"a": 1, "b": 2})],
    );
    // Open keys: one witness key (a sound narrowing, with a warning).
    check_in(
        json!({"type": "object", "not": {"additionalProperties": false}}),
        &[json!({"a": 1})],
        &[json!({})],
        &[constrain::schema::JsonMode::Compliant],
    );
    // Open keys, but no key the object may write is of the kind: an error
    // naming `not`.
    let none = json!({"type": "object", "additionalProperties": false,
                      "patternProperties": {"^a$": true},
                      "not": {"patternProperties": {"^b$": false}}});
    let e = constrain::schema::compile(
        &none,
        &schema_util::opts(
            constrain::schema::Whitespace::Compact,
            constrain::schema::JsonMode::Compliant,
        ),
    )
    .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("\"not\"") && msg.contains("no witness key"),
        "{msg}"
    );
}

/// Strict mode writes a required name it does not declare; such a key is an
/// extra key for the complement of `additionalProperties`, like a declared
/// one.
#[test]
fn strict_required_undeclared_key_counts_as_extra() {
    check_in(
        json!({"type": "object", "properties": {"a": {"type": "integer"}},
               "required": ["a", "z"],
               "not": {"properties": {"a": {}}, "additionalProperties": false}}),
        &[json!({"a": 1, "z": 2})],
        &[json!({"a": 1}), json!({"z": 1})],
        &[constrain::schema::JsonMode::Strict],
    );
}

/// Review finds: where the evaluator cannot tell, a listed value is not
/// kept. Either the schema fails closed or the instance the oracle rejects
/// is not matched, in every mode and whitespace policy.
fn never_accepts(schema: Value, invalid: Value) {
    let oracle = Oracle::new(&schema).expect("oracle compiles the schema");
    assert!(
        !oracle.valid(&invalid),
        "test data: {invalid} is valid for {schema}"
    );
    for &mode in &MODES {
        for ws in POLICIES {
            let Ok(c) = constrain::schema::compile(&schema, &opts(ws, mode)) else {
                continue;
            };
            let t = render(&invalid, ws);
            assert!(
                !dfa(&c).matches(t.as_bytes()),
                "{mode:?} {ws:?}: {t} must not match {schema}"
            );
        }
    }
}

/// A `patternProperties` pattern the regex engine cannot run (`\b`) may
/// apply to a listed object's key: its schema must still be met.
#[test]
fn an_unrunnable_pattern_does_not_let_a_listed_object_skip_its_schema() {
    never_accepts(
        json!({"enum": [{"a": 1}], "patternProperties": {"\\ba": {"type": "string"}}}),
        json!({"a": 1}),
    );
    never_accepts(
        json!({"enum": [{"a": 1}], "patternProperties": {"\\ba": {"type": "string"}},
               "additionalProperties": {"type": "integer"}}),
        json!({"a": 1}),
    );
}

/// Bounds from an integer `format` narrow generation, but validators ignore
/// the format: under `not` they must not make a listed value pass.
#[test]
fn integer_format_bounds_under_not_do_not_keep_a_listed_value() {
    never_accepts(
        json!({"enum": [3000000000u64], "not": {"type": "integer", "format": "int32"}}),
        json!(3000000000u64),
    );
}

/// The same without a list: the complement of an integer range that came
/// from a `format` must not offer integers outside it.
#[test]
fn integer_format_bounds_under_not_are_not_complemented() {
    never_accepts(
        json!({"not": {"type": "integer", "format": "int32"}}),
        json!(3000000000u64),
    );
}

/// `Github_medium---o26217`: `oneOf` over two objects whose `props` differ,
/// one of them open (no `additionalProperties`): exactly-one needs the
/// complement of `additionalProperties` over open keys (was "the complement
/// of additionalProperties (the object's keys are open) is not supported").
#[test]
fn one_of_with_an_open_branch_compiles_exactly_one() {
    check(
        json!({"type": "object",
               "properties": {"title": {"type": "string"}, "description": {"type": "string"},
                              "children": {"type": "array", "items": {"oneOf": [
                                  {"$ref": "#/definitions/stage"},
                                  {"$ref": "#/definitions/teaser"}]}}},
               "additionalProperties": false,
               "required": ["title", "description", "children"],
               "definitions": {
                   "stage": {"properties": {
                                 "type": {"type": "string", "enum": ["stage"]},
                                 "props": {"properties": {"title": {"type": "string"},
                                                          "description": {"type": "string"}},
                                           "additionalProperties": false,
                                           "required": ["title", "description"]}},
                             "required": ["type", "props"]},
                   "teaser": {"properties": {
                                  "type": {"type": "string", "enum": ["teaser"]},
                                  "props": {"properties": {"children": {"type": "array",
                                      "items": {"properties": {"title": {"type": "string"},
                                                               "description": {"type": "string"},
                                                               "reference": {"type": "string"}},
                                                "additionalProperties": false,
                                                "required": ["title", "description", "reference"]}}}}},
                              "additionalProperties": false,
                              "required": ["type", "props"]}}}),
        &[json!({"title": "t", "description": "d", "children": [
            {"type": "stage", "props": {"title": "a", "description": "b"}},
            {"type": "teaser", "props": {"children": [
                {"title": "x", "description": "y", "reference": "r"}]}}]})],
        &[
            json!({"title": "t", "description": "d", "children": [
                {"type": "stage", "props": {"children": []}}]}),
            json!({"title": "t", "description": "d", "children": [
                {"type": "stage", "props": {"title": "a", "description": "b", "x": "y"}}]}),
        ],
    );
}

/// `Handwritten---existsName1`: `not: {propertyNames: {not: {const: "0"}}}`
/// is "some key named `0`" (was "the complement of propertyNames is not
/// supported").
#[test]
fn not_property_names_requires_a_key_of_the_kind() {
    check(
        json!({"type": "object", "not": {"propertyNames": {"not": {"const": "0"}}}}),
        &[json!({"0": true})],
        &[json!({}), json!({"a": 1}), json!([])],
    );
}

/// `Handwritten---notnames1`: the same with `patternProperties` giving the
/// witness key's value its schema.
#[test]
fn not_property_names_meets_pattern_properties() {
    check(
        json!({"type": "object", "not": {"propertyNames": {"not": {"const": "0"}}},
               "patternProperties": {"\\d": {"type": "boolean"}}}),
        &[json!({"0": true})],
        &[json!({"0": 1}), json!({"1": true}), json!({})],
    );
}

/// `Handwritten---pNameFalse`: `not: {propertyNames: false}` is exactly "at
/// least one key" (the dev file's valid instance uses an arbitrary key).
#[test]
fn not_property_names_false_is_some_key() {
    check(
        json!({"type": "object", "not": {"propertyNames": false}}),
        &[json!({"key": "value"}), json!({"a": 1, "b": [2]})],
        &[json!({}), json!("key")],
    );
}

/// `Handwritten---oneofpr1`: `oneOf` whose branches hold `not:
/// {patternProperties}` (some key matching the pattern with a value outside
/// its schema; was "the complement of patternProperties is not supported").
#[test]
fn one_of_over_not_pattern_properties() {
    check(
        json!({"type": "object", "oneOf": [
                 {"allOf": [{"patternProperties": {"a": {"$ref": "#/definitions/inside1"}}},
                            {"not": {"patternProperties": {"a": {"not": {"$ref": "#/definitions/inside2"}}}}}]},
                 {"allOf": [{"patternProperties": {"b": {"$ref": "#/definitions/inside2"}}},
                            {"not": {"patternProperties": {"b": {"not": {"$ref": "#/definitions/inside1"}}}}}]}],
               "definitions": {
                   "inside1": {"type": "object",
                               "not": {"properties": {"c": {"not": {"type": "string", "pattern": "99"}}}}},
                   "inside2": {"type": "object",
                               "properties": {"c": {"type": "string", "pattern": "77"}}}}}),
        &[json!({"a": {"c": "9977"}})],
        &[
            json!({"ab": {"c": "9977"}}),
            json!({"a": {"c": "99"}}),
            json!({}),
        ],
    );
}

/// Closed keys: the complement of `patternProperties` picks among the
/// declared keys that match (exact, no witness).
#[test]
fn not_pattern_properties_over_closed_keys() {
    check(
        json!({"type": "object",
               "properties": {"ab": {"type": "integer"}, "b": {"type": "integer"},
                              "c": {"type": "integer"}},
               "additionalProperties": false,
               "not": {"patternProperties": {"^a": {"minimum": 5}}}}),
        &[json!({"ab": 1}), json!({"ab": 2, "b": 9})],
        &[json!({"ab": 7}), json!({"b": 1}), json!({})],
    );
}

/// `Handwritten---allany6`: `not: {multipleOf}` in a bounded range is the
/// range minus the enumerated multiples (was "the complement of
/// multipleOf is not supported").
#[test]
fn not_multiple_of_in_a_bounded_range() {
    check(
        json!({"type": "number",
               "allOf": [{"minimum": -4000}, {"maximum": -3000}, {"minimum": -10000},
                         {"maximum": -2000}, {"$ref": "#/definitions/any1"},
                         {"$ref": "#/definitions/any2"}, {"$ref": "#/definitions/any3"},
                         {"not": {"multipleOf": 8}}],
               "definitions": {
                   "any1": {"anyOf": [{"multipleOf": 33}, {"multipleOf": 12}, {"multipleOf": 77}]},
                   "any2": {"anyOf": [{"allOf": [{"not": {"multipleOf": 6}}, {"not": {"multipleOf": 7}}]},
                                      {"multipleOf": 35}]},
                   "any3": {"anyOf": [{"not": {"multipleOf": 11}}, {"multipleOf": 7}]}}}),
        &[json!(-3780)],
        &[json!(-3360), json!(-3001), json!(-4200), json!(-3780.5)],
    );
}

/// `not: {multipleOf: 5}` over all numbers: the non-integers and the
/// integers whose last digit is not 0 or 5 (at most 15 digits); `7`, which
/// divides no power of ten, over an unbounded range is narrowed to a window
/// (`max_enumerated_multiples` integers) with a warning.
#[test]
fn not_multiple_of_unbounded() {
    check(
        json!({"type": "number", "not": {"multipleOf": 5}}),
        &[json!(1), json!(8), json!(-6), json!(1.5), json!(101)],
        &[json!(5), json!(-15), json!(0), json!(700), json!("x")],
    );
    check(
        json!({"type": "integer", "minimum": 0, "maximum": 50, "not": {"multipleOf": 3}}),
        &[json!(1), json!(2), json!(49)],
        &[json!(0), json!(3), json!(48), json!(51), json!(1.5)],
    );
    // 7 divides no power of ten: over an unbounded range the non-multiples
    // are narrowed to a window around 0, with a warning naming the keyword.
    check(
        json!({"type": "integer", "not": {"multipleOf": 7}}),
        &[json!(1), json!(-8), json!(2000)],
        &[json!(0), json!(7), json!(-14), json!(1.5)],
    );
    let c = constrain::schema::compile(
        &json!({"type": "integer", "not": {"multipleOf": 7}}),
        &schema_util::opts(
            constrain::schema::Whitespace::Compact,
            constrain::schema::JsonMode::Compliant,
        ),
    )
    .unwrap();
    assert!(
        c.warnings
            .iter()
            .any(|w| w.message.contains("not multipleOf 7")
                && w.message.contains("narrowed")
                && w.pointer.0 == "/not"),
        "{:?}",
        c.warnings
    );
    let d = dfa(&c);
    assert!(d.matches(b"2047") && !d.matches(b"2048") && !d.matches(b"2044"));
}

/// A fractional `multipleOf` under `not` fails closed, naming `not` and
/// where (`Synthesized---draft2019_09_valid_multipleOf_id8_subschema1_not_2`
/// without its `enum`).
#[test]
fn not_fractional_multiple_of_is_an_error() {
    let s = json!({"type": "number", "not": {"multipleOf": 0.0001}});
    let e = constrain::schema::compile(
        &s,
        &schema_util::opts(
            constrain::schema::Whitespace::Compact,
            constrain::schema::JsonMode::Compliant,
        ),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("\"not\"") && e.contains("fractional") && e.contains("/not"),
        "{e}"
    );
}

/// `Handwritten---oneof9` (found by the soak): `not {required:
/// [k]}` holds only for objects without `k` — a number satisfies `required`
/// vacuously, so the `not` rejects it. The shortcut for this form used to
/// forbid the key without leaving out the non-objects, so `21`, `true` and
/// strings were generated and failed validation.
#[test]
fn not_required_rejects_non_objects() {
    check(
        json!({"oneOf": [
            {"anyOf": [{"required": ["x"], "not": {"required": ["error"]}},
                       {"required": ["error"], "not": {"required": ["x"]}}]},
            {"type": "object", "dependencies": {"x": {"not": {"required": ["error"]}}},
             "minProperties": 1}]}),
        &[json!({"y": 1}), json!({"z": [1], "w": null})],
        &[
            json!(21),
            json!(true),
            json!("a"),
            json!(null),
            json!([]),
            json!({"x": 1}),
            json!({"error": 1}),
            json!({}),
        ],
    );
    check(
        json!({"not": {"required": ["error"]}}),
        &[json!({}), json!({"a": 1})],
        &[json!(21), json!("s"), json!({"error": null})],
    );
}

/// `dependencies {d: {oneOf: [...]}}` (Glaiveai2K---calculate_area_f5e0f7db,
/// found by the soak): with `d` present both branches require `d`, so
/// "a key the other branch requires that this one never writes" does not
/// prove them disjoint. An object with `d` and no `s` matches both branches
/// and must be rejected.
#[test]
fn one_of_under_dependencies_is_not_disjoint_by_the_trigger_key() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "number"}},
        "dependencies": {"d": {"oneOf": [
            {"properties": {"s": {"const": "x"}}},
            {"properties": {"s": {"const": "y"}}}]}}});
    never_accepts(schema.clone(), json!({"a": 1, "d": 1}));
    never_accepts(schema, json!({"d": "z"}));
}

/// `Github_hard---o62057` (`oneOf` of two enum arrays with `maxItems`): the
/// exactly-one branch is `items A ∧ maxItems 25 ∧ contains ¬B`, which used
/// to fail with "contains together with minItems/maxItems". The counted
/// product on the item classes writes it exactly.
#[test]
fn contains_beside_max_items_from_one_of() {
    // Compliant only: strict mode reports the contradiction `minItems 4`
    // ∧ `maxItems 3` inside the exactly-one branches as an error.
    check_in(
        json!({"oneOf": [
            {"type": "array", "maxItems": 3, "items": {"enum": ["a", "b", "c"]}},
            {"type": "array", "maxItems": 3, "items": {"enum": ["c", "d"]}}]}),
        &[
            json!(["a"]),
            json!(["d", "d"]),
            json!(["a", "c", "b"]),
            json!(["c", "a"]),
        ],
        &[
            json!([]),
            json!(["c"]),
            json!(["c", "c", "c"]),
            json!(["a", "d"]),
            json!(["a", "b", "c", "a"]),
        ],
        &[constrain::schema::JsonMode::Compliant],
    );
}

/// `contains` with `minItems` / `maxItems` / `maxContains` together, and
/// several `contains` on one array (`Handwritten---itemscontains2`,
/// `Github_trivial---o25751`: they come from `allOf` and from `¬items`).
#[test]
fn counted_contains_with_lengths_and_several_contains() {
    check(
        json!({"type": "array", "items": {"type": "integer"}, "minItems": 3, "maxItems": 5,
               "contains": {"minimum": 10}, "minContains": 1, "maxContains": 2}),
        &[
            json!([10, 1, 2]),
            json!([1, 2, 3, 11, 12]),
            json!([10, 11, 0]),
        ],
        &[
            json!([10, 1]),
            json!([10, 11, 12]),
            json!([1, 2, 3]),
            json!([1, 2, 3, 4, 5, 10]),
        ],
    );
    check(
        json!({"type": "array", "minItems": 4, "contains": {"type": "string"}}),
        &[json!(["a", 1, 2, 3]), json!([1, 2, 3, "x", 5])],
        &[json!(["a", 1, 2]), json!([1, 2, 3, 4])],
    );
    check(
        json!({"type": "array",
               "allOf": [{"contains": {"type": "string"}}, {"contains": {"type": "boolean"}}]}),
        &[json!(["a", true]), json!([1, false, 2, "b"])],
        &[json!(["a"]), json!([true, false]), json!([])],
    );
    check(
        json!({"type": "array", "maxItems": 3,
               "allOf": [{"contains": {"type": "integer", "minimum": 100}},
                         {"contains": {"type": "integer", "maximum": 5}, "minContains": 2}]}),
        &[json!([1, 100, 2]), json!([3, 4, 200])],
        &[json!([1, 2]), json!([100, 1]), json!([1, 2, 3, 100])],
    );
    // Several contains from `allOf` of `items` whose items are arrays
    // with `contains` (Handwritten---itemscontains2, reduced).
    check(
        json!({"type": "array",
               "allOf": [{"items": {"type": "array", "maxItems": 3,
                                    "contains": {"type": "integer", "minimum": 10}}},
                         {"items": {"type": "array",
                                    "contains": {"type": "integer", "maximum": 0}}}]}),
        &[json!([]), json!([[10, 0]]), json!([[0, 20], [-1, 1, 30]])],
        &[json!([[10]]), json!([[0]]), json!([[10, 0, 1, 2]])],
    );
}

/// `Github_trivial---o25195` (`{"type": "integer", "multipleOf": 3}` with
/// no bounds): narrowed to a window of `max_enumerated_multiples`
/// multiples around 0 (sound, with a warning naming the keyword), instead
/// of an error. The remainder automaton's regex is too large (see
/// `schema/regex/residue.rs`).
#[test]
fn unbounded_multiple_of_is_narrowed_with_a_warning() {
    check(
        json!({"properties": {"bar": {"type": "integer", "multipleOf": 3}}}),
        &[json!({"bar": 6}), json!({"bar": -3}), json!({"bar": 0})],
        &[json!({"bar": 7}), json!({"bar": 4.5}), json!({"bar": "6"})],
    );
    check(
        json!({"type": "integer", "multipleOf": 7, "minimum": 100}),
        &[json!(105), json!(700)],
        &[json!(98), json!(101), json!(-7)],
    );
    let c = strict_with_warning(
        &json!({"type": "integer", "multipleOf": 3}),
        &["multipleOf 3", "narrowed"],
    );
    let d = dfa(&c);
    assert!(d.matches(b"6141") && !d.matches(b"6142") && d.matches(b"-6141"));
}

/// `JsonSchemaStore---drupal-permissions` (and 17 more dev files):
/// `uniqueItems` over items with no small finite set of values (strings,
/// objects) is neither exact nor checked at run time, so it fails closed:
/// an error naming the keyword and where it is, in every mode but lenient
/// (which ignores it with a warning, and then does not promise uniqueness).
#[test]
fn unique_items_over_open_items_fails_closed() {
    let strict = opts(
        constrain::schema::Whitespace::Compact,
        constrain::schema::JsonMode::Strict,
    );
    for s in [
        json!({"type": "object",
               "properties": {"permission_callbacks": {
                   "type": "array", "items": {"type": "string"}, "uniqueItems": true}}}),
        json!({"type": "array", "items": {"type": "object"}, "uniqueItems": true, "maxItems": 5}),
    ] {
        let e = constrain::schema::compile(&s, &strict).unwrap_err();
        assert!(e.to_string().contains("uniqueItems"), "{e}");
        let mut lenient = strict.clone();
        lenient.lenient = true;
        let c = constrain::schema::compile(&s, &lenient).unwrap();
        assert!(
            c.warnings.iter().any(|w| w.message.contains("uniqueItems")),
            "{:?}",
            c.warnings.iter().map(|w| &w.message).collect::<Vec<_>>()
        );
    }
    let e = constrain::schema::compile(
        &json!({"properties": {"p": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}}}),
        &strict,
    )
    .unwrap_err();
    assert!(e.to_string().contains("/properties/p"), "{e}");
}

/// `uniqueItems` over more possible item values than `max_unique_values`
/// (7 here): narrowed to distinct values in the order the schema lists
/// them (linear text instead of every ordering), with a warning.
#[test]
fn unique_items_over_many_values_keeps_listed_order() {
    let s = json!({"type": "array", "uniqueItems": true,
                   "items": {"enum": ["a", "b", "c", "d", "e", "f", "g"]}});
    check(
        s.clone(),
        &[
            json!([]),
            json!(["a", "c", "g"]),
            json!(["f"]),
            json!(["a", "b", "c", "d", "e", "f", "g"]),
        ],
        &[json!(["a", "a"]), json!(["h"]), json!(["a", "c", "c"])],
    );
    let c = strict_with_warning(&s, &["order the schema lists"]);
    // Another order of distinct values is valid but not offered (narrowed).
    assert!(!dfa(&c).matches(br#"["c","a"]"#));
}

/// `Github_easy---o13687` (and `Kubernetes---kb_101`, `-kb_24`, ...): in
/// compliant mode an undeclared key of the document's own object holds an
/// array of objects (`"links": [{...}]`). The root object's implicit extra
/// values nest `root_extra_value_depth` (2) containers, other objects'
/// `extra_value_depth` (1); every listed instance is confirmed by the
/// `jsonschema` oracle, and random walks of the compliant DFA validate.
#[test]
fn root_extra_values_nest_two_containers_in_compliant_mode() {
    use constrain::schema::SchemaOptions;
    let schema = json!({"type": "object",
        "properties": {"id": {"type": "string"}, "message": {"type": "string"},
                       "inner": {"type": "object", "properties": {"a": {"type": "integer"}}}},
        "required": ["id", "message"]});
    let oracle = Oracle::new(&schema).unwrap();
    let opts = SchemaOptions::compliant();
    assert_eq!(
        (opts.extra_value_depth, opts.root_extra_value_depth),
        (1, 2)
    );
    let c = constrain::schema::compile(&schema, &opts).unwrap();
    let d = dfa(&c);
    let accept = [
        json!({"id": "SB-1", "message": "deleted",
               "links": [{"description": "link", "href": "blocks", "rel": "self"}]}),
        json!({"id": "a", "message": "b", "x": {"y": {"z": 1}}, "w": {"v": [1, 2]}}),
        json!({"id": "a", "message": "b", "inner": {"a": 1, "q": [1]}}),
    ];
    // Valid, but past the narrowing: three containers under the root's
    // extra key, two under a nested object's.
    let narrowed = [
        json!({"id": "a", "message": "b", "x": [[[1]]]}),
        json!({"id": "a", "message": "b", "inner": {"q": [{"r": 1}]}}),
    ];
    let reject = [
        json!({"id": 12345, "message": "m", "links": [{"rel": "self"}]}),
        json!({"id": null, "message": "m"}),
        json!({"id": "a", "message": "b", "inner": {"a": "1"}}),
    ];
    for v in accept.iter().chain(&narrowed) {
        assert!(oracle.valid(v), "test data: {v} should be valid");
    }
    for v in &reject {
        assert!(!oracle.valid(v), "test data: {v} should be invalid");
    }
    let ws = opts.whitespace;
    for v in &accept {
        let t = render(v, ws);
        assert!(d.matches(t.as_bytes()), "{t} should match");
    }
    for v in narrowed.iter().chain(&reject) {
        let t = render(v, ws);
        assert!(!d.matches(t.as_bytes()), "{t} should not match");
    }
    // Soundness: random walks of the compliant DFA validate.
    let w = Walker::new(&d);
    let mut r = rng(29);
    let mut walked = 0;
    for _ in 0..300 {
        let Some(t) = w.walk(&mut r, 60) else {
            continue;
        };
        let text = String::from_utf8(t).expect("utf-8");
        let v: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("walk {text:?} does not parse ({e})"));
        assert!(oracle.valid(&v), "walk {text} is invalid");
        walked += 1;
    }
    assert!(walked > 100);
}

/// A negative lookahead inside a repetition (`^((?!clyde).)*$`, a
/// MaskBench miss): every character is checked not to start a match, so
/// the strings are those with no match anywhere.
#[test]
fn tempered_characters_exclude_every_match() {
    check(
        json!({"type": "string", "pattern": "^((?!clyde).)*$"}),
        &[json!(""), json!("abc"), json!("clyd"), json!("c l y d e")],
        &[
            json!("clyde"),
            json!("a clyde b"),
            json!("xxclydeclyde"),
            json!("\n"),
        ],
    );
    check(
        json!({"type": "string", "pattern": "^(?:(?!ab|c[0-9])[a-z0-9])+$"}),
        &[json!("acbd"), json!("a"), json!("c"), json!("b9c")],
        &[
            json!(""),
            json!("xab"),
            json!("c1"),
            json!("zzc0"),
            json!("A"),
        ],
    );
}

/// `Handwritten---num1` / `allany1`: `not` over the multiples of 630
/// within the multiples of 420 past 10,000 is a product of more than the
/// default 4,096 states; compliant mode's larger product limits
/// (16,384 states, 1 MiB of text) compile it, exactly.
#[test]
fn compliant_mode_takes_larger_products() {
    use constrain::schema::SchemaOptions;
    let schema = json!({"type": "integer",
        "allOf": [{"multipleOf": 5}, {"multipleOf": 3}, {"multipleOf": 2}, {"multipleOf": 7}],
        "multipleOf": 4,
        "not": {"allOf": [{"multipleOf": 9}, {"multipleOf": 5}, {"multipleOf": 3},
                          {"multipleOf": 2}, {"multipleOf": 7}]},
        "minimum": 10000});
    let oracle = Oracle::new(&schema).unwrap();
    let small = SchemaOptions::compliant()
        .max_product_states(4096)
        .max_product_len(256 << 10);
    assert!(constrain::schema::compile(&schema, &small).is_err());
    let c = constrain::schema::compile(&schema, &SchemaOptions::compliant()).unwrap();
    let d = dfa(&c);
    for n in [
        10080, 10500, 10920, 11340, 12600, 0, 420, 9660, 10081, 252000, 252420,
    ] {
        let v = json!(n);
        let t = v.to_string();
        assert_eq!(d.matches(t.as_bytes()), oracle.valid(&v), "{t}");
    }
}
