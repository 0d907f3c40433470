//! `gbnf_compile`: a small random GBNF grammar (built by the testkit's
//! `random_gbnf` from the input bytes, so nearly every input parses) with
//! texts, a small vocabulary and walk choices.
//!
//! Invariants (all in `constrain_testkit::check::check_gbnf_case`, which
//! `crates/constrain-testkit/tests/fuzz_regressions.rs` replays): the
//! compiled matcher accepts only texts the testkit's Earley recognizer
//! accepts, and every text it accepts when the grammar has no recursion or
//! compiles to the pushdown engine (recursion beyond the immediate kind,
//! exact within its stack limits); every allowed token keeps a completion
//! reachable (for the pushdown engine: a walk steered by the choices, then
//! finished by budget descent, ends in a text the recognizer accepts); a
//! walk of allowed tokens ending in EOS yields a text the recognizer
//! accepts. Parse errors, left
//! recursion, empty languages and limits are refusals, never panics.
//!
//! On a violation the panic message carries the case as JSON: save it under
//! `fuzz/regressions/gbnf_compile/NAME.json`.
#![no_main]

use arbitrary::Arbitrary;
use constrain_testkit::check::{check_gbnf_case, random_gbnf, GbnfCase, GBNF_POOL};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input {
    grammar: Vec<u8>,
    texts: Vec<Vec<u8>>,
    tokens: Vec<Vec<u8>>,
    max_depth: u8,
    seed: u64,
    choices: Vec<u8>,
}

fn chars(bytes: &[u8], max: usize) -> String {
    bytes
        .iter()
        .take(max)
        .map(|&b| GBNF_POOL[b as usize % GBNF_POOL.len()])
        .collect()
}

fuzz_target!(|input: Input| {
    let case = GbnfCase {
        grammar: random_gbnf(&input.grammar),
        texts: input.texts.iter().take(16).map(|t| chars(t, 8)).collect(),
        tokens: input
            .tokens
            .iter()
            .take(24)
            .map(|t| chars(t, 3).into_bytes())
            .collect(),
        max_depth: (input.max_depth % 4) as usize,
        seed: input.seed,
        choices: input.choices.iter().take(64).copied().collect(),
    };
    if let Err(v) = check_gbnf_case(&case) {
        panic!(
            "{v}\ncase: {}",
            serde_json::to_string(&case).unwrap_or_default()
        );
    }
});
