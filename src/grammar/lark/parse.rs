//! Lark text → [`Item`]s (llguidance's `lark/parser.rs` grammar).
//!
//! ```text
//! item       := rule | terminal | statement
//! rule       := RULE ["::" "_"] ["{" params "}"] ["." prio] ["[" options "]"] ":" expansions
//! terminal   := TOKEN ["{" params "}"] ["." prio] ":" expansions
//! expansions := alias (("|" | NEWLINE "|") alias)*
//! alias      := expansion ("&" expansion)* ["->" RULE] ["%if" cond]
//! expansion  := expr*
//! expr       := atom [OP | "~" NUM [".." NUM] | "{" [NUM] ["," [NUM]] "}"]
//! atom       := ["~"] ("(" expansions ")" | "[" expansions "]" | value)
//! ```
//!
//! Constructs parsed but outside what the compiler enforces exactly
//! (templates, priorities, parametric rules, `%if`, `%override`,
//! `%declare`, `%lark`) are refused here, by name and position.

use super::ast::*;
use super::lex::{Spanned, Tok};
use super::LarkError;

/// Deepest nesting of groups (a bound on the untrusted text; llguidance's).
pub const MAX_NESTING: usize = 30;

/// Largest repetition count (`~ n`, `{m,n}`), as for GBNF.
pub const MAX_REPETITION: u32 = crate::grammar::gbnf::parse::MAX_REPETITION;

struct Parser {
    toks: Vec<Spanned>,
    i: usize,
    depth: usize,
}

fn syntax(pos: Pos, message: impl Into<String>) -> LarkError {
    LarkError::Syntax {
        line: pos.line,
        column: pos.column,
        message: message.into(),
    }
}

/// Refused: `construct` is Lark syntax the compiler does not enforce.
pub fn unsupported(pos: Pos, construct: &str, reason: &str) -> LarkError {
    LarkError::Unsupported {
        construct: construct.to_string(),
        line: pos.line,
        column: pos.column,
        reason: reason.to_string(),
    }
}

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.i.min(self.toks.len() - 1)].tok
    }

    fn peek_at(&self, k: usize) -> Option<&Tok> {
        self.toks.get(self.i + k).map(|t| &t.tok)
    }

    fn pos(&self) -> Pos {
        self.toks[self.i.min(self.toks.len() - 1)].pos
    }

    fn at_end(&self) -> bool {
        self.i >= self.toks.len()
    }

    fn bump(&mut self) -> Tok {
        let t = self.peek().clone();
        self.i += 1;
        t
    }

    fn eat(&mut self, t: &Tok) -> bool {
        if !self.at_end() && self.peek() == t {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, t: &Tok, what: &str) -> Result<(), LarkError> {
        if self.eat(t) {
            Ok(())
        } else {
            Err(syntax(
                self.pos(),
                format!("expected {what}, found {}", self.describe()),
            ))
        }
    }

    fn describe(&self) -> String {
        if self.at_end() {
            return "the end of the grammar".into();
        }
        match self.peek() {
            Tok::Newline => "the end of the line".into(),
            Tok::Rule(n) | Tok::Token(n) => format!("`{n}`"),
            Tok::Str(s) | Tok::Regex(s) | Tok::Number(s) | Tok::Special(s) => format!("`{s}`"),
            t => format!("{t:?}"),
        }
    }

    fn items(&mut self) -> Result<Vec<Item>, LarkError> {
        let mut out = Vec::new();
        loop {
            while self.eat(&Tok::Newline) {}
            if self.at_end() {
                return Ok(out);
            }
            out.push(self.item()?);
            if !self.at_end() && !self.eat(&Tok::Newline) {
                return Err(syntax(
                    self.pos(),
                    format!("expected the end of the line, found {}", self.describe()),
                ));
            }
        }
    }

    fn item(&mut self) -> Result<Item, LarkError> {
        let pos = self.pos();
        match self.bump() {
            Tok::Rule(name) => self.def(name, pos, false),
            Tok::Token(name) => self.def(name, pos, true),
            Tok::Ignore => Ok(Item::Ignore(self.expansions()?, pos)),
            Tok::Import => self.import(pos),
            Tok::LlGuidance(v) => Ok(Item::LlGuidance(v, pos)),
            Tok::Keyword(k) => Err(unsupported(pos, &k, "not supported by the Lark front end")),
            _ => {
                self.i -= 1;
                Err(syntax(
                    pos,
                    format!(
                        "expected a rule, a terminal or a statement, found {}",
                        self.describe()
                    ),
                ))
            }
        }
    }

    fn def(&mut self, raw: String, pos: Pos, terminal: bool) -> Result<Item, LarkError> {
        // Tree-shaping marks change no language.
        let name = raw.trim_start_matches(['!', '?']).to_string();
        if self.peek() == &Tok::DoubleColon {
            return Err(unsupported(
                self.pos(),
                "parametric rule (`name::_`)",
                "parametric rules are not supported yet",
            ));
        }
        if self.peek() == &Tok::LBrace {
            return Err(unsupported(
                self.pos(),
                "template parameters (`name{...}`)",
                "templates are not supported",
            ));
        }
        if self.peek() == &Tok::Dot {
            return Err(unsupported(
                self.pos(),
                "priority (`name.N`)",
                "priorities change which parse wins, not a language llguidance enforces; remove it",
            ));
        }
        let mut options = Options::default();
        if !terminal && self.peek() == &Tok::LBracket {
            self.bump();
            self.options(&mut options)?;
        }
        self.expect(&Tok::Colon, "`:`")?;
        let body = self.expansions()?;
        Ok(Item::Def(Def {
            name,
            pos,
            terminal,
            options,
            body,
        }))
    }

    fn options(&mut self, o: &mut Options) -> Result<(), LarkError> {
        while self.peek() != &Tok::RBracket {
            let pos = self.pos();
            let key = match self.bump() {
                Tok::Rule(k) => k,
                _ => return Err(syntax(pos, "expected a rule option name")),
            };
            match key.as_str() {
                "capture" => {
                    o.capture = true;
                    if self.eat(&Tok::Equals) {
                        self.value_token()?;
                    }
                }
                "lazy" => {
                    // As llguidance: `lazy` is `suffix=//` unless a stop or
                    // suffix is already given.
                    if o.suffix.is_none() && o.lazy.is_none() && !o.stop {
                        o.lazy = Some(pos);
                    }
                }
                "stop" | "suffix" => {
                    self.expect(&Tok::Equals, "`=`")?;
                    let vpos = self.pos();
                    let v = self.atom()?;
                    if o.suffix.is_some() || o.stop || o.lazy.is_some() {
                        return Err(syntax(pos, "cannot have multiple stop/suffix conditions"));
                    }
                    if !matches!(
                        v,
                        Atom::Value(Value::String(..) | Value::Regex(..) | Value::Name(_), _)
                    ) {
                        return Err(syntax(
                            vpos,
                            format!("`{key}=` takes a string, a regex or a terminal name"),
                        ));
                    }
                    if key == "suffix" {
                        o.suffix = Some((Box::new(v), pos));
                    } else {
                        o.stop = true;
                        o.refused.get_or_insert((
                            "[stop=...]".into(),
                            pos,
                            "`stop` hides the stop text from the output by backtracking tokens, which a mask cannot do; use `suffix=` (the text stays in the output)",
                        ));
                    }
                }
                "stop_capture" => {
                    self.expect(&Tok::Equals, "`=`")?;
                    self.value_token()?;
                    o.stop_capture = Some(pos);
                }
                "max_tokens" | "temperature" => {
                    self.expect(&Tok::Equals, "`=`")?;
                    self.value_token()?;
                    if key == "temperature" {
                        o.temperature = true;
                    } else {
                        o.refused.get_or_insert((
                            "[max_tokens=...]".into(),
                            pos,
                            "a token budget per rule is not supported yet",
                        ));
                    }
                }
                _ => return Err(syntax(pos, format!("unknown rule option `{key}`"))),
            }
            if !self.eat(&Tok::Comma) {
                break;
            }
        }
        self.expect(&Tok::RBracket, "`]`")
    }

    /// One option value: a string, a regex, a number or a name.
    fn value_token(&mut self) -> Result<(), LarkError> {
        let pos = self.pos();
        match self.bump() {
            Tok::Str(_) | Tok::Regex(_) | Tok::Number(_) | Tok::Token(_) | Tok::Rule(_) => Ok(()),
            _ => Err(syntax(pos, "expected an option value")),
        }
    }

    fn import(&mut self, pos: Pos) -> Result<Item, LarkError> {
        let mut path = Vec::new();
        loop {
            let p = self.pos();
            match self.bump() {
                Tok::Rule(n) | Tok::Token(n) => path.push(n),
                _ => return Err(syntax(p, "expected a name in the import path")),
            }
            if !self.eat(&Tok::Dot) {
                break;
            }
        }
        let joined = path.join(".");
        if self.eat(&Tok::LParen) {
            let mut out = Vec::new();
            loop {
                let p = self.pos();
                match self.bump() {
                    Tok::Rule(n) | Tok::Token(n) => out.push((format!("{joined}.{n}"), n)),
                    _ => return Err(syntax(p, "expected a name in the import list")),
                }
                if !self.eat(&Tok::Comma) {
                    break;
                }
            }
            self.expect(&Tok::RParen, "`)`")?;
            return Ok(Item::Import(out, pos));
        }
        let local = if self.eat(&Tok::Arrow) {
            let p = self.pos();
            match self.bump() {
                Tok::Rule(n) | Tok::Token(n) => n,
                _ => return Err(syntax(p, "expected a name after `->`")),
            }
        } else {
            path.last().cloned().unwrap_or_default()
        };
        Ok(Item::Import(vec![(joined, local)], pos))
    }

    fn expansions(&mut self) -> Result<Expansions, LarkError> {
        let pos = self.pos();
        if self.depth >= MAX_NESTING {
            return Err(syntax(
                pos,
                format!("groups nested deeper than {MAX_NESTING}"),
            ));
        }
        self.depth += 1;
        let mut alts = vec![self.alias()?];
        loop {
            if self.eat(&Tok::VBar) {
            } else if self.peek() == &Tok::Newline && self.peek_at(1) == Some(&Tok::VBar) {
                self.i += 2;
            } else {
                break;
            }
            alts.push(self.alias()?);
        }
        self.depth -= 1;
        Ok(Expansions { pos, alts })
    }

    fn alias(&mut self) -> Result<Alias, LarkError> {
        let mut conjuncts = vec![self.expansion()?];
        let mut and_pos = None;
        loop {
            let p = self.pos();
            if !self.eat(&Tok::And) {
                break;
            }
            and_pos.get_or_insert(p);
            conjuncts.push(self.expansion()?);
        }
        if self.eat(&Tok::Arrow) {
            // `-> alias` names the tree node: no effect on the language.
            let p = self.pos();
            match self.bump() {
                Tok::Rule(_) => {}
                _ => return Err(syntax(p, "expected a rule name after `->`")),
            }
        }
        if let Tok::Keyword(k) = self.peek() {
            if k == "%if" {
                return Err(unsupported(
                    self.pos(),
                    "%if",
                    "conditions on parametric rules are not supported yet",
                ));
            }
        }
        Ok(Alias { conjuncts, and_pos })
    }

    fn expansion(&mut self) -> Result<Expansion, LarkError> {
        let mut v = Vec::new();
        while !self.at_end()
            && !matches!(
                self.peek(),
                Tok::Newline
                    | Tok::VBar
                    | Tok::Arrow
                    | Tok::RBrace
                    | Tok::RParen
                    | Tok::RBracket
                    | Tok::And
            )
            && self.peek() != &Tok::Keyword("%if".into())
        {
            v.push(self.expr()?);
        }
        Ok(Expansion(v))
    }

    fn number(&mut self) -> Result<u32, LarkError> {
        let pos = self.pos();
        match self.bump() {
            Tok::Number(n) => n
                .parse::<u32>()
                .ok()
                .filter(|&n| n <= MAX_REPETITION)
                .ok_or_else(|| {
                    syntax(
                        pos,
                        format!(
                            "expected a repetition count from 0 to {MAX_REPETITION}, found `{n}`"
                        ),
                    )
                }),
            _ => {
                self.i -= 1;
                Err(syntax(
                    pos,
                    format!("expected a number, found {}", self.describe()),
                ))
            }
        }
    }

    fn expr(&mut self) -> Result<Expr, LarkError> {
        let pos = self.pos();
        let atom = self.atom()?;
        let repeat = match self.peek() {
            Tok::Op(c) => {
                let c = *c;
                self.bump();
                Some(match c {
                    '?' => (0, Some(1)),
                    '*' => (0, None),
                    _ => (1, None),
                })
            }
            Tok::Tilde if matches!(self.peek_at(1), Some(Tok::Number(_))) => {
                self.bump();
                let p = self.pos();
                let a = self.number()?;
                let b = if self.eat(&Tok::DotDot) {
                    self.number()?
                } else {
                    a
                };
                if b < a {
                    return Err(syntax(
                        p,
                        format!("repetition range {a}..{b} ends before it starts"),
                    ));
                }
                Some((a, Some(b)))
            }
            Tok::LBrace => {
                self.bump();
                let p = self.pos();
                let a = if self.peek() == &Tok::Comma {
                    0
                } else {
                    self.number()?
                };
                let b = if self.eat(&Tok::Comma) {
                    if self.peek() == &Tok::RBrace {
                        None
                    } else {
                        Some(self.number()?)
                    }
                } else {
                    Some(a)
                };
                self.expect(&Tok::RBrace, "`}`")?;
                if b == Some(0) {
                    return Err(syntax(p, "the end of a repetition range cannot be 0"));
                }
                if b.is_some_and(|b| b < a) {
                    return Err(syntax(p, "a repetition range ends before it starts"));
                }
                Some((a, b))
            }
            _ => None,
        };
        Ok(Expr { atom, repeat, pos })
    }

    fn atom(&mut self) -> Result<Atom, LarkError> {
        let pos = self.pos();
        if self.eat(&Tok::Tilde) {
            let inner = self.atom()?;
            return Ok(Atom::Not(Box::new(inner), pos));
        }
        if self.eat(&Tok::LParen) {
            let e = self.expansions()?;
            self.expect(&Tok::RParen, "`)`")?;
            return Ok(Atom::Group(e));
        }
        if self.eat(&Tok::LBracket) {
            let e = self.expansions()?;
            self.expect(&Tok::RBracket, "`]`")?;
            return Ok(Atom::Maybe(e));
        }
        let v = match self.bump() {
            Tok::Str(raw) => {
                let (s, flag) = parse_string(&raw, pos)?;
                if self.peek() == &Tok::DotDot {
                    self.bump();
                    let p2 = self.pos();
                    let Tok::Str(raw2) = self.bump() else {
                        return Err(syntax(p2, "expected a string after `..`"));
                    };
                    let (s2, flag2) = parse_string(&raw2, p2)?;
                    let single = |s: &str, p: Pos, flag: bool| {
                        let mut cs = s.chars();
                        match (cs.next(), cs.next(), flag) {
                            (Some(c), None, false) => Ok(c),
                            _ => Err(syntax(
                                p,
                                "a range end must be one character, without flags",
                            )),
                        }
                    };
                    let (a, b) = (single(&s, pos, flag)?, single(&s2, p2, flag2)?);
                    if a > b {
                        return Err(syntax(pos, format!("invalid range order {a:?}..{b:?}")));
                    }
                    Value::Range(a, b)
                } else {
                    Value::String(s, flag)
                }
            }
            Tok::Regex(raw) => {
                let end = raw.rfind('/').unwrap_or(0);
                let flags = raw[end + 1..].to_string();
                if flags.contains('l') {
                    return Err(syntax(pos, "the `l` regex flag is not supported"));
                }
                Value::Regex(raw[1..end.max(1)].to_string(), flags)
            }
            Tok::Rule(n) | Tok::Token(n) => {
                if self.peek() == &Tok::DoubleColon {
                    return Err(unsupported(
                        self.pos(),
                        "parametric reference (`name::expr`)",
                        "parametric rules are not supported yet",
                    ));
                }
                if self.peek() == &Tok::LBrace
                    && !matches!(self.peek_at(1), Some(Tok::Comma | Tok::Number(_)))
                {
                    return Err(unsupported(
                        self.pos(),
                        "template usage (`name{...}`)",
                        "templates are not supported",
                    ));
                }
                if n.starts_with(['?', '!']) {
                    return Err(syntax(
                        pos,
                        format!("the mark in `{n}` belongs on a definition, not a reference"),
                    ));
                }
                Value::Name(n)
            }
            Tok::Special(s) => Value::SpecialToken(s),
            Tok::GrammarRef(g) => Value::GrammarRef(g),
            Tok::Json(v) => Value::Json(v),
            Tok::RegexExt(v) => Value::RegexExt(v),
            Tok::Keyword(k) if k == "%lark" => {
                return Err(unsupported(
                    pos,
                    "%lark { ... }",
                    "nested Lark grammars are not supported yet",
                ))
            }
            _ => {
                self.i -= 1;
                return Err(syntax(
                    pos,
                    format!("expected a value, found {}", self.describe()),
                ));
            }
        };
        Ok(Atom::Value(v, pos))
    }
}

/// A string token's value and its `i` flag (JSON escapes, and `\xHH`).
pub fn parse_string(raw: &str, pos: Pos) -> Result<(String, bool), LarkError> {
    let (inner, flag) = match raw.strip_suffix('i') {
        Some(s) => (s, true),
        None => (raw, false),
    };
    let mut json = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            json.push(c);
            continue;
        }
        match chars.next() {
            Some('x') => {
                json.push_str("\\u00");
                json.extend(chars.by_ref().take(2));
            }
            Some(o) => {
                json.push('\\');
                json.push(o);
            }
            None => json.push('\\'),
        }
    }
    let s: String =
        serde_json::from_str(&json).map_err(|e| syntax(pos, format!("invalid string: {e}")))?;
    Ok((s, flag))
}

/// Parses the tokens into items.
pub fn parse(toks: Vec<Spanned>) -> Result<Vec<Item>, LarkError> {
    Parser {
        toks,
        i: 0,
        depth: 0,
    }
    .items()
}
