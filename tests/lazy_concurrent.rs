//! The lazy index shared by many threads at once: matchers on several
//! threads walk one lazy index (determinized and published on first visit,
//! read without a lock after) while each checks every answer against the
//! eager index of the same pattern, built whole up front.

use constrain::dfa::{ByteDfa, DfaConfig};
use constrain::index::{IndexConfig, TokenIndex};
use constrain::vocab::{TokenId, Vocabulary};
use constrain::Matcher;
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::sync::Arc;

/// Every single byte (ids 0..=255), a few multi-byte tokens, EOS last.
fn vocab() -> Arc<Vocabulary> {
    let multi: [&[u8]; 12] = [
        b"ab", b"\"a", b"12", b"true", b", ", b"\": ", b"name", b"\"kind", b"alpha\"", b"{\"",
        b"\"}", b"zz",
    ];
    let mut toks: Vec<(TokenId, Vec<u8>)> =
        (0..=255u8).map(|b| (TokenId(b as u32), vec![b])).collect();
    for (i, m) in multi.iter().enumerate() {
        toks.push((TokenId(256 + i as u32), m.to_vec()));
    }
    let eos = TokenId(256 + multi.len() as u32);
    Arc::new(Vocabulary::new(toks, [eos], eos.0 as usize + 1).unwrap())
}

#[test]
fn threads_walking_one_lazy_index_agree_with_the_eager_one() {
    let vocab = vocab();
    let cfg = IndexConfig::default().threads(1);
    for re in [
        r#"\{"name": "[a-z]{1,12}", "kind": (?:"alpha"|"beta"|"gamma")(?:, "n": -?[0-9]+)?\}"#,
        r#"\[(?:"(?:[^"\\]|\\.)*"(?:, ?"(?:[^"\\]|\\.)*"){0,3})?\]"#,
        r"(?:ab|cd|abcdx){1,6}[0-9]{0,20}",
    ] {
        let eager = Arc::new(
            TokenIndex::build(
                &ByteDfa::new(re, &DfaConfig::default()).unwrap(),
                vocab.clone(),
                &cfg,
            )
            .unwrap(),
        );
        // A threshold of one state: everything past the start is lazy.
        let dfa_cfg = DfaConfig::default().lazy_states(Some(1));
        let lazy = Arc::new(
            TokenIndex::build_dfa(ByteDfa::build(re, &dfa_cfg).unwrap(), vocab.clone(), &cfg)
                .unwrap(),
        );
        assert!(lazy.is_lazy(), "{re}");
        std::thread::scope(|scope| {
            for seed in 0..8u64 {
                let (eager, lazy) = (eager.clone(), lazy.clone());
                scope.spawn(move || {
                    let mut rng = StdRng::seed_from_u64(seed);
                    for _ in 0..40 {
                        let mut ge = Matcher::from_index(eager.clone());
                        let mut gl = Matcher::from_index(lazy.clone());
                        for step in 0..80 {
                            assert_eq!(ge.allowed(), gl.allowed(), "{re}: step {step}");
                            assert_eq!(ge.is_accepting(), gl.is_accepting(), "{re}");
                            assert_eq!(ge.tokens_to_accept(), gl.tokens_to_accept(), "{re}");
                            assert_eq!(ge.forced_bytes(), gl.forced_bytes(), "{re}");
                            let allowed: Vec<TokenId> = ge.allowed().iter().collect();
                            if allowed.is_empty() {
                                break;
                            }
                            let t = allowed[rng.random_range(0..allowed.len())];
                            // A token the masks refuse is refused by both.
                            let other = TokenId(rng.random_range(0..256));
                            assert_eq!(ge.is_allowed(other), gl.is_allowed(other), "{re}");
                            if ge.accept_token(t) != gl.accept_token(t) {
                                panic!("{re}: accept differs at step {step}");
                            }
                            if ge.is_terminated() {
                                assert!(gl.is_terminated(), "{re}");
                                break;
                            }
                        }
                    }
                });
            }
        });
        assert!(lazy.lazy_limit_error().is_none(), "{re}");
    }
}
