//! The lexeme languages the lowering builds from text: Lark's common
//! terminals, regexes in the `regex` crate's syntax, the shortest-match
//! language of lazy lexemes and `%regex` substrings.

use super::ast::Pos;
use super::parse::unsupported;
use super::LarkError;
use regex_syntax::hir::{Class, ClassUnicode, Hir};

/// Most chunks of a `%regex` substring (its language has one word per
/// pair of chunk positions).
pub const MAX_SUBSTRING_CHUNKS: usize = 256;

/// Bounds on `&` / `~`: product states and regex text of the result.
pub(super) const ALGEBRA_STATES: usize = 20_000;
pub(super) const ALGEBRA_LEN: usize = 1 << 20;

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
pub(super) fn substring(v: &serde_json::Value, p: Pos) -> Result<Hir, LarkError> {
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
