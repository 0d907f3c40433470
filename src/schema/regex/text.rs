//! # Regex text helpers
//!
//! The small pieces every generator module writes with: [`Lang`] (a
//! sub-language as regex text ([`Rx`]), `None` the empty language), alternation of
//! parts, counted repetition suffixes, and the `json.dumps` spellings of
//! floats, strings and number literals. No state, no schema types: the
//! functions map values to text and nothing else.

use super::rx::{rx, Rx};

pub(crate) type Lang = Option<Rx>;

/// [`alt_all`] over text (the extra-key tries, built as one `String`).
pub(crate) fn alt_all_text(parts: Vec<String>) -> Option<String> {
    match parts.len() {
        0 => None,
        1 => parts.into_iter().next(),
        _ => {
            let len = parts.iter().map(String::len).sum::<usize>() + parts.len() + 3;
            let mut out = String::with_capacity(len);
            out.push_str("(?:");
            for (i, p) in parts.iter().enumerate() {
                if i > 0 {
                    out.push('|');
                }
                out.push_str(p);
            }
            out.push(')');
            Some(out)
        }
    }
}

/// Text made as a `String` (numeric ranges, patterns) as a [`Lang`].
pub(crate) fn text_lang(s: Option<String>) -> Lang {
    s.map(Rx::from)
}

/// `(?:P1|P2|...)`; one part as it is; no part: the empty language.
pub(crate) fn alt_all(parts: Vec<Rx>) -> Lang {
    match parts.len() {
        0 => None,
        1 => parts.into_iter().next(),
        _ => Some(rx!["(?:", Rx::join(parts, &Rx::from("|")), ")"]),
    }
}

/// The list construct `(?*SEP|ITEM)` ([`crate::dfa::ordered`]): one or
/// more `item`s joined by `sep`, with one copy of the item.
pub(crate) fn list_rx(sep: &Rx, item: &Rx) -> Rx {
    let plain = crate::dfa::ordered::list_plain_len(sep.plain_len(), item.plain_len());
    construct(
        crate::dfa::ordered::LIST_OPEN.into(),
        sep,
        vec![item.clone()],
        plain,
    )
}

/// The ordered construct `(?&SEP|K1|...|Kn)`: the non-empty ordered
/// subsequences of `items` (at least one) joined by `sep`.
pub(crate) fn ordered_rx(sep: &Rx, items: Vec<Rx>) -> Rx {
    debug_assert!(!items.is_empty());
    if items.len() == 1 {
        return items.into_iter().next().expect("one item");
    }
    let lens: Vec<usize> = items.iter().map(Rx::plain_len).collect();
    let plain = crate::dfa::ordered::ordered_plain_len(sep.plain_len(), &lens);
    construct(crate::dfa::ordered::OPEN.into(), sep, items, plain)
}

/// The member-set construct `(?%FLAGS|SEP|K1|...|Kn)` (the last of
/// `items` the extra member when `flags.extra`).
pub(crate) fn set_rx(sep: &Rx, flags: &crate::dfa::ordered::SetFlags, items: Vec<Rx>) -> Rx {
    debug_assert_eq!(flags.required.len() + usize::from(flags.extra), items.len());
    let mut head = String::from(crate::dfa::ordered::SET_OPEN);
    head.extend(flags.required.iter().map(|&r| if r { 'R' } else { 'O' }));
    if flags.extra {
        head.push('X');
    }
    head.push('|');
    let lens: Vec<usize> = items.iter().map(Rx::plain_len).collect();
    let plain = crate::dfa::ordered::set_plain_len(sep.plain_len(), &lens, flags);
    construct(head.into(), sep, items, plain)
}

/// `HEAD SEP|K1|...|Kn)`, a construct whose length written out is `plain`.
fn construct(head: Rx, sep: &Rx, items: Vec<Rx>, plain: usize) -> Rx {
    let bar = Rx::from("|");
    let mut parts = vec![head, sep.clone()];
    for k in items {
        parts.push(bar.clone());
        parts.push(k);
    }
    parts.push(Rx::from(")"));
    Rx::construct(parts, plain)
}

pub(crate) fn repeat(n: u64, m: Option<u64>) -> String {
    match (n, m) {
        (0, None) => "*".into(),
        (1, None) => "+".into(),
        (0, Some(1)) => "?".into(),
        (a, None) => format!("{{{a},}}"),
        (a, Some(b)) if a == b => format!("{{{a}}}"),
        (a, Some(b)) => format!("{{{a},{b}}}"),
    }
}

/// Python's `repr(float)` (what `json.dumps` writes for a float).
pub fn py_float(f: f64) -> String {
    if f.is_nan() || f.is_infinite() {
        return "null".into();
    }
    let sci = format!("{f:e}"); // shortest round-trip digits, e.g. "1.5e16"
    let (mant, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("exponent");
    let neg = mant.starts_with('-');
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let sign = if neg { "-" } else { "" };
    if (-4..16).contains(&exp) {
        // fixed notation with at least one fractional digit
        let point = exp + 1;
        let (int, frac) = if point <= 0 {
            ("0".to_string(), "0".repeat((-point) as usize) + &digits)
        } else if point as usize >= digits.len() {
            (
                digits.clone() + &"0".repeat(point as usize - digits.len()),
                String::new(),
            )
        } else {
            (
                digits[..point as usize].to_string(),
                digits[point as usize..].to_string(),
            )
        };
        let frac = if frac.is_empty() {
            "0".to_string()
        } else {
            frac
        };
        format!("{sign}{int}.{frac}")
    } else {
        let m = if digits.len() > 1 {
            format!("{}.{}", &digits[..1], &digits[1..])
        } else {
            digits.clone()
        };
        let es = if exp < 0 { "-" } else { "+" };
        format!("{sign}{m}e{es}{:02}", exp.abs())
    }
}

/// `json.dumps(s, ensure_ascii=False)` of a string, quotes included.
pub fn py_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

pub(crate) fn number_literal(n: &serde_json::Number) -> String {
    if n.is_i64() || n.is_u64() {
        return n.to_string();
    }
    let f = n.as_f64().unwrap_or(0.0);
    let py = regex_syntax::escape(&py_float(f));
    if f.fract() == 0.0 && f.abs() < 1e16 {
        // 5.0 and 5 are the same JSON Schema value.
        format!("(?:{py}|{})", f as i64)
    } else {
        py
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_float_repr() {
        for (f, s) in [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1e-5, "1e-05"),
            (1e16, "1e+16"),
            (123456.789, "123456.789"),
            (-2.5e-7, "-2.5e-07"),
            (0.0001, "0.0001"),
            (1.5e300, "1.5e+300"),
        ] {
            assert_eq!(py_float(f), s);
        }
    }
}
