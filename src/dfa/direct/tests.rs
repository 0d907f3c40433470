//! Tests of the direct compiler: its NFAs' languages against regex-syntax's
//! (fixed patterns and property tests), and the copies of shared groups.

use super::*;
use crate::dfa::parse::SHARED_GROUP_MIN;
use crate::dfa::{first_difference, ByteDfa, DfaConfig};
use proptest::prelude::*;

/// The eager DFA of `nfa` (our determinizer) against regex-syntax's.
fn same_language(p: &str) {
    same_language_as(p, false);
}

/// With `ordered`, `p` may hold `(?&SEP|K1|...|Kn)`: the reference is
/// regex-syntax's DFA of the text written out.
fn same_language_as(p: &str, ordered: bool) {
    let Some(nfa) = parse_nfa(p, None, ordered) else {
        return;
    };
    let mut nfa = nfa.expect("no size limit");
    let mut given = nfa
        .take_distances()
        .expect("the direct compiler keeps distances");
    let mut searched = crate::dfa::determinize::nfa_distances(&nfa);
    // Compared where the start reaches: a state only an empty class
    // leads to (`[^\x00-\x{10FFFF}]x`) is compiled as if it could not
    // reach the match, and nothing reads it.
    let mut seen = vec![false; nfa.len()];
    let mut stack = vec![nfa.start()];
    while let Some(q) = stack.pop() {
        if !std::mem::replace(&mut seen[q as usize], true) {
            stack.extend(nfa.edges(q).iter().map(|e| e.next));
        }
    }
    for (q, reached) in seen.iter().enumerate() {
        if !reached {
            (given[q], searched[q]) = (0, 0);
        }
    }
    assert_eq!(
        given, searched,
        "pattern {p:?}: distances kept while compiling differ from a search's"
    );
    // Bounded: a random pattern's DFA can be exponential (counted
    // repetitions nested and repeated), and regex-automata's
    // determinizer then ran for minutes before its default limit. Such
    // a pattern is not compared (both sides hit the same kind of limit;
    // any other error still fails).
    let config = DfaConfig {
        lazy_states: None,
        dfa_size_limit: 32 << 20,
        determinize_size_limit: 128 << 20,
        ..DfaConfig::default()
    };
    let too_big = |e: &crate::dfa::DfaError| matches!(e, crate::dfa::DfaError::TooBig { .. });
    let ours = match ByteDfa::determinize(nfa, p.len(), usize::MAX, &config) {
        Ok(crate::dfa::Dfa::Eager(d)) => d,
        Err(e) if too_big(&e) => return,
        _ => panic!("{p:?}: not determinized eagerly"),
    };
    let plain = crate::dfa::ordered::expand(p, usize::MAX).expect("no limit");
    let reference = match ByteDfa::new_reference(&plain, &config) {
        Ok(r) => r,
        Err(e) if too_big(&e) => return,
        Err(e) => panic!("{p:?}: reference DFA: {e}"),
    };
    assert_eq!(
        first_difference(&ours, &reference),
        None,
        "pattern {p:?}: a text in one language only"
    );
}

#[test]
fn schema_syntax_compiles_to_the_same_language() {
    let patterns = crate::dfa::parse::tests::SCHEMA_PATTERNS
        .iter()
        .filter(|p| !p.contains("\\u{"));
    let more = [
        r"\{[ \t\n\r]{0,2}(?:\x{1F600}|é)?",
        "(?:ab|a|abc|b|ba)x",
        "(?:\"name\"|\"nickname\"|é|ü)",
        "(?:a*)*b",
        "(?:a?){3,5}",
        "(?:|a){2,}",
        "x{0}y{0,0}z",
        r"[^a]{2}",
    ];
    for &p in patterns.chain(more.iter()) {
        assert!(
            parse_nfa(p, None, false).is_some(),
            "{p:?} is in the subset"
        );
        same_language(p);
    }
}

#[test]
fn ordered_members_compile_to_the_written_out_language() {
    for p in [
        "(?&,|a|b)",
        "(?&,|a|bc|d)",
        r#"\{(?:(?&[ ]?,[ ]?|"a":1|"b":(?&;|x|y*|z)|"c":\[\]))?\}"#,
        "(?&,|a?|b|c*)",
        "(?:(?&,|a|b)x){2,3}",
        "(?:(?&,|a|b)|c)+",
        "(?&(?:,|;)|(?:a|ab)|b{2}|(?&-|c|d))",
        "(?*,|a)",
        "(?*,|(?:ab|c))",
        r"\[(?:(?*[ ]?,[ ]?|(?&,|x|y)))?\]",
        "(?*(?:,|;)|a*)",
        "(?*|b?)",
        "(?:(?*,|a)b){2,3}",
        "(?*,|(?*;|x))",
    ] {
        assert!(parse_nfa(p, None, true).is_some(), "{p:?} is in the subset");
        same_language_as(p, true);
    }
    // Only where allowed; and it needs a separator and an item.
    assert!(parse_nfa("(?&,|a|b)", None, false).is_none());
    assert!(parse_nfa("(?&,)", None, true).is_none());
    assert!(parse_nfa("(?*,|a)", None, false).is_none());
    assert!(parse_nfa("(?*,|a|b)", None, true).is_none());
    assert!(parse_nfa("(?*a)", None, true).is_none());
    // regex-syntax has no such syntax.
    assert!(ByteDfa::new_reference("(?&,|a|b)", &DfaConfig::default()).is_err());
}

#[test]
fn a_state_inside_an_ordered_member_holds_one_separator() {
    // After the first member's value (a digit loop that may end there),
    // the state's NFA threads must not grow with the members left: one
    // separator after the member written, however many may follow.
    let key_after = |n: usize| {
        let members: Vec<String> = (0..n).map(|i| format!("k{i}:[0-9]+")).collect();
        let p = format!("(?&[ ]*,[ ]*|{})", members.join("|"));
        let nfa = parse_nfa(&p, None, true)
            .expect("in the subset")
            .expect("small");
        let mut det = super::super::determinize::Determinizer::new(nfa, usize::MAX, usize::MAX);
        let mut s = det.start;
        for &b in b"k0:12" {
            det.explore(s as usize).expect("no limit");
            s = det.trans[s as usize * det.stride + det.classes[b as usize] as usize];
            assert_ne!(s, 0, "k0:12 is live");
        }
        det.key(s).len()
    };
    let (few, many) = (key_after(3), key_after(60));
    assert_eq!(
        few, many,
        "threads after the first member: {few} with 3 members, {many} with 60"
    );
    same_language_as("(?&[ ]*,[ ]*|k0:[0-9]+|k1:[0-9]+|k2:[0-9]+|k3:x)", true);
}

#[test]
fn raw_byte_groups_compile_to_regex_syntax_bytes() {
    // The pushdown engine's call markers: bytes no UTF-8 text holds.
    let config = DfaConfig {
        lazy_states: None,
        ..DfaConfig::default()
    };
    for p in [
        r"a(?-u:\xF8\x00\x01)b",
        r"\[(?:(?-u:\xF8\x00\x02)(?:,(?-u:\xF8\x00\x02))*)?\]",
        r"(?&,|x|(?-u:\xF5)|y(?-u:\xF6))",
        r"(?:(?-u:\xF5)|(?-u:\xF6)){1,3}z",
    ] {
        let nfa = parse_nfa_with(p, None, true, true, false)
            .unwrap_or_else(|| panic!("{p:?} is in the subset"))
            .expect("no size limit");
        let ours = ByteDfa::from_nfa_whole(nfa, p.len(), &config).expect("DFA");
        let plain = crate::dfa::ordered::expand(p, usize::MAX).expect("no limit");
        let hir = regex_syntax::ParserBuilder::new()
            .utf8(false)
            .build()
            .parse(&plain)
            .expect("regex-syntax reads it");
        let reference = ByteDfa::from_hir(&hir, p.len(), &config).expect("reference DFA");
        assert_eq!(
            first_difference(&ours, &reference),
            None,
            "pattern {p:?}: a text in one language only"
        );
    }
    // Only where allowed, and only whole byte escapes.
    assert!(parse_nfa(r"(?-u:\xF5)", None, true).is_none());
    for p in [
        r"(?-u:\xF)",
        r"(?-u:)",
        r"(?-u:a)",
        r"(?-u:\xF5",
        r"(?-u:\x{F5})",
    ] {
        assert!(
            parse_nfa_with(p, None, true, true, false).is_none(),
            "{p:?}"
        );
    }
}

#[test]
fn outside_the_subset_is_none() {
    for p in ["(a)", ".", r"\d", "[a"] {
        assert!(parse_nfa(p, None, false).is_none(), "{p:?}");
    }
}

#[test]
fn the_size_limit_is_an_error() {
    let p = "(?:abcdefgh){1000}";
    assert!(matches!(parse_nfa(p, Some(1000), false), Some(Err(_))));
}

/// Whether compiling `p` reuses a group's node for a later group of the
/// same text.
fn shares_groups(p: &str) -> bool {
    let mut tree = Tree {
        ordered: true,
        ..Tree::default()
    };
    parse_into(p, &mut tree).expect("in the subset");
    tree.shared.contains(&true)
}

#[test]
fn groups_of_equal_text_compile_once_to_the_same_language() {
    // 50 bytes and more, so shared.
    let g = r#"(?:"(?:[^"\\\x00-\x1F]|\\["\\bfnrt])*"|-?(?:0|[1-9][0-9]{0,3})|null)"#;
    assert!(g.len() >= SHARED_GROUP_MIN, "{g}");
    let dead = r"[^\x00-\x{10FFFF}]";
    for p in [
        format!("{g}{g}"),
        format!("{g},{g}x|{g}"),
        format!("(?:{g}|ab){{2,4}}{g}"),
        format!("\\[(?:{g}(?:,{g})*)?\\]"),
        format!("(?:(?:(?:{g})))x{g}"),
        format!("(?:{g}{dead}|y){g}"),
        format!("{g}{dead}|{g}z"),
        format!("(?&,|a{g}|b{g}|{g})"),
        format!("(?*,|{g})z{g}"),
    ] {
        assert!(shares_groups(&p), "{p}");
        same_language_as(&p, true);
    }
    // Shorter groups are read each time.
    assert!(!shares_groups("(?:ab|cd)(?:ab|cd)"));
    // Shared at any depth, up to where the nesting limit would refuse
    // the group read again.
    let nest = |d: usize, x: &str| format!("{}{x}{}", "(?:".repeat(d), ")".repeat(d));
    assert!(shares_groups(&format!("{}{g}", nest(5, g))));
    assert!(shares_groups(&format!("{g}{}", nest(5, g))));
    // g nests 2 levels: at depth 198 it still fits the 200 allowed, as
    // when read again; one deeper, the pattern is refused as it was.
    let max = super::super::parse::MAX_DEPTH as usize;
    assert!(shares_groups(&format!("{g}{}", nest(max - 2, g))));
    assert!(parse_nfa(&format!("{g}{}", nest(max - 1, g)), None, true).is_none());
    assert!(parse_nfa(&nest(max - 1, g), None, true).is_none());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn repeated_long_groups_compile_to_the_same_language(
        g in crate::dfa::parse::tests::pattern(),
        h in crate::dfa::parse::tests::pattern(),
        shape in 0..5usize,
    ) {
        // Padded to the shared length, so every use after the first is
        // a copy.
        let g = format!("(?:{g}|{})", "q".repeat(SHARED_GROUP_MIN));
        let p = match shape {
            0 => format!("{g}{h}{g}"),
            1 => format!("(?:{g}|{h}){{1,3}}{g}"),
            2 => format!("(?:{h}{g})*{g}?"),
            3 => format!("{g}|x{g}y|{h}"),
            _ => format!("(?&,|{g}|{h}{g})"),
        };
        prop_assert!(shares_groups(&p), "{:?}", p);
        same_language_as(&p, true);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]
    #[test]
    fn random_texts_compile_to_the_same_language(
        p in r#"[-a-c()|?*+{}\[\]^\\,0-9:x"é\x00 ]{0,20}"#
    ) {
        same_language(&p);
    }

    #[test]
    fn ordered_members_of_random_patterns_compile_to_the_same_language(
        items in prop::collection::vec("[a-c]{1,3}|[a-c][?*]|(?:a|bc)[+?]|[ab][0-9]", 1..5),
        sep in "(,|;|[ ]?,)",
        nest in any::<bool>(),
    ) {
        let mut items: Vec<String> = items.iter().map(|p| format!("(?:{p})")).collect();
        if nest && items.len() > 1 {
            let inner: Vec<&str> = items[..2].iter().map(String::as_str).collect();
            let inner = crate::dfa::ordered::write(":", &inner);
            items[0] = format!("x{inner}");
        }
        let refs: Vec<&str> = items.iter().map(String::as_str).collect();
        let p = crate::dfa::ordered::write(&sep, &refs);
        prop_assert!(parse_nfa(&p, None, true).is_some(), "{:?}", p);
        same_language_as(&p, true);
    }

    #[test]
    fn lists_of_random_patterns_compile_to_the_same_language(
        item in "[a-c]{1,3}|[a-c][?*]|(?:a|bc)[+?]|[ab][0-9]",
        sep in "(,|;|[ ]?,|)",
        inner in any::<bool>(),
        optional in any::<bool>(),
    ) {
        let mut item = format!("(?:{item})");
        if inner {
            // A list inside the item, and members around it.
            let nested = crate::dfa::ordered::write_list(":", &item);
            item = crate::dfa::ordered::write(";", &["x", &format!("\\[{nested}\\]"), "y"]);
        }
        let list = crate::dfa::ordered::write_list(&sep, &item);
        let p = if optional { format!("(?:{list})?z") } else { list };
        prop_assert!(parse_nfa(&p, None, true).is_some(), "{:?}", p);
        same_language_as(&p, true);
    }

    #[test]
    fn well_formed_patterns_compile_to_the_same_language(
        p in crate::dfa::parse::tests::pattern()
    ) {
        prop_assert!(parse_nfa(&p, None, false).is_some(), "{:?}", p);
        same_language(&p);
    }
}
