//! # ECMA-262 syntax → regex-crate syntax
//!
//! [`translate_ecma`] rewrites a JSON Schema `pattern` so that the regex
//! crate reads it with ECMA meaning: `\d`, `\w` ASCII, `\s` the ECMA space
//! set (swapped inside negated classes), `.` without the line terminators,
//! identity escapes as literals, lookaround kept for [`super::lookaround`];
//! backreferences and word boundaries are errors ([`PatternError`]).

/// `\s`: the ECMA-262 WhiteSpace and LineTerminator code points that are
/// also Unicode White_Space (U+FEFF is ECMA-only), so that validators using
/// either definition agree with what is generated.
const ECMA_SPACE: &str = "\\t\\n\\x0B\\x0C\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";
/// What `\S` excludes: the union of both definitions (adds U+0085, U+FEFF).
const NOT_SPACE: &str = "\\t\\n\\x0B\\x0C\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}";

/// Why a pattern cannot be compiled.
pub type PatternError = String;

/// Rewrites an ECMA-262 pattern into regex-crate syntax with ECMA meaning.
pub fn translate_ecma(p: &str) -> Result<String, PatternError> {
    let chars: Vec<char> = p.chars().collect();
    let mut out = String::with_capacity(p.len() + 16);
    let mut i = 0;
    let mut in_class = false;
    let mut class_start = false;
    // Inside `[^...]` the sets swap: the complement must exclude every code
    // point either definition calls space (`\s` -> the union), and include
    // only what both call space (`\S` -> not the intersection).
    let mut class_negated = false;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' {
            let Some(&n) = chars.get(i + 1) else {
                return Err("pattern ends with a lone backslash".into());
            };
            i += 2;
            match n {
                'd' => out.push_str(if in_class { "0-9" } else { "[0-9]" }),
                'D' => out.push_str(if in_class { "[^0-9]" } else { "[^0-9]" }),
                'w' => out.push_str(if in_class {
                    "A-Za-z0-9_"
                } else {
                    "[A-Za-z0-9_]"
                }),
                'W' => out.push_str("[^A-Za-z0-9_]"),
                's' => {
                    if in_class && class_negated {
                        out.push_str(NOT_SPACE)
                    } else if in_class {
                        out.push_str(ECMA_SPACE)
                    } else {
                        out.push_str(&format!("[{ECMA_SPACE}]"))
                    }
                }
                'S' if in_class && class_negated => out.push_str(&format!("[^{ECMA_SPACE}]")),
                'S' => out.push_str(&format!("[^{NOT_SPACE}]")),
                'b' if in_class => out.push_str("\\x08"),
                'b' | 'B' => return Err("word boundaries (\\b, \\B) are not supported".into()),
                '1'..='9' => return Err("backreferences are not supported".into()),
                'k' if chars.get(i) == Some(&'<') => {
                    return Err("named backreferences are not supported".into())
                }
                '0' => out.push_str("\\x00"),
                'n' | 'r' | 't' | 'f' | 'v' => {
                    out.push('\\');
                    out.push(n);
                }
                'x' | 'u' | 'p' | 'P' => {
                    // Hex and Unicode escapes read the same in both syntaxes.
                    out.push('\\');
                    out.push(n);
                }
                'c' => return Err("control escapes (\\cX) are not supported".into()),
                c if c.is_ascii_alphanumeric() => {
                    // An identity escape of a letter: the letter itself.
                    out.push(c);
                }
                c => {
                    // Identity escape of punctuation (`\/`, `\-`, `\.`): a literal.
                    push_literal(&mut out, c, in_class);
                }
            }
            class_start = false;
            continue;
        }
        if in_class {
            match c {
                ']' if !class_start => {
                    in_class = false;
                    out.push(']');
                }
                '[' | '&' | '~' => {
                    out.push('\\');
                    out.push(c);
                }
                '^' if class_start => {
                    i += 1;
                    class_start = false;
                    if chars.get(i) == Some(&']') {
                        // `[^]` is "any character" in ECMA.
                        out.push_str("\\x{0}-\\x{10FFFF}]");
                        in_class = false;
                        i += 1;
                    } else {
                        out.push('^');
                        class_negated = true;
                    }
                    continue;
                }
                ']' => {
                    // `[]` matches nothing in ECMA.
                    return Err("empty character class [] never matches".into());
                }
                c => out.push(c),
            }
            class_start = false;
            i += 1;
            continue;
        }
        match c {
            '[' => {
                in_class = true;
                class_start = true;
                class_negated = false;
                out.push('[');
                i += 1;
                continue;
            }
            '.' => out.push_str("[^\\n\\r\\x{2028}\\x{2029}]"),
            '(' => {
                let rest: String = chars[i + 1..].iter().take(4).collect();
                if rest.starts_with("?=")
                    || rest.starts_with("?!")
                    || rest.starts_with("?<=")
                    || rest.starts_with("?<!")
                {
                    return Err("lookaround assertions are not supported".into());
                }
                out.push('(');
            }
            '{' => {
                // A `{` that does not start a quantifier is a literal in ECMA.
                let rest: String = chars[i + 1..].iter().collect();
                let is_quant = {
                    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
                    let after: String = rest.chars().skip(digits.len()).collect();
                    !digits.is_empty()
                        && (after.starts_with('}')
                            || (after.starts_with(',')
                                && after[1..]
                                    .trim_start_matches(|c: char| c.is_ascii_digit())
                                    .starts_with('}')))
                };
                if is_quant {
                    out.push('{');
                } else {
                    out.push_str("\\{");
                }
            }
            '}' => {
                // Closing a quantifier or a literal brace.
                if closes_quantifier(&out) {
                    out.push('}');
                } else {
                    out.push_str("\\}");
                }
            }
            ']' => out.push_str("\\]"),
            c => out.push(c),
        }
        i += 1;
    }
    if in_class {
        return Err("unterminated character class".into());
    }
    Ok(out)
}

fn closes_quantifier(out: &str) -> bool {
    // The text since the last unescaped '{' must be digits and at most one comma.
    let Some(pos) = out.rfind('{') else {
        return false;
    };
    if pos > 0 && out.as_bytes()[pos - 1] == b'\\' {
        return false;
    }
    let inner = &out[pos + 1..];
    !inner.is_empty()
        && inner.chars().all(|c| c.is_ascii_digit() || c == ',')
        && inner.matches(',').count() <= 1
        && inner.starts_with(|c: char| c.is_ascii_digit())
}

fn push_literal(out: &mut String, c: char, in_class: bool) {
    if in_class {
        if matches!(c, ']' | '\\' | '^' | '-' | '[' | '&' | '~') {
            out.push('\\');
        }
        out.push(c);
    } else {
        out.push_str(&regex_syntax::escape(&c.to_string()));
    }
}
