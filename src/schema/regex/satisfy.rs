//! # Deciding a value against one node
//!
//! [`satisfies`] evaluates a JSON value against a node's own keywords
//! (three-valued: `None` when applicators or container keywords leave it
//! open), used to decide `enum`/`const` members and disjoint `oneOf`
//! branches; [`collect_refs`] lists the `$ref` targets a schema names.

use super::*;

pub(crate) fn collect_refs(s: &Schema, out: &mut Vec<String>) {
    match s {
        Schema::Bool(_) => {}
        Schema::Ref { target, .. } => out.push(target.clone()),
        Schema::Node(n) => {
            let subs = n
                .prefix_items
                .iter()
                .flatten()
                .chain(n.items.iter())
                .chain(n.properties.iter().map(|(_, s)| s))
                .chain(n.additional.iter())
                .chain(n.all_of.iter())
                .chain(n.any_of.iter().flatten())
                .chain(n.one_of.iter().flat_map(|g| g.value.iter()))
                .chain(n.nots.iter())
                .chain(n.conditionals.iter().flat_map(|c| {
                    std::iter::once(&c.cond)
                        .chain(c.then.iter())
                        .chain(c.otherwise.iter())
                }))
                .chain(n.dependent_schemas.iter().map(|(_, s)| s))
                .chain(n.contains.iter().map(|c| &c.schema))
                .chain(n.property_names.iter())
                .chain(n.pattern_properties.iter().map(|(_, s)| s));
            for c in subs {
                collect_refs(c, out);
            }
        }
    }
}

/// Whether `v` validates against the node's own keywords. `None`: cannot
/// tell (applicators, or array/object keywords on a container value).
pub(crate) fn satisfies(n: &Node, v: &Value) -> Option<bool> {
    if n.never || !Types::ALL.minus_not(n.not_types).admits(v) {
        return Some(false);
    }
    if let Some(t) = n.types {
        if !t.admits(v) {
            return Some(false);
        }
    }
    if let Some(e) = &n.enumeration {
        if !e.iter().any(|x| ir::json_eq(x, v)) {
            return Some(false);
        }
    }
    if n.not_values.iter().any(|x| ir::json_eq(x, v)) {
        return Some(false);
    }
    if n.fractional && v.is_number() && Types::of(v) == Types::INTEGER {
        return Some(false);
    }
    let mut unknown = !n.all_of.is_empty()
        || !n.any_of.is_empty()
        || !n.one_of.is_empty()
        || !n.nots.is_empty()
        || !n.conditionals.is_empty();
    match v {
        Value::String(s) => {
            let len = s.chars().count() as u64;
            if n.min_length.is_some_and(|m| len < m) || n.max_length.is_some_and(|m| len > m) {
                return Some(false);
            }
            for p in &n.patterns {
                let ok = pattern::translate_ecma(&p.value)
                    .ok()
                    .and_then(|t| regex_automata::meta::Regex::new(&t).ok())
                    .map(|r| r.is_match(s.as_str()));
                match ok {
                    Some(false) => return Some(false),
                    Some(true) => {}
                    None => unknown = true,
                }
            }
            for p in &n.not_patterns {
                match ir::pattern_matches(&p.value, s) {
                    Some(true) => return Some(false),
                    Some(false) => {}
                    None => unknown = true,
                }
            }
            for f in &n.formats {
                let re = formats::format_regex(&f.value).expect("supported");
                let ok = regex_automata::meta::Regex::new(&format!("^(?:{re})$"))
                    .ok()
                    .map(|r| r.is_match(s.as_str()));
                if ok != Some(true) {
                    // Our format regex is narrower than the format: we cannot
                    // produce it, so treat it as not satisfying (sound).
                    return Some(false);
                }
            }
        }
        Value::Number(x) => {
            let d = Dec::parse(&x.to_string())?;
            if let Some(l) = &n.minimum {
                if d < l.value || (l.exclusive && d == l.value) {
                    return Some(false);
                }
            }
            if let Some(h) = &n.maximum {
                if d > h.value || (h.exclusive && d == h.value) {
                    return Some(false);
                }
            }
            if let Some(m) = &n.multiple_of {
                match (d.to_i128(), m.value.to_i128()) {
                    (Some(a), Some(k)) => {
                        if a % k != 0 {
                            return Some(false);
                        }
                    }
                    _ => unknown = true,
                }
            }
            for m in &n.not_multiple_of {
                match (d.to_i128(), m.value.to_i128()) {
                    (Some(a), Some(k)) if k != 0 => {
                        if a % k == 0 {
                            return Some(false);
                        }
                    }
                    _ => unknown = true,
                }
            }
        }
        Value::Array(_) => {
            if n.has_array_keywords() {
                unknown = true;
            }
        }
        Value::Object(_) => {
            if n.has_object_keywords() {
                unknown = true;
            }
        }
        _ => {}
    }
    if unknown {
        None
    } else {
        Some(true)
    }
}
