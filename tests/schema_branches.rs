//! Schemas whose `anyOf` / `oneOf` / `if` groups multiply past
//! `max_branches` combinations, and `oneOf`s whose branches are disjoint for
//! reasons the overlap proof had to learn; each used to be an error (reduced
//! from MaskBench dev files named in the comments), each checked against the
//! `jsonschema` oracle with valid and invalid instances, random walks and
//! random values.

mod schema_util;

use schema_util::logic::*;
use serde_json::{json, Value};

/// `JsonSchemaStore---cloudify` / `jfrog-pipelines` / `minecraft-*`: ten
/// `if`s that each test the same key against a constant are one case split
/// over that key (was 2¹⁰ combinations of `if` / `¬if`, over 256).
#[test]
fn conditionals_on_one_key_are_a_case_split() {
    let ifs: Vec<Value> = (0..10)
        .map(|i| {
            json!({"if": {"properties": {"kind": {"const": format!("k{i}")}}},
                   "then": {"properties": {"v": {"type": "integer", "minimum": i}}}})
        })
        .collect();
    check(
        json!({"type": "object",
               "properties": {"kind": {"type": "string"}, "v": {}},
               "allOf": ifs}),
        &[
            json!({"kind": "k3", "v": 3}),
            json!({"kind": "k9", "v": 12}),
            json!({"kind": "other", "v": -5}),
            json!({"v": 20}),
            json!({}),
        ],
        &[
            json!({"kind": "k3", "v": 2}),
            json!({"kind": "k9", "v": 8}),
            json!({"v": 5}),
            json!({"kind": 1}),
        ],
    );
}

/// The same split with `else` branches and `enum`s listing several values,
/// one of them shared by two `if`s.
#[test]
fn conditionals_with_else_and_shared_values() {
    let mut ifs: Vec<Value> = (0..8)
        .map(|i| {
            json!({"if": {"properties": {"kind": {"enum": [format!("k{i}"), "both"]}}},
                   "then": {"required": [format!("p{i}")]},
                   "else": {"not": {"required": [format!("p{i}")]}}})
        })
        .collect();
    ifs.push(json!({"if": {"properties": {"kind": {"const": "k0"}}},
                    "then": {"properties": {"p0": {"type": "string"}}}}));
    check(
        json!({"type": "object", "allOf": ifs}),
        &[
            json!({"kind": "k0", "p0": "a"}),
            json!({"kind": "k5", "p5": 1}),
            json!({"kind": "x"}),
        ],
        &[
            json!({"kind": "k0", "p0": 1}),
            json!({"kind": "k5"}),
            json!({"kind": "k5", "p5": 1, "p4": 1}),
            json!({"kind": "both", "p0": "a"}),
            json!({"kind": "x", "p1": 0}),
            json!({}),
        ],
    );
}

/// `WashingtonPost---wp_*` in small (the real one was 4 × 4 × 11³
/// combinations): a declared key and a `patternProperties` entry naming the
/// same `oneOf` of `$ref`s (the second copy is dropped), each branch exact
/// by difference.
#[test]
fn repeated_groups_and_contradicting_complements() {
    let one_of = json!({"oneOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/b"},
                                  {"$ref": "#/$defs/c"}]});
    check_in(
        json!({"type": "object",
               "properties": {"basic": one_of.clone()},
               "patternProperties": {".*": one_of},
               "$defs": {
                   "a": {"type": "object", "additionalProperties": {},
                         "properties": {"t": {"type": "string"}, "n": {"type": "integer"},
                                        "s": {"type": "string"}}},
                   "b": {"type": "object", "additionalProperties": false,
                         "properties": {"t": {"enum": ["ref"]}, "id": {"type": "string"}},
                         "required": ["t", "id"]},
                   "c": {"type": "object", "additionalProperties": false,
                         "properties": {"t": {"enum": ["html"]}, "c": {"type": "string"},
                                        "n": {"type": "integer"}},
                         "required": ["t", "c"]}}}),
        &[
            json!({"basic": {"t": "x", "n": 1}}),
            json!({"basic": {"s": "z"}}),
            json!({"basic": {"n": 2, "s": "q"}}),
        ],
        &[
            json!({"basic": {"t": "ref", "id": "1"}}),
            json!({"basic": {"t": "html", "c": "<p>"}}),
            json!({"basic": {"t": 1}}),
            json!({"basic": {"n": 2}, "other": {"t": "html", "c": "<p>"}}),
        ],
        &[constrain::schema::JsonMode::Compliant],
    );
}

/// `Github_hard---o44959` / `o82273`: branches that require a key whose
/// patterns each list one word are disjoint (was "may both match", and the
/// complement of the other branch's `format` is refused).
#[test]
fn one_of_disjoint_by_listed_words() {
    check(
        json!({"oneOf": [
            {"type": "object", "required": ["class", "host"],
             "properties": {"class": {"type": "string", "pattern": "^configure$"},
                            "host": {"type": "string", "format": "ipv4"}}},
            {"type": "object", "required": ["class"],
             "properties": {"class": {"type": "string", "pattern": "^(?:contextualize|other)$"},
                            "host": {"type": "string", "format": "ipv4"}}}]}),
        &[
            json!({"class": "configure", "host": "1.2.3.4"}),
            json!({"class": "other"}),
        ],
        &[
            json!({"class": "configure"}),
            json!({"class": "contextualize", "host": 5}),
            json!({"class": "configures", "host": "1.2.3.4"}),
        ],
    );
}

/// `JsonSchemaStore---mason-registry`: branches that require a key whose
/// anchored patterns begin with diverging text.
#[test]
fn one_of_disjoint_by_pattern_prefixes() {
    check(
        json!({"oneOf": [
            {"type": "object", "required": ["id"],
             "properties": {"id": {"type": "string", "pattern": "^pkg:npm/.+@.+"}}},
            {"type": "object", "required": ["id"],
             "properties": {"id": {"type": "string", "pattern": "^pkg:cargo?/.+"},
                            "host": {"type": "string", "format": "ipv4"}}}]}),
        &[
            json!({"id": "pkg:npm/a@1"}),
            json!({"id": "pkg:carg/x", "host": "1.2.3.4"}),
        ],
        &[
            json!({"id": "pkg:npm/a"}),
            json!({"id": "pkg:cargo/x", "host": 1}),
        ],
    );
}

/// `Github_medium---o9802` / `o9804`: string branches whose patterns no
/// string matches both of (one allows no `{`, the other needs `{{`), with
/// length bounds (255 there, which made the exact difference of the two a
/// product too deep to parse; 25 here, for the test's whole DFA).
#[test]
fn one_of_disjoint_by_patterns_without_common_strings() {
    check(
        json!({"type": "object", "properties": {"key": {"oneOf": [
            {"type": "string", "pattern": "^[0-9a-zA-Z_-]{1,25}$"},
            {"type": "string", "minLength": 4, "maxLength": 25,
             "pattern": ".*\\{\\{.+}}.*"}]}}}),
        &[
            json!({"key": "abc_D-9"}),
            json!({"key": "x{{name}}y"}),
            json!({"key": "{{a}}"}),
            json!({}),
        ],
        &[
            json!({"key": ""}),
            json!({"key": "a b"}),
            json!({"key": "{{}}"}),
            json!({"key": 5}),
        ],
    );
    // Overlapping patterns are still not taken for disjoint: both match
    // "ab", so "ab" is invalid and "a" or "b!" valid.
    check(
        json!({"oneOf": [
            {"type": "string", "pattern": "^[a-z]+$"},
            {"type": "string", "pattern": "^(ab|b!)$"}]}),
        &[json!("a"), json!("b!"), json!("xyz")],
        &[json!("ab"), json!("A"), json!(1)],
    );
}

/// `Github_hard---o53107` / `Github_medium---o10566`: a branch that
/// requires a key the other branch cannot hold (closed keys, no pattern
/// matching it).
#[test]
fn one_of_disjoint_by_a_key_the_other_cannot_hold() {
    check(
        json!({"oneOf": [
            {"type": "object", "additionalProperties": false, "required": ["$graph"],
             "properties": {"$graph": {"type": "string"}}},
            {"type": "object", "additionalProperties": false,
             "patternProperties": {"^[^$]": {"type": "string", "format": "ipv4"}}}]}),
        &[json!({"$graph": "g"}), json!({"x": "1.2.3.4"}), json!({})],
        &[
            json!({"$graph": 1}),
            json!({"x": 1}),
            json!({"$graph": "g", "x": "1.2.3.4"}),
        ],
    );
}

/// `Github_ultra---o21840`: a branch that requires more keys than the
/// other allows, in both directions, is disjoint from it; the other may then
/// write the first one's keys (it was kept from writing `a`).
#[test]
fn one_of_disjoint_by_counts() {
    check(
        json!({"oneOf": [
            {"type": "object", "required": ["a", "b"],
             "properties": {"a": {"type": "string", "format": "ipv4"}}},
            {"type": "object", "maxProperties": 1,
             "additionalProperties": {"type": "boolean"}}]}),
        &[
            json!({"a": "1.2.3.4", "b": 1}),
            json!({"z": true}),
            json!({"a": true}),
            json!({}),
        ],
        &[
            json!({"z": 1}),
            json!({"a": "1.2.3.4"}),
            json!({"a": true, "b": true}),
        ],
    );
}

/// `Github_easy---o37788` / `Github_medium---o81108`: a branch against
/// another whose own `oneOf` branches are each of another type (the
/// overlap proof splits groups on either side).
#[test]
fn one_of_disjoint_through_nested_groups() {
    check(
        json!({"oneOf": [
            {"type": "string"},
            {"$ref": "#/$defs/sel"}],
            "$defs": {"sel": {"oneOf": [
                {"type": "object", "required": ["ios"],
                 "properties": {"ios": {"type": "string", "format": "ipv4"}}},
                {"type": "array", "items": {"type": "string", "format": "ipv4"}}]}}}),
        &[json!("x"), json!({"ios": "1.2.3.4"}), json!(["1.2.3.4"])],
        &[json!(1), json!({"ios": 1}), json!([1]), json!({})],
    );
}
