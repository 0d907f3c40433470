//! The GBNF parser: text → rules, following llama.cpp's
//! `src/llama-grammar.cpp` (`parse_space`, `parse_rule`,
//! `parse_alternates`, `parse_sequence`, `parse_char`).
//!
//! * A rule is `name ::= alternates` and ends at a newline; it continues on
//!   the next line after a `|`, after `::=`, and anywhere inside
//!   parentheses (llama.cpp's `newline_ok`).
//! * Blanks are spaces and tabs; `#` starts a comment to the end of the
//!   line, wherever a blank may stand.
//! * Rule names are `[a-zA-Z0-9-]+`.
//! * Escapes, in literals and classes alike: `\n \t \r \\ \" \[ \]`,
//!   `\xHH`, `\uHHHH`, `\UHHHHHHHH` (exactly 2, 4 or 8 hex digits).
//! * A postfix operator applies to the item just before it; `{m}`, `{m,}`
//!   and `{m,n}` take blanks inside the braces; counts are at most
//!   [`MAX_REPETITION`] (llama.cpp's `MAX_REPETITION_THRESHOLD`).
//!
//! Every error is a [`GbnfError::Syntax`] at a line and column.

use super::ast::{Expr, Pos, Rule};
use super::GbnfError;

/// Largest count in `{m}`, `{m,}`, `{m,n}` (llama.cpp's
/// `MAX_REPETITION_THRESHOLD`).
pub const MAX_REPETITION: u32 = 2000;

/// Deepest nesting of parentheses (the parser and the lowering are
/// recursive; this bounds their stack use).
pub const MAX_NESTING: usize = 200;

pub(super) fn parse(text: &str) -> Result<Vec<Rule>, GbnfError> {
    let mut p = Parser::new(text);
    let mut rules = Vec::new();
    p.space(true);
    while p.peek().is_some() {
        rules.push(p.rule()?);
    }
    Ok(rules)
}

struct Parser {
    c: Vec<char>,
    /// Position of every character (and one past the end).
    pos: Vec<Pos>,
    i: usize,
    nesting: usize,
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-'
}

impl Parser {
    fn new(text: &str) -> Parser {
        let c: Vec<char> = text.chars().collect();
        let mut pos = Vec::with_capacity(c.len() + 1);
        let (mut line, mut column) = (1, 1);
        for &ch in &c {
            pos.push(Pos { line, column });
            if ch == '\n' {
                line += 1;
                column = 1;
            } else {
                column += 1;
            }
        }
        pos.push(Pos { line, column });
        Parser {
            c,
            pos,
            i: 0,
            nesting: 0,
        }
    }

    fn peek(&self) -> Option<char> {
        self.c.get(self.i).copied()
    }

    fn at(&self, k: usize) -> Option<char> {
        self.c.get(self.i + k).copied()
    }

    fn here(&self) -> Pos {
        self.pos[self.i.min(self.c.len())]
    }

    fn err_at(&self, pos: Pos, message: impl Into<String>) -> GbnfError {
        GbnfError::Syntax {
            line: pos.line,
            column: pos.column,
            message: message.into(),
        }
    }

    fn err(&self, message: impl Into<String>) -> GbnfError {
        self.err_at(self.here(), message)
    }

    /// What stands at the cursor, for messages.
    fn found(&self) -> String {
        match self.peek() {
            None => "the end of the grammar".into(),
            Some('\n') | Some('\r') => "the end of the line".into(),
            Some(c) => format!("`{}`", c.escape_debug()),
        }
    }

    fn space(&mut self, newline_ok: bool) {
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' => self.i += 1,
                '\r' | '\n' if newline_ok => self.i += 1,
                '#' => {
                    while self.peek().is_some_and(|c| c != '\r' && c != '\n') {
                        self.i += 1;
                    }
                }
                _ => break,
            }
        }
    }

    fn name(&mut self) -> Result<String, GbnfError> {
        let start = self.i;
        while self.peek().is_some_and(is_word) {
            self.i += 1;
        }
        if start == self.i {
            return Err(self.err(format!(
                "expecting a rule name ([a-zA-Z0-9-]+), found {}",
                self.found()
            )));
        }
        Ok(self.c[start..self.i].iter().collect())
    }

    fn rule(&mut self) -> Result<Rule, GbnfError> {
        let pos = self.here();
        let name = self.name()?;
        self.space(false);
        if !(self.peek() == Some(':') && self.at(1) == Some(':') && self.at(2) == Some('=')) {
            return Err(self.err(format!(
                "expecting `::=` after the rule name `{name}`, found {}",
                self.found()
            )));
        }
        self.i += 3;
        self.space(true);
        let body = self.alternates(false)?;
        match self.peek() {
            Some('\r') => {
                self.i += 1;
                if self.peek() == Some('\n') {
                    self.i += 1;
                }
            }
            Some('\n') => self.i += 1,
            None => {}
            Some(_) => {
                return Err(self.err(format!(
                    "expecting a newline or the end of the grammar after rule `{name}`, found {}",
                    self.found()
                )))
            }
        }
        self.space(true);
        Ok(Rule { name, body, pos })
    }

    fn alternates(&mut self, nested: bool) -> Result<Expr, GbnfError> {
        let mut alts = vec![self.sequence(nested)?];
        while self.peek() == Some('|') {
            self.i += 1;
            self.space(true);
            alts.push(self.sequence(nested)?);
        }
        Ok(if alts.len() == 1 {
            alts.pop().expect("one alternative")
        } else {
            Expr::Alt(alts)
        })
    }

    fn sequence(&mut self, nested: bool) -> Result<Expr, GbnfError> {
        let mut items: Vec<Expr> = Vec::new();
        while let Some(c) = self.peek() {
            match c {
                '"' => {
                    let item = self.literal()?;
                    items.push(item);
                    self.space(nested);
                }
                '[' => {
                    let item = self.class()?;
                    items.push(item);
                    self.space(nested);
                }
                '(' => {
                    let open = self.here();
                    if self.nesting >= MAX_NESTING {
                        return Err(
                            self.err(format!("groups nested deeper than {MAX_NESTING} levels"))
                        );
                    }
                    self.i += 1;
                    self.space(true);
                    self.nesting += 1;
                    let inner = self.alternates(true)?;
                    self.nesting -= 1;
                    if self.peek() != Some(')') {
                        return Err(self.err(format!(
                            "expecting `)` to close the group opened at {open}, found {}",
                            self.found()
                        )));
                    }
                    self.i += 1;
                    items.push(inner);
                    self.space(nested);
                }
                '.' => {
                    self.i += 1;
                    items.push(Expr::Any);
                    self.space(nested);
                }
                '*' | '+' | '?' => {
                    let (min, max) = match c {
                        '*' => (0, None),
                        '+' => (1, None),
                        _ => (0, Some(1)),
                    };
                    let at = self.here();
                    self.i += 1;
                    self.space(nested);
                    self.repeat(&mut items, min, max, at, c)?;
                }
                '{' => {
                    let at = self.here();
                    self.i += 1;
                    self.space(nested);
                    let min = self.int()?;
                    self.space(nested);
                    let max = match self.peek() {
                        Some('}') => Some(min),
                        Some(',') => {
                            self.i += 1;
                            self.space(nested);
                            if self.peek().is_some_and(|c| c.is_ascii_digit()) {
                                let m = self.int()?;
                                self.space(nested);
                                Some(m)
                            } else {
                                None
                            }
                        }
                        _ => {
                            return Err(self.err(format!(
                                "expecting `,` or `}}` in a repetition, found {}",
                                self.found()
                            )))
                        }
                    };
                    if self.peek() != Some('}') {
                        return Err(self.err(format!(
                            "expecting `}}` to close the repetition, found {}",
                            self.found()
                        )));
                    }
                    self.i += 1;
                    self.space(nested);
                    if let Some(m) = max {
                        if m < min {
                            return Err(self.err_at(
                                at,
                                format!(
                                    "repetition {{{min},{m}}}: the maximum is below the minimum"
                                ),
                            ));
                        }
                    }
                    if min > MAX_REPETITION || max.is_some_and(|m| m > MAX_REPETITION) {
                        return Err(self.err_at(
                            at,
                            format!(
                                "repetition count above the limit of {MAX_REPETITION} \
                                 (llama.cpp's MAX_REPETITION_THRESHOLD)"
                            ),
                        ));
                    }
                    self.repeat(&mut items, min, max, at, '{')?;
                }
                c if is_word(c) => {
                    let pos = self.here();
                    let name = self.name()?;
                    items.push(Expr::Ref { name, pos });
                    self.space(nested);
                }
                _ => break,
            }
        }
        Ok(if items.len() == 1 {
            items.pop().expect("one item")
        } else {
            Expr::Seq(items)
        })
    }

    fn repeat(
        &self,
        items: &mut [Expr],
        min: u32,
        max: Option<u32>,
        at: Pos,
        op: char,
    ) -> Result<(), GbnfError> {
        let Some(last) = items.last_mut() else {
            return Err(self.err_at(at, format!("`{op}` has no item before it to repeat")));
        };
        let expr = std::mem::replace(last, Expr::Any);
        *last = Expr::Repeat {
            expr: Box::new(expr),
            min,
            max,
        };
        Ok(())
    }

    fn int(&mut self) -> Result<u32, GbnfError> {
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        if start == self.i {
            return Err(self.err(format!("expecting a number, found {}", self.found())));
        }
        let digits: String = self.c[start..self.i].iter().collect();
        digits.parse::<u32>().map_err(|_| {
            self.err_at(
                self.pos[start],
                format!("repetition count {digits} above the limit of {MAX_REPETITION}"),
            )
        })
    }

    fn literal(&mut self) -> Result<Expr, GbnfError> {
        let open = self.here();
        self.i += 1;
        let mut chars = Vec::new();
        loop {
            match self.peek() {
                None => {
                    return Err(self.err_at(open, "unterminated literal: no closing `\"`"));
                }
                Some('"') => {
                    self.i += 1;
                    break;
                }
                Some(_) => chars.push(self.char()?),
            }
        }
        Ok(if chars.is_empty() {
            Expr::Seq(Vec::new())
        } else {
            Expr::Literal(chars)
        })
    }

    fn class(&mut self) -> Result<Expr, GbnfError> {
        let open = self.here();
        self.i += 1;
        let negated = self.peek() == Some('^');
        if negated {
            self.i += 1;
        }
        let mut ranges = Vec::new();
        loop {
            match self.peek() {
                None => {
                    return Err(self.err_at(open, "unterminated character class: no closing `]`"));
                }
                Some(']') => {
                    self.i += 1;
                    break;
                }
                Some(_) => {
                    let at = self.here();
                    let lo = self.char()?;
                    let mut hi = lo;
                    if self.peek() == Some('-') && self.at(1).is_some_and(|c| c != ']') {
                        self.i += 1;
                        hi = self.char()?;
                        if hi < lo {
                            return Err(self.err_at(
                                at,
                                format!(
                                    "range `{}-{}`: the end is before the start",
                                    lo.escape_debug(),
                                    hi.escape_debug()
                                ),
                            ));
                        }
                    }
                    ranges.push((lo, hi));
                }
            }
        }
        Ok(Expr::Class { ranges, negated })
    }

    /// One character of a literal or class, escapes decoded.
    fn char(&mut self) -> Result<char, GbnfError> {
        let at = self.here();
        let c = self
            .peek()
            .ok_or_else(|| self.err("unexpected end of the grammar"))?;
        self.i += 1;
        if c != '\\' {
            return Ok(c);
        }
        let e = self
            .peek()
            .ok_or_else(|| self.err_at(at, "unexpected end of the grammar after `\\`"))?;
        self.i += 1;
        let digits = match e {
            'n' => return Ok('\n'),
            't' => return Ok('\t'),
            'r' => return Ok('\r'),
            // `\-` is XGrammar's EBNF (a literal hyphen, in a class too).
            '\\' | '"' | '[' | ']' | '-' => return Ok(e),
            'x' => 2,
            'u' => 4,
            'U' => 8,
            _ => {
                return Err(self.err_at(
                    at,
                    format!(
                        "unknown escape `\\{}` (known: \\n \\t \\r \\\\ \\\" \\[ \\] \\- \\xHH \\uHHHH \\UHHHHHHHH)",
                        e.escape_debug()
                    ),
                ))
            }
        };
        let mut v: u32 = 0;
        for _ in 0..digits {
            let d = self.peek().and_then(|c| c.to_digit(16)).ok_or_else(|| {
                self.err_at(
                    at,
                    format!("escape `\\{e}` needs exactly {digits} hex digits"),
                )
            })?;
            v = v * 16 + d;
            self.i += 1;
        }
        char::from_u32(v).ok_or_else(|| {
            self.err_at(
                at,
                format!("escape `\\{e}`: U+{v:04X} is not a Unicode scalar value"),
            )
        })
    }
}
