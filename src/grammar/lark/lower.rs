//! Resolved Lark → a grammar over lexemes ([`SymGrammar`]).
//!
//! Terminals (`NAME: ...`), and every string, regex, range, `~`/`&`
//! expression and `%json` block written in a rule, become **lexemes**: one
//! regular language each, a `regex_syntax` [`Hir`] (equal ones are one
//! lexeme). Rules become [`Sym`] trees over lexemes and rule references.
//! Only what `start` reaches is lowered (as llguidance compiles it).
//!
//! * `"..."i`: the literal under `(?i)`; `/re/flags`: the pattern under
//!   `(?flags)`, parsed by `regex_syntax` (llguidance's regexes use the
//!   `regex` crate's syntax).
//! * `A & B & ~C` (terminals only): the intersection and differences built
//!   by the exact product of [`crate::dfa::algebra`], read back to a
//!   regex. A `~` elsewhere, or with no positive operand, is refused:
//!   llguidance's complement is over bytes (it may match invalid UTF-8), so
//!   only `A & ~B` with `A` a text language is the same language here.
//! * `%json {...}`: the schema through constrain's JSON Schema compiler
//!   (compact whitespace), as one lexeme marked [`LexKind::Json`].

use super::ast::*;
use super::parse::unsupported;
use super::LarkError;
use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir, Repetition};
use std::collections::HashMap;

/// A lexeme kind: how it meets `%ignore` and its neighbours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LexKind {
    /// A terminal, literal or regex.
    Plain,
    /// A `%json` block (llguidance lexes it as a sub-grammar: no `%ignore`
    /// before it).
    Json,
}

/// One lexeme.
#[derive(Clone, Debug)]
pub struct Lexeme {
    pub hir: Hir,
    /// How a message names it (`"abc"`, `/re/`, `NAME`, `%json`).
    pub label: String,
    pub pos: Pos,
    pub kind: LexKind,
    /// A lazy lexeme (`[lazy]`, `[suffix=...]`): llguidance's lexer takes
    /// it at the first point it matches, cutting any other lexeme read
    /// beside it; `hir` is then already its shortest-match language.
    pub lazy: bool,
}

/// A rule body over lexemes.
#[derive(Clone, Debug, PartialEq)]
pub enum Sym {
    Lex(usize),
    Rule(usize),
    Seq(Vec<Sym>),
    Alt(Vec<Sym>),
    Repeat(Box<Sym>, u32, Option<u32>),
}

/// The grammar over lexemes: rules (name, position, body), `start`'s id,
/// the lexemes, and the `%ignore` language (the union of its items).
#[derive(Clone, Debug)]
pub struct SymGrammar {
    pub rules: Vec<(String, Pos, Sym)>,
    pub start: usize,
    pub lexemes: Vec<Lexeme>,
    pub ignore: Option<(Hir, Pos)>,
}

/// Lark's common terminals (`%import common.X`), as llguidance defines them.
pub const COMMON: &[(&str, &str)] = &[
    ("DIGIT", r"[0-9]"),
    ("HEXDIGIT", r"[a-fA-F0-9]"),
    ("INT", r"[0-9]+"),
    ("SIGNED_INT", r"(\+|-)?[0-9]+"),
    ("DECIMAL", r"([0-9]+\.[0-9]*)|(\.[0-9]+)"),
    ("_EXP", r"[eE](\+|-)?[0-9]+"),
    (
        "FLOAT",
        r"([0-9]+\.[0-9]*|\.[0-9]+)([eE](\+|-)?[0-9]+)?|[0-9]+[eE](\+|-)?[0-9]+",
    ),
    (
        "SIGNED_FLOAT",
        r"(\+|-)?(([0-9]+\.[0-9]*|\.[0-9]+)([eE](\+|-)?[0-9]+)?|[0-9]+[eE](\+|-)?[0-9]+)",
    ),
    (
        "NUMBER",
        r"([0-9]+)|([0-9]+\.[0-9]*|\.[0-9]+)([eE](\+|-)?[0-9]+)?|[0-9]+[eE](\+|-)?[0-9]+",
    ),
    (
        "SIGNED_NUMBER",
        r"(\+|-)?(([0-9]+)|([0-9]+\.[0-9]*|\.[0-9]+)([eE](\+|-)?[0-9]+)?|[0-9]+[eE](\+|-)?[0-9]+)",
    ),
    ("ESCAPED_STRING", r#""([^"\\]|\\.)*""#),
    ("LCASE_LETTER", r"[a-z]"),
    ("UCASE_LETTER", r"[A-Z]"),
    ("LETTER", r"[A-Za-z]"),
    ("WORD", r"[A-Za-z]+"),
    ("CNAME", r"[_A-Za-z][_A-Za-z0-9]*"),
    ("WS_INLINE", r"[ \t]+"),
    ("WS", r"[ \t\f\r\n]+"),
    ("CR", r"\r"),
    ("LF", r"\n"),
    ("NEWLINE", r"(\r?\n)+"),
    ("SH_COMMENT", r"#[^\n]*"),
    ("CPP_COMMENT", r"//[^\n]*"),
    ("C_COMMENT", r"\/\*[^*]*\*+(?:[^/*][^*]*\*+)*\/"),
    ("SQL_COMMENT", r"--[^\n]*"),
];

/// Most chunks of a `%regex` substring (its language has one word per
/// pair of chunk positions).
pub const MAX_SUBSTRING_CHUNKS: usize = 256;

/// Deepest chain of rules or terminals lowered inside one another (a
/// bound on the recursion of the lowering over the untrusted text).
pub const MAX_DEPTH: usize = 500;

/// Bounds on `&` / `~`: product states and regex text of the result.
const ALGEBRA_STATES: usize = 20_000;
const ALGEBRA_LEN: usize = 1 << 20;

struct Defs<'a> {
    rules: HashMap<&'a str, &'a Def>,
    terminals: HashMap<&'a str, &'a Def>,
    imported: HashMap<String, (&'static str, Pos)>,
}

struct Lowerer<'a> {
    defs: Defs<'a>,
    rule_ids: HashMap<String, usize>,
    rules: Vec<(String, Pos, Sym)>,
    lexemes: Vec<Lexeme>,
    lex_ids: HashMap<String, usize>,
    terminal_hir: HashMap<String, Hir>,
    in_progress: Vec<String>,
    depth: usize,
    schema: crate::schema::SchemaOptions,
}

fn regex_error(pos: Pos, pattern: &str, e: impl std::fmt::Display) -> LarkError {
    LarkError::Regex {
        line: pos.line,
        column: pos.column,
        message: format!(
            "invalid regex {pattern:?}: {}",
            e.to_string().replace('\n', " ")
        ),
    }
}

/// Parses `pattern` (the `regex` crate's syntax, Unicode) into a syntax tree.
pub fn parse_regex(pattern: &str, pos: Pos) -> Result<Hir, LarkError> {
    regex_syntax::ParserBuilder::new()
        .nest_limit(crate::dfa::NEST_LIMIT)
        .build()
        .parse(pattern)
        .map_err(|e| regex_error(pos, pattern, e))
}

/// Lowers the items: `start` and what it reaches.
pub fn lower(
    items: &[Item],
    schema: &crate::schema::SchemaOptions,
) -> Result<SymGrammar, LarkError> {
    let mut defs = Defs {
        rules: HashMap::new(),
        terminals: HashMap::new(),
        imported: HashMap::new(),
    };
    let mut ignores = Vec::new();
    let mut first_pos: HashMap<&str, Pos> = HashMap::new();
    for item in items {
        match item {
            Item::Def(d) => {
                if let Some(p) = first_pos.get(d.name.as_str()) {
                    return Err(LarkError::Duplicate {
                        name: d.name.clone(),
                        line: d.pos.line,
                        column: d.pos.column,
                        first_line: p.line,
                    });
                }
                first_pos.insert(&d.name, d.pos);
                if d.terminal {
                    defs.terminals.insert(&d.name, d);
                } else {
                    defs.rules.insert(&d.name, d);
                }
            }
            Item::Import(names, pos) => {
                for (path, local) in names {
                    let found = path
                        .strip_prefix("common.")
                        .and_then(|n| COMMON.iter().find(|(c, _)| *c == n));
                    let Some((_, re)) = found else {
                        return Err(unsupported(
                            *pos,
                            &format!("%import {path}"),
                            "only Lark's common terminals (`%import common.X`) can be imported",
                        ));
                    };
                    if first_pos.contains_key(local.as_str()) || defs.imported.contains_key(local) {
                        return Err(LarkError::Duplicate {
                            name: local.clone(),
                            line: pos.line,
                            column: pos.column,
                            first_line: first_pos.get(local.as_str()).map_or(pos.line, |p| p.line),
                        });
                    }
                    defs.imported.insert(local.clone(), (re, *pos));
                }
            }
            Item::Ignore(e, pos) => ignores.push((e, *pos)),
            Item::LlGuidance(v, pos) => check_llguidance(v, *pos)?,
        }
    }
    if !defs.rules.contains_key("start") {
        return Err(LarkError::NoStart);
    }
    let mut l = Lowerer {
        defs,
        rule_ids: HashMap::new(),
        rules: Vec::new(),
        lexemes: Vec::new(),
        lex_ids: HashMap::new(),
        terminal_hir: HashMap::new(),
        in_progress: Vec::new(),
        depth: 0,
        schema: schema.clone(),
    };
    let mut ignore_parts = Vec::new();
    for (e, _) in &ignores {
        ignore_parts.push(l.term_expansions(e)?);
    }
    let ignore = match ignore_parts.len() {
        0 => None,
        _ => Some((Hir::alternation(ignore_parts), ignores[0].1)),
    };
    let start = l.rule("start", Pos { line: 1, column: 1 })?;
    Ok(SymGrammar {
        rules: l.rules,
        start,
        lexemes: l.lexemes,
        ignore,
    })
}

/// `%llguidance {...}`: options that change no language are accepted; the
/// rest are refused by name.
fn check_llguidance(v: &serde_json::Value, pos: Pos) -> Result<(), LarkError> {
    let Some(obj) = v.as_object() else {
        return Err(LarkError::Syntax {
            line: pos.line,
            column: pos.column,
            message: "%llguidance takes a JSON object".into(),
        });
    };
    for (k, val) in obj {
        let harmless = matches!(
            k.as_str(),
            "no_forcing" | "allow_initial_skip" | "allow_invalid_utf8" | "ignore_once"
        ) && val == &serde_json::Value::Bool(false)
            || k == "no_forcing";
        if !harmless {
            return Err(unsupported(
                pos,
                &format!("%llguidance option `{k}`"),
                "only `no_forcing` (no effect on the language) and options left false are accepted",
            ));
        }
    }
    Ok(())
}

impl<'a> Lowerer<'a> {
    fn deeper(&mut self, at: Pos) -> Result<(), LarkError> {
        if self.depth >= MAX_DEPTH {
            return Err(LarkError::Limit {
                line: at.line,
                column: at.column,
                message: format!("rules or terminals nested more than {MAX_DEPTH} deep"),
            });
        }
        self.depth += 1;
        Ok(())
    }

    fn rule(&mut self, name: &str, at: Pos) -> Result<usize, LarkError> {
        if let Some(&id) = self.rule_ids.get(name) {
            return Ok(id);
        }
        let Some(&def) = self.defs.rules.get(name) else {
            return Err(LarkError::Undefined {
                name: name.to_string(),
                line: at.line,
                column: at.column,
            });
        };
        if let Some((what, p, why)) = &def.options.refused {
            return Err(unsupported(*p, what, why));
        }
        if let (Some(p), None, false) = (
            def.options.stop_capture,
            &def.options.suffix,
            def.options.stop,
        ) {
            return Err(LarkError::Syntax {
                line: p.line,
                column: p.column,
                message: "stop_capture requires stop= or suffix=".into(),
            });
        }
        if def.options.lazy.is_some() || def.options.suffix.is_some() {
            return self.lazy_rule(name, def, at);
        }
        let id = self.rules.len();
        self.rule_ids.insert(name.to_string(), id);
        self.rules
            .push((name.to_string(), def.pos, Sym::Seq(Vec::new())));
        self.deeper(at)?;
        let body = self.rule_expansions(&def.body);
        self.depth -= 1;
        let body = body?;
        self.rules[id].2 = body;
        Ok(id)
    }

    /// A rule with `[lazy]` or `[suffix=S]`: one lazy lexeme, the words of
    /// its body (followed by `S`) that no shorter such word begins, as
    /// llguidance compiles it (`body` then a lookahead of `S`, lazy).
    fn lazy_rule(&mut self, name: &str, def: &'a Def, at: Pos) -> Result<usize, LarkError> {
        let id = self.rules.len();
        self.rule_ids.insert(name.to_string(), id);
        self.rules
            .push((name.to_string(), def.pos, Sym::Seq(Vec::new())));
        self.deeper(at)?;
        let body = self.lazy_body(def);
        self.depth -= 1;
        let (h, label) = body?;
        let lex = self.lexeme_full(h, label, def.pos, LexKind::Plain, true);
        self.rules[id].2 = Sym::Lex(lex);
        Ok(id)
    }

    fn lazy_body(&mut self, def: &Def) -> Result<(Hir, String), LarkError> {
        let body = self.term_expansions(&def.body)?;
        let (whole, label) = match &def.options.suffix {
            Some((a, p)) if matches!(&**a, Atom::Value(Value::String(s, _), _) if s.is_empty()) => {
                return Err(unsupported(
                    *p,
                    "[suffix=\"\"]",
                    "an empty stop or suffix ends the lexeme at the end of the text only; leave the option out",
                ))
            }
            Some((a, _)) => (
                Hir::concat(vec![body, self.term_atom(a)?]),
                format!("{} [suffix]", def.name),
            ),
            None => (body, format!("{} [lazy]", def.name)),
        };
        Ok((shortest(&whole, def.pos)?, label))
    }

    fn lexeme(&mut self, hir: Hir, label: String, pos: Pos, kind: LexKind) -> usize {
        self.lexeme_full(hir, label, pos, kind, false)
    }

    fn lexeme_full(
        &mut self,
        hir: Hir,
        label: String,
        pos: Pos,
        kind: LexKind,
        lazy: bool,
    ) -> usize {
        let key = format!("{kind:?}{lazy}{hir:?}");
        if let Some(&id) = self.lex_ids.get(&key) {
            return id;
        }
        let id = self.lexemes.len();
        self.lexemes.push(Lexeme {
            hir,
            label,
            pos,
            kind,
            lazy,
        });
        self.lex_ids.insert(key, id);
        id
    }

    fn rule_expansions(&mut self, e: &Expansions) -> Result<Sym, LarkError> {
        let mut alts = Vec::new();
        for a in &e.alts {
            if let Some(p) = a.and_pos {
                return Err(unsupported(
                    p,
                    "`&` in a rule",
                    "`&` applies to terminals only; name the expression in UPPERCASE",
                ));
            }
            let mut seq = Vec::new();
            for x in &a.conjuncts[0].0 {
                seq.push(self.rule_expr(x)?);
            }
            alts.push(if seq.len() == 1 {
                seq.pop().expect("one")
            } else {
                Sym::Seq(seq)
            });
        }
        Ok(if alts.len() == 1 {
            alts.pop().expect("one")
        } else {
            Sym::Alt(alts)
        })
    }

    fn rule_expr(&mut self, x: &Expr) -> Result<Sym, LarkError> {
        let s = self.rule_atom(&x.atom)?;
        Ok(match x.repeat {
            None => s,
            Some((min, max)) => Sym::Repeat(Box::new(s), min, max),
        })
    }

    fn rule_atom(&mut self, a: &Atom) -> Result<Sym, LarkError> {
        match a {
            Atom::Group(e) => self.rule_expansions(e),
            Atom::Maybe(e) => Ok(Sym::Repeat(Box::new(self.rule_expansions(e)?), 0, Some(1))),
            Atom::Not(_, p) => {
                let h = self.term_atom(a)?;
                Ok(Sym::Lex(self.lexeme(
                    h,
                    "`~` expression".into(),
                    *p,
                    LexKind::Plain,
                )))
            }
            Atom::Value(v, p) => match v {
                Value::Name(n) if self.defs.rules.contains_key(n.as_str()) => {
                    Ok(Sym::Rule(self.rule(n, *p)?))
                }
                Value::Name(n) => {
                    let h = self.terminal(n, *p)?;
                    Ok(Sym::Lex(self.lexeme(h, n.clone(), *p, LexKind::Plain)))
                }
                Value::String(s, _) if s.is_empty() => Ok(Sym::Seq(Vec::new())),
                Value::Json(schema) => {
                    let c = crate::schema::compile(schema, &self.schema).map_err(|e| {
                        LarkError::Schema {
                            line: p.line,
                            column: p.column,
                            message: e.to_string(),
                        }
                    })?;
                    let h = parse_regex(&c.regex, *p)?;
                    Ok(Sym::Lex(self.lexeme(h, "%json".into(), *p, LexKind::Json)))
                }
                Value::SpecialToken(s) => Err(unsupported(
                    *p,
                    &format!("special token `{s}`"),
                    "special tokens are not supported yet (a token id is not text)",
                )),
                Value::GrammarRef(g) => Err(unsupported(
                    *p,
                    &format!("grammar reference `@{g}`"),
                    "sub-grammars are not supported yet",
                )),
                _ => {
                    let h = self.term_atom(a)?;
                    let label = match v {
                        Value::String(s, _) => format!("{s:?}"),
                        Value::Regex(r, f) => format!("/{r}/{f}"),
                        Value::Range(a, b) => format!("{a:?}..{b:?}"),
                        _ => "%regex".into(),
                    };
                    Ok(Sym::Lex(self.lexeme(h, label, *p, LexKind::Plain)))
                }
            },
        }
    }

    /// A terminal's regular language (defined, imported, not recursive).
    fn terminal(&mut self, name: &str, at: Pos) -> Result<Hir, LarkError> {
        if let Some(h) = self.terminal_hir.get(name) {
            return Ok(h.clone());
        }
        if self.in_progress.iter().any(|n| n == name) {
            return Err(LarkError::RecursiveTerminal {
                name: name.to_string(),
                line: at.line,
                column: at.column,
            });
        }
        let h = if let Some(&def) = self.defs.terminals.get(name) {
            self.deeper(at)?;
            self.in_progress.push(name.to_string());
            let h = self.term_expansions(&def.body);
            self.in_progress.pop();
            self.depth -= 1;
            h?
        } else if let Some(&(re, _)) = self.defs.imported.get(name) {
            parse_regex(re, at)?
        } else if self.defs.rules.contains_key(name) {
            return Err(LarkError::Syntax {
                line: at.line,
                column: at.column,
                message: format!("terminal refers to rule `{name}` (terminals are regular: they may name terminals only)"),
            });
        } else {
            return Err(LarkError::Undefined {
                name: name.to_string(),
                line: at.line,
                column: at.column,
            });
        };
        self.terminal_hir.insert(name.to_string(), h.clone());
        Ok(h)
    }

    fn term_expansions(&mut self, e: &Expansions) -> Result<Hir, LarkError> {
        let mut alts = Vec::new();
        for a in &e.alts {
            alts.push(self.term_alias(a)?);
        }
        Ok(Hir::alternation(alts))
    }

    fn term_seq(&mut self, s: &Expansion) -> Result<Hir, LarkError> {
        let mut v = Vec::new();
        for x in &s.0 {
            v.push(self.term_expr(x)?);
        }
        Ok(Hir::concat(v))
    }

    /// `A & B & ~C ...`: the positives intersected, the negated subtracted.
    fn term_alias(&mut self, a: &Alias) -> Result<Hir, LarkError> {
        if a.conjuncts.len() == 1 {
            return self.term_seq(&a.conjuncts[0]);
        }
        let pos = a.and_pos.unwrap_or(Pos { line: 1, column: 1 });
        let mut pos_parts = Vec::new();
        let mut neg_parts = Vec::new();
        for c in &a.conjuncts {
            match c.0.as_slice() {
                [Expr {
                    atom: Atom::Not(inner, _),
                    repeat: None,
                    ..
                }] => neg_parts.push(self.term_atom_plain(inner)?),
                _ => pos_parts.push(self.term_seq(c)?),
            }
        }
        let Some(first) = pos_parts.first().cloned() else {
            return Err(unsupported(pos, "`~A & ~B` without a positive operand", "llguidance's complement ranges over bytes; intersect it with a text language, as in `/(?s:.*)/ & ~A`"));
        };
        let mut acc = Some(first.to_string());
        let ops = pos_parts[1..]
            .iter()
            .map(|h| (h, crate::dfa::algebra::Op::And))
            .chain(
                neg_parts
                    .iter()
                    .map(|h| (h, crate::dfa::algebra::Op::AndNot)),
            );
        for (h, op) in ops {
            let Some(cur) = acc else { break };
            acc =
                crate::dfa::algebra::combine(&cur, &h.to_string(), op, ALGEBRA_STATES, ALGEBRA_LEN)
                    .map_err(|e| LarkError::Limit {
                        line: pos.line,
                        column: pos.column,
                        message: format!("`&` / `~`: {e}"),
                    })?;
        }
        match acc {
            Some(re) => parse_regex(&re, pos),
            None => Ok(Hir::class(Class::Unicode(ClassUnicode::empty()))),
        }
    }

    fn term_expr(&mut self, x: &Expr) -> Result<Hir, LarkError> {
        let h = self.term_atom(&x.atom)?;
        Ok(match x.repeat {
            None => h,
            Some((min, max)) => Hir::repetition(Repetition {
                min,
                max,
                greedy: true,
                sub: Box::new(h),
            }),
        })
    }

    fn term_atom(&mut self, a: &Atom) -> Result<Hir, LarkError> {
        match a {
            Atom::Not(_, p) => Err(unsupported(*p, "`~` outside `A & ~B`", "llguidance's complement ranges over bytes (it may match invalid UTF-8); write it as an operand of `&` with a positive expression")),
            _ => self.term_atom_plain(a),
        }
    }

    /// An atom's language, a `~` inside it refused.
    fn term_atom_plain(&mut self, a: &Atom) -> Result<Hir, LarkError> {
        match a {
            Atom::Group(e) => self.term_expansions(e),
            Atom::Maybe(e) => Ok(Hir::repetition(Repetition {
                min: 0,
                max: Some(1),
                greedy: true,
                sub: Box::new(self.term_expansions(e)?),
            })),
            Atom::Not(_, p) => Err(unsupported(
                *p,
                "nested `~`",
                "only `A & ~B` with `B` free of `~` is supported",
            )),
            Atom::Value(v, p) => match v {
                Value::String(s, false) => Ok(Hir::literal(s.as_bytes())),
                Value::String(s, true) => {
                    parse_regex(&format!("(?i:{})", regex_syntax::escape(s)), *p)
                }
                Value::Range(a, b) => Ok(Hir::class(Class::Unicode(ClassUnicode::new([
                    ClassUnicodeRange::new(*a, *b),
                ])))),
                Value::Regex(r, flags) => {
                    let pattern = if flags.is_empty() {
                        r.clone()
                    } else {
                        format!("(?{flags}){r}")
                    };
                    parse_regex(&pattern, *p)
                }
                Value::Name(n) => self.terminal(n, *p),
                Value::RegexExt(v) => substring(v, *p),
                Value::Json(_) => Err(unsupported(
                    *p,
                    "%json inside a terminal",
                    "%json is a rule: use it from a lowercase rule",
                )),
                Value::SpecialToken(s) => Err(unsupported(
                    *p,
                    &format!("special token `{s}` inside a terminal"),
                    "special tokens cannot be used in terminals",
                )),
                Value::GrammarRef(g) => Err(unsupported(
                    *p,
                    &format!("grammar reference `@{g}` inside a terminal"),
                    "grammar references cannot be used in terminals",
                )),
            },
        }
    }
}

/// The words of `h` that no shorter word of `h` begins (what a lazy
/// lexer takes): `h` minus `h` followed by one or more characters, by the
/// exact product of [`crate::dfa::algebra`].
pub fn shortest(h: &Hir, pos: Pos) -> Result<Hir, LarkError> {
    let re = h.to_string();
    let longer = format!("(?:{re})(?s:.+)");
    let out = crate::dfa::algebra::combine(
        &re,
        &longer,
        crate::dfa::algebra::Op::AndNot,
        ALGEBRA_STATES,
        ALGEBRA_LEN,
    )
    .map_err(|e| LarkError::Limit {
        line: pos.line,
        column: pos.column,
        message: format!("a lazy lexeme: {e}"),
    })?;
    match out {
        Some(re) => parse_regex(&re, pos),
        None => Ok(Hir::class(Class::Unicode(ClassUnicode::empty()))),
    }
}

/// `substring_words`'s chunks, as llguidance cuts them: maximal runs of
/// whitespace, of word characters (alphanumeric or `_`), and of the rest.
pub fn words(s: &str) -> Vec<String> {
    let class = |c: char| {
        if c.is_whitespace() {
            0
        } else if c.is_alphanumeric() || c == '_' {
            1
        } else {
            2
        }
    };
    let mut out: Vec<String> = Vec::new();
    let mut last = None;
    for c in s.chars() {
        let k = class(c);
        match out.last_mut() {
            Some(w) if last == Some(k) => w.push(c),
            _ => out.push(c.to_string()),
        }
        last = Some(k);
    }
    out
}

/// `%regex {"substring_chunks": [...]}` / `{"substring_words": "..."}` /
/// `{"substring_chars": "..."}`: `chunks[n..m]` joined, for every `n <= m`.
fn substring(v: &serde_json::Value, p: Pos) -> Result<Hir, LarkError> {
    let obj = v.as_object().filter(|o| o.len() == 1);
    let chunks: Vec<String> = match obj.and_then(|o| o.iter().next()) {
        Some((k, serde_json::Value::Array(a))) if k == "substring_chunks" => {
            let mut out = Vec::new();
            for x in a {
                match x.as_str() {
                    Some(s) => out.push(s.to_string()),
                    None => {
                        return Err(unsupported(
                            p,
                            "%regex",
                            "`substring_chunks` takes an array of strings",
                        ))
                    }
                }
            }
            out
        }
        Some((k, serde_json::Value::String(s))) if k == "substring_chars" => {
            s.chars().map(String::from).collect()
        }
        Some((k, serde_json::Value::String(s))) if k == "substring_words" => words(s),
        Some((k, _)) => {
            return Err(unsupported(
                p,
                &format!("%regex {{\"{k}\": ...}}"),
                "only `substring_chunks`, `substring_words` and `substring_chars` exist (each with an array of strings or a string)",
            ))
        }
        None => {
            return Err(unsupported(
                p,
                "%regex",
                "takes an object with exactly one field",
            ))
        }
    };
    if chunks.len() > MAX_SUBSTRING_CHUNKS {
        return Err(LarkError::Limit {
            line: p.line,
            column: p.column,
            message: format!(
                "%regex substring of {} chunks (at most {MAX_SUBSTRING_CHUNKS})",
                chunks.len()
            ),
        });
    }
    let mut alts = vec![Hir::empty()];
    for n in 0..chunks.len() {
        let mut s = String::new();
        for c in &chunks[n..] {
            s.push_str(c);
            alts.push(Hir::literal(s.as_bytes()));
        }
    }
    Ok(Hir::alternation(alts))
}
