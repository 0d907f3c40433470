//! GBNF → `regex_syntax::hir::Hir`, by inlining rules.
//!
//! 1. **Rewrite immediate recursion** ([`rewrite`]): the body of rule `a`
//!    is split as `a X | Y` (left) and then as `X a | Y` (right), looking
//!    through alternatives, groups and optional items at the edge; a
//!    non-empty `X` makes the body `Y X*` (left) or `X* Y` (right). This is
//!    the textbook left-recursion elimination (`A → Aα | β` ⇒ `A → βα*`)
//!    and Arden's rule; both keep the language, also when `X` or `Y` still
//!    mention `a` elsewhere.
//! 2. **Reject remaining left recursion**: a rule that can derive itself at
//!    its left edge (through nullable prefixes too) is a
//!    [`GbnfError::LeftRecursion`].
//! 3. **Inline** from `root`: a rule already active `max_depth + 1` times on
//!    the current path is the empty language, which drops the branch that
//!    leads to it. Results are memoized: a rule in no cycle by name; a rule
//!    in a cycle by its name and the active counts of its strongly
//!    connected component (no other rule on the path can be reached from
//!    it). The empty language is propagated (`None`), so the `Hir` never
//!    holds a dead branch and its automaton has no dead end.

use super::ast::{Expr, Rule};
use super::{Gbnf, GbnfError, GbnfOptions};
use crate::pda::{Fragments, CALL_MARKER};
use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir, Repetition};
use std::collections::HashMap;

/// Deepest nesting of the lowered `Hir` (the automaton builders recurse over
/// it); the same bound as the regex parser's.
const MAX_HIR_DEPTH: usize = crate::dfa::NEST_LIMIT as usize;

/// What [`lower`] and [`fragments`] both start from: the rule bodies with
/// immediate recursion rewritten, rule ids by name, each rule's strongly
/// connected component, and `root`'s id; remaining left recursion is an
/// error.
struct Analysis<'g> {
    bodies: Vec<Expr>,
    ids: HashMap<&'g str, usize>,
    scc: Vec<Vec<usize>>,
    root: usize,
}

fn analyse(g: &Gbnf) -> Result<Analysis<'_>, GbnfError> {
    let bodies = rewritten_bodies(g);
    let ids: HashMap<&str, usize> = g
        .rules
        .iter()
        .enumerate()
        .map(|(i, r)| (r.name.as_str(), i))
        .collect();
    check_left_recursion(&g.rules, &bodies, &ids)?;
    let scc = components(&bodies, &ids);
    let root = ids["root"];
    Ok(Analysis {
        bodies,
        ids,
        scc,
        root,
    })
}

/// Lowers `g` to the `Hir` of its (depth-bounded) language.
pub fn lower(g: &Gbnf, opts: &GbnfOptions) -> Result<Hir, GbnfError> {
    let Analysis {
        bodies,
        ids,
        scc,
        root,
    } = analyse(g)?;
    let mut l = Lowerer {
        bodies: &bodies,
        ids: &ids,
        scc: &scc,
        active: vec![0; bodies.len()],
        memo: HashMap::new(),
        opts,
        depth: 0,
        calls: None,
        nodes: 0,
    };
    match l.rule(root)? {
        Some((h, _)) => Ok(h),
        None => Err(GbnfError::EmptyLanguage {
            max_depth: opts.max_depth,
        }),
    }
}

/// Each rule's body with its immediate left and right recursion rewritten.
pub fn rewritten_bodies(g: &Gbnf) -> Vec<Expr> {
    g.rules.iter().map(|r| rewrite(&r.name, &r.body)).collect()
}

/// `body` of rule `a` with immediate left recursion (`a X | Y` → `Y X*`)
/// and then immediate right recursion (`X a | Y` → `X* Y`) rewritten.
pub fn rewrite(a: &str, body: &Expr) -> Expr {
    let mut body = body.clone();
    if let (Some(x), y) = split(a, &body, Edge::Left) {
        body = seq(vec![or_fail(y), star(x)]);
    }
    if let (Some(x), y) = split(a, &body, Edge::Right) {
        body = seq(vec![star(x), or_fail(y)]);
    }
    body
}

#[derive(Clone, Copy, PartialEq)]
enum Edge {
    Left,
    Right,
}

fn eps() -> Expr {
    Expr::Seq(Vec::new())
}

fn fail() -> Expr {
    Expr::Class {
        ranges: Vec::new(),
        negated: false,
    }
}

fn or_fail(e: Option<Expr>) -> Expr {
    e.unwrap_or_else(fail)
}

fn star(e: Expr) -> Expr {
    Expr::Repeat {
        expr: Box::new(e),
        min: 0,
        max: None,
    }
}

fn seq(mut v: Vec<Expr>) -> Expr {
    if v.len() == 1 {
        v.pop().expect("one")
    } else {
        Expr::Seq(v)
    }
}

fn alt(mut v: Vec<Expr>) -> Option<Expr> {
    match v.len() {
        0 => None,
        1 => v.pop(),
        _ => Some(Expr::Alt(v)),
    }
}

/// Splits `e` as `a·X | Y` (left edge) or `X·a | Y` (right edge); `None`
/// is the empty language.
fn split(a: &str, e: &Expr, edge: Edge) -> (Option<Expr>, Option<Expr>) {
    match e {
        Expr::Ref { name, .. } if name == a => (Some(eps()), None),
        Expr::Alt(v) => {
            let (mut xs, mut ys) = (Vec::new(), Vec::new());
            for c in v {
                let (x, y) = split(a, c, edge);
                xs.extend(x);
                ys.extend(y);
            }
            (alt(xs), alt(ys))
        }
        Expr::Seq(v) if !v.is_empty() => {
            let (i, rest) = match edge {
                Edge::Left => (0, 1..v.len()),
                Edge::Right => (v.len() - 1, 0..v.len() - 1),
            };
            let (x, y) = split(a, &v[i], edge);
            let join = |part: Expr| {
                let mut out: Vec<Expr> = v[rest.clone()].to_vec();
                match edge {
                    Edge::Left => out.insert(0, part),
                    Edge::Right => out.push(part),
                }
                seq(out)
            };
            (x.map(join), y.map(join))
        }
        Expr::Repeat {
            expr,
            min: 0,
            max: Some(1),
        } => {
            let (x, y) = split(a, expr, edge);
            let mut ys: Vec<Expr> = y.into_iter().collect();
            ys.push(eps());
            (x, alt(ys))
        }
        _ => (None, Some(e.clone())),
    }
}

/// Whether each rule derives the empty string (a fixpoint).
pub fn nullable_rules(bodies: &[Expr], ids: &HashMap<&str, usize>) -> Vec<bool> {
    let mut n = vec![false; bodies.len()];
    loop {
        let mut changed = false;
        for (i, b) in bodies.iter().enumerate() {
            if !n[i] && nullable(b, &n, ids) {
                n[i] = true;
                changed = true;
            }
        }
        if !changed {
            return n;
        }
    }
}

fn nullable(e: &Expr, n: &[bool], ids: &HashMap<&str, usize>) -> bool {
    match e {
        Expr::Alt(v) => v.iter().any(|c| nullable(c, n, ids)),
        Expr::Seq(v) => v.iter().all(|c| nullable(c, n, ids)),
        Expr::Literal(_) | Expr::Class { .. } | Expr::Any | Expr::Bytes(_) => false,
        Expr::Ref { name, .. } => n[ids[name.as_str()]],
        Expr::Repeat { expr, min, max } => *min == 0 || *max == Some(0) || nullable(expr, n, ids),
    }
}

/// The rules that can stand at the left edge of `e`.
fn leftmost(e: &Expr, n: &[bool], ids: &HashMap<&str, usize>, out: &mut Vec<usize>) {
    match e {
        Expr::Alt(v) => v.iter().for_each(|c| leftmost(c, n, ids, out)),
        Expr::Seq(v) => {
            for c in v {
                leftmost(c, n, ids, out);
                if !nullable(c, n, ids) {
                    break;
                }
            }
        }
        Expr::Ref { name, .. } => out.push(ids[name.as_str()]),
        Expr::Repeat { expr, max, .. } => {
            if *max != Some(0) {
                leftmost(expr, n, ids, out)
            }
        }
        Expr::Literal(_) | Expr::Class { .. } | Expr::Any | Expr::Bytes(_) => {}
    }
}

fn check_left_recursion(
    rules: &[Rule],
    bodies: &[Expr],
    ids: &HashMap<&str, usize>,
) -> Result<(), GbnfError> {
    let n = nullable_rules(bodies, ids);
    let edges: Vec<Vec<usize>> = bodies
        .iter()
        .map(|b| {
            let mut v = Vec::new();
            leftmost(b, &n, ids, &mut v);
            v
        })
        .collect();
    for (r, rule) in rules.iter().enumerate() {
        if reaches(&edges, r, r) {
            return Err(GbnfError::LeftRecursion {
                rule: rule.name.clone(),
                line: rule.pos.line,
                column: rule.pos.column,
            });
        }
    }
    Ok(())
}

/// Whether `to` is reachable from `from` in one or more steps.
fn reaches(edges: &[Vec<usize>], from: usize, to: usize) -> bool {
    let mut seen = vec![false; edges.len()];
    let mut stack: Vec<usize> = edges[from].clone();
    while let Some(x) = stack.pop() {
        if x == to {
            return true;
        }
        if !std::mem::replace(&mut seen[x], true) {
            stack.extend(&edges[x]);
        }
    }
    false
}

/// For each rule in a cycle, the members of its strongly connected
/// component (sorted); empty for a rule in no cycle.
fn components(bodies: &[Expr], ids: &HashMap<&str, usize>) -> Vec<Vec<usize>> {
    let edges: Vec<Vec<usize>> = bodies
        .iter()
        .map(|b| {
            let mut v = Vec::new();
            b.for_each_ref(&mut |name, _| v.push(ids[name]));
            v.sort_unstable();
            v.dedup();
            v
        })
        .collect();
    let reach: Vec<Vec<bool>> = (0..bodies.len())
        .map(|r| {
            let mut seen = vec![false; bodies.len()];
            let mut stack = edges[r].clone();
            while let Some(x) = stack.pop() {
                if !std::mem::replace(&mut seen[x], true) {
                    stack.extend(&edges[x]);
                }
            }
            seen
        })
        .collect();
    (0..bodies.len())
        .map(|r| {
            if !reach[r][r] {
                return Vec::new();
            }
            (0..bodies.len())
                .filter(|&s| reach[r][s] && reach[s][r])
                .collect()
        })
        .collect()
}

/// A language: `None` is empty; otherwise its `Hir` and node count.
type Lang = Option<(Hir, usize)>;

struct Lowerer<'a> {
    bodies: &'a [Expr],
    ids: &'a HashMap<&'a str, usize>,
    scc: &'a [Vec<usize>],
    active: Vec<usize>,
    memo: HashMap<(usize, Vec<usize>), Lang>,
    opts: &'a GbnfOptions,
    depth: usize,
    /// Fragment mode: the fragment each recursive rule is (a reference to it
    /// becomes a call marker); `None`: inline everything.
    calls: Option<&'a [Option<u16>]>,
    /// Nodes lowered so far in fragment mode (all fragments together).
    nodes: usize,
}

impl Lowerer<'_> {
    fn rule(&mut self, r: usize) -> Result<Lang, GbnfError> {
        if self.active[r] > self.opts.max_depth {
            return Ok(None);
        }
        let key = (r, self.scc[r].iter().map(|&s| self.active[s]).collect());
        if let Some(l) = self.memo.get(&key) {
            return Ok(l.clone());
        }
        self.active[r] += 1;
        let l = self.expr(&self.bodies[r]);
        self.active[r] -= 1;
        let l = l?;
        self.memo.insert(key, l.clone());
        Ok(l)
    }

    fn sized(&mut self, h: Hir, size: usize) -> Result<Lang, GbnfError> {
        if self.calls.is_some() {
            // Fragments share one node budget (memoized rules count once).
            self.nodes += 1;
        }
        if size > self.opts.max_nodes || self.nodes > self.opts.max_nodes {
            return Err(GbnfError::TooBig {
                limit: self.opts.max_nodes,
            });
        }
        Ok(Some((h, size)))
    }

    fn expr(&mut self, e: &Expr) -> Result<Lang, GbnfError> {
        if self.depth >= MAX_HIR_DEPTH {
            // Deeper than the automaton builders can recurse.
            return Err(GbnfError::TooDeep {
                limit: MAX_HIR_DEPTH,
            });
        }
        self.depth += 1;
        let r = self.expr_inner(e);
        self.depth -= 1;
        r
    }

    fn expr_inner(&mut self, e: &Expr) -> Result<Lang, GbnfError> {
        match e {
            Expr::Literal(chars) => {
                let s: String = chars.iter().collect();
                self.sized(Hir::literal(s.into_bytes()), 1)
            }
            Expr::Bytes(b) => self.sized(Hir::literal(b.clone()), 1),
            Expr::Any => self.sized(Hir::class(Class::Unicode(any_char())), 1),
            Expr::Class { ranges, negated } => {
                let mut c = ClassUnicode::new(
                    ranges
                        .iter()
                        .map(|&(lo, hi)| ClassUnicodeRange::new(lo, hi)),
                );
                if *negated {
                    c.negate();
                }
                if c.ranges().is_empty() {
                    return Ok(None);
                }
                self.sized(Hir::class(Class::Unicode(c)), 1)
            }
            Expr::Ref { name, .. } => {
                let r = self.ids[name.as_str()];
                if let Some(f) = self.calls.and_then(|c| c[r]) {
                    let [hi, lo] = f.to_be_bytes();
                    return self.sized(Hir::literal(vec![CALL_MARKER, hi, lo]), 1);
                }
                self.rule(r)
            }
            Expr::Seq(v) => {
                let mut parts = Vec::with_capacity(v.len());
                let mut size = 1;
                for c in v {
                    let Some((h, n)) = self.expr(c)? else {
                        return Ok(None);
                    };
                    size += n;
                    parts.push(h);
                }
                self.sized(Hir::concat(parts), size)
            }
            Expr::Alt(v) => {
                let mut parts = Vec::with_capacity(v.len());
                let mut size = 1;
                for c in v {
                    if let Some((h, n)) = self.expr(c)? {
                        size += n;
                        parts.push(h);
                    }
                }
                if parts.is_empty() {
                    return Ok(None);
                }
                self.sized(Hir::alternation(parts), size)
            }
            Expr::Repeat { expr, min, max } => {
                if *max == Some(0) {
                    return self.sized(Hir::empty(), 1);
                }
                match self.expr(expr)? {
                    None if *min == 0 => self.sized(Hir::empty(), 1),
                    None => Ok(None),
                    Some((h, n)) => self.sized(
                        Hir::repetition(Repetition {
                            min: *min,
                            max: *max,
                            greedy: true,
                            sub: Box::new(h),
                        }),
                        n + 1,
                    ),
                }
            }
        }
    }
}

/// Every Unicode scalar value.
fn any_char() -> ClassUnicode {
    ClassUnicode::new([ClassUnicodeRange::new('\0', char::MAX)])
}

/// Splits `g` into fragments when recursion remains after the rewrite of
/// immediate left and right recursion: `root` and every rule reachable from
/// it that lies in a cycle of references become fragments; every other rule
/// is inlined. `None` when no such rule is reachable (the grammar is regular
/// as rewritten: [`lower`] compiles it exactly).
pub fn fragments(g: &Gbnf, opts: &GbnfOptions) -> Result<Option<Fragments>, GbnfError> {
    let Analysis {
        bodies,
        ids,
        scc,
        root,
    } = analyse(g)?;
    // Rules reachable from root, in discovery order.
    let mut seen = vec![false; bodies.len()];
    let mut order = vec![root];
    seen[root] = true;
    let mut i = 0;
    while i < order.len() {
        let r = order[i];
        i += 1;
        bodies[r].for_each_ref(&mut |n, _| {
            let x = ids[n];
            if !std::mem::replace(&mut seen[x], true) {
                order.push(x);
            }
        });
    }
    let recursive: Vec<usize> = order
        .iter()
        .copied()
        .filter(|&r| !scc[r].is_empty())
        .collect();
    if recursive.is_empty() {
        return Ok(None);
    }
    let mut frag_of: Vec<Option<u16>> = vec![None; bodies.len()];
    let mut members = vec![root];
    members.extend(recursive.iter().copied().filter(|&r| r != root));
    if members.len() > u16::MAX as usize {
        return Err(GbnfError::TooBig {
            limit: opts.max_nodes,
        });
    }
    for (f, &r) in members.iter().enumerate() {
        frag_of[r] = Some(f as u16);
    }
    let no_scc: Vec<Vec<usize>> = vec![Vec::new(); bodies.len()];
    let mut out = Fragments {
        names: Vec::with_capacity(members.len()),
        bodies: Vec::with_capacity(members.len()),
    };
    let mut l = Lowerer {
        bodies: &bodies,
        ids: &ids,
        scc: &no_scc,
        active: vec![0; bodies.len()],
        memo: HashMap::new(),
        opts,
        depth: 0,
        calls: Some(&frag_of),
        nodes: 0,
    };
    for &r in &members {
        out.names.push(g.rules[r].name.clone());
        out.bodies.push(l.expr(&bodies[r])?.map(|(h, _)| h));
    }
    Ok(Some(out))
}
