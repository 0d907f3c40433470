//! Tokens of the Lark meta-syntax, with positions.
//!
//! The token set and patterns are llguidance's (`lark/lexer.rs`): names
//! (`rule`, `?rule`, `!rule`, `_rule`, `TOKEN`, `_TOKEN`; `-` allowed
//! inside), JSON-syntax strings with an optional `i` flag, `/regex/flags`,
//! numbers, `<special>` tokens, `@grammar` references, newlines (a token:
//! they end definitions) and the `%` keywords. Blanks and comments (`#` or
//! `//` to the end of the line) are skipped. `%json`, `%regex` and
//! `%llguidance` carry the JSON value that follows them.
//!
//! Every refusal is a [`LarkError::Syntax`] at the offending character.

use super::ast::Pos;
use super::LarkError;

/// A token kind.
#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    Ignore,
    Import,
    /// `%if`, `%lark` (parsed), `%override`, `%declare` (recognized,
    /// refused by the parser by name).
    Keyword(String),
    Json(serde_json::Value),
    RegexExt(serde_json::Value),
    LlGuidance(serde_json::Value),
    Colon,
    DoubleColon,
    Equals,
    Comma,
    Dot,
    DotDot,
    Arrow,
    LParen,
    RParen,
    LBrace,
    RBrace,
    LBracket,
    RBracket,
    Tilde,
    Underscore,
    VBar,
    And,
    /// `?`, `*` or `+`.
    Op(char),
    /// The raw `"..."` text with its quotes and flag.
    Str(String),
    /// The raw `/.../flags` text.
    Regex(String),
    /// A lowercase name, with its `?`/`!` marks.
    Rule(String),
    /// An uppercase name.
    Token(String),
    Number(String),
    Special(String),
    GrammarRef(String),
    Newline,
}

/// A token and where it starts.
#[derive(Clone, Debug, PartialEq)]
pub struct Spanned {
    pub tok: Tok,
    pub pos: Pos,
}

/// Most tokens in one grammar (a bound on the untrusted text).
pub const MAX_TOKENS: usize = 1 << 20;

struct Lexer<'a> {
    src: &'a str,
    i: usize,
    line: usize,
    col: usize,
}

impl<'a> Lexer<'a> {
    fn pos(&self) -> Pos {
        Pos {
            line: self.line,
            column: self.col,
        }
    }

    fn rest(&self) -> &'a str {
        &self.src[self.i..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn peek2(&self) -> Option<char> {
        self.rest().chars().nth(1)
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.i += c.len_utf8();
        if c == '\n' {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
        Some(c)
    }

    fn err(&self, pos: Pos, message: impl Into<String>) -> LarkError {
        LarkError::Syntax {
            line: pos.line,
            column: pos.column,
            message: message.into(),
        }
    }

    fn take_while(&mut self, f: impl Fn(char) -> bool) -> &'a str {
        let start = self.i;
        while self.peek().is_some_and(&f) {
            self.bump();
        }
        &self.src[start..self.i]
    }

    /// The JSON value after a `%json` / `%regex` / `%llguidance` keyword.
    fn json(&mut self, what: &str) -> Result<serde_json::Value, LarkError> {
        self.take_while(|c| c == ' ' || c == '\t' || c == '\n' || c == '\r');
        let pos = self.pos();
        let mut it =
            serde_json::Deserializer::from_str(self.rest()).into_iter::<serde_json::Value>();
        match it.next() {
            Some(Ok(v)) => {
                let n = it.byte_offset();
                let end = self.i + n;
                while self.i < end {
                    self.bump();
                }
                Ok(v)
            }
            Some(Err(e)) => Err(self.err(pos, format!("{what}: invalid JSON: {e}"))),
            None => Err(self.err(pos, format!("{what}: expected a JSON value"))),
        }
    }

    fn next(&mut self) -> Result<Option<Spanned>, LarkError> {
        loop {
            self.take_while(|c| c == ' ' || c == '\t');
            let r = self.rest();
            if r.starts_with('#') || r.starts_with("//") {
                self.take_while(|c| c != '\n');
                continue;
            }
            break;
        }
        let pos = self.pos();
        let Some(c) = self.peek() else {
            return Ok(None);
        };
        let tok = match c {
            '\r' | '\n' => {
                while matches!(self.peek(), Some('\r' | '\n' | ' ' | '\t')) {
                    if self.peek() == Some('\r') && self.peek2() != Some('\n') {
                        return Err(
                            self.err(self.pos(), "a carriage return not followed by a newline")
                        );
                    }
                    self.bump();
                }
                Tok::Newline
            }
            '%' => {
                self.bump();
                let word = self.take_while(|c| c.is_ascii_lowercase());
                match word {
                    "ignore" => Tok::Ignore,
                    "import" => Tok::Import,
                    "json" => Tok::Json(self.json("%json")?),
                    "regex" => Tok::RegexExt(self.json("%regex")?),
                    "llguidance" => Tok::LlGuidance(self.json("%llguidance")?),
                    "override" | "declare" | "if" | "lark" => Tok::Keyword(format!("%{word}")),
                    _ => return Err(self.err(pos, format!("unknown directive `%{word}`"))),
                }
            }
            ':' => {
                self.bump();
                if self.peek() == Some(':') {
                    self.bump();
                    Tok::DoubleColon
                } else {
                    Tok::Colon
                }
            }
            '.' => {
                self.bump();
                if self.peek() == Some('.') {
                    self.bump();
                    Tok::DotDot
                } else {
                    Tok::Dot
                }
            }
            '-' if self.peek2() == Some('>') => {
                self.bump();
                self.bump();
                Tok::Arrow
            }
            '=' | ',' | '(' | ')' | '{' | '}' | '[' | ']' | '~' | '|' | '&' | '*' | '+' => {
                self.bump();
                match c {
                    '=' => Tok::Equals,
                    ',' => Tok::Comma,
                    '(' => Tok::LParen,
                    ')' => Tok::RParen,
                    '{' => Tok::LBrace,
                    '}' => Tok::RBrace,
                    '[' => Tok::LBracket,
                    ']' => Tok::RBracket,
                    '~' => Tok::Tilde,
                    '|' => Tok::VBar,
                    '&' => Tok::And,
                    _ => Tok::Op(c),
                }
            }
            '"' => Tok::Str(self.string(pos)?),
            '/' => Tok::Regex(self.regex(pos)?),
            '<' => {
                let start = self.i;
                self.bump();
                self.take_while(|c| c != '<' && c != '>' && !c.is_whitespace());
                if self.peek() != Some('>') || self.i == start + 1 {
                    return Err(self.err(pos, "expected `<name>` (a special token)"));
                }
                self.bump();
                Tok::Special(self.src[start..self.i].to_string())
            }
            '@' => {
                self.bump();
                let n = self.take_while(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                if n.is_empty() {
                    return Err(self.err(pos, "expected a grammar name after `@`"));
                }
                Tok::GrammarRef(n.to_string())
            }
            '0'..='9' | '-' => {
                let start = self.i;
                if c == '-' {
                    self.bump();
                    if !self.peek().is_some_and(|c| c.is_ascii_digit()) {
                        return Err(self.err(pos, "unexpected `-`"));
                    }
                }
                if self.rest().starts_with("0x") || self.rest().starts_with("0X") {
                    self.bump();
                    self.bump();
                    self.take_while(|c| c.is_ascii_hexdigit());
                } else {
                    self.take_while(|c| c.is_ascii_digit());
                    if self.peek() == Some('.') && self.peek2().is_some_and(|c| c.is_ascii_digit())
                    {
                        self.bump();
                        self.take_while(|c| c.is_ascii_digit());
                    }
                }
                Tok::Number(self.src[start..self.i].to_string())
            }
            '?' | '!' | '_' | 'a'..='z' | 'A'..='Z' => self.name(pos)?,
            _ => return Err(self.err(pos, format!("unexpected character {c:?}"))),
        };
        Ok(Some(Spanned { tok, pos }))
    }

    fn name(&mut self, pos: Pos) -> Result<Tok, LarkError> {
        let start = self.i;
        let c = self.peek().unwrap_or(' ');
        let ident = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-';
        let upper = |c: char| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_' || c == '-';
        if c == '?' || c == '!' {
            self.bump();
            if c == '!' && matches!(self.peek(), Some('?' | '_')) {
                self.bump();
            }
            if !self
                .peek()
                .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
            {
                if c == '?' && start + 1 == self.i {
                    return Ok(Tok::Op('?'));
                }
                return Err(self.err(pos, "expected a rule name after the mark"));
            }
        }
        if self.peek() == Some('_') {
            self.bump();
            match self.peek() {
                Some(c) if c.is_ascii_lowercase() => {}
                Some(c) if c.is_ascii_uppercase() && start + 1 == self.i => {
                    self.take_while(upper);
                    return Ok(Tok::Token(self.src[start..self.i].to_string()));
                }
                _ if start + 1 == self.i => return Ok(Tok::Underscore),
                _ => return Err(self.err(pos, "expected a rule name")),
            }
        }
        match self.peek() {
            Some(c) if c.is_ascii_lowercase() => {
                self.take_while(ident);
                Ok(Tok::Rule(self.src[start..self.i].to_string()))
            }
            Some(c) if c.is_ascii_uppercase() && start == self.i => {
                self.take_while(upper);
                Ok(Tok::Token(self.src[start..self.i].to_string()))
            }
            _ => Err(self.err(pos, "expected a name")),
        }
    }

    fn string(&mut self, pos: Pos) -> Result<String, LarkError> {
        let start = self.i;
        self.bump();
        loop {
            match self.bump() {
                None | Some('\n') => return Err(self.err(pos, "unterminated string")),
                Some('"') => break,
                Some('\\') => {
                    let p = self.pos();
                    match self.bump() {
                        Some('"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't') => {}
                        Some('u') => {
                            for _ in 0..4 {
                                if !self.bump().is_some_and(|c| c.is_ascii_hexdigit()) {
                                    return Err(self.err(p, "`\\u` needs four hex digits"));
                                }
                            }
                        }
                        Some('x') => {
                            for _ in 0..2 {
                                if !self.bump().is_some_and(|c| c.is_ascii_hexdigit()) {
                                    return Err(self.err(p, "`\\x` needs two hex digits"));
                                }
                            }
                        }
                        _ => return Err(self.err(p, "unknown escape in a string")),
                    }
                }
                Some(c) if (c as u32) < 0x20 || c == '\x7f' => {
                    return Err(self.err(pos, "a control character inside a string"));
                }
                Some(_) => {}
            }
        }
        if self.peek() == Some('i')
            && !self
                .peek2()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            self.bump();
        }
        Ok(self.src[start..self.i].to_string())
    }

    fn regex(&mut self, pos: Pos) -> Result<String, LarkError> {
        let start = self.i;
        self.bump();
        let mut empty = true;
        loop {
            match self.bump() {
                None => return Err(self.err(pos, "unterminated regex")),
                Some('/') if !empty => break,
                Some('/') => return Err(self.err(pos, "empty regex `//`")),
                Some('\\') => {
                    if self.bump().is_none() {
                        return Err(self.err(pos, "unterminated regex"));
                    }
                }
                Some(_) => {}
            }
            empty = false;
        }
        self.take_while(|c| "imslux".contains(c));
        Ok(self.src[start..self.i].to_string())
    }
}

/// The tokens of `src`, in order, ending with a newline token.
pub fn lex(src: &str) -> Result<Vec<Spanned>, LarkError> {
    let mut l = Lexer {
        src,
        i: 0,
        line: 1,
        col: 1,
    };
    let mut out = Vec::new();
    while let Some(t) = l.next()? {
        if out.len() >= MAX_TOKENS {
            return Err(l.err(t.pos, format!("more than {MAX_TOKENS} tokens")));
        }
        out.push(t);
    }
    let pos = l.pos();
    out.push(Spanned {
        tok: Tok::Newline,
        pos,
    });
    Ok(out)
}
