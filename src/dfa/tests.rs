//! Unit tests of the byte DFA: full-match semantics, errors naming offsets
//! and limits, and the sparse determinizer against regex-automata's.

use super::*;

#[test]
fn full_match_semantics() {
    let d = ByteDfa::new("a+b?", &DfaConfig::default()).unwrap();
    assert!(d.matches(b"a"));
    assert!(d.matches(b"aaab"));
    assert!(!d.matches(b""));
    assert!(!d.matches(b"ab "), "anchored at the end");
    assert!(!d.matches(b"ba"), "anchored at the start");
}

#[test]
fn syntax_error_names_the_offset() {
    match ByteDfa::new("ab(c", &DfaConfig::default()) {
        Err(DfaError::Syntax { offset, .. }) => assert_eq!(offset, 2),
        other => panic!("expected a syntax error, got {other:?}"),
    }
}

#[test]
fn size_limit_is_reported() {
    let cfg = DfaConfig {
        dfa_size_limit: 10_000,
        determinize_size_limit: 10_000,
        ..Default::default()
    };
    let e = ByteDfa::new("[a-z]{0,50}x[a-z]{20}", &cfg).unwrap_err();
    assert!(matches!(e, DfaError::TooBig { .. }), "{e}");
    assert!(e.to_string().contains("raise it"), "{e}");
}

#[test]
fn each_limit_is_named_by_its_own_knob() {
    let nfa = ByteDfa::new(r"\w{1000}{100}", &DfaConfig::default()).unwrap_err();
    assert!(nfa.to_string().contains("the NFA exceeds"), "{nfa}");
    let cfg = DfaConfig {
        dfa_size_limit: 200_000,
        ..Default::default()
    };
    let dfa = ByteDfa::new("[ab]*a[ab]{20}", &cfg).unwrap_err();
    assert!(
        dfa.to_string()
            .contains("the DFA exceeds its limit of 200000"),
        "{dfa}"
    );
    let cfg = DfaConfig {
        determinize_size_limit: 100_000,
        ..Default::default()
    };
    let det = ByteDfa::new("[ab]*a[ab]{20}", &cfg).unwrap_err();
    assert!(
        det.to_string()
            .contains("determinization memory exceeds its limit of 100000"),
        "{det}"
    );
}

#[test]
fn deep_nesting_up_to_the_limit_parses() {
    let deep = format!("{}a{}", "(?:".repeat(990), ")".repeat(990));
    assert!(ByteDfa::new(&deep, &DfaConfig::default())
        .unwrap()
        .matches(b"a"));
    let too_deep = format!("{}a{}", "(?:".repeat(1100), ")".repeat(1100));
    assert!(matches!(
        ByteDfa::new(&too_deep, &DfaConfig::default()),
        Err(DfaError::Syntax { .. })
    ));
}

#[test]
fn sparse_determinizer_agrees_with_regex_automata() {
    let cfg = DfaConfig::default();
    for pattern in [
        "a+b?",
        "",
        "[a-z]{0,5}x[a-z]{3}",
        r#"\{"(?:[^"\\]|\\.)*":\s*(?:true|false|null|-?\d+(?:\.\d+)?)\}"#,
        r"[\x{80}-\x{10FFFF}]+|é{2,3}|😀",
        r"(?:ab|a)*(?:b|bc)",
        r"(a|b)*a(a|b){4}",
        r"(?i)schema|[^x]",
        r"(?s).{2,4}",
        r"[^\x00-\x7F]",
    ] {
        let ours = ByteDfa::new(pattern, &cfg).unwrap();
        let reference = ByteDfa::new_reference(pattern, &cfg).unwrap();
        assert_eq!(first_difference(&ours, &reference), None, "{pattern}");
        assert!(ours.state_count() <= reference.state_count(), "{pattern}");
    }
}

#[test]
fn difference_finder_finds_the_shortest_witness() {
    let cfg = DfaConfig::default();
    let a = ByteDfa::new("a*", &cfg).unwrap();
    let b = ByteDfa::new("a{0,2}", &cfg).unwrap();
    assert_eq!(first_difference(&a, &b), Some(b"aaa".to_vec()));
    let c = ByteDfa::new("x|y", &cfg).unwrap();
    let d = ByteDfa::new("[xz]", &cfg).unwrap();
    assert_eq!(first_difference(&c, &d).map(|w| w.len()), Some(1));
}

#[test]
fn look_around_uses_the_reference_path() {
    let d = ByteDfa::new(r"x(?-u:\b)y?|^b$", &DfaConfig::default()).unwrap();
    assert!(d.matches(b"x"));
    assert!(d.matches(b"b"));
    assert!(!d.matches(b"xy"), "no word boundary between 'x' and 'y'");
}

/// Rows filled a class at a time (some states' rows filled whole
/// midway) give the same automaton as rows filled whole: a walk over
/// pairs of states reached by the same bytes agrees on every byte's
/// deadness, acceptance and distance.
#[test]
fn rows_filled_a_class_at_a_time_give_the_same_automaton() {
    let cfg = DfaConfig::default();
    for p in [
        r#"\{"a":(?:[0-9]+|"[^"\\]{0,5}")(?:,"[a-z]{1,3}":null)*\}"#,
        r"(?:ab|a[^b]|[^a]b){2,4}(?:é|中文)?",
        r#""(?:[^"\\\x00-\x1F]|\\["\\bfnrt]){2,40}""#,
    ] {
        let nfa = || direct::parse_nfa(p, None, true).unwrap().unwrap();
        let mut whole = ByteDfa::lazy_nfa(nfa(), p.len(), &cfg);
        let mut by_class = ByteDfa::lazy_nfa(nfa(), p.len(), &cfg);
        by_class.set_class_rows();
        let mut seen = std::collections::HashSet::new();
        let mut queue = std::collections::VecDeque::from([(whole.start(), by_class.start())]);
        let mut k = 0;
        while let Some((a, b)) = queue.pop_front() {
            k += 1;
            if k % 7 == 0 {
                by_class.ensure_row(b);
            }
            assert_eq!(whole.is_accepting(a), by_class.is_accepting(b), "{p}");
            assert_eq!(whole.dist(a), by_class.dist(b), "{p}");
            for byte in 0..=255u8 {
                let (x, y) = (whole.next(a, byte), by_class.next(b, byte));
                assert_eq!(x == 0, y == 0, "{p}: byte {byte}");
                if x != 0 && seen.len() < 2000 && seen.insert((x, y)) {
                    queue.push_back((x, y));
                }
            }
        }
        assert!(by_class.limit_error().is_none());
    }
}
