//! Speculative sampling keeps the target's distribution: many seeded draws
//! through draft-then-verify, compared with the target by a chi-square
//! goodness-of-fit test.

use constrain::sampling::{
    apply_mask, probabilities, speculation, speculative_sample, verify, Verdict,
};
use constrain::{TokenId, TokenSet};
use rand::rngs::StdRng;
use rand::SeedableRng;

/// Critical values of the chi-square distribution at significance 0.001
/// (upper tail), by degrees of freedom 1..=10.
const CHI2_999: [f64; 10] = [
    10.828, 13.816, 16.266, 18.467, 20.515, 22.458, 24.322, 26.124, 27.877, 29.588,
];

/// Draws `n` tokens by speculative sampling and returns the chi-square
/// statistic of the counts against `target`, with its degrees of freedom,
/// and the observed acceptance rate.
fn chi_square(target: &[f32], draft: &[f32], n: usize, seed: u64) -> (f64, usize, f64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut counts = vec![0usize; target.len()];
    let mut accepted = 0usize;
    for _ in 0..n {
        let v = speculative_sample(target, draft, &mut rng).unwrap();
        if matches!(v, Verdict::Accepted(_)) {
            accepted += 1;
        }
        counts[v.token().as_usize()] += 1;
    }
    let mut stat = 0.0;
    let mut cells = 0;
    for (i, &c) in counts.iter().enumerate() {
        let expected = target[i] as f64 * n as f64;
        if expected == 0.0 {
            assert_eq!(
                c, 0,
                "token {i} has target probability 0 but was drawn {c} times"
            );
            continue;
        }
        cells += 1;
        stat += (c as f64 - expected).powi(2) / expected;
    }
    (stat, cells - 1, accepted as f64 / n as f64)
}

fn softmax_masked(logits: &[f32], mask: Option<&TokenSet>) -> Vec<f32> {
    let mut l = logits.to_vec();
    if let Some(m) = mask {
        apply_mask(&mut l, m);
    }
    probabilities(&l).unwrap()
}

/// The target's distribution comes out whatever the draft, at significance
/// 0.001 (seeded, so the test is deterministic), and the acceptance rate
/// matches Σ min(p_t, p_d).
#[test]
fn output_distribution_is_the_targets() {
    let target_logits = [2.0, 1.5, 0.3, -0.5, 1.0, -2.0];
    let drafts: [[f32; 6]; 3] = [
        [0.5, 2.5, 0.3, 1.0, -1.0, 0.0],    // disagrees
        [2.0, 1.5, 0.3, -0.5, 1.0, -2.0],   // identical: never rejects
        [-3.0, -3.0, 4.0, -3.0, -3.0, 3.0], // very different
    ];
    let n = 200_000;
    for (k, d) in drafts.iter().enumerate() {
        let pt = softmax_masked(&target_logits, None);
        let pd = softmax_masked(d, None);
        let (stat, df, rate) = chi_square(&pt, &pd, n, 7 + k as u64);
        assert!(
            stat < CHI2_999[df - 1],
            "draft {k}: chi-square {stat:.2} with {df} df exceeds {} (significance 0.001)",
            CHI2_999[df - 1]
        );
        let want = speculation(&pt, &pd).unwrap().acceptance_rate;
        assert!(
            (rate - want).abs() < 0.01,
            "draft {k}: acceptance {rate} vs Σ min(p_t, p_d) = {want}"
        );
    }
}

/// Under a constraint both distributions are masked the same way: masked
/// tokens never come out, and the allowed ones follow the masked target.
#[test]
fn masked_distribution_is_the_masked_targets() {
    let target_logits = [2.0, 1.5, 0.3, -0.5, 1.0, -2.0];
    let draft_logits = [0.5, 2.5, 0.3, 1.0, -1.0, 0.0];
    let mut mask = TokenSet::new(6);
    for i in [1, 2, 5] {
        mask.insert(TokenId(i));
    }
    let pt = softmax_masked(&target_logits, Some(&mask));
    let pd = softmax_masked(&draft_logits, Some(&mask));
    let (stat, df, _) = chi_square(&pt, &pd, 100_000, 11);
    assert_eq!(df, 2);
    assert!(stat < CHI2_999[df - 1], "chi-square {stat:.2}");
}

/// A draft that differs from the target is detectable by the same test: the
/// draft's own distribution fails it (so the test has power).
#[test]
fn the_test_rejects_the_draft_distribution() {
    let pt = softmax_masked(&[2.0, 1.5, 0.3, -0.5, 1.0, -2.0], None);
    let pd = softmax_masked(&[0.5, 2.5, 0.3, 1.0, -1.0, 0.0], None);
    // Sampling the draft alone (target := draft) and comparing to pt.
    let mut rng = StdRng::seed_from_u64(3);
    let n = 20_000;
    let mut counts = [0usize; 6];
    for _ in 0..n {
        let v = speculative_sample(&pd, &pd, &mut rng).unwrap();
        counts[v.token().as_usize()] += 1;
    }
    let stat: f64 = counts
        .iter()
        .zip(&pt)
        .map(|(&c, &p)| (c as f64 - p as f64 * n as f64).powi(2) / (p as f64 * n as f64))
        .sum();
    assert!(stat > CHI2_999[4], "chi-square {stat:.2} should reject");
}

#[test]
fn verify_rules() {
    let mut rng = StdRng::seed_from_u64(0);
    // p_t >= p_d: always accepted.
    for _ in 0..100 {
        assert_eq!(
            verify(&[0.6, 0.4], &[0.5, 0.5], TokenId(0), &mut rng).unwrap(),
            Verdict::Accepted(TokenId(0))
        );
    }
    // p_t = 0: always replaced, by the residual's only token.
    for _ in 0..100 {
        assert_eq!(
            verify(&[0.0, 1.0], &[0.5, 0.5], TokenId(0), &mut rng).unwrap(),
            Verdict::Replaced(TokenId(1))
        );
    }
    assert!(verify(&[0.5, 0.5], &[0.5, 0.5], TokenId(7), &mut rng).is_err());
    assert!(verify(&[0.5, 0.5], &[1.0], TokenId(0), &mut rng).is_err());
}
