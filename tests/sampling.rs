//! The sampling pipeline: worked examples computed by hand, properties over
//! random logits, and a chi-square test of the draws.

use constrain::sampling::{
    apply_penalties, apply_temperature, draw, explain, greedy, min_p, probabilities, top_k, top_p,
    Sampler, SamplingConfig, SamplingError, Stage,
};
use constrain::{TokenId, TokenSet};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;

fn close(got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!((*g as f64 - w).abs() <= tol, "{got:?} vs {want:?}");
    }
}

fn cfg(f: impl FnOnce(&mut SamplingConfig)) -> SamplingConfig {
    let mut c = SamplingConfig::default();
    f(&mut c);
    c
}

fn ids(v: &[u32]) -> Vec<TokenId> {
    v.iter().map(|&i| TokenId(i)).collect()
}

// ---------------------------------------------------------------- worked examples

#[test]
fn softmax_at_several_temperatures() {
    // e^2, e^1, e^0 = 7.389056, 2.718282, 1 → Z = 11.107338.
    let l = [2.0f32, 1.0, 0.0];
    close(
        &probabilities(&l).unwrap(),
        &[0.665241, 0.244728, 0.090031],
        1e-6,
    );
    // T = 0.5: logits 4, 2, 0 → e^4 = 54.59815, e^2 = 7.389056, 1 → Z = 62.98721.
    let mut x = l;
    apply_temperature(&mut x, 0.5);
    close(
        &probabilities(&x).unwrap(),
        &[0.866813, 0.117310, 0.015876],
        1e-6,
    );
    // T = 2: logits 1, 0.5, 0 → e = 2.718282, 1.648721, 1 → Z = 5.367003.
    let mut x = l;
    apply_temperature(&mut x, 2.0);
    close(
        &probabilities(&x).unwrap(),
        &[0.506480, 0.307196, 0.186324],
        1e-6,
    );
    // T = 0: greedy, everything on the argmax.
    let mut x = l;
    apply_temperature(&mut x, 0.0);
    close(&probabilities(&x).unwrap(), &[1.0, 0.0, 0.0], 0.0);
    // The explainer agrees.
    let e = explain(&l, None, &[], &cfg(|c| c.temperature = 0.5)).unwrap();
    close(&e.final_probs, &[0.866813, 0.117310, 0.015876], 1e-6);
}

#[test]
fn top_k_keeps_the_k_best_and_breaks_ties_by_lowest_id() {
    let l = [1.0f32, 3.0, 3.0, 2.0, 0.0];
    let mut x = l;
    top_k(&mut x, 2);
    close(
        &probabilities(&x).unwrap(),
        &[0.0, 0.5, 0.5, 0.0, 0.0],
        1e-7,
    );
    let mut x = l;
    top_k(&mut x, 1); // the tie at 3 goes to id 1
    close(&probabilities(&x).unwrap(), &[0.0, 1.0, 0.0, 0.0, 0.0], 0.0);
    // k = 3: e^3, e^3, e^2 → Z = 47.5601.
    let mut x = l;
    top_k(&mut x, 3);
    close(
        &probabilities(&x).unwrap(),
        &[0.0, 0.422319, 0.422319, 0.155362, 0.0],
        1e-6,
    );
    // k = 0 is off.
    let mut x = l;
    top_k(&mut x, 0);
    assert_eq!(x, l);
}

#[test]
fn top_p_keeps_the_smallest_prefix_reaching_p() {
    // Probabilities 0.5, 0.3, 0.15, 0.05 (listed out of order on purpose).
    let l: Vec<f32> = [0.15f32, 0.5, 0.05, 0.3].iter().map(|p| p.ln()).collect();
    let run = |p: f32| {
        let mut x = l.clone();
        top_p(&mut x, p);
        probabilities(&x).unwrap()
    };
    // 0.5 < 0.75 <= 0.5 + 0.3: two tokens, renormalised 0.625 / 0.375.
    close(&run(0.75), &[0.0, 0.625, 0.0, 0.375], 1e-6);
    // 0.45 <= 0.5: the top token alone.
    close(&run(0.45), &[0.0, 1.0, 0.0, 0.0], 0.0);
    // Even a tiny p keeps the top token.
    close(&run(1e-6), &[0.0, 1.0, 0.0, 0.0], 0.0);
    // 0.9 needs three: 0.5, 0.3, 0.15 over 0.95.
    close(&run(0.9), &[0.157895, 0.526316, 0.0, 0.315789], 1e-6);
}

#[test]
fn min_p_keeps_tokens_above_a_fraction_of_the_best() {
    let l: Vec<f32> = [0.5f32, 0.3, 0.15, 0.05].iter().map(|p| p.ln()).collect();
    let run = |m: f32| {
        let mut x = l.clone();
        min_p(&mut x, m);
        probabilities(&x).unwrap()
    };
    // Bar 0.2 × 0.5 = 0.1: 0.05 goes.
    close(&run(0.2), &[0.526316, 0.315789, 0.157895, 0.0], 1e-6);
    // Bar 0.5 × 0.5 = 0.25: 0.5 and 0.3 stay.
    close(&run(0.5), &[0.625, 0.375, 0.0, 0.0], 1e-6);
    // Bar p_max: only the best.
    close(&run(1.0), &[1.0, 0.0, 0.0, 0.0], 0.0);
}

#[test]
fn a_repetition_penalty_flips_the_argmax() {
    let l = [3.0f32, 2.0, -1.0];
    assert_eq!(greedy(&l).unwrap(), TokenId(0));
    let c = cfg(|c| c.repetition_penalty = 2.0);
    let mut x = l;
    apply_penalties(&mut x, &ids(&[0, 2]), &c.penalties()).unwrap();
    // Positive logit divided (3 → 1.5), negative multiplied (-1 → -2).
    assert_eq!(x, [1.5, 2.0, -2.0]);
    assert_eq!(greedy(&x).unwrap(), TokenId(1));
    let mut s = Sampler::new(c.temperature(0.0), 0).unwrap();
    assert_eq!(
        s.sample(&mut l.clone(), None, &ids(&[0])).unwrap(),
        TokenId(1)
    );
    assert_eq!(s.sample(&mut l.clone(), None, &[]).unwrap(), TokenId(0));
}

#[test]
fn frequency_and_presence_penalties_are_additive() {
    let l = [3.0f32, 2.5];
    let pen = |f: f32, p: f32, last_n: Option<usize>, h: &[u32]| {
        let c = cfg(|c| {
            c.frequency_penalty = f;
            c.presence_penalty = p;
            c.penalty_last_n = last_n;
        });
        let mut x = l;
        apply_penalties(&mut x, &ids(h), &c.penalties()).unwrap();
        x
    };
    // Token 0 seen twice: 3 - 2 × 0.5 = 2.
    assert_eq!(pen(0.5, 0.0, None, &[0, 0]), [2.0, 2.5]);
    // Presence counts once: 3 - 0.4.
    assert_eq!(pen(0.0, 0.4, None, &[0, 0]), [2.6, 2.5]);
    // Both: 3 - (2 × 0.25 + 0.25), 2.5 - (0.25 + 0.25).
    assert_eq!(pen(0.25, 0.25, None, &[0, 1, 0]), [2.25, 2.0]);
    // Only the last token counts.
    assert_eq!(pen(0.5, 0.0, Some(1), &[0, 0, 1]), [3.0, 2.0]);
    assert_eq!(pen(0.5, 0.0, Some(0), &[0, 0, 1]), l);
}

#[test]
fn explain_lists_the_active_stages_in_order() {
    let c = cfg(|c| {
        c.temperature = 0.7;
        c.top_k = 3;
        c.top_p = 0.9;
        c.min_p = 0.05;
        c.repetition_penalty = 1.3;
        c.logit_bias = vec![(TokenId(5), 3.0)];
    });
    let l = [6.0f32, 5.0, 4.5, 3.5, 2.0, 0.0];
    let mut mask = TokenSet::new(6);
    for i in 0..5 {
        mask.insert(TokenId(i));
    }
    let e = explain(&l, Some(&mask), &ids(&[0, 0, 2]), &c).unwrap();
    let names: Vec<Stage> = e.stages.iter().map(|s| s.stage).collect();
    use Stage::*;
    assert_eq!(
        names,
        [
            Logits,
            Mask,
            LogitBias,
            Penalties,
            Temperature,
            TopK,
            TopP,
            MinP
        ]
    );
    for s in &e.stages {
        let sum: f32 = s.probs.iter().sum();
        assert!((sum - 1.0).abs() < 1e-5);
    }
    // Masked banana stays at 0 even after its +3 bias.
    assert!(e.stages[1..].iter().all(|s| s.probs[5] == 0.0));
}

#[test]
fn config_errors_name_the_parameter_and_range() {
    let cases: Vec<(SamplingConfig, &str)> = vec![
        (cfg(|c| c.temperature = -0.1), "temperature"),
        (cfg(|c| c.temperature = f32::NAN), "temperature"),
        (cfg(|c| c.temperature = f32::INFINITY), "temperature"),
        (cfg(|c| c.top_p = 0.0), "top_p"),
        (cfg(|c| c.top_p = 1.01), "top_p"),
        (cfg(|c| c.min_p = -0.01), "min_p"),
        (cfg(|c| c.min_p = 1.5), "min_p"),
        (cfg(|c| c.repetition_penalty = 0.0), "repetition_penalty"),
        (cfg(|c| c.frequency_penalty = f32::NAN), "frequency_penalty"),
        (
            cfg(|c| c.presence_penalty = f32::INFINITY),
            "presence_penalty",
        ),
        (
            cfg(|c| c.logit_bias = vec![(TokenId(1), f32::NAN)]),
            "logit_bias",
        ),
    ];
    for (c, name) in cases {
        let e = Sampler::new(c.clone(), 0)
            .err()
            .unwrap_or_else(|| panic!("{c:?} accepted"));
        let msg = e.to_string();
        assert!(msg.contains(name) && msg.contains("must be"), "{msg}");
    }
    assert!(SamplingConfig::greedy().validate().is_ok());
    assert!(cfg(|c| {
        c.top_p = 1.0;
        c.min_p = 1.0;
        c.top_k = 0;
        c.logit_bias = vec![(TokenId(0), f32::NEG_INFINITY)];
    })
    .validate()
    .is_ok());
}

#[test]
fn nan_is_removed_inf_is_certain_and_all_removed_is_an_error() {
    let mut s = Sampler::new(SamplingConfig::default(), 7).unwrap();
    let mut g = Sampler::new(SamplingConfig::greedy(), 7).unwrap();
    for _ in 0..50 {
        let t = s.sample(&mut [f32::NAN, 0.0, f32::NAN], None, &[]).unwrap();
        assert_eq!(t, TokenId(1));
        let t = s
            .sample(&mut [5.0, f32::INFINITY, 9.0, f32::INFINITY], None, &[])
            .unwrap();
        assert!(t == TokenId(1) || t == TokenId(3));
    }
    assert_eq!(
        g.sample(&mut [f32::NAN, -1.0, 0.5], None, &[]).unwrap(),
        TokenId(2)
    );
    assert_eq!(
        g.sample(&mut [9.0, f32::INFINITY, f32::INFINITY], None, &[])
            .unwrap(),
        TokenId(1)
    );
    let d = s
        .distribution(&mut [5.0, f32::INFINITY, 9.0, f32::INFINITY], None, &[])
        .unwrap();
    assert_eq!(d, vec![(TokenId(1), 0.5), (TokenId(3), 0.5)]);
    for sampler in [&mut s, &mut g] {
        for logits in [
            vec![f32::NAN, f32::NEG_INFINITY],
            vec![],
            vec![f32::NEG_INFINITY; 3],
        ] {
            let mut l = logits.clone();
            assert_eq!(
                sampler.sample(&mut l, None, &[]),
                Err(SamplingError::AllRemoved)
            );
        }
        // A mask that allows nothing finite.
        let mut mask = TokenSet::new(3);
        mask.insert(TokenId(0));
        let r = sampler.sample(&mut [f32::NAN, 1.0, 2.0], Some(&mask), &[]);
        assert_eq!(r, Err(SamplingError::AllRemoved));
        // A bias of -inf forbids even +inf.
        let mut b = Sampler::new(
            cfg(|c| c.logit_bias = vec![(TokenId(0), f32::NEG_INFINITY)]),
            0,
        )
        .unwrap();
        assert_eq!(
            b.sample(&mut [f32::INFINITY, 1.0], None, &[]).unwrap(),
            TokenId(1)
        );
    }
}

#[test]
fn out_of_range_ids_and_mask_width_are_errors() {
    let mut s = Sampler::new(cfg(|c| c.repetition_penalty = 1.2), 0).unwrap();
    let e = s.sample(&mut [1.0, 2.0], None, &ids(&[5])).unwrap_err();
    assert!(
        e.to_string().contains("history") && e.to_string().contains('5'),
        "{e}"
    );
    let e = s
        .sample(&mut [1.0, 2.0], Some(&TokenSet::new(3)), &[])
        .unwrap_err();
    assert_eq!(e, SamplingError::MaskWidth { mask: 3, logits: 2 });
    let mut b = Sampler::new(cfg(|c| c.logit_bias = vec![(TokenId(2), 1.0)]), 0).unwrap();
    assert!(matches!(
        b.sample(&mut [1.0, 2.0], None, &[]),
        Err(SamplingError::TokenOutOfRange {
            what: "logit_bias",
            ..
        })
    ));
}

// ---------------------------------------------------------------- properties

fn logit() -> impl Strategy<Value = f32> {
    prop_oneof![
        20 => -20.0f32..20.0,
        3 => (-8i32..8).prop_map(|i| i as f32 * 0.5), // ties
        1 => Just(f32::NAN),
        1 => Just(f32::NEG_INFINITY),
    ]
}

fn config() -> impl Strategy<Value = SamplingConfig> {
    (
        prop_oneof![1 => Just(0.0f32), 1 => Just(1.0f32), 4 => 0.05f32..3.0],
        prop_oneof![1 => Just(0usize), 2 => 1usize..40],
        prop_oneof![1 => Just(1.0f32), 2 => 0.01f32..1.0],
        prop_oneof![1 => Just(0.0f32), 1 => 0.0f32..1.0],
        prop_oneof![1 => Just(1.0f32), 1 => 0.5f32..2.0],
        -1.0f32..1.0,
        -1.0f32..1.0,
        proptest::option::of(0usize..8),
    )
        .prop_map(|(t, k, p, m, r, f, pr, n)| {
            SamplingConfig::default()
                .temperature(t)
                .top_k(k)
                .top_p(p)
                .min_p(m)
                .repetition_penalty(r)
                .frequency_penalty(f)
                .presence_penalty(pr)
                .penalty_last_n(n)
                .logit_bias(vec![])
        })
}

/// Logits with a mask over them (None, dense, or sparse), a history and a bias.
#[derive(Debug, Clone)]
struct Case {
    logits: Vec<f32>,
    mask: Option<Vec<bool>>,
    history: Vec<u32>,
    bias: Vec<(u32, f32)>,
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..400).prop_flat_map(|n| {
        (
            proptest::collection::vec(logit(), n),
            prop_oneof![
                1 => Just(None),
                1 => proptest::collection::vec(proptest::bool::weighted(0.9), n).prop_map(Some),
                1 => proptest::collection::vec(proptest::bool::weighted(0.05), n).prop_map(Some),
            ],
            proptest::collection::vec(0..n as u32, 0..12),
            proptest::collection::vec(
                (
                    0..n as u32,
                    prop_oneof![3 => -3.0f32..3.0, 1 => Just(f32::NEG_INFINITY)],
                ),
                0..3,
            ),
        )
            .prop_map(|(logits, mask, history, bias)| Case {
                logits,
                mask,
                history,
                bias,
            })
    })
}

fn token_set(bits: &[bool]) -> TokenSet {
    let mut s = TokenSet::new(bits.len());
    for (i, &b) in bits.iter().enumerate() {
        if b {
            s.insert(TokenId(i as u32));
        }
    }
    s
}

/// Is token `i` live after the mask and bias (so it may be picked)?
fn allowed(c: &Case, i: usize) -> bool {
    let masked_out = c.mask.as_ref().is_some_and(|m| !m[i]);
    let forbidden = c
        .bias
        .iter()
        .any(|&(id, v)| id as usize == i && v == f32::NEG_INFINITY);
    !masked_out && !forbidden && !c.logits[i].is_nan() && c.logits[i] != f32::NEG_INFINITY
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// The fast path (Sampler) and the stage-by-stage explainer agree: same
    /// support, same probabilities, and with the same seed the same token.
    /// Probabilities sum to 1, and nothing removed is ever picked.
    #[test]
    fn sampler_agrees_with_the_explainer(c in case(), mut conf in config(), seed in any::<u64>()) {
        conf.logit_bias = c.bias.iter().map(|&(i, v)| (TokenId(i), v)).collect();
        let mask = c.mask.as_deref().map(token_set);
        let history = ids(&c.history);
        let any_allowed = (0..c.logits.len()).any(|i| allowed(&c, i));
        let e = explain(&c.logits, mask.as_ref(), &history, &conf);
        let mut s = Sampler::new(conf.clone(), seed).unwrap();
        let got = s.sample(&mut c.logits.clone(), mask.as_ref(), &history);
        let dist = s.distribution(&mut c.logits.clone(), mask.as_ref(), &history);
        if !any_allowed {
            prop_assert_eq!(got, Err(SamplingError::AllRemoved));
            prop_assert!(e.is_err());
            return Ok(());
        }
        let e = e.unwrap();
        let t = got.unwrap();
        prop_assert!(allowed(&c, t.as_usize()), "picked removed token {}", t);
        prop_assert!(e.final_probs[t.as_usize()] > 0.0);
        let sum: f64 = e.final_probs.iter().map(|&p| p as f64).sum();
        prop_assert!((sum - 1.0).abs() < 1e-5, "sum {}", sum);
        let dist = dist.unwrap();
        let dsum: f64 = dist.iter().map(|&(_, p)| p as f64).sum();
        prop_assert!((dsum - 1.0).abs() < 1e-5);
        for (i, &p) in e.final_probs.iter().enumerate() {
            let q = dist.iter().find(|(id, _)| id.as_usize() == i).map_or(0.0, |&(_, q)| q);
            prop_assert!((p - q).abs() < 1e-5, "token {}: explainer {} sampler {}", i, p, q);
            if p > 0.0 {
                prop_assert!(allowed(&c, i));
            }
        }
        // Same seed, same pick, whichever way it is computed.
        let last = &e.stages.last().unwrap().logits;
        let want = if conf.temperature == 0.0 {
            greedy(last).unwrap()
        } else {
            draw(last, &mut StdRng::seed_from_u64(seed)).unwrap()
        };
        prop_assert_eq!(t, want);
    }

    /// Top-k keeps at most k tokens, and they are the k best.
    #[test]
    fn top_k_keeps_at_most_k(logits in proptest::collection::vec(logit(), 1..300), k in 1usize..50) {
        let mut x = logits.clone();
        top_k(&mut x, k);
        let kept: Vec<usize> = (0..x.len()).filter(|&i| x[i] > f32::NEG_INFINITY).collect();
        let live = logits.iter().filter(|&&v| v > f32::NEG_INFINITY).count();
        prop_assert_eq!(kept.len(), k.min(live));
        let worst_kept = kept.iter().map(|&i| logits[i]).fold(f32::INFINITY, f32::min);
        for i in 0..x.len() {
            if x[i] == f32::NEG_INFINITY && logits[i] > f32::NEG_INFINITY {
                prop_assert!(logits[i] <= worst_kept);
            }
        }
    }

    /// Top-p keeps a prefix of the descending order (ties: lowest id) whose
    /// mass reaches p, and no shorter prefix does.
    #[test]
    fn top_p_keeps_the_smallest_prefix(logits in proptest::collection::vec(logit(), 1..600), p in 0.01f32..1.0) {
        prop_assume!(logits.iter().any(|&v| v > f32::NEG_INFINITY));
        let probs = probabilities(&logits).unwrap();
        let mut x = logits.clone();
        top_p(&mut x, p);
        let mut order: Vec<usize> = (0..x.len()).filter(|&i| probs[i] > 0.0).collect();
        order.sort_by(|&a, &b| logits[b].partial_cmp(&logits[a]).unwrap().then(a.cmp(&b)));
        let kept = order.iter().take_while(|&&i| x[i] > f32::NEG_INFINITY).count();
        prop_assert!(kept >= 1);
        for &i in &order[kept..] {
            prop_assert!(x[i] == f32::NEG_INFINITY, "kept set is not a prefix");
        }
        let mass: f64 = order[..kept].iter().map(|&i| probs[i] as f64).sum();
        let without_last = mass - probs[order[kept - 1]] as f64;
        prop_assert!(mass >= p as f64 - 1e-5, "mass {} < p {}", mass, p);
        prop_assert!(without_last < p as f64 + 1e-5, "a shorter prefix ({}) already reaches {}", without_last, p);
    }

    /// Min-p keeps exactly the tokens at or above min_p × p_max.
    #[test]
    fn min_p_keeps_exactly_the_tokens_above_the_bar(logits in proptest::collection::vec(logit(), 1..300), m in 0.0f32..1.0) {
        prop_assume!(logits.iter().any(|&v| v > f32::NEG_INFINITY));
        let probs = probabilities(&logits).unwrap();
        let pmax = probs.iter().cloned().fold(0.0f32, f32::max);
        let bar = m as f64 * pmax as f64;
        let mut x = logits.clone();
        min_p(&mut x, m);
        for i in 0..x.len() {
            let p = probs[i] as f64;
            if (p - bar).abs() <= 1e-6 * pmax as f64 || probs[i] == 0.0 {
                continue; // at the bar, rounding decides
            }
            prop_assert_eq!(x[i] > f32::NEG_INFINITY, p >= bar, "token {} p {} bar {}", i, p, bar);
        }
    }

    /// The same seed gives the same sequence of draws.
    #[test]
    fn the_same_seed_gives_the_same_draws(logits in proptest::collection::vec(-5.0f32..5.0, 2..200), seed in any::<u64>(), conf in config()) {
        let mut a = Sampler::new(conf.clone(), seed).unwrap();
        let mut b = Sampler::new(conf, seed).unwrap();
        for _ in 0..20 {
            let ta = a.sample(&mut logits.clone(), None, &[]).unwrap();
            let tb = b.sample(&mut logits.clone(), None, &[]).unwrap();
            prop_assert_eq!(ta, tb);
        }
    }
}

// ---------------------------------------------------------------- at Qwen's width

const QWEN: usize = 151_936;

fn random_logits(n: usize, seed: u64) -> Vec<f32> {
    use rand::Rng;
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.random::<f32>() * 20.0 - 10.0).collect()
}

#[test]
fn qwen_width_masked_and_unmasked_agree_with_the_explainer() {
    let logits = random_logits(QWEN, 1);
    let history: Vec<TokenId> = (0..256).map(|i| TokenId((i * 577) % QWEN as u32)).collect();
    let conf = cfg(|c| {
        c.temperature = 0.7;
        c.top_k = 50;
        c.top_p = 0.9;
        c.min_p = 0.05;
        c.repetition_penalty = 1.1;
        c.frequency_penalty = 0.2;
    });
    let mut mask = TokenSet::new(QWEN);
    for i in (0..QWEN as u32).step_by(1500) {
        mask.insert(TokenId(i));
    }
    let no_top_k = conf.clone().top_k(0);
    for (m, c) in [
        (None, &conf),
        (Some(&mask), &conf),
        (None, &no_top_k),
        (Some(&mask), &no_top_k),
    ] {
        let e = explain(&logits, m, &history, c).unwrap();
        let mut s = Sampler::new(c.clone(), 3).unwrap();
        let d = s.distribution(&mut logits.clone(), m, &history).unwrap();
        let support: Vec<usize> = (0..QWEN).filter(|&i| e.final_probs[i] > 0.0).collect();
        assert_eq!(
            d.iter().map(|(t, _)| t.as_usize()).collect::<Vec<_>>(),
            support
        );
        for &(t, p) in &d {
            assert!((p - e.final_probs[t.as_usize()]).abs() < 1e-6);
            if let Some(m) = m {
                assert!(m.contains(t));
            }
        }
        let mut g = Sampler::new(c.clone().temperature(0.0), 0).unwrap();
        let t = g.sample(&mut logits.clone(), m, &history).unwrap();
        assert_eq!(t, greedy(&e.stages.last().unwrap().logits).unwrap());
    }
}

// ---------------------------------------------------------------- statistics

/// Chi-square statistic of `counts` against `probs` over `draws` samples.
fn chi_square(counts: &[u64], probs: &[f64], draws: u64) -> f64 {
    counts
        .iter()
        .zip(probs)
        .filter(|(_, &p)| p > 0.0)
        .map(|(&c, &p)| {
            let e = p * draws as f64;
            (c as f64 - e).powi(2) / e
        })
        .sum()
}

#[test]
fn draws_follow_the_final_distribution() {
    // Six tokens; top-k 5 removes the worst, T = 0.8 reshapes the rest.
    let logits = [1.0f32, 0.5, 0.0, -0.5, -1.0, 2.0];
    let conf = cfg(|c| {
        c.temperature = 0.8;
        c.top_k = 5;
    });
    let want: Vec<f64> = explain(&logits, None, &[], &conf)
        .unwrap()
        .final_probs
        .iter()
        .map(|&p| p as f64)
        .collect();
    assert_eq!(want[4], 0.0);
    let draws = 40_000u64;
    for seed in [1u64, 2, 3] {
        let mut s = Sampler::new(conf.clone(), seed).unwrap();
        let mut counts = [0u64; 6];
        for _ in 0..draws {
            counts[s.sample(&mut logits.clone(), None, &[]).unwrap().as_usize()] += 1;
        }
        assert_eq!(counts[4], 0, "a removed token was drawn");
        // 4 degrees of freedom: P(χ² > 35) ≈ 5e-7.
        let chi2 = chi_square(&counts, &want, draws);
        assert!(
            chi2 < 35.0,
            "seed {seed}: chi2 {chi2}, counts {counts:?}, want {want:?}"
        );
    }
}

#[test]
fn draws_at_qwen_width_follow_the_distribution() {
    let logits = random_logits(QWEN, 9);
    let conf = cfg(|c| {
        c.temperature = 0.7;
        c.top_k = 20;
    });
    let mut s = Sampler::new(conf, 11).unwrap();
    let dist = s.distribution(&mut logits.clone(), None, &[]).unwrap();
    assert_eq!(dist.len(), 20);
    let probs: Vec<f64> = dist.iter().map(|&(_, p)| p as f64).collect();
    let draws = 20_000u64;
    let mut counts = vec![0u64; dist.len()];
    let mut work = logits.clone();
    for _ in 0..draws {
        work.copy_from_slice(&logits);
        let t = s.sample(&mut work, None, &[]).unwrap();
        let i = dist
            .iter()
            .position(|&(id, _)| id == t)
            .expect("drawn token outside the top-k");
        counts[i] += 1;
    }
    // 19 degrees of freedom: P(χ² > 60) ≈ 4e-6.
    let chi2 = chi_square(&counts, &probs, draws);
    assert!(chi2 < 60.0, "chi2 {chi2}");
}
