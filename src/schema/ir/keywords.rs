//! Keyword tables of the IR parser: which keywords are annotations,
//! which are unsupported, which are enforced, the near-miss check that keeps
//! misspelt keywords errors, and the small forms parsed in place (`not` of a
//! type, a required key or one bound; the numeric formats of OpenAPI).
//! Split from `ir.rs` by job; moved as is.

use super::merge::{lower_hi, raise_lo};
use super::*;

/// Keywords that are annotations (or structure handled elsewhere) and never
/// change what validates.
pub(super) const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "default",
    "examples",
    "example",
    "$comment",
    "deprecated",
    "readOnly",
    "writeOnly",
    "contentMediaType",
    "contentEncoding",
    "contentSchema",
    "$schema",
    "$id",
    "id",
    "$anchor",
    "$dynamicAnchor",
    "$vocabulary",
    "$recursiveAnchor",
    "definitions",
    "$defs",
];

/// Keywords some draft defines that this compiler does not enforce.
pub(super) const UNSUPPORTED: &[&str] = &[
    "patternProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "$recursiveRef",
    "disallow",
    "extends",
    "divisibleBy",
];

/// Keywords this compiler enforces.
pub(super) const ENFORCED: &[&str] = &[
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "additionalItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "anyOf",
    "oneOf",
    "allOf",
    "minProperties",
    "maxProperties",
    "$ref",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "minContains",
    "maxContains",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "propertyNames",
];

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Whether `k` looks like a misspelling of a keyword that changes validation.
pub(super) fn near_miss(k: &str) -> Option<&'static str> {
    if k.starts_with('_') || k.starts_with('$') {
        return None; // `_uniqueItems`: a keyword deliberately switched off
    }
    let lower = k.to_lowercase();
    ENFORCED
        .iter()
        .chain(UNSUPPORTED)
        .copied()
        .find(|kw| kw.to_lowercase() == lower || (kw.len() >= 7 && edit_distance(k, kw) <= 2))
}

/// The types on which the keyword set alone in `probe` holds vacuously:
/// all but the types it constrains ([`Node::keyword_types`]; a number
/// keyword constrains the integers too). `not` of the keyword rejects them.
fn vacuous_types(probe: Node) -> Types {
    let mut k = probe.keyword_types();
    if k.has(Types::NUMBER) {
        k = k.union(Types::INTEGER);
    }
    Types(Types::ALL.0 & !k.0)
}

/// Applies `not: v` to `n` when `v` has one of the enforceable forms:
/// `{}`/`true` (nothing validates), `false` (no-op), `{type: ...}`,
/// `{required: [k]}` (an object, and `k` is never written), or one
/// numeric bound (`{maximum: x}` → a number above x, and so on).
pub(super) fn simple_not(v: &Value, n: &mut Node) -> bool {
    let m = match v {
        Value::Bool(true) => {
            n.never = true;
            return true;
        }
        Value::Bool(false) => return true,
        Value::Object(m) => m,
        _ => return false,
    };
    let keys: Vec<&str> = m
        .keys()
        .map(|k| k.as_str())
        .filter(|k| !ANNOTATIONS.contains(k) && !k.starts_with("x-"))
        .collect();
    match keys.as_slice() {
        [] => {
            n.never = true;
            true
        }
        ["type"] => {
            let names: Vec<&Value> = match &m["type"] {
                Value::Array(a) => a.iter().collect(),
                other => vec![other],
            };
            let mut t = Types::NONE;
            for name in names {
                match name.as_str().and_then(Types::from_name) {
                    Some(x) => t = t.union(x),
                    None => return false,
                }
            }
            if t.has(Types::INTEGER) && !t.has(Types::NUMBER) {
                // The non-integers stay: the general complement has them.
                return false;
            }
            n.not_types = n.not_types.union(t);
            true
        }
        // `not {maximum: x}` holds exactly for numbers above x (a non-number
        // satisfies `maximum` vacuously, so the `not` rejects it): the same
        // as `type: number` plus the opposite, strict or not, bound.
        [kw @ ("maximum" | "minimum" | "exclusiveMaximum" | "exclusiveMinimum")] => {
            let Some(value) = as_dec(&m[*kw]) else {
                return false;
            };
            n.not_types = n.not_types.union(vacuous_types(Node {
                minimum: Some(Bound {
                    value: value.clone(),
                    exclusive: false,
                }),
                ..Default::default()
            }));
            match *kw {
                "maximum" | "exclusiveMaximum" => {
                    let b = Bound {
                        value,
                        exclusive: *kw == "maximum",
                    };
                    raise_lo(&mut n.minimum, b);
                }
                _ => {
                    let b = Bound {
                        value,
                        exclusive: *kw == "minimum",
                    };
                    lower_hi(&mut n.maximum, b);
                }
            }
            true
        }
        ["required"] => match &m["required"] {
            Value::Array(a) if a.is_empty() => {
                n.never = true;
                true
            }
            Value::Array(a) if a.len() > 1 => false,
            // `not {required: [k]}` holds exactly for objects without `k`: a
            // non-object satisfies `required` vacuously, so the `not`
            // rejects it (as `not {maximum}` rejects non-numbers).
            Value::Array(a) => match a[0].as_str() {
                Some(k) => {
                    n.not_types = n.not_types.union(vacuous_types(Node {
                        required: vec![k.to_string()],
                        ..Default::default()
                    }));
                    if !n.forbid_keys.iter().any(|f| f == k) {
                        n.forbid_keys.push(k.to_string());
                    }
                    true
                }
                None => false,
            },
            _ => false,
        },
        _ => false,
    }
}

/// Bounds of the numeric formats of OpenAPI and schemars (`None`: not one).
pub(super) fn numeric_format(f: &str) -> Option<(Option<&'static str>, Option<&'static str>)> {
    Some(match f {
        "int8" => (Some("-128"), Some("127")),
        "uint8" => (Some("0"), Some("255")),
        "int16" => (Some("-32768"), Some("32767")),
        "uint16" => (Some("0"), Some("65535")),
        "int32" => (Some("-2147483648"), Some("2147483647")),
        "uint32" => (Some("0"), Some("4294967295")),
        "int64" => (Some("-9223372036854775808"), Some("9223372036854775807")),
        "uint64" | "uint" => (Some("0"), Some("18446744073709551615")),
        "float" | "double" => (None, None),
        _ => return None,
    })
}
