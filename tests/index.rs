//! Token index and guide: hand-checked tiny vocabularies, then the real Qwen
//! vocabulary with the `regex` crate as an independent oracle.

use constrain_testkit::assets as common;

use constrain::dfa::{ByteDfa, DfaConfig};
use constrain::grammar::Grammar;
use constrain::index::{IndexConfig, IndexError, TokenIndex};
use constrain::vocab::{TokenId, Vocabulary};
use constrain::Matcher;
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::sync::Arc;

/// Vocabulary (ids → bytes), EOS = 9, logits width 12 (ids 10, 11 have no token):
///
/// ```text
/// root ─a(0)─b(1)─c(2)
///      ├─b(3)
///      ├─c(4)
///      ├─"(5)─a(6)          token 6 = `"a`
///      ├─ (7)               token 7 = ` ` (space)
///      └─x(8)
/// ```
fn tiny_vocab() -> Arc<Vocabulary> {
    let toks: Vec<(u32, &[u8])> = vec![
        (0, b"a"),
        (1, b"ab"),
        (2, b"abc"),
        (3, b"b"),
        (4, b"c"),
        (5, b"\""),
        (6, b"\"a"),
        (7, b" "),
        (8, b"x"),
    ];
    Arc::new(
        Vocabulary::new(
            toks.into_iter().map(|(i, b)| (TokenId(i), b.to_vec())),
            [TokenId(9)],
            12,
        )
        .unwrap(),
    )
}

fn index(re: &str, vocab: &Arc<Vocabulary>, eager: bool) -> Arc<TokenIndex> {
    let dfa = ByteDfa::new(re, &DfaConfig::default()).unwrap();
    let cfg = IndexConfig::default().eager(eager).threads(1);
    Arc::new(TokenIndex::build(&dfa, vocab.clone(), &cfg).unwrap())
}

fn ids(g: &Matcher) -> Vec<u32> {
    g.allowed().iter().map(|t| t.0).collect()
}

#[test]
fn tiny_allowed_sets_by_hand() {
    for eager in [true, false] {
        let v = tiny_vocab();
        // (ab)+c? : from the start only `a`-led tokens that stay inside: a, ab, abc? no: abc needs (ab)+ then c → "abc" ok.
        let mut g = Matcher::from_index(index("(ab)+c?", &v, eager));
        assert_eq!(
            ids(&g),
            vec![0, 1, 2],
            "a, ab, abc start a word; b, c, x do not"
        );
        g.advance(TokenId(0)).unwrap(); // "a"
        assert_eq!(ids(&g), vec![3], "after `a` only `b`");
        assert!(!g.is_accepting());
        g.advance(TokenId(3)).unwrap(); // "ab"
        assert!(g.is_accepting());
        assert_eq!(ids(&g), vec![0, 1, 2, 4, 9], "more ab, or c, or EOS");
        g.advance(TokenId(4)).unwrap(); // "abc"
        assert_eq!(ids(&g), vec![9], "complete: only EOS");
        assert!(g.is_finished(), "nothing can extend abc");
        g.advance(TokenId(9)).unwrap();
        assert!(g.is_finished());
        assert!(g.allowed().is_empty());
        assert!(
            (0..12).all(|t| !g.allows(TokenId(t))),
            "after EOS nothing is allowed"
        );
        assert_eq!(
            g.advance(TokenId(0)),
            Err(constrain::MatcherError::Finished)
        );
        g.rollback(2).unwrap();
        assert_eq!(ids(&g), vec![0, 1, 2, 4, 9]);
    }
}

#[test]
fn tiny_dead_ends_are_never_allowed() {
    let v = tiny_vocab();
    // `"a"` requires a closing quote: token `"a` is fine (leads to live state), `a` is not a start.
    let mut g = Matcher::from_index(index("\"a*\"", &v, true));
    assert_eq!(ids(&g), vec![5, 6]);
    g.advance(TokenId(6)).unwrap();
    assert_eq!(ids(&g), vec![0, 5], "more a or the closing quote");
    // A disallowed token is an error, not a panic, and changes nothing.
    let before = g.state();
    assert!(g.advance(TokenId(8)).is_err());
    assert!(
        g.advance(TokenId(11)).is_err(),
        "ids past the tokenizer are never allowed"
    );
    assert_eq!(g.state(), before);
}

#[test]
fn tiny_budget_and_forced_bytes() {
    let v = tiny_vocab();
    let idx = index("abab(c|x)", &v, true);
    let g = Matcher::from_index(idx);
    assert_eq!(g.forced_bytes(), b"abab");
    // Greedy longest tokens along the shortest completion `ababc`: ab, abc → 2.
    assert_eq!(g.tokens_to_accept(), Some(2));
    assert_eq!(
        g.tokens_to_accept_after(TokenId(1)),
        Some(1),
        "after ab: abc"
    );
    assert_eq!(
        g.tokens_to_accept_after(TokenId(0)),
        Some(2),
        "after a: b, abc"
    );
    assert_eq!(
        g.tokens_to_accept_after(TokenId(3)),
        None,
        "b is not allowed at the start"
    );
}

#[test]
fn incompatible_vocabulary_and_empty_language_are_build_errors() {
    let v = tiny_vocab();
    // No token spells `z`, so no token sequence ever completes: the start
    // itself is a token-level dead end.
    let dfa = ByteDfa::new("a(z)b", &DfaConfig::default()).unwrap();
    let e = TokenIndex::build(&dfa, v.clone(), &IndexConfig::default()).unwrap_err();
    assert!(
        matches!(e, IndexError::IncompatibleVocabulary { ref prefix } if prefix.is_empty()),
        "{e}"
    );
    // `(a|az)b?`: `a` is fine, but the token path through `z` is pruned.
    let dfa = ByteDfa::new("a(zb)?", &DfaConfig::default()).unwrap();
    let idx = Arc::new(TokenIndex::build(&dfa, v.clone(), &IndexConfig::default()).unwrap());
    let mut g = Matcher::from_index(idx);
    assert_eq!(ids(&g), vec![0], "only `a`; `ab`/`abc` leave the language");
    g.advance(TokenId(0)).unwrap();
    assert_eq!(ids(&g), vec![9], "`z` cannot be spelled: only EOS");
    let dfa = ByteDfa::new("a(z)b", &DfaConfig::default()).unwrap();
    let lazy = IndexConfig::default().eager(false);
    assert!(TokenIndex::build(&dfa, v.clone(), &lazy).is_err());
    let dfa = ByteDfa::new("[a&&b]", &DfaConfig::default()).unwrap();
    assert!(matches!(
        TokenIndex::build(&dfa, v, &IndexConfig::default()),
        Err(IndexError::EmptyLanguage)
    ));
}

// ---------------------------------------------------------------------------
// Real Qwen vocabulary.

const RECORD: &str = r#"\{"name": "[a-zA-Z_][a-zA-Z0-9_]{0,63}", "email": "[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}", "tags": \[("[^"\\\x00-\x1f]{1,20}"(, "[^"\\\x00-\x1f]{1,20}"){0,4})?\], "age": (0|[1-9][0-9]{0,2}), "bio": "[^"\\\x00-\x1f]{0,200}"\}"#;

fn hard_regexes() -> Vec<String> {
    let mut v: Vec<String> = vec![
        RECORD.into(),
        "(cat|dog|bird)(, (cat|dog|bird)){0,3}".into(),
        "[0-9]{3}-[0-9]{2}-[0-9]{4}".into(),
        r"\p{Han}{1,4}(市|省)".into(),
        "(北京|上海|東京|😀🎉|café)+".into(),
        r#"\{"city": "[^"\\\x00-\x1f]{1,30}", "temp": -?[0-9]{1,2}\.[0-9]\}"#.into(),
        r"[\p{L}\p{N} ]{2,12}".into(),
        r"(a|ab|abc|abcd){2,5}x?".into(),
    ];
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("grammars");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "regex"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 8,
        "the grammars/ library has at least 8 grammars"
    );
    for f in files {
        v.push(Grammar::load(&f).unwrap().pattern);
    }
    v
}

/// A schema in compliant mode: free strings (string bodies), counted
/// strings, a string with a restricted alphabet (`\S`), keys, extra keys
/// with any value, flexible whitespace.
fn mixed_schema_regex() -> String {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 40},
            "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
            "nick": {"type": "string", "pattern": "^\\S+$"},
            "bio": {"type": "string"}
        },
        "required": ["name"]
    });
    constrain::schema::compile(&schema, &constrain::schema::SchemaOptions::compliant())
        .unwrap()
        .regex
}

#[test]
fn qwen_eager_and_lazy_masks_agree() {
    let Some(vocab) = common::qwen_vocab() else {
        return;
    };
    let schema = mixed_schema_regex();
    for re in [
        RECORD,
        r"\p{Han}{1,4}(市|省)",
        "(a|ab|abc|abcd){2,5}x?",
        schema.as_str(),
    ] {
        let eager = index(re, &vocab, true);
        let lazy = index(re, &vocab, false);
        assert_eq!(eager.num_states(), lazy.num_states());
        for s in 0..eager.num_states() as u32 {
            let s = constrain::index::StateId(s);
            assert_eq!(eager.allowed(s), lazy.allowed(s), "state {s:?} of {re}");
        }
    }
}

/// Counted classes (byte chains) and word loops in several contexts (class
/// walks put together from shared subtrees): the eager masks equal the
/// per-state walks of the whole trie, before and after the byte chains'
/// tries are cached, and at another horizon.
#[test]
fn qwen_eager_masks_from_chains_and_shared_subtrees_agree_with_per_state_walks() {
    let Some(vocab) = common::qwen_vocab() else {
        return;
    };
    let res = [
        r"[1-9][0-9]{0,8},[A-Za-z][A-Za-z .'-]{0,40},[a-z0-9._+-]+@[a-z0-9-]+(\.[a-z0-9-]+)*\.[a-z]{2,}(\n[0-9]{1,3})*",
        r"(ls( -[lah]+)*( [A-Za-z0-9_./~-]+)*|cat( [A-Za-z0-9_./~-]+)+|echo( [A-Za-z0-9_.,:=/-]+)*)( *(&&|;|\|) *(ls( [A-Za-z0-9_./~-]+)*|echo( [A-Za-z0-9_.,:=/-]+)*))*",
        r"[a-z_]{1,30}\([A-Za-z0-9 ]{0,20}\)",
    ];
    for horizon in [16, 16, 20] {
        for re in res {
            let dfa = ByteDfa::new(re, &DfaConfig::default()).unwrap();
            let build = |eager: bool| {
                let cfg = IndexConfig::default()
                    .eager(eager)
                    .threads(1)
                    .horizon(horizon);
                TokenIndex::build(&dfa, vocab.clone(), &cfg).unwrap()
            };
            let (eager, walked) = (build(true), build(false));
            for s in 0..eager.num_states() as u32 {
                let s = constrain::index::StateId(s);
                assert_eq!(eager.allowed(s), walked.allowed(s), "state {s:?} of {re}");
            }
        }
    }
}

/// The answers of `Matcher::allows` and the bitmask rows a lazy index
/// writes (small masks straight from their id lists, before anything asks
/// for their bitsets) equal the eager index's masks, along random walks;
/// then the bitsets made on demand equal them too.
fn lazy_rows_match_eager(vocab: &Arc<Vocabulary>, res: &[&str], walks: usize, seed: u64) {
    let words = constrain::bitmask_words(vocab.logits_width());
    let mut rng = StdRng::seed_from_u64(seed);
    for re in res {
        let eager = index(re, vocab, true);
        let lazy = lazy_index(re, vocab);
        let (mut row_e, mut row_l) = (vec![0u32; words], vec![u32::MAX; words]);
        for _ in 0..walks {
            let (mut ge, mut gl) = (
                Matcher::from_index(eager.clone()),
                Matcher::from_index(lazy.clone()),
            );
            for step in 0..40 {
                let allowed: Vec<TokenId> = ge.allowed().iter().collect();
                // Token by token first, before anything makes a small lazy
                // mask a bitset: every allowed token, and every other token
                // of a small vocabulary or a sample of a large one.
                let width = vocab.logits_width() as u32;
                let others: Vec<u32> = if width <= 1024 {
                    (0..width).collect()
                } else {
                    (0..500).map(|_| rng.random_range(0..width)).collect()
                };
                for t in allowed
                    .iter()
                    .copied()
                    .chain(others.into_iter().map(TokenId))
                {
                    assert_eq!(
                        gl.allows(t),
                        ge.allowed().contains(t),
                        "{re}: step {step}, allows({t:?})"
                    );
                }
                ge.fill_bitmask(&mut row_e).unwrap();
                gl.fill_bitmask(&mut row_l).unwrap();
                // Decoded bit by bit against the eager set.
                for t in 0..vocab.logits_width() as u32 {
                    let bit = row_l[t as usize / 32] >> (t % 32) & 1 == 1;
                    assert_eq!(
                        bit,
                        ge.allowed().contains(TokenId(t)),
                        "{re}: step {step}, token {t}"
                    );
                }
                assert_eq!(row_e, row_l, "{re}: step {step}");
                assert_eq!(ge.allowed(), gl.allowed(), "{re}: step {step}");
                if allowed.is_empty() || ge.is_finished() {
                    break;
                }
                let t = allowed[rng.random_range(0..allowed.len())];
                if vocab.is_eos(t) {
                    break;
                }
                ge.advance(t).unwrap();
                gl.advance(t).unwrap();
            }
        }
    }
}

/// Every single byte and a few longer tokens (a lazy index needs every byte),
/// EOS 300, logits width 301.
fn byte_vocab() -> Arc<Vocabulary> {
    let mut toks: Vec<(TokenId, Vec<u8>)> =
        (0..=255u8).map(|b| (TokenId(b as u32), vec![b])).collect();
    for (i, t) in [
        "ab", "abc", "\"a", "\"name\"", "na", "me", "\": ", ", \"", "12", "true",
    ]
    .iter()
    .enumerate()
    {
        toks.push((TokenId(256 + i as u32), t.as_bytes().to_vec()));
    }
    Arc::new(Vocabulary::new(toks, [TokenId(300)], 301).unwrap())
}

#[test]
fn tiny_lazy_rows_match_the_eager_masks() {
    let vocab = byte_vocab();
    lazy_rows_match_eager(
        &vocab,
        &[
            r#"\{"name": "[a-z]{1,5}", "age": [0-9]{1,3}(, "ok": (true|false))?\}"#,
            "(a|ab|abc|abcd){2,5}x?",
            r#""[^"\\\x00-\x1f]{0,20}""#,
        ],
        40,
        7,
    );
}

#[test]
fn qwen_lazy_rows_match_the_eager_masks() {
    let Some(vocab) = common::qwen_vocab() else {
        return;
    };
    let schema = mixed_schema_regex();
    lazy_rows_match_eager(
        &vocab,
        &[
            RECORD,
            r#"\{"name": "[a-z]{1,5}", "age": [0-9]{1,3}(, "ok": (true|false))?\}"#,
            r#""[0-9a-zA-Z_-]{1,40}"(?:, [0-9]{1,3})?"#,
            schema.as_str(),
        ],
        6,
        19,
    );
}

/// An index over a lazy DFA (determinized on demand from the start state on)
/// against the eager index of the whole DFA: along random walks over allowed
/// tokens, every query a guide makes gives the same answer. State ids differ
/// between the two, so the walks advance both in step.
#[test]
fn qwen_lazy_dfa_index_agrees_with_the_eager_one() {
    let Some(vocab) = common::qwen_vocab() else {
        return;
    };
    let mut res = hard_regexes();
    res.push(mixed_schema_regex());
    // A string body that is not a loop: every plain text stays live (the
    // first branch), but short lowercase words also open the second.
    res.push(r#"x"(?:[^"\\\x00-\x1f]*"\}|[a-z]{1,3}",)"#.to_string());
    // Counted string bodies (a chain of states, one per character, that
    // plain characters all advance alike), with escapes, with a minimum
    // length before a loop, and mixed with a branch that tells characters
    // apart (no chain).
    res.push(r#""[^"\\\x00-\x1f]{0,100}",?"#.to_string());
    res.push(r#""[^"\\\x00-\x1f]{40,}"\}"#.to_string());
    res.push(
        r#"\["(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]){0,50}"(?:, "[^"\\\x00-\x1f]{3,45}")?\]"#
            .to_string(),
    );
    res.push(r#""(?:[^"\\\x00-\x1f]{0,40}|[a-z]{0,3}x[^"\\\x00-\x1f]{0,50})""#.to_string());
    // Counted ASCII classes (a chain over a set of bytes): a pattern's
    // class, hex digits up to a hyphen, printable ASCII without Unicode, and
    // a class whose states send the set's bytes apart (no chain).
    res.push(r#""[0-9a-zA-Z_-]{1,40}"(?:, [0-9]{1,3})?"#.to_string());
    res.push(r#""[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}""#.to_string());
    res.push(r#""[ -!#-\[\]-~]{0,60}""#.to_string());
    res.push(r#""[a-z0-9]{0,5}[a-z]{2,30}""#.to_string());
    // Property names that never die on plain text, with no one thread
    // looping (a declared name, and every other name written as the
    // strings that differ from it): the names after `x"` and `y"` lead into
    // the same states, whose unlimited reach the second search reuses.
    let p = r#"[^"\\\x00-\x1f]"#;
    let other = format!(
        r#"(?:|a|ab|(?:[^"\\\x00-\x1fa]|a[^"\\\x00-\x1fb]|ab[^"\\\x00-\x1fc]|abc{p}){p}*)"#
    );
    res.push(format!(
        r#"(?:x"(?:abc|{other}|zz{p}*)|y"(?:abc|{other}))":1"#
    ));
    let mut rng = StdRng::seed_from_u64(19);
    let cfg = IndexConfig::default().threads(1);
    for re in &res {
        let eager = index(re, &vocab, true);
        // A threshold of one state: everything past the start is lazy.
        let dfa_cfg = DfaConfig::default().lazy_states(Some(1));
        let dfa = ByteDfa::build(re, &dfa_cfg).unwrap();
        assert!(matches!(dfa, constrain::Dfa::Lazy(_)), "{re}");
        let lazy = Arc::new(TokenIndex::build_dfa(dfa, vocab.clone(), &cfg).unwrap());
        assert!(lazy.is_lazy() && !lazy.is_complete());
        // Breadth-first over pairs of states reached by the same bytes.
        let mut seen = std::collections::HashSet::new();
        let mut queue = std::collections::VecDeque::from([(eager.start(), lazy.start())]);
        seen.insert(queue[0]);
        while let Some((a, b)) = queue.pop_front() {
            assert_eq!(eager.allowed(a), lazy.allowed(b), "{re}");
            assert_eq!(eager.tokens_to_accept(a), lazy.tokens_to_accept(b), "{re}");
            assert_eq!(eager.forced_byte(a), lazy.forced_byte(b), "{re}");
            for byte in 0..=255u8 {
                let n = (
                    eager.next_byte_state(a, byte),
                    lazy.next_byte_state(b, byte),
                );
                assert_eq!(n.0.is_some(), n.1.is_some(), "{re}");
                if let (Some(x), Some(y)) = n {
                    if seen.len() < 400 && seen.insert((x, y)) {
                        queue.push_back((x, y));
                    }
                }
            }
        }
        for _ in 0..25 {
            let (mut ge, mut gl) = (
                Matcher::from_index(eager.clone()),
                Matcher::from_index(lazy.clone()),
            );
            for step in 0..60 {
                assert_eq!(ge.allowed(), gl.allowed(), "{re}: step {step}");
                assert_eq!(ge.is_accepting(), gl.is_accepting(), "{re}");
                assert_eq!(ge.is_finished(), gl.is_finished(), "{re}");
                assert_eq!(ge.tokens_to_accept(), gl.tokens_to_accept(), "{re}");
                assert_eq!(ge.forced_bytes(), gl.forced_bytes(), "{re}");
                assert_eq!(
                    eager.bytes_to_accept(ge.state()),
                    lazy.bytes_to_accept(gl.state()),
                    "{re}"
                );
                let allowed: Vec<TokenId> = ge.allowed().iter().collect();
                if allowed.is_empty() || ge.is_finished() {
                    break;
                }
                let t = allowed[rng.random_range(0..allowed.len())];
                if vocab.is_eos(t) {
                    break;
                }
                ge.advance(t).unwrap();
                gl.advance(t).unwrap();
            }
        }
        assert!(lazy.lazy_limit_error().is_none());
    }
}

/// An object with extra keys and a dozen declared names: past the first
/// key, a lazy index computes a key start's mask from that of its extra-key
/// part (the same threads at every position) plus the tokens of the names
/// still allowed there. Along texts with keys at many positions (declared
/// names, extra keys that share a name's prefix, a name's proper prefix),
/// the state after every byte has the eager index's mask.
#[test]
fn qwen_key_starts_built_on_the_shared_extra_key_part_match_the_eager_masks() {
    let Some(vocab) = common::qwen_vocab() else {
        return;
    };
    let names = [
        "id",
        "name",
        "namespace",
        "nickname",
        "kind",
        "labels",
        "level",
        "value",
        "values",
        "version",
        "type",
        "title",
    ];
    let props: serde_json::Map<String, serde_json::Value> = names
        .iter()
        .map(|n| (n.to_string(), serde_json::json!({"type": "string"})))
        .collect();
    let schema = serde_json::json!({
        "type": "object",
        "properties": props,
        "additionalProperties": {"type": "integer"}
    });
    let re = constrain::schema::compile(&schema, &constrain::schema::SchemaOptions::compliant())
        .unwrap()
        .regex;
    let eager = index(&re, &vocab, true);
    let lazy = lazy_index(&re, &vocab);
    let all: Vec<String> = names.iter().map(|n| format!(r#""{n}": "v""#)).collect();
    let texts = [
        format!("{{{}}}", all.join(", ")),
        r#"{"id": "1", "nickname": "n", "values": "x", "title": "t", "namespaced": 1, "nam": 2}"#
            .to_string(),
        r#"{"name": "a", "kind": "k", "levels": 3, "version2": 4, "ti": 5}"#.to_string(),
        r#"{"labels": "l", "type": "t", "title": "x"}"#.to_string(),
        r#"{"nickname": "n", "value": "v", "types": 7}"#.to_string(),
    ];
    same_masks_along(&eager, &lazy, &texts);
    assert!(
        lazy.masks_from_free_parts() > 0,
        "the key starts after the first were built on the extra-key part"
    );
}

/// A lazy index over `re` (lazy from the first state on), one thread.
fn lazy_index(re: &str, vocab: &Arc<Vocabulary>) -> Arc<TokenIndex> {
    let dfa_cfg = DfaConfig::default().lazy_states(Some(1));
    let dfa = ByteDfa::build(re, &dfa_cfg).unwrap();
    let cfg = IndexConfig::default().threads(1);
    let lazy = Arc::new(TokenIndex::build_dfa(dfa, vocab.clone(), &cfg).unwrap());
    assert!(lazy.is_lazy(), "{re}");
    lazy
}

/// Walks each text (in the language) byte by byte through both indexes,
/// asserting equal masks before every byte and at the end.
fn same_masks_along(eager: &TokenIndex, lazy: &TokenIndex, texts: &[String]) {
    for text in texts {
        let (mut a, mut b) = (eager.start(), lazy.start());
        for (i, &byte) in text.as_bytes().iter().enumerate() {
            assert_eq!(eager.allowed(a), lazy.allowed(b), "{text}: before byte {i}");
            a = eager
                .next_byte_state(a, byte)
                .unwrap_or_else(|| panic!("{text}: byte {i} is in the language"));
            b = lazy.next_byte_state(b, byte).expect("as the eager index");
        }
        assert_eq!(eager.allowed(a), lazy.allowed(b), "{text}: at the end");
        assert!(eager.is_accepting(a) && lazy.is_accepting(b), "{text}");
    }
}

/// A state one copy further along a counted repetition (a long string's
/// next character, a long array's next item) shares the mask of the state
/// with its threads moved back, while no token can reach the repetition's
/// last copies; the first such state's own mask walks the characters
/// after it as a loop. Along strings (plain and counted classes) and
/// arrays of every length up to the bound (escapes, multi-byte
/// characters, items that end near the last copy), every mask is the
/// eager index's.
#[test]
fn qwen_masks_shared_along_counted_repetitions_match_the_eager_masks() {
    let Some(vocab) = common::qwen_vocab() else {
        return;
    };
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "s": {"type": "string", "minLength": 2, "maxLength": 150},
            "p": {"type": "string", "pattern": "^[0-9a-zA-Z_-]{1,160}$"},
            "a": {
                "type": "array",
                "maxItems": 28,
                "items": {
                    "type": "object",
                    "properties": {"k": {"type": "integer"}},
                    "required": ["k"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["s"],
        "additionalProperties": false
    });
    let re = constrain::schema::compile(&schema, &constrain::schema::SchemaOptions::compliant())
        .unwrap()
        .regex;
    let eager = index(&re, &vocab, true);
    let lazy = lazy_index(&re, &vocab);
    // A string value of `n` characters: plain words, a quote, a backslash,
    // a newline, a two- and a three-byte character (written as JSON).
    let word = |n: usize| -> String {
        let v: String = "lorem ipsum \"dolor\n é sit € amet \\ "
            .chars()
            .cycle()
            .take(n)
            .collect();
        serde_json::to_string(&v).unwrap()
    };
    let mut texts = Vec::new();
    for n in [2, 3, 40, 100, 118, 119, 120, 148, 149, 150] {
        texts.push(format!(r#"{{"s": {}}}"#, word(n)));
    }
    for n in [1, 2, 17, 30, 130, 159, 160] {
        let v: String = "ab_12-XYZ".chars().cycle().take(n).collect();
        texts.push(format!(r#"{{"s": "ab", "p": "{v}"}}"#));
    }
    for items in [0, 1, 5, 20, 25, 26, 27, 28] {
        let list: Vec<String> = (0..items).map(|i| format!(r#"{{"k": {i}}}"#)).collect();
        texts.push(format!(r#"{{"s": "ab", "a": [{}]}}"#, list.join(", ")));
    }
    same_masks_along(&eager, &lazy, &texts);
    // Random walks of allowed tokens (seeded), which reach states no
    // hand-written text does (escapes and multi-byte characters at every
    // distance from the end, items cut anywhere).
    let mut rng = StdRng::seed_from_u64(36);
    for walk in 0..24 {
        let (mut a, mut b) = (eager.start(), lazy.start());
        for step in 0..400 {
            let allowed = eager.allowed(a);
            assert_eq!(allowed, lazy.allowed(b), "walk {walk}, step {step}");
            let ids: Vec<TokenId> = allowed
                .iter()
                .filter(|t| !vocab.eos().contains(t))
                .collect();
            if ids.is_empty() {
                break;
            }
            let t = ids[rng.random_range(0..ids.len())];
            a = eager.next_state(a, t).expect("allowed");
            b = lazy.next_state(b, t).expect("as the eager index");
        }
    }
    assert!(
        lazy.masks_from_shifts() > 0,
        "the string's later characters and the later items shared masks"
    );
}

/// A lazy DFA that outgrows its size limit while guides walk it: no panic, the
/// limit is reported by the index, and a state left without a mask is one
/// the limit cut off.
#[test]
fn qwen_lazy_dfa_over_its_limit_reports_it() {
    let Some(vocab) = common::qwen_vocab() else {
        return;
    };
    // 2^13 states: far past a 16 KiB table.
    let re = "(?:a|b)*a(?:a|b){12}";
    let dfa_cfg = DfaConfig::default()
        .lazy_states(Some(1))
        .dfa_size_limit(16 << 10);
    let dfa = ByteDfa::build(re, &dfa_cfg).unwrap();
    let idx = Arc::new(TokenIndex::build_dfa(dfa, vocab.clone(), &IndexConfig::default()).unwrap());
    let mut rng = StdRng::seed_from_u64(5);
    for _ in 0..20 {
        let mut g = Matcher::from_index(idx.clone());
        for _ in 0..40 {
            let _ = (g.tokens_to_accept(), g.forced_bytes(), g.is_finished());
            let allowed: Vec<TokenId> = g.allowed().iter().collect();
            if allowed.is_empty() {
                assert!(
                    idx.lazy_limit_error().is_some(),
                    "a state without a mask although no limit was hit"
                );
                break;
            }
            let t = allowed[rng.random_range(0..allowed.len())];
            if vocab.is_eos(t) {
                break;
            }
            g.advance(t).unwrap();
        }
    }
    let hit = idx.lazy_limit_error().expect("the limit is reported");
    assert!(
        matches!(
            &hit,
            constrain::index::LimitHit::Determinize { rule: None, .. }
        ),
        "{hit:?}"
    );
    let e = hit.to_string();
    assert!(
        e.contains("DfaConfig::dfa_size_limit"),
        "names the config field: {e}"
    );
}

/// The masks against a brute-force oracle: token `t` is in the mask of `s`
/// exactly when walking its bytes through the table from `s` stays live (or
/// `t` is EOS and `s` accepts). Covers string interiors (the plain-token fast
/// path), property-name prefixes, escapes and structure.
#[test]
fn qwen_masks_match_brute_force() {
    let Some(vocab) = common::qwen_vocab() else {
        return;
    };
    let free_string = r#""(?:[^"\\\x00-\x1F]|\\["\\bfnrt]|\\u[0-9a-fA-F]{4})*""#;
    let key_not_abc = r#""(?:|[^"\\\x00-\x1Fa][^"\\\x00-\x1F]*|a|a[^"\\\x00-\x1Fb][^"\\\x00-\x1F]*|ab[^"\\\x00-\x1F]+)""#;
    let res = [
        format!(r#"\{{"a": {free_string}(, {key_not_abc}: (?:[0-9]+|{free_string}))?\}}"#),
        RECORD.to_string(),
        r"[\p{L} ]{0,40}[.!?]".to_string(),
    ];
    let mut rng = StdRng::seed_from_u64(3);
    for re in &res {
        for eager in [true, false] {
            let idx = index(re, &vocab, eager);
            let n = idx.num_states() as u32;
            for _ in 0..12 {
                let s = constrain::index::StateId(rng.random_range(0..n));
                let mask = idx.allowed(s);
                for id in 0..vocab.logits_width() as u32 {
                    let t = TokenId(id);
                    assert_eq!(
                        mask.contains(t),
                        idx.next_state(s, t).is_some(),
                        "{re}: state {s:?}, token {id} {}",
                        vocab.describe(t)
                    );
                }
            }
        }
    }
}

#[test]
fn qwen_sampled_strings_are_accepted_token_by_token() {
    let (Some(vocab), Some(tok)) = (common::qwen_vocab(), common::qwen_tokenizer()) else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(7);
    for re in hard_regexes() {
        let idx = index(&re, &vocab, true);
        let oracle = regex::Regex::new(&format!("^(?:{re})$")).unwrap();
        for _ in 0..20 {
            let bytes = idx.random_text(&mut rng, 80).unwrap();
            let text = String::from_utf8(bytes).expect("DFA texts are UTF-8");
            assert!(oracle.is_match(&text), "sampled {text:?} not in {re}");
            let mut g = Matcher::from_index(idx.clone());
            for t in tok.encode(&text).unwrap() {
                g.advance(t)
                    .unwrap_or_else(|e| panic!("{re}: {text:?}: {e}"));
            }
            assert!(g.is_accepting(), "{re}: {text:?}");
            let eos = vocab.eos()[0];
            assert!(g.allowed().contains(eos));
            g.advance(eos).unwrap();
        }
    }
}

#[test]
fn qwen_random_walks_match_the_regex_oracle() {
    let Some(vocab) = common::qwen_vocab() else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(11);
    for re in hard_regexes() {
        let idx = index(&re, &vocab, true);
        let oracle = regex::Regex::new(&format!("^(?:{re})$")).unwrap();
        for _ in 0..20 {
            let mut g = Matcher::from_index(idx.clone());
            let mut steps = 0;
            while !g.is_finished() {
                let allowed: Vec<TokenId> = g.allowed().iter().collect();
                assert!(
                    !allowed.is_empty(),
                    "dead end in {re} after {:?}",
                    vocab.decode(&g.tokens())
                );
                // Prefer finishing after a while so walks end.
                let eos = vocab.eos()[0];
                let t = if steps > 60 && g.allowed().contains(eos) {
                    eos
                } else if steps > 60 {
                    // Follow a token that lowers the budget bound.
                    let need = g.tokens_to_accept().unwrap();
                    *allowed
                        .iter()
                        .find(|&&t| g.tokens_to_accept_after(t) == Some(need - 1))
                        .unwrap()
                } else {
                    allowed[rng.random_range(0..allowed.len())]
                };
                // Property: every allowed token leads to a state that can reach acceptance.
                assert!(g.tokens_to_accept_after(t).is_some());
                g.advance(t).unwrap();
                steps += 1;
            }
            let bytes = vocab.decode(&g.tokens());
            let text = String::from_utf8(bytes).expect("walk output is UTF-8");
            assert!(
                oracle.is_match(&text),
                "walk produced {text:?}, not in {re}"
            );
        }
    }
}

#[test]
fn qwen_strings_outside_the_language_are_rejected() {
    let (Some(vocab), Some(tok)) = (common::qwen_vocab(), common::qwen_tokenizer()) else {
        return;
    };
    let cases: &[(&str, &[&str])] = &[
        (
            RECORD,
            &[
                r#"{"name": "9abc", "email": "a@b.co", "tags": [], "age": 1, "bio": ""}"#,
                r#"{"name": "x", "email": "a@b.co", "tags": [], "age": 01, "bio": ""}"#,
            ],
        ),
        (
            "[0-9]{3}-[0-9]{2}-[0-9]{4}",
            &["123-45-678", "123-456-7890", "abc-de-fghi"],
        ),
        ("(北京|上海|東京|😀🎉|café)+", &["北", "cafe", "😀"]),
    ];
    for (re, bad) in cases {
        let idx = index(re, &vocab, true);
        for text in *bad {
            let mut g = Matcher::from_index(idx.clone());
            let ok = tok
                .encode(text)
                .unwrap()
                .into_iter()
                .all(|t| g.advance(t).is_ok())
                && g.is_accepting();
            assert!(!ok, "{text:?} must be rejected by {re}");
        }
    }
}
