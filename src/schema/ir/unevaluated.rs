//! # `unevaluatedProperties` / `unevaluatedItems` by static evaluation
//!
//! Which properties (items) a schema *evaluated* is an annotation collected
//! at run time, but for the common shapes it is known statically, and the
//! keyword then rewrites into the keywords the compiler already enforces
//! exactly:
//!
//! - **Flat** subschemas (reached through `allOf` and `$ref`, any depth):
//!   their evaluated set is the union of the names of their `properties`
//!   and the patterns of their `patternProperties` (items: the longest
//!   `prefixItems`, and every `contains` schema), or *everything* when one
//!   has `additionalProperties` / `items` / a nested `unevaluated*` (which
//!   evaluates all it sees once it passes). `X ∧ unevaluatedProperties: S`
//!   becomes `X` with `properties: {name: true}`, `patternProperties:
//!   {pattern: true}` for the names and patterns evaluated elsewhere, and
//!   `additionalProperties: S`; for items, `prefixItems` padded with `true`
//!   and `items: anyOf(contains schemas…, S)` (an item a `contains`
//!   matches is evaluated).
//! - **Branches** of `X` (`anyOf`, `oneOf`, `if`/`then`/`else`) whose
//!   members are flat: distributed. For `oneOf`, `X ∧ oneOf(Bᵢ) ∧ ⋁ᵢ(Bᵢ ∧
//!   Rᵢ)` where `Rᵢ` is the rewrite for the evaluated set of `X ∪ Bᵢ` (one
//!   branch passes, so its set is the one). For `anyOf` every passing
//!   branch counts, and since a larger evaluated set only relaxes `R`,
//!   `⋁_{T ≠ ∅} (⋀_{i∈T} Bᵢ ∧ R_T)` over the subsets `T` of branches is
//!   exact (at most [`MAX_ANY_OF`] branches). For `if`: `(if ∧ then ∧
//!   R_{if∪then}) ∨ (¬if ∧ else ∧ R_else)`.
//!
//! Everything else (`dependentSchemas` that evaluate, branches nested in
//! branches, `$dynamicRef` or `$recursiveRef` beside the keyword, a branch
//! with its own `$id`) is refused with a reason: the caller's error names
//! the keyword and its JSON Pointer.

use super::resources::Resources;
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;

/// Most `anyOf` branches distributed (2ⁿ − 1 alternatives).
pub const MAX_ANY_OF: usize = 4;

/// What a schema evaluated.
#[derive(Clone, Debug, Default)]
struct Evaluated {
    all: bool,
    names: BTreeSet<String>,
    patterns: BTreeSet<String>,
    prefix: usize,
    contains: Vec<Value>,
}

impl Evaluated {
    fn union(&mut self, o: &Evaluated) {
        self.all |= o.all;
        self.names.extend(o.names.iter().cloned());
        self.patterns.extend(o.patterns.iter().cloned());
        self.prefix = self.prefix.max(o.prefix);
        for c in &o.contains {
            if !self.contains.contains(c) {
                self.contains.push(c.clone());
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Properties,
    Items,
}

impl Kind {
    fn keyword(self) -> &'static str {
        match self {
            Kind::Properties => "unevaluatedProperties",
            Kind::Items => "unevaluatedItems",
        }
    }
}

struct Walk<'a> {
    res: &'a Resources,
    root: &'a Value,
    kind: Kind,
}

const BRANCHES: &[&str] = &[
    "anyOf",
    "oneOf",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "dependencies",
];

impl Walk<'_> {
    /// The evaluated set of the flat schema `v` at `at` (its own keywords,
    /// `allOf` and `$ref`s); `Err` when it evaluates inside a branch.
    fn flat(
        &self,
        v: &Value,
        at: &str,
        seen: &mut BTreeSet<String>,
        depth: usize,
    ) -> Result<Evaluated, String> {
        let mut ev = Evaluated::default();
        let Value::Object(m) = v else {
            return Ok(ev);
        };
        if depth > 32 {
            return Err("references nest too deep to follow".into());
        }
        self.own(m, &mut ev);
        for kw in ["$dynamicRef", "$recursiveRef"] {
            if m.contains_key(kw) {
                return Err(format!(
                    "a \"{kw}\" at {} (its evaluation depends on the dynamic scope)",
                    show(at)
                ));
            }
        }
        if let Some(Value::Array(list)) = m.get("allOf") {
            for (i, s) in list.iter().enumerate() {
                ev.union(&self.flat(s, &format!("{at}/allOf/{i}"), seen, depth + 1)?);
            }
        }
        if let Some(Value::String(r)) = m.get("$ref") {
            let Some(t) = self.res.resolve(r, at, self.root) else {
                return Err(format!("the $ref \"{r}\" at {} is unresolvable", show(at)));
            };
            if seen.insert(t.clone()) {
                let target = if t.is_empty() {
                    Some(self.root)
                } else {
                    self.root.pointer(&t)
                };
                if let Some(tv) = target {
                    ev.union(&self.flat(tv, &t, seen, depth + 1)?);
                }
            }
        }
        for kw in BRANCHES {
            let Some(b) = m.get(*kw) else { continue };
            let subs: Vec<(String, &Value)> = match b {
                Value::Array(a) => a
                    .iter()
                    .enumerate()
                    .map(|(i, s)| (format!("{at}/{kw}/{i}"), s))
                    .collect(),
                Value::Object(o) if matches!(*kw, "dependentSchemas" | "dependencies") => o
                    .iter()
                    .map(|(k, s)| (format!("{at}/{kw}/{k}"), s))
                    .collect(),
                other => vec![(format!("{at}/{kw}"), other)],
            };
            for (p, s) in subs {
                if evaluates(&self.flat(s, &p, &mut seen.clone(), depth + 1)?) {
                    return Err(format!(
                        "\"{kw}\" at {} evaluates {} inside a branch nested in another",
                        show(at),
                        self.what()
                    ));
                }
            }
        }
        Ok(ev)
    }

    /// The keywords of `m` itself.
    fn own(&self, m: &Map<String, Value>, ev: &mut Evaluated) {
        match self.kind {
            Kind::Properties => {
                if m.contains_key("additionalProperties") || m.contains_key("unevaluatedProperties")
                {
                    ev.all = true;
                }
                if let Some(Value::Object(p)) = m.get("properties") {
                    ev.names.extend(p.keys().cloned());
                }
                if let Some(Value::Object(p)) = m.get("patternProperties") {
                    ev.patterns.extend(p.keys().cloned());
                }
            }
            Kind::Items => {
                if m.contains_key("unevaluatedItems") {
                    ev.all = true;
                }
                match m.get("items") {
                    Some(Value::Array(a)) => {
                        ev.prefix = ev.prefix.max(a.len());
                        if m.contains_key("additionalItems") {
                            ev.all = true;
                        }
                    }
                    Some(_) => ev.all = true,
                    None => {}
                }
                if let Some(Value::Array(a)) = m.get("prefixItems") {
                    ev.prefix = ev.prefix.max(a.len());
                }
                if let Some(c) = m.get("contains") {
                    ev.contains.push(c.clone());
                }
            }
        }
    }

    fn what(&self) -> &'static str {
        match self.kind {
            Kind::Properties => "properties",
            Kind::Items => "items",
        }
    }

    /// The keywords that make the part outside `ev` take `s`.
    fn rest(&self, ev: &Evaluated, s: &Value) -> Map<String, Value> {
        let mut r = Map::new();
        if ev.all {
            return r;
        }
        match self.kind {
            Kind::Properties => {
                let names: Map<String, Value> = ev
                    .names
                    .iter()
                    .map(|n| (n.clone(), Value::Bool(true)))
                    .collect();
                let pats: Map<String, Value> = ev
                    .patterns
                    .iter()
                    .map(|n| (n.clone(), Value::Bool(true)))
                    .collect();
                if !names.is_empty() {
                    r.insert("properties".into(), Value::Object(names));
                }
                if !pats.is_empty() {
                    r.insert("patternProperties".into(), Value::Object(pats));
                }
                r.insert("additionalProperties".into(), s.clone());
            }
            Kind::Items => {
                if ev.prefix > 0 {
                    r.insert(
                        "prefixItems".into(),
                        Value::Array(vec![Value::Bool(true); ev.prefix]),
                    );
                }
                let items = if ev.contains.is_empty() {
                    s.clone()
                } else {
                    let mut any = ev.contains.clone();
                    any.push(s.clone());
                    json!({"anyOf": any})
                };
                r.insert("items".into(), items);
            }
        }
        r
    }
}

/// A JSON Pointer as messages write it.
fn show(at: &str) -> &str {
    if at.is_empty() {
        "(root)"
    } else {
        at
    }
}

fn evaluates(ev: &Evaluated) -> bool {
    ev.all
        || !ev.names.is_empty()
        || !ev.patterns.is_empty()
        || ev.prefix > 0
        || !ev.contains.is_empty()
}

/// `m` (the schema object at `at`) without `unevaluatedProperties` and
/// `unevaluatedItems`, rewritten into keywords that say the same; `Err((keyword,
/// why))` where the evaluated sets are not known statically.
pub fn rewrite(
    res: &Resources,
    root: &Value,
    m: &Map<String, Value>,
    at: &str,
) -> Result<Value, (&'static str, String)> {
    let mut out = m.clone();
    for kind in [Kind::Properties, Kind::Items] {
        let kw = kind.keyword();
        let Some(s) = out.remove(kw) else { continue };
        let w = Walk { res, root, kind };
        let fail = |why: String| (kw, why);
        // Items: an array-form `items` beside the keyword is the old drafts' form.
        if kind == Kind::Items
            && matches!(m.get("items"), Some(Value::Array(_)))
            && !m.contains_key("additionalItems")
        {
            return Err(fail("array-form \"items\" beside it".into()));
        }
        // X: the node's own keywords, `allOf` and `$ref`, branches aside.
        let mut x = out.clone();
        for b in BRANCHES {
            x.remove(*b);
        }
        let base = w
            .flat(&Value::Object(x), at, &mut BTreeSet::new(), 0)
            .map_err(fail)?;
        if base.all {
            continue; // everything is evaluated: the keyword holds vacuously
        }
        // The branches of X that evaluate.
        let branch_evals = |name: &str| -> Result<Option<Vec<Evaluated>>, String> {
            let Some(b) = m.get(name) else {
                return Ok(None);
            };
            let list: Vec<(String, &Value)> = match b {
                Value::Array(a) => a
                    .iter()
                    .enumerate()
                    .map(|(i, s)| (format!("{at}/{name}/{i}"), s))
                    .collect(),
                other => vec![(format!("{at}/{name}"), other)],
            };
            let mut evs = Vec::new();
            for (p, v) in &list {
                if v.get("$id").is_some() {
                    return Err(format!("the branch at {p} is a resource of its own ($id)"));
                }
                evs.push(w.flat(v, p, &mut BTreeSet::new(), 0)?);
            }
            Ok(evs.iter().any(evaluates).then_some(evs))
        };
        for dep in ["dependentSchemas", "dependencies"] {
            if let Some(Value::Object(o)) = m.get(dep) {
                for (k, d) in o {
                    let ev = w
                        .flat(d, &format!("{at}/{dep}/{k}"), &mut BTreeSet::new(), 0)
                        .map_err(fail)?;
                    if evaluates(&ev) {
                        return Err(fail(format!(
                            "\"{dep}\" at {} evaluates {}",
                            show(at),
                            w.what()
                        )));
                    }
                }
            }
        }
        let any = branch_evals("anyOf").map_err(fail)?;
        let one = branch_evals("oneOf").map_err(fail)?;
        let cond = {
            let i = branch_evals("if").map_err(fail)?;
            let t = branch_evals("then").map_err(fail)?;
            let e = branch_evals("else").map_err(fail)?;
            (i.is_some() || t.is_some() || e.is_some()) && m.contains_key("if")
        };
        let branching = usize::from(any.is_some()) + usize::from(one.is_some()) + usize::from(cond);
        if branching > 1 {
            return Err(fail(format!(
                "more than one of anyOf, oneOf and if at {} evaluate {}",
                show(at),
                w.what()
            )));
        }
        let merged = |extra: &Evaluated| {
            let mut e = base.clone();
            e.union(extra);
            e
        };
        if branching == 0 {
            // Flat: the rest goes into the node itself.
            for (k, v) in w.rest(&base, &s) {
                match (out.get_mut(&k), v) {
                    (Some(Value::Object(have)), Value::Object(add)) => {
                        for (n, t) in add {
                            have.entry(n).or_insert(t);
                        }
                    }
                    (Some(Value::Array(have)), Value::Array(add)) if k == "prefixItems" => {
                        while have.len() < add.len() {
                            have.push(Value::Bool(true));
                        }
                    }
                    (_, v) => {
                        out.insert(k, v);
                    }
                }
            }
            continue;
        }
        let branch = |name: &str, i: usize| -> Value {
            match &m[name] {
                Value::Array(a) => a[i].clone(),
                other => other.clone(),
            }
        };
        let alt = |members: Vec<Value>, ev: &Evaluated| -> Value {
            let mut a = w.rest(ev, &s);
            a.insert("allOf".into(), Value::Array(members));
            Value::Object(a)
        };
        let mut alts = Vec::new();
        if let Some(evs) = &any {
            let n = evs.len();
            if n > MAX_ANY_OF {
                return Err(fail(format!(
                    "anyOf at {} has {n} branches that evaluate {}, over {MAX_ANY_OF}",
                    show(at),
                    w.what()
                )));
            }
            for subset in 1u32..(1 << n) {
                let mut ev = base.clone();
                let mut members = Vec::new();
                for (i, e) in evs.iter().enumerate() {
                    if subset & (1 << i) != 0 {
                        ev.union(e);
                        members.push(branch("anyOf", i));
                    }
                }
                alts.push(alt(members, &ev));
            }
            out.remove("anyOf");
        } else if let Some(evs) = &one {
            for (i, e) in evs.iter().enumerate() {
                alts.push(alt(vec![branch("oneOf", i)], &merged(e)));
            }
        } else {
            let ev_of = |name: &str| -> Evaluated {
                m.get(name)
                    .map(|v| {
                        w.flat(v, &format!("{at}/{name}"), &mut BTreeSet::new(), 0)
                            .unwrap_or_default()
                    })
                    .unwrap_or_default()
            };
            let mut yes = merged(&ev_of("if"));
            yes.union(&ev_of("then"));
            let mut yes_members = vec![m["if"].clone()];
            if let Some(t) = m.get("then") {
                yes_members.push(t.clone());
            }
            alts.push(alt(yes_members, &yes));
            let mut no_members = vec![json!({"not": m["if"].clone()})];
            if let Some(e) = m.get("else") {
                no_members.push(e.clone());
            }
            alts.push(alt(no_members, &merged(&ev_of("else"))));
            for k in ["if", "then", "else"] {
                out.remove(k);
            }
        }
        let all_of = out
            .entry("allOf")
            .or_insert_with(|| Value::Array(Vec::new()));
        match all_of {
            Value::Array(a) => a.push(json!({"anyOf": alts})),
            _ => return Err(fail(format!("\"allOf\" at {} is not an array", show(at)))),
        }
    }
    Ok(Value::Object(out))
}
