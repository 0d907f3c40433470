//! # Evaluating a schema on one concrete value
//!
//! The generator turns schemas into languages; some keywords, though, meet
//! *concrete* values: an `enum`/`const` list intersected with array or
//! object keywords, a `not`, an `if`. There the cheapest exact answer is to
//! validate each listed value and keep the ones that pass, which
//! [`Eval::schema`] does over the IR ([`Schema`], [`Node`]) with JSON
//! Schema's own semantics (compliant: absent `additionalProperties` allows
//! any extra key, whatever the generation mode).
//!
//! ## Three answers, and polarity
//!
//! The answer is `Some(true)`, `Some(false)` or `None` (cannot tell: a
//! `pattern` the regex engine cannot run, a fractional `multipleOf` whose
//! floating-point reading differs between validators, a recursion or work
//! bound hit). The connectives are Kleene's: `false ∧ ? = false`,
//! `true ∨ ? = true`, `¬? = ?`.
//!
//! A `format` is checked with the generator's own format regex, which is
//! *narrower* than the format (a value it misses may still be a valid
//! date). Treating a miss as `false` is sound only where the answer is used
//! positively (the value is kept when `true`); under `not` (and on both
//! sides of `oneOf` and `if`) a miss is `None`. [`Polarity`] tracks which.
//!
//! ## Invariant
//!
//! `Some(true)` at [`Polarity::Pos`] means the value validates; `Some(false)`
//! at [`Polarity::Neg`] means it does not. Callers keep a listed value only
//! on `Some(true)`, so every kept value validates.
//!
//! ## Bounds
//!
//! `$ref` chains are followed at most [`MAX_DEPTH`] deep and a whole
//! evaluation visits at most [`FUEL`] sub-schemas; past either the answer is
//! `None` (the caller then falls back to its error).

use super::ir::{json_eq, pattern_matches, Document, Node, Schema, Types};
use super::numeric::Dec;
use serde_json::Value;

/// How deep `$ref`s (and sub-schemas) are followed.
pub(crate) const MAX_DEPTH: usize = 64;
/// How many sub-schemas one evaluation may visit.
pub(crate) const FUEL: usize = 100_000;

/// Where the answer is used: kept on `true` ([`Polarity::Pos`]), negated
/// ([`Polarity::Neg`]), or both ([`Polarity::Both`]: `oneOf`, `if`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Polarity {
    Pos,
    Neg,
    Both,
}

impl Polarity {
    fn flip(self) -> Polarity {
        match self {
            Polarity::Pos => Polarity::Neg,
            Polarity::Neg => Polarity::Pos,
            Polarity::Both => Polarity::Both,
        }
    }
}

/// A conjunction being accumulated (Kleene's `∧`).
struct All {
    unknown: bool,
}

impl All {
    fn new() -> All {
        All { unknown: false }
    }
    /// Adds one answer; `true` when the conjunction is already false.
    fn add(&mut self, x: Option<bool>) -> bool {
        match x {
            Some(false) => true,
            Some(true) => false,
            None => {
                self.unknown = true;
                false
            }
        }
    }
    fn done(self) -> Option<bool> {
        if self.unknown {
            None
        } else {
            Some(true)
        }
    }
}

macro_rules! check {
    ($all:expr, $x:expr) => {
        if $all.add($x) {
            return Some(false);
        }
    };
}

/// Evaluates schemas of one document on concrete values.
pub(crate) struct Eval<'d, 'a> {
    doc: &'d Document<'a>,
    depth: usize,
    fuel: usize,
}

impl<'d, 'a> Eval<'d, 'a> {
    pub(crate) fn new(doc: &'d Document<'a>) -> Eval<'d, 'a> {
        Eval {
            doc,
            depth: 0,
            fuel: FUEL,
        }
    }

    /// Whether `v` validates against `s` (see the module notes).
    pub(crate) fn schema(&mut self, s: &Schema, v: &Value, pol: Polarity) -> Option<bool> {
        if self.fuel == 0 || self.depth >= MAX_DEPTH {
            return None;
        }
        self.fuel -= 1;
        match s {
            Schema::Bool(b) => Some(*b),
            Schema::Ref { target, .. } => {
                let t = self.doc.get(target).ok()?;
                self.depth += 1;
                let r = self.schema(&t, v, pol);
                self.depth -= 1;
                r
            }
            Schema::Node(n) => {
                self.depth += 1;
                let r = self.node(n, v, pol);
                self.depth -= 1;
                r
            }
        }
    }

    /// Whether `v` validates against the node `n`.
    pub(crate) fn node(&mut self, n: &Node, v: &Value, pol: Polarity) -> Option<bool> {
        if n.never || !Types::ALL.minus_not(n.not_types).admits(v) {
            return Some(false);
        }
        if n.types.is_some_and(|t| !t.admits(v)) {
            return Some(false);
        }
        if let Some(e) = &n.enumeration {
            if !e.iter().any(|x| json_eq(x, v)) {
                return Some(false);
            }
        }
        if n.not_values.iter().any(|x| json_eq(x, v)) {
            return Some(false);
        }
        let mut all = All::new();
        match v {
            Value::String(s) => check!(all, self.string(n, s, pol)),
            Value::Number(x) => check!(all, number(n, x, pol)),
            Value::Array(a) => check!(all, self.array(n, a, pol)),
            Value::Object(o) => check!(all, self.object(n, o, pol)),
            Value::Null | Value::Bool(_) => {}
        }
        // applicators
        for s in &n.all_of {
            check!(all, self.schema(s, v, pol));
        }
        for g in &n.any_of {
            check!(all, self.any(g, v, pol));
        }
        for g in &n.one_of {
            check!(all, self.one(&g.value, v));
        }
        for s in &n.nots {
            check!(all, self.schema(s, v, pol.flip()).map(|b| !b));
        }
        for c in &n.conditionals {
            let then = c.then.as_ref().unwrap_or(&Schema::Bool(true));
            let other = c.otherwise.as_ref().unwrap_or(&Schema::Bool(true));
            let r = match self.schema(&c.cond, v, Polarity::Both) {
                Some(true) => self.schema(then, v, pol),
                Some(false) => self.schema(other, v, pol),
                None => match (self.schema(then, v, pol), self.schema(other, v, pol)) {
                    (Some(a), Some(b)) if a == b => Some(a),
                    _ => None,
                },
            };
            check!(all, r);
        }
        all.done()
    }

    /// Kleene's `∨` over a group.
    fn any(&mut self, g: &[Schema], v: &Value, pol: Polarity) -> Option<bool> {
        let mut unknown = false;
        for s in g {
            match self.schema(s, v, pol) {
                Some(true) => return Some(true),
                Some(false) => {}
                None => unknown = true,
            }
        }
        if unknown {
            None
        } else {
            Some(false)
        }
    }

    /// Exactly one of `g`.
    fn one(&mut self, g: &[Schema], v: &Value) -> Option<bool> {
        let (mut yes, mut unknown) = (0, false);
        for s in g {
            match self.schema(s, v, Polarity::Both) {
                Some(true) => yes += 1,
                Some(false) => {}
                None => unknown = true,
            }
            if yes > 1 {
                return Some(false);
            }
        }
        if unknown {
            None
        } else {
            Some(yes == 1)
        }
    }

    fn string(&mut self, n: &Node, s: &str, pol: Polarity) -> Option<bool> {
        let len = s.chars().count() as u64;
        if n.min_length.is_some_and(|m| len < m) || n.max_length.is_some_and(|m| len > m) {
            return Some(false);
        }
        let mut all = All::new();
        for p in &n.patterns {
            check!(all, pattern_matches(&p.value, s));
        }
        for p in &n.not_patterns {
            check!(all, pattern_matches(&p.value, s).map(|b| !b));
        }
        for f in &n.formats {
            let ok = super::formats::format_regex(&f.value)
                .and_then(|re| regex_automata::meta::Regex::new(&format!("^(?:{re})$")).ok())
                .map(|r| r.is_match(s));
            // A miss of the (narrower) format regex is `false` only where
            // the answer is used positively.
            let r = match ok {
                Some(true) => Some(true),
                _ if pol == Polarity::Pos => Some(false),
                _ => None,
            };
            check!(all, r);
        }
        all.done()
    }

    fn array(&mut self, n: &Node, a: &[Value], pol: Polarity) -> Option<bool> {
        let len = a.len() as u64;
        if n.min_items.is_some_and(|m| len < m) || n.max_items.is_some_and(|m| len > m) {
            return Some(false);
        }
        let mut all = All::new();
        if n.unique_items {
            for i in 0..a.len() {
                for j in i + 1..a.len() {
                    if json_eq(&a[i], &a[j]) {
                        return Some(false);
                    }
                }
            }
        }
        let k = n.prefix_items.as_ref().map_or(0, Vec::len);
        for (p, x) in n.prefix_items.iter().flatten().zip(a) {
            check!(all, self.schema(p, x, pol));
        }
        if let Some(it) = &n.items {
            for x in a.iter().skip(k) {
                check!(all, self.schema(it, x, pol));
            }
        }
        for c in &n.contains {
            // The count of matching items lies in `lo..=hi`.
            let (mut lo, mut hi) = (0u64, 0u64);
            for x in a {
                match self.schema(&c.schema, x, Polarity::Both) {
                    Some(true) => {
                        lo += 1;
                        hi += 1;
                    }
                    Some(false) => {}
                    None => hi += 1,
                }
            }
            let below = hi < c.min || c.max.is_some_and(|m| lo > m);
            let sure = lo >= c.min && c.max.is_none_or(|m| hi <= m);
            check!(
                all,
                if below {
                    Some(false)
                } else if sure {
                    Some(true)
                } else {
                    None
                }
            );
        }
        all.done()
    }

    fn object(
        &mut self,
        n: &Node,
        o: &serde_json::Map<String, Value>,
        pol: Polarity,
    ) -> Option<bool> {
        let len = o.len() as u64;
        if n.min_properties.is_some_and(|m| len < m) || n.max_properties.is_some_and(|m| len > m) {
            return Some(false);
        }
        if n.required.iter().any(|r| !o.contains_key(r)) {
            return Some(false);
        }
        if n.forbid_keys.iter().any(|r| o.contains_key(r)) {
            return Some(false);
        }
        for (k, deps) in &n.dependent_required {
            if o.contains_key(k) && deps.iter().any(|d| !o.contains_key(d)) {
                return Some(false);
            }
        }
        let mut all = All::new();
        for (k, x) in o {
            let mut declared = false;
            for (p, s) in &n.properties {
                if p == k {
                    declared = true;
                    check!(all, self.schema(s, x, pol));
                }
            }
            let mut unsure = false;
            for (p, s) in &n.pattern_properties {
                match pattern_matches(&p.value, k) {
                    Some(true) => {
                        declared = true;
                        check!(all, self.schema(s, x, pol));
                    }
                    Some(false) => {}
                    None => {
                        // Whether the pattern's schema applies is unknown:
                        // only a value it accepts anyway is known to pass.
                        unsure = true;
                        if self.schema(s, x, pol) != Some(true) {
                            check!(all, None);
                        }
                    }
                }
            }
            if !declared {
                if let Some(extra) = &n.additional {
                    let r = self.schema(extra, x, pol);
                    // Whether the key is extra at all is unknown when a
                    // pattern could not be run.
                    check!(all, if unsure && r != Some(true) { None } else { r });
                }
            }
            let key = Value::String(k.clone());
            for s in &n.property_names {
                check!(all, self.schema(s, &key, pol));
            }
        }
        for e in &n.some_extra {
            // Kleene's `∃`: some key outside the names and patterns whose
            // value validates.
            let mut found = Some(false);
            for (k, x) in o {
                if e.names.contains(k) {
                    continue;
                }
                let mut m = Some(false);
                for p in &e.patterns {
                    match pattern_matches(&p.value, k) {
                        Some(true) => m = Some(true),
                        Some(false) => {}
                        None if m != Some(true) => m = None,
                        None => {}
                    }
                }
                // `m`: whether the key is excluded (a listed pattern, or
                // outside `within`, or a name `name_out` accepts).
                if m != Some(true) {
                    if let Some(p) = &e.within {
                        match pattern_matches(&p.value, k) {
                            Some(true) => {}
                            Some(false) => m = Some(true),
                            None => m = None,
                        }
                    }
                }
                if m != Some(true) {
                    if let Some(s) = &e.name_out {
                        let key = Value::String(k.clone());
                        match self.schema(s, &key, pol.flip()) {
                            Some(true) => m = Some(true),
                            Some(false) => {}
                            None => m = None,
                        }
                    }
                }
                let r = match m {
                    Some(true) => Some(false),
                    Some(false) => self.schema(&e.value, x, pol),
                    None => match self.schema(&e.value, x, pol) {
                        Some(false) => Some(false),
                        _ => None,
                    },
                };
                match r {
                    Some(true) => {
                        found = Some(true);
                        break;
                    }
                    Some(false) => {}
                    None => found = None,
                }
            }
            check!(all, found);
        }
        for (k, s) in &n.dependent_schemas {
            if o.contains_key(k) {
                check!(all, self.schema(s, &Value::Object(o.clone()), pol));
            }
        }
        all.done()
    }
}

fn number(n: &Node, x: &serde_json::Number, pol: Polarity) -> Option<bool> {
    let d = Dec::parse(&x.to_string())?;
    // Bounds folded in from an integer `format` narrow what is generated,
    // but validators ignore the format: a value outside them is only known
    // to fail where failing makes the output stricter.
    let miss = if n.format_bounds.is_some() && pol != Polarity::Pos {
        None
    } else {
        Some(false)
    };
    if let Some(l) = &n.minimum {
        if d < l.value || (l.exclusive && d == l.value) {
            return miss;
        }
    }
    if let Some(h) = &n.maximum {
        if d > h.value || (h.exclusive && d == h.value) {
            return miss;
        }
    }
    if n.fractional && d.is_integer() {
        return Some(false);
    }
    for m in &n.not_multiple_of {
        match (d.to_i128(), m.value.to_i128()) {
            (Some(a), Some(k)) if k != 0 => {
                if a % k == 0 {
                    return Some(false);
                }
            }
            _ => return None,
        }
    }
    if let Some(m) = &n.multiple_of {
        // Integers only: validators read a fractional `multipleOf` in
        // floating point, differently from one another.
        return match (d.to_i128(), m.value.to_i128()) {
            (Some(a), Some(k)) if k != 0 => Some(a % k == 0),
            _ => None,
        };
    }
    Some(true)
}
