//! # Witness keys: one concrete name for "some key such that …"
//!
//! The complements of `additionalProperties`, `patternProperties` and
//! `propertyNames` say that an object has *at least one* key of a kind: a
//! key outside the declared names and patterns, a key matching a pattern, a
//! key whose name fails a schema (see [`SomeExtra`](super::ir::SomeExtra)).
//! Where the object's keys are closed, the generator offers each declared
//! key that qualifies. Where extra keys are open, the exact language ("any
//! key/value pair of the kind, somewhere among the others") is not something
//! the object emitter writes; instead the generator adds one *witness*: a
//! concrete key name of the kind, required with the value the requirement
//! asks for. That is a subset of the complement (sound: every object it
//! generates validates), and it is the only narrowing here.
//!
//! This module finds the names. [`sample`] writes a short string that an
//! ECMA-262 `pattern` matches, by walking its HIR (the first alternative, the
//! least repetition, the first character of a class, anchors as nothing);
//! [`candidates`] lists names to try: samples of the patterns involved, the
//! string constants of a name schema, and short plain names. The caller
//! checks every candidate against every condition ([`ir::pattern_matches`],
//! the evaluator), so a wrong guess here costs a candidate, never soundness.
//!
//! ## Bounds
//!
//! At most [`MAX_CANDIDATES`] names are tried; when none qualifies the
//! caller reports an error naming `not` and the JSON Pointer.

use super::ir::{Node, Schema};
use super::pattern::{parse, translate_ecma};
use regex_syntax::hir::{Class, Hir, HirKind};
use serde_json::Value;

/// How many names [`candidates`] returns at most.
pub(crate) const MAX_CANDIDATES: usize = 400;

/// A short string the ECMA-262 `pattern` matches (searched, unanchored),
/// or `None` when the walk cannot write one. Not checked here.
pub(crate) fn sample(pattern: &str) -> Option<String> {
    let t = translate_ecma(pattern).ok()?;
    let h = parse(&t).ok()?;
    let mut out = String::new();
    write(&h, &mut out, 0)?;
    Some(out)
}

fn write(h: &Hir, out: &mut String, depth: usize) -> Option<()> {
    if depth > 200 {
        return None;
    }
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => Some(()),
        HirKind::Literal(l) => {
            out.push_str(std::str::from_utf8(&l.0).ok()?);
            Some(())
        }
        HirKind::Class(Class::Unicode(c)) => {
            // Prefer a letter or digit when the class has one.
            let pick = c
                .ranges()
                .iter()
                .flat_map(|r| {
                    ['a', 'A', '0', '_']
                        .into_iter()
                        .filter(move |x| r.start() <= *x && *x <= r.end())
                })
                .next()
                .or_else(|| {
                    c.ranges()
                        .iter()
                        .map(|r| r.start())
                        .find(|ch| !ch.is_control() && *ch != '"' && *ch != '\\')
                })?;
            out.push(pick);
            Some(())
        }
        HirKind::Class(Class::Bytes(c)) => {
            let b = c.ranges().first()?.start();
            if b.is_ascii() && !b.is_ascii_control() {
                out.push(b as char);
                Some(())
            } else {
                None
            }
        }
        HirKind::Repetition(r) => {
            for _ in 0..r.min.min(64) {
                write(&r.sub, out, depth + 1)?;
            }
            Some(())
        }
        HirKind::Capture(c) => write(&c.sub, out, depth + 1),
        HirKind::Concat(v) => {
            for x in v {
                write(x, out, depth + 1)?;
            }
            Some(())
        }
        HirKind::Alternation(v) => {
            // The first alternative that can be written.
            for x in v {
                let mut s = String::new();
                if write(x, &mut s, depth + 1).is_some() {
                    out.push_str(&s);
                    return Some(());
                }
            }
            None
        }
    }
}

/// String constants and pattern samples found in a (name) schema.
fn schema_names(s: &Schema, out: &mut Vec<String>, depth: usize) {
    if depth > 8 {
        return;
    }
    let Schema::Node(n) = s else {
        return;
    };
    node_names(n, out, depth);
}

fn node_names(n: &Node, out: &mut Vec<String>, depth: usize) {
    let vals = n.enumeration.iter().flatten().chain(n.not_values.iter());
    for v in vals {
        if let Value::String(x) = v {
            out.push(x.clone());
        }
    }
    for p in n.patterns.iter().chain(n.not_patterns.iter()) {
        out.extend(sample(&p.value));
    }
    for s in n
        .all_of
        .iter()
        .chain(n.any_of.iter().flatten())
        .chain(n.one_of.iter().flat_map(|g| g.value.iter()))
        .chain(n.nots.iter())
    {
        schema_names(s, out, depth + 1);
    }
}

/// Names to try, best first: samples of `patterns`, the constants and
/// pattern samples of `names`, each also with a short suffix, then short
/// plain names, then the empty name (deduplicated, at most
/// [`MAX_CANDIDATES`]).
pub(crate) fn candidates(patterns: &[&str], names: &[&Schema]) -> Vec<String> {
    let mut seeds: Vec<String> = Vec::new();
    for p in patterns {
        seeds.extend(sample(p));
    }
    for s in names {
        schema_names(s, &mut seeds, 0);
    }
    let mut out: Vec<String> = Vec::new();
    let push = |s: String, out: &mut Vec<String>| {
        if out.len() < MAX_CANDIDATES && !out.contains(&s) {
            out.push(s);
        }
    };
    for s in &seeds {
        push(s.clone(), &mut out);
    }
    const SUFFIXES: [&str; 6] = ["x", "0", "_", "a", "z9", "X"];
    for s in &seeds {
        for x in SUFFIXES {
            push(format!("{s}{x}"), &mut out);
            push(format!("{x}{s}"), &mut out);
        }
    }
    let alphabet: Vec<char> = ('a'..='z')
        .chain('0'..='9')
        .chain(['_', 'A', '-'])
        .collect();
    for a in &alphabet {
        push(a.to_string(), &mut out);
    }
    for a in &alphabet {
        for b in &alphabet {
            push(format!("{a}{b}"), &mut out);
        }
    }
    // The empty name last (a valid key, but an odd one to write).
    if out.len() == MAX_CANDIDATES {
        out.pop();
    }
    push(String::new(), &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::ir::pattern_matches;

    #[test]
    fn samples_match_their_patterns() {
        for p in [
            "a1",
            "^iglu:",
            "^([a-zA-Z0-9_])*$",
            "^x-[a-z]{2,3}$",
            "\\d",
            "^(foo|bar)+baz$",
            "^[^a-z]+$",
        ] {
            let s = sample(p).unwrap_or_else(|| panic!("no sample for {p}"));
            assert_eq!(pattern_matches(p, &s), Some(true), "{p}: {s:?}");
        }
    }

    #[test]
    fn candidates_include_pattern_samples_first() {
        let c = candidates(&["^b2$"], &[]);
        assert_eq!(c[0], "b2");
        assert!(c.len() <= MAX_CANDIDATES);
        assert!(c.contains(&"a".to_string()) && c.contains(&"ab".to_string()));
        assert_eq!(c.last().map(String::as_str), Some(""));
    }
}
