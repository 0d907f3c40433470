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
//! written as nodes (`¬pattern`, `¬format`, `¬multipleOf`,
//! `¬patternProperties`, `¬additionalProperties`, `¬propertyNames`,
//! `¬uniqueItems`), it is narrowed to a subset when one is obvious and
//! documented below, and is otherwise an error naming `not` and the JSON
//! Pointer. A recursive `$ref` under `not` cannot be unrolled (cutting the
//! recursion would *widen* the complement): past
//! [`SchemaOptions::max_depth`] it is an error.
//!
//! Narrowings (subsets of the complement): `¬type: integer` among numbers is
//! the numbers written with a fractional part and no exponent, and only when
//! the node has no numeric bounds; `¬enum` with an array or object value
//! leaves out arrays of the lengths (objects of the sizes) excluded.
//!
//! ## Bounds
//!
//! A complement has at most [`SchemaOptions::max_branches`] disjuncts (the
//! error names `not` and the pointer); the products of the `anyOf` groups it
//! creates are bounded by the same knob in [`Gen::branches`].

use super::*;
use crate::schema::ir::{Conditional, Contains};
use crate::dfa::algebra::{self, AlgebraError, Op};
use crate::schema::numeric::Bound;

/// A node with only `at` set.
fn blank(at: &Pointer) -> Node {
    Node {
        at: at.clone(),
        ..Default::default()
    }
}

/// The conjunction of `parts` (`true` when empty).
fn conj(at: &Pointer, parts: Vec<Schema>) -> Schema {
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
fn disj(at: &Pointer, parts: Vec<Schema>) -> Schema {
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
                let r = self
                    .doc
                    .get(target)
                    .and_then(|t| self.negate(&t, rat));
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
        if t.has_numeric() && n.multiple_of.is_some() {
            return Err(self.not_error(at, "\"multipleOf\""));
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
            for r in &n.required {
                out.extend(typed(
                    Types::OBJECT,
                    Node {
                        forbid_keys: vec![r.clone()],
                        ..blank(at)
                    },
                ));
            }
            for f in &n.forbid_keys {
                out.extend(typed(
                    Types::OBJECT,
                    Node {
                        required: vec![f.clone()],
                        ..blank(at)
                    },
                ));
            }
            for (k, s) in &n.properties {
                let ns = self.negate(s, at)?;
                if ns.is_empty() {
                    continue;
                }
                out.extend(typed(
                    Types::OBJECT,
                    Node {
                        required: vec![k.clone()],
                        properties: vec![(k.clone(), disj(at, ns))],
                        ..blank(at)
                    },
                ));
            }
            if !n.pattern_properties.is_empty() {
                return Err(self.not_error(at, "\"patternProperties\""));
            }
            if n
                .additional
                .as_ref()
                .is_some_and(|a| !matches!(a, Schema::Bool(true)))
            {
                return Err(self.not_error(at, "\"additionalProperties\""));
            }
            if !n.property_names.is_empty() {
                return Err(self.not_error(at, "\"propertyNames\""));
            }
            if let Some(m) = n.min_properties.filter(|m| *m > 0) {
                out.extend(typed(
                    Types::OBJECT,
                    Node {
                        max_properties: Some(m - 1),
                        ..blank(at)
                    },
                ));
            }
            if let Some(m) = n.max_properties {
                out.extend(typed(
                    Types::OBJECT,
                    Node {
                        min_properties: Some(m + 1),
                        ..blank(at)
                    },
                ));
            }
            for (k, deps) in &n.dependent_required {
                for d in deps {
                    out.extend(typed(
                        Types::OBJECT,
                        Node {
                            required: vec![k.clone()],
                            forbid_keys: vec![d.clone()],
                            ..blank(at)
                        },
                    ));
                }
            }
            for (k, s) in &n.dependent_schemas {
                let ns = self.negate(s, at)?;
                if ns.is_empty() {
                    continue;
                }
                out.extend(typed(
                    Types::OBJECT,
                    Node {
                        required: vec![k.clone()],
                        any_of: vec![ns],
                        ..blank(at)
                    },
                ));
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

    /// Arrays with `contains`: between `min` and `max` items match the
    /// schema. Items that must not match are `items ∧ ¬contains` (only when
    /// `max` is set).
    // Kept out of the recursive generator's frames (deep schemas).
    #[inline(never)]
    pub(super) fn array_contains(&mut self, n: &Node) -> Result<Lang, SchemaError> {
        if n.contains.len() > 1 {
            return Err(SchemaError::UnsupportedValue {
                what: "contains".into(),
                pointer: n.contains[1].at.clone(),
                detail: "several \"contains\" on one array".into(),
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
            return Err(SchemaError::UnsupportedValue {
                what: "contains".into(),
                pointer: c.at.clone(),
                detail: "\"contains\" together with \"minItems\"/\"maxItems\"".into(),
            });
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
        let only_others = other
            .as_ref()
            .map(|o| format!("{o}(?:{comma}{o})*"));
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
                format!(
                    "(?:{comma}{m}{post}){}",
                    repeat(lo - 1, hi.map(|h| h - 1))
                )
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

impl<'d, 'a> Gen<'d, 'a> {
    /// Numbers with a fractional part (never integral), written without an
    /// exponent, at most 6 + 9 digits; within bounds through a product
    /// automaton; with `multipleOf` none are offered (a sound narrowing,
    /// with a warning).
    pub(super) fn fractional_number(&mut self, n: &Node, types: Types) -> Result<Lang, SchemaError> {
        if !types.has(Types::NUMBER) {
            return Ok(None);
        }
        // At most 6 integer and 9 fraction digits: the nearest `f64` is
        // then never an integer (its spacing below 10^6 is ~1.2e-10), so
        // validators reading floats agree that it is not one.
        let frac = "-?(?:0|[1-9][0-9]{0,5})\\.[0-9]{0,8}[1-9]";
        if n.minimum.is_none() && n.maximum.is_none() && n.multiple_of.is_none() {
            return Ok(Some(frac.into()));
        }
        if n.multiple_of.is_none() {
            // Within bounds: the product with the decimal range.
            if let Some(range) = numeric::decimal_range(n.minimum.as_ref(), n.maximum.as_ref()) {
                return self.combine(&range, frac, Op::And, "non-integer numbers in range", &n.at);
            }
            return Ok(None);
        }
        self.doc.warn(
            &n.at,
            "non-integer numbers with multipleOf are not offered (complement of \"integer\")"
                .into(),
        );
        Ok(None)
    }

    /// A leaf whose values must differ from `n.not_values` (the complement
    /// of an `enum`): null and booleans are filtered, numbers split into
    /// the open intervals between the excluded ones, strings are the
    /// complement of the excluded spellings' trie. Narrowed (with a
    /// warning): strings with other string keywords when an excluded string
    /// satisfies them, arrays of an excluded array's length, non-empty
    /// excluded objects (then no object is offered).
    // Kept out of the recursive generator's frames (deep schemas).
    #[inline(never)]
    pub(super) fn leaf_excluding(
        &mut self,
        n: &Node,
        types: Types,
        forbid: &[String],
    ) -> Result<Lang, SchemaError> {
        let ex = &n.not_values;
        let mut base = n.clone();
        base.not_values.clear();
        let mut parts: Vec<String> = Vec::new();
        let mut rest = types.0;
        let drop = |rest: &mut u8, t: Types| *rest &= !t.0;
        if ex.iter().any(Value::is_null) {
            drop(&mut rest, Types::NULL);
        }
        let (t, f) = (
            ex.contains(&Value::Bool(true)),
            ex.contains(&Value::Bool(false)),
        );
        if Types(rest).has(Types::BOOLEAN) && (t || f) {
            drop(&mut rest, Types::BOOLEAN);
            if !t {
                parts.push("true".into());
            }
            if !f {
                parts.push("false".into());
            }
        }
        let mut nums: Vec<Dec> = ex
            .iter()
            .filter_map(|v| match v {
                Value::Number(x) => Dec::parse(&x.to_string()),
                _ => None,
            })
            .collect();
        nums.sort();
        nums.dedup();
        if Types(rest).has_numeric() && !nums.is_empty() {
            let numeric = Types(rest & (Types::INTEGER.0 | Types::NUMBER.0));
            drop(&mut rest, Types(Types::INTEGER.0 | Types::NUMBER.0));
            let mut lo: Option<Dec> = None;
            for hi in nums.iter().map(Some).chain(std::iter::once(None)) {
                let bounds = Node {
                    minimum: lo.clone().map(|value| Bound {
                        value,
                        exclusive: true,
                    }),
                    maximum: hi.cloned().map(|value| Bound {
                        value,
                        exclusive: true,
                    }),
                    ..blank(&n.at)
                };
                lo = hi.cloned();
                let m = ir::merge(&base, &bounds)?;
                if let (Some(a), Some(b)) = (&m.minimum, &m.maximum) {
                    if a.value > b.value || (a.value == b.value && (a.exclusive || b.exclusive)) {
                        continue;
                    }
                }
                parts.extend(self.number(&m, numeric)?);
            }
        }
        let strs: Vec<String> = ex
            .iter()
            .filter_map(|v| v.as_str().map(String::from))
            .collect();
        if Types(rest).has(Types::STRING) && !strs.is_empty() {
            drop(&mut rest, Types::STRING);
            if !base.has_string_keywords() {
                parts.push(extra_key(&strs));
            } else {
                let mut only = base.clone();
                only.types = Some(Types::STRING);
                let hit = strs
                    .iter()
                    .any(|s| satisfies(&only, &Value::String(s.clone())) != Some(false));
                if hit {
                    self.doc.warn(
                        &n.at,
                        "strings not offered (an excluded enum string meets the string keywords)"
                            .into(),
                    );
                } else {
                    parts.extend(self.string_with_algebra(&base)?);
                }
            }
        }
        let lens: Vec<u64> = ex
            .iter()
            .filter_map(|v| v.as_array().map(|a| a.len() as u64))
            .collect();
        if Types(rest).has(Types::ARRAY) && !lens.is_empty() {
            drop(&mut rest, Types::ARRAY);
            self.doc.warn(
                &n.at,
                "arrays of an excluded enum array's length are not offered".into(),
            );
            let mut lo = base.min_items.unwrap_or(0);
            let top = base.max_items;
            let mut cuts: Vec<u64> = lens.clone();
            cuts.sort();
            cuts.dedup();
            for hi in cuts.iter().map(Some).chain(std::iter::once(None)) {
                let upper = match hi {
                    Some(&h) if h == 0 => {
                        lo = lo.max(1);
                        continue;
                    }
                    Some(&h) => Some(h - 1),
                    None => top,
                };
                let upper = match (upper, top) {
                    (Some(u), Some(t)) => Some(u.min(t)),
                    (u, t) => u.or(t),
                };
                if upper.is_none_or(|u| u >= lo) {
                    let mut m = base.clone();
                    m.min_items = Some(lo);
                    m.max_items = upper;
                    parts.extend(self.array(&m)?);
                }
                if let Some(&h) = hi {
                    lo = lo.max(h + 1);
                }
            }
        }
        let objs: Vec<usize> = ex
            .iter()
            .filter_map(|v| v.as_object().map(|o| o.len()))
            .collect();
        if Types(rest).has(Types::OBJECT) && !objs.is_empty() {
            drop(&mut rest, Types::OBJECT);
            if objs.iter().all(|&l| l == 0) {
                let mut m = base.clone();
                m.min_properties = Some(base.min_properties.unwrap_or(0).max(1));
                match self.object(&m, forbid) {
                    Ok(r) => parts.extend(r),
                    Err(_) => self.doc.warn(
                        &n.at,
                        "non-empty objects not offered (complement of {})".into(),
                    ),
                }
            } else {
                self.doc.warn(
                    &n.at,
                    "objects not offered (an enum object is excluded)".into(),
                );
            }
        }
        if rest != 0 {
            let mut m = base;
            m.types = Some(Types(rest));
            m.not_types = Types::NONE;
            parts.extend(self.leaf(&m, forbid)?);
        }
        Ok(alt_all(parts))
    }
}

impl<'d, 'a> Gen<'d, 'a> {
    /// An object under `propertyNames`: declared keys whose names fail it
    /// are never written (a required one empties the object); extra keys
    /// are left as they are when the name schema says nothing about strings,
    /// become declared optional keys when it is an `enum`, and take the
    /// name schema's string language when it has only string keywords and
    /// no declared name satisfies it. Otherwise extra keys are not offered
    /// (a sound narrowing, with a warning). With `patternProperties` and a
    /// constraining name schema: an error.
    #[inline(never)]
    pub(super) fn object_with_names(
        &mut self,
        n: &Node,
        forbid: &[String],
    ) -> Result<Lang, SchemaError> {
        let mut m = n.clone();
        m.property_names.clear();
        let mut names: Vec<Node> = Vec::new();
        for s in &n.property_names {
            let mut entered = Vec::new();
            match self.schema_node(s, &mut entered)? {
                Some(x) => names.push(x),
                None => {
                    // No name is allowed: the empty object only.
                    if !m.required.is_empty() {
                        return Ok(None);
                    }
                    m.properties.clear();
                    m.pattern_properties.clear();
                    m.additional = Some(Schema::Bool(false));
                    return self.object(&m, forbid);
                }
            }
        }
        let mut name = names
            .into_iter()
            .try_fold(blank(&n.at), |a, b| ir::merge(&a, &b))?;
        // `not` (and the rest of the algebra) in the name schema: groups of
        // one branch are conjuncts.
        self.lower_logic(&mut name)?;
        let groups = std::mem::take(&mut name.any_of);
        for g in groups {
            if let [one] = &g[..] {
                let mut entered = Vec::new();
                match self.schema_node(one, &mut entered)? {
                    Some(x) => name = ir::merge(&name, &x)?,
                    None => name.never = true,
                }
            } else {
                name.any_of.push(g);
            }
        }
        let unsupported = |detail: &str| SchemaError::UnsupportedValue {
            what: "propertyNames".into(),
            pointer: name.at.clone(),
            detail: detail.into(),
        };
        let as_name = |k: &str| satisfies(&name, &Value::String(k.to_string()));
        // Declared (and required) keys.
        for r in &n.required {
            match as_name(r) {
                Some(true) => {}
                Some(false) => return Ok(None),
                None => return Err(unsupported("a name schema it cannot evaluate")),
            }
        }
        let mut kept = Vec::new();
        for (k, s) in &m.properties {
            match as_name(k) {
                Some(true) => kept.push((k.clone(), s.clone())),
                Some(false) => {}
                None => return Err(unsupported("a name schema it cannot evaluate")),
            }
        }
        m.properties = kept;
        let string_only = name.types.is_none_or(|t| t.has(Types::STRING))
            && name.not_types.is_empty()
            && name.all_of.is_empty()
            && name.any_of.is_empty()
            && name.one_of.is_empty()
            && !name.never;
        let says_nothing =
            string_only && name.enumeration.is_none() && name.not_values.is_empty() && !name.has_string_keywords();
        if says_nothing {
            return self.object(&m, forbid);
        }
        if !m.pattern_properties.is_empty() {
            return Err(unsupported("\"propertyNames\" together with \"patternProperties\""));
        }
        let Some(extra) = self.extras_schema(&m) else {
            return self.object(&m, forbid);
        };
        if let Some(vals) = &name.enumeration {
            // Finitely many names: each allowed undeclared one is an
            // optional declared key with the extra keys' schema.
            for v in vals {
                let Some(k) = v.as_str() else { continue };
                if m.properties.iter().any(|(d, _)| d == k) || forbid.iter().any(|f| f == k) {
                    continue;
                }
                if as_name(k) == Some(true) {
                    m.properties.push((k.to_string(), extra.clone()));
                }
            }
            m.additional = Some(Schema::Bool(false));
            return self.object(&m, forbid);
        }
        let declared_ok = m
            .properties
            .iter()
            .map(|(k, _)| k)
            .chain(m.required.iter())
            .chain(forbid.iter())
            .all(|k| as_name(k) == Some(false));
        if string_only && name.not_values.is_empty() {
            let mut sn = name.clone();
            sn.types = Some(Types::STRING);
            let mut key = self.string_with_algebra(&sn)?;
            if !declared_ok {
                // Names in the language but declared: the product with the
                // complement of the declared names (one spelling per key).
                let taken: Vec<String> = m
                    .properties
                    .iter()
                    .map(|(k, _)| k.clone())
                    .chain(m.required.iter().cloned())
                    .chain(forbid.iter().cloned())
                    .collect();
                if let Some(k) = key {
                    key = self.combine(&k, &extra_key(&taken), Op::And, "propertyNames", &name.at)?;
                }
            }
            let Some(key) = key else {
                m.additional = Some(Schema::Bool(false));
                return self.object(&m, forbid);
            };
            self.extra_key_lang = Some(key);
            let r = self.object(&m, forbid);
            self.extra_key_lang = None;
            return r;
        }
        self.doc.warn(
            &name.at,
            "extra keys not offered (propertyNames cannot be intersected with the declared names)"
                .into(),
        );
        m.additional = Some(Schema::Bool(false));
        self.object(&m, forbid)
    }
}

/// Every JSON string in its one canonical spelling (no `\u` escapes; the
/// control characters without a short escape are left out).
const CANONICAL_STRING: &str = r#""(?:[^"\\\x00-\x1F]|\\["\\bfnrt])*""#;

impl<'d, 'a> Gen<'d, 'a> {
    /// `a op b` through a product automaton, bounded by
    /// `max_product_states` / `max_product_len` (errors name `what` and `at`).
    pub(super) fn combine(
        &self,
        a: &str,
        b: &str,
        op: Op,
        what: &str,
        at: &Pointer,
    ) -> Result<Lang, SchemaError> {
        match algebra::combine(
            a,
            b,
            op,
            self.opts.max_product_states,
            self.opts.max_product_len,
        ) {
            Ok(r) => Ok(r),
            Err(AlgebraError::TooManyStates { limit }) => Err(SchemaError::TooBig {
                what: format!("{what}: product automaton states"),
                pointer: at.clone(),
                size: limit as u64 + 1,
                limit: limit as u64,
                knob: "max_product_states",
            }),
            Err(AlgebraError::TooLong { limit }) => Err(SchemaError::TooBig {
                what: format!("{what}: regex of the product automaton"),
                pointer: at.clone(),
                size: limit as u64 + 1,
                limit: limit as u64,
                knob: "max_product_len",
            }),
            Err(AlgebraError::Dfa(e)) => Err(SchemaError::UnsupportedValue {
                what: what.into(),
                pointer: at.clone(),
                detail: e.to_string(),
            }),
        }
    }

    /// [`Gen::string`], through [`Gen::string_algebra`] when the node has
    /// several patterns/formats or excluded patterns.
    pub(super) fn string_with_algebra(&mut self, n: &Node) -> Result<Lang, SchemaError> {
        if n.not_patterns.is_empty() && n.patterns.len() + n.formats.len() <= 1 {
            self.string(n)
        } else {
            self.string_algebra(n)
        }
    }

    /// The quoted spelled language of one pattern, exactly (`None`: the
    /// pattern cannot be compiled exactly).
    fn pattern_language(&self, p: &ir::Located<String>) -> Result<Lang, SchemaError> {
        match pattern::compile_pattern(&p.value, 0, None) {
            Ok(c) if c.narrowed.is_none() => Ok(c.regex.map(|r| format!("\"{r}\""))),
            Ok(_) => Err(SchemaError::Pattern {
                pointer: p.at.clone(),
                detail: format!("{:?} is narrowed and cannot be intersected", p.value),
            }),
            Err(e) => Err(SchemaError::Pattern {
                pointer: p.at.clone(),
                detail: format!("{:?}: {e}", p.value),
            }),
        }
    }

    /// Strings with several patterns/formats, or with patterns they must
    /// not match: the first constraint through [`Gen::string`], the others
    /// intersected (`pattern`, `format`) or subtracted (`not: {pattern}`)
    /// by product automata.
    #[inline(never)]
    pub(super) fn string_algebra(&mut self, n: &Node) -> Result<Lang, SchemaError> {
        let mut first = n.clone();
        first.not_patterns.clear();
        let mut rest: Vec<String> = Vec::new();
        let mut rest_at: Vec<Pointer> = Vec::new();
        if first.patterns.len() + first.formats.len() > 1 {
            let keep_format = !first.formats.is_empty();
            for p in first.patterns.drain(if keep_format { 0.. } else { 1.. }) {
                let Some(l) = self.pattern_language(&p)? else {
                    return Ok(None);
                };
                rest.push(l);
                rest_at.push(p.at);
            }
            let extra_formats: Vec<_> = first.formats.drain(first.formats.len().min(1)..).collect();
            for f in extra_formats {
                let re = formats::format_regex(&f.value).expect("supported format");
                rest.push(format!("\"{re}\""));
                rest_at.push(f.at);
            }
        }
        let Some(mut lang) = self.string(&first)? else {
            return Ok(None);
        };
        for (l, at) in rest.iter().zip(&rest_at) {
            match self.combine(&lang, l, Op::And, "several patterns/formats", at)? {
                Some(r) => lang = r,
                None => return Ok(None),
            }
        }
        if !n.not_patterns.is_empty() {
            // One spelling per string, so that subtracting spellings
            // subtracts strings.
            let at = &n.not_patterns[0].at;
            match self.combine(&lang, CANONICAL_STRING, Op::And, "not: pattern", at)? {
                Some(r) => lang = r,
                None => return Ok(None),
            }
            for p in &n.not_patterns {
                let Some(l) = self.pattern_language(p)? else {
                    continue;
                };
                match self.combine(&lang, &l, Op::AndNot, "not: pattern", &p.at)? {
                    Some(r) => lang = r,
                    None => return Ok(None),
                }
            }
        }
        Ok(Some(lang))
    }
}

impl<'d, 'a> Gen<'d, 'a> {
    /// The possible values of an item schema when it has few (an `enum`,
    /// `const`, `boolean`, a small integer range); `None` otherwise.
    fn finite_values(&mut self, item: &Schema) -> Result<Option<Vec<Value>>, SchemaError> {
        let mut entered = Vec::new();
        let Some(node) = self.schema_node(item, &mut entered)? else {
            return Ok(Some(Vec::new()));
        };
        if !node.any_of.is_empty()
            || !node.one_of.is_empty()
            || !node.nots.is_empty()
            || !node.conditionals.is_empty()
        {
            return Ok(None);
        }
        let types = self.gen_types(&node);
        let candidates: Vec<Value> = if let Some(vals) = &node.enumeration {
            vals.clone()
        } else if types == Types::BOOLEAN {
            vec![Value::Bool(false), Value::Bool(true)]
        } else if types == Types::INTEGER || (types.has_numeric() && node.types == Some(Types::INTEGER)) {
            let (l, h) = numeric::integer_bounds(node.minimum.as_ref(), node.maximum.as_ref());
            match (l.and_then(|x| x.to_i128()), h.and_then(|x| x.to_i128())) {
                (Some(l), Some(h)) if h >= l && h - l < 64 => {
                    (l..=h).map(|i| Value::from(i as i64)).collect()
                }
                _ => return Ok(None),
            }
        } else {
            return Ok(None);
        };
        let mut out: Vec<Value> = Vec::new();
        for v in candidates {
            if !type_ok(types, &v) || out.iter().any(|w| ir::json_eq(w, &v)) {
                continue;
            }
            match satisfies(&node, &v) {
                Some(true) => out.push(v),
                Some(false) => {}
                None => return Ok(None),
            }
        }
        Ok(Some(out))
    }

    /// `uniqueItems`: exact when the items have at most
    /// `max_unique_values` possible values (every ordering of distinct
    /// values is listed); otherwise an error naming `uniqueItems` (a
    /// warning in lenient mode, which then ignores it).
    #[inline(never)]
    pub(super) fn array_unique(&mut self, n: &Node) -> Result<Lang, SchemaError> {
        let mut m = n.clone();
        m.unique_items = false;
        let unsupported = |detail: &str| SchemaError::UnsupportedValue {
            what: "uniqueItems".into(),
            pointer: n.at.clone(),
            detail: detail.into(),
        };
        if n.prefix_items.is_some() || !n.contains.is_empty() {
            return Err(unsupported("together with prefixItems/contains"));
        }
        let item = n.items.clone().unwrap_or(Schema::Bool(true));
        let Some(values) = self.finite_values(&item)? else {
            // Lenient: ignored (with a warning), as before.
            self.doc.soft(
                unsupported("the items have no small finite set of values"),
                self.opts.lenient,
            )?;
            return self.array(&m);
        };
        if values.len() > self.opts.max_unique_values {
            return Err(SchemaError::TooBig {
                what: "uniqueItems: possible item values".into(),
                pointer: n.at.clone(),
                size: values.len() as u64,
                limit: self.opts.max_unique_values as u64,
                knob: "max_unique_values",
            });
        }
        let min = n.min_items.unwrap_or(0);
        let max = n.max_items.unwrap_or(u64::MAX);
        let lits: Vec<String> = values.iter().map(|v| self.literal(v)).collect();
        let Layout { inner, comma, .. } = self.lay.clone();
        // Sequences of distinct values continuing after `used` (`depth`
        // items written).
        fn rest(lits: &[String], used: u32, depth: u64, min: u64, max: u64, comma: &str) -> Option<String> {
            let mut alts: Vec<String> = Vec::new();
            let mut empty = false;
            if depth >= min {
                empty = true;
            }
            if depth < max {
                for (i, l) in lits.iter().enumerate() {
                    if used & (1 << i) != 0 {
                        continue;
                    }
                    if let Some(r) = rest(lits, used | (1 << i), depth + 1, min, max, comma) {
                        let sep = if depth == 0 { "" } else { comma };
                        alts.push(format!("{sep}{l}{r}"));
                    }
                }
            }
            match (alts.is_empty(), empty) {
                (true, true) => Some(String::new()),
                (true, false) => None,
                (false, e) => Some(format!("(?:{}{})", alts.join("|"), if e { "|" } else { "" })),
            }
        }
        Ok(rest(&lits, 0, 0, min, max, &comma).map(|b| format!("\\[{inner}{b}{inner}\\]")))
    }
}
