//! # Counted `contains`: several `contains`, and `contains` beside
//! `minItems` / `maxItems`
//!
//! One `contains` with only a lower count and no length bound is written
//! directly by [`Gen::array_contains`]. Everything else — several
//! `contains` on one array (they come from `allOf`, and from `¬items S`,
//! which is `contains ¬S`), a `maxContains`, `minItems` / `maxItems`
//! beside them — is a *counted product on the item language*, which is
//! still regular and is written exactly here.
//!
//! ## Item classes
//!
//! Each item falls in one *class*: for every `contains` `i`, whether it
//! matches `cᵢ` or not. A class is the item schema conjoined with `cᵢ` or
//! `¬cᵢ` for each `i` (complements from [`Gen::negate`]); classes that no
//! value satisfies drop out, which is what makes the common cases small
//! (`items: A` with `contains: ¬A` from a `oneOf` leaves one class, or
//! none). When a complement cannot be written and no `contains` has a
//! `maxContains`, the classes are *witness* classes instead: for each
//! non-empty set `S` of `contains`, an item matching every `cᵢ` in `S`,
//! counted toward those; plus any item, counted toward none. The regex then
//! says "some choice of witnesses reaches every `minContains`", which is
//! the same language because the lower bounds are monotone.
//!
//! ## The walk
//!
//! The states are `(items written, count per contains)`; the item count is
//! capped at `maxItems` (no item past it) or, without one, at
//! `max(minItems, 1)`, where it loops; a count without `maxContains` is
//! capped at its `minContains`, one with it runs to `maxContains` (no
//! matching item past it). Every edge but a loop moves forward, so the
//! regex of a state is "its loops, any number of times, then one of its
//! edges followed by the next state's regex, or the end when the state
//! accepts" (all counts within bounds and at least `minItems` written).
//! The text repeats a state once per path that reaches it, so it is bounded
//! by `max_regex_len` (the error names the `contains` and the knob), and
//! the number of states by `max_repeat`.

use super::nodes::{conj, disj};
use super::*;
use crate::schema::ir::Contains;

/// One item class: its regex and, per `contains`, whether it counts.
struct Class {
    re: Rx,
    hits: Vec<bool>,
}

/// The counted walk over item classes.
struct Walk<'c> {
    classes: &'c [Class],
    counts: &'c [Contains],
    /// `minItems` (0 when absent) and `maxItems`.
    lo: u64,
    hi: Option<u64>,
    comma: &'c Rx,
    /// Any item (the union of the classes), for the rest of an array once
    /// every count is reached and none has a maximum left to watch.
    any: &'c Rx,
    limit: usize,
}

/// A state's text grew past the limit.
struct TooLong;

impl Walk<'_> {
    /// The capped item count after one more item.
    fn next_len(&self, l: u64) -> u64 {
        match self.hi {
            Some(_) => l + 1,
            None => (l + 1).min(self.lo.max(1)),
        }
    }

    /// The counts after an item of class `c`, `None` when a `maxContains`
    /// would be passed.
    fn next_counts(&self, j: &[u64], c: &Class) -> Option<Vec<u64>> {
        let mut out = j.to_vec();
        for (i, k) in self.counts.iter().enumerate() {
            if !c.hits[i] {
                continue;
            }
            match k.max {
                Some(b) if j[i] >= b => return None,
                Some(_) => out[i] += 1,
                None => out[i] = (j[i] + 1).min(k.min),
            }
        }
        Some(out)
    }

    fn accepts(&self, l: u64, j: &[u64]) -> bool {
        l >= self.lo && self.counts.iter().zip(j).all(|(k, &n)| n >= k.min)
    }

    /// The items from state `(l, j)` on (`None`: no way to accept).
    fn text(
        &self,
        l: u64,
        j: &[u64],
        memo: &mut HashMap<(u64, Vec<u64>), Option<Rx>>,
    ) -> Result<Option<Rx>, TooLong> {
        let key = (l, j.to_vec());
        if let Some(r) = memo.get(&key) {
            return Ok(r.clone());
        }
        let sep = if l > 0 { self.comma.clone() } else { Rx::EMPTY };
        let done = self
            .counts
            .iter()
            .zip(j)
            .all(|(k, &n)| k.max.is_none() && n >= k.min);
        if done {
            // Any items from here: `lo - l` more at least, `hi - l` at most.
            let need = self.lo.saturating_sub(l);
            let most = self.hi.map(|h| h - l);
            let (any, comma) = (self.any, self.comma);
            let r = if most == Some(0) {
                Rx::EMPTY
            } else if l > 0 {
                rx!["(?:", comma, any, ")", repeat(need, most)]
            } else {
                let rest = rx![
                    "(?:",
                    comma,
                    any,
                    ")",
                    repeat(need.saturating_sub(1), most.map(|m| m - 1))
                ];
                if need == 0 {
                    rx!["(?:", any, rest, ")?"]
                } else {
                    rx![any, rest]
                }
            };
            memo.insert(key, Some(r.clone()));
            return Ok(Some(r));
        }
        let mut loops: Vec<Rx> = Vec::new();
        let mut alts: Vec<Rx> = Vec::new();
        if self.hi.is_none_or(|h| l < h) {
            let nl = self.next_len(l);
            for c in self.classes {
                let Some(nj) = self.next_counts(j, c) else {
                    continue;
                };
                if nl == l && nj == j {
                    loops.push(c.re.clone());
                } else if let Some(r) = self.text(nl, &nj, memo)? {
                    alts.push(rx![&sep, &c.re, r]);
                }
            }
        }
        let accept = self.accepts(l, j);
        let r = if alts.is_empty() && !accept {
            None
        } else {
            // A loop only occurs once an item was written (l ≥ 1), so its
            // items take a comma.
            let bar = Rx::from("|");
            let pre = match loops.len() {
                0 => Rx::EMPTY,
                1 => rx!["(?:", self.comma, &loops[0], ")*"],
                _ => rx!["(?:", self.comma, "(?:", Rx::join(loops, &bar), "))*"],
            };
            let body = match (alts.len(), accept) {
                (0, _) => Rx::EMPTY,
                (1, false) => alts.pop().expect("one"),
                (1, true) => rx!["(?:", &alts[0], ")?"],
                (_, false) => rx!["(?:", Rx::join(alts, &bar), ")"],
                (_, true) => rx!["(?:", Rx::join(alts, &bar), ")?"],
            };
            Some(rx![pre, body])
        };
        if r.as_ref().is_some_and(|s| s.len() > self.limit) {
            return Err(TooLong);
        }
        memo.insert(key, r.clone());
        Ok(r)
    }
}

impl<'d, 'a> Gen<'d, 'a> {
    /// Arrays with several `contains`, or `contains` beside `minItems` /
    /// `maxItems` / `maxContains` that [`Gen::array_contains`] does not
    /// write directly (see the module essay). No `prefixItems`.
    #[inline(never)]
    pub(super) fn array_counted_contains(&mut self, n: &Node) -> Result<Lang, SchemaError> {
        let at = &n.contains[0].at;
        let (lo, hi) = (n.min_items.unwrap_or(0), n.max_items);
        if hi.is_some_and(|h| h < lo) {
            return self.contradiction(SchemaError::Contradiction {
                pointer: n.at.clone(),
                detail: format!("minItems {lo} is greater than maxItems {}", hi.unwrap_or(0)),
            });
        }
        let mut counts: Vec<Contains> = Vec::new();
        for c in &n.contains {
            if c.max.is_some_and(|b| b < c.min) {
                return Ok(None);
            }
            if c.min == 0 && c.max.is_none() {
                continue; // holds for every array
            }
            counts.push(c.clone());
        }
        let big = counts
            .iter()
            .map(|c| c.max.unwrap_or(c.min))
            .chain([hi.unwrap_or(lo)])
            .max()
            .unwrap_or(0);
        if big > self.opts.max_repeat {
            return Err(SchemaError::TooBig {
                what: "contains count bound".into(),
                pointer: at.clone(),
                size: big,
                limit: self.opts.max_repeat,
                knob: "max_repeat",
            });
        }
        // States: item counts (capped) times the per-contains counts.
        let states = counts
            .iter()
            .map(|c| c.max.unwrap_or(c.min).saturating_add(1))
            .fold(hi.unwrap_or(lo.max(1)).saturating_add(1), |s, k| {
                s.saturating_mul(k)
            });
        if states > self.opts.max_repeat {
            return Err(SchemaError::TooBig {
                what: "contains: counted states".into(),
                pointer: at.clone(),
                size: states,
                limit: self.opts.max_repeat,
                knob: "max_repeat",
            });
        }
        let item = n.items.clone().unwrap_or(Schema::Bool(true));
        let Some(any) = self.value(&item, &[])? else {
            // No item: only the empty array, if it is allowed.
            let ok = lo == 0 && counts.is_empty();
            return Ok(ok.then(|| rx!["\\[", &self.lay.inner, "\\]"]));
        };
        let classes = match self.exact_classes(&item, &counts, at) {
            Ok(c) => c,
            Err(e) if counts.iter().any(|c| c.max.is_some()) => return Err(e),
            Err(_) => self.witness_classes(&item, &counts)?,
        };
        // A lower count that no class reaches: no array.
        for (i, c) in counts.iter().enumerate() {
            if c.min > 0 && !classes.iter().any(|k| k.hits[i]) {
                return Ok(None);
            }
        }
        let Lay { inner, comma, .. } = self.lay.clone();
        let walk = Walk {
            classes: &classes,
            counts: &counts,
            lo,
            hi,
            comma: &comma,
            any: &any,
            limit: self.opts.max_regex_len,
        };
        let start = vec![0; counts.len()];
        match walk.text(0, &start, &mut HashMap::new()) {
            Ok(None) => Ok(None),
            Ok(Some(body)) => Ok(Some(rx!["\\[", &inner, body, &inner, "\\]"])),
            Err(TooLong) => Err(SchemaError::TooBig {
                what: "contains: regex of the counted items".into(),
                pointer: at.clone(),
                size: self.opts.max_regex_len as u64 + 1,
                limit: self.opts.max_regex_len as u64,
                knob: "max_regex_len",
            }),
        }
    }

    /// The regex of an item class; a contradiction inside it (in strict
    /// mode an error where the user wrote it) only means the class is
    /// empty.
    fn class_value(&mut self, s: &Schema) -> Result<Lang, SchemaError> {
        match self.value(s, &[]) {
            Err(SchemaError::Contradiction { .. }) => Ok(None),
            r => r,
        }
    }

    /// Disjoint classes: the item with each `contains` or its complement.
    fn exact_classes(
        &mut self,
        item: &Schema,
        counts: &[Contains],
        at: &Pointer,
    ) -> Result<Vec<Class>, SchemaError> {
        let mut negs = Vec::new();
        for c in counts {
            negs.push(disj(&c.at, self.negate(&c.schema, &c.at)?));
        }
        // Split the item by each `contains` in turn, dropping the empty
        // halves as they appear (most are, for enums and `¬items`).
        let mut parts: Vec<(Vec<Schema>, Vec<bool>, Rx)> = Vec::new();
        if let Some(re) = self.value(item, &[])? {
            parts.push((vec![item.clone()], Vec::new(), re));
        }
        for (i, c) in counts.iter().enumerate() {
            let mut next = Vec::new();
            for (p, hits, _) in parts {
                for hit in [true, false] {
                    let mut q = p.clone();
                    q.push(if hit {
                        c.schema.clone()
                    } else {
                        negs[i].clone()
                    });
                    if let Some(re) = self.class_value(&conj(at, q.clone()))? {
                        let mut h = hits.clone();
                        h.push(hit);
                        next.push((q, h, re));
                    }
                }
            }
            parts = next;
        }
        Ok(parts
            .into_iter()
            .map(|(_, hits, re)| Class { re, hits })
            .collect())
    }

    /// Overlapping witness classes (only lower counts): any item counting
    /// toward nothing, and for each non-empty set of `contains`, an item
    /// matching all of them counting toward each.
    fn witness_classes(
        &mut self,
        item: &Schema,
        counts: &[Contains],
    ) -> Result<Vec<Class>, SchemaError> {
        let size = 1u64 << counts.len().min(63);
        if size > self.opts.max_branches as u64 {
            return Err(SchemaError::TooBig {
                what: "contains: witness classes".into(),
                pointer: counts[0].at.clone(),
                size,
                limit: self.opts.max_branches as u64,
                knob: "max_branches",
            });
        }
        let mut out = Vec::new();
        for mask in 0u32..(1 << counts.len()) {
            let hits: Vec<bool> = (0..counts.len()).map(|i| mask & (1 << i) != 0).collect();
            let mut parts = vec![item.clone()];
            for (i, c) in counts.iter().enumerate() {
                if hits[i] {
                    parts.push(c.schema.clone());
                }
            }
            let at = counts[0].at.clone();
            if let Some(re) = self.class_value(&conj(&at, parts))? {
                out.push(Class { re, hits });
            }
        }
        Ok(out)
    }
}

impl Gen<'_, '_> {
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
        let Lay { inner, comma, .. } = self.lay.clone();
        let empty = rx!["\\[", &inner, "\\]"];
        let only_others = other.as_ref().map(|o| rx![o, "(?:", &comma, o, ")*"]);
        let Some(m) = m else {
            return Ok(if a == 0 {
                Some(match only_others {
                    Some(o) => rx!["\\[", &inner, "(?:", o, ")?", &inner, "\\]"],
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
                Some(o) => (rx!["(?:", o, &comma, ")*"], rx!["(?:", &comma, o, ")*"]),
                None => (Rx::EMPTY, Rx::EMPTY),
            };
            let more = if hi == Some(1) {
                Rx::EMPTY
            } else {
                rx![
                    "(?:",
                    &comma,
                    &m,
                    &post,
                    ")",
                    repeat(lo - 1, hi.map(|h| h - 1))
                ]
            };
            Some(rx![pre, &m, post, more])
        };
        let body = match (a, list, only_others) {
            (0, Some(l), Some(o)) => rx!["(?:", l, "|", o, ")?"],
            (0, Some(l), None) => rx!["(?:", l, ")?"],
            (0, None, Some(o)) => rx!["(?:", o, ")?"],
            (0, None, None) => Rx::EMPTY,
            (_, Some(l), _) => l,
            (_, None, _) => return Ok(None),
        };
        Ok(Some(rx!["\\[", &inner, body, &inner, "\\]"]))
    }
}
