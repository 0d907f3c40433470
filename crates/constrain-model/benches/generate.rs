//! Generation speed on the default model (`cargo bench --bench generate`).
//! Prints figures; skips with a message when the GGUF is missing.
//!
//! 1. Prefill and decode tokens/s with 1 and 2 threads (one child process
//!    per thread count: candle's pools are sized once per process).
//! 2. Decode tokens/s constrained ÷ unconstrained, same prompt, greedy, same
//!    number of tokens, jump-forward off (the mask + guide overhead alone).
//! 3. Wall time of a constrained tool call (jump-forward on) vs the same
//!    number of unconstrained tokens, prompt included.
//!
//! Each figure is the median of `CONSTRAIN_BENCH_REPS` runs (default 3),
//! constrained and unconstrained runs interleaved so load drifts hit both.

use constrain_model::generate::{tools_schema, Engine, GenerateConfig, Generation};
use constrain_model::{self as model, prompt, LanguageModel, QwenModel, TokenizerSource};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

mod common;
use common::{home, median};

fn reps() -> usize {
    std::env::var("CONSTRAIN_BENCH_REPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3)
}

fn main() {
    // `cargo test --all-targets` runs bench binaries without `--bench`: only
    // check that it builds then (the real run takes minutes).
    if std::env::var("CONSTRAIN_BENCH_THREADS").is_err()
        && !std::env::args().any(|a| a == "--bench")
    {
        println!("generate bench: run it with `cargo bench --bench generate`");
        return;
    }
    let gguf = home().join("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    if !gguf.exists() {
        eprintln!(
            "skipping: {} not found (set CONSTRAIN_HOME)",
            gguf.display()
        );
        return;
    }
    match std::env::var("CONSTRAIN_BENCH_THREADS") {
        Err(_) => {
            // Parent: one child per thread count.
            let exe = std::env::current_exe().unwrap();
            for n in [1, 2] {
                let st = Command::new(&exe)
                    .env("CONSTRAIN_BENCH_THREADS", n.to_string())
                    .status()
                    .unwrap();
                assert!(st.success(), "bench child with {n} threads failed");
            }
        }
        Ok(n) => {
            let n: usize = n.parse().unwrap();
            model::set_threads(n).unwrap();
            run(&gguf, n);
        }
    }
}

fn run(gguf: &PathBuf, threads: usize) {
    let mut e = Engine::load(gguf, &TokenizerSource::Gguf).unwrap();
    let tools = serde_json::from_str::<serde_json::Value>(
        &std::fs::read_to_string(constrain_testkit::assets::repo_root().join("schemas/tools.json"))
            .unwrap(),
    )
    .unwrap();
    let system = prompt::tools_system_message(tools.as_array().unwrap());
    let user = "What's the weather like in Paris right now? Use celsius.";
    let p = e.prompt_tokens(user, Some(&system), false).unwrap();

    // Warm-up (first passes repack weights and build pools).
    e.model().forward(&p, 0).unwrap();
    e.model().forward(&p[..1], p.len()).unwrap();

    // 1. Prefill / decode.
    let mut pre = Vec::new();
    let mut dec = Vec::new();
    let n_dec = 32;
    for _ in 0..reps() {
        let t = Instant::now();
        e.model().forward(&p, 0).unwrap();
        pre.push(p.len() as f64 / t.elapsed().as_secs_f64());
        let out = unconstrained(&mut e, &p, n_dec);
        dec.push(out.stats.decode_tokens_per_sec());
    }
    println!(
        "threads {threads}: prefill {:.1} tok/s ({} prompt tokens), decode {:.1} tok/s ({n_dec} tokens)",
        median(pre),
        p.len(),
        median(dec)
    );
    // What jump-forward buys: one pass over k forced tokens vs k single steps.
    let k = 8;
    let (mut batched, mut stepped) = (Vec::new(), Vec::new());
    for _ in 0..reps() {
        e.model().forward(&p, 0).unwrap();
        let t = Instant::now();
        e.model().forward(&p[..k], p.len()).unwrap();
        batched.push(t.elapsed().as_secs_f64());
        e.model().forward(&p, 0).unwrap();
        let t = Instant::now();
        for i in 0..k {
            e.model().forward(&p[i..i + 1], p.len() + i).unwrap();
        }
        stepped.push(t.elapsed().as_secs_f64());
    }
    println!(
        "threads {threads}: {k} tokens in one pass {:.1} ms, in {k} steps {:.1} ms",
        median(batched) * 1e3,
        median(stepped) * 1e3
    );
    if threads != 2 {
        return;
    }

    // 2. Constrained ÷ unconstrained decode, same number of tokens, no jump-forward.
    let free_text = r#"\{"answer":"[a-zA-Z0-9 ,.'-]{120,400}"\}"#;
    let idx = e.regex_index(free_text).unwrap();
    let (mut c_tps, mut u_tps) = (Vec::new(), Vec::new());
    let mut n_tokens = 0;
    for _ in 0..reps() {
        let cfg = GenerateConfig::greedy(64).jump_forward(false);
        let c = e
            .generate(&p, Some(idx.clone()), &cfg, &mut |_| {})
            .unwrap();
        n_tokens = c.tokens.len();
        c_tps.push(c.stats.decode_tokens_per_sec());
        let u = unconstrained(&mut e, &p, n_tokens);
        u_tps.push(u.stats.decode_tokens_per_sec());
    }
    let (c, u) = (median(c_tps), median(u_tps));
    println!(
        "decode, {n_tokens} tokens: constrained {c:.2} tok/s, unconstrained {u:.2} tok/s, ratio {:.3}",
        c / u
    );

    // 3. Tool call with jump-forward vs the same number of unconstrained tokens.
    let index = match e.schema_index(&tools_schema(&tools).unwrap()) {
        Ok((i, _)) => i,
        Err(err) => {
            println!("tool call: schema compiler unavailable ({err}); using the equivalent regex");
            let s = r#""([^"\\\x00-\x1F]|\\(["\\/bfnrt]|u[0-9a-fA-F]{4})){0,40}""#;
            let re = format!(
                r#"\{{"name":"get_weather","arguments":\{{"city":{s},"unit":"(celsius|fahrenheit)"\}}\}}|\{{"name":"get_time","arguments":\{{"timezone":{s}\}}\}}"#
            );
            e.regex_index(&re).unwrap()
        }
    };
    let (mut tc, mut tu) = (Vec::new(), Vec::new());
    let mut last = None;
    for _ in 0..reps() {
        let t = Instant::now();
        let c = e
            .generate(
                &p,
                Some(index.clone()),
                &GenerateConfig::greedy(64),
                &mut |_| {},
            )
            .unwrap();
        tc.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        unconstrained(&mut e, &p, c.tokens.len());
        tu.push(t.elapsed().as_secs_f64());
        last = Some(c);
    }
    let c = last.unwrap();
    let (a, b) = (median(tc), median(tu));
    println!(
        "tool call {:?}: {} tokens ({} forced, {} model passes): {:.3} s; {} unconstrained tokens: {:.3} s; ratio {:.3}",
        c.text(),
        c.tokens.len(),
        c.stats.forced_tokens,
        c.stats.model_calls,
        a,
        c.tokens.len(),
        b,
        a / b
    );
}

fn unconstrained(e: &mut Engine<QwenModel>, p: &[constrain::TokenId], n: usize) -> Generation {
    let cfg = GenerateConfig::greedy(n).ignore_eos(true);
    let out = e
        .generate(p, None::<Arc<constrain::TokenIndex>>, &cfg, &mut |_| {})
        .unwrap();
    assert_eq!(out.tokens.len(), n);
    out
}
