//! Per-step cost of the sampling pipeline at Qwen's width (151,936 logits),
//! single-threaded, against candle's `LogitsProcessor` on the same logits.
//!
//! `CARGO_TARGET_DIR=... cargo bench --bench sampling`
//!
//! Each iteration gets a fresh copy of the logits, made just before it (so it
//! sits in cache, as a model's fresh output does) and not timed:
//! `Sampler::sample` uses its input as scratch.

use candle_core::{Device, Tensor};
use candle_transformers::generation::{LogitsProcessor, Sampling};
use constrain::sampling::{Sampler, SamplingConfig};
use constrain::{TokenId, TokenSet};
use criterion::{black_box, criterion_group, BatchSize, Criterion};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::Duration;

const WIDTH: usize = 151_936;

fn inputs() -> (Vec<f32>, Vec<TokenId>, TokenSet) {
    let mut rng = StdRng::seed_from_u64(0xC0FFEE);
    // Random logits, roughly the spread of a real model's (normal-ish, σ ≈ 3).
    let logits: Vec<f32> = (0..WIDTH)
        .map(|_| {
            let s: f32 = (0..4).map(|_| rng.random::<f32>()).sum::<f32>() - 2.0;
            s * 5.0
        })
        .collect();
    let history: Vec<TokenId> = (0..256)
        .map(|_| TokenId(rng.random_range(0..WIDTH as u32)))
        .collect();
    let mut mask = TokenSet::new(WIDTH);
    while mask.len() < 100 {
        mask.insert(TokenId(rng.random_range(0..WIDTH as u32)));
    }
    (logits, history, mask)
}

fn full_config() -> SamplingConfig {
    SamplingConfig::default()
        .temperature(0.7)
        .top_k(50)
        .top_p(0.9)
        .min_p(0.05)
        .repetition_penalty(1.1)
        .frequency_penalty(0.1)
        .presence_penalty(0.1)
        .penalty_last_n(Some(256))
}

fn bench(c: &mut Criterion) {
    let (logits, history, mask) = inputs();
    let mut g = c.benchmark_group("sampling_151936");
    g.sample_size(40)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));

    let mut run = |name: &str, config: SamplingConfig, mask: Option<&TokenSet>| {
        let mut s = Sampler::new(config, 1).unwrap();
        g.bench_function(name, |b| {
            b.iter_batched_ref(
                || logits.clone(),
                |l| black_box(s.sample(l, mask, &history).unwrap()),
                BatchSize::PerIteration,
            )
        });
    };
    // The figure: penalties over 256 tokens, T 0.7, top-k 50, top-p 0.9, min-p 0.05, draw.
    run("full", full_config(), None);
    run("full_mask100", full_config(), Some(&mask));
    run("greedy_penalties", full_config().temperature(0.0), None);
    run("greedy_mask100", SamplingConfig::greedy(), Some(&mask));
    // Same work as candle's TopP (no top-k, so the whole vocabulary is softmaxed).
    run(
        "top_p_0.9_t_0.7",
        SamplingConfig::default().temperature(0.7).top_p(0.9),
        None,
    );
    run(
        "top_k_50_top_p_0.9_t_0.7",
        SamplingConfig::default()
            .temperature(0.7)
            .top_k(50)
            .top_p(0.9),
        None,
    );

    let tensor = Tensor::from_vec(logits.clone(), WIDTH, &Device::Cpu).unwrap();
    let mut candle = |name: &str, sampling: Sampling| {
        let mut lp = LogitsProcessor::from_sampling(1, sampling);
        g.bench_function(name, |b| b.iter(|| black_box(lp.sample(&tensor).unwrap())));
    };
    candle(
        "candle_top_p_0.9_t_0.7",
        Sampling::TopP {
            p: 0.9,
            temperature: 0.7,
        },
    );
    candle(
        "candle_top_k_50_top_p_0.9_t_0.7",
        Sampling::TopKThenTopP {
            k: 50,
            p: 0.9,
            temperature: 0.7,
        },
    );
    g.finish();
}

criterion_group!(benches, bench);

fn main() {
    // Single-threaded, for candle too (its softmax runs on rayon).
    std::env::set_var("RAYON_NUM_THREADS", "1");
    benches();
    Criterion::default().configure_from_args().final_summary();
}
