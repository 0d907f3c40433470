//! The one compile pipeline (`Compiler`, its cache, its errors) and the
//! per-request `Matcher` (XGrammar-shaped: bitmask, accept, validate,
//! rollback, termination), on a hand-checkable vocabulary and on the real
//! Qwen vocabulary with the `regex` crate and `jsonschema` as oracles.

use constrain::schema::{SchemaOptions, Whitespace};
use constrain::vocab::{TokenId, Vocabulary};
use constrain::{
    bitmask_words, CompileError, Compiler, CompilerConfig, Matcher, MatcherError, Source,
};
use constrain_testkit::assets as common;
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde_json::json;
use std::sync::Arc;

/// ids 0..=255 are the single bytes, 256 = `ab`, 257 = `yes`, EOS = 258;
/// logits width 300 (ids 259.. have no token).
fn byte_vocab() -> Arc<Vocabulary> {
    let mut toks: Vec<(TokenId, Vec<u8>)> =
        (0..=255u8).map(|b| (TokenId(b as u32), vec![b])).collect();
    toks.push((TokenId(256), b"ab".to_vec()));
    toks.push((TokenId(257), b"yes".to_vec()));
    Arc::new(Vocabulary::new(toks, [TokenId(258)], 300).unwrap())
}

const EOS: TokenId = TokenId(258);

fn b(c: u8) -> TokenId {
    TokenId(c as u32)
}

fn bits(row: &[u32]) -> Vec<u32> {
    (0..row.len() as u32 * 32)
        .filter(|&t| row[(t / 32) as usize] >> (t % 32) & 1 == 1)
        .collect()
}

fn compiler() -> Compiler {
    Compiler::new(byte_vocab(), CompilerConfig::default())
}

#[test]
fn cache_returns_the_same_artefact_and_keys_on_options() {
    let c = compiler();
    let schema =
        json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]});
    let first = c.compile(&Source::json_schema(schema.clone())).unwrap();
    let again = c.compile(&Source::json_schema(schema.clone())).unwrap();
    assert!(
        Arc::ptr_eq(&first, &again),
        "a second compile is a cache hit"
    );
    let flexible = SchemaOptions::default().whitespace(Whitespace::Flexible { max: 2 });
    let other = c
        .compile(&Source::json_schema(schema).with_schema_options(flexible))
        .unwrap();
    assert!(
        !Arc::ptr_eq(&first, &other),
        "other options, other artefact"
    );
    // The options change the language: whitespace is allowed only in one.
    let accepts = |m: &mut Matcher, text: &[u8]| text.iter().all(|&x| m.accept_token(b(x)));
    assert!(!accepts(&mut first.matcher(), b"{ "));
    assert!(accepts(&mut other.matcher(), b"{ "));
    assert_eq!(c.cache_len(), 2);
    c.clear_cache();
    assert_eq!(c.cache_len(), 0);
}

#[test]
fn cache_is_bounded_and_evicts_the_least_recently_used() {
    let c = Compiler::new(byte_vocab(), CompilerConfig::default().cache_entries(2));
    let a = c.compile(&Source::regex("a+")).unwrap();
    let _b = c.compile(&Source::regex("b+")).unwrap();
    // Touch `a+`, so `b+` is the least recently used.
    assert!(Arc::ptr_eq(&a, &c.compile(&Source::regex("a+")).unwrap()));
    let _c = c.compile(&Source::regex("c+")).unwrap();
    assert_eq!(c.cache_len(), 2);
    assert!(Arc::ptr_eq(&a, &c.compile(&Source::regex("a+")).unwrap()));
    // `b+` was evicted: compiled anew.
    assert!(!Arc::ptr_eq(&_b, &c.compile(&Source::regex("b+")).unwrap()));

    let none = Compiler::new(byte_vocab(), CompilerConfig::default().cache_entries(0));
    let x = none.compile(&Source::regex("a+")).unwrap();
    assert!(!Arc::ptr_eq(
        &x,
        &none.compile(&Source::regex("a+")).unwrap()
    ));
    assert_eq!(none.cache_len(), 0);
}

#[test]
fn compile_errors_say_what_and_where() {
    let c = compiler();
    let e = c
        .compile(&Source::json_schema(
            json!({"properties": {"age": {"not": {"type": "string", "format": "email"}}}}),
        ))
        .unwrap_err();
    assert!(matches!(e, CompileError::Schema(_)), "{e}");
    assert!(e.to_string().contains("/properties/age"), "{e}");
    let e = c.compile(&Source::regex("ab(c")).unwrap_err();
    assert!(matches!(e, CompileError::Dfa(_)), "{e}");
    assert!(e.to_string().contains("bad regex"), "{e}");
    let e = c
        .compile(&Source::tools(
            json!([{"type": "function", "function": {}}]),
        ))
        .unwrap_err();
    assert!(e.to_string().contains("/0/function"), "{e}");
    assert_eq!(c.cache_len(), 0, "errors are not cached");
    let e = Source::grammar_file("/nonexistent/x.regex").unwrap_err();
    assert!(e.to_string().contains("/nonexistent/x.regex"), "{e}");
}

#[test]
fn tools_source_calls_exactly_one_tool() {
    let c = compiler();
    let tools = json!([
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "boolean"}}, "required": ["x"]}}},
        {"type": "function", "function": {"name": "g"}}
    ]);
    let compiled = c.compile(&Source::tools(tools)).unwrap();
    let run = |text: &[u8]| {
        let mut m = compiled.matcher();
        text.iter().all(|&x| m.accept_token(b(x))) && m.is_accepting()
    };
    assert!(run(br#"{"name":"f","arguments":{"x":true}}"#));
    assert!(run(br#"{"name":"g","arguments":{}}"#));
    assert!(!run(br#"{"name":"h","arguments":{}}"#));
    assert!(!run(br#"{"name":"f","arguments":{}}"#));
}

#[test]
fn bitmask_has_xgrammar_layout_and_matches_allowed() {
    let c = compiler();
    let compiled = c.compile(&Source::regex("(ab|yes)x?")).unwrap();
    let mut m = compiled.matcher();
    let words = bitmask_words(300);
    assert_eq!(words, 10);
    let mut row = vec![0xdead_beefu32; words + 1];
    m.fill_bitmask(&mut row).unwrap();
    assert_eq!(
        bits(&row[..words]),
        vec![b'a' as u32, b'y' as u32, 256, 257]
    );
    assert_eq!(row[words], 0xdead_beef, "words past the row are left alone");
    let allowed: Vec<u32> = m.allowed().iter().map(|t| t.0).collect();
    assert_eq!(bits(&row[..words]), allowed);
    assert!(m.accept_token(TokenId(256)));
    m.fill_bitmask(&mut row).unwrap();
    assert_eq!(bits(&row[..words]), vec![b'x' as u32, EOS.0]);
    assert_eq!(
        m.fill_bitmask(&mut [0u32; 9]),
        Err(MatcherError::BitmaskSize { got: 9, needed: 10 })
    );
    assert!(m.accept_token(EOS));
    assert!(m.is_terminated());
    m.fill_bitmask(&mut row).unwrap();
    assert!(
        bits(&row[..words]).is_empty(),
        "terminated: nothing allowed"
    );
    assert!(!m.accept_token(b(b'x')), "nothing follows a stop token");
}

#[test]
fn accept_validate_rollback_reset() {
    let c = compiler();
    let compiled = c.compile(&Source::regex("abc|abd|yes")).unwrap();
    let mut m = compiled.matcher();
    assert!(!m.accept_token(b(b'c')), "refused");
    assert_eq!(m.num_tokens(), 0, "a refused token changes nothing");
    assert_eq!(m.validate_tokens(&[TokenId(256), b(b'c'), EOS, b(b'x')]), 3);
    assert_eq!(m.validate_tokens(&[TokenId(256), b(b'x')]), 1);
    assert_eq!(m.num_tokens(), 0, "validate does not advance");
    // All or nothing.
    let e = m.accept_tokens(&[TokenId(256), b(b'x')]).unwrap_err();
    assert!(
        matches!(e, MatcherError::NotAllowed { position: 1, .. }),
        "{e}"
    );
    assert_eq!(m.num_tokens(), 0);
    m.accept_tokens(&[TokenId(256), b(b'd')]).unwrap();
    assert!(m.is_accepting() && m.is_finished() && !m.is_terminated());
    m.rollback(1).unwrap();
    assert!(!m.is_accepting());
    assert!(m.accept_token(b(b'c')));
    assert!(m.accept_token(EOS));
    m.rollback(1).unwrap();
    assert!(
        !m.is_terminated(),
        "rolling back the stop token revives the matcher"
    );
    assert!(m.accept_token(EOS));
    m.reset();
    assert_eq!(m.num_tokens(), 0);
    assert!(m.accept_token(TokenId(257)));
    assert_eq!(
        m.rollback(2),
        Err(MatcherError::Rollback {
            requested: 2,
            available: 1
        })
    );
}

#[test]
fn bounded_rollback_keeps_only_what_it_needs() {
    let c = compiler();
    let compiled = c.compile(&Source::regex("[a-z]*")).unwrap();
    let mut m = compiled.matcher().with_max_rollback(3);
    for _ in 0..1000 {
        assert!(m.accept_token(b(b'q')));
    }
    assert_eq!(m.num_tokens(), 1000);
    assert!(m.steps().len() < 3 * 3 + 64 + 1, "old states are dropped");
    assert!(m.rollback(4).is_err());
    m.rollback(3).unwrap();
    assert_eq!(m.num_tokens(), 997);
    assert!(m.accept_token(EOS));
}

#[test]
fn matcher_and_compiled_are_thread_safe() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<constrain::Compiled>();
    send_sync::<Compiler>();
    // Sync too: the Python binding's classes and engines that share a
    // matcher behind a lock need it.
    send_sync::<Matcher>();
    let c = compiler();
    let compiled = c.compile(&Source::regex("(ab|yes)+")).unwrap();
    std::thread::scope(|s| {
        for k in 0..4 {
            let compiled = compiled.clone();
            s.spawn(move || {
                let mut m = compiled.matcher();
                for _ in 0..=k {
                    assert!(m.accept_token(TokenId(256)));
                }
                assert!(m.accept_token(EOS));
            });
        }
    });
}

/// On the real vocabulary: every allowed token per the bitmask keeps the
/// text completable (checked by the `regex` crate on the text plus the
/// shortest completion the matcher finds), stop only where the text matches,
/// along random walks of adversarial (uniform) choices.
#[test]
fn qwen_bitmask_walks_agree_with_the_regex_oracle() {
    let Some(vocab) = common::qwen_vocab() else {
        return;
    };
    let c = Compiler::new(vocab.clone(), CompilerConfig::default());
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 12},
            "n": {"type": "integer", "minimum": -5, "maximum": 300},
            "tags": {"type": "array", "items": {"enum": ["x", "yz"]}, "maxItems": 3}
        },
        "required": ["name", "n"]
    });
    let compiled = c.compile(&Source::json_schema(schema.clone())).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let words = bitmask_words(vocab.logits_width());
    let mut row = vec![0u32; words];
    let mut rng = StdRng::seed_from_u64(7);
    for _ in 0..20 {
        let mut m = compiled.matcher();
        let mut text = Vec::new();
        for _ in 0..200 {
            m.fill_bitmask(&mut row).unwrap();
            let allowed = bits(&row);
            assert!(
                !allowed.is_empty(),
                "no dead end after {:?}",
                String::from_utf8_lossy(&text)
            );
            for &t in &allowed {
                assert!(
                    m.is_allowed(TokenId(t)),
                    "bitmask and is_allowed agree on {t}"
                );
            }
            // Prefer stopping a quarter of the time when allowed.
            let t = if allowed.iter().any(|&t| vocab.is_eos(TokenId(t))) && rng.random_bool(0.25) {
                vocab.eos()[0]
            } else {
                TokenId(allowed[rng.random_range(0..allowed.len())])
            };
            if vocab.is_eos(t) {
                let v: serde_json::Value = serde_json::from_slice(&text).unwrap();
                assert!(validator.is_valid(&v), "{v}");
                assert!(m.accept_token(t) && m.is_terminated());
                break;
            }
            text.extend_from_slice(vocab.token_bytes(t).unwrap());
            assert!(m.accept_token(t));
        }
    }
}

/// `always_fits(r)` promises that every allowed token fits `r` tokens, so a
/// generation loop may skip its redraw copy: checked against `fits` for
/// every allowed token along walks, and by hand on a small language.
#[test]
fn always_fits_implies_every_allowed_token_fits() {
    let c = compiler();
    let compiled = c.compile(&Source::regex("abc|abd|(yes){1,3}")).unwrap();
    let m = compiled.matcher();
    // The shortest completion is never more than two tokens (after `a`:
    // `b`, `c`; after `y`: `e`, `s`), so the largest budget is 2.
    assert_eq!(compiled.index().max_tokens_to_accept(), Some(2));
    assert!(m.always_fits(3) && !m.always_fits(2));
    let mut rng = StdRng::seed_from_u64(3);
    for _ in 0..50 {
        let mut m = compiled.matcher();
        while !m.is_terminated() {
            let allowed: Vec<TokenId> = m.allowed().iter().collect();
            for r in 1..6 {
                if m.always_fits(r) {
                    assert!(allowed.iter().all(|&t| m.fits(t, r)), "r = {r}");
                }
            }
            assert!(m.accept_token(allowed[rng.random_range(0..allowed.len())]));
        }
    }
}

#[test]
fn override_stop_tokens_replace_the_eos_set() {
    // 299 has no bytes (past the tokenizer, inside the logits width): a
    // stop token of the matcher's own, as XGrammar's override_stop_tokens.
    let stop = TokenId(299);
    let compiled = compiler().compile(&Source::regex("(yes|no)")).unwrap();
    let mut m = compiled.matcher().with_stop_tokens([stop, stop]).unwrap();
    let mut row = vec![0u32; bitmask_words(300)];
    m.fill_bitmask(&mut row).unwrap();
    assert_eq!(bits(&row), vec![b'n' as u32, b'y' as u32, 257]);
    assert!(!m.is_allowed(stop), "no stop before the text is complete");
    assert!(m.accept_token(TokenId(257)));
    m.fill_bitmask(&mut row).unwrap();
    assert_eq!(
        bits(&row),
        vec![299],
        "the override stops, the EOS does not"
    );
    assert!(!m.accept_token(EOS), "the vocabulary's EOS is refused");
    assert_eq!(m.validate_tokens(&[EOS]), 0);
    assert_eq!(m.validate_tokens(&[stop, stop]), 1);
    assert!(m.fits(stop, 1));
    assert!(m.accept_token(stop) && m.is_terminated());
    m.fill_bitmask(&mut row).unwrap();
    assert!(bits(&row).is_empty(), "nothing after the stop token");
    assert_eq!(m.accept_tokens(&[b(b'x')]), Err(MatcherError::Finished));
    m.rollback(1).unwrap();
    assert!(!m.is_terminated() && m.is_allowed(stop));
    // Without an override the vocabulary's EOS is the stop token.
    let mut plain = compiled.matcher();
    assert!(plain.accept_tokens(&[TokenId(257), EOS]).is_ok() && plain.is_terminated());
    // A stop id past the logits width is an error naming it.
    assert_eq!(
        compiled
            .matcher()
            .with_stop_tokens([TokenId(300)])
            .unwrap_err(),
        MatcherError::StopToken {
            token: TokenId(300),
            width: 300
        }
    );
}

/// A stop id that is also an ordinary text token (e.g. a newline) is a stop
/// and nothing else: the bitmask must agree with `accept_token` on it, in
/// incomplete states too (regression: the row used to keep its text bit).
#[test]
fn override_stop_token_that_is_also_text_is_only_a_stop() {
    let compiled = compiler().compile(&Source::regex("a(a|b)*")).unwrap();
    let stop = b(b'b');
    let mut m = compiled.matcher().with_stop_tokens([stop]).unwrap();
    let mut row = vec![0u32; bitmask_words(300)];
    for step in 0..4 {
        m.fill_bitmask(&mut row).unwrap();
        for t in bits(&row) {
            assert!(
                m.is_allowed(TokenId(t)),
                "step {step}: bit {t} set but refused"
            );
        }
        assert_eq!(
            bits(&row).contains(&(b'b' as u32)),
            m.is_accepting(),
            "step {step}: the stop id is allowed exactly where the text is complete"
        );
        assert!(m.accept_token(b(b'a')));
    }
    assert!(m.accept_token(stop) && m.is_terminated());
}

#[test]
fn bitmask_of_an_odd_number_of_words() {
    // Logits width 257: nine words, the last holding only the EOS bit.
    let tokens = (0..=255u8).map(|c| (TokenId(c as u32), vec![c]));
    let vocab = Arc::new(Vocabulary::new(tokens, [TokenId(256)], 257).unwrap());
    let compiled = Compiler::new(vocab, CompilerConfig::default())
        .compile(&Source::regex("a"))
        .unwrap();
    let mut m = compiled.matcher();
    let mut row = vec![u32::MAX; bitmask_words(257)];
    assert_eq!(row.len(), 9);
    m.fill_bitmask(&mut row).unwrap();
    assert_eq!(bits(&row), vec![b'a' as u32]);
    assert!(m.accept_token(b(b'a')));
    m.fill_bitmask(&mut row).unwrap();
    assert_eq!(bits(&row), vec![256]);
}
