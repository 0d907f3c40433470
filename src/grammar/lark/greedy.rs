//! The greedy-lexer check: a grammar is compiled only when llguidance's
//! lexer, which never backtracks, cannot split the text differently from
//! the character-level grammar constrain compiles.
//!
//! llguidance lexes with the set of lexemes the parser allows at the
//! current point (the **context**): it reads bytes while some allowed
//! lexeme can still extend the text read, and when none can, it hands the
//! parser every allowed lexeme that matches what was read (none: the text
//! is refused). `%ignore` text is a lexeme of the context too, and wins
//! over a real lexeme matching the same text. The character-level grammar
//! instead lets a lexeme end wherever the next one can begin. The two
//! agree when, for every lexeme `A` that may be read in a context `C` and
//! every lexeme `N` that may follow it, no word `u` of `A` followed by a
//! first byte `b` of `N` is a prefix of a word of a lexeme of `C`: then
//! the lexer stops exactly where the grammar's `A` ends. This module
//! checks that condition, over-approximating contexts by FOLLOW sets:
//!
//! * the context at the start is FIRST(`start`); after a lexeme `P` it is
//!   FOLLOW(`P`), plus `%ignore`;
//! * `N` ranges over FOLLOW(`A`) (and `%ignore`); the bytes of `N` are its
//!   first bytes, and those of what may follow it when `N` matches the
//!   empty text;
//! * ignored text followed by ignored text is no conflict when the ignore
//!   language is closed under concatenation (`/[ \t]+/`): the grammar then
//!   takes one run of it, as the lexer does;
//! * a lazy lexeme (`[lazy]`, `[suffix=...]`) is taken as soon as it
//!   matches, cutting whatever else the lexer was reading: no other lexeme
//!   of a context holding it may be alive (able to go on to a word of its
//!   own) on a text where the lazy one matches, unless that one is lazy
//!   and matches there too;
//! * a `%json` block is a sub-grammar to llguidance: it may share its
//!   context with no lexeme that starts with one of its first bytes, and no
//!   lexeme after it may start with JSON whitespace.
//!
//! Product automata are walked over [`Table`]s (a lexeme's DFA with its
//! live states), at most [`MAX_CHECK_STATES`] pairs in all.

use super::lower::{LexKind, Sym, SymGrammar};
use super::LarkError;
use crate::dfa::{ByteDfa, DfaConfig};
use regex_syntax::hir::Hir;
use std::collections::{BTreeSet, HashMap, VecDeque};

/// Most product states the check walks (all pairs together).
pub const MAX_CHECK_STATES: usize = 1 << 21;

/// A lexeme's DFA: dense states, `trans[s * 256 + b]`, `DEAD` for none;
/// only states from which a word can still be completed are kept.
pub struct Table {
    trans: Vec<u32>,
    accepting: Vec<bool>,
}

const DEAD: u32 = u32::MAX;

type Bytes = [bool; 256];

impl Table {
    pub fn build(h: &Hir) -> Result<Table, crate::dfa::DfaError> {
        let config = DfaConfig {
            lazy_states: None,
            ..DfaConfig::default()
        };
        let d = ByteDfa::from_hir(h, 0, &config)?;
        // Reachable states.
        let mut ids: HashMap<usize, u32> = HashMap::new();
        let mut order = Vec::new();
        let start = d.start();
        if d.is_dead(start) {
            return Ok(Table {
                trans: vec![DEAD; 256],
                accepting: vec![false],
            });
        }
        ids.insert(start.as_usize(), 0);
        order.push(start);
        let mut raw: Vec<u32> = Vec::new();
        let mut i = 0;
        while i < order.len() {
            let s = order[i];
            i += 1;
            for b in 0..=255u8 {
                let t = d.next(s, b);
                if d.is_dead(t) {
                    raw.push(DEAD);
                    continue;
                }
                let n = ids.len() as u32;
                let id = *ids.entry(t.as_usize()).or_insert_with(|| {
                    order.push(t);
                    n
                });
                raw.push(id);
            }
        }
        let accepting: Vec<bool> = order.iter().map(|&s| d.is_accepting(s)).collect();
        // Live states: those that reach an accepting one.
        let n = order.len();
        let mut rev: Vec<Vec<u32>> = vec![Vec::new(); n];
        for s in 0..n {
            for b in 0..256 {
                let t = raw[s * 256 + b];
                if t != DEAD {
                    rev[t as usize].push(s as u32);
                }
            }
        }
        let mut live = accepting.clone();
        let mut stack: Vec<usize> = (0..n).filter(|&s| live[s]).collect();
        while let Some(s) = stack.pop() {
            for &p in &rev[s] {
                if !live[p as usize] {
                    live[p as usize] = true;
                    stack.push(p as usize);
                }
            }
        }
        let trans = raw
            .iter()
            .map(|&t| {
                if t != DEAD && live[t as usize] {
                    t
                } else {
                    DEAD
                }
            })
            .collect();
        let mut t = Table { trans, accepting };
        if !live[0] {
            t.trans = vec![DEAD; 256 * n];
        }
        Ok(t)
    }

    fn next(&self, s: u32, b: u8) -> u32 {
        self.trans[s as usize * 256 + b as usize]
    }

    fn live_start(&self) -> bool {
        self.accepting[0] || (0..=255u8).any(|b| self.next(0, b) != DEAD)
    }

    pub fn nullable(&self) -> bool {
        self.accepting[0]
    }

    /// First bytes of its non-empty words.
    fn first(&self) -> Bytes {
        let mut out = [false; 256];
        for b in 0..=255u8 {
            out[b as usize] = self.next(0, b) != DEAD;
        }
        out
    }
}

struct Budget(usize);

impl Budget {
    fn spend(&mut self) -> Result<(), LarkError> {
        if self.0 == 0 {
            return Err(LarkError::Limit {
                line: 1,
                column: 1,
                message: format!(
                    "the greedy-lexer check walked more than {MAX_CHECK_STATES} product states"
                ),
            });
        }
        self.0 -= 1;
        Ok(())
    }
}

/// Walks the pairs `(a, x)` reached by one text in both; calls `f` on each.
fn walk(
    a: &Table,
    x: &Table,
    budget: &mut Budget,
    mut f: impl FnMut(u32, u32),
) -> Result<(), LarkError> {
    if !a.live_start() || !x.live_start() {
        return Ok(());
    }
    let mut seen = std::collections::HashSet::new();
    let mut q = VecDeque::from([(0u32, 0u32)]);
    seen.insert((0u32, 0u32));
    while let Some((s, t)) = q.pop_front() {
        budget.spend()?;
        f(s, t);
        for b in 0..=255u8 {
            let (s2, t2) = (a.next(s, b), x.next(t, b));
            if s2 != DEAD && t2 != DEAD && seen.insert((s2, t2)) {
                q.push_back((s2, t2));
            }
        }
    }
    Ok(())
}

/// The bytes `b` with a word `u` of `a` such that `u b` begins a word of `x`.
fn extension(a: &Table, x: &Table, budget: &mut Budget) -> Result<Bytes, LarkError> {
    let mut out = [false; 256];
    walk(a, x, budget, |s, t| {
        if a.accepting[s as usize] {
            for b in 0..=255u8 {
                if x.next(t, b) != DEAD {
                    out[b as usize] = true;
                }
            }
        }
    })?;
    Ok(out)
}

/// Whether some text is a word of both.
fn overlap(a: &Table, x: &Table, budget: &mut Budget) -> Result<bool, LarkError> {
    let mut any = false;
    walk(a, x, budget, |s, t| {
        any |= a.accepting[s as usize] && x.accepting[t as usize]
    })?;
    Ok(any)
}

/// Whether `L(i) L(i) ⊆ L(i)`, given the table of `L(i) L(i)`.
fn closed(ii: &Table, i: &Table, budget: &mut Budget) -> Result<bool, LarkError> {
    // Walk `ii` against `i`, dead transitions of `i` included.
    let mut seen = std::collections::HashSet::new();
    let mut q = VecDeque::from([(0u32, 0u32)]);
    seen.insert((0, 0));
    while let Some((s, t)) = q.pop_front() {
        budget.spend()?;
        let t_acc = t != DEAD && i.accepting[t as usize];
        if ii.accepting[s as usize] && !t_acc {
            return Ok(false);
        }
        for b in 0..=255u8 {
            let s2 = ii.next(s, b);
            let t2 = if t == DEAD { DEAD } else { i.next(t, b) };
            if s2 != DEAD && seen.insert((s2, t2)) {
                q.push_back((s2, t2));
            }
        }
    }
    Ok(true)
}

/// Lexeme sets over ids `0..n` (`n`: `%ignore`), with an end-of-text flag.
#[derive(Clone, Default, PartialEq)]
struct Set {
    ids: BTreeSet<usize>,
    eos: bool,
}

impl Set {
    fn union(&mut self, o: &Set) -> bool {
        let before = (self.ids.len(), self.eos);
        self.ids.extend(o.ids.iter().copied());
        self.eos |= o.eos;
        before != (self.ids.len(), self.eos)
    }
}

struct Sets<'g> {
    g: &'g SymGrammar,
    nullable: Vec<bool>,
    first: Vec<Set>,
    follow_rule: Vec<Set>,
    follow_lex: Vec<Set>,
}

impl Sets<'_> {
    fn first_of(&self, s: &Sym) -> Set {
        match s {
            Sym::Lex(id) => Set {
                ids: [*id].into(),
                eos: false,
            },
            Sym::Rule(r) | Sym::Sub(r) => self.first[*r].clone(),
            Sym::Seq(v) => {
                let mut out = Set::default();
                for x in v {
                    out.union(&self.first_of(x));
                    if !super::emit::nullable(x, &self.nullable) {
                        break;
                    }
                }
                out
            }
            Sym::Alt(v) => {
                let mut out = Set::default();
                v.iter().for_each(|x| {
                    out.union(&self.first_of(x));
                });
                out
            }
            Sym::Repeat(x, _, max) if *max != Some(0) => self.first_of(x),
            Sym::Repeat(..) => Set::default(),
        }
    }

    /// Adds `after` to the follow sets of what ends `s`; whether any grew.
    fn follow(&mut self, s: &Sym, after: &Set) -> bool {
        match s {
            Sym::Lex(id) => self.follow_lex[*id].union(after),
            Sym::Rule(r) | Sym::Sub(r) => self.follow_rule[*r].union(after),
            Sym::Seq(v) => {
                let mut changed = false;
                let mut after = after.clone();
                for x in v.iter().rev() {
                    changed |= self.follow(x, &after);
                    let f = self.first_of(x);
                    if super::emit::nullable(x, &self.nullable) {
                        after.union(&f);
                    } else {
                        after = f;
                    }
                }
                changed
            }
            Sym::Alt(v) => {
                let mut changed = false;
                for x in v {
                    changed |= self.follow(x, after);
                }
                changed
            }
            Sym::Repeat(x, _, max) => {
                if *max == Some(0) {
                    return false;
                }
                let mut a = after.clone();
                if *max != Some(1) {
                    a.union(&self.first_of(x));
                }
                self.follow(x, &a)
            }
        }
    }
}

fn label(g: &SymGrammar, id: usize) -> String {
    match g.lexemes.get(id) {
        Some(l) => format!("{} (line {}, column {})", l.label, l.pos.line, l.pos.column),
        None => "%ignore".into(),
    }
}

fn byte_text(b: usize) -> String {
    if (0x20..0x7f).contains(&b) {
        format!("{:?}", b as u8 as char)
    } else {
        format!("byte 0x{b:02x}")
    }
}

/// Checks `g` (see the module docs). Returns, per lexeme class, whether
/// its ignore language is closed under concatenation (then the grammar
/// takes `ignore?`).
pub fn check(g: &SymGrammar) -> Result<Vec<bool>, LarkError> {
    let mut budget = Budget(MAX_CHECK_STATES);
    let n = g.lexemes.len();
    let table_err = |line: usize, column: usize| {
        move |e: crate::dfa::DfaError| LarkError::Limit {
            line,
            column,
            message: format!("a lexeme's automaton: {e}"),
        }
    };
    let mut tables = Vec::with_capacity(n + 1);
    for l in &g.lexemes {
        tables.push(Table::build(&l.hir).map_err(table_err(l.pos.line, l.pos.column))?);
    }
    // The ignore lexemes: ids from `n`, one per class that has one.
    let mut closed_ignore = vec![true; g.ignores.len()];
    let mut ign_of: Vec<Option<usize>> = vec![None; g.ignores.len()];
    for (c, i) in g.ignores.iter().enumerate() {
        let Some((h, pos)) = i else { continue };
        let t = Table::build(h).map_err(table_err(pos.line, pos.column))?;
        if t.nullable() {
            return Err(LarkError::Lexer {
                line: pos.line,
                column: pos.column,
                message: "%ignore matches the empty text".into(),
            });
        }
        let ii = Table::build(&Hir::concat(vec![h.clone(), h.clone()]))
            .map_err(table_err(pos.line, pos.column))?;
        closed_ignore[c] = closed(&ii, &t, &mut budget)?;
        ign_of[c] = Some(tables.len());
        tables.push(t);
    }
    let is_ign = |id: usize| id >= n;
    let class_of_ign = |id: usize| ign_of.iter().position(|&x| x == Some(id)).unwrap_or(0);
    // FIRST and FOLLOW over lexemes.
    let mut s = Sets {
        g,
        nullable: super::emit::nullable_rules(g),
        first: vec![Set::default(); g.rules.len()],
        follow_rule: vec![Set::default(); g.rules.len()],
        follow_lex: vec![Set::default(); n],
    };
    loop {
        let mut changed = false;
        for (r, (_, _, body)) in g.rules.iter().enumerate() {
            let f = s.first_of(body);
            changed |= s.first[r].union(&f);
        }
        if !changed {
            break;
        }
    }
    s.follow_rule[g.start].eos = true;
    loop {
        let mut changed = false;
        for (r, (_, _, body)) in s.g.rules.iter().enumerate() {
            let after = s.follow_rule[r].clone();
            changed |= s.follow(body, &after);
        }
        if !changed {
            break;
        }
    }
    // What may follow each lexeme (lexemes, and its class's %ignore
    // before a plain one).
    let next = |id: usize| -> Vec<usize> {
        let f = &s.follow_lex[id];
        let mut v: Vec<usize> = f.ids.iter().copied().collect();
        if let Some(i) = ign_of[g.lexemes[id].class] {
            if f.ids.iter().any(|&x| g.lexemes[x].kind == LexKind::Plain) {
                v.push(i);
            }
        }
        v
    };
    // Bytes that may come first after a lexeme starts (through empty ones).
    let mut bytes: Vec<Bytes> = tables.iter().map(|t| t.first()).collect();
    loop {
        let mut changed = false;
        for id in 0..n {
            if tables[id].nullable() {
                for m in next(id) {
                    for b in 0..256 {
                        if bytes[m][b] && !bytes[id][b] {
                            bytes[id][b] = true;
                            changed = true;
                        }
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    // The contexts.
    let mut contexts: BTreeSet<Vec<usize>> = BTreeSet::new();
    contexts.insert(s.first[g.start].ids.iter().copied().collect());
    for id in 0..n {
        let mut c: Vec<usize> = s.follow_lex[id].ids.iter().copied().collect();
        if c.is_empty() {
            continue;
        }
        if let Some(i) = ign_of[g.lexemes[id].class] {
            c.push(i);
        }
        contexts.insert(c);
    }
    let mut ext_memo: HashMap<(usize, usize), Bytes> = HashMap::new();
    for c in &contexts {
        // %ignore and a lexeme matching the same text; %json, or a lexeme
        // of another class, and a lexeme starting alike.
        for &x in c {
            if is_ign(x) {
                continue;
            }
            for &i in c.iter().filter(|&&i| is_ign(i)) {
                if overlap(&tables[x], &tables[i], &mut budget)? {
                    return Err(conflict(
                        g,
                        x,
                        format!(
                            "{} matches text that %ignore also matches (llguidance then skips it)",
                            label(g, x)
                        ),
                    ));
                }
            }
            let fx = tables[x].first();
            for &y in c {
                if y == x || is_ign(y) {
                    continue;
                }
                let json = g.lexemes[x].kind == LexKind::Json;
                let apart = g.lexemes[x].class != g.lexemes[y].class;
                if (json || apart) && (0..256).any(|b| fx[b] && tables[y].first()[b]) {
                    let why = if json {
                        format!("%json at {}", label(g, x))
                    } else {
                        format!("{}, of a %lark block lexed apart,", label(g, x))
                    };
                    return Err(conflict(g, x, format!("{why} may begin where {} begins (llguidance picks one sub-grammar there)", label(g, y))));
                }
            }
        }
        // A lazy lexeme is taken the moment it matches: no other lexeme of
        // the context may still be alive there (llguidance would cut it).
        for &a in c {
            if is_ign(a) || !g.lexemes[a].lazy {
                continue;
            }
            for &x in c {
                if x == a {
                    continue;
                }
                let x_lazy = !is_ign(x) && g.lexemes[x].lazy;
                let mut cut = false;
                walk(&tables[a], &tables[x], &mut budget, |s, t| {
                    cut |= tables[a].accepting[s as usize]
                        && !(x_lazy && tables[x].accepting[t as usize]);
                })?;
                if cut {
                    return Err(conflict(
                        g,
                        a,
                        format!(
                            "the lazy lexeme {} may match where {} is still being read; llguidance's lexer takes the lazy one there and cuts the other",
                            label(g, a),
                            label(g, x)
                        ),
                    ));
                }
            }
        }
        for &a in c {
            let mut ext = [false; 256];
            for &x in c {
                let e = match ext_memo.get(&(a, x)) {
                    Some(e) => *e,
                    None => {
                        let e = extension(&tables[a], &tables[x], &mut budget)?;
                        ext_memo.insert((a, x), e);
                        e
                    }
                };
                for b in 0..256 {
                    ext[b] |= e[b];
                }
            }
            let json_a = !is_ign(a) && g.lexemes[a].kind == LexKind::Json;
            if json_a {
                for b in [b' ', b'\t', b'\n', b'\r'] {
                    ext[b as usize] = true;
                }
            }
            let nexts: Vec<usize> = if is_ign(a) { c.clone() } else { next(a) };
            for m in nexts {
                if is_ign(a) && m == a && closed_ignore[class_of_ign(a)] {
                    continue;
                }
                let jsonws = is_ign(m) && json_a;
                if let Some(b) = (0..256).find(|&b| {
                    ext[b] && bytes[m][b] && !(jsonws && b" \t\n\r".contains(&(b as u8)))
                }) {
                    return Err(conflict(
                        g,
                        a,
                        format!(
                            "{} may be followed by {}, which may begin with {}; llguidance's lexer, which never backtracks, would read that byte as part of a longer lexeme there",
                            label(g, a),
                            label(g, m),
                            byte_text(b)
                        ),
                    ));
                }
            }
        }
    }
    Ok(closed_ignore)
}

fn conflict(g: &SymGrammar, id: usize, message: String) -> LarkError {
    let pos = g
        .lexemes
        .get(id)
        .map(|l| l.pos)
        .or(g.ignores.iter().flatten().next().map(|i| i.1))
        .unwrap_or(super::ast::Pos { line: 1, column: 1 });
    LarkError::Lexer {
        line: pos.line,
        column: pos.column,
        message,
    }
}
