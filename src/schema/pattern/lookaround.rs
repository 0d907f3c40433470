//! # Lookaround in `pattern`, where the language stays regular
//!
//! ECMA-262 lookaheads right after a leading `^` (`^(?=A)`, `^(?!A)`) and
//! lookbehinds right before a trailing `$` (`(?<=C)$`, `(?<!C)$`) say that
//! the whole string starts (ends) with a match of `A` (`C`), or does not:
//! regular conditions. [`split_lookaround`] takes them off the pattern;
//! [`compile_lookaround`] compiles the rest as any pattern (lengths
//! included) and intersects it with, or subtracts, each condition's
//! language by product automata over canonical spellings (one spelling per
//! string, so that subtracting spellings subtracts strings), within the
//! default `max_product_states` / `max_product_len`. A whole pattern
//! `^(?:(?!X)A)*$` (a "tempered" character `A` that never starts a match of
//! `X`) is the strings of `^(?:A)*$` with no match of `X` anywhere, a
//! negative condition of the same kind. [`is_match`] runs such a pattern on
//! a text (key patterns of `patternProperties`). Lookaround anywhere else
//! stays an error of [`translate_ecma`].

use super::{compile_pattern, translate_ecma, CompiledPattern, PatternError};

/// Whether the ECMA-262 `pattern` matches somewhere in `text` (`None`: it
/// cannot be run), lookarounds in the places [`compile_pattern`] accepts
/// included.
pub fn is_match(pattern: &str, text: &str) -> Option<bool> {
    Some(KeyMatcher::new(pattern)?.is_match(text))
}

/// An ECMA-262 pattern compiled to run on texts (searched, as JSON Schema
/// reads a pattern), lookarounds in the places [`compile_pattern`] accepts
/// included: what [`is_match`] runs, kept for many texts (the keys the
/// `uniqueItems` check meets, matched exactly as the generator matched
/// declared names against `patternProperties`).
#[derive(Debug)]
pub struct KeyMatcher {
    rest: regex_automata::meta::Regex,
    /// (negative, the condition's regex).
    conds: Vec<(bool, regex_automata::meta::Regex)>,
}

impl KeyMatcher {
    /// `None` when the pattern cannot be run.
    pub fn new(pattern: &str) -> Option<KeyMatcher> {
        let compile = |p: &str| -> Option<regex_automata::meta::Regex> {
            regex_automata::meta::Regex::new(&translate_ecma(p).ok()?).ok()
        };
        let Some(split) = split_lookaround(pattern) else {
            return Some(KeyMatcher {
                rest: compile(pattern)?,
                conds: Vec::new(),
            });
        };
        let conds = split
            .conds
            .iter()
            .map(|(negative, c)| Some((*negative, compile(c)?)))
            .collect::<Option<Vec<_>>>()?;
        Some(KeyMatcher {
            rest: compile(&split.rest)?,
            conds,
        })
    }

    pub fn is_match(&self, text: &str) -> bool {
        self.rest.is_match(text)
            && self
                .conds
                .iter()
                .all(|(negative, c)| c.is_match(text) != *negative)
    }
}

/// A pattern `^(?=A)(?!B)…R…(?<=C)(?<!D)$`: lookaheads right after a
/// leading `^`, lookbehinds right before a trailing `$`, and the rest.
pub(super) struct Lookaround {
    /// The pattern without its lookarounds.
    rest: String,
    /// (negative, a pattern for the strings the condition is about):
    /// `^A` (strings that start with a match of `A`) for a lookahead at
    /// the start, `C$` for a lookbehind at the end.
    conds: Vec<(bool, String)>,
}

/// The end (exclusive) of the group that opens at `start` (`(`), skipping
/// escapes and classes; `None` when unbalanced.
fn group_end(chars: &[char], start: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = start;
    let mut in_class = false;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 1,
            '[' if !in_class => in_class = true,
            ']' if in_class => in_class = false,
            '(' if !in_class => depth += 1,
            ')' if !in_class => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Splits lookarounds off a pattern where they keep its language regular
/// (see [`Lookaround`]); `None` when there are none in those places.
pub(super) fn split_lookaround(pattern: &str) -> Option<Lookaround> {
    if !pattern.contains("(?=")
        && !pattern.contains("(?!")
        && !pattern.contains("(?<=")
        && !pattern.contains("(?<!")
    {
        return None;
    }
    let chars: Vec<char> = pattern.chars().collect();
    if let Some(t) = tempered(&chars) {
        return Some(t);
    }
    let mut conds = Vec::new();
    let mut head = 0;
    let mut rest = String::new();
    if chars.first() == Some(&'^') {
        head = 1;
        rest.push('^');
        loop {
            let s: String = chars[head..chars.len().min(head + 3)].iter().collect();
            if s != "(?=" && s != "(?!" {
                break;
            }
            let end = group_end(&chars, head)?;
            let body: String = chars[head + 3..end - 1].iter().collect();
            let body = if body.contains('|') {
                format!("(?:{body})")
            } else {
                body
            };
            conds.push((s == "(?!", format!("^{body}")));
            head = end;
        }
    }
    // Lookbehinds right before a trailing `$`: scan the top-level groups.
    let mut tail = chars.len();
    let mut tail_conds = Vec::new();
    if chars.last() == Some(&'$') && (chars.len() < 2 || chars[chars.len() - 2] != '\\') {
        let mut groups = Vec::new();
        let mut i = head;
        while i < chars.len() - 1 {
            match chars[i] {
                '\\' => i += 2,
                '[' => {
                    // Skip a class.
                    i += 1;
                    while i < chars.len() && chars[i] != ']' {
                        if chars[i] == '\\' {
                            i += 1;
                        }
                        i += 1;
                    }
                    i += 1;
                }
                '(' => {
                    let end = group_end(&chars, i)?;
                    groups.push((i, end));
                    i = end;
                }
                _ => i += 1,
            }
        }
        tail = chars.len() - 1;
        while let Some(&(a, b)) = groups.last() {
            let s: String = chars[a..(a + 4).min(chars.len())].iter().collect();
            if b != tail || (s != "(?<=" && s != "(?<!") {
                break;
            }
            let body: String = chars[a + 4..b - 1].iter().collect();
            let body = if body.contains('|') {
                format!("(?:{body})")
            } else {
                body
            };
            tail_conds.push((s == "(?<!", format!("{body}$")));
            tail = a;
            groups.pop();
        }
        if tail_conds.is_empty() {
            tail = chars.len();
        }
    }
    if conds.is_empty() && tail_conds.is_empty() {
        return None;
    }
    rest.extend(&chars[head..tail]);
    if !tail_conds.is_empty() {
        rest.push('$');
    }
    conds.extend(tail_conds);
    Some(Lookaround { rest, conds })
}

/// A whole pattern `^(?:(?!X)A)*$` (or `+`, or a capturing group), with
/// `A` one character (`.`, a class, an escape or a literal) and `X` not
/// matching the empty string: every character is checked not to start a
/// match of `X`, so the strings are those of `^(?:A)*$` with no match of
/// `X` anywhere (a match cannot start at the very end, `X` being
/// non-empty): the negative condition "`X` matches somewhere".
fn tempered(chars: &[char]) -> Option<Lookaround> {
    let n = chars.len();
    if n < 8 || chars[0] != '^' || chars[n - 1] != '$' || chars[n - 2] == '\\' {
        return None;
    }
    let rep = chars[n - 2];
    if rep != '*' && rep != '+' {
        return None;
    }
    if chars[1] != '(' || group_end(chars, 1)? != n - 2 {
        return None;
    }
    let body_start = if chars[2..].starts_with(&['?', ':']) {
        4
    } else {
        2
    };
    if !chars[body_start..].starts_with(&['(', '?', '!']) {
        return None;
    }
    let look_end = group_end(chars, body_start)?;
    let x: String = chars[body_start + 3..look_end - 1].iter().collect();
    let atom: String = chars[look_end..n - 3].iter().collect();
    if !single_char_atom(&atom) || x.contains("(?=") || x.contains("(?!") || x.contains("(?<") {
        return None;
    }
    // `X` must not match the empty string (else only zero iterations pass).
    let hir = regex_syntax::parse(&translate_ecma(&x).ok()?).ok()?;
    if hir.properties().minimum_len().unwrap_or(0) == 0 {
        return None;
    }
    Some(Lookaround {
        rest: format!("^(?:{atom}){rep}$"),
        conds: vec![(true, format!("(?:{x})"))],
    })
}

/// Whether `a` is one character of a pattern: `.`, a class `[...]`, an
/// escape (`\\w`, `\\.`, ...; not a back-reference or `\\u`/`\\x` code)
/// or a literal character that is not a metacharacter.
fn single_char_atom(a: &str) -> bool {
    let c: Vec<char> = a.chars().collect();
    match c.as_slice() {
        ['.'] => true,
        [x] => !"^$\\|?*+()[]{}".contains(*x),
        ['\\', x] => {
            !x.is_ascii_digit() && !matches!(x, 'b' | 'B' | 'u' | 'x' | 'c' | 'k' | 'p' | 'P')
        }
        ['[', .., ']'] => {
            // One class: no `]` left unescaped inside.
            let mut i = 1;
            if c.get(1) == Some(&'^') {
                i += 1;
            }
            while i < c.len() - 1 {
                match c[i] {
                    '\\' => i += 2,
                    ']' | '[' => return false,
                    _ => i += 1,
                }
            }
            i == c.len() - 1
        }
        _ => false,
    }
}

/// The strings of `split.rest` (within the lengths) that meet every
/// condition: intersection with a positive lookaround's language,
/// difference with a negative one's, through product automata over the
/// canonical spellings (one spelling per string, so that subtracting
/// spellings subtracts strings).
pub(super) fn compile_lookaround(
    split: &Lookaround,
    min_len: u64,
    max_len: Option<u64>,
) -> Result<CompiledPattern, PatternError> {
    use crate::dfa::algebra::{combine, Op};
    const CANONICAL: &str = r#"(?:[^"\\\x00-\x1F]|\\["\\bfnrt])*"#;
    let base = compile_pattern(&split.rest, min_len, max_len)?;
    let defaults = crate::schema::SchemaOptions::default();
    let product = |a: &str, b: &str, op: Op| {
        combine(
            a,
            b,
            op,
            defaults.max_product_states,
            defaults.max_product_len,
        )
        .map_err(|e| format!("lookaround: {e}"))
    };
    let Some(mut lang) = base.regex else {
        return Ok(CompiledPattern {
            regex: None,
            narrowed: base.narrowed,
        });
    };
    match product(&lang, CANONICAL, Op::And)? {
        Some(r) => lang = r,
        None => {
            return Ok(CompiledPattern {
                regex: None,
                narrowed: base.narrowed,
            })
        }
    }
    for (negative, cond) in &split.conds {
        let c = compile_pattern(cond, 0, None)?;
        if c.narrowed.is_some() {
            return Err("a lookaround that is narrowed cannot be applied".into());
        }
        let op = if *negative { Op::AndNot } else { Op::And };
        let next = match &c.regex {
            Some(r) => product(&lang, r, op)?,
            None if *negative => Some(lang.clone()),
            None => None,
        };
        match next {
            Some(r) => lang = r,
            None => {
                return Ok(CompiledPattern {
                    regex: None,
                    narrowed: base.narrowed,
                })
            }
        }
    }
    Ok(CompiledPattern {
        regex: Some(lang),
        narrowed: base.narrowed,
    })
}
