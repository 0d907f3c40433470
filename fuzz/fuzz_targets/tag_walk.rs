//! `tag_walk`: a random structural tag (built by the testkit's `random_tag`
//! from the input bytes: `const_string`, `regex`, `any_text` with
//! `excludes`, `sequence`, `or`, `optional` / `star` / `plus` / `repeat`,
//! `tag`, depth ≤ 3), texts over `a b < > / x`, and walk choices.
//!
//! Invariants (all in `constrain_testkit::check::check_tag_case`, which
//! `crates/constrain-testkit/tests/tags_random.rs` runs on seeded inputs):
//! the matcher accepts exactly the texts the testkit's reference
//! interpreter accepts; on walks the mask is never empty, EOS is allowed
//! exactly where the text is complete, an allowed token is always accepted,
//! and a reached state can be completed.
//!
//! On a violation the panic message carries the case as JSON.
#![no_main]

use arbitrary::Arbitrary;
use constrain_testkit::check::{check_tag_case, random_tag, TagCase, TAG_POOL};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input {
    tag: Vec<u8>,
    texts: Vec<Vec<u8>>,
    seed: u64,
    choices: Vec<u8>,
}

fuzz_target!(|input: Input| {
    let case = TagCase {
        tag: random_tag(&input.tag),
        texts: input
            .texts
            .iter()
            .take(16)
            .map(|t| t.iter().take(12).map(|&b| TAG_POOL[b as usize % TAG_POOL.len()]).collect())
            .collect(),
        seed: input.seed,
        choices: input.choices.iter().take(64).copied().collect(),
    };
    if let Err(v) = check_tag_case(&case) {
        panic!("{v}\ncase: {}", serde_json::to_string(&case).unwrap_or_default());
    }
});
