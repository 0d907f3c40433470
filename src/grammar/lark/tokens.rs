//! Special tokens in a rule: `<|im_end|>` / `<name>` (a token by its
//! text), `<[151657]>` (by id), `<[a-b,c]>` (ranges), `<[^...]>` (their
//! complement) and `<[*]>` (any token), as llguidance writes them.
//!
//! A special token matches that token only, never its text spelled in
//! ordinary tokens. The grammar is lowered before the vocabulary is known,
//! so each distinct reference becomes a lexeme of a **placeholder**: three
//! bytes `0xFF hi lo` (`hi lo` its index), which no UTF-8 text holds. The
//! greedy-lexer check sees it as a lexeme no text lexeme can run into (as
//! llguidance's lexer sees a special token), and the GBNF rules carry it as
//! raw bytes. At compile time, with the vocabulary, [`substitute`] puts in
//! its place the spelling of the token as a grammar symbol
//! ([`crate::Vocabulary::spelling`]): the index then allows exactly that
//! token there.
//!
//! Only a special (added) token that is not a stop token can be named: an
//! ordinary token's text can also be spelled by other tokens, so no byte
//! language tells it apart, and a stop token ends the output and stands
//! nowhere inside it. Ranges and complements are accepted where every id
//! they cover is such a token; `<[*]>` never is (it covers ordinary ones).

use super::ast::Pos;
use super::parse::unsupported;
use super::LarkError;
use crate::grammar::gbnf::{Expr, Gbnf};
use std::collections::HashMap;

/// First byte of a placeholder (no UTF-8 text holds it; it never reaches an
/// automaton: [`substitute`] replaces every placeholder first).
pub const PLACEHOLDER_LEAD: u8 = 0xFF;

/// Most distinct special-token references in one grammar.
pub const MAX_SPECIALS: usize = 1 << 16;

/// A reference as llguidance reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenSpec {
    /// `<...>`: the token whose text is this (brackets included).
    Name(String),
    /// `<[a-b,c]>`, `<[^...]>`: inclusive id ranges, or their complement.
    Ids {
        ranges: Vec<(u32, u32)>,
        negated: bool,
    },
    /// `<[*]>`: any token.
    Any,
}

/// A distinct reference: as written, read, and where first written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Special {
    pub written: String,
    pub spec: TokenSpec,
    pub pos: Pos,
    /// The grammar of the list it is written in (`None`: the first).
    pub grammar: Option<String>,
}

/// The placeholder of the `k`-th reference.
pub fn placeholder(k: usize) -> Vec<u8> {
    vec![PLACEHOLDER_LEAD, (k >> 8) as u8, k as u8]
}

/// The index of a placeholder.
pub fn placeholder_index(b: &[u8]) -> Option<usize> {
    match b {
        [PLACEHOLDER_LEAD, hi, lo] => Some((*hi as usize) << 8 | *lo as usize),
        _ => None,
    }
}

/// Reads `<...>` as llguidance does (its errors, at the reference).
pub fn parse(written: &str, pos: Pos) -> Result<TokenSpec, LarkError> {
    let err = |message: String| LarkError::Syntax {
        line: pos.line,
        column: pos.column,
        message,
    };
    let Some(inner) = written
        .strip_prefix("<[")
        .and_then(|s| s.strip_suffix("]>"))
    else {
        return Ok(TokenSpec::Name(written.to_string()));
    };
    let (negated, inner) = match inner.strip_prefix('^') {
        Some(rest) => (true, rest),
        None => (false, inner),
    };
    if inner == "*" {
        if negated {
            return Err(err("negated wildcard token <[^*]> is not supported".into()));
        }
        return Ok(TokenSpec::Any);
    }
    if inner.contains('*') {
        return Err(err(
            "wildcard token range '*' must not contain additional tokens".into(),
        ));
    }
    let mut ranges = Vec::new();
    for range in inner.split(',') {
        let ends: Vec<&str> = range.split('-').map(str::trim).collect();
        if ends.len() == 1 && ends[0].is_empty() {
            continue;
        }
        let id = |s: &str| {
            s.parse::<u32>()
                .map_err(|_| err(format!("invalid token range: {range:?}")))
        };
        let (a, b) = match ends.as_slice() {
            [a] => (id(a)?, id(a)?),
            [a, b] => (id(a)?, id(b)?),
            _ => return Err(err(format!("invalid token range: {range:?}"))),
        };
        if a > b {
            return Err(err(format!("invalid token range: {range:?}")));
        }
        ranges.push((a, b));
    }
    if ranges.is_empty() {
        return Err(err("empty token range".into()));
    }
    Ok(TokenSpec::Ids { ranges, negated })
}

/// The vocabulary's tokens a grammar can name.
pub(crate) struct TokenTable<'a> {
    /// Special tokens that are grammar symbols: (id, text, spelling).
    pub symbols: &'a [(u32, String, Vec<u8>)],
    /// Stop tokens: (id, text).
    pub stops: &'a [(u32, String)],
    /// Number of ids the tokenizer knows.
    pub num_ids: usize,
}

const ORDINARY: &str = "it is no special (added) token of this vocabulary: a special token \
     matches that token only, and an ordinary token's text can also be spelled by other \
     tokens; write ordinary text as a string";
const STOP: &str = "a stop token ends the output and stands nowhere inside it";

/// The spellings of the tokens `s` names; a name or id that is not a
/// special, non-stop token of the vocabulary is refused at `s.pos`.
pub(crate) fn resolve(s: &Special, t: &TokenTable) -> Result<Vec<Vec<u8>>, LarkError> {
    let refuse = |what: String, reason: &str| unsupported(s.pos, &what, reason);
    match &s.spec {
        TokenSpec::Name(name) => {
            if let Some((_, _, b)) = t.symbols.iter().find(|(_, x, _)| x == name) {
                return Ok(vec![b.clone()]);
            }
            if t.stops.iter().any(|(_, x)| x == name) {
                return Err(refuse(format!("the stop token `{name}`"), STOP));
            }
            Err(refuse(format!("special token `{name}`"), ORDINARY))
        }
        TokenSpec::Any => Err(refuse(
            "the wildcard token `<[*]>`".into(),
            "it covers every token, ordinary ones included, and one ordinary token is no \
             text language (its text can also be spelled by other tokens)",
        )),
        TokenSpec::Ids { ranges, negated } => {
            let by_id: HashMap<u32, &[u8]> = t
                .symbols
                .iter()
                .map(|(i, _, b)| (*i, b.as_slice()))
                .collect();
            let n = t.num_ids as u64;
            let inside = |id: u32| ranges.iter().any(|&(a, b)| a <= id && id <= b);
            let check = |id: u32| -> Result<Vec<u8>, LarkError> {
                if let Some(b) = by_id.get(&id) {
                    return Ok(b.to_vec());
                }
                let what = format!("token {id} in `{}`", s.written);
                Err(match t.stops.iter().find(|(i, _)| *i == id) {
                    Some((_, text)) => refuse(format!("{what} (the stop token `{text}`)"), STOP),
                    None => refuse(what, ORDINARY),
                })
            };
            let mut out = Vec::new();
            if *negated {
                for id in 0..n as u32 {
                    if !inside(id) {
                        out.push(check(id)?);
                    }
                }
                if out.is_empty() {
                    return Err(refuse(
                        format!("`{}`", s.written),
                        "it covers no token of this vocabulary",
                    ));
                }
            } else {
                for &(a, b) in ranges {
                    if b as u64 >= n {
                        return Err(LarkError::Syntax {
                            line: s.pos.line,
                            column: s.pos.column,
                            message: format!(
                                "token id {b} in `{}` is past the vocabulary ({n} ids)",
                                s.written
                            ),
                        });
                    }
                    for id in a..=b {
                        let sp = check(id)?;
                        if !out.contains(&sp) {
                            out.push(sp);
                        }
                    }
                }
            }
            Ok(out)
        }
    }
}

/// `g` with every placeholder replaced by the spellings of its tokens
/// (`spellings[k]` for the `k`-th reference; one of them, as alternatives).
pub fn substitute(g: &Gbnf, spellings: &[Vec<Vec<u8>>]) -> Gbnf {
    fn walk(e: &Expr, sp: &[Vec<Vec<u8>>]) -> Expr {
        match e {
            Expr::Bytes(b) => match placeholder_index(b).and_then(|k| sp.get(k)) {
                Some(v) if v.len() == 1 => Expr::Bytes(v[0].clone()),
                Some(v) => Expr::Alt(v.iter().map(|b| Expr::Bytes(b.clone())).collect()),
                None => e.clone(),
            },
            Expr::Alt(v) => Expr::Alt(v.iter().map(|x| walk(x, sp)).collect()),
            Expr::Seq(v) => Expr::Seq(v.iter().map(|x| walk(x, sp)).collect()),
            Expr::Repeat { expr, min, max } => Expr::Repeat {
                expr: Box::new(walk(expr, sp)),
                min: *min,
                max: *max,
            },
            _ => e.clone(),
        }
    }
    let mut out = g.clone();
    for r in &mut out.rules {
        r.body = walk(&r.body, spellings);
    }
    out
}
