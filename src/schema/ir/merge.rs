//! [`merge`]: the intersection of two nodes (the meaning of `allOf`), with
//! the bound-narrowing helpers and [`json_eq`]. Split from `ir.rs` by job;
//! moved as is.

use super::*;

/// Narrows the lower bound `lo` to `b` (when `b` is tighter).
pub(super) fn raise_lo(lo: &mut Option<Bound>, b: Bound) {
    *lo = Some(match lo.take() {
        Some(l) => tighter_lo(l, b),
        None => b,
    });
}

/// Narrows the upper bound `hi` to `b` (when `b` is tighter).
pub(super) fn lower_hi(hi: &mut Option<Bound>, b: Bound) {
    *hi = Some(match hi.take() {
        Some(h) => tighter_hi(h, b),
        None => b,
    });
}

fn tighter_lo(a: Bound, b: Bound) -> Bound {
    match a.value.cmp(&b.value) {
        std::cmp::Ordering::Greater => a,
        std::cmp::Ordering::Less => b,
        std::cmp::Ordering::Equal => Bound {
            value: a.value,
            exclusive: a.exclusive || b.exclusive,
        },
    }
}

fn tighter_hi(a: Bound, b: Bound) -> Bound {
    match a.value.cmp(&b.value) {
        std::cmp::Ordering::Less => a,
        std::cmp::Ordering::Greater => b,
        std::cmp::Ordering::Equal => Bound {
            value: a.value,
            exclusive: a.exclusive || b.exclusive,
        },
    }
}

/// JSON equality as JSON Schema defines it (1 == 1.0).
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            match (Dec::parse(&x.to_string()), Dec::parse(&y.to_string())) {
                (Some(p), Some(q)) => p == q,
                _ => x == y,
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// Intersects two nodes (`allOf`). Sub-schemas that both sides constrain are
/// combined through `allOf`, so nothing is resolved here.
pub fn merge(a: &Node, b: &Node) -> Result<Node, SchemaError> {
    let mut n = a.clone();
    n.types = match (a.types, b.types) {
        (Some(x), Some(y)) => Some(x.intersect(y)),
        (x, y) => x.or(y),
    };
    n.enumeration = match (&a.enumeration, &b.enumeration) {
        (Some(x), Some(y)) => Some(
            x.iter()
                .filter(|v| y.iter().any(|w| json_eq(v, w)))
                .cloned()
                .collect(),
        ),
        (x, y) => x.clone().or_else(|| y.clone()),
    };
    n.min_length = max_opt(a.min_length, b.min_length);
    n.max_length = min_opt(a.max_length, b.max_length);
    for p in &b.patterns {
        if !n.patterns.iter().any(|q| q.value == p.value) {
            n.patterns.push(p.clone());
        }
    }
    for f in &b.formats {
        if !n.formats.iter().any(|q| q.value == f.value) {
            n.formats.push(f.clone());
        }
    }
    n.minimum = match (a.minimum.clone(), b.minimum.clone()) {
        (Some(x), Some(y)) => Some(tighter_lo(x, y)),
        (x, y) => x.or(y),
    };
    n.maximum = match (a.maximum.clone(), b.maximum.clone()) {
        (Some(x), Some(y)) => Some(tighter_hi(x, y)),
        (x, y) => x.or(y),
    };
    n.multiple_of = match (&a.multiple_of, &b.multiple_of) {
        (Some(x), Some(y)) => {
            if x.value == y.value {
                Some(x.clone())
            } else {
                match (x.value.to_i128(), y.value.to_i128()) {
                    (Some(p), Some(q)) => Some(Located {
                        value: Dec::parse(&lcm(p, q).to_string()).expect("integer"),
                        at: x.at.clone(),
                    }),
                    _ => {
                        return Err(SchemaError::UnsupportedValue {
                            what: "multipleOf".into(),
                            pointer: y.at.clone(),
                            detail: "two different non-integer multipleOf in allOf".into(),
                        })
                    }
                }
            }
        }
        (x, y) => x.clone().or_else(|| y.clone()),
    };
    // arrays
    n.prefix_items = match (&a.prefix_items, &b.prefix_items) {
        (Some(x), Some(y)) => {
            let len = x.len().max(y.len());
            let mut out = Vec::with_capacity(len);
            for i in 0..len {
                let p = x.get(i).cloned().or_else(|| a.items.clone());
                let q = y.get(i).cloned().or_else(|| b.items.clone());
                out.push(both(p, q));
            }
            Some(out)
        }
        (Some(x), None) => Some(
            x.iter()
                .map(|s| both(Some(s.clone()), b.items.clone()))
                .collect(),
        ),
        (None, Some(y)) => Some(
            y.iter()
                .map(|s| both(a.items.clone(), Some(s.clone())))
                .collect(),
        ),
        (None, None) => None,
    };
    n.items = match (&a.items, &b.items) {
        (Some(x), Some(y)) => Some(both(Some(x.clone()), Some(y.clone()))),
        (x, y) => x.clone().or_else(|| y.clone()),
    };
    n.min_items = max_opt(a.min_items, b.min_items);
    n.max_items = min_opt(a.max_items, b.max_items);
    // objects: a key declared on one side only must also pass the other
    // side's additionalProperties.
    let mut props: Vec<(String, Schema)> = Vec::new();
    // What the other side says about a key it does not declare.
    let undeclared = |side: &Node, k: &str| -> Result<Option<Schema>, SchemaError> {
        let mut hits = Vec::new();
        for (p, s) in &side.pattern_properties {
            match pattern_matches(&p.value, k) {
                Some(true) => hits.push(s.clone()),
                Some(false) => {}
                None => {
                    return Err(SchemaError::Pattern {
                        pointer: p.at.clone(),
                        detail: format!("{:?} cannot be compiled", p.value),
                    })
                }
            }
        }
        Ok(match hits.len() {
            0 => side.additional.clone(),
            _ => Some(
                hits.into_iter()
                    .fold(Schema::Bool(true), |acc, s| both(Some(acc), Some(s))),
            ),
        })
    };
    for (k, s) in &a.properties {
        let other = match b.properties.iter().find(|(k2, _)| k2 == k) {
            Some((_, t)) => Some(t.clone()),
            None => undeclared(b, k)?,
        };
        props.push((k.clone(), both(Some(s.clone()), other)));
    }
    for (k, t) in &b.properties {
        if a.properties.iter().any(|(k2, _)| k2 == k) {
            continue;
        }
        props.push((k.clone(), both(undeclared(a, k)?, Some(t.clone()))));
    }
    n.pattern_properties = merged_patterns(a, b);
    n.never = a.never || b.never;
    n.not_types = a.not_types.union(b.not_types);
    for f in &b.forbid_keys {
        if !n.forbid_keys.contains(f) {
            n.forbid_keys.push(f.clone());
        }
    }
    n.nots.extend(b.nots.iter().cloned());
    n.conditionals.extend(b.conditionals.iter().cloned());
    n.dependent_required
        .extend(b.dependent_required.iter().cloned());
    n.dependent_schemas
        .extend(b.dependent_schemas.iter().cloned());
    n.not_values.extend(b.not_values.iter().cloned());
    n.fractional = a.fractional || b.fractional;
    n.not_multiple_of.extend(b.not_multiple_of.iter().cloned());
    n.not_patterns.extend(b.not_patterns.iter().cloned());
    n.unique_items = a.unique_items || b.unique_items;
    n.contains.extend(b.contains.iter().cloned());
    n.property_names.extend(b.property_names.iter().cloned());
    n.some_extra.extend(b.some_extra.iter().cloned());
    n.properties = props;
    n.required = a.required.clone();
    for r in &b.required {
        if !n.required.contains(r) {
            n.required.push(r.clone());
        }
    }
    n.additional = match (&a.additional, &b.additional) {
        (Some(x), Some(y)) => Some(both(Some(x.clone()), Some(y.clone()))),
        (x, y) => x.clone().or_else(|| y.clone()),
    };
    n.min_properties = max_opt(a.min_properties, b.min_properties);
    n.max_properties = min_opt(a.max_properties, b.max_properties);
    n.all_of.extend(b.all_of.iter().cloned());
    n.any_of.extend(b.any_of.iter().cloned());
    n.one_of.extend(b.one_of.iter().cloned());
    Ok(n)
}

/// The `patternProperties` of `allOf: [a, b]`. A pattern both sides name
/// takes both schemas. A key that matches a pattern of one side only, and
/// that the other side neither declares nor matches with a pattern of its
/// own, must also pass that other side's `additionalProperties`: an entry
/// for exactly those keys (the pattern, less the other side's patterns and
/// names, written with lookahead) carries it.
fn merged_patterns(a: &Node, b: &Node) -> Vec<(Located<String>, Schema)> {
    let mut out = a.pattern_properties.clone();
    let add = |out: &mut Vec<(Located<String>, Schema)>, p: Located<String>, s: &Schema| match out
        .iter_mut()
        .find(|(q, _)| q.value == p.value)
    {
        Some((_, t)) => *t = both(Some(t.clone()), Some(s.clone())),
        None => out.push((p, s.clone())),
    };
    for (p, s) in &b.pattern_properties {
        add(&mut out, p.clone(), s);
    }
    for (side, other) in [(a, b), (b, a)] {
        let Some(rest) = &side.additional else {
            continue;
        };
        if matches!(rest, Schema::Bool(true)) {
            continue;
        }
        for (p, _) in &other.pattern_properties {
            if side
                .pattern_properties
                .iter()
                .any(|(q, _)| q.value == p.value)
            {
                continue;
            }
            let value = outside(&p.value, side);
            let at = p.at.clone();
            add(&mut out, Located { value, at }, rest);
        }
    }
    out
}

/// An ECMA-262 pattern for the keys matching `p` that `side` neither
/// declares nor matches with one of its patterns.
fn outside(p: &str, side: &Node) -> String {
    if side.pattern_properties.is_empty() && side.properties.is_empty() {
        return p.to_string();
    }
    let mut r = format!("^(?=[\\s\\S]*(?:{p}))");
    for (q, _) in &side.pattern_properties {
        r.push_str(&format!("(?![\\s\\S]*(?:{}))", q.value));
    }
    if !side.properties.is_empty() {
        let names: Vec<String> = side
            .properties
            .iter()
            .map(|(k, _)| ecma_escape(k))
            .collect();
        r.push_str(&format!("(?!(?:{})$)", names.join("|")));
    }
    r
}

/// `s` as an ECMA-262 pattern matching exactly `s`.
fn ecma_escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if "\\^$.|?*+()[]{}/-".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The intersection of two optional sub-schemas (`None` = unconstrained).
fn both(a: Option<Schema>, b: Option<Schema>) -> Schema {
    match (a, b) {
        (None, None) => Schema::Bool(true),
        (Some(x), None) | (None, Some(x)) => x,
        (Some(Schema::Bool(true)), Some(x)) | (Some(x), Some(Schema::Bool(true))) => x,
        (Some(Schema::Bool(false)), _) | (_, Some(Schema::Bool(false))) => Schema::Bool(false),
        (Some(x), Some(y)) => Schema::Node(std::sync::Arc::new(Node {
            at: node_at(&x),
            all_of: vec![x, y],
            ..Default::default()
        })),
    }
}

fn node_at(s: &Schema) -> Pointer {
    match s {
        Schema::Node(n) => n.at.clone(),
        Schema::Ref { at, .. } => at.clone(),
        Schema::Bool(_) => Pointer::root(),
    }
}

fn max_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    }
}

fn min_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

fn gcd(a: i128, b: i128) -> i128 {
    if b == 0 {
        a.abs()
    } else {
        gcd(b, a % b)
    }
}

fn lcm(a: i128, b: i128) -> i128 {
    a / gcd(a, b) * b
}
