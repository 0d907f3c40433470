//! # Intersection and difference of regular languages, back to a regex
//!
//! The schema compiler writes regex text, which has union but neither
//! intersection nor complement. For the small scalar languages where it
//! needs them (a string that matches one pattern and not another, the
//! non-integers within a numeric range, property names outside the declared
//! ones) [`combine`] builds the two [`ByteDfa`]s, walks their product (only
//! the reachable pairs, at most `max_states` of them) and turns the result
//! back into a regex by state elimination.
//!
//! The regex must stay Unicode text (the pattern syntax rejects byte classes
//! that could match invalid UTF-8), so the product's byte transitions are
//! read back as *characters*: from each state, every UTF-8 sequence is
//! followed through the DFA and the code points reaching the same state are
//! grouped into one character class (memoized per state and number of
//! continuation bytes).
//!
//! Both limits are named: `max_states` product states
//! ([`AlgebraError::TooManyStates`]) and `max_len` bytes of regex text while
//! eliminating ([`AlgebraError::TooLong`]); state elimination can grow the
//! text exponentially, so the second is the one that matters.

use super::{ByteDfa, DfaConfig, DfaError};
use std::collections::{BTreeMap, BTreeSet};

type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// How two languages are combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Texts in both.
    And,
    /// Texts in the first and not in the second.
    AndNot,
}

/// Why a combination was not built.
#[derive(Debug, thiserror::Error)]
pub enum AlgebraError {
    /// The product automaton has more states than `max_states`.
    #[error("the product automaton has more than {limit} states")]
    TooManyStates {
        /// The limit passed (`max_states`), in states.
        limit: usize,
    },
    /// The regex read back from the product is longer than `max_len`.
    #[error("the combined regex is longer than {limit} bytes")]
    TooLong {
        /// The limit passed (`max_len`), in bytes.
        limit: usize,
    },
    /// One of the two regexes did not become a DFA.
    #[error(transparent)]
    Dfa(#[from] DfaError),
}

/// `a op b` as a regex (regex crate syntax, whole-text). `None`: empty.
pub fn combine(
    a: &str,
    b: &str,
    op: Op,
    max_states: usize,
    max_len: usize,
) -> Result<Option<String>, AlgebraError> {
    let config = DfaConfig {
        lazy_states: None,
        ..DfaConfig::default()
    };
    let da = ByteDfa::new(a, &config)?;
    let db = ByteDfa::new(b, &config)?;
    let p = Product::build(&da, &db, op, max_states)?;
    p.to_regex(max_len)
}

/// Whether no text is in both `a` and `b` (regex crate syntax,
/// whole-text): their product, at most `max_states` states, reaches no
/// accepting state. Cheaper than [`combine`] when only emptiness matters:
/// no regex is read back.
pub fn disjoint(a: &str, b: &str, max_states: usize) -> Result<bool, AlgebraError> {
    let config = DfaConfig {
        lazy_states: None,
        ..DfaConfig::default()
    };
    let da = ByteDfa::new(a, &config)?;
    let db = ByteDfa::new(b, &config)?;
    let p = Product::build(&da, &db, Op::And, max_states)?;
    Ok(!p.accepting.iter().any(|&x| x))
}

/// A trimmed DFA: state 0 is the start, `trans[s * 256 + byte]` is the next
/// state or `u32::MAX` (dead).
struct Product {
    trans: Vec<u32>,
    accepting: Vec<bool>,
}

const DEAD: u32 = u32::MAX;

impl Product {
    fn build(a: &ByteDfa, b: &ByteDfa, op: Op, max: usize) -> Result<Product, AlgebraError> {
        let mut ids: HashMap<(u32, u32), u32> = HashMap::default();
        let start = (a.start().as_u32(), b.start().as_u32());
        let mut states = vec![start];
        ids.insert(start, 0);
        let mut trans: Vec<u32> = Vec::new();
        let mut i = 0;
        let sid = |x: u32| regex_automata::util::primitives::StateID::new(x as usize).expect("id");
        while i < states.len() {
            let (sa, sb) = states[i];
            let mut last: Option<((u32, u32), u32)> = None;
            for byte in 0..=255u8 {
                let na = a.next(sid(sa), byte);
                if a.is_dead(na) {
                    trans.push(DEAD);
                    continue;
                }
                let nb = b.next(sid(sb), byte);
                if op == Op::And && b.is_dead(nb) {
                    trans.push(DEAD);
                    continue;
                }
                let key = (na.as_u32(), nb.as_u32());
                // Neighbouring bytes mostly lead to the same pair.
                if let Some(&(k, id)) = last.as_ref() {
                    if k == key {
                        trans.push(id);
                        continue;
                    }
                }
                let id = match ids.get(&key) {
                    Some(&id) => id,
                    None => {
                        if states.len() >= max {
                            return Err(AlgebraError::TooManyStates { limit: max });
                        }
                        let id = states.len() as u32;
                        ids.insert(key, id);
                        states.push(key);
                        id
                    }
                };
                trans.push(id);
                last = Some((key, id));
            }
            i += 1;
        }
        let accepting = states
            .iter()
            .map(|&(sa, sb)| {
                let x = a.is_accepting(sid(sa));
                let y = b.is_accepting(sid(sb)) && !b.is_dead(sid(sb));
                match op {
                    Op::And => x && y,
                    Op::AndNot => x && !y,
                }
            })
            .collect();
        let mut p = Product { trans, accepting };
        p.trim();
        Ok(p)
    }

    fn len(&self) -> usize {
        self.accepting.len()
    }

    /// Points every transition into a state that cannot reach acceptance at
    /// `DEAD`.
    fn trim(&mut self) {
        let n = self.len();
        let mut live = self.accepting.clone();
        loop {
            let mut changed = false;
            for s in 0..n {
                if live[s] {
                    continue;
                }
                if self.trans[s * 256..s * 256 + 256]
                    .iter()
                    .any(|&t| t != DEAD && live[t as usize])
                {
                    live[s] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        for t in self.trans.iter_mut() {
            if *t != DEAD && !live[*t as usize] {
                *t = DEAD;
            }
        }
        if !live[0] {
            self.accepting[0] = false;
        }
    }

    /// Targets after `k` continuation bytes from `s`, with the code point
    /// bits those bytes contribute (ranges, inclusive).
    fn cont(
        &self,
        s: u32,
        k: u32,
        memo: &mut HashMap<(u32, u32), Vec<(u32, Vec<(u32, u32)>)>>,
    ) -> Vec<(u32, Vec<(u32, u32)>)> {
        if let Some(r) = memo.get(&(s, k)) {
            return r.clone();
        }
        let mut out: BTreeMap<u32, Vec<(u32, u32)>> = BTreeMap::new();
        for byte in 0x80..=0xBFu8 {
            let t = self.trans[s as usize * 256 + byte as usize];
            if t == DEAD {
                continue;
            }
            let bits = (byte & 0x3F) as u32;
            if k == 1 {
                out.entry(t).or_default().push((bits, bits));
            } else {
                let shift = 6 * (k - 1);
                for (target, ranges) in self.cont(t, k - 1, memo) {
                    let e = out.entry(target).or_default();
                    for (lo, hi) in ranges {
                        e.push(((bits << shift) | lo, (bits << shift) | hi));
                    }
                }
            }
        }
        let r: Vec<(u32, Vec<(u32, u32)>)> =
            out.into_iter().map(|(t, v)| (t, merge_ranges(v))).collect();
        memo.insert((s, k), r.clone());
        r
    }

    /// Character-class edges out of `s`: target → code point ranges.
    fn char_edges(
        &self,
        s: u32,
        memo: &mut HashMap<(u32, u32), Vec<(u32, Vec<(u32, u32)>)>>,
    ) -> BTreeMap<u32, Vec<(u32, u32)>> {
        let mut out: BTreeMap<u32, Vec<(u32, u32)>> = BTreeMap::new();
        for byte in 0..0x80u32 {
            let t = self.trans[s as usize * 256 + byte as usize];
            if t != DEAD {
                out.entry(t).or_default().push((byte, byte));
            }
        }
        // (lead bytes, continuation count, bits of the lead, valid range)
        let leads: [(u8, u8, u32, u32, (u32, u32)); 3] = [
            (0xC2, 0xDF, 1, 0x1F, (0x80, 0x7FF)),
            (0xE0, 0xEF, 2, 0x0F, (0x800, 0xFFFF)),
            (0xF0, 0xF4, 3, 0x07, (0x10000, 0x10FFFF)),
        ];
        for (lo, hi, k, mask, valid) in leads {
            for lead in lo..=hi {
                let t1 = self.trans[s as usize * 256 + lead as usize];
                if t1 == DEAD {
                    continue;
                }
                let base = ((lead as u32) & mask) << (6 * k);
                for (target, ranges) in self.cont(t1, k, memo) {
                    let e = out.entry(target).or_default();
                    for (a, b) in ranges {
                        let (a, b) = ((base | a).max(valid.0), (base | b).min(valid.1));
                        // Surrogates are not characters.
                        for (x, y) in [(a, b.min(0xD7FF)), (a.max(0xE000), b)] {
                            if x <= y {
                                e.push((x, y));
                            }
                        }
                    }
                }
            }
        }
        out.into_iter().map(|(t, v)| (t, merge_ranges(v))).collect()
    }

    /// State elimination over character-class edges.
    fn to_regex(&self, max_len: usize) -> Result<Option<String>, AlgebraError> {
        let n = self.len();
        if !self.accepting[0] && self.trans[..256].iter().all(|&t| t == DEAD) {
            return Ok(None);
        }
        // Nodes 0..n are states, n is the final node; the start is 0.
        let fin = n;
        let mut edges: Vec<BTreeMap<usize, String>> = vec![BTreeMap::new(); n + 1];
        let mut memo = HashMap::default();
        for s in 0..n {
            for (t, ranges) in self.char_edges(s as u32, &mut memo) {
                edges[s].insert(t as usize, class(&ranges));
            }
            if self.accepting[s] {
                add_alt(&mut edges[s], fin, String::new());
            }
        }
        // The start may have incoming edges: eliminate through a fresh start.
        let start = n + 1;
        edges.push(BTreeMap::new());
        edges[start].insert(0, String::new());
        let mut alive: Vec<bool> = vec![true; n + 2];
        // Per node, the other nodes with an edge into it (kept up to date
        // as states are eliminated: rebuilding it per elimination was
        // quadratic, most of a large product's time).
        let mut incoming: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n + 2];
        for (p, e) in edges.iter().enumerate() {
            for &q in e.keys() {
                if q != p {
                    incoming[q].insert(p);
                }
            }
        }
        // The states by in × out edges, least first (ties: the lowest
        // state), kept up to date as eliminations change the degrees of the
        // eliminated state's neighbours (a scan of every state per
        // elimination was quadratic).
        let cost = |k: usize, incoming: &[BTreeSet<usize>], edges: &[BTreeMap<usize, String>]| {
            incoming[k].len() * edges[k].len()
        };
        let mut costs: Vec<usize> = (0..n).map(|k| cost(k, &incoming, &edges)).collect();
        let mut order: BTreeSet<(usize, usize)> = (0..n).map(|k| (costs[k], k)).collect();
        loop {
            // The state with the fewest in × out edges.
            let Some((_, k)) = order.pop_first() else {
                break;
            };
            let mut touched: Vec<usize> = incoming[k].iter().copied().collect();
            let looped = edges[k].remove(&k).map(|l| star(&l));
            // Each edge out of k grouped once, each edge into it (with k's
            // loop) once: only their concatenations are per pair.
            let outs: Vec<(usize, String)> = edges[k].iter().map(|(q, r)| (*q, group(r))).collect();
            for p in std::mem::take(&mut incoming[k]) {
                let Some(into) = edges[p].remove(&k) else {
                    continue;
                };
                let mut head = group(&into);
                if let Some(l) = &looped {
                    head.push_str(l);
                }
                for (q, out) in &outs {
                    let mut r = String::with_capacity(head.len() + out.len());
                    r.push_str(&head);
                    r.push_str(out);
                    if r.len() > max_len {
                        return Err(AlgebraError::TooLong { limit: max_len });
                    }
                    add_alt(&mut edges[p], *q, r);
                    if *q != p {
                        incoming[*q].insert(p);
                    }
                    if edges[p][q].len() > max_len {
                        return Err(AlgebraError::TooLong { limit: max_len });
                    }
                }
            }
            for (q, _) in &outs {
                incoming[*q].remove(&k);
            }
            edges[k].clear();
            alive[k] = false;
            touched.extend(outs.iter().map(|(q, _)| *q));
            for x in touched {
                if x < n && alive[x] {
                    let c = cost(x, &incoming, &edges);
                    if c != costs[x] {
                        order.remove(&(costs[x], x));
                        costs[x] = c;
                        order.insert((c, x));
                    }
                }
            }
        }
        let r = edges[start].get(&fin).cloned();
        Ok(r)
    }
}

fn merge_ranges(mut v: Vec<(u32, u32)>) -> Vec<(u32, u32)> {
    v.sort();
    let mut out: Vec<(u32, u32)> = Vec::new();
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

fn class(ranges: &[(u32, u32)]) -> String {
    let one = |c: u32| format!("\\x{{{c:X}}}");
    let mut s = String::from("[");
    for &(a, b) in ranges {
        if a == b {
            s.push_str(&one(a));
        } else {
            s.push_str(&format!("{}-{}", one(a), one(b)));
        }
    }
    s.push(']');
    s
}

fn group(r: &str) -> String {
    if r.is_empty() || r.starts_with('[') && r.ends_with(']') && !r[1..].contains('[') {
        r.to_string()
    } else {
        format!("(?:{r})")
    }
}

fn star(r: &str) -> String {
    format!(
        "{}*",
        if r.is_empty() {
            "(?:)".into()
        } else {
            group(r)
        }
    )
}

fn add_alt(e: &mut BTreeMap<usize, String>, q: usize, r: String) {
    match e.get_mut(&q) {
        Some(old) => *old = format!("(?:{old}|{r})"),
        None => {
            e.insert(q, r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full(re: &str) -> regex::Regex {
        regex::Regex::new(&format!("^(?:{re})$")).unwrap()
    }

    #[test]
    fn intersection_and_difference_agree_with_the_regex_crate() {
        let cases = [
            ("[a-c]{1,3}", "a.*", Op::And),
            ("[a-z]*", "abc|x+", Op::AndNot),
            ("(?:é|ü|😀|a)*", "(?:é|a)*", Op::AndNot),
            ("[0-9]+(?:\\.[0-9]+)?", "[0-9]+", Op::AndNot),
            ("[^\"\\\\]*", ".*foo.*", Op::AndNot),
        ];
        let samples = [
            "", "a", "ab", "abc", "abcd", "b", "x", "xx", "abcx", "é", "üé", "😀", "aé😀", "1",
            "12", "1.5", "1.0", "foo", "afoob", "fo",
        ];
        for (a, b, op) in cases {
            let r = combine(a, b, op, 10_000, 1 << 20).unwrap();
            let (ra, rb) = (full(a), full(b));
            for s in samples {
                let want = match op {
                    Op::And => ra.is_match(s) && rb.is_match(s),
                    Op::AndNot => ra.is_match(s) && !rb.is_match(s),
                };
                let got = r.as_ref().is_some_and(|r| full(r).is_match(s));
                assert_eq!(got, want, "{a} {op:?} {b} on {s:?}: {r:?}");
            }
        }
        assert_eq!(combine("a+", "b+", Op::And, 100, 1000).unwrap(), None);
        assert!(matches!(
            combine("[a-z]{0,50}", "[a-m]{0,40}", Op::And, 10, 1 << 20),
            Err(AlgebraError::TooManyStates { limit: 10 })
        ));
    }
}
