//! # An Earley recognizer over the GBNF syntax tree
//!
//! The independent oracle for GBNF grammars: it shares only the parser's
//! output ([`constrain::grammar::gbnf::Gbnf`]) with the compiler, and
//! decides membership for the full context-free language — no inlining, no
//! recursion rewriting, no depth bound, no automaton.
//!
//! The grammar is first flattened into plain BNF: each rule is a
//! nonterminal; each group of alternatives and each repetition gets a fresh
//! nonterminal (`x{2,4}` is `x x O2` with `O2 → ε | x O1`, `O1 → ε | x`;
//! `x{2,}` is `x x S` with `S → ε | x S`); literals are sequences of
//! one-character terminals. Recognition is textbook Earley over Unicode
//! code points, with Aycock and Horspool's fix for nullable nonterminals (a
//! prediction of a nullable symbol also moves the dot past it). A text
//! that is not valid UTF-8 is never in a GBNF language.
//!
//! [`sample`] draws random texts of a grammar (a random derivation, cut at a
//! depth), so that tests see accepted texts and not only random ones.

use constrain::grammar::gbnf::{Expr, Gbnf};
use rand::Rng;
use std::collections::{HashMap, HashSet};

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Sym {
    /// Character ranges, negated or not.
    T(Vec<(char, char)>, bool),
    N(usize),
}

/// A GBNF grammar as plain BNF, ready to recognize texts.
pub struct Earley {
    /// Productions (lhs, rhs).
    prods: Vec<(usize, Vec<Sym>)>,
    /// Productions of each nonterminal.
    by_lhs: Vec<Vec<usize>>,
    nullable: Vec<bool>,
    start: usize,
}

impl Earley {
    /// Flattens `g` (its `root` is the start symbol).
    pub fn new(g: &Gbnf) -> Earley {
        let ids: HashMap<&str, usize> = g
            .rules
            .iter()
            .enumerate()
            .map(|(i, r)| (r.name.as_str(), i))
            .collect();
        let mut b = Builder {
            ids: &ids,
            prods: Vec::new(),
            next: g.rules.len(),
        };
        for (i, r) in g.rules.iter().enumerate() {
            b.rule(i, &r.body);
        }
        let start = b.next;
        b.prods.push((start, vec![Sym::N(ids["root"])]));
        let n = start + 1;
        let prods = b.prods;
        let mut by_lhs = vec![Vec::new(); n];
        for (i, (l, _)) in prods.iter().enumerate() {
            by_lhs[*l].push(i);
        }
        let mut nullable = vec![false; n];
        loop {
            let mut changed = false;
            for (l, rhs) in &prods {
                if !nullable[*l] && rhs.iter().all(|s| matches!(s, Sym::N(m) if nullable[*m])) {
                    nullable[*l] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        Earley {
            prods,
            by_lhs,
            nullable,
            start,
        }
    }

    /// Whether the grammar derives `text` from `root`.
    pub fn accepts(&self, text: &[u8]) -> bool {
        let Ok(text) = std::str::from_utf8(text) else {
            return false;
        };
        let chars: Vec<char> = text.chars().collect();
        // An item: (production, dot, origin).
        type Item = (usize, usize, usize);
        let mut sets: Vec<Vec<Item>> = vec![Vec::new(); chars.len() + 1];
        let mut seen: Vec<HashSet<Item>> = vec![HashSet::new(); chars.len() + 1];
        for &p in &self.by_lhs[self.start] {
            let it = (p, 0, 0);
            seen[0].insert(it);
            sets[0].push(it);
        }
        for k in 0..=chars.len() {
            let mut i = 0;
            while i < sets[k].len() {
                let (p, dot, origin) = sets[k][i];
                i += 1;
                let (lhs, rhs) = &self.prods[p];
                match rhs.get(dot) {
                    None => {
                        // Complete: advance every item at `origin` waiting for lhs.
                        let waiting: Vec<Item> = sets[origin]
                            .iter()
                            .copied()
                            .filter(|&(q, d, _)| self.prods[q].1.get(d) == Some(&Sym::N(*lhs)))
                            .collect();
                        for (q, d, o) in waiting {
                            let it = (q, d + 1, o);
                            if seen[k].insert(it) {
                                sets[k].push(it);
                            }
                        }
                    }
                    Some(Sym::N(m)) => {
                        for &q in &self.by_lhs[*m] {
                            let it = (q, 0, k);
                            if seen[k].insert(it) {
                                sets[k].push(it);
                            }
                        }
                        if self.nullable[*m] {
                            let it = (p, dot + 1, origin);
                            if seen[k].insert(it) {
                                sets[k].push(it);
                            }
                        }
                    }
                    Some(Sym::T(ranges, negated)) => {
                        if k < chars.len() && Expr::class_contains(ranges, *negated, chars[k]) {
                            let it = (p, dot + 1, origin);
                            if seen[k + 1].insert(it) {
                                sets[k + 1].push(it);
                            }
                        }
                    }
                }
            }
        }
        sets[chars.len()].iter().any(|&(p, dot, origin)| {
            origin == 0 && self.prods[p].0 == self.start && dot == self.prods[p].1.len()
        })
    }
}

struct Builder<'a> {
    ids: &'a HashMap<&'a str, usize>,
    prods: Vec<(usize, Vec<Sym>)>,
    next: usize,
}

impl Builder<'_> {
    fn fresh(&mut self) -> usize {
        self.next += 1;
        self.next - 1
    }

    fn rule(&mut self, lhs: usize, body: &Expr) {
        match body {
            Expr::Alt(v) => {
                for a in v {
                    let rhs = self.seq(a);
                    self.prods.push((lhs, rhs));
                }
            }
            e => {
                let rhs = self.seq(e);
                self.prods.push((lhs, rhs));
            }
        }
    }

    /// The symbols of `e` as one sequence.
    fn seq(&mut self, e: &Expr) -> Vec<Sym> {
        match e {
            Expr::Literal(cs) => cs.iter().map(|&c| Sym::T(vec![(c, c)], false)).collect(),
            Expr::Class { ranges, negated } => vec![Sym::T(ranges.clone(), *negated)],
            Expr::Any => vec![Sym::T(Vec::new(), true)],
            // Raw bytes (a special token's spelling) are no text: nothing
            // over characters matches them.
            Expr::Bytes(_) => vec![Sym::T(Vec::new(), false)],
            Expr::Ref { name, .. } => vec![Sym::N(self.ids[name.as_str()])],
            Expr::Seq(v) => v.iter().flat_map(|c| self.seq(c)).collect(),
            Expr::Alt(_) => {
                let n = self.fresh();
                self.rule(n, e);
                vec![Sym::N(n)]
            }
            Expr::Repeat { expr, min, max } => {
                let x = self.fresh();
                self.rule(x, expr);
                let mut out = vec![Sym::N(x); *min as usize];
                match max {
                    None => {
                        let s = self.fresh();
                        self.prods.push((s, Vec::new()));
                        self.prods.push((s, vec![Sym::N(x), Sym::N(s)]));
                        out.push(Sym::N(s));
                    }
                    Some(m) if *m > *min => {
                        let mut prev: Option<usize> = None;
                        for _ in *min..*m {
                            let o = self.fresh();
                            self.prods.push((o, Vec::new()));
                            let mut rhs = vec![Sym::N(x)];
                            rhs.extend(prev.map(Sym::N));
                            self.prods.push((o, rhs));
                            prev = Some(o);
                        }
                        out.extend(prev.map(Sym::N));
                    }
                    Some(_) => {}
                }
                out
            }
        }
    }
}

/// A random text of `g` (a random derivation from `root`; `None` when it
/// runs past `depth` nested rule references or 160 characters). Characters of
/// classes and `.` are drawn from the class's own ranges, or from `pool`
/// for negated classes.
pub fn sample(g: &Gbnf, rng: &mut impl Rng, depth: usize, pool: &[char]) -> Option<String> {
    let mut out = String::new();
    let root = g.rule("root")?;
    gen(g, &root.body, rng, depth, pool, &mut out)?;
    Some(out)
}

fn gen(
    g: &Gbnf,
    e: &Expr,
    rng: &mut impl Rng,
    depth: usize,
    pool: &[char],
    out: &mut String,
) -> Option<()> {
    if out.len() > 160 {
        return None;
    }
    match e {
        Expr::Literal(cs) => out.extend(cs),
        Expr::Class { ranges, negated } => {
            let c = if *negated || ranges.is_empty() {
                let ok: Vec<char> = pool
                    .iter()
                    .copied()
                    .filter(|&c| Expr::class_contains(ranges, *negated, c))
                    .collect();
                *ok.get(rng.random_range(0..ok.len().max(1)))?
            } else {
                let (lo, hi) = ranges[rng.random_range(0..ranges.len())];
                let c = rng.random_range(lo as u32..=hi as u32);
                char::from_u32(c).unwrap_or(lo)
            };
            out.push(c);
        }
        Expr::Any => out.push(*pool.get(rng.random_range(0..pool.len().max(1)))?),
        // Raw bytes are no text.
        Expr::Bytes(_) => return None,
        Expr::Ref { name, .. } => {
            if depth == 0 {
                return None;
            }
            gen(g, &g.rule(name)?.body, rng, depth - 1, pool, out)?;
        }
        Expr::Seq(v) => {
            for c in v {
                gen(g, c, rng, depth, pool, out)?;
            }
        }
        Expr::Alt(v) => gen(g, &v[rng.random_range(0..v.len())], rng, depth, pool, out)?,
        Expr::Repeat { expr, min, max } => {
            let hi = max.unwrap_or(min + 3).min(min + 3);
            let n = rng.random_range(*min..=hi);
            for _ in 0..n {
                gen(g, expr, rng, depth, pool, out)?;
            }
        }
    }
    Some(())
}
