//! Parser and lowering tests: every accepted text checked through the
//! automaton built from the lowered `Hir`.

use super::*;
use crate::dfa::{ByteDfa, DfaConfig};

fn parse(text: &str) -> Result<Gbnf, GbnfError> {
    Gbnf::parse("t", text)
}

fn dfa_with(text: &str, opts: &GbnfOptions) -> ByteDfa {
    let g = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    let hir = lower(&g, opts).unwrap_or_else(|e| panic!("{text}: {e}"));
    ByteDfa::from_hir(&hir, text.len(), &DfaConfig::default()).unwrap()
}

fn dfa(text: &str) -> ByteDfa {
    dfa_with(text, &GbnfOptions::default())
}

fn syntax_at(text: &str) -> (usize, usize, String) {
    match parse(text) {
        Err(GbnfError::Syntax {
            line,
            column,
            message,
        }) => (line, column, message),
        other => panic!("{text:?}: expected a syntax error, got {other:?}"),
    }
}

#[test]
fn rules_alternation_and_groups() {
    let d = dfa("root ::= \"a\" (\"b\" | \"c\")* | [0-9]+\n");
    for ok in ["a", "abcb", "7", "123"] {
        assert!(d.matches(ok.as_bytes()), "{ok}");
    }
    for bad in ["", "b", "a1", "12a"] {
        assert!(!d.matches(bad.as_bytes()), "{bad}");
    }
}

#[test]
fn continuation_lines_follow_llama_cpp() {
    // After `|` and `::=`, and anywhere inside parentheses, a newline continues the rule.
    let d = dfa("root ::=\n  \"a\" |\n  \"b\" (\n \"c\"\n # comment\n | \"d\" )\nx ::= \"q\"\n");
    for ok in ["a", "bc", "bd"] {
        assert!(d.matches(ok.as_bytes()), "{ok}");
    }
    // A `|` at the start of a line does not continue the rule before it:
    // it is where a rule name is expected.
    let (line, col, msg) = syntax_at("root ::= \"a\"\n| \"b\"\n");
    assert_eq!((line, col), (2, 1), "{msg}");
    assert!(msg.contains("rule name"), "{msg}");
}

#[test]
fn escapes_and_unicode() {
    let d = dfa(r#"root ::= "\n\t\r\\\"\[\]" "\x41\u00e9\U0001F600" [\x30-\x39]"#);
    assert!(d.matches("\n\t\r\\\"[]Aé😀5".as_bytes()));
    assert!(!d.matches("\n\t\r\\\"[]Aé😀a".as_bytes()));
    let (_, col, msg) = syntax_at(r#"root ::= "a\q""#);
    assert_eq!(col, 12, "{msg}");
    assert!(msg.contains("unknown escape"), "{msg}");
    let (_, _, msg) = syntax_at(r#"root ::= "\x4""#);
    assert!(msg.contains("2 hex digits"), "{msg}");
    let (_, _, msg) = syntax_at(r#"root ::= "\uD800""#);
    assert!(msg.contains("not a Unicode scalar value"), "{msg}");
}

#[test]
fn classes_dot_and_negation() {
    let d = dfa("root ::= [^a-c\\]] . [a-]");
    assert!(d.matches("x中a".as_bytes()));
    assert!(d.matches("😀😀-".as_bytes()));
    assert!(!d.matches("b中a".as_bytes()));
    assert!(!d.matches("]中a".as_bytes()));
    // `.` is one code point, never an invalid UTF-8 byte.
    assert!(!d.matches(b"x\xffa"));
    assert!(d.matches("xéa".as_bytes()));
    // `[]` matches nothing: a branch through it is dropped.
    let d = dfa("root ::= [] | \"z\"");
    assert!(d.matches(b"z") && !d.matches(b""));
    let (_, _, msg) = syntax_at("root ::= [z-a]");
    assert!(msg.contains("end is before the start"), "{msg}");
    let (l, c, msg) = syntax_at("root ::= \"ab\"\n\nroot2 ::= [abc");
    assert_eq!((l, c), (3, 11), "{msg}");
    assert!(msg.contains("unterminated character class"), "{msg}");
}

#[test]
fn repetitions() {
    let d = dfa("root ::= \"a\"{2} \"b\"{1,} \"c\"{0,2} \"d\"? \"e\"{ 1 , 3 }");
    assert!(d.matches(b"aabe"));
    assert!(d.matches(b"aabbbccdeee"));
    assert!(!d.matches(b"abe"));
    assert!(!d.matches(b"aabccce"));
    assert!(!d.matches(b"aabeeee"));
    let (_, col, msg) = syntax_at("root ::= \"a\"{2001}");
    assert_eq!(col, 13, "{msg}");
    assert!(msg.contains("2000"), "{msg}");
    assert!(syntax_at("root ::= \"a\"{3,2}")
        .2
        .contains("below the minimum"));
    assert!(syntax_at("root ::= *").2.contains("no item before it"));
    assert!(syntax_at("root ::= \"a\"{x}")
        .2
        .contains("expecting a number"));
    assert!(syntax_at("root ::= \"a\"{1;2}")
        .2
        .contains("expecting `,` or `}`"));
}

#[test]
fn grammar_level_errors_name_the_place() {
    assert_eq!(parse("item ::= \"a\"\n"), Err(GbnfError::NoRoot));
    assert_eq!(
        parse("root ::= item\n\nother ::= \"a\" missing\n"),
        Err(GbnfError::UndefinedRule {
            name: "item".into(),
            line: 1,
            column: 10
        })
    );
    assert!(matches!(
        parse("root ::= \"a\"\nroot ::= \"b\"\n"),
        Err(GbnfError::DuplicateRule {
            line: 2,
            first_line: 1,
            ..
        })
    ));
    let (line, col, msg) = syntax_at("root ::= \"a\"\nnext = \"b\"\n");
    assert_eq!((line, col), (2, 6), "{msg}");
    assert!(msg.contains("::="), "{msg}");
    let (line, col, msg) = syntax_at("root ::= (\"a\" \"b\"\n");
    assert_eq!((line, col), (2, 1), "{msg}");
    assert!(msg.contains("`)`"), "{msg}");
    let (_, _, msg) = syntax_at("root ::= \"a\" @");
    assert!(msg.contains("newline"), "{msg}");
    let (line, col, msg) = syntax_at("root ::= \"abc");
    assert_eq!((line, col), (1, 10), "{msg}");
    let deep = format!("root ::= {}\"a\"{}", "(".repeat(300), ")".repeat(300));
    assert!(syntax_at(&deep).2.contains("nested deeper"));
}

#[test]
fn immediate_left_recursion_is_rewritten_exactly() {
    let d = dfa("root ::= root \"+\" num | num\nnum ::= [0-9]");
    for ok in ["1", "1+2", "1+2+3+4+5+6+7+8+9"] {
        assert!(d.matches(ok.as_bytes()), "{ok}");
    }
    assert!(!d.matches(b"1+") && !d.matches(b"+1"));
    // Through a group at the left edge.
    let d = dfa("root ::= (root \",\" | \"[\") \"x\"");
    assert!(d.matches(b"[x,x,x,x,x,x,x"));
}

#[test]
fn right_recursion_is_exact() {
    let d = dfa("root ::= item (\",\" root)?\nitem ::= \"a\"");
    let long = vec!["a"; 40].join(",");
    assert!(d.matches(long.as_bytes()));
    assert!(!d.matches(b"a,"));
}

#[test]
fn other_left_recursion_is_refused_naming_the_rule() {
    let e = lower(
        &parse("root ::= a\na ::= b \"x\" | \"y\"\nb ::= a \"z\"").unwrap(),
        &GbnfOptions::default(),
    )
    .unwrap_err();
    assert!(
        matches!(&e, GbnfError::LeftRecursion { rule, line: 2, .. } if rule == "a"),
        "{e}"
    );
    // Through a nullable prefix.
    let e = lower(
        &parse("root ::= \"w\"? root \"x\" | \"y\"").unwrap(),
        &GbnfOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(e, GbnfError::LeftRecursion { .. }), "{e}");
}

#[test]
fn general_recursion_is_unrolled_to_max_depth() {
    let g = "root ::= \"(\" root \")\" | \"x\"";
    let nest = |n: usize| format!("{}x{}", "(".repeat(n), ")".repeat(n));
    let d = dfa(g);
    // root is entered max_depth + 1 = 4 times: 3 levels of parentheses.
    assert!(d.matches(nest(3).as_bytes()));
    assert!(
        !d.matches(nest(4).as_bytes()),
        "beyond the depth: a sound subset"
    );
    let d = dfa_with(
        g,
        &GbnfOptions {
            max_depth: 6,
            ..Default::default()
        },
    );
    assert!(d.matches(nest(6).as_bytes()) && !d.matches(nest(7).as_bytes()));
    // Never anything outside the grammar.
    assert!(!d.matches(b"(x") && !d.matches(b"()"));
}

#[test]
fn limits_are_named() {
    // Each rule doubles the one below it: 2^30 copies.
    let mut text = String::from("root ::= r0\n");
    for i in 0..30 {
        text.push_str(&format!("r{i} ::= r{} r{}\n", i + 1, i + 1));
    }
    text.push_str("r30 ::= \"a\"\n");
    let e = lower(&parse(&text).unwrap(), &GbnfOptions::default()).unwrap_err();
    assert!(matches!(e, GbnfError::TooBig { .. }), "{e}");
    assert!(e.to_string().contains("max_nodes"), "{e}");
    let e = lower(
        &parse("root ::= \"(\" root \")\"").unwrap(),
        &GbnfOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(e, GbnfError::EmptyLanguage { .. }), "{e}");
}
