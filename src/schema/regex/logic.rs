//! # The boolean algebra of JSON Schema: `not`, `if`, dependencies, `oneOf`
//!
//! A regex has union (alternation) but no intersection or complement, so the
//! generator works with sets of *IR nodes* instead: a node is a conjunction
//! of keywords, an `anyOf` group a disjunction, and [`ir::merge`] intersects
//! two nodes exactly. Everything here is lowered into `anyOf` groups before
//! a node is generated ([`Gen::lower_logic`]):
//!
//! - `if`/`then`/`else` is `(if ∧ then) ∨ (¬if ∧ else)`;
//! - `dependentRequired {k: [d…]}` is `required [k, d…] ∨ k absent`, and
//!   `dependentSchemas {k: S}` (and both forms of draft-4/7 `dependencies`)
//!   `(required [k] ∧ S) ∨ k absent`;
//! - `not S` is the *complement* of `S` ([`Gen::negate`]), written as a
//!   disjunction of nodes in negation normal form: `¬(K₁ ∧ … ∧ Kₙ)` is
//!   `¬K₁ ∨ … ∨ ¬Kₙ`, where each keyword `K` only constrains values of its
//!   own type (`¬minLength 3` is "a string of at most 2 characters", and the
//!   other types come from the complement of `type`). Applicators recurse:
//!   `¬allOf` is a disjunction of complements, `¬anyOf` a conjunction (an
//!   `anyOf` group per member), `¬oneOf` "none or at least two", `¬not S` is
//!   `S`, `¬properties {p: S}` is "`p` present with a value in `¬S`",
//!   `¬items S` is `contains ¬S`;
//! - `oneOf` whose branches cannot be proven disjoint is *exactly one of*:
//!   branch `i` is `Bᵢ ∧ ⋀ⱼ ¬Bⱼ` over the branches it may overlap
//!   ([`Gen::exactly_one`]).
//!
//! ## Soundness
//!
//! The complement is computed from what a schema *validates* (JSON Schema's
//! semantics, not the generator's narrowed strict mode), and every node it
//! returns validates only values outside `S`. Where a complement cannot be
//! written as nodes (`¬format`, `¬multipleOf`, `¬uniqueItems`, and the
//! complements over keys against open keys), it is narrowed to a subset when one is obvious and
//! documented below, and is otherwise an error naming `not` and the JSON
//! Pointer. A recursive `$ref` under `not` cannot be unrolled (cutting the
//! recursion would *widen* the complement): past
//! [`SchemaOptions::max_depth`] it is an error.
//!
//! The complements over keys — `¬additionalProperties`, `¬patternProperties`
//! (`{p: S}`: some key matching `p` with a value in `¬S`) and
//! `¬propertyNames` (`S`: some key whose name fails `S`; `¬false` is
//! `minProperties: 1`) — are "some key of a kind" requirements
//! ([`SomeExtra`]), resolved where the object is generated
//! ([`Gen::resolve_some_extra`]): an `anyOf` over the declared keys that
//! qualify (exact when the keys are closed), and where extra keys are open,
//! one witness key ([`witness`]).
//!
//! Narrowings (subsets of the complement): `¬type: integer` among numbers is
//! the numbers written with a fractional part and no exponent, and only when
//! the node has no numeric bounds; `¬enum` with an array or object value
//! leaves out arrays of the lengths (objects of the sizes) excluded; a
//! complement over keys against open keys offers one witness key name (see
//! `schema/witness.rs`; with a warning naming the key).
//!
//! ## Bounds
//!
//! A complement has at most [`SchemaOptions::max_branches`] disjuncts (the
//! error names `not` and the pointer); the products of the `anyOf` groups it
//! creates are bounded by the same knob in [`Gen::branches`].

use super::*;
use crate::schema::ir::{Conditional, Contains, SomeExtra};
use crate::schema::numeric::Bound;
use crate::schema::witness;

/// A node with only `at` set.
pub(super) fn blank(at: &Pointer) -> Node {
    Node {
        at: at.clone(),
        ..Default::default()
    }
}

/// The conjunction of `parts` (`true` when empty).
pub(super) fn conj(at: &Pointer, parts: Vec<Schema>) -> Schema {
    let parts: Vec<Schema> = parts
        .into_iter()
        .filter(|p| !matches!(p, Schema::Bool(true)))
        .collect();
    if parts.iter().any(|p| matches!(p, Schema::Bool(false))) {
        return Schema::Bool(false);
    }
    match parts.len() {
        0 => Schema::Bool(true),
        1 => parts.into_iter().next().expect("one"),
        _ => Schema::Node(Box::new(Node {
            all_of: parts,
            ..blank(at)
        })),
    }
}

/// The disjunction of `parts` (`false` when empty).
pub(super) fn disj(at: &Pointer, parts: Vec<Schema>) -> Schema {
    if parts.iter().any(|p| matches!(p, Schema::Bool(true))) {
        return Schema::Bool(true);
    }
    let parts: Vec<Schema> = parts
        .into_iter()
        .filter(|p| !matches!(p, Schema::Bool(false)))
        .collect();
    match parts.len() {
        0 => Schema::Bool(false),
        1 => parts.into_iter().next().expect("one"),
        _ => Schema::Node(Box::new(Node {
            any_of: vec![parts],
            ..blank(at)
        })),
    }
}

fn node(n: Node) -> Schema {
    Schema::Node(Box::new(n))
}

/// The complement of a type set among JSON values, and whether it includes
/// the non-integer numbers (`integer` without `number` in `t`).
fn complement_types(t: Types) -> (Types, bool) {
    let mut bits = Types::ALL.0 & !t.0;
    let fractional = t.has(Types::INTEGER) && !t.has(Types::NUMBER);
    if t.has_numeric() {
        bits &= !(Types::INTEGER.0 | Types::NUMBER.0);
    }
    (Types(bits), fractional)
}

impl<'d, 'a> Gen<'d, 'a> {
    fn not_error(&self, at: &Pointer, detail: &str) -> SchemaError {
        SchemaError::UnsupportedValue {
            what: "keyword \"not\"".into(),
            pointer: at.clone(),
            detail: format!("the complement of {detail} is not supported"),
        }
    }

    /// A complement error re-addressed to the keyword that needed it
    /// (`not`, `if`) and the schema that holds it; the detail keeps where
    /// the offending sub-schema is.
    fn owner_error(e: SchemaError, keyword: &str, owner: &Pointer) -> SchemaError {
        match e {
            SchemaError::UnsupportedValue {
                pointer, detail, ..
            } => SchemaError::UnsupportedValue {
                what: format!("keyword \"{keyword}\""),
                pointer: owner.clone(),
                detail: format!("{detail} (at {pointer})"),
            },
            other => other,
        }
    }

    /// Rewrites `not`, `if`/`then`/`else`, `dependentRequired` and
    /// `dependentSchemas` of `n` into `anyOf` groups.
    // Kept out of the recursive generator's frames (deep schemas).
    #[inline(never)]
    pub(super) fn lower_logic(&mut self, n: &mut Node) -> Result<(), SchemaError> {
        let at = n.at.clone();
        for s in std::mem::take(&mut n.nots) {
            match self
                .negate(&s, &at)
                .map_err(|e| Self::owner_error(e, "not", &at))
            {
                Ok(g) => n.any_of.push(g),
                // Lenient: the `not` is ignored (with a warning).
                Err(e) => self.doc.soft(e, self.opts.lenient)?,
            }
        }
        for Conditional {
            cond,
            then,
            otherwise,
            at: cat,
        } in std::mem::take(&mut n.conditionals)
        {
            let yes = conj(&cat, vec![cond.clone(), then.unwrap_or(Schema::Bool(true))]);
            let not_cond = self
                .negate(&cond, &cat)
                .map_err(|e| Self::owner_error(e, "if", &at))?;
            let no = conj(
                &cat,
                vec![
                    disj(&cat, not_cond),
                    otherwise.unwrap_or(Schema::Bool(true)),
                ],
            );
            n.any_of.push(vec![yes, no]);
        }
        for (k, deps) in std::mem::take(&mut n.dependent_required) {
            if n.required.contains(&k) {
                for d in deps {
                    if !n.required.contains(&d) {
                        n.required.push(d);
                    }
                }
                continue;
            }
            let mut req = vec![k.clone()];
            req.extend(deps);
            n.any_of.push(vec![
                node(Node {
                    required: req,
                    ..blank(&at)
                }),
                node(Node {
                    forbid_keys: vec![k],
                    ..blank(&at)
                }),
            ]);
        }
        for (k, s) in std::mem::take(&mut n.dependent_schemas) {
            let present = conj(
                &at,
                vec![
                    node(Node {
                        required: vec![k.clone()],
                        ..blank(&at)
                    }),
                    s,
                ],
            );
            if n.required.contains(&k) {
                n.any_of.push(vec![present]);
                continue;
            }
            n.any_of.push(vec![
                present,
                node(Node {
                    forbid_keys: vec![k],
                    ..blank(&at)
                }),
            ]);
        }
        Ok(())
    }

    /// The complement of `s` as a disjunction (an empty list: nothing).
    /// `at`: where the `not` (or what needs the complement) is.
    pub(super) fn negate(&mut self, s: &Schema, at: &Pointer) -> Result<Vec<Schema>, SchemaError> {
        if self.nesting >= MAX_NESTING {
            return Err(SchemaError::TooBig {
                what: "\"not\" nesting".into(),
                pointer: at.clone(),
                size: self.nesting as u64,
                limit: MAX_NESTING as u64,
                knob: "max_depth",
            });
        }
        self.nesting += 1;
        let r = self.negate_inner(s, at);
        self.nesting -= 1;
        let r = r?;
        if r.len() > self.opts.max_branches {
            return Err(SchemaError::TooBig {
                what: "\"not\" complement branches".into(),
                pointer: at.clone(),
                size: r.len() as u64,
                limit: self.opts.max_branches as u64,
                knob: "max_branches",
            });
        }
        Ok(r)
    }

    fn negate_inner(&mut self, s: &Schema, _at: &Pointer) -> Result<Vec<Schema>, SchemaError> {
        match s {
            Schema::Bool(true) => Ok(Vec::new()),
            Schema::Bool(false) => Ok(vec![Schema::Bool(true)]),
            Schema::Ref { target, at: rat } => {
                let count = self.neg_active.get(target).copied().unwrap_or(0);
                if count > self.opts.max_depth {
                    return Err(SchemaError::TooBig {
                        what: "\"not\" over a recursive $ref".into(),
                        pointer: rat.clone(),
                        size: count as u64,
                        limit: self.opts.max_depth as u64,
                        knob: "max_depth",
                    });
                }
                *self.neg_active.entry(target.clone()).or_insert(0) += 1;
                let r = self.doc.get(target).and_then(|t| self.negate(&t, rat));
                *self.neg_active.get_mut(target).expect("entered") -= 1;
                r
            }
            Schema::Node(n) => self.negate_node(n),
        }
    }

    /// `¬n` in negation normal form (see the module notes).
    // Kept out of the recursive generator's frames (deep schemas).
    #[inline(never)]
    fn negate_node(&mut self, n: &Node) -> Result<Vec<Schema>, SchemaError> {
        let at = &n.at;
        let mut out: Vec<Schema> = Vec::new();
        if n.never {
            return Ok(vec![Schema::Bool(true)]);
        }
        // `$ref` with siblings means "both" in 2019-09+, "the ref alone"
        // before: the complement differs, so refuse the ambiguous case.
        let has_sibling_ref = n
            .all_of
            .iter()
            .any(|m| matches!(m, Schema::Ref { at: r, .. } if r == at));
        if has_sibling_ref {
            let mut rest = n.clone();
            rest.all_of
                .retain(|m| !matches!(m, Schema::Ref { at: r, .. } if r == at));
            if !rest.is_trivial() || !rest.all_of.is_empty() {
                return Err(self.not_error(at, "$ref with sibling keywords (draft-dependent)"));
            }
        }
        let t = n.types.unwrap_or(Types::ALL);
        let typed = |k: Types, extra: Node| -> Option<Schema> {
            let k = t.intersect(k);
            if k.is_empty() {
                None
            } else {
                Some(node(Node {
                    types: Some(k),
                    ..extra
                }))
            }
        };
        if let Some(ty) = n.types {
            let (comp, fractional) = complement_types(ty);
            if !comp.is_empty() {
                out.push(node(Node {
                    types: Some(comp),
                    ..blank(at)
                }));
            }
            if fractional {
                out.push(node(Node {
                    types: Some(Types::NUMBER),
                    fractional: true,
                    ..blank(at)
                }));
            }
        }
        if !n.not_types.is_empty() {
            out.push(node(Node {
                types: Some(n.not_types),
                ..blank(at)
            }));
        }
        if let Some(e) = &n.enumeration {
            out.push(node(Node {
                types: Some(t),
                not_values: e.clone(),
                ..blank(at)
            }));
        }
        if !n.not_values.is_empty() {
            out.push(node(Node {
                enumeration: Some(n.not_values.clone()),
                ..blank(at)
            }));
        }
        // strings
        if let Some(m) = n.min_length.filter(|m| *m > 0) {
            out.extend(typed(
                Types::STRING,
                Node {
                    max_length: Some(m - 1),
                    ..blank(at)
                },
            ));
        }
        if let Some(m) = n.max_length {
            out.extend(typed(
                Types::STRING,
                Node {
                    min_length: Some(m + 1),
                    ..blank(at)
                },
            ));
        }
        if t.has(Types::STRING) {
            for p in &n.patterns {
                out.extend(typed(
                    Types::STRING,
                    Node {
                        not_patterns: vec![p.clone()],
                        ..blank(at)
                    },
                ));
            }
            for p in &n.not_patterns {
                out.extend(typed(
                    Types::STRING,
                    Node {
                        patterns: vec![p.clone()],
                        ..blank(at)
                    },
                ));
            }
            if let Some(f) = n.formats.first() {
                return Err(self.not_error(&f.at, "\"format\""));
            }
        }
        // numbers
        if t.has_numeric() && n.format_bounds.is_some() {
            // Bounds from an integer `format` are a narrowing validators do
            // not share: their complement would offer numbers that fail.
            return Err(self.not_error(at, "\"format\""));
        }
        if let Some(b) = &n.minimum {
            out.extend(typed(
                Types::NUMBER,
                Node {
                    maximum: Some(Bound {
                        value: b.value.clone(),
                        exclusive: !b.exclusive,
                    }),
                    ..blank(at)
                },
            ));
        }
        if let Some(b) = &n.maximum {
            out.extend(typed(
                Types::NUMBER,
                Node {
                    minimum: Some(Bound {
                        value: b.value.clone(),
                        exclusive: !b.exclusive,
                    }),
                    ..blank(at)
                },
            ));
        }
        if let Some(m) = n.multiple_of.as_ref().filter(|_| t.has_numeric()) {
            // The non-integers, and the integers that are not multiples
            // (see `residue.rs`; a fractional `multipleOf` fails closed).
            if !m.value.is_integer() {
                return Err(self.not_error(
                    &m.at,
                    "a fractional \"multipleOf\" (floating-point semantics)",
                ));
            }
            out.extend(typed(
                Types::NUMBER,
                Node {
                    fractional: true,
                    ..blank(at)
                },
            ));
            out.extend(typed(
                Types::INTEGER,
                Node {
                    not_multiple_of: vec![m.clone()],
                    ..blank(at)
                },
            ));
        }
        if t.has_numeric() && !n.not_multiple_of.is_empty() {
            return Err(self.not_error(at, "a complemented \"multipleOf\""));
        }
        if n.fractional {
            out.extend(typed(Types::INTEGER, blank(at)));
        }
        // arrays
        if let Some(m) = n.min_items.filter(|m| *m > 0) {
            out.extend(typed(
                Types::ARRAY,
                Node {
                    max_items: Some(m - 1),
                    ..blank(at)
                },
            ));
        }
        if let Some(m) = n.max_items {
            out.extend(typed(
                Types::ARRAY,
                Node {
                    min_items: Some(m + 1),
                    ..blank(at)
                },
            ));
        }
        if t.has(Types::ARRAY) && n.unique_items {
            return Err(self.not_error(at, "\"uniqueItems\""));
        }
        if t.has(Types::ARRAY) {
            let k = n.prefix_items.as_ref().map_or(0, Vec::len);
            for (i, p) in n.prefix_items.iter().flatten().enumerate() {
                let np = self.negate(p, at)?;
                if np.is_empty() {
                    continue;
                }
                let mut pre = vec![Schema::Bool(true); i];
                pre.push(disj(at, np));
                out.extend(typed(
                    Types::ARRAY,
                    Node {
                        min_items: Some(i as u64 + 1),
                        prefix_items: Some(pre),
                        ..blank(at)
                    },
                ));
            }
            if let Some(it) = &n.items {
                let ni = self.negate(it, at)?;
                if !ni.is_empty() {
                    if k > 0 {
                        return Err(self.not_error(at, "\"items\" after \"prefixItems\""));
                    }
                    out.extend(typed(
                        Types::ARRAY,
                        Node {
                            contains: vec![Contains {
                                schema: disj(at, ni),
                                min: 1,
                                max: None,
                                at: at.clone(),
                            }],
                            ..blank(at)
                        },
                    ));
                }
            }
            for c in &n.contains {
                // Fewer than `min` matching items, or more than `max`.
                if c.min > 0 {
                    out.extend(typed(
                        Types::ARRAY,
                        Node {
                            contains: vec![Contains {
                                min: 0,
                                max: Some(c.min - 1),
                                ..c.clone()
                            }],
                            ..blank(at)
                        },
                    ));
                }
                if let Some(m) = c.max {
                    out.extend(typed(
                        Types::ARRAY,
                        Node {
                            contains: vec![Contains {
                                min: m + 1,
                                max: None,
                                ..c.clone()
                            }],
                            ..blank(at)
                        },
                    ));
                }
            }
        }
        // objects
        if t.has(Types::OBJECT) {
            let object = |extra: Node| typed(Types::OBJECT, extra);
            for r in &n.required {
                out.extend(object(Node {
                    forbid_keys: vec![r.clone()],
                    ..blank(at)
                }));
            }
            for f in &n.forbid_keys {
                out.extend(object(Node {
                    required: vec![f.clone()],
                    ..blank(at)
                }));
            }
            for (k, s) in &n.properties {
                let ns = self.negate(s, at)?;
                if ns.is_empty() {
                    continue;
                }
                out.extend(object(Node {
                    required: vec![k.clone()],
                    properties: vec![(k.clone(), disj(at, ns))],
                    ..blank(at)
                }));
            }
            for (p, ps) in &n.pattern_properties {
                // Some key matching `p` (declared or not) whose value is in
                // `¬ps`.
                let np = self.negate(ps, at)?;
                if np.is_empty() {
                    continue;
                }
                out.extend(object(Node {
                    some_extra: vec![SomeExtra {
                        names: Vec::new(),
                        patterns: Vec::new(),
                        within: Some(p.clone()),
                        name_out: None,
                        value: disj(at, np),
                        at: at.clone(),
                    }],
                    ..blank(at)
                }));
            }
            if let Some(a) = n.additional.as_ref() {
                // Some key outside the declared names and patterns whose
                // value is in `¬a` (resolved where the keys are closed,
                // see `Gen::resolve_some_extra`).
                let na = self.negate(a, at)?;
                if !na.is_empty() {
                    out.extend(object(Node {
                        some_extra: vec![SomeExtra {
                            names: n.properties.iter().map(|(k, _)| k.clone()).collect(),
                            patterns: n
                                .pattern_properties
                                .iter()
                                .map(|(p, _)| p.clone())
                                .collect(),
                            within: None,
                            name_out: None,
                            value: disj(at, na),
                            at: at.clone(),
                        }],
                        ..blank(at)
                    }));
                }
            }
            if !n.some_extra.is_empty() {
                return Err(self.not_error(at, "\"additionalProperties\" twice"));
            }
            for pn in &n.property_names {
                // Some key whose name fails `pn`.
                if matches!(pn, Schema::Bool(true)) {
                    continue;
                }
                if matches!(pn, Schema::Bool(false)) {
                    // Every name fails `false`: any key will do.
                    out.extend(object(Node {
                        min_properties: Some(1),
                        ..blank(at)
                    }));
                    continue;
                }
                out.extend(object(Node {
                    some_extra: vec![SomeExtra {
                        names: Vec::new(),
                        patterns: Vec::new(),
                        within: None,
                        name_out: Some(pn.clone()),
                        value: Schema::Bool(true),
                        at: at.clone(),
                    }],
                    ..blank(at)
                }));
            }
            if let Some(m) = n.min_properties.filter(|m| *m > 0) {
                out.extend(object(Node {
                    max_properties: Some(m - 1),
                    ..blank(at)
                }));
            }
            if let Some(m) = n.max_properties {
                out.extend(object(Node {
                    min_properties: Some(m + 1),
                    ..blank(at)
                }));
            }
            for (k, deps) in &n.dependent_required {
                for d in deps {
                    out.extend(object(Node {
                        required: vec![k.clone()],
                        forbid_keys: vec![d.clone()],
                        ..blank(at)
                    }));
                }
            }
            for (k, s) in &n.dependent_schemas {
                let ns = self.negate(s, at)?;
                if ns.is_empty() {
                    continue;
                }
                out.extend(object(Node {
                    required: vec![k.clone()],
                    any_of: vec![ns],
                    ..blank(at)
                }));
            }
        }
        // applicators
        for m in &n.all_of {
            out.extend(self.negate(m, at)?);
        }
        for g in &n.any_of {
            let mut groups = Vec::new();
            for b in g {
                groups.push(self.negate(b, at)?);
            }
            if groups.iter().all(|g| !g.is_empty()) {
                out.push(node(Node {
                    any_of: groups,
                    ..blank(at)
                }));
            }
        }
        for g in &n.one_of {
            // None of the branches, or at least two.
            let mut groups = Vec::new();
            for b in &g.value {
                groups.push(self.negate(b, &g.at)?);
            }
            if groups.iter().all(|g| !g.is_empty()) {
                out.push(node(Node {
                    any_of: groups,
                    ..blank(&g.at)
                }));
            }
            for i in 0..g.value.len() {
                for j in i + 1..g.value.len() {
                    out.push(conj(&g.at, vec![g.value[i].clone(), g.value[j].clone()]));
                }
            }
        }
        for s in &n.nots {
            out.push(s.clone());
        }
        for c in &n.conditionals {
            // (if ∧ ¬then) ∨ (¬if ∧ ¬else)
            if let Some(th) = &c.then {
                let nt = self.negate(th, &c.at)?;
                if !nt.is_empty() {
                    out.push(conj(&c.at, vec![c.cond.clone(), disj(&c.at, nt)]));
                }
            }
            if let Some(el) = &c.otherwise {
                let ne = self.negate(el, &c.at)?;
                let nc = self.negate(&c.cond, &c.at)?;
                if !ne.is_empty() && !nc.is_empty() {
                    out.push(conj(&c.at, vec![disj(&c.at, nc), disj(&c.at, ne)]));
                }
            }
        }
        Ok(out)
    }

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

    /// Branch `i` of a `oneOf` made exact: `Bᵢ ∧ ¬Bⱼ` for every `j` in
    /// `others`.
    // Kept out of the recursive generator's frames (deep schemas).
    #[inline(never)]
    pub(super) fn exactly_one(
        &mut self,
        branch: &Schema,
        others: &[&Schema],
        at: &Pointer,
    ) -> Result<Schema, SchemaError> {
        let mut parts = vec![branch.clone()];
        for o in others {
            let no = self.negate(o, at)?;
            parts.push(disj(at, no));
        }
        Ok(conj(at, parts))
    }

    /// Arrays with `contains`: between `min` and `max` items match the
    /// schema. Items that must not match are `items ∧ ¬contains` (only when
    /// `max` is set).
    // Kept out of the recursive generator's frames (deep schemas).
    #[inline(never)]
    pub(super) fn array_contains(&mut self, n: &Node) -> Result<Lang, SchemaError> {
        if n.contains.len() > 1 && n.prefix_items.is_none() {
            return self.array_counted_contains(n);
        }
        if n.contains.len() > 1 {
            return Err(SchemaError::UnsupportedValue {
                what: "contains".into(),
                pointer: n.contains[1].at.clone(),
                detail: "several \"contains\" together with \"prefixItems\"".into(),
            });
        }
        let c = &n.contains[0];
        let (a, b) = (c.min, c.max);
        if b.is_some_and(|b| b < a) {
            return Ok(None);
        }
        if a == 0 && b.is_none() {
            let mut m = n.clone();
            m.contains.clear();
            return self.array(&m);
        }
        if n.prefix_items.is_some() {
            return Err(SchemaError::UnsupportedValue {
                what: "contains".into(),
                pointer: c.at.clone(),
                detail: "\"contains\" together with \"prefixItems\"".into(),
            });
        }
        if n.min_items.unwrap_or(0) > a.max(1) || n.max_items.is_some() {
            return self.array_counted_contains(n);
        }
        let big = b.unwrap_or(a);
        if big > self.opts.max_repeat {
            return Err(SchemaError::TooBig {
                what: "contains count bound".into(),
                pointer: c.at.clone(),
                size: big,
                limit: self.opts.max_repeat,
                knob: "max_repeat",
            });
        }
        let item = n.items.clone().unwrap_or(Schema::Bool(true));
        let m = self.value(&conj(&c.at, vec![item.clone(), c.schema.clone()]), &[])?;
        let other = if b.is_some() {
            let nc = self.negate(&c.schema, &c.at)?;
            let s = conj(&c.at, vec![item, disj(&c.at, nc)]);
            self.value(&s, &[])?
        } else {
            self.value(&item, &[])?
        };
        let Layout { inner, comma, .. } = self.lay.clone();
        let empty = format!("\\[{inner}\\]");
        let only_others = other.as_ref().map(|o| format!("{o}(?:{comma}{o})*"));
        let Some(m) = m else {
            return Ok(if a == 0 {
                Some(match only_others {
                    Some(o) => format!("\\[{inner}(?:{o})?{inner}\\]"),
                    None => empty,
                })
            } else {
                None
            });
        };
        // One or more matching items, `lo..=hi` of them.
        let (lo, hi) = (a.max(1), b);
        let list = if hi.is_some_and(|h| h < lo) {
            None
        } else {
            let (pre, post) = match &other {
                Some(o) => (format!("(?:{o}{comma})*"), format!("(?:{comma}{o})*")),
                None => (String::new(), String::new()),
            };
            let more = if hi == Some(1) {
                String::new()
            } else {
                format!("(?:{comma}{m}{post}){}", repeat(lo - 1, hi.map(|h| h - 1)))
            };
            Some(format!("{pre}{m}{post}{more}"))
        };
        let body = match (a, list, only_others) {
            (0, Some(l), Some(o)) => format!("(?:{l}|{o})?"),
            (0, Some(l), None) => format!("(?:{l})?"),
            (0, None, Some(o)) => format!("(?:{o})?"),
            (0, None, None) => String::new(),
            (_, Some(l), _) => l,
            (_, None, _) => return Ok(None),
        };
        Ok(Some(format!("\\[{inner}{body}{inner}\\]")))
    }
}
