//! GBNF: the Earley recognizer checked by hand, the example grammars of
//! `grammars/*.gbnf`, and the compiled matcher against the recognizer on
//! random small grammars and texts (proptest; the `gbnf_compile` fuzz
//! target checks the same through `check_gbnf_case`).

use constrain::grammar::gbnf::{Gbnf, GbnfOptions};
use constrain::{Compiler, CompilerConfig, Source, TokenId, Vocabulary};
use constrain_testkit::check::{check_gbnf_case, random_gbnf, GbnfCase, GbnfOutcome, GBNF_POOL};
use constrain_testkit::earley::{sample, Earley};
use proptest::prelude::*;
use rand::{rngs::StdRng, SeedableRng};
use std::sync::Arc;

fn earley(text: &str) -> Earley {
    Earley::new(&Gbnf::parse("t", text).unwrap())
}

#[test]
fn recognizer_by_hand() {
    // Context-free, not regular: balanced parentheses, any depth.
    let e = earley("root ::= \"(\" root \")\" root | \"\"");
    for ok in ["", "()", "(())()", "((((((((((()))))))))))"] {
        assert!(e.accepts(ok.as_bytes()), "{ok}");
    }
    for bad in ["(", ")(", "(()"] {
        assert!(!e.accepts(bad.as_bytes()), "{bad}");
    }
    // Left recursion, nullable rules, counted repetition, classes, `.`.
    let e = earley("root ::= root \"+\" n | n\nn ::= e [0-9]{1,2} e\ne ::= \"\" | \" \"");
    assert!(e.accepts(b"1+22 + 3"));
    assert!(!e.accepts(b"1+333") && !e.accepts(b"+1"));
    let e = earley("root ::= [^a-c] . \"x\"{2,}");
    assert!(e.accepts("d中xx".as_bytes()) && e.accepts("zzxxxx".as_bytes()));
    assert!(!e.accepts("azxx".as_bytes()) && !e.accepts("dzx".as_bytes()));
    assert!(
        !e.accepts(b"d\xffxx"),
        "invalid UTF-8 is never in the language"
    );
}

/// A compiler over the 256 single bytes and one EOS.
fn byte_compiler() -> Compiler {
    let tokens = (0..=255u8).map(|b| (TokenId(b as u32), vec![b]));
    let vocab = Arc::new(Vocabulary::new(tokens, [TokenId(256)], 257).unwrap());
    Compiler::new(vocab, CompilerConfig::default())
}

fn matcher_accepts(c: &constrain::Compiled, text: &str) -> bool {
    let mut m = c.matcher();
    text.bytes().all(|b| m.accept_token(TokenId(b as u32))) && m.is_accepting()
}

fn example(name: &str) -> (Gbnf, Arc<constrain::Compiled>) {
    let path = constrain_testkit::assets::repo_root()
        .join("grammars")
        .join(format!("{name}.gbnf"));
    let g = Gbnf::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let compiled = byte_compiler()
        .compile(&Source::grammar_file(&path).unwrap())
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    (g, compiled)
}

/// Each example: the texts it must accept and reject (matcher and
/// recognizer agree), and 200 texts sampled from it accepted by the
/// recognizer, and by the matcher whenever their nesting is within depth.
fn check_example(name: &str, accept: &[&str], reject: &[&str]) {
    let (g, c) = example(name);
    let e = Earley::new(&g);
    for t in accept {
        assert!(e.accepts(t.as_bytes()), "{name}: recognizer rejects {t:?}");
        assert!(matcher_accepts(&c, t), "{name}: matcher rejects {t:?}");
    }
    for t in reject {
        assert!(!e.accepts(t.as_bytes()), "{name}: recognizer accepts {t:?}");
        assert!(!matcher_accepts(&c, t), "{name}: matcher accepts {t:?}");
    }
    let mut rng = StdRng::seed_from_u64(7);
    let pool: Vec<char> = "ab Z9\"\\é".chars().collect();
    let (mut sampled, mut accepted) = (0, 0);
    for _ in 0..200 {
        if let Some(t) = sample(&g, &mut rng, 12, &pool) {
            sampled += 1;
            assert!(
                e.accepts(t.as_bytes()),
                "{name}: sampled {t:?} not recognized"
            );
            accepted += matcher_accepts(&c, &t) as usize;
        }
    }
    assert!(sampled >= 50, "{name}: only {sampled} samples");
    assert!(
        accepted * 2 >= sampled,
        "{name}: matcher accepts {accepted} of {sampled} samples"
    );
}

#[test]
fn example_json() {
    check_example(
        "json",
        &[
            "{}",
            " [1, -0.5e+3, \"a\\u00e9\\n\", true, null] ",
            // Containers three deep: `value` entered four times.
            r#"{"a": {"b": [false, "c"]}, "e": -12}"#,
        ],
        &[
            "{,}",
            "[1,]",
            "01",
            "\"\u{1}\"",
            "{\"a\" 1}",
            "[[[[[1]]]]]x",
        ],
    );
}

#[test]
fn example_arithmetic() {
    check_example(
        "arithmetic",
        &["1", "1 + 2 * 3", "-(4 - --5) / 6*7", "((1))"],
        &["", "1 +", "01", "(1", "1 ** 2"],
    );
}

#[test]
fn example_comma_list() {
    check_example(
        "comma-list",
        &["a", "apples, \"pears\",plums", &vec!["x"; 50].join(", ")],
        &["", "a,", "A", "\"a", "a,,b"],
    );
}

#[test]
fn example_mini_lang() {
    check_example(
        "mini-lang",
        &[
            "let x = 1\n",
            "let n = 10\nwhile n > 0 {\n  print(n, n * 2)\n  n -= 1\n}\n",
            "if a == (b + 1) {\n  x = 1\n} else {\n  x = 2\n}\n",
        ],
        &["let x = 1", "while x {\n}\n", "print()\n", "let X = 1\n"],
    );
}

#[test]
fn example_chess_san() {
    check_example(
        "chess-san",
        &[
            "e4", "Nf3", "exd5", "O-O-O+", "Qh4#", "e8=Q", "fxg1=N+", "R1a3", "Nbd7", "Qa1xb2",
        ],
        &["e9", "e8", "Pe4", "O-O-O-O", "Nf3++", "K", "exd"],
    );
}

#[test]
fn recursion_is_exact_and_the_unrolled_tree_a_sound_subset() {
    // A deeply nested JSON array: the recognizer and the matcher (the
    // pushdown engine) accept it; the regular approximation `lower` (the
    // fallback for vocabularies without every single byte), unrolled to
    // depth 3, does not.
    let (g, c) = example("json");
    let deep = "[[[[[[[[[[1]]]]]]]]]]";
    assert!(Earley::new(&g).accepts(deep.as_bytes()));
    assert!(matcher_accepts(&c, deep));
    let hir = constrain::grammar::gbnf::lower(&g, &GbnfOptions::default()).unwrap();
    let dfa = constrain::ByteDfa::from_hir(&hir, 0, &Default::default()).unwrap();
    assert!(!dfa.matches(deep.as_bytes()) && dfa.matches(b"[[1]]"));
}

#[test]
fn the_checker_can_fail() {
    // A grammar whose matcher and recognizer agree passes; the recognizer
    // is consulted (a wrong verdict would be reported).
    let case = GbnfCase {
        grammar: "root ::= \"a\" root | \"b\"\n".into(),
        texts: vec!["aab".into(), "ba".into()],
        tokens: vec![b"aa".to_vec()],
        max_depth: 2,
        seed: 1,
        choices: vec![1, 2, 3],
    };
    match check_gbnf_case(&case) {
        Ok(GbnfOutcome::Checked {
            matcher_accepted,
            recognizer_accepted,
            ..
        }) => assert!(matcher_accepted >= 1 && recognizer_accepted >= matcher_accepted),
        other => panic!("{other:?}"),
    }
}

fn case_from(bytes: &[u8], text_bytes: &[u8], depth: usize, seed: u64) -> GbnfCase {
    let grammar = random_gbnf(bytes);
    let texts = text_bytes
        .chunks(4)
        .map(|c| {
            c.iter()
                .map(|&b| GBNF_POOL[b as usize % GBNF_POOL.len()])
                .collect()
        })
        .collect();
    let tokens = text_bytes
        .chunks(3)
        .map(|c| {
            c.iter()
                .map(|&b| GBNF_POOL[b as usize % GBNF_POOL.len()])
                .collect::<String>()
                .into_bytes()
        })
        .collect();
    GbnfCase {
        grammar,
        texts,
        tokens,
        max_depth: depth,
        seed,
        choices: text_bytes.to_vec(),
    }
}

proptest! {
    // 256 cases (PROPTEST_CASES=N for a longer sweep).

    /// The compiled matcher against the Earley recognizer on random small
    /// grammars: accepted ⇒ recognized; ⇔ without recursion; every allowed
    /// token keeps a completion reachable.
    #[test]
    fn matcher_agrees_with_recognizer(
        bytes in proptest::collection::vec(any::<u8>(), 0..40),
        text_bytes in proptest::collection::vec(any::<u8>(), 0..24),
        depth in 0usize..4,
        seed in any::<u64>(),
    ) {
        let case = case_from(&bytes, &text_bytes, depth, seed);
        if let Err(v) = check_gbnf_case(&case) {
            panic!("{v}\ncase: {}", serde_json::to_string(&case).unwrap());
        }
    }
}

/// Most random grammars get through to the checks (not refused).
#[test]
fn random_grammars_are_mostly_checked() {
    let mut rng = StdRng::seed_from_u64(11);
    let (mut checked, mut recursive) = (0, 0);
    for i in 0..150u64 {
        use rand::Rng;
        let bytes: Vec<u8> = (0..rng.random_range(0..40)).map(|_| rng.random()).collect();
        let texts: Vec<u8> = (0..rng.random_range(0..24)).map(|_| rng.random()).collect();
        let case = case_from(&bytes, &texts, 2, i);
        match check_gbnf_case(&case) {
            Ok(GbnfOutcome::Checked { recursive: r, .. }) => {
                checked += 1;
                recursive += r as usize;
            }
            Ok(GbnfOutcome::Refused(_)) => {}
            Err(v) => panic!("{v}\ncase: {}", serde_json::to_string(&case).unwrap()),
        }
    }
    eprintln!("gbnf sweep: {checked} of 150 checked, {recursive} recursive");
    assert!(checked > 75, "{checked} of 150 checked");
    assert!(recursive > 5, "{recursive} recursive grammars checked");
}

#[test]
fn cache_key_holds_text_and_options() {
    let compiler = byte_compiler();
    let text = "root ::= \"(\" root \")\" | \"x\"";
    let a = compiler.compile(&Source::gbnf(text).unwrap()).unwrap();
    let b = compiler.compile(&Source::gbnf(text).unwrap()).unwrap();
    assert!(Arc::ptr_eq(&a, &b), "the same grammar comes from the cache");
    let deeper = Source::gbnf(text)
        .unwrap()
        .with_schema_options(constrain::schema::SchemaOptions::default().max_depth(5));
    let c = compiler.compile(&deeper).unwrap();
    assert!(!Arc::ptr_eq(&a, &c), "another depth is another artefact");
    // Recursion is exact whatever the unrolling depth (the pushdown engine).
    assert!(matcher_accepts(&a, "(((((x)))))") && matcher_accepts(&c, "(((((x)))))"));
    let other = compiler
        .compile(&Source::gbnf("root ::= \"x\"").unwrap())
        .unwrap();
    assert!(!Arc::ptr_eq(&a, &other));
}
