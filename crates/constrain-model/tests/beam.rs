//! Constrained beam search with scripted models: the output is always in the
//! language (checked with the `regex` crate), budget-safe, `N = 1` is the
//! greedy loop, the result never scores worse than greedy's, and on a model
//! built for it beam search finds the likelier sequence greedy misses.

use constrain::Matcher;
use constrain_model::generate::{beam_search, BeamConfig};
use constrain_model::generate::{generate, GenerateConfig, GenerateError};
use constrain_testkit::tiny::{regex_index as index, token_id as id};
use constrain_testkit::{tiny, FakeModel};
use std::sync::Arc;

fn random_model(width: usize, salt: u64) -> FakeModel {
    FakeModel::random(width, salt)
}

const RE: &str =
    r#"\{"name":"(alpha|beta|gamma)","tags":\[("[a-z]{1,4}"(,"[a-z]{1,4}"){0,3})?\]\}"#;

#[test]
fn outputs_are_in_the_language_and_never_worse_than_greedy() {
    let t = tiny::tokenizer().unwrap();
    let vocab = Arc::new(t.vocab.clone());
    let width = vocab.logits_width();
    let idx = index(RE, &vocab);
    let oracle = regex::Regex::new(&format!("^(?:{RE})$")).unwrap();
    let prompt = t.tokenizer.encode("tags please").unwrap();
    let needed = Matcher::from_index(idx.clone()).tokens_to_accept().unwrap() as usize;
    for salt in 0..6u64 {
        for beams in [2, 3, 4] {
            for max_tokens in [needed, needed + 3, 60] {
                for penalty in [0.0, 1.0, 2.0] {
                    let cfg = BeamConfig::default()
                        .beams(beams)
                        .length_penalty(penalty)
                        .max_tokens(max_tokens)
                        .jump_forward(true);
                    let out = beam_search(
                        &mut random_model(width, salt),
                        &vocab,
                        Some(&t.tokenizer),
                        &Matcher::from_index(idx.clone()),
                        &prompt,
                        &cfg,
                    )
                    .unwrap();
                    let what = format!("salt {salt} beams {beams} max {max_tokens} A {penalty}");
                    assert!(out.accepted, "{what}");
                    assert!(out.tokens.len() <= max_tokens, "{what}");
                    let text = out.text();
                    assert!(oracle.is_match(&text), "{what}: {text:?}");
                    assert!(
                        out.score >= out.greedy.score,
                        "{what}: {} < greedy {}",
                        out.score,
                        out.greedy.score
                    );
                    for c in &out.candidates {
                        let s = String::from_utf8(vocab.decode(&c.tokens)).unwrap();
                        assert!(oracle.is_match(&s), "{what}: candidate {s:?}");
                        assert!(c.tokens.len() <= max_tokens);
                        assert!(c.score <= out.score || out.from_greedy);
                    }
                }
            }
        }
    }
}

#[test]
fn one_beam_is_greedy() {
    let t = tiny::tokenizer().unwrap();
    let vocab = Arc::new(t.vocab.clone());
    let width = vocab.logits_width();
    let idx = index(RE, &vocab);
    let prompt = t.tokenizer.encode("x").unwrap();
    for salt in 0..5 {
        for jump in [true, false] {
            let mut m = Matcher::from_index(idx.clone());
            let g = generate(
                &mut random_model(width, salt),
                &vocab,
                Some(&t.tokenizer),
                Some(&mut m),
                &prompt,
                &GenerateConfig::greedy(50).jump_forward(jump),
                &mut |_| {},
            )
            .unwrap();
            let cfg = BeamConfig::default()
                .beams(1)
                .length_penalty(1.0)
                .max_tokens(50)
                .jump_forward(jump);
            let b = beam_search(
                &mut random_model(width, salt),
                &vocab,
                Some(&t.tokenizer),
                &Matcher::from_index(idx.clone()),
                &prompt,
                &cfg,
            )
            .unwrap();
            assert_eq!(b.tokens, g.tokens);
            assert_eq!(b.bytes, g.bytes);
            assert!(b.from_greedy);
        }
    }
}

/// `[ac][xyz]`: the model prefers `a` (.55 against .45) but after `a` it
/// spreads evenly over x, y, z (1/3 each), while after `c` it is sure of `x`.
/// Greedy: a x, .55 · 1/3 = .18. Two beams: c x, about .45.
#[test]
fn beam_finds_the_likelier_sequence() {
    let t = tiny::tokenizer().unwrap();
    let vocab = Arc::new(t.vocab.clone());
    let width = vocab.logits_width();
    let idx = index("[ac][xyz]", &vocab);
    let (a, c, x, y, z) = (
        id(&vocab, b"a"),
        id(&vocab, b"c"),
        id(&vocab, b"x"),
        id(&vocab, b"y"),
        id(&vocab, b"z"),
    );
    let prompt = t.tokenizer.encode("go").unwrap();
    let plen = prompt.len();
    let model = move || {
        FakeModel::new(width, move |seq| {
            let mut l = vec![-30.0f32; width];
            match seq.len() - plen {
                0 => {
                    l[a.as_usize()] = (0.55f32).ln();
                    l[c.as_usize()] = (0.45f32).ln();
                }
                _ if seq[plen] == a => {
                    for t in [x, y, z] {
                        l[t.as_usize()] = 0.0;
                    }
                }
                _ => {
                    l[x.as_usize()] = 10.0;
                }
            }
            l
        })
    };
    let cfg = BeamConfig::default()
        .beams(2)
        .length_penalty(1.0)
        .max_tokens(5)
        .jump_forward(true);
    let out = beam_search(
        &mut model(),
        &vocab,
        Some(&t.tokenizer),
        &Matcher::from_index(idx.clone()),
        &prompt,
        &cfg,
    )
    .unwrap();
    assert_eq!(out.greedy.tokens, [a, x]);
    assert!(
        (out.greedy.logprob - (0.55f64 / 3.0).ln()).abs() < 1e-4,
        "{}",
        out.greedy.logprob
    );
    assert_eq!(out.text(), "cx");
    assert!(!out.from_greedy);
    assert!((out.logprob - 0.45f64.ln()).abs() < 1e-3, "{}", out.logprob);
    // Width 1 is greedy's answer.
    let cfg1 = cfg.beams(1);
    let g = beam_search(
        &mut model(),
        &vocab,
        Some(&t.tokenizer),
        &Matcher::from_index(idx),
        &prompt,
        &cfg1,
    )
    .unwrap();
    assert_eq!(g.text(), "ax");
}

#[test]
fn bad_requests_are_errors() {
    let t = tiny::tokenizer().unwrap();
    let vocab = Arc::new(t.vocab.clone());
    let width = vocab.logits_width();
    let idx = index(RE, &vocab);
    let prompt = t.tokenizer.encode("x").unwrap();
    let m = Matcher::from_index(idx);
    let run =
        |cfg: BeamConfig| beam_search(&mut random_model(width, 0), &vocab, None, &m, &prompt, &cfg);
    assert!(matches!(
        run(BeamConfig::default().beams(0)),
        Err(GenerateError::Beam(_))
    ));
    assert!(run(BeamConfig::default().length_penalty(f32::NAN)).is_err());
    assert!(matches!(
        run(BeamConfig::default().max_tokens(3)),
        Err(GenerateError::BudgetTooSmall { .. })
    ));
}
