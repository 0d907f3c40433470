//! [`SymGrammar`] → GBNF rules, with `%ignore` placed as llguidance's lexer
//! places it: between two lexemes, never before the first one or after the
//! last, and never before a `%json` block.
//!
//! Each Lark rule `r` becomes two GBNF rules: `r.NAME`, whose every lexeme
//! may be preceded by ignored text, and `f.NAME`, the same language of
//! derivations with at least one lexeme where the first lexeme is not
//! (`first` below). `root ::= f.start`, or the empty text too when `start`
//! derives no lexeme. Lexemes are rules `t.N` (the lexeme's syntax tree as
//! GBNF expressions), the ignored text the rule `ignore`.
//!
//! `first` of a sequence `a b c` is `first(a) b c | first(b) c | first(c)`
//! over the leading items that derive no lexeme; of `x{m,n}` it is
//! `first(x) x{m-1,n-1}` (empty iterations before the first lexeme drop
//! out of the language). Both keep the language exactly.

use super::lower::{LexKind, Sym, SymGrammar};
use super::LarkError;
use crate::grammar::gbnf::{Expr, Gbnf, Pos, Rule};
use regex_syntax::hir::{Class, Hir, HirKind};

fn fail() -> Expr {
    Expr::Class {
        ranges: Vec::new(),
        negated: false,
    }
}

fn r(name: String) -> Expr {
    Expr::Ref {
        name,
        pos: Pos { line: 1, column: 1 },
    }
}

/// Which rules derive no lexeme (the empty derivation) — a fixpoint.
pub fn nullable_rules(g: &SymGrammar) -> Vec<bool> {
    let mut n = vec![false; g.rules.len()];
    loop {
        let mut changed = false;
        for (i, (_, _, body)) in g.rules.iter().enumerate() {
            if !n[i] && nullable(body, &n) {
                n[i] = true;
                changed = true;
            }
        }
        if !changed {
            return n;
        }
    }
}

pub fn nullable(s: &Sym, n: &[bool]) -> bool {
    match s {
        Sym::Lex(_) => false,
        Sym::Rule(r) | Sym::Sub(r) => n[*r],
        Sym::Seq(v) => v.iter().all(|x| nullable(x, n)),
        Sym::Alt(v) => v.iter().any(|x| nullable(x, n)),
        Sym::Repeat(x, min, max) => *min == 0 || *max == Some(0) || nullable(x, n),
    }
}

/// Which rules derive at least one lexeme (a fixpoint).
fn productive_rules(g: &SymGrammar) -> Vec<bool> {
    fn has(s: &Sym, p: &[bool]) -> bool {
        match s {
            Sym::Lex(_) => true,
            Sym::Rule(r) | Sym::Sub(r) => p[*r],
            Sym::Seq(v) | Sym::Alt(v) => v.iter().any(|x| has(x, p)),
            Sym::Repeat(x, _, max) => *max != Some(0) && has(x, p),
        }
    }
    let mut p = vec![false; g.rules.len()];
    loop {
        let mut changed = false;
        for (i, (_, _, body)) in g.rules.iter().enumerate() {
            if !p[i] && has(body, &p) {
                p[i] = true;
                changed = true;
            }
        }
        if !changed {
            return p;
        }
    }
}

struct Emitter<'g> {
    g: &'g SymGrammar,
    nullable: Vec<bool>,
    productive: Vec<bool>,
    /// Per lexeme class, the ignored text before a lexeme: `ignore?` when
    /// the ignore language is closed under concatenation, else `ignore*`.
    ignores: Vec<Option<Expr>>,
    /// Rules that may begin with a plain lexeme (so a parser state that
    /// predicts them lets `%ignore` text in).
    plain_first: Vec<bool>,
}

impl Emitter<'_> {
    fn normal(&self, s: &Sym) -> Expr {
        match s {
            Sym::Lex(id) => {
                let t = r(format!("t.{id}"));
                let l = &self.g.lexemes[*id];
                match (&self.ignores[l.class], l.kind) {
                    (Some(i), LexKind::Plain) => Expr::Seq(vec![i.clone(), t]),
                    _ => t,
                }
            }
            Sym::Rule(id) => r(format!("r.{}", self.g.rules[*id].0)),
            Sym::Sub(id) => {
                let mut alts = vec![self.first(s)];
                if self.nullable[*id] {
                    alts.push(Expr::Seq(Vec::new()));
                }
                alt(alts)
            }
            Sym::Seq(v) => Expr::Seq(v.iter().map(|x| self.normal(x)).collect()),
            Sym::Alt(v) => Expr::Alt(v.iter().map(|x| self.normal(x)).collect()),
            Sym::Repeat(x, min, max) => Expr::Repeat {
                expr: Box::new(self.normal(x)),
                min: *min,
                max: *max,
            },
        }
    }

    /// Derivations of `s` with at least one lexeme, the first one without
    /// ignored text before it.
    fn first(&self, s: &Sym) -> Expr {
        match s {
            Sym::Lex(id) => r(format!("t.{id}")),
            Sym::Rule(id) | Sym::Sub(id) if self.productive[*id] => {
                r(format!("f.{}", self.g.rules[*id].0))
            }
            Sym::Rule(_) | Sym::Sub(_) => fail(),
            Sym::Seq(v) => {
                let mut alts = Vec::new();
                for i in 0..v.len() {
                    let mut seq = vec![self.first(&v[i])];
                    seq.extend(v[i + 1..].iter().map(|x| self.normal(x)));
                    alts.push(Expr::Seq(seq));
                    if !nullable(&v[i], &self.nullable) {
                        break;
                    }
                }
                alt(alts)
            }
            Sym::Alt(v) => alt(v.iter().map(|x| self.first(x)).collect()),
            Sym::Repeat(x, min, max) => {
                if *max == Some(0) {
                    return fail();
                }
                Expr::Seq(vec![
                    self.first(x),
                    Expr::Repeat {
                        expr: Box::new(self.normal(x)),
                        min: min.saturating_sub(1),
                        max: max.map(|m| m - 1),
                    },
                ])
            }
        }
    }
}

/// Trailing ignored text. llguidance's lexer lets `%ignore` text in
/// wherever the parser state predicts a plain lexeme, and accepts end of
/// text after it when the text before is complete. `tail(s)` is the
/// derivations `u·i` of `s` where `u` is a derivation of `s` and, at its
/// end, a symbol derived empty in that derivation begins with a plain
/// lexeme (the state after `u` predicts it): such a symbol is the *slot*,
/// `i` the ignored text. `tail_first` is the same with at least one lexeme
/// in `u`, the first one without ignored text before it. Every text so
/// built is one llguidance accepts (the slot witnesses the prediction);
/// a state that predicts a lexeme only through a derivation other than
/// one completing `u` is not covered (constrain is then stricter).
impl Emitter<'_> {
    fn plain_first(&self, s: &Sym) -> bool {
        plain_first(s, &self.g.lexemes, &self.nullable, &self.plain_first)
    }

    fn slot(&self) -> Expr {
        self.ignores[0].clone().unwrap_or_else(fail)
    }

    /// Empty `s` is a slot.
    fn empty_slot(&self, s: &Sym) -> bool {
        nullable(s, &self.nullable) && self.plain_first(s)
    }

    fn tail(&self, s: &Sym) -> Expr {
        let mut alts = Vec::new();
        if self.empty_slot(s) {
            alts.push(self.slot());
        }
        match s {
            Sym::Lex(_) | Sym::Sub(_) => {}
            Sym::Rule(id) => alts.push(r(format!("e.{}", self.g.rules[*id].0))),
            Sym::Seq(v) => {
                for i in 0..v.len() {
                    if v[i + 1..].iter().all(|x| nullable(x, &self.nullable)) {
                        let mut seq: Vec<Expr> = v[..i].iter().map(|x| self.normal(x)).collect();
                        seq.push(self.tail(&v[i]));
                        alts.push(Expr::Seq(seq));
                    }
                }
            }
            Sym::Alt(v) => alts.extend(v.iter().map(|x| self.tail(x))),
            Sym::Repeat(x, min, max) => {
                if *max != Some(0) {
                    alts.push(Expr::Seq(vec![
                        Expr::Repeat {
                            expr: Box::new(self.normal(x)),
                            min: min.saturating_sub(1),
                            max: max.map(|m| m - 1),
                        },
                        self.tail(x),
                    ]));
                    if self.plain_first(x) && max.map_or(true, |m| *min < m) {
                        alts.push(Expr::Seq(vec![
                            Expr::Repeat {
                                expr: Box::new(self.normal(x)),
                                min: *min,
                                max: max.map(|m| m - 1),
                            },
                            self.slot(),
                        ]));
                    }
                }
            }
        }
        alt(alts)
    }

    fn tail_first(&self, s: &Sym) -> Expr {
        let mut alts = Vec::new();
        match s {
            Sym::Lex(_) | Sym::Sub(_) => {}
            Sym::Rule(id) => alts.push(r(format!("g.{}", self.g.rules[*id].0))),
            Sym::Seq(v) => {
                for i in 0..v.len() {
                    if !v[i + 1..].iter().all(|x| nullable(x, &self.nullable)) {
                        continue;
                    }
                    if i > 0 {
                        alts.push(Expr::Seq(vec![
                            self.first(&Sym::Seq(v[..i].to_vec())),
                            self.tail(&v[i]),
                        ]));
                    }
                    if v[..i].iter().all(|x| nullable(x, &self.nullable)) {
                        alts.push(self.tail_first(&v[i]));
                    }
                }
            }
            Sym::Alt(v) => alts.extend(v.iter().map(|x| self.tail_first(x))),
            Sym::Repeat(x, min, max) => {
                if *max != Some(0) && *max != Some(1) {
                    alts.push(Expr::Seq(vec![
                        self.first(&Sym::Repeat(
                            x.clone(),
                            min.saturating_sub(1).max(1),
                            max.map(|m| m - 1),
                        )),
                        self.tail(x),
                    ]));
                }
                if *max != Some(0) && (*min <= 1 || nullable(x, &self.nullable)) {
                    alts.push(self.tail_first(x));
                }
                if self.plain_first(x) && max.map_or(true, |m| (*min).max(1) < m) {
                    alts.push(Expr::Seq(vec![
                        self.first(&Sym::Repeat(x.clone(), (*min).max(1), max.map(|m| m - 1))),
                        self.slot(),
                    ]));
                }
            }
        }
        alt(alts)
    }
}

/// Whether `s` may begin with a plain lexeme (through productive rules).
fn plain_first(s: &Sym, lexemes: &[super::lower::Lexeme], n: &[bool], pf: &[bool]) -> bool {
    match s {
        Sym::Lex(id) => lexemes[*id].kind == LexKind::Plain && lexemes[*id].class == 0,
        Sym::Rule(r) => pf[*r],
        // A block of its own class: the grammar's ignored text never
        // stands before it.
        Sym::Sub(_) => false,
        Sym::Seq(v) => {
            for x in v {
                if plain_first(x, lexemes, n, pf) {
                    return true;
                }
                if !nullable(x, n) {
                    return false;
                }
            }
            false
        }
        Sym::Alt(v) => v.iter().any(|x| plain_first(x, lexemes, n, pf)),
        Sym::Repeat(x, _, max) => *max != Some(0) && plain_first(x, lexemes, n, pf),
    }
}

fn plain_first_rules(g: &SymGrammar, n: &[bool], productive: &[bool]) -> Vec<bool> {
    let mut pf = vec![false; g.rules.len()];
    loop {
        let mut changed = false;
        for (i, (_, _, body)) in g.rules.iter().enumerate() {
            if !pf[i] && productive[i] && plain_first(body, &g.lexemes, n, &pf) {
                pf[i] = true;
                changed = true;
            }
        }
        if !changed {
            return pf;
        }
    }
}

fn alt(mut v: Vec<Expr>) -> Expr {
    match v.len() {
        0 => fail(),
        1 => v.pop().expect("one"),
        _ => Expr::Alt(v),
    }
}

fn ignore_name(class: usize) -> String {
    match class {
        0 => "ignore".into(),
        c => format!("ignore.{c}"),
    }
}

/// The GBNF grammar of `g`; `closed_ignore[c]`: the ignore language of
/// class `c` is closed under concatenation.
pub fn emit(
    g: &SymGrammar,
    name: &str,
    text: &str,
    closed_ignore: &[bool],
) -> Result<Gbnf, LarkError> {
    let ignores = g
        .ignores
        .iter()
        .enumerate()
        .map(|(c, i)| {
            i.as_ref().map(|_| Expr::Repeat {
                expr: Box::new(r(ignore_name(c))),
                min: 0,
                max: if closed_ignore[c] { Some(1) } else { None },
            })
        })
        .collect();
    let nullable = nullable_rules(g);
    let productive = productive_rules(g);
    let plain_first = plain_first_rules(g, &nullable, &productive);
    let e = Emitter {
        g,
        nullable,
        productive,
        ignores,
        plain_first,
    };
    let trailing = g.ignores[0].is_some();
    let start = g.start;
    let mut root = vec![];
    if e.productive[start] {
        root.push(r(format!("f.{}", g.rules[start].0)));
    }
    if e.nullable[start] {
        root.push(Expr::Seq(Vec::new()));
    }
    if trailing {
        root.push(r(format!("g.{}", g.rules[start].0)));
    }
    let mut rules = vec![Rule {
        name: "root".into(),
        body: alt(root),
        pos: g.rules[start].1,
    }];
    for (i, (n, pos, body)) in g.rules.iter().enumerate() {
        rules.push(Rule {
            name: format!("r.{n}"),
            body: e.normal(body),
            pos: *pos,
        });
        if e.productive[i] {
            rules.push(Rule {
                name: format!("f.{n}"),
                body: e.first(body),
                pos: *pos,
            });
        }
        if trailing {
            rules.push(Rule {
                name: format!("e.{n}"),
                body: e.tail(body),
                pos: *pos,
            });
            rules.push(Rule {
                name: format!("g.{n}"),
                body: e.tail_first(body),
                pos: *pos,
            });
        }
    }
    for (i, l) in g.lexemes.iter().enumerate() {
        rules.push(Rule {
            name: format!("t.{i}"),
            body: hir_expr(&l.hir, l.pos, &l.label)?,
            pos: l.pos,
        });
    }
    for (c, i) in g.ignores.iter().enumerate() {
        if let Some((h, pos)) = i {
            rules.push(Rule {
                name: ignore_name(c),
                body: hir_expr(h, *pos, "%ignore")?,
                pos: *pos,
            });
        }
    }
    Ok(Gbnf {
        name: name.to_string(),
        rules,
        text: text.to_string(),
    })
}

/// A (Unicode) syntax tree as GBNF expressions. Anchors and look-around,
/// and byte classes past ASCII, are refused (llguidance's regexes have
/// neither).
pub fn hir_expr(h: &Hir, pos: Pos, label: &str) -> Result<Expr, LarkError> {
    let refuse = |what: &str| LarkError::Unsupported {
        construct: format!("{what} in {label}"),
        line: pos.line,
        column: pos.column,
        reason: "anchors, look-around and byte-level classes are not part of llguidance's regexes"
            .into(),
    };
    Ok(match h.kind() {
        HirKind::Empty => Expr::Seq(Vec::new()),
        HirKind::Literal(l) => match std::str::from_utf8(&l.0) {
            Ok(s) => Expr::Literal(s.chars().collect()),
            // A special token's placeholder (the lexeme is that literal alone).
            Err(_) if super::tokens::placeholder_index(&l.0).is_some() => Expr::Bytes(l.0.to_vec()),
            Err(_) => return Err(refuse("a byte literal that is not UTF-8")),
        },
        HirKind::Class(Class::Unicode(c)) => Expr::Class {
            ranges: c.ranges().iter().map(|r| (r.start(), r.end())).collect(),
            negated: false,
        },
        HirKind::Class(Class::Bytes(c)) => {
            if c.ranges().iter().any(|r| r.end() >= 0x80) {
                return Err(refuse("a byte class"));
            }
            Expr::Class {
                ranges: c
                    .ranges()
                    .iter()
                    .map(|r| (r.start() as char, r.end() as char))
                    .collect(),
                negated: false,
            }
        }
        HirKind::Look(_) => return Err(refuse("an anchor or look-around")),
        HirKind::Repetition(rep) => Expr::Repeat {
            expr: Box::new(hir_expr(&rep.sub, pos, label)?),
            min: rep.min,
            max: rep.max,
        },
        HirKind::Capture(c) => hir_expr(&c.sub, pos, label)?,
        HirKind::Concat(v) => Expr::Seq(
            v.iter()
                .map(|x| hir_expr(x, pos, label))
                .collect::<Result<_, _>>()?,
        ),
        HirKind::Alternation(v) => Expr::Alt(
            v.iter()
                .map(|x| hir_expr(x, pos, label))
                .collect::<Result<_, _>>()?,
        ),
    })
}
