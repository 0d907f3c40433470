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
//! Parametric rules (`name::_`, `name::expr`, `%if cond`) are parsed as
//! llguidance parses them. Constructs parsed but outside what the compiler
//! enforces exactly (templates, priorities, `%override`, `%declare`) are
//! refused here, by name and position. `%lark { ... }`
//! is parsed as a grammar of its own (llguidance cuts the tokens at the
//! matching `}` and parses them as items).

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
        let mut parametric = false;
        if self.peek() == &Tok::DoubleColon {
            if terminal {
                return Err(syntax(self.pos(), "a terminal cannot be parametric"));
            }
            self.bump();
            self.expect(&Tok::Underscore, "`_` after `::`")?;
            parametric = true;
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
            parametric,
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
                    // As llguidance: `lazy` is `suffix=//` unless a
                    // non-empty stop or suffix is already given.
                    if !o.is_lazy() {
                        o.suffix = Some((
                            Box::new(Atom::Value(Value::Regex(String::new(), String::new()), pos)),
                            pos,
                        ));
                    }
                }
                "stop" | "suffix" => {
                    self.expect(&Tok::Equals, "`=`")?;
                    let vpos = self.pos();
                    let v = self.atom()?;
                    if o.suffix.is_some() || o.stop.is_some() {
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
                    let v = Some((Box::new(v), pos));
                    if key == "suffix" {
                        o.suffix = v;
                    } else {
                        o.stop = v;
                    }
                }
                "stop_capture" => {
                    self.expect(&Tok::Equals, "`=`")?;
                    self.value_token()?;
                    o.stop_capture = Some(pos);
                }
                "temperature" => {
                    self.expect(&Tok::Equals, "`=`")?;
                    self.value_token()?;
                    o.temperature = true;
                }
                "max_tokens" => {
                    self.expect(&Tok::Equals, "`=`")?;
                    let vpos = self.pos();
                    match self.bump() {
                        Tok::Number(n) => match n.parse::<u64>() {
                            Ok(n) => o.max_tokens = Some((n, pos)),
                            Err(_) => {
                                return Err(syntax(
                                    vpos,
                                    format!("expected a token count, found `{n}`"),
                                ))
                            }
                        },
                        _ => return Err(syntax(vpos, "expected a token count")),
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
        let mut cond = None;
        if !self.at_end() && self.peek() == &Tok::Keyword("%if".into()) {
            let p = self.pos();
            self.bump();
            cond = Some((self.param_cond()?, p));
        }
        Ok(Alias {
            conjuncts,
            and_pos,
            cond,
        })
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

    /// `%lark { items }` (after `%lark`): the tokens up to the matching
    /// `}`, parsed as a grammar of their own, one level deeper.
    fn nested(&mut self) -> Result<Vec<Item>, LarkError> {
        self.expect(&Tok::LBrace, "`{` after %lark")?;
        let start = self.i;
        let mut level = 1usize;
        while self.i < self.toks.len() {
            match self.toks[self.i].tok {
                Tok::LBrace => level += 1,
                Tok::RBrace => level -= 1,
                _ => {}
            }
            if level == 0 {
                break;
            }
            self.i += 1;
        }
        if level > 0 {
            return Err(syntax(
                self.toks[start - 1].pos,
                "unmatched `%lark {` (no `}` closes it)",
            ));
        }
        if self.depth + 1 >= MAX_NESTING {
            return Err(syntax(
                self.toks[start - 1].pos,
                format!("grammars and groups nested deeper than {MAX_NESTING}"),
            ));
        }
        let inner = self.toks[start..self.i].to_vec();
        if inner.last().is_some_and(|t| t.tok != Tok::Newline) {
            // llguidance parses the block's items as a file's: each ends
            // with a newline.
            return Err(syntax(
                self.toks[self.i].pos,
                "expected the end of the line before the `}` that closes %lark",
            ));
        }
        self.i += 1;
        if inner.is_empty() {
            return Ok(Vec::new());
        }
        Parser {
            toks: inner,
            i: 0,
            depth: self.depth + 1,
        }
        .items()
    }

    /// A parameter value: a decimal or `0x` hexadecimal number.
    fn param_value(&mut self) -> Result<u64, LarkError> {
        let pos = self.pos();
        let Tok::Number(n) = self.bump() else {
            self.i -= 1;
            return Err(syntax(
                pos,
                format!("expected a number, found {}", self.describe()),
            ));
        };
        let v = match n.strip_prefix("0x").or_else(|| n.strip_prefix("0X")) {
            Some(h) => u64::from_str_radix(h, 16).ok(),
            None => n.parse::<u64>().ok(),
        };
        v.ok_or_else(|| syntax(pos, format!("expected a 64-bit number, found `{n}`")))
    }

    /// A bit index (`max` 63) or a range end (`max` 64).
    fn bit(&mut self, max: u64) -> Result<u32, LarkError> {
        let pos = self.pos();
        let v = self.param_value()?;
        if v > max {
            return Err(syntax(pos, format!("bit {v} is past {max}")));
        }
        Ok(v as u32)
    }

    fn param_ref(&mut self) -> Result<ParamRef, LarkError> {
        if self.eat(&Tok::Underscore) {
            return Ok(ParamRef { start: 0, end: 64 });
        }
        let pos = self.pos();
        self.expect(&Tok::LBracket, "`_` or `[start:end]`")?;
        let start = self.bit(63)?;
        self.expect(&Tok::Colon, "`:`")?;
        let end = self.bit(64)?;
        self.expect(&Tok::RBracket, "`]`")?;
        if end <= start {
            return Err(syntax(pos, format!("bit range [{start}:{end}] is empty")));
        }
        Ok(ParamRef { start, end })
    }

    fn in_parens<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<T, LarkError>,
    ) -> Result<T, LarkError> {
        self.expect(&Tok::LParen, "`(`")?;
        let v = f(self)?;
        self.expect(&Tok::RParen, "`)`")?;
        Ok(v)
    }

    /// `name::EXPR` (llguidance's `parse_param_expr`).
    fn param_expr(&mut self) -> Result<ParamExpr, LarkError> {
        if matches!(self.peek(), Tok::Number(_)) {
            return Ok(ParamExpr::Const(self.param_value()?));
        }
        if self.eat(&Tok::Underscore) {
            return Ok(ParamExpr::SelfRef);
        }
        let pos = self.pos();
        let Tok::Rule(f) = self.bump() else {
            self.i -= 1;
            return Err(syntax(
                pos,
                format!("expected a parameter expression, found {}", self.describe()),
            ));
        };
        Ok(match f.as_str() {
            "incr" => ParamExpr::Incr(self.in_parens(Self::param_ref)?),
            "decr" => ParamExpr::Decr(self.in_parens(Self::param_ref)?),
            "bit_and" => ParamExpr::And(self.in_parens(Self::param_value)?),
            "bit_or" => ParamExpr::Or(self.in_parens(Self::param_value)?),
            "set_bit" => ParamExpr::Or(1u64 << self.in_parens(|p| p.bit(63))?),
            "clear_bit" => ParamExpr::And(!(1u64 << self.in_parens(|p| p.bit(63))?)),
            _ => return Err(syntax(pos, format!("unknown parameter expression `{f}`"))),
        })
    }

    /// `%if COND` (llguidance's `parse_param_cond`).
    fn param_cond(&mut self) -> Result<ParamCond, LarkError> {
        use std::cmp::Ordering::{Equal, Greater, Less};
        let pos = self.pos();
        let Tok::Rule(f) = self.bump() else {
            self.i -= 1;
            return Err(syntax(
                pos,
                format!("expected a condition, found {}", self.describe()),
            ));
        };
        let cmp = |p: &mut Self, o, e| {
            p.in_parens(|p| {
                let r = p.param_ref()?;
                p.expect(&Tok::Comma, "`,`")?;
                Ok(ParamCond::Cmp(r, o, e, p.param_value()?))
            })
        };
        let count = |p: &mut Self, o, e| {
            p.in_parens(|p| {
                let r = p.param_ref()?;
                p.expect(&Tok::Comma, "`,`")?;
                Ok(ParamCond::Count(r, o, e, p.bit(63)?))
            })
        };
        let single = |b: u32| ParamRef {
            start: b,
            end: b + 1,
        };
        Ok(match f.as_str() {
            "true" => ParamCond::True,
            "eq" => cmp(self, Equal, true)?,
            "ne" => cmp(self, Equal, false)?,
            "lt" => cmp(self, Less, false)?,
            "le" => cmp(self, Less, true)?,
            "gt" => cmp(self, Greater, false)?,
            "ge" => cmp(self, Greater, true)?,
            "bit_count_eq" => count(self, Equal, true)?,
            "bit_count_ne" => count(self, Equal, false)?,
            "bit_count_lt" => count(self, Less, false)?,
            "bit_count_le" => count(self, Less, true)?,
            "bit_count_gt" => count(self, Greater, false)?,
            "bit_count_ge" => count(self, Greater, true)?,
            "and" | "or" => {
                let (a, b) = self.in_parens(|p| {
                    let a = p.param_cond()?;
                    p.expect(&Tok::Comma, "`,`")?;
                    Ok((a, p.param_cond()?))
                })?;
                if f == "and" {
                    ParamCond::And(Box::new(a), Box::new(b))
                } else {
                    ParamCond::Or(Box::new(a), Box::new(b))
                }
            }
            "not" => ParamCond::Not(Box::new(self.in_parens(Self::param_cond)?)),
            "bit_clear" => ParamCond::Cmp(single(self.in_parens(|p| p.bit(63))?), Equal, true, 0),
            "bit_set" => ParamCond::Cmp(single(self.in_parens(|p| p.bit(63))?), Equal, true, 1),
            "is_zeros" => ParamCond::Cmp(self.in_parens(Self::param_ref)?, Equal, true, 0),
            "is_ones" => {
                let r = self.in_parens(Self::param_ref)?;
                ParamCond::Cmp(r, Equal, true, r.mask() >> r.start)
            }
            _ => return Err(syntax(pos, format!("unknown condition `{f}`"))),
        })
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
                if self.eat(&Tok::DoubleColon) {
                    return Ok(Atom::Value(Value::NameParam(n, self.param_expr()?), pos));
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
            Tok::Keyword(k) if k == "%lark" => Value::NestedLark(self.nested()?),
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
