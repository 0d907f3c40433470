//! # HIR → JSON string text
//!
//! [`emit`] writes a pattern's HIR as regex text over the *JSON spelling*
//! of the string: plain characters stay, `"` and `\` and control
//! characters become their canonical escapes ([`char_unit`],
//! [`class_text`]). The text can never run past the closing quote.

use regex_syntax::hir::{Class, Hir, HirKind};

pub(super) fn emit_alt(v: &[Hir]) -> Option<String> {
    let parts: Vec<String> = v.iter().filter_map(emit).collect();
    match parts.len() {
        0 => None,
        1 => parts.into_iter().next(),
        _ => Some(format!("(?:{})", parts.join("|"))),
    }
}

/// The JSON spellings of one character, as regex text: the character
/// itself, `\"` and `\\`, and for a control character `\u00XX` in
/// either case beside its short escape (if it has one), as free strings
/// take them.
pub fn char_unit(c: char) -> String {
    let short = match c {
        '"' => return "\\\\\"".into(),
        '\\' => return "\\\\\\\\".into(),
        '\u{8}' => "b",
        '\u{c}' => "f",
        '\n' => "n",
        '\r' => "r",
        '\t' => "t",
        c if (c as u32) < 0x20 => "",
        c => return regex_syntax::escape(&c.to_string()),
    };
    let low = c as u32 & 0xF;
    let hex = match low {
        0..=9 => low.to_string(),
        _ => {
            let d = char::from_digit(low, 16).expect("a hex digit");
            format!("[{d}{}]", d.to_ascii_uppercase())
        }
    };
    let u = format!("\\\\u00{}{hex}", c as u32 >> 4);
    if short.is_empty() {
        u
    } else {
        format!("(?:\\\\{short}|{u})")
    }
}

/// JSON string text for a class of characters: plain ones as a class,
/// `"`, `\` and control characters as their escapes.
pub fn class_text(ranges: &[(char, char)]) -> Option<String> {
    let mut plain = Vec::new();
    let mut special = Vec::new();
    for &(a, b) in ranges {
        let (a, b) = (a as u32, b as u32);
        // Split off 0x00-0x1F, '"' (0x22), '\' (0x5C).
        let mut s = a;
        while s <= b {
            if s < 0x20 || s == 0x22 || s == 0x5C {
                special.push(char::from_u32(s).unwrap());
                s += 1;
                continue;
            }
            let mut e = b;
            for stop in [0x22u32, 0x5C] {
                if s < stop && stop <= e {
                    e = stop - 1;
                }
            }
            plain.push((s, e));
            s = e + 1;
        }
    }
    let mut parts = Vec::new();
    if !plain.is_empty() {
        let mut cls = String::from("[");
        for (a, b) in plain {
            if a == b {
                cls.push_str(&format!("\\x{{{a:X}}}"));
            } else {
                cls.push_str(&format!("\\x{{{a:X}}}-\\x{{{b:X}}}"));
            }
        }
        cls.push(']');
        parts.push(cls);
    }
    // Control characters share one escape family; keep it compact.
    let controls: Vec<char> = special
        .iter()
        .copied()
        .filter(|c| (*c as u32) < 0x20)
        .collect();
    if controls.len() == 32 {
        parts.push("\\\\[bfnrt]|\\\\u00[01][0-9a-fA-F]".into());
    } else {
        for c in &controls {
            parts.push(char_unit(*c));
        }
    }
    for c in special.iter().filter(|c| (**c as u32) >= 0x20) {
        parts.push(char_unit(*c));
    }
    match parts.len() {
        0 => None,
        1 => parts.pop(),
        _ => Some(format!("(?:{})", parts.join("|"))),
    }
}

pub(super) fn emit(h: &Hir) -> Option<String> {
    match h.kind() {
        HirKind::Empty => Some(String::new()),
        HirKind::Look(_) => Some(String::new()), // removed by split_anchors
        HirKind::Literal(l) => {
            let s = String::from_utf8_lossy(&l.0);
            Some(s.chars().map(char_unit).collect())
        }
        HirKind::Class(Class::Unicode(c)) => {
            let r: Vec<(char, char)> = c.ranges().iter().map(|r| (r.start(), r.end())).collect();
            class_text(&r)
        }
        HirKind::Class(Class::Bytes(c)) => {
            let r: Vec<(char, char)> = c
                .ranges()
                .iter()
                .filter(|r| r.start() < 0x80)
                .map(|r| (r.start() as char, (r.end().min(0x7F)) as char))
                .collect();
            class_text(&r)
        }
        HirKind::Capture(c) => emit(&c.sub),
        HirKind::Repetition(r) => {
            let sub = emit(&r.sub);
            let sub = match sub {
                None => {
                    return if r.min == 0 {
                        Some(String::new())
                    } else {
                        None
                    }
                }
                Some(s) if s.is_empty() => return Some(String::new()),
                Some(s) => s,
            };
            let q = match (r.min, r.max) {
                (0, None) => "*".to_string(),
                (1, None) => "+".to_string(),
                (0, Some(1)) => "?".to_string(),
                (a, None) => format!("{{{a},}}"),
                (a, Some(b)) if a == b => {
                    if a == 1 {
                        return Some(sub);
                    }
                    if a == 0 {
                        return Some(String::new());
                    }
                    format!("{{{a}}}")
                }
                (a, Some(b)) => format!("{{{a},{b}}}"),
            };
            Some(format!("(?:{sub}){q}"))
        }
        HirKind::Concat(v) => {
            let mut s = String::new();
            for h in v {
                s.push_str(&emit(h)?);
            }
            Some(s)
        }
        HirKind::Alternation(v) => emit_alt(v),
    }
}
