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
use super::scan::{any_temperature, check_llguidance, ignore_key, needs_param, Defs, MAX_DEPTH};
use super::terminals::{parse_regex, shortest, substring, ALGEBRA_LEN, ALGEBRA_STATES, COMMON};
use super::tokens::{placeholder, Special, MAX_SPECIALS};
use super::toplevel::{SubBody, SubGrammar};
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
    /// Its lexeme class (the `%ignore` that may stand before it): 0 for
    /// the grammar's, another for a `%lark` block llguidance lexes apart.
    pub class: usize,
}

/// A rule body over lexemes.
#[derive(Clone, Debug, PartialEq)]
pub enum Sym {
    Lex(usize),
    Rule(usize),
    Seq(Vec<Sym>),
    Alt(Vec<Sym>),
    Repeat(Box<Sym>, u32, Option<u32>),
    /// A `%lark` block of its own lexeme class: the rule that is its
    /// `start` (no ignored text before its first lexeme, none after its
    /// last).
    Sub(usize),
}

/// The grammar over lexemes: rules (name, position, body), `start`'s id,
/// the lexemes, and per lexeme class the `%ignore` language (the union of
/// its items; class 0 is the grammar's).
#[derive(Clone, Debug)]
pub struct SymGrammar {
    pub rules: Vec<(String, Pos, Sym)>,
    pub start: usize,
    pub lexemes: Vec<Lexeme>,
    pub ignores: Vec<Option<(Hir, Pos)>>,
    /// The distinct special-token references; the `k`-th is the lexeme of
    /// its placeholder ([`super::tokens::placeholder`]).
    pub specials: Vec<Special>,
}

/// Most grammars of a list lowered (each once per lexeme class it is used
/// from; a bound on the work of `@name` chains).
pub const MAX_GRAMMAR_USES: usize = 1024;

/// Most rules lowered for a value of their parameter (parametric rules
/// are written out for every value reached from `start`).
pub const MAX_PARAM_INSTANCES: usize = 4096;

/// One grammar's names: the top one, or a `%lark` block's.
struct Scope<'a> {
    defs: Defs<'a>,
    rule_ids: HashMap<String, usize>,
    terminal_hir: HashMap<String, Hir>,
    /// The lexeme class of its lexemes.
    class: usize,
    /// Appended to its rule names (`""` for the top grammar).
    suffix: String,
    /// Its `%ignore` items, fully expanded (llguidance merges two
    /// grammars' lexeme classes exactly when these are the same).
    ignore_key: Option<String>,
}

struct Lowerer<'a> {
    scopes: Vec<Scope<'a>>,
    cur: usize,
    rules: Vec<(String, Pos, Sym)>,
    lexemes: Vec<Lexeme>,
    lex_ids: HashMap<String, usize>,
    ignores: Vec<Option<(Hir, Pos)>>,
    in_progress: Vec<(usize, String)>,
    depth: usize,
    /// Some rule sets `temperature` (llguidance then keeps every nested
    /// grammar in a lexeme class of its own).
    temperature: bool,
    /// The parameter of the parametric rule being lowered.
    param: Option<u64>,
    /// Rules lowered for a parameter value so far.
    instances: usize,
    schema: crate::schema::SchemaOptions,
    specials: Vec<Special>,
    /// The grammar list `@name` refers to (`None`: plain Lark text), and
    /// the first grammar's name.
    list: Option<(&'a str, &'a [SubGrammar])>,
    /// The grammars of the list being lowered inside one another.
    in_grammars: Vec<&'a str>,
    /// Each grammar of the list lowered once per lexeme class it is used
    /// from: (name, that class) → its start.
    grammar_uses: HashMap<(&'a str, usize), Sym>,
}

/// Lowers the items: `start` and what it reaches.
/// `list`: the grammar list `@name` refers to, and the name of the first
/// grammar (whose items these are).
pub fn lower<'a>(
    items: &'a [Item],
    list: Option<(&'a str, &'a [SubGrammar])>,
    schema: &crate::schema::SchemaOptions,
) -> Result<SymGrammar, LarkError> {
    let mut l = Lowerer {
        scopes: Vec::new(),
        cur: 0,
        rules: Vec::new(),
        lexemes: Vec::new(),
        lex_ids: HashMap::new(),
        ignores: Vec::new(),
        in_progress: Vec::new(),
        depth: 0,
        temperature: any_temperature(items)
            || list.is_some_and(|(_, subs)| {
                subs.iter()
                    .any(|s| matches!(&s.body, SubBody::Lark(i) if any_temperature(i)))
            }),
        param: None,
        instances: 0,
        schema: schema.clone(),
        specials: Vec::new(),
        list,
        in_grammars: Vec::new(),
        grammar_uses: HashMap::new(),
    };
    let ignore = l.scope(items, 0, None)?;
    if !l.scopes[0].defs.rules.contains_key("start") {
        return Err(LarkError::NoStart);
    }
    l.ignores.push(ignore);
    let start = l.rule("start", Pos { line: 1, column: 1 })?;
    Ok(SymGrammar {
        rules: l.rules,
        start,
        lexemes: l.lexemes,
        ignores: l.ignores,
        specials: l.specials,
    })
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

    /// Adds the grammar of `items` as a scope of lexeme class `class`
    /// (`suffix` appended to its rule names; the top grammar has none) and
    /// lowers its `%ignore` there.
    fn scope(
        &mut self,
        items: &'a [Item],
        class: usize,
        at: Option<Pos>,
    ) -> Result<Option<(Hir, Pos)>, LarkError> {
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
                        if first_pos.contains_key(local.as_str())
                            || defs.imported.contains_key(local)
                        {
                            return Err(LarkError::Duplicate {
                                name: local.clone(),
                                line: pos.line,
                                column: pos.column,
                                first_line: first_pos
                                    .get(local.as_str())
                                    .map_or(pos.line, |p| p.line),
                            });
                        }
                        defs.imported.insert(local.clone(), (re, *pos));
                    }
                }
                Item::Ignore(e, pos) => ignores.push((e, *pos)),
                Item::LlGuidance(v, pos) => check_llguidance(v, *pos)?,
            }
        }
        if let Some(p) = at {
            if !defs.rules.contains_key("start") {
                return Err(LarkError::Syntax {
                    line: p.line,
                    column: p.column,
                    message: "the %lark block has no `start` rule".into(),
                });
            }
        }
        let key_items: Vec<&Expansions> = ignores.iter().map(|(e, _)| *e).collect();
        let ignore_key = ignore_key(&defs, &key_items);
        let id = self.scopes.len();
        self.scopes.push(Scope {
            defs,
            rule_ids: HashMap::new(),
            terminal_hir: HashMap::new(),
            class,
            suffix: if id == 0 {
                String::new()
            } else {
                format!("@{id}")
            },
            ignore_key,
        });
        let outer = std::mem::replace(&mut self.cur, id);
        let mut parts = Vec::new();
        let mut result = Ok(());
        for (e, _) in &ignores {
            match self.term_expansions(e) {
                Ok(h) => parts.push(h),
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        self.cur = outer;
        result?;
        Ok(match parts.len() {
            0 => None,
            _ => Some((Hir::alternation(parts), ignores[0].1)),
        })
    }

    /// `%lark { items }` at `at`: its `start` rule and whether it shares
    /// the enclosing grammar's lexeme class. llguidance compiles the block
    /// as a grammar of its own; it merges its lexeme class with the
    /// enclosing one when their `%ignore`s are the same regex and no rule
    /// sets `temperature` — the block then reads as if its rules were
    /// written in place. Otherwise no ignored text stands at its edges
    /// (llguidance lets some there, depending on whether the block could
    /// go on, which is not modelled: constrain accepts less), and an
    /// enclosing grammar with `%ignore` is refused.
    fn nested(
        &mut self,
        items: &'a [Item],
        at: Pos,
        grammar: Option<&str>,
    ) -> Result<Sym, LarkError> {
        let inside = |e: LarkError| match grammar {
            Some(g) => e.in_grammar(g),
            None => e,
        };
        let outer = self.cur;
        let class = self.ignores.len();
        self.ignores.push(None);
        let ignore = self.scope(items, class, Some(at)).map_err(inside)?;
        let id = self.scopes.len() - 1;
        let same = !self.temperature
            && self.scopes[id].ignore_key.is_some()
            && self.scopes[id].ignore_key == self.scopes[outer].ignore_key;
        if same {
            self.ignores.pop();
            self.scopes[id].class = self.scopes[outer].class;
        } else {
            if self.ignores[self.scopes[outer].class].is_some() {
                let what = match grammar {
                    Some(g) => format!("`@{g}` with a %ignore other than the enclosing grammar's"),
                    None => {
                        "%lark { ... } with a %ignore other than the enclosing grammar's".into()
                    }
                };
                return Err(unsupported(
                    at,
                    &what,
                    "llguidance lexes such a block apart, and the ignored text it lets \
                     after the block depends on whether the block could go on; give the \
                     block the enclosing grammar's %ignore, or none to both",
                ));
            }
            self.ignores[class] = ignore;
        }
        self.cur = id;
        let param = self.param.take();
        self.deeper(at)?;
        let start = self.rule("start", at);
        self.depth -= 1;
        self.cur = outer;
        self.param = param;
        let start = start.map_err(inside)?;
        Ok(if same {
            Sym::Rule(start)
        } else {
            Sym::Sub(start)
        })
    }

    /// A JSON Schema block (`%json`, or a `json_schema` grammar of the
    /// list): one lexeme.
    fn json(&mut self, schema: &serde_json::Value, at: Pos, label: &str) -> Result<Sym, LarkError> {
        let opts = super::scan::x_guidance(schema, &self.schema, at)?;
        let c = crate::schema::compile(schema, &opts).map_err(|e| LarkError::Schema {
            line: at.line,
            column: at.column,
            message: match label {
                "%json" => e.to_string(),
                g => format!("{g}: {e}"),
            },
        })?;
        let h = parse_regex(&c.regex, at)?;
        Ok(Sym::Lex(self.lexeme(h, label.into(), at, LexKind::Json)))
    }

    /// `@name`: the grammar of the list of that name, used where it is
    /// written (a Lark grammar as a `%lark` block of its text, a JSON
    /// Schema as a `%json` block). Numeric references, a name the list
    /// lacks, no list, and a grammar reached again inside itself are
    /// errors at the reference.
    fn grammar_ref(&mut self, g: &str, at: Pos) -> Result<Sym, LarkError> {
        let what = format!("grammar reference `@{g}`");
        let syntax = |message: String| LarkError::Syntax {
            line: at.line,
            column: at.column,
            message,
        };
        if g.parse::<u64>().is_ok() {
            return Err(unsupported(at, &what, "numeric grammar references are not supported (llguidance no longer accepts them); refer to the grammar by its name"));
        }
        let Some((main, subs)) = self.list else {
            return Err(unsupported(at, &what, "there is no grammar list to refer to: give the grammars as llguidance's JSON list `{\"grammars\": [...]}`"));
        };
        let Some(sub) = subs.iter().find(|s| s.name == g) else {
            return Err(syntax(format!(
                "unknown grammar `@{g}` (no grammar of the list has that name)"
            )));
        };
        if main == g || self.in_grammars.contains(&sub.name.as_str()) {
            return Err(syntax(format!(
                "grammar `@{g}` is used inside itself (through {}); a grammar list cannot be recursive",
                self.in_grammars.iter().map(|n| format!("`@{n}`")).collect::<Vec<_>>().join(", ")
            )));
        }
        match &sub.body {
            SubBody::Json(schema) => self.json(schema, at, &format!("@{g}")),
            SubBody::Lark(items) => {
                let has_start = items
                    .iter()
                    .any(|i| matches!(i, Item::Def(d) if d.name == "start" && !d.terminal));
                if !has_start {
                    return Err(syntax(format!("grammar `@{g}` has no `start` rule")));
                }
                let key = (sub.name.as_str(), self.scopes[self.cur].class);
                if let Some(s) = self.grammar_uses.get(&key) {
                    return Ok(s.clone());
                }
                if self.grammar_uses.len() >= MAX_GRAMMAR_USES {
                    return Err(LarkError::Limit {
                        line: at.line,
                        column: at.column,
                        message: format!(
                            "grammars of the list lowered more than {MAX_GRAMMAR_USES} times"
                        ),
                    });
                }
                self.in_grammars.push(&sub.name);
                let r = self.nested(items, at, Some(&sub.name));
                self.in_grammars.pop();
                let r = r?;
                self.grammar_uses.insert(key, r.clone());
                Ok(r)
            }
        }
    }

    /// A special token: the lexeme of its placeholder (see `tokens`).
    fn special(&mut self, written: &str, at: Pos) -> Result<Sym, LarkError> {
        let spec = super::tokens::parse(written, at)?;
        let k = match self.specials.iter().position(|s| s.written == written) {
            Some(k) => k,
            None if self.specials.len() >= MAX_SPECIALS => {
                return Err(LarkError::Limit {
                    line: at.line,
                    column: at.column,
                    message: format!("more than {MAX_SPECIALS} distinct special tokens"),
                })
            }
            None => {
                self.specials.push(Special {
                    written: written.to_string(),
                    spec,
                    pos: at,
                    grammar: self.in_grammars.last().map(|g| g.to_string()),
                });
                self.specials.len() - 1
            }
        };
        let h = Hir::literal(placeholder(k));
        Ok(Sym::Lex(self.lexeme(
            h,
            written.to_string(),
            at,
            LexKind::Plain,
        )))
    }

    fn rule(&mut self, name: &str, at: Pos) -> Result<usize, LarkError> {
        self.rule_inst(name, None, at)
    }

    /// The rule `name`, for the parameter `param` when it is parametric.
    fn rule_inst(&mut self, name: &str, param: Option<u64>, at: Pos) -> Result<usize, LarkError> {
        let key = match param {
            Some(v) => format!("{name}::{v:#x}"),
            None => name.to_string(),
        };
        if let Some(&id) = self.scopes[self.cur].rule_ids.get(&key) {
            return Ok(id);
        }
        let Some(&def) = self.scopes[self.cur].defs.rules.get(name) else {
            return Err(LarkError::Undefined {
                name: name.to_string(),
                line: at.line,
                column: at.column,
            });
        };
        let o = &def.options;
        let at_def = |message: String| LarkError::Syntax {
            line: def.pos.line,
            column: def.pos.column,
            message,
        };
        match (def.parametric, param) {
            (true, None) => {
                return Err(LarkError::Syntax {
                    line: at.line,
                    column: at.column,
                    message: format!(
                        "rule `{name}` is parametric, but no parameter is given (`{name}::...`)"
                    ),
                })
            }
            (false, Some(_)) => {
                return Err(LarkError::Syntax {
                    line: at.line,
                    column: at.column,
                    message: format!("rule `{name}` is not parametric, but a parameter is given"),
                })
            }
            _ => {}
        }
        if let (Some((_, p)), Some(_)) = (&o.stop, &o.suffix) {
            return Err(LarkError::Syntax {
                line: p.line,
                column: p.column,
                message: "stop= and suffix= cannot be used together".into(),
            });
        }
        if def.parametric {
            if o.stop_like().is_some() || o.temperature || o.max_tokens.is_some() {
                return Err(at_def(format!(
                    "rule `{name}` is parametric: stop=, suffix=, lazy, temperature= and max_tokens= are not allowed on it"
                )));
            }
            if !needs_param(&def.body) {
                return Err(at_def(format!(
                    "rule `{name}` is parametric, but its body does not use the parameter"
                )));
            }
            self.instances += 1;
            if self.instances > MAX_PARAM_INSTANCES {
                return Err(LarkError::Limit {
                    line: at.line,
                    column: at.column,
                    message: format!(
                        "parametric rules reach more than {MAX_PARAM_INSTANCES} parameter values"
                    ),
                });
            }
        } else if needs_param(&def.body) {
            return Err(at_def(format!(
                "rule `{name}` is not parametric (`{name}::_`), but its body uses a parameter"
            )));
        }
        let id = self.rules.len();
        let full = format!("{key}{}", self.scopes[self.cur].suffix);
        self.scopes[self.cur].rule_ids.insert(key, id);
        self.rules.push((full, def.pos, Sym::Seq(Vec::new())));
        let outer_param = std::mem::replace(&mut self.param, param);
        let body = self.rule_body(def, at);
        self.param = outer_param;
        self.rules[id].2 = body?;
        Ok(id)
    }

    fn rule_body(&mut self, def: &'a Def, at: Pos) -> Result<Sym, LarkError> {
        let o = &def.options;
        if let Some((0, _)) = o.max_tokens {
            // As llguidance: no token at all, the empty text.
            return Ok(Sym::Seq(Vec::new()));
        }
        if let Some((_, p)) = o.max_tokens {
            return Err(unsupported(
                p,
                "[max_tokens=...]",
                "llguidance ends the lexeme after N tokens wherever it stands, even inside a \
                 word, so the text depends on how it was tokenized; constrain compiles a \
                 text language (its token budgets apply to the region that opens the output)",
            ));
        }
        if let Some((a, p)) = &o.stop {
            if !is_empty_string(a) {
                return Err(unsupported(
                    *p,
                    "[stop=...]",
                    "llguidance takes the stop text out of the output again by backtracking \
                     its tokens, which a mask over the next token cannot do; `suffix=` keeps \
                     the same lexeme with its text in the output",
                ));
            }
        }
        if let (Some(p), None) = (o.stop_capture, o.stop_like()) {
            return Err(LarkError::Syntax {
                line: p.line,
                column: p.column,
                message: "stop_capture requires stop= or suffix=".into(),
            });
        }
        self.deeper(at)?;
        let body = match o.stop_like() {
            Some(_) => self.lazy_body(def).map(|(h, label, lazy)| {
                Sym::Lex(self.lexeme_full(h, label, def.pos, LexKind::Plain, lazy))
            }),
            None => self.rule_expansions(&def.body),
        };
        self.depth -= 1;
        body
    }

    /// A rule with `[lazy]` or `[suffix=S]`: one lazy lexeme, the words of
    /// its body (followed by `S`) that no shorter such word begins, as
    /// llguidance compiles it (`body` then a lookahead of `S`, lazy). With
    /// `stop=""` or `suffix=""`: one greedy lexeme of its body (`false` is
    /// returned). llguidance then also lets EOS end the lexeme and hides
    /// that EOS to go on with what follows; here EOS is allowed only where
    /// the text is complete, so the texts are those of the plain lexeme.
    fn lazy_body(&mut self, def: &Def) -> Result<(Hir, String, bool), LarkError> {
        let body = self.term_expansions(&def.body)?;
        match def.options.stop_like() {
            Some((a, _)) if is_empty_string(a) => Ok((body, def.name.clone(), false)),
            Some((a, _)) => {
                let whole = Hir::concat(vec![body, self.term_atom(a)?]);
                let label = if def.options.suffix.as_ref().is_some_and(
                    |(a, _)| matches!(&**a, Atom::Value(Value::Regex(r, _), _) if r.is_empty()),
                ) {
                    format!("{} [lazy]", def.name)
                } else {
                    format!("{} [suffix]", def.name)
                };
                Ok((shortest(&whole, def.pos)?, label, true))
            }
            None => unreachable!("a stop condition"),
        }
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
        let class = self.scopes[self.cur].class;
        let key = format!("{kind:?}{lazy}{class}{hir:?}");
        if let Some(&id) = self.lex_ids.get(&key) {
            return id;
        }
        let id = self.lexemes.len();
        let label = match self.in_grammars.last() {
            Some(g) => format!("{label} of @{g}"),
            None => label,
        };
        self.lexemes.push(Lexeme {
            hir,
            label,
            pos,
            kind,
            lazy,
            class,
        });
        self.lex_ids.insert(key, id);
        id
    }

    fn rule_expansions(&mut self, e: &'a Expansions) -> Result<Sym, LarkError> {
        let mut alts = Vec::new();
        for a in &e.alts {
            if let Some((c, _)) = &a.cond {
                if !c.eval(self.param.unwrap_or(0)) {
                    continue;
                }
            }
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

    fn rule_expr(&mut self, x: &'a Expr) -> Result<Sym, LarkError> {
        let s = self.rule_atom(&x.atom)?;
        Ok(match x.repeat {
            None => s,
            Some((min, max)) => Sym::Repeat(Box::new(s), min, max),
        })
    }

    fn rule_atom(&mut self, a: &'a Atom) -> Result<Sym, LarkError> {
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
                Value::Name(n) if self.scopes[self.cur].defs.rules.contains_key(n.as_str()) => {
                    Ok(Sym::Rule(self.rule(n, *p)?))
                }
                Value::NameParam(n, e) => {
                    let v = e.eval(self.param.unwrap_or(0));
                    Ok(Sym::Rule(self.rule_inst(n, Some(v), *p)?))
                }
                Value::Name(n) => {
                    let h = self.terminal(n, *p)?;
                    Ok(Sym::Lex(self.lexeme(h, n.clone(), *p, LexKind::Plain)))
                }
                Value::String(s, _) if s.is_empty() => Ok(Sym::Seq(Vec::new())),
                Value::Json(schema) => self.json(schema, *p, "%json"),
                Value::SpecialToken(s) => self.special(s, *p),
                Value::GrammarRef(g) => self.grammar_ref(g, *p),
                Value::NestedLark(items) => self.nested(items, *p, None),
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
        if let Some(h) = self.scopes[self.cur].terminal_hir.get(name) {
            return Ok(h.clone());
        }
        if self
            .in_progress
            .iter()
            .any(|(c, n)| *c == self.cur && n == name)
        {
            return Err(LarkError::RecursiveTerminal {
                name: name.to_string(),
                line: at.line,
                column: at.column,
            });
        }
        let h = if let Some(&def) = self.scopes[self.cur].defs.terminals.get(name) {
            self.deeper(at)?;
            self.in_progress.push((self.cur, name.to_string()));
            let h = self.term_expansions(&def.body);
            self.in_progress.pop();
            self.depth -= 1;
            h?
        } else if let Some(&(re, _)) = self.scopes[self.cur].defs.imported.get(name) {
            parse_regex(re, at)?
        } else if self.scopes[self.cur].defs.rules.contains_key(name) {
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
        self.scopes[self.cur]
            .terminal_hir
            .insert(name.to_string(), h.clone());
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
        if let Some((_, p)) = &a.cond {
            return Err(unsupported(
                *p,
                "%if in a terminal",
                "conditions belong to parametric rules",
            ));
        }
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
                Value::NameParam(n, _) => Err(unsupported(
                    *p,
                    &format!("parametric reference `{n}::...` inside a terminal"),
                    "terminals are regular and take no parameter",
                )),
                Value::NestedLark(_) => Err(unsupported(
                    *p,
                    "%lark { ... } inside a terminal",
                    "a nested grammar is a rule: use it from a lowercase rule",
                )),
            },
        }
    }
}
