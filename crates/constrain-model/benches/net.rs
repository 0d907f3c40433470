//! The batched forward of `constrain_model::net` on the real model:
//!
//! * one pass over 8 positions (`forward_all`) against 8 single steps;
//! * one batched step over B = 1, 2, 4, 8 sequences (each at its own
//!   position, after its own prompt) against B single steps.
//!
//! `cargo bench -p constrain-model --bench net [-- --reps N --model FILE
//! --skip-prefill --batch 1,2,4,8 --batched-only]`; prints milliseconds
//! (median of N repetitions, default 5) and ratios, wall-clock and CPU time (summed over the process's
//! threads, from `/proc/self/task/*/schedstat`: on a machine shared with
//! other jobs the CPU time is the steadier figure; run with
//! `CANDLE_NUM_THREADS=1 RAYON_NUM_THREADS=1` so that no thread spins
//! waiting for work). `CONSTRAIN_KERNELS=candle` runs every matmul through
//! candle's `QMatMul` instead of the own kernels (the figures before them).
//! `--skip-prefill` leaves out the four 200-token prompts; `--batch` picks
//! the batch sizes; `--batched-only` times the batched steps alone (for a
//! profiler). Skips with a
//! message when the model is absent.

use constrain::vocab::TokenId;
use constrain_model::{LanguageModel, QwenModel};
use std::path::PathBuf;
use std::time::Instant;

mod common;
use common::{home, median};

/// Wall-clock and CPU milliseconds of `f`.
fn timed(f: impl FnOnce()) -> (f64, f64) {
    let (wall, cpu, ()) = common::timed(f);
    (wall, cpu)
}

/// Prints one comparison: medians of wall and CPU times of `a` and `b`.
fn report(what: &str, a_name: &str, a: &[(f64, f64)], b_name: &str, b: &[(f64, f64)]) {
    let m = |v: &[(f64, f64)], cpu: bool| {
        median(v.iter().map(|p| if cpu { p.1 } else { p.0 }).collect())
    };
    let (aw, ac, bw, bc) = (m(a, false), m(a, true), m(b, false), m(b, true));
    println!(
        "{what}: {a_name} {aw:.1} ms (cpu {ac:.1}), {b_name} {bw:.1} ms (cpu {bc:.1}), ratio {:.2} (cpu {:.2})",
        aw / bw,
        ac / bc
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let reps: usize = arg("--reps").and_then(|s| s.parse().ok()).unwrap_or(5);
    let path = arg("--model")
        .map(PathBuf::from)
        .unwrap_or_else(|| home().join("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"));
    if !path.exists() {
        eprintln!(
            "skipping: {} not found (run scripts/fetch-assets)",
            path.display()
        );
        return;
    }
    let skip_prefill = args.iter().any(|a| a == "--skip-prefill");
    let batched_only = args.iter().any(|a| a == "--batched-only");
    let mut m = QwenModel::load(&path).expect("loading the model");
    println!(
        "model: {} ({} threads, kernels: {})",
        path.display(),
        constrain_model::threads(),
        std::env::var("CONSTRAIN_KERNELS").unwrap_or_else(|_| "own".into())
    );
    // Warm up (candle builds its repacked weights on first use).
    m.forward(&[TokenId(1000), TokenId(1001)], 0).unwrap();
    m.forward(&[TokenId(1002)], 2).unwrap();
    m.reset();
    let prompt: Vec<TokenId> = (0..32u32).map(|i| TokenId(1000 + i * 37)).collect();
    let more: Vec<TokenId> = (0..8u32).map(|i| TokenId(2000 + i * 11)).collect();
    let p = prompt.len();

    // One pass over 8 positions vs 8 single steps.
    let (mut pass, mut steps) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        m.forward(&prompt, 0).unwrap();
        pass.push(timed(|| {
            m.forward_all(&more, p).unwrap();
        }));
        assert!(m.truncate(p));
        steps.push(timed(|| {
            for (i, tok) in more.iter().enumerate() {
                m.forward(std::slice::from_ref(tok), p + i).unwrap();
            }
        }));
    }
    report("8 positions", "one pass", &pass, "8 single steps", &steps);

    // Four 200-token prompts in one pass vs four passes.
    if !skip_prefill {
        let long: Vec<TokenId> = (0..200u32).map(|i| TokenId(500 + i * 13)).collect();
        let mut four: Vec<QwenModel> = (0..4)
            .map(|_| QwenModel::from_weights(m.weights().clone()))
            .collect();
        let t = Instant::now();
        for s in four.iter_mut() {
            s.forward(&long, 0).unwrap();
        }
        let alone = t.elapsed().as_secs_f64() * 1e3;
        for s in four.iter_mut() {
            s.reset();
        }
        let t = Instant::now();
        let chunks = vec![long.as_slice(); 4];
        let mut refs: Vec<&mut QwenModel> = four.iter_mut().collect();
        QwenModel::forward_batch(&mut refs, &chunks).unwrap();
        let together = t.elapsed().as_secs_f64() * 1e3;
        println!(
        "4 prompts of 200 tokens: one pass {together:.1} ms, 4 passes {alone:.1} ms, ratio {:.2}",
        together / alone
    );
    }

    // A batched step over B sequences vs B single steps.
    let sizes: Vec<usize> = arg("--batch")
        .map(|s| s.split(',').filter_map(|b| b.parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 2, 4, 8]);
    for bsz in sizes {
        let mut seqs: Vec<QwenModel> = (0..bsz)
            .map(|k| {
                let mut s = QwenModel::from_weights(m.weights().clone());
                s.forward(&prompt[..p - k], 0).unwrap();
                s
            })
            .collect();
        let toks: Vec<TokenId> = (0..bsz as u32).map(|k| TokenId(3000 + k)).collect();
        let (mut batched, mut single) = (Vec::new(), Vec::new());
        for _ in 0..reps {
            let lens: Vec<usize> = seqs.iter().map(|s| s.sequence().len()).collect();
            batched.push(timed(|| {
                let mut refs: Vec<&mut QwenModel> = seqs.iter_mut().collect();
                QwenModel::step_batch(&mut refs, &toks).unwrap();
            }));
            for (s, &l) in seqs.iter_mut().zip(&lens) {
                s.truncate(l);
            }
            if batched_only {
                continue;
            }
            single.push(timed(|| {
                for (s, (tok, &l)) in seqs.iter_mut().zip(toks.iter().zip(&lens)) {
                    s.forward(std::slice::from_ref(tok), l).unwrap();
                }
            }));
            for (s, &l) in seqs.iter_mut().zip(&lens) {
                s.truncate(l);
            }
        }
        if batched_only {
            let m = |cpu: bool| {
                median(
                    batched
                        .iter()
                        .map(|p| if cpu { p.1 } else { p.0 })
                        .collect(),
                )
            };
            println!(
                "B={bsz}: batched step {:.1} ms (cpu {:.1})",
                m(false),
                m(true)
            );
            continue;
        }
        report(
            &format!("B={bsz}"),
            "batched step",
            &batched,
            &format!("{bsz} single steps"),
            &single,
        );
    }
}
