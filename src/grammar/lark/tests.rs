//! Unit tests of the Lark front end: parsing, errors with positions, the
//! greedy-lexer check, and languages (through the GBNF lowering, one DFA).

use super::*;
use crate::dfa::{ByteDfa, DfaConfig};

/// The language of a regular Lark grammar, as a whole-text matcher.
fn dfa(text: &str) -> ByteDfa {
    let g = Lark::parse("t", text).unwrap_or_else(|e| panic!("{text}: {e}"));
    let hir = crate::grammar::gbnf::lower(&g.gbnf, &Default::default()).expect("lowers");
    ByteDfa::from_hir(&hir, 0, &DfaConfig::default()).expect("dfa")
}

fn refused(text: &str) -> LarkError {
    match Lark::parse("t", text) {
        Ok(_) => panic!("{text:?} compiled"),
        Err(e) => e,
    }
}

fn at(e: &LarkError) -> (usize, usize) {
    let s = e.to_string();
    let rest = s.strip_prefix("line ").expect("a position");
    let (l, rest) = rest.split_once(", column ").expect("a column");
    let c = rest.split(':').next().expect("column");
    (l.parse().expect("line"), c.parse().expect("column"))
}

#[test]
fn literals_sequences_and_ignore_between_lexemes() {
    let d = dfa("start: \"a\" \"b\"\n%ignore \" \"\n");
    for ok in ["ab", "a b", "a  b"] {
        assert!(d.matches(ok.as_bytes()), "{ok:?}");
    }
    for bad in [" ab", "ab ", "a b ", "", "a"] {
        assert!(!d.matches(bad.as_bytes()), "{bad:?}");
    }
}

#[test]
fn terminals_admit_no_ignored_text() {
    let d = dfa("start: AB\nAB: \"a\" \"b\"\n%ignore \" \"\n");
    assert!(d.matches(b"ab"));
    assert!(!d.matches(b"a b"));
}

#[test]
fn flags_ranges_and_repetitions() {
    let d = dfa("start: \"a\"i \"b\"");
    assert!(d.matches(b"Ab") && d.matches(b"ab") && !d.matches(b"aB"));
    let d = dfa("start: (\"a\" | \"b\")~2..3");
    assert!(d.matches(b"ab") && d.matches(b"aba") && !d.matches(b"a") && !d.matches(b"abab"));
    let d = dfa("start: \"a\"{2,}");
    assert!(d.matches(b"aa") && d.matches(b"aaaa") && !d.matches(b"a"));
    let d = dfa("start: A\nA: \"a\"..\"c\"");
    assert!(d.matches(b"b") && !d.matches(b"d"));
    let d = dfa("start: /ab/i [\"c\"]");
    assert!(d.matches(b"aB") && d.matches(b"ABc") && !d.matches(b"abcc"));
}

#[test]
fn and_not_on_terminals() {
    let d = dfa("start: A\nA: /[a-z]+/ & ~/(?s:.*)ab(?s:.*)/\n");
    assert!(d.matches(b"xyz") && !d.matches(b"xaby") && !d.matches(b""));
}

#[test]
fn empty_lexemes_count_as_lexemes() {
    // llguidance: `/a*/` matches the empty text before `b`, and ignored
    // text may follow it.
    let d = dfa("%ignore \" \"\nstart: /a*/ \"b\"\n");
    for ok in ["b", "ab", " b", "a b"] {
        assert!(d.matches(ok.as_bytes()), "{ok:?}");
    }
}

#[test]
fn common_imports_and_tree_marks() {
    let d = dfa("?start: sum\n!sum: NUMBER (\"+\" NUMBER)* -> plus\n%import common.NUMBER\n%import common.WS\n%ignore WS\n");
    assert!(d.matches(b"1 + 2.5+3") && !d.matches(b"1 +") && !d.matches(b" 1"));
}

#[test]
fn greedy_conflicts_are_refused() {
    // The `a+` lexeme would take every `a`.
    let e = refused("start: /a+/ \"ab\"");
    assert!(matches!(e, LarkError::Lexer { .. }), "{e}");
    assert_eq!(at(&e), (1, 8));
    // An identifier followed directly by a keyword it could run into.
    let e = refused("start: ID \"FROM\"\nID: /[A-Za-z]+/\n%ignore \" \"\n");
    assert!(e.to_string().contains("\"FROM\""), "{e}");
    // A lexeme that %ignore also matches.
    let e = refused("%ignore / +/\nstart: \"a\" (\" \" \"d\" | \"c\")\n");
    assert!(e.to_string().contains("%ignore also matches"), "{e}");
}

#[test]
fn separable_lexemes_compile() {
    // A lowercase identifier cannot run into an uppercase keyword.
    let d = dfa("start: /[a-z]+/ \"FROM\"\n%ignore \" \"\n");
    assert!(d.matches(b"aFROM") && d.matches(b"a FROM"));
}

#[test]
fn refusals_name_the_construct_and_position() {
    for (text, what, pos) in [
        (
            "start: A\nA: <|end|>",
            "special token `<|end|>` inside a terminal",
            (2, 4),
        ),
        (
            "start: A\nA: \"a\" <[5]>",
            "special token `<[5]>` inside a terminal",
            (2, 8),
        ),
        ("start: \"a\" <[200-100]>", "invalid token range", (1, 12)),
        ("start: <[,]>", "empty token range", (1, 8)),
        ("start: <[1-2-3]>", "invalid token range", (1, 8)),
        ("start: <[^*]>", "negated wildcard", (1, 8)),
        ("start: <[*,100]>", "wildcard token range", (1, 8)),
        ("start: @sub", "grammar reference", (1, 8)),
        ("start: x\nx[stop=\"\\n\"]: /.*/", "[stop=...]", (2, 3)),
        (
            "start: x\nx[max_tokens=5]: /a+/",
            "[max_tokens=...]",
            (2, 3),
        ),
        (
            "start: x::1\nx::_: \"a\"",
            "does not use the parameter",
            (2, 1),
        ),
        (
            "start: \"<\" x\nx: %lark {\nstart: \"a\" \"b\"\n}\n%ignore \" \"\n",
            "%lark { ... } with a %ignore other than",
            (2, 4),
        ),
        ("start: A\nA: ~\"a\"", "`~` outside", (2, 4)),
        ("start: a & b\na: \"a\"\nb: \"b\"", "`&` in a rule", (1, 10)),
        (
            "%llguidance {\"allow_initial_skip\": true}\nstart: \"a\"",
            "allow_initial_skip",
            (1, 1),
        ),
        ("start: A.2\n", "", (1, 9)),
    ] {
        let e = refused(text);
        assert!(e.to_string().contains(what), "{text:?}: {e}");
        assert_eq!(at(&e), pos, "{text:?}: {e}");
    }
}

#[test]
fn syntax_errors_carry_positions() {
    for (text, pos) in [
        ("start: \"a", (1, 8)),
        ("start: (\"a\"", (1, 12)),
        ("start \"a\"", (1, 7)),
        ("start: a\n", (1, 8)),
        ("x: \"a\"", (1, 1)),
        ("start: A\nA: B\nB: A", (3, 4)),
        ("start: /(/", (1, 8)),
        ("start: \"a\"\nstart: \"b\"", (2, 1)),
    ] {
        let e = refused(text);
        assert_eq!(at(&e), pos, "{text:?}: {e}");
    }
}

#[test]
fn json_blocks_follow_the_schema() {
    let d = dfa("start: \"call \" obj\nobj: %json {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}, \"required\": [\"a\"], \"additionalProperties\": false}\n");
    assert!(d.matches(b"call {\"a\":1}"));
    assert!(!d.matches(b"call {\"b\":1}") && !d.matches(b"call {}"));
}

#[test]
fn substring_regex() {
    let d = dfa("start: A\nA: %regex {\"substring_chunks\": [\"abc\", \"de\", \"fg\"]}\n");
    for ok in ["", "abc", "de", "abcde", "defg", "abcdefg"] {
        assert!(d.matches(ok.as_bytes()), "{ok:?}");
    }
    for bad in ["ab", "cde", "abcfg"] {
        assert!(!d.matches(bad.as_bytes()), "{bad:?}");
    }
}

#[test]
fn deep_chains_are_limits_not_crashes() {
    let mut t = String::from("start: t0\n");
    for i in 0..2000 {
        t.push_str(&format!("t{i}: \"x\" t{}\n", i + 1));
    }
    t.push_str("t2000: \"y\"\n");
    assert!(matches!(refused(&t), LarkError::Limit { .. }));
    let mut t = String::from("start: T0\n");
    for i in 0..2000 {
        t.push_str(&format!("T{i}: \"x\" T{}\n", i + 1));
    }
    t.push_str("T2000: \"y\"\n");
    assert!(matches!(refused(&t), LarkError::Limit { .. }));
}

#[test]
fn garbage_is_an_error_with_a_position() {
    for text in [
        "",
        "%",
        "start: (",
        "start: \"\\q\"",
        "start: /a/ ]",
        "\u{0}",
        "start: ~ 3",
        "start: \"a\"~5..2",
        "%import foo.BAR\nstart: BAR",
        "%json",
    ] {
        let e = refused(text);
        if !matches!(e, LarkError::NoStart) {
            at(&e);
        }
    }
}

#[test]
fn trailing_ignored_text_where_a_lexeme_is_still_predicted() {
    // llguidance lets ignored text in after the last lexeme when the
    // parser still predicts a lexeme there, and ends the text after it.
    let d = dfa("start: \"x\" \"y\"?\n%ignore \" \"\n");
    for ok in ["x", "x ", "x  ", "x y", "xy"] {
        assert!(d.matches(ok.as_bytes()), "{ok:?}");
    }
    for bad in ["x y ", " x", " ", ""] {
        assert!(!d.matches(bad.as_bytes()), "{bad:?}");
    }
    let d = dfa("start: item*\nitem: \"a\" | \"b\" \"c\"\n%ignore \" \"\n");
    for ok in ["", "a ", "a bc ", "bc  ", "b c a "] {
        assert!(d.matches(ok.as_bytes()), "{ok:?}");
    }
    for bad in [" ", "b ", " a"] {
        assert!(!d.matches(bad.as_bytes()), "{bad:?}");
    }
    let d = dfa("start: \"x\"?\n%ignore \" \"\n");
    for bad in [" ", "x "] {
        assert!(!d.matches(bad.as_bytes()), "{bad:?}");
    }
    let d = dfa("start: (\"a\" \"b\"){2}\n%ignore \" \"\n");
    assert!(d.matches(b"abab") && !d.matches(b"ab ") && !d.matches(b"abab "));
    let d = dfa("start: (\"a\" \"b\"){1,2}\n%ignore \" \"\n");
    assert!(d.matches(b"ab ") && !d.matches(b"abab ") && !d.matches(b"a "));
}

#[test]
fn lazy_lexemes_end_at_the_first_match() {
    // `[lazy]`: the shortest word.
    let d = dfa("start: num \"x\"\nnum[lazy]: /[0-9]+/\n");
    assert!(d.matches(b"1x") && !d.matches(b"12x"));
    let d = dfa("start: a\na[lazy]: /.*/\n");
    assert!(d.matches(b"") && !d.matches(b"a"));
    // A body that ends with its delimiter: up to the first `<end>`.
    let d = dfa("start: t \"!\"\nt[lazy]: /(?s:.*)<end>/\n");
    assert!(d.matches(b"foo<end>!") && d.matches(b"<end>!"));
    assert!(!d.matches(b"foo<end>bar<end>!"));
}

#[test]
fn a_suffix_stays_in_the_text_and_ends_the_lexeme() {
    let d = dfa("start: t \"!\"\nt[suffix=\"</think>\"]: /(?s:.*)/\n");
    assert!(d.matches(b"why</think>!") && d.matches(b"</think>!"));
    assert!(!d.matches(b"a</think>b</think>!") && !d.matches(b"why!"));
    // A regex or a terminal name as the suffix; capture options allowed.
    let d = dfa("start: t\nt[capture, suffix=/\\n\\n/, stop_capture=\"s\"]: /[a-z\\n]*/\n");
    assert!(d.matches(b"ab\n\n") && d.matches(b"a\nb\n\n") && !d.matches(b"a\n\nb\n\n"));
    let d = dfa("start: t\nt[suffix=END]: /[a-z]*/\nEND: \";\"\n");
    assert!(d.matches(b"abc;") && !d.matches(b"abc"));
}

#[test]
fn lazy_lexemes_that_would_cut_another_are_refused() {
    // `TEXT` may go on where the lazy header matches: llguidance cuts it.
    let e = refused("start: hd \"=x\" | TEXT\nhd[lazy]: TEXT \"<f\"\nTEXT: /(.|\\n)*/\n");
    assert!(e.to_string().contains("lazy lexeme"), "{e}");
    // `stop` hides its text by backtracking; max_tokens cuts by tokens.
    for (text, what) in [
        ("start: t\nt[stop=\"x\"]: /a*/\n", "[stop=...]"),
        ("start: t\nt[stop=/x/]: /a*/\n", "backtracking"),
        ("start: t\nt[max_tokens=3]: /a*/\n", "[max_tokens=...]"),
        ("start: t\nt[max_tokens=3, lazy]: /a*/\n", "tokenized"),
    ] {
        let e = refused(text);
        assert!(e.to_string().contains(what), "{text}: {e}");
    }
    let e = refused("start: t\nt[lazy, suffix=\"x\"]: /a*/\n");
    assert!(e.to_string().contains("multiple stop/suffix"), "{e}");
    let e = refused("start: t\nt[stop_capture=\"s\"]: /a*/\n");
    assert!(e.to_string().contains("stop_capture"), "{e}");
    // As llguidance: `lazy` after `stop=""` makes it a suffix too.
    let e = refused("start: t\nt[stop=\"\", lazy]: /a*/\n");
    assert!(e.to_string().contains("cannot be used together"), "{e}");
}

#[test]
fn empty_stops_and_zero_max_tokens() {
    // `stop=""` / `suffix=""`: a greedy lexeme of the body (llguidance
    // lets EOS end it too, and hides that EOS; here EOS ends the output).
    for g in [
        "start: t \"b\"\nt[stop=\"\"]: /a+/\n",
        "start: t \"b\"\nt[suffix=\"\", capture]: /a+/\n",
    ] {
        let d = dfa(g);
        assert!(d.matches(b"ab") && d.matches(b"aaab"), "{g}");
        assert!(
            !d.matches(b"a") && !d.matches(b"b") && !d.matches(b"aba"),
            "{g}"
        );
    }
    // Greedy, so a following lexeme it could run into is a conflict.
    let e = refused("start: t \"ab\"\nt[stop=\"\"]: /a+/\n");
    assert!(matches!(e, LarkError::Lexer { .. }), "{e}");
    // `lazy` after `suffix=""` replaces it (as llguidance): one `a`.
    let d = dfa("start: t\nt[suffix=\"\", lazy]: /a+/\n");
    assert!(d.matches(b"a") && !d.matches(b"aa"));
    // `max_tokens=0`: no token, the empty text (the body is not read).
    let d = dfa("start: t \"b\"\nt[max_tokens=0]: /a+/\n");
    assert!(d.matches(b"b") && !d.matches(b"ab"));
    let d = dfa("start: t \"b\"\nt[max_tokens=0]: undefined\n");
    assert!(d.matches(b"b"));
}

#[test]
fn nested_grammars_with_the_same_ignore_read_in_place() {
    // The same %ignore (as written, names expanded): one lexeme class, as
    // if the block's rules were written in place, its names its own.
    for inner in ["%ignore \" \"", "%ignore SP\nSP: \" \""] {
        let g = format!(
            "start: \"a\" x \"b\"\nx: %lark {{\nstart: \"c\" y\ny: \"d\"\n{inner}\n}}\ny: \"e\"\n%ignore \" \"\n"
        );
        let d = dfa(&g);
        for ok in ["acdb", "a cdb", "ac d b", "a c d b"] {
            assert!(d.matches(ok.as_bytes()), "{g}: {ok:?}");
        }
        for bad in ["aceb", " acdb", "acdb ", "acd"] {
            assert!(!d.matches(bad.as_bytes()), "{g}: {bad:?}");
        }
    }
    // Neither has %ignore; blocks inside blocks.
    let d = dfa(
        "start: x x\nx: %lark {\nstart: y | %lark {\n  start: \"z\"\n  }\ny: \"a\" | \"b\"\n}\n",
    );
    for ok in ["ab", "az", "zz"] {
        assert!(d.matches(ok.as_bytes()), "{ok:?}");
    }
    assert!(!d.matches(b"a b") && !d.matches(b"a"));
    // The same language written otherwise is taken as another %ignore
    // (llguidance merges some of these; constrain refuses, the safe side).
    let e = refused("start: \"a\" x\nx: %lark {\nstart: \"c\"\n%ignore / /\n}\n%ignore \" \"\n");
    assert!(e.to_string().contains("%ignore other than"), "{e}");
}

#[test]
fn nested_grammars_lexed_apart_keep_their_ignore_inside() {
    // The block's %ignore between its lexemes only; none at its edges
    // (llguidance lets some after the block when it could go on: constrain
    // accepts less there).
    let g =
        "start: x \",\" x\nx: %lark {\nstart: NUM (\"+\" NUM)*\nNUM: /[0-9]+/\n%ignore \" \"\n}\n";
    let d = dfa(g);
    for ok in ["1,2", "1 + 2,3", "1+2,3 +4"] {
        assert!(d.matches(ok.as_bytes()), "{ok:?}");
    }
    for bad in ["1, 2", " 1,2", "1,2 ", "1 ,2", "1,"] {
        assert!(!d.matches(bad.as_bytes()), "{bad:?}");
    }
    // A rule with `temperature` keeps blocks apart in llguidance: then an
    // enclosing %ignore is refused.
    let e = refused("start: \"x\" y\ny[temperature=0.5]: %lark {\nstart: \"a\" \"b\"\n%ignore \" \"\n}\n%ignore \" \"\n");
    assert!(e.to_string().contains("%lark"), "{e}");
    assert_eq!(at(&e), (2, 21));
    // A block's lexeme may not begin where another class's does.
    let e = refused("start: \"a\" | x\nx: %lark {\nstart: \"ab\" \"c\"\n%ignore \" \"\n}\n");
    assert!(e.to_string().contains("lexed apart"), "{e}");
}

#[test]
fn nested_grammar_errors_say_where() {
    for (text, what, pos) in [
        (
            "start: %lark { start: \"a\" }\n",
            "end of the line",
            (1, 27),
        ),
        ("start: %lark {\nx: \"a\"\n}\n", "no `start`", (1, 8)),
        (
            "start: %lark {\nstart: y\n}\ny: \"a\"\n",
            "undefined name `y`",
            (2, 8),
        ),
        ("start: %lark {\nstart: \"a\"\n", "unmatched", (1, 14)),
        (
            "start: A\nA: %lark {\nstart: \"a\"\n}\n",
            "inside a terminal",
            (2, 4),
        ),
    ] {
        let e = refused(text);
        assert!(e.to_string().contains(what), "{text:?}: {e}");
        assert_eq!(at(&e), pos, "{text:?}: {e}");
    }
}

#[test]
fn substring_words_cut_as_llguidance_does() {
    // llguidance's own example (`parser/src/substring.rs`).
    let w = terminals::words("The quick brown fox jumps over the lazy dog.");
    assert_eq!(w.concat(), "The quick brown fox jumps over the lazy dog.");
    assert_eq!(w[..4], ["The", " ", "quick", " "]);
    assert_eq!(w[w.len() - 2..], ["dog", "."]);
    assert_eq!(terminals::words("a  b.,c"), ["a", "  ", "b", ".,", "c"]);
    assert_eq!(terminals::words("빠른 갈색."), ["빠른", " ", "갈색", "."]);
    assert!(terminals::words("").is_empty());
    let d = dfa("start: A\nA: %regex {\"substring_words\": \"foo bar. baz\"}\n");
    for ok in ["", "foo", "bar.", ". baz", "foo bar. baz", " "] {
        assert!(d.matches(ok.as_bytes()), "{ok:?}");
    }
    for bad in ["fo", "oo", "foo baz", "baz ", "r."] {
        assert!(!d.matches(bad.as_bytes()), "{bad:?}");
    }
}

#[test]
fn parametric_rules_are_written_out_per_value() {
    // Permutations of three (llguidance's `docs/parametric.md`).
    let d = dfa("start: perm::0x0\nperm::_: \"\" %if is_ones([0:3])\n  | \"a\" perm::set_bit(0) %if bit_clear(0)\n  | \"b\" perm::set_bit(1) %if bit_clear(1)\n  | \"c\" perm::set_bit(2) %if bit_clear(2)\n");
    for ok in ["abc", "acb", "bac", "bca", "cab", "cba"] {
        assert!(d.matches(ok.as_bytes()), "{ok:?}");
    }
    for bad in ["", "ab", "aab", "abcc", "abca"] {
        assert!(!d.matches(bad.as_bytes()), "{bad:?}");
    }
    // Counters in bit ranges, saturating; `b*` then `a*`, fewer than 3 each.
    let d = dfa("start: aa::0\naa::_: \"b\" aa::incr(_) %if lt(_, 3)\n  | bb::_\nbb::_: \"a\" bb::incr(_) %if lt(_, 3)\n  | \"\"\n");
    for ok in ["", "bba", "bbb", "aaa", "ba"] {
        assert!(d.matches(ok.as_bytes()), "{ok:?}");
    }
    for bad in ["bbba", "aaaa", "ab"] {
        assert!(!d.matches(bad.as_bytes()), "{bad:?}");
    }
    // decr, and/or/not, bit counts, groups passing the parameter on.
    let d = dfa("start: x::3\nx::_: \"a\" x::decr(_) %if gt(_, 0) | \"\" %if eq(_, 0)\n");
    assert!(d.matches(b"aaa") && !d.matches(b"aa") && !d.matches(b"aaaa"));
    let d = dfa(
        "start: x::5 x::0x4\nx::_: \"a\" %if or(eq(_, 5), bit_set(3)) | \"b\" %if not(eq(_, 5))\n",
    );
    assert!(d.matches(b"ab") && !d.matches(b"aa") && !d.matches(b"ba"));
    let d = dfa("start: x::0\nx::_: (\"a\" | \"b\") x::incr([0:2]) %if lt([0:2], 2) | \".\"\n%ignore \" \"\n");
    assert!(d.matches(b"a b .") && d.matches(b".") && !d.matches(b"aba."));
    let d = dfa("start: p::0\np::_: \"\" %if bit_count_ge(_, 1)\n  | \"a\" p::set_bit(0) %if and(bit_clear(0), bit_count_lt(_, 2))\n  | \"b\" p::set_bit(1) %if and(bit_clear(1), bit_count_lt(_, 2))\n");
    assert!(d.matches(b"a") && d.matches(b"ba") && !d.matches(b"") && !d.matches(b"aa"));
    // clear_bit, bit_and, bit_or.
    let d = dfa("start: x::0xff\nx::_: \"a\" x::clear_bit(0) %if bit_set(0)\n  | \"b\" x::bit_and(0x0f) %if eq([4:8], 15)\n  | \"c\" x::bit_or(0x100) %if eq(_, 0x0e)\n  | \"\" %if bit_set(8)\n");
    assert!(d.matches(b"abc") && d.matches(b"bac") && !d.matches(b"ab") && !d.matches(b"abca"));
}

#[test]
fn parametric_rule_errors_say_where() {
    for (text, what, pos) in [
        (
            "start: x\nx::_: \"a\" %if eq(_, 0)\n",
            "no parameter is given",
            (1, 8),
        ),
        (
            "start: x::0\nx: \"a\"\n",
            "not parametric, but a parameter",
            (1, 8),
        ),
        (
            "start: x\nx: \"a\" %if eq(_, 0)\n",
            "body uses a parameter",
            (2, 1),
        ),
        (
            "start: x::0\nx::_[lazy]: /a/ %if eq(_, 0)\n",
            "are not allowed on it",
            (2, 1),
        ),
        (
            "start: A\nA: \"a\" %if eq(_, 0)\n",
            "%if in a terminal",
            (2, 8),
        ),
        (
            "start: x::0\nx::_: \"a\" %if true()\n",
            "end of the line",
            (2, 19),
        ),
        (
            "start: x::0\nx::_: \"a\" %if lt([3:2], 1)\n",
            "is empty",
            (2, 18),
        ),
        (
            "start: x::0\nx::_: \"a\" x::set_bit(64) %if true\n",
            "past 63",
            (2, 22),
        ),
        (
            "start: x::0\nx::_: \"a\" x::mul(2)\n",
            "unknown parameter expression",
            (2, 14),
        ),
        ("X::_: \"a\"\nstart: X\n", "cannot be parametric", (1, 2)),
    ] {
        let e = refused(text);
        assert!(e.to_string().contains(what), "{text:?}: {e}");
        assert_eq!(at(&e), pos, "{text:?}: {e}");
    }
    // Every value reached is a rule: a bound on how many.
    let e = refused("start: x::0\nx::_: \"a\" x::incr(_) %if lt(_, 100000) | \"b\"\n");
    assert!(matches!(e, LarkError::Limit { .. }), "{e}");
}

#[test]
fn special_tokens_are_lexemes_no_text_runs_into() {
    // Each distinct reference is one placeholder lexeme; text lexemes next
    // to it never conflict with it (no text holds its bytes).
    let g = Lark::parse("t", "start: /[a-z<|>]*/ <|end|> (<|end|> | <[7]>)* \"x\"\n").unwrap();
    assert!(g.has_special_tokens());
    assert_eq!(g.specials.len(), 2);
    assert!(!Lark::parse("t", "start: \"<|end|>\"\n")
        .unwrap()
        .has_special_tokens());
    // Without the vocabulary the language has no text with a token in it.
    assert!(!dfa("start: \"a\" | <|end|>\n").matches(b"<|end|>"));
}

/// llguidance's grammar list of (name, Lark text or JSON Schema) entries.
fn list(entries: &[(&str, serde_json::Value)]) -> String {
    let gs: Vec<serde_json::Value> = entries
        .iter()
        .map(|(n, g)| match g {
            serde_json::Value::String(t) => serde_json::json!({"name": n, "lark_grammar": t}),
            s => serde_json::json!({"name": n, "json_schema": s}),
        })
        .collect();
    serde_json::json!({ "grammars": gs }).to_string()
}

#[test]
fn grammar_references_use_the_named_grammar_where_written() {
    use serde_json::json;
    let text = list(&[
        (
            "main",
            json!("start: a \"=\" @num \";\" @obj a\na: \"a\"\n"),
        ),
        ("num", json!("start: a+\na: /[0-9]/\n")),
        ("obj", json!({"type": "integer"})),
    ]);
    let d = dfa(&text);
    for ok in ["a=12;5a", "a=0;-3a"] {
        assert!(d.matches(ok.as_bytes()), "{ok:?}");
    }
    for bad in ["a=;5a", "a=1;xa", "a=1;5", "a=a;5a"] {
        assert!(!d.matches(bad.as_bytes()), "{bad:?}");
    }
    // A JSON Schema first is the whole output; Source::lark's text and
    // Lark::parse_grammar_list read the same list.
    let d = dfa(&list(&[("main", json!({"type": "boolean"}))]));
    assert!(d.matches(b"true") && !d.matches(b"1"));
    // With the same %ignore the named grammar reads as if written in place.
    let text = list(&[
        ("main", json!("start: \"x\" @sub\n%ignore \" \"\n")),
        ("sub", json!("start: \"y\" \"z\"\n%ignore \" \"\n")),
    ]);
    assert!(dfa(&text).matches(b"x y z"));
    let text = list(&[
        ("main", json!("start: \"x\" @sub\n%ignore \" \"\n")),
        ("sub", json!("start: \"y\"\n")),
    ]);
    assert!(refused(&text)
        .to_string()
        .contains("`@sub` with a %ignore other than"));
}

#[test]
fn grammar_list_errors_say_what_and_where() {
    use serde_json::json;
    let main = |t: &str| {
        list(&[
            ("main", json!(t)),
            ("sub", json!("start: \"s\"\n")),
            ("j", json!({"type": "integer"})),
        ])
    };
    for (text, what, pos) in [
        (main("start: @nope"), "unknown grammar `@nope`", (1, 8)),
        (
            main("start: \"a\" @1"),
            "numeric grammar references",
            (1, 12),
        ),
        (
            main("start: A\nA: @sub"),
            "grammar reference `@sub` inside a terminal",
            (2, 4),
        ),
        (
            list(&[
                ("main", json!("start: @a")),
                ("a", json!("start: \"x\" @main")),
            ]),
            "grammar `@main` is used inside itself",
            (1, 12),
        ),
        (
            list(&[
                ("main", json!("start: @a")),
                ("a", json!("start: \"x\"\n  | @a")),
            ]),
            "grammar `@a` is used inside itself (through `@a`)",
            (2, 5),
        ),
        (
            list(&[("main", json!("start: @a")), ("a", json!("start: b"))]),
            "undefined name `b` (in grammar `a`)",
            (1, 8),
        ),
        (
            list(&[("main", json!("start: @a")), ("a", json!("\nstart: \"b"))]),
            "(in grammar `a`)",
            (2, 8),
        ),
        (
            list(&[("main", json!("start: @a")), ("a", json!("x: \"b\""))]),
            "grammar `@a` has no `start` rule",
            (1, 8),
        ),
        ("{\"grammars\": [}".into(), "not JSON", (1, 15)),
        ("{\"grammars\": []}".into(), "empty", (1, 1)),
        (
            "{\"grammars\": [{\"lark_grammar\": \"start: \\\"a\\\"\"}], \"max_tokens\": 5}".into(),
            "max_tokens",
            (1, 1),
        ),
        (
            "{\"grammars\": [{\"nodes\": []}]}".into(),
            "field `nodes` of grammars[0]",
            (1, 1),
        ),
        (
            "{\"grammars\": [{\"name\": \"a\"}]}".into(),
            "either `lark_grammar` or `json_schema`",
            (1, 1),
        ),
        (
            list(&[
                ("main", json!("start: @a")),
                ("a", json!("start: \"x\"")),
                ("a", json!({})),
            ]),
            "duplicate grammar name `a`",
            (1, 1),
        ),
    ] {
        let e = refused(&text);
        assert!(e.to_string().contains(what), "{text}: {e}");
        assert_eq!(at(&e), pos, "{text}: {e}");
    }
    // Plain Lark text has no list to refer to.
    let e = refused("start: @sub");
    assert!(e.to_string().contains("no grammar list"), "{e}");
}

#[test]
fn a_grammar_used_many_times_is_lowered_once_per_class() {
    // Each grammar uses the next twice: 2^24 uses, one lowering each.
    let mut entries: Vec<(String, serde_json::Value)> = (0..24)
        .map(|i| {
            (
                format!("g{i}"),
                serde_json::json!(format!("start: @g{} @g{}\n", i + 1, i + 1)),
            )
        })
        .collect();
    entries.push(("g24".into(), serde_json::json!("start: \"x\"\n")));
    let refs: Vec<(&str, serde_json::Value)> = entries
        .iter()
        .map(|(n, g)| (n.as_str(), g.clone()))
        .collect();
    let t = std::time::Instant::now();
    let g = Lark::parse("t", &list(&refs)).expect("parses");
    assert!(t.elapsed().as_secs() < 10);
    assert!(g.gbnf.rules.len() < 400, "{} rules", g.gbnf.rules.len());
}
