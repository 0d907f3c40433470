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
//! error names `not` and the pointer); the combinations of the `anyOf` groups
//! it creates that [`Gen::branches`] explores are bounded by 64 times the same
//! knob, after the pruning of `prune.rs`.

use super::nodes::{blank, complement_types, conj, disj, node};
use super::*;
use crate::schema::ir::{Conditional, Contains, SomeExtra};
use crate::schema::numeric::Bound;
impl<'d, 'a> Gen<'d, 'a> {
    pub(super) fn not_error(&self, at: &Pointer, detail: &str) -> SchemaError {
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
        self.discriminated_conditionals(n);
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
}
