//! Beam search's step trace, on scripted models: it is the winning
//! hypothesis's (each step recomputed here from the model's logits at that
//! hypothesis's prefix), tracing changes nothing about the search, the
//! steps' log-probabilities are the ones the search scored (so the score is
//! `sequence_logprob / steps^A`), and when greedy's completion wins its
//! jump-forward tokens are forced steps.

use constrain::vocab::{TokenId, Vocabulary};
use constrain::{Matcher, TokenIndex};
use constrain_model::generate::{
    beam_search, beam_search_traced, generate_traced, BeamConfig, BeamGeneration, GenerateConfig,
};
use constrain_model::trace::{TraceStep, TOP_LOGITS};
use constrain_testkit::tiny::{regex_index as index, token_id as id};
use constrain_testkit::{tiny, FakeModel};
use std::sync::Arc;

fn lse(xs: impl Iterator<Item = f32>) -> f64 {
    let xs: Vec<f64> = xs.map(f64::from).collect();
    let m = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    m + xs.iter().map(|x| (x - m).exp()).sum::<f64>().ln()
}

fn ids(steps: &[TraceStep]) -> Vec<TokenId> {
    steps.iter().map(|s| TokenId(s.token.id)).collect()
}

/// The checks every beam trace passes: one step per output token (and the
/// EOS that ended it), the score is `sequence_logprob / steps^A`, and each
/// sampled step is the one of the output's own prefix, recomputed from
/// `logits_after`.
fn check_trace(
    out: &BeamGeneration,
    steps: &[TraceStep],
    a: f32,
    idx: &Arc<TokenIndex>,
    vocab: &Vocabulary,
    prompt: &[TokenId],
    logits_after: &dyn Fn(&[TokenId]) -> Vec<f32>,
) {
    let got = ids(steps);
    assert_eq!(&got[..out.tokens.len()], &out.tokens[..]);
    assert!(got.len() == out.tokens.len() || got.len() == out.tokens.len() + 1);
    if got.len() > out.tokens.len() {
        assert!(vocab.is_eos(*got.last().unwrap()));
    }
    let bytes: Vec<u8> = steps.iter().flat_map(|s| s.token.bytes.clone()).collect();
    assert_eq!(bytes, out.bytes);
    // The search's own numbers: summed in the search's order.
    let sum: f64 = steps.iter().map(|s| s.logprob).sum();
    assert_eq!(sum, out.logprob);
    let want = sum / (steps.len() as f64).powf(a as f64);
    assert!((out.score - want).abs() < 1e-12, "{} vs {want}", out.score);
    let mut m = Matcher::from_index(idx.clone());
    let mut seq = prompt.to_vec();
    for (i, s) in steps.iter().enumerate() {
        let t = TokenId(s.token.id);
        assert_eq!(s.step, i);
        let l = logits_after(&seq);
        let allowed = m.allowed();
        let lp = l[t.as_usize()] as f64 - lse(allowed.iter().map(|u| l[u.as_usize()]));
        assert!(
            (s.logprob - lp).abs() < 1e-9,
            "step {i}: {} vs {lp}",
            s.logprob
        );
        if s.forced {
            assert!(s.top.is_empty());
            assert_eq!(s.token.logit, None);
        } else {
            // This prefix's logits and mask, not a sibling's.
            assert_eq!(s.token.logit, Some(l[t.as_usize()]));
            assert_eq!(s.allowed_count, allowed.len());
            assert_eq!(s.top.len(), TOP_LOGITS.min(l.len()));
            for e in &s.top {
                assert_eq!(e.logit, l[e.id as usize]);
                assert_eq!(e.allowed, allowed.contains(TokenId(e.id)));
            }
        }
        m.advance(t).unwrap();
        seq.push(t);
    }
}

/// `[ac][xyz]`: after one step the leading hypothesis is `a` (.55), but the
/// winner is `c x` (.45). The trace is the winner's: `c` then `x`, with the
/// logits of the prompt and of `c`.
#[test]
fn the_trace_follows_the_winner_not_the_leader() {
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
    let f = move |seq: &[TokenId]| {
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
            _ => l[x.as_usize()] = 10.0,
        }
        l
    };
    let cfg = BeamConfig::default()
        .beams(2)
        .length_penalty(1.0)
        .max_tokens(5)
        .jump_forward(true);
    let m = Matcher::from_index(idx.clone());
    let plain = beam_search(
        &mut FakeModel::new(width, f),
        &vocab,
        Some(&t.tokenizer),
        &m,
        &prompt,
        &cfg,
    )
    .unwrap();
    let (out, steps) = beam_search_traced(
        &mut FakeModel::new(width, f),
        &vocab,
        Some(&t.tokenizer),
        &m,
        &prompt,
        &cfg,
    )
    .unwrap();
    assert_eq!(out.text(), "cx");
    assert!(!out.from_greedy);
    assert_eq!((out.tokens.clone(), out.score), (plain.tokens, plain.score));
    assert_eq!(ids(&steps), [c, x]);
    assert!(steps.iter().all(|s| !s.forced));
    // The first step shows `a` above the chosen `c`.
    assert_eq!(steps[0].top[0].id, a.0);
    assert!((steps[0].logprob - 0.45f64.ln()).abs() < 1e-3);
    check_trace(&out, &steps, 1.0, &idx, &vocab, &prompt, &f);
}

const RE: &str =
    r#"\{"name":"(alpha|beta|gamma)","tags":\[("[a-z]{1,4}"(,"[a-z]{1,4}"){0,3})?\]\}"#;

/// Over random models, widths, budgets and penalties: tracing changes
/// nothing about the search, and the trace is the output's.
#[test]
fn traced_search_is_the_same_search_and_its_trace_is_the_outputs() {
    let t = tiny::tokenizer().unwrap();
    let vocab = Arc::new(t.vocab.clone());
    let width = vocab.logits_width();
    let idx = index(RE, &vocab);
    let prompt = t.tokenizer.encode("tags please").unwrap();
    let needed = Matcher::from_index(idx.clone()).tokens_to_accept().unwrap() as usize;
    let mut winners = [0usize; 2];
    for salt in 0..6u64 {
        let f = constrain_testkit::hashed_logits(width, salt);
        let logits_after = |seq: &[TokenId]| f(seq);
        for beams in [2, 3] {
            for (max_tokens, penalty) in [(needed + 2, 1.0), (60, 0.0), (60, 1.5)] {
                let cfg = BeamConfig::default()
                    .beams(beams)
                    .length_penalty(penalty)
                    .max_tokens(max_tokens)
                    .jump_forward(true);
                let m = Matcher::from_index(idx.clone());
                let run = || FakeModel::new(width, f.clone());
                let plain =
                    beam_search(&mut run(), &vocab, Some(&t.tokenizer), &m, &prompt, &cfg).unwrap();
                let (out, steps) =
                    beam_search_traced(&mut run(), &vocab, Some(&t.tokenizer), &m, &prompt, &cfg)
                        .unwrap();
                let what = format!("salt {salt} beams {beams} max {max_tokens} A {penalty}");
                assert_eq!(out.tokens, plain.tokens, "{what}");
                assert_eq!(out.score, plain.score, "{what}");
                assert_eq!(out.from_greedy, plain.from_greedy, "{what}");
                assert_eq!(out.candidates, plain.candidates, "{what}");
                check_trace(&out, &steps, penalty, &idx, &vocab, &prompt, &logits_after);
                // Hypotheses grow token by token: only greedy's completion
                // has forced steps.
                if !out.from_greedy {
                    assert!(steps.iter().all(|s| !s.forced), "{what}");
                }
                winners[out.from_greedy as usize] += 1;
            }
        }
    }
    // Both kinds of winner were traced.
    assert!(winners[0] > 0 && winners[1] > 0, "{winners:?}");
}

/// A model sure of one path, greedy's own (jump-forward included): greedy's
/// completion wins (the search finds nothing better), and its trace marks
/// forced exactly the tokens the greedy loop forced. Width 1 is the same.
#[test]
fn a_greedy_winner_keeps_its_forced_steps() {
    let t = tiny::tokenizer().unwrap();
    let vocab = Arc::new(t.vocab.clone());
    let width = vocab.logits_width();
    let idx = index(RE, &vocab);
    let prompt = t.tokenizer.encode("x").unwrap();
    let plen = prompt.len();
    let greedy = GenerateConfig::greedy(60);
    let mut m = Matcher::from_index(idx.clone());
    let (_, path) = generate_traced(
        &mut FakeModel::random(width, 3),
        &vocab,
        Some(&t.tokenizer),
        Some(&mut m),
        &prompt,
        &greedy,
        &mut |_| {},
    )
    .unwrap();
    let forced: Vec<bool> = path.iter().map(|s| s.forced).collect();
    assert!(
        forced.iter().any(|&f| f),
        "the regex forces `{{\"name\":\"`"
    );
    let path = ids(&path);
    // Sure of the path (logit 10 against -30), flat off it.
    let sure = {
        let path = path.clone();
        move |seq: &[TokenId]| {
            let out = &seq[plen..];
            let mut l = vec![-30.0f32; width];
            match path.get(out.len()) {
                Some(&next) if path.starts_with(out) => l[next.as_usize()] = 10.0,
                _ => l.iter_mut().for_each(|x| *x = 0.0),
            }
            l
        }
    };
    for beams in [1, 2, 3] {
        let cfg = BeamConfig::default()
            .beams(beams)
            .length_penalty(1.0)
            .max_tokens(60)
            .jump_forward(true);
        let (out, steps) = beam_search_traced(
            &mut FakeModel::new(width, sure.clone()),
            &vocab,
            Some(&t.tokenizer),
            &Matcher::from_index(idx.clone()),
            &prompt,
            &cfg,
        )
        .unwrap();
        assert!(out.from_greedy, "beams {beams}");
        assert_eq!(ids(&steps), path, "beams {beams}");
        let got: Vec<bool> = steps.iter().map(|s| s.forced).collect();
        assert_eq!(got, forced, "beams {beams}");
        check_trace(&out, &steps, 1.0, &idx, &vocab, &prompt, &sure);
    }
}
