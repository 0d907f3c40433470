//! Cooperative cancellation of a compile: a cancelled token or a passed
//! deadline stops `Compiler::compile_cancellable` with the typed error that
//! names it, and a token that never fires changes nothing.

use constrain::cancel::CancelToken;
use constrain::{CompileError, Compiler, CompilerConfig, DfaConfig, Source, TokenId, Vocabulary};
use std::sync::Arc;
use std::time::Duration;

fn compiler() -> Compiler {
    let tokens = (0..=255u8).map(|b| (TokenId(b as u32), vec![b]));
    let vocab = Arc::new(Vocabulary::new(tokens, [TokenId(256)], 257).unwrap());
    // Every DFA eager: the subset construction explores every state.
    let dfa = DfaConfig::default().lazy_states(None);
    Compiler::new(vocab, CompilerConfig::default().dfa(dfa))
}

/// A regex whose DFA has 2^12 states: many explored states.
const BIG: &str = "[ab]*a[ab]{12}";

#[test]
fn a_cancelled_token_stops_the_compile_with_cancelled() {
    let t = CancelToken::new();
    t.cancel();
    let r = compiler().compile_cancellable(&Source::regex(BIG), &t);
    assert!(matches!(r, Err(CompileError::Cancelled)), "{r:?}");
}

#[test]
fn a_passed_deadline_stops_the_compile_naming_its_budget() {
    let t = CancelToken::with_budget(Duration::ZERO);
    let r = compiler().compile_cancellable(&Source::regex(BIG), &t);
    match r {
        Err(e @ CompileError::TimedOut { limit_ms: 0 }) => {
            assert!(e.to_string().contains("0 ms"), "{e}")
        }
        r => panic!("{r:?}"),
    }
    // A schema, stopped between its phases.
    let s = Source::json_schema(serde_json::json!({"enum": ["x", "y"]}));
    let r = compiler().compile_cancellable(&s, &t);
    assert!(matches!(r, Err(CompileError::TimedOut { .. })), "{r:?}");
}

#[test]
fn a_token_that_never_fires_changes_nothing() {
    let c = compiler();
    let t = CancelToken::with_budget(Duration::from_secs(600));
    let a = c.compile_cancellable(&Source::regex(BIG), &t).unwrap();
    let b = c.compile_uncached(&Source::regex(BIG)).unwrap();
    assert_eq!(a.stats().dfa_states, b.stats().dfa_states);
    let mut m = a.matcher();
    for &x in b"ba" {
        assert!(m.accept_token(TokenId(x as u32)));
    }
}
