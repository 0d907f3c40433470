//! # "Some key of a kind": complements over keys
//!
//! The complements of `additionalProperties`, a `patternProperties` entry
//! and `propertyNames` require *some* key of a kind ([`SomeExtra`]). They
//! are resolved where the object is generated ([`Gen::resolve_some_extra`]):
//! an `anyOf` over the declared keys that qualify (exact when the keys are
//! closed) and, where extra keys are open, one witness key ([`witness`]),
//! a sound narrowing reported as a warning.

use super::nodes::{blank, conj, node};
use super::*;
use crate::schema::ir::SomeExtra;
use crate::schema::witness;

impl Gen<'_, '_> {
    /// Rewrites each "some key of a kind" requirement ([`SomeExtra`]: the
    /// complement of `additionalProperties`, of a `patternProperties` entry
    /// or of `propertyNames`) of `n` into an `anyOf`: every key `n` can
    /// write that qualifies — `required [k]` with `k`'s value in the
    /// requirement's schema — and, where `n` allows extra keys, one witness
    /// key found by [`witness`] (a sound narrowing, with a warning). With
    /// closed keys and no qualifying key the node is empty; with open keys
    /// and no witness it is an error naming `not`.
    #[inline(never)]
    pub(super) fn resolve_some_extra(
        &mut self,
        n: &mut Node,
        forbid: &[String],
    ) -> Result<(), SchemaError> {
        let reqs = std::mem::take(&mut n.some_extra);
        if reqs.is_empty() {
            return Ok(());
        }
        let extras = self.extras_schema(n);
        let closed = extras.is_none() && n.pattern_properties.is_empty();
        for e in reqs {
            let mut group = Vec::new();
            // The keys an object of `n` can have: declared ones, and
            // required names it does not declare (written in strict mode).
            let any = Schema::Bool(true);
            let keys: Vec<(String, Schema)> = n
                .properties
                .iter()
                .map(|(k, s)| (k.clone(), s.clone()))
                .chain(
                    n.required
                        .iter()
                        .filter(|r| !n.properties.iter().any(|(k, _)| k == *r))
                        .map(|r| (r.clone(), any.clone())),
                )
                .collect();
            for (k, s) in &keys {
                if matches!(s, Schema::Bool(false))
                    || n.forbid_keys.contains(k)
                    || forbid.contains(k)
                {
                    continue;
                }
                if !self.qualifies(&e, k)? {
                    continue;
                }
                group.push(node(Node {
                    required: vec![k.clone()],
                    properties: vec![(k.clone(), e.value.clone())],
                    ..blank(&e.at)
                }));
            }
            if !closed {
                match self.witness_key(n, &e, &keys, extras.as_ref(), forbid)? {
                    Some((w, value)) => {
                        self.doc.warn(
                            &e.at,
                            format!(
                                "the complement under \"not\" is narrowed to objects with the key {w:?} (the object's keys are open)"
                            ),
                        );
                        group.push(node(Node {
                            required: vec![w.clone()],
                            properties: vec![(w, value)],
                            ..blank(&e.at)
                        }));
                    }
                    None if group.is_empty() => {
                        return Err(self.not_error(
                            &e.at,
                            "a keyword over keys (the object's keys are open, and no witness key was found)",
                        ));
                    }
                    None => {}
                }
            }
            if group.is_empty() {
                n.never = true;
            } else {
                n.any_of.push(group);
            }
        }
        Ok(())
    }

    /// Whether the key `k` is of the kind `e` asks for (an error where a
    /// pattern cannot be run; `false` where the evaluator cannot tell).
    fn qualifies(&mut self, e: &SomeExtra, k: &str) -> Result<bool, SchemaError> {
        if e.names.iter().any(|x| x == k) {
            return Ok(false);
        }
        let run = |p: &ir::Located<String>| {
            ir::pattern_matches(&p.value, k).ok_or_else(|| SchemaError::Pattern {
                pointer: p.at.clone(),
                detail: format!("{:?} cannot be compiled", p.value),
            })
        };
        for p in &e.patterns {
            if run(p)? {
                return Ok(false);
            }
        }
        if let Some(p) = &e.within {
            if !run(p)? {
                return Ok(false);
            }
        }
        if let Some(s) = &e.name_out {
            let key = serde_json::Value::String(k.to_string());
            let mut ev = eval::Eval::new(self.doc);
            // The name must be known to fail `s`.
            if ev.schema(s, &key, eval::Polarity::Neg) != Some(false) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// An extra key of `n` (none of `keys`, nor a key `n` or the caller
    /// forbids) of the kind `e` asks for, with
    /// the schema its value gets: `e.value` with what `n` says of the key
    /// (its `patternProperties` schemas, else its extra-key schema).
    fn witness_key(
        &mut self,
        n: &Node,
        e: &SomeExtra,
        keys: &[(String, Schema)],
        extras: Option<&Schema>,
        forbid: &[String],
    ) -> Result<Option<(String, Schema)>, SchemaError> {
        let mut pats: Vec<&str> = e.within.iter().map(|p| p.value.as_str()).collect();
        pats.extend(n.pattern_properties.iter().map(|(p, _)| p.value.as_str()));
        let mut names: Vec<&Schema> = e.name_out.iter().collect();
        names.extend(n.property_names.iter());
        'next: for w in witness::candidates(&pats, &names) {
            if keys.iter().any(|(k, _)| *k == w)
                || n.forbid_keys.contains(&w)
                || forbid.contains(&w)
                || object::key_units(&w).is_none()
            {
                continue;
            }
            if !self.qualifies(e, &w).unwrap_or(false) {
                continue;
            }
            let key = serde_json::Value::String(w.clone());
            for s in &n.property_names {
                let mut ev = eval::Eval::new(self.doc);
                if ev.schema(s, &key, eval::Polarity::Pos) != Some(true) {
                    continue 'next;
                }
            }
            let mut parts = vec![e.value.clone()];
            for (p, ps) in &n.pattern_properties {
                match ir::pattern_matches(&p.value, &w) {
                    Some(true) => parts.push(ps.clone()),
                    Some(false) => {}
                    None => continue 'next,
                }
            }
            if parts.len() == 1 {
                match extras {
                    Some(x) => parts.push(x.clone()),
                    None => continue,
                }
            }
            return Ok(Some((w, conj(&e.at, parts))));
        }
        Ok(None)
    }
}
