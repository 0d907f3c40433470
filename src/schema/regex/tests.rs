//! Tests of the extra-key language ([`super::object`]): a key matches exactly
//! when it is none of the declared names.

use super::*;
use crate::schema::Escapes;

#[test]
fn extra_keys_exclude_declared_names() {
    let re = regex::Regex::new(&format!(
        "^{}$",
        extra_key(&["a".into(), "ab".into(), "b\"c".into()], Escapes::ALL)
    ))
    .unwrap();
    for ok in [
        "\"\"",
        "\"x\"",
        "\"abc\"",
        "\"b\"",
        "\"aa\"",
        "\"b\\\"\"",
        "\"b\\\"cd\"",
    ] {
        assert!(re.is_match(ok), "{ok}");
    }
    for bad in ["\"a\"", "\"ab\"", "\"b\\\"c\""] {
        assert!(!re.is_match(bad), "{bad}");
    }
}

/// Random name sets over a small alphabet (shared prefixes, non-ASCII,
/// escapes, the empty name): a key matches exactly when it is none of
/// the names.
#[test]
fn extra_keys_match_exactly_the_other_keys() {
    use rand::{rngs::StdRng, Rng, SeedableRng};
    let alphabet = ['a', 'b', 'é', '"', '\\', '\n', '😀'];
    let mut rng = StdRng::seed_from_u64(7);
    let word = |rng: &mut StdRng| -> String {
        let n = rng.random_range(0..4);
        (0..n)
            .map(|_| alphabet[rng.random_range(0..alphabet.len())])
            .collect()
    };
    for _ in 0..200 {
        let names: Vec<String> = (0..rng.random_range(1..5))
            .map(|_| word(&mut rng))
            .collect();
        let re = regex::Regex::new(&format!("^{}$", extra_key(&names, Escapes::ALL))).unwrap();
        for _ in 0..50 {
            let k = word(&mut rng);
            let text = py_string(&k);
            assert_eq!(
                re.is_match(&text),
                !names.contains(&k),
                "key {text} names {names:?}"
            );
        }
    }
}
