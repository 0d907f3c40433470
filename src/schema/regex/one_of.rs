//! `oneOf` as an alternation once the branches are proven disjoint:
//! [`Gen::one_of`] and its proof [`Gen::excludes`] (types, `enum`/`const`,
//! numeric ranges, a required key with disjoint values). Where the proof
//! fails, [`logic`](super::logic) makes `oneOf` exact by difference. Split
//! from `regex.rs` by job; moved as is.

use super::*;

/// Proofs kept per node (distinct contexts of one `oneOf`).
const PROOFS_PER_NODE: usize = 16;

/// A `oneOf` proof kept for [`Gen::proof_memo`]: what it was made for (the
/// node, compared by structure with `$ref`s by target; the branches; the keys
/// forbidden), how deep it entered each `$ref` (`depths`), and its result.
pub(super) struct Proof {
    base: Node,
    group: Vec<Schema>,
    forbid: Vec<String>,
    depths: Vec<(String, usize)>,
    verdict: Verdict,
}

/// What a `oneOf` proof decides, per branch: whether it has any value
/// (`live`), the keys it must not write (`forbids`) and the branches it
/// must be made to exclude (`overlaps`); `coerced` when overlapping
/// branches are kept as `anyOf` ([`SchemaOptions::coerce_one_of`]).
#[derive(Clone)]
pub(super) struct Verdict {
    live: Vec<bool>,
    forbids: Vec<Vec<String>>,
    overlaps: Vec<Vec<usize>>,
    coerced: bool,
}

/// The groups a proof has merged with their nodes' other keywords, each
/// branch as it was first needed (`None` inside: the branch admits
/// nothing). Kept for one proof only: the branches' `$ref`s are resolved
/// against the references active while it runs, which it does not change.
#[derive(Default)]
pub(super) struct Expansions {
    entries: Vec<Expansion>,
}

struct Expansion {
    rest: Node,
    group: Vec<Schema>,
    merged: Vec<Option<Option<Rc<Node>>>>,
}

impl Expansions {
    /// The entry of `rest` with `group` (compared by structure), made
    /// when missing.
    fn find(&mut self, rest: &Node, group: &[Schema]) -> usize {
        if let Some(i) = self
            .entries
            .iter()
            .position(|e| e.group.as_slice() == group && e.rest == *rest)
        {
            return i;
        }
        self.entries.push(Expansion {
            rest: rest.clone(),
            group: group.to_vec(),
            merged: vec![None; group.len()],
        });
        self.entries.len() - 1
    }
}

impl<'d, 'a> Gen<'d, 'a> {
    #[inline(never)]
    pub(super) fn one_of(
        &mut self,
        base: Node,
        group: ir::Located<Vec<Schema>>,
        forbid: &[String],
    ) -> Result<Lang, SchemaError> {
        let memo = self.proof_memo(&base, &group.value, forbid);
        let Verdict {
            live,
            forbids,
            overlaps,
            coerced,
        } = match memo {
            Some(p) => p,
            None => {
                self.proof_depths = Some(HashMap::new());
                self.expansions = self.memoise.then(Expansions::default);
                let r = self.prove_one_of(&base, &group.value, forbid);
                self.expansions = None;
                let depths = self.proof_depths.take().expect("recording");
                let r = r?;
                self.remember_proof(&base, &group.value, forbid, depths, &r);
                r
            }
        };
        if coerced {
            self.doc.warn(
                &group.at,
                "oneOf compiled as anyOf (branches not provably disjoint)".into(),
            );
        }
        let mut parts = Vec::new();
        let mut len = 0;
        let rest_trivial = base.is_trivial();
        for (i, b) in group.value.iter().enumerate() {
            if !live[i] {
                continue;
            }
            // Exactly one: this branch and the complement of every branch
            // it may overlap.
            let exact;
            let b = if overlaps[i].is_empty() {
                b
            } else {
                let others: Vec<&Schema> = overlaps[i].iter().map(|&j| &group.value[j]).collect();
                exact = self.exactly_one(b, &others, &group.at).map_err(|e| {
                    SchemaError::OneOfOverlap {
                        pointer: group.at.clone(),
                        first: i.min(overlaps[i][0]),
                        second: i.max(overlaps[i][0]),
                        cause: e.to_string(),
                    }
                })?;
                &exact
            };
            let r = if rest_trivial {
                self.value(b, &forbids[i])?
            } else {
                self.merged_branch(&base, b, &forbids[i])?
            };
            self.grow_alternation(&mut len, &r, &group.at)?;
            parts.extend(r);
        }
        Ok(alt_all(parts))
    }

    /// The proof behind [`Gen::one_of`].
    fn prove_one_of(
        &mut self,
        base: &Node,
        group: &[Schema],
        forbid: &[String],
    ) -> Result<Verdict, SchemaError> {
        // Resolve every branch merged with the rest of the node (for the proof).
        let mut resolved: Vec<Option<Node>> = Vec::new();
        for b in group {
            let mut entered = Vec::new();
            let bn = self.schema_node(b, &mut entered)?;
            let merged = match bn {
                Some(bn) => Some(ir::merge(base, &bn)?),
                None => None,
            };
            // Flatten nested applicators one level for the proof's benefit.
            resolved.push(merged);
        }
        let k = resolved.len();
        // forbids[i]: keys branch i must not write so that it excludes others.
        let mut forbids: Vec<Vec<String>> = vec![forbid.to_vec(); k];
        let mut coerced = false;
        // overlaps[i]: branches that branch i must be made to exclude.
        let mut overlaps: Vec<Vec<usize>> = vec![Vec::new(); k];
        for i in 0..k {
            let Some(bi) = &resolved[i] else {
                continue;
            };
            for j in 0..k {
                if i == j {
                    continue;
                }
                let Some(bj) = &resolved[j] else {
                    continue;
                };
                if self.excludes(bi, bj, 0)? {
                    continue;
                }
                // A key branch j requires that branch i may leave out.
                let key = bj.required.iter().find(|r| !bi.required.contains(r));
                match key {
                    Some(key) if self.object_only(&bi) && self.object_only(&bj) => {
                        if !forbids[i].contains(key) {
                            forbids[i].push(key.clone());
                        }
                    }
                    _ => {
                        if self.opts.coerce_one_of {
                            coerced = true;
                        } else {
                            overlaps[i].push(j);
                        }
                    }
                }
            }
        }
        Ok(Verdict {
            live: resolved.iter().map(Option::is_some).collect(),
            forbids,
            overlaps,
            coerced,
        })
    }

    /// A proof made earlier for the same branches, on the same node and
    /// forbidden keys, that cut no recursion and would cut none now: each
    /// `$ref` it entered, as many times as it did, stays within
    /// `max_depth` beside the references active now. The proof then reads
    /// exactly what it read before, so its result is the same. Without this
    /// a `oneOf` inside a recursive definition is proved again at every
    /// unrolled level and path.
    fn proof_memo(&self, base: &Node, group: &[Schema], forbid: &[String]) -> Option<Verdict> {
        if !self.memoise {
            return None;
        }
        let entries = self.proofs.get(&base.at)?;
        let e = entries.iter().find(|e| {
            e.group == group && e.forbid == forbid && e.base == *base && self.uncut(&e.depths)
        })?;
        Some(e.verdict.clone())
    }

    /// Keeps a proof for [`Gen::proof_memo`] when it cut no recursion.
    fn remember_proof(
        &mut self,
        base: &Node,
        group: &[Schema],
        forbid: &[String],
        depths: HashMap<String, usize>,
        verdict: &Verdict,
    ) {
        let depths: Vec<(String, usize)> = depths.into_iter().collect();
        if !self.uncut(&depths) {
            return;
        }
        let entries = self.proofs.entry(base.at.clone()).or_default();
        if entries.len() >= PROOFS_PER_NODE {
            return;
        }
        entries.push(Proof {
            base: base.clone(),
            group: group.to_vec(),
            forbid: forbid.to_vec(),
            depths,
            verdict: verdict.clone(),
        });
    }

    /// Whether entering each `$ref` of `depths` as many more times as it
    /// says stays within `max_depth` beside the references active now.
    fn uncut(&self, depths: &[(String, usize)]) -> bool {
        depths
            .iter()
            .all(|(t, d)| self.active.get(t).copied().unwrap_or(0) + d <= self.opts.max_depth)
    }

    /// Proves that nothing branch `a` generates validates against `b`.
    #[inline(never)]
    pub(super) fn excludes(
        &mut self,
        a: &Node,
        b: &Node,
        depth: usize,
    ) -> Result<bool, SchemaError> {
        if depth > 4 {
            return Ok(false);
        }
        // A node with groups generates within the union of its branches
        // (each merged with the rest of it); one that validates with groups
        // validates within that union too: excluded when every branch is.
        if let Some((rest, group)) = split_group(a) {
            return self.excludes_each(rest, group, depth, |g, x| g.excludes(x, b, depth + 1));
        }
        if let Some((rest, group)) = split_group(b) {
            if self.excludes_each(rest, group, depth, |g, y| g.excludes(a, y, depth + 1))? {
                return Ok(true);
            }
        }
        let ta = self.gen_types(a);
        let tb = Self::valid_types(b);
        if ta.intersect(tb).is_empty() {
            return Ok(true);
        }
        if let Some(vals) = &a.enumeration {
            if vals.iter().all(|v| satisfies(b, v) == Some(false)) {
                return Ok(true);
            }
        }
        if let (Some(va), Some(vb)) = (&a.enumeration, &b.enumeration) {
            if !va.iter().any(|x| vb.iter().any(|y| ir::json_eq(x, y))) {
                return Ok(true);
            }
        }
        // Strings: a pattern that lists its strings (`^(?:ALIAS|BLANK)$`).
        if ta == Types::STRING && b.formats.is_empty() {
            for p in &a.patterns {
                if let Some(words) = literal_words(&p.value) {
                    if words
                        .iter()
                        .all(|w| satisfies(b, &Value::String(w.clone())) == Some(false))
                    {
                        return Ok(true);
                    }
                }
            }
        }
        // Strings: anchored patterns whose literal beginnings diverge
        // (`^pkg:npm/` and `^pkg:cargo/`).
        if ta == Types::STRING {
            for pa in &a.patterns {
                let Some(x) = literal_prefix(&pa.value) else {
                    continue;
                };
                for pb in &b.patterns {
                    if let Some(y) = literal_prefix(&pb.value) {
                        if !x.starts_with(&y) && !y.starts_with(&x) {
                            return Ok(true);
                        }
                    }
                }
            }
        }
        // Strings: patterns no string matches both of (`^[a-z_-]+$` and
        // `.*\{\{.+}}.*`): the product of their spelled languages is empty.
        if ta == Types::STRING && self.patterns_disjoint(a, b) {
            return Ok(true);
        }
        // Numbers: disjoint ranges.
        if ta.intersect(tb).0 & !(Types::INTEGER.0 | Types::NUMBER.0) == 0 && ranges_disjoint(a, b)
        {
            return Ok(true);
        }
        // Objects: a key `a` always writes whose values cannot validate in `b`.
        if ta == Types::OBJECT {
            for r in &a.required {
                let pa = a
                    .properties
                    .iter()
                    .find(|(k, _)| k == r)
                    .map(|(_, s)| s.clone());
                let pb = b
                    .properties
                    .iter()
                    .find(|(k, _)| k == r)
                    .map(|(_, s)| s.clone());
                if let (Some(pa), Some(pb)) = (pa, pb) {
                    let mut e = Vec::new();
                    let na = self.schema_node(&pa, &mut e)?;
                    let nb = self.schema_node(&pb, &mut e)?;
                    match (na, nb) {
                        (None, _) => return Ok(true),
                        (_, None) => return Ok(true),
                        (Some(na), Some(nb)) => {
                            if self.excludes(&na, &nb, depth + 1)? {
                                return Ok(true);
                            }
                        }
                    }
                }
            }
            // A key `a` always writes that `b` does not allow, or more keys
            // than `b` allows.
            for r in &a.required {
                if !self.may_hold(b, r) {
                    return Ok(true);
                }
            }
            let distinct = |r: &[String]| {
                let mut v: Vec<&String> = r.iter().collect();
                v.sort();
                v.dedup();
                v.len() as u64
            };
            if b.max_properties.is_some_and(|m| distinct(&a.required) > m) {
                return Ok(true);
            }
            // `b` requires more keys than `a` ever writes.
            if a.max_properties.is_some_and(|m| distinct(&b.required) > m) {
                return Ok(true);
            }
            // A key `b` requires that `a` can never write (a key `a`
            // requires is written even when no property declares it:
            // `dependentSchemas {d: {oneOf: ...}}` puts `d` in both).
            let a_extras = self.extras_schema(a).is_some() || !a.pattern_properties.is_empty();
            for r in &b.required {
                if !a.properties.iter().any(|(k, _)| k == r) && !a.required.contains(r) && !a_extras
                {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }
}

impl<'d, 'a> Gen<'d, 'a> {
    /// Whether no string matches both a pattern of `a` and a pattern of `b`
    /// (`false` where unproven). Each pattern's canonical spelled language
    /// is exact ([`Gen::pattern_language`]), so an empty product of two of
    /// them means no string value satisfies both patterns; a string `a`
    /// generates satisfies all of `a`'s, one valid in `b` all of `b`'s.
    /// At most four patterns a side, each product within
    /// `max_product_states`.
    fn patterns_disjoint(&self, a: &Node, b: &Node) -> bool {
        let langs = |n: &Node| -> Vec<String> {
            n.patterns
                .iter()
                .take(4)
                .filter_map(|p| self.pattern_language(p).ok().flatten())
                .map(|r| r.text())
                .collect()
        };
        let (la, lb) = (langs(a), langs(b));
        la.iter().any(|x| {
            lb.iter().any(|y| {
                crate::dfa::algebra::disjoint(x, y, self.opts.max_product_states).unwrap_or(false)
            })
        })
    }

    /// Whether every branch of `group`, merged with `rest`, passes `test`.
    ///
    /// Within one proof the same group is merged again for every branch
    /// it is compared with (each branch of one side against the other
    /// side's group): the merged branches are kept for the proof
    /// ([`Expansions`]).
    fn excludes_each(
        &mut self,
        rest: Node,
        group: Vec<Schema>,
        depth: usize,
        mut test: impl FnMut(&mut Self, &Node) -> Result<bool, SchemaError>,
    ) -> Result<bool, SchemaError> {
        if depth > 2 || group.len() > 16 {
            return Ok(false);
        }
        let e = self.expansions.as_mut().map(|x| x.find(&rest, &group));
        for (i, x) in group.iter().enumerate() {
            let known = match (&self.expansions, e) {
                (Some(x), Some(e)) => x.entries[e].merged[i].clone(),
                _ => None,
            };
            let merged = match known {
                Some(m) => m,
                None => {
                    let mut entered = Vec::new();
                    let m = match self.schema_node(x, &mut entered)? {
                        Some(xn) => Some(Rc::new(ir::merge(&rest, &xn)?)),
                        None => None,
                    };
                    if let (Some(x), Some(e)) = (self.expansions.as_mut(), e) {
                        x.entries[e].merged[i] = Some(m.clone());
                    }
                    m
                }
            };
            let Some(merged) = merged else {
                if matches!(x, Schema::Bool(false)) {
                    continue;
                }
                return Ok(false);
            };
            if !test(self, &merged)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Whether an object valid against `n` may have the key `k` (`false`
    /// only when surely not: not declared, or declared `false`, matched by
    /// no pattern, and `additionalProperties: false`, or a forbidden key).
    fn may_hold(&self, n: &Node, k: &str) -> bool {
        if n.forbid_keys.iter().any(|f| f == k) {
            return false;
        }
        if let Some((_, s)) = n.properties.iter().find(|(p, _)| p == k) {
            return !matches!(s, Schema::Bool(false));
        }
        if !matches!(n.additional, Some(Schema::Bool(false))) {
            return true;
        }
        n.pattern_properties
            .iter()
            .any(|(p, _)| ir::pattern_matches(&p.value, k) != Some(false))
    }
}

/// The node without its first `anyOf` (else `oneOf`) group, and that group.
fn split_group(n: &Node) -> Option<(Node, Vec<Schema>)> {
    let mut rest = n.clone();
    if !rest.any_of.is_empty() {
        let g = rest.any_of.remove(0);
        return Some((rest, g));
    }
    if !rest.one_of.is_empty() {
        let g = rest.one_of.remove(0);
        return Some((rest, g.value));
    }
    None
}

/// The strings an anchored pattern of plain words lists: `^word$`,
/// `^(?:w1|w2)$`, `^(w1|w2)$`; `None` for anything else.
fn literal_words(p: &str) -> Option<Vec<String>> {
    let inner = p.strip_prefix('^')?.strip_suffix('$')?;
    let inner = if let Some(g) = inner
        .strip_prefix("(?:")
        .or_else(|| inner.strip_prefix('('))
    {
        g.strip_suffix(')')?
    } else {
        inner
    };
    let words: Vec<String> = inner.split('|').map(str::to_string).collect();
    let plain = |w: &String| {
        w.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == ' ')
    };
    words.iter().all(plain).then_some(words)
}

/// The text every match of an anchored pattern begins with (`^pkg:npm/.+`
/// → `pkg:npm/`); `None` when the pattern is not anchored or has an
/// alternation anywhere.
fn literal_prefix(p: &str) -> Option<String> {
    let rest = p.strip_prefix('^')?;
    if p.contains('|') {
        return None;
    }
    let meta = |c: char| "^$\\.*+?()[]{}|".contains(c);
    let mut out: String = rest.chars().take_while(|&c| !meta(c)).collect();
    if let Some(next) = rest[out.len()..].chars().next() {
        if "*+?{".contains(next) {
            out.pop();
        }
    }
    Some(out)
}

fn ranges_disjoint(a: &Node, b: &Node) -> bool {
    let below = |hi: &Option<numeric::Bound>, lo: &Option<numeric::Bound>| match (hi, lo) {
        (Some(h), Some(l)) => {
            h.value < l.value || (h.value == l.value && (h.exclusive || l.exclusive))
        }
        _ => false,
    };
    below(&a.maximum, &b.minimum) || below(&b.maximum, &a.minimum)
}
