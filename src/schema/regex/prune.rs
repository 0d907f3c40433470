//! # Keeping the expansion of `anyOf` groups small
//!
//! A node's `anyOf` groups (its own, and those `not`, `if`, dependencies and
//! exactly-one `oneOf` lowered into it) are a conjunction of disjunctions;
//! the generator distributes them one group at a time ([`Gen::branches`]),
//! so the work is the number of *combinations* of branches. Three exact
//! rewrites keep that number near the number of combinations that can
//! validate anything:
//!
//! - [`dedup_groups`]: a group equal to another (the same branches, e.g. a
//!   declared key and a `patternProperties` entry naming the same `oneOf`
//!   of `$ref`s) is dropped: `A ∧ A = A`.
//! - [`Gen::prune_groups`]: a branch whose conjunction with the rest of the
//!   node is provably empty ([`Gen::provably_empty`]: no type left, a
//!   required key that is forbidden or whose value admits nothing) is left
//!   out of `anyOf` groups and replaced by `false` in `oneOf` groups (the
//!   branch numbers stay those of the schema). The generator would write
//!   nothing for it; it is checked again below each choice, so a
//!   contradiction between two groups cuts the whole subtree.
//! - [`Gen::discriminated_conditionals`]: several `if`s that each test one
//!   key against listed values (`if: {properties: {kind: {const: "a"}}}`)
//!   are one case split over that key (absent, each listed value, any other
//!   value) instead of `2ⁿ` combinations of `if` / `¬if`; in each case every
//!   `if` is decided, so it takes its `then` or its `else`.
//!
//! What is left is bounded by the combinations *explored* per node, 64 ×
//! [`SchemaOptions::max_branches`], and by the text limit
//! [`SchemaOptions::max_regex_len`] on what they write.

use super::nodes::{blank, conj, node};
use super::*;
use crate::schema::ir::Conditional;

/// Combinations of branches explored per node, per unit of
/// [`SchemaOptions::max_branches`].
pub(super) const EXPLORED_PER_BRANCH: u64 = 64;

/// Drops `anyOf` groups equal to an earlier one, and `oneOf` groups equal
/// to an earlier one (`A ∧ A = A`; equality as [`same_schema`] decides it).
pub(super) fn dedup_groups(n: &mut Node) {
    if n.any_of.len() > 1 {
        let mut kept: Vec<Vec<Schema>> = Vec::new();
        for g in std::mem::take(&mut n.any_of) {
            if !kept.iter().any(|k| same_group(k, &g)) {
                kept.push(g);
            }
        }
        n.any_of = kept;
    }
    if n.one_of.len() > 1 {
        let mut kept: Vec<ir::Located<Vec<Schema>>> = Vec::new();
        for g in std::mem::take(&mut n.one_of) {
            if !kept.iter().any(|k| same_group(&k.value, &g.value)) {
                kept.push(g);
            }
        }
        n.one_of = kept;
    }
}

/// Whether a node has no keyword at all (its pointer aside).
fn no_keywords(n: &Node) -> bool {
    n.is_trivial()
        && n.format_bounds.is_none()
        && n.dependent_required.is_empty()
        && n.dependent_schemas.is_empty()
        && n.some_extra.is_empty()
}

fn same_group(a: &[Schema], b: &[Schema]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_schema(x, y))
}

/// Whether two schemas are surely the same: the same boolean, or `$ref`s
/// to the same target (where they are written does not change what they
/// mean). Anything else is "not known to be the same".
fn same_schema(a: &Schema, b: &Schema) -> bool {
    match (a, b) {
        (Schema::Bool(x), Schema::Bool(y)) => x == y,
        (Schema::Ref { target: x, .. }, Schema::Ref { target: y, .. }) => x == y,
        _ => false,
    }
}

impl<'d, 'a> Gen<'d, 'a> {
    /// Counts one combination explored under the current node and fails
    /// past `64 × max_branches` of them.
    pub(super) fn explore(&mut self, at: &Pointer) -> Result<(), SchemaError> {
        self.explored += 1;
        let limit = (self.opts.max_branches as u64).saturating_mul(EXPLORED_PER_BRANCH);
        if self.explored > limit {
            return Err(SchemaError::TooBig {
                what: "anyOf/oneOf branch combinations explored".into(),
                pointer: at.clone(),
                size: self.explored,
                limit,
                knob: "max_branches",
            });
        }
        Ok(())
    }

    /// Leaves out the branches of `n`'s groups that cannot validate
    /// together with the rest of `n` (see the module essay). Only where the
    /// groups multiply past `max_branches`: smaller expansions are left as
    /// they were.
    #[inline(never)]
    pub(super) fn prune_groups(&mut self, n: &mut Node, forbid: &[String]) {
        let product = n
            .any_of
            .iter()
            .map(|g| g.len() as u64)
            .chain(n.one_of.iter().map(|g| g.value.len() as u64))
            .fold(1u64, |p, k| p.saturating_mul(k));
        if product <= self.opts.max_branches as u64 {
            return;
        }
        let mut core = n.clone();
        core.any_of.clear();
        core.one_of.clear();
        for g in n.any_of.iter_mut() {
            let mut kept = Vec::with_capacity(g.len());
            for b in std::mem::take(g) {
                if !self.empty_with(&core, &b, forbid) {
                    kept.push(b);
                }
            }
            *g = kept;
        }
        for g in n.one_of.iter_mut() {
            for b in g.value.iter_mut() {
                if !matches!(b, Schema::Bool(false)) && self.empty_with(&core, b, forbid) {
                    *b = Schema::Bool(false);
                }
            }
        }
    }

    /// Whether `core ∧ b` provably generates nothing.
    fn empty_with(&mut self, core: &Node, b: &Schema, forbid: &[String]) -> bool {
        let mut entered = Vec::new();
        let bn = match self.schema_node(b, &mut entered) {
            Ok(Some(bn)) => bn,
            Ok(None) => return matches!(b, Schema::Bool(false)),
            Err(_) => return false,
        };
        match ir::merge(core, &bn) {
            Ok(m) => self.provably_empty(&m, forbid, 0),
            Err(_) => false,
        }
    }

    /// Whether the generator surely writes nothing for `n` (its groups
    /// aside: they only narrow it). Sound, not complete: `false` is "not
    /// known".
    pub(super) fn provably_empty(&mut self, n: &Node, forbid: &[String], depth: usize) -> bool {
        if n.never {
            return true;
        }
        let t = self.gen_types(n);
        if t.is_empty() {
            return true;
        }
        if let Some(vals) = &n.enumeration {
            if vals
                .iter()
                .all(|v| !t.admits(v) || satisfies(n, v) == Some(false))
            {
                return true;
            }
        }
        if t != Types::OBJECT {
            return false;
        }
        for r in &n.required {
            if forbid.contains(r) || n.forbid_keys.contains(r) {
                return true;
            }
        }
        if depth >= 3 {
            return false;
        }
        for r in &n.required {
            let Some((_, s)) = n.properties.iter().find(|(k, _)| k == r) else {
                continue;
            };
            if self.schema_provably_empty(s, depth + 1) {
                return true;
            }
        }
        false
    }

    /// [`Gen::provably_empty`] of a sub-schema (a cut recursion is "not
    /// known": the pushdown engine would call it instead).
    fn schema_provably_empty(&mut self, s: &Schema, depth: usize) -> bool {
        match s {
            Schema::Bool(b) => !b,
            _ => {
                let mut entered = Vec::new();
                match self.schema_node(s, &mut entered) {
                    Ok(Some(sn)) => self.provably_empty(&sn, &[], depth),
                    _ => false,
                }
            }
        }
    }

    /// The values of `p` that a discriminating `if` tests, when `cond` is
    /// exactly `{properties: {p: {enum/const}}}` (a `type` beside the
    /// listed values only filters them).
    fn discriminator(&mut self, cond: &Schema) -> Option<(String, Vec<Value>)> {
        let mut entered = Vec::new();
        let c = self.schema_node(cond, &mut entered).ok()??;
        if c.types.is_some() || c.enumeration.is_some() || c.properties.len() != 1 {
            return None;
        }
        let only_properties = Node {
            properties: Vec::new(),
            ..c.clone()
        };
        if !no_keywords(&only_properties) {
            return None;
        }
        let (p, s) = &c.properties[0];
        let sn = self.schema_node(s, &mut entered).ok()??;
        let vals = sn.enumeration.clone()?;
        let rest = Node {
            types: None,
            enumeration: None,
            ..sn.clone()
        };
        if !no_keywords(&rest) {
            return None;
        }
        let t = sn.types.unwrap_or(Types::ALL);
        Some((
            p.clone(),
            vals.into_iter().filter(|v| t.admits(v)).collect(),
        ))
    }

    /// Rewrites the `if`s of `n` that test one key against listed values
    /// (two or more on the same key) into one case split over that key.
    #[inline(never)]
    pub(super) fn discriminated_conditionals(&mut self, n: &mut Node) {
        if n.conditionals.len() < 2 {
            return;
        }
        let mut tested: Vec<Option<(String, Vec<Value>)>> = Vec::new();
        for c in &n.conditionals {
            let d = self.discriminator(&c.cond);
            tested.push(d);
        }
        let mut keys: Vec<String> = Vec::new();
        for (p, _) in tested.iter().flatten() {
            if !keys.contains(p) && tested.iter().flatten().filter(|(q, _)| q == p).count() >= 2 {
                keys.push(p.clone());
            }
        }
        if keys.is_empty() {
            return;
        }
        let at = n.at.clone();
        let all = std::mem::take(&mut n.conditionals);
        for key in &keys {
            let mine: Vec<(&Conditional, &Vec<Value>)> = all
                .iter()
                .zip(&tested)
                .filter_map(|(c, d)| match d {
                    Some((p, v)) if p == key => Some((c, v)),
                    _ => None,
                })
                .collect();
            let then = |c: &Conditional| c.then.clone().unwrap_or(Schema::Bool(true));
            let other = |c: &Conditional| c.otherwise.clone().unwrap_or(Schema::Bool(true));
            let mut listed: Vec<Value> = Vec::new();
            for (_, vals) in &mine {
                for v in *vals {
                    if !listed.iter().any(|w| ir::json_eq(w, v)) {
                        listed.push(v.clone());
                    }
                }
            }
            let mut group = Vec::new();
            // The key absent (or not an object): every `if` holds.
            let mut parts = vec![node(Node {
                forbid_keys: vec![key.clone()],
                ..blank(&at)
            })];
            parts.extend(mine.iter().map(|(c, _)| then(c)));
            group.push(conj(&at, parts));
            // An object holding the key, its value as `value` says.
            let with_key = |value: Schema| {
                node(Node {
                    types: Some(Types::OBJECT),
                    required: vec![key.clone()],
                    properties: vec![(key.clone(), value)],
                    ..blank(&at)
                })
            };
            // The key present with one listed value.
            for v in &listed {
                let mut parts = vec![with_key(node(Node {
                    enumeration: Some(vec![v.clone()]),
                    ..blank(&at)
                }))];
                for (c, vals) in &mine {
                    parts.push(if vals.iter().any(|w| ir::json_eq(w, v)) {
                        then(c)
                    } else {
                        other(c)
                    });
                }
                group.push(conj(&at, parts));
            }
            // The key present with any other value: no `if` holds.
            let mut parts = vec![with_key(node(Node {
                not_values: listed.clone(),
                ..blank(&at)
            }))];
            parts.extend(mine.iter().map(|(c, _)| other(c)));
            group.push(conj(&at, parts));
            n.any_of.push(group);
        }
        for (c, d) in all.into_iter().zip(tested) {
            match d {
                Some((p, _)) if keys.contains(&p) => {}
                _ => n.conditionals.push(c),
            }
        }
    }
}
