//! Random structural tags held to the testkit's reference interpreter
//! (`constrain_testkit::check::check_tag_case`): the matcher accepts
//! exactly the texts the interpreter accepts, its masks are never empty,
//! EOS is allowed exactly where the text is complete, and a reached state
//! can always be completed. The `tag_walk` fuzz target runs the same check
//! on inputs libFuzzer chooses; this runs seeded inputs in the default test.

use constrain_testkit::check::{check_tag_case, random_tag, TagCase};
use rand::{rngs::StdRng, Rng, SeedableRng};

#[test]
fn random_tags_match_the_reference() {
    let mut rng = StdRng::seed_from_u64(0x7a65);
    let (mut checked, mut refused) = (0, 0);
    for k in 0..2000u64 {
        let bytes: Vec<u8> = (0..48).map(|_| rng.random()).collect();
        let case = TagCase {
            tag: random_tag(&bytes),
            texts: Vec::new(),
            seed: k,
            choices: (0..32).map(|_| rng.random()).collect(),
        };
        match check_tag_case(&case) {
            Ok(true) => checked += 1,
            Ok(false) => refused += 1,
            Err(v) => panic!("{v}\ncase: {}", serde_json::to_string(&case).unwrap()),
        }
    }
    println!("{checked} tags checked, {refused} refused");
    // The generator makes mostly tags that compile: a check that checks.
    assert!(checked >= 1500, "{checked} checked, {refused} refused");
}
