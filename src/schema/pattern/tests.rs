//! Tests of pattern compilation: anchoring, lengths, narrowing, emission.

use super::*;

fn inner(p: &str, lo: u64, hi: Option<u64>) -> regex::Regex {
    let c = compile_pattern(p, lo, hi).unwrap();
    regex::Regex::new(&format!("^(?:{})$", c.regex.unwrap())).unwrap()
}

#[test]
fn unanchored_patterns_match_anywhere() {
    let r = inner("ab", 0, None);
    assert!(r.is_match("xxabyy"));
    assert!(!r.is_match("xxa"));
    let r = inner("^ab", 0, None);
    assert!(r.is_match("abyy"));
    assert!(!r.is_match("xab"));
    let r = inner("^$|^[a-z]+$", 0, None);
    assert!(r.is_match(""));
    assert!(r.is_match("abc"));
    assert!(!r.is_match("ab1"));
}

#[test]
fn ecma_classes_are_ascii() {
    let r = inner("^\\d+$", 0, None);
    assert!(r.is_match("123"));
    assert!(
        !r.is_match("١٢٣"),
        "Arabic-Indic digits are not \\d in ECMA"
    );
    let r = inner("^\\w+$", 0, None);
    assert!(!r.is_match("é"));
}

#[test]
fn space_classes_hold_under_both_definitions() {
    // U+FEFF is space to ECMA only, U+0085 to Unicode only: generated
    // text must satisfy a validator that uses either, so neither may
    // come out of `\s`, `\S`, `[^\s]` or `[^\S]` (Github_easy---o21455).
    for p in [
        "^[^@^\\s]+$",
        "^[^\\S]+$",
        "^\\s+$",
        "^\\S+$",
        "^[\\s]+$",
        "^[\\S]+$",
    ] {
        let r = inner(p, 0, None);
        for odd in ["\u{FEFF}", "\u{85}"] {
            assert!(!r.is_match(odd), "{p} must not match {odd:?}");
        }
    }
    assert!(inner("^[^@^\\s]+$", 0, None).is_match("ab"));
    assert!(!inner("^[^@^\\s]+$", 0, None).is_match("a b"));
    assert!(!inner("^[^@^\\s]+$", 0, None).is_match("\u{3000}"));
    assert!(inner("^[^\\S]+$", 0, None).is_match(" \u{3000}"));
    assert!(!inner("^[^\\S]+$", 0, None).is_match("a"));
}

#[test]
fn quotes_and_backslashes_are_escaped() {
    let r = inner("^a\"b\\\\c$", 0, None);
    assert!(r.is_match("a\\\"b\\\\c"));
    assert!(!r.is_match("a\"b\\c"));
    let r = inner("^[^x]+$", 0, None);
    assert!(r.is_match("\\\"\\n"));
    assert!(!r.is_match("\""));
    assert!(!r.is_match("\n"));
}

#[test]
fn lengths_apply_exactly_to_one_variable_piece() {
    let r = inner("^[a-z]+$", 2, Some(4));
    assert!(!r.is_match("a"));
    assert!(r.is_match("ab"));
    assert!(r.is_match("abcd"));
    assert!(!r.is_match("abcde"));
    let r = inner("^x-[0-9]*$", 3, Some(5));
    assert!(r.is_match("x-1"));
    assert!(!r.is_match("x-"));
    assert!(!r.is_match("x-1234"));
}

#[test]
fn unsupported_constructs_are_errors() {
    for p in ["(?=a)b", "(a)\\1", "\\bword", "a(?!b)"] {
        assert!(compile_pattern(p, 0, None).is_err(), "{p}");
    }
}

#[test]
fn narrowing_stays_inside_the_bound() {
    let c = compile_pattern("^[a-z]+:[a-z]+$", 0, Some(9)).unwrap();
    assert!(c.narrowed.is_some());
    let r = regex::Regex::new(&format!("^(?:{})$", c.regex.unwrap())).unwrap();
    assert!(r.is_match("abc:def"));
    assert!(!r.is_match("abcdef:ghij"));
}
