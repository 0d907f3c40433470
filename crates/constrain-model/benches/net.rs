//! The batched forward of `constrain_model::net` on the real model:
//!
//! * one pass over 8 positions (`forward_all`) against 8 single steps;
//! * one batched step over B = 1, 2, 4, 8 sequences (each at its own
//!   position, after its own prompt) against B single steps.
//!
//! `cargo bench -p constrain-model --bench net [-- --reps N --model FILE]`;
//! prints milliseconds (median of N repetitions, default 5) and ratios.
//! Skips with a message when the model is absent.

use constrain::vocab::TokenId;
use constrain_model::{LanguageModel, QwenModel};
use std::path::PathBuf;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let reps: usize = arg("--reps").and_then(|s| s.parse().ok()).unwrap_or(5);
    let path = arg("--model").map(PathBuf::from).unwrap_or_else(|| {
        let home = std::env::var_os("CONSTRAIN_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/constrain")
            });
        home.join("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
    });
    if !path.exists() {
        eprintln!(
            "skipping: {} not found (run scripts/fetch-assets)",
            path.display()
        );
        return;
    }
    let mut m = QwenModel::load(&path).expect("loading the model");
    println!(
        "model: {} ({} threads)",
        path.display(),
        constrain_model::threads()
    );
    let prompt: Vec<TokenId> = (0..32u32).map(|i| TokenId(1000 + i * 37)).collect();
    let more: Vec<TokenId> = (0..8u32).map(|i| TokenId(2000 + i * 11)).collect();
    let p = prompt.len();

    // One pass over 8 positions vs 8 single steps.
    let (mut pass, mut steps) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        m.forward(&prompt, 0).unwrap();
        let t = Instant::now();
        m.forward_all(&more, p).unwrap();
        pass.push(t.elapsed().as_secs_f64() * 1e3);
        assert!(m.truncate(p));
        let t = Instant::now();
        for (i, tok) in more.iter().enumerate() {
            m.forward(std::slice::from_ref(tok), p + i).unwrap();
        }
        steps.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let (a, b) = (median(pass), median(steps));
    println!(
        "8 positions: one pass {a:.1} ms, 8 single steps {b:.1} ms, ratio {:.2}",
        a / b
    );

    // Four 200-token prompts in one pass vs four passes.
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

    // A batched step over B sequences vs B single steps.
    for bsz in [1usize, 2, 4, 8] {
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
            let t = Instant::now();
            let mut refs: Vec<&mut QwenModel> = seqs.iter_mut().collect();
            QwenModel::step_batch(&mut refs, &toks).unwrap();
            batched.push(t.elapsed().as_secs_f64() * 1e3);
            for (s, &l) in seqs.iter_mut().zip(&lens) {
                s.truncate(l);
            }
            let t = Instant::now();
            for (s, (tok, &l)) in seqs.iter_mut().zip(toks.iter().zip(&lens)) {
                s.forward(std::slice::from_ref(tok), l).unwrap();
            }
            single.push(t.elapsed().as_secs_f64() * 1e3);
            for (s, &l) in seqs.iter_mut().zip(&lens) {
                s.truncate(l);
            }
        }
        let (a, b) = (median(batched), median(single));
        println!(
            "B={bsz}: batched step {a:.1} ms, {bsz} single steps {b:.1} ms, ratio {:.2}",
            a / b
        );
    }
}
