//! The Lark grammars under `grammars/`, over the real Qwen vocabulary,
//! single-threaded: `cargo bench --bench lark`.
//!
//! * `lark/compile/NAME` (criterion): the grammar text → parse, the
//!   greedy-lexer check, GBNF → automaton → index, uncached, the
//!   vocabulary's shared tries already built (a warm compile);
//! * then the same compile 50 times, its median wall time and its mean
//!   time on a CPU, all threads (`/proc/self/stat`: apart from the time
//!   other processes hold the cores on a shared machine);
//! * then, per grammar, the cost of `fill_bitmask` (XGrammar layout) at
//!   every step of random walks: each grammar compiled afresh, 200 walks of
//!   at most 64 tokens, each step a uniformly drawn allowed token (EOS when
//!   the text is complete, with probability 1/8). First visits of a state
//!   are included. Printed: masks timed, p50 / p99 / max in µs.
//!
//! Skips with a message when the tokenizer is absent.

use constrain::index::IndexConfig;
use constrain::vocab::TokenId;
use constrain::{bitmask_words, Compiled, Compiler, CompilerConfig, Source};
use constrain_testkit::assets;
use criterion::{black_box, criterion_group, Criterion};
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::time::Instant;

fn grammars() -> Vec<(String, String)> {
    let dir = assets::repo_root().join("grammars");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("grammars/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "lark"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).expect("a grammar"))
        })
        .collect();
    out.sort();
    out
}

fn compiler() -> Option<Compiler> {
    let vocab = assets::qwen_vocab()?;
    Some(Compiler::new(
        vocab,
        CompilerConfig::default()
            .index(IndexConfig::default().threads(1))
            .cache_entries(0),
    ))
}

fn bench(c: &mut Criterion) {
    let Some(compiler) = compiler() else {
        eprintln!("lark bench: skipped (no tokenizer; run scripts/fetch-assets)");
        return;
    };
    let mut g = c.benchmark_group("lark");
    for (name, text) in grammars() {
        // The shared tries, built once.
        let source = Source::lark(&text).expect("parses");
        compiler.compile_uncached(&source).expect("compiles");
        g.bench_function(format!("compile/{name}"), |b| {
            b.iter(|| {
                let s = Source::lark(black_box(&text)).unwrap();
                black_box(compiler.compile_uncached(&s).unwrap())
            })
        });
    }
    g.finish();
}

/// `fill_bitmask` times (µs) along random walks of `c`.
fn walks(c: &Compiled, rng: &mut StdRng) -> Vec<f64> {
    let words = bitmask_words(c.matcher().index().vocab().logits_width());
    let mut row = vec![0u32; words];
    let mut out = Vec::new();
    let eos: Vec<TokenId> = c.matcher().index().vocab().eos().to_vec();
    for _ in 0..200 {
        let mut m = c.matcher();
        for _ in 0..64 {
            let t0 = Instant::now();
            m.fill_bitmask(&mut row).expect("a mask");
            out.push(t0.elapsed().as_secs_f64() * 1e6);
            black_box(&row);
            if m.is_accepting() && (m.is_finished() || rng.random_range(0..8) == 0) {
                break;
            }
            let allowed: Vec<TokenId> = m.allowed().iter().filter(|t| !eos.contains(t)).collect();
            if allowed.is_empty() {
                break;
            }
            let t = allowed[rng.random_range(0..allowed.len())];
            assert!(m.accept_token(t), "an allowed token is accepted");
        }
    }
    out
}

/// This process's time on a CPU so far, in ms (Linux `/proc/self/stat`,
/// user and system, 100 ticks a second): a compile's cost apart from the
/// time other processes hold the cores on a shared machine.
fn on_cpu() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks * 10.0)
}

fn masks() {
    let Some(compiler) = compiler() else {
        return;
    };
    for (name, text) in grammars() {
        let mut wall = Vec::new();
        let cpu0 = on_cpu();
        for _ in 0..50 {
            let t0 = Instant::now();
            let s = Source::lark(&text).expect("parses");
            black_box(compiler.compile_uncached(&s).expect("compiles"));
            wall.push(t0.elapsed().as_secs_f64() * 1e3);
        }
        let cpu = on_cpu().zip(cpu0).map(|(b, a)| (b - a) / 50.0);
        wall.sort_by(f64::total_cmp);
        let last = compiler
            .compile_uncached(&Source::lark(&text).expect("parses"))
            .expect("compiles");
        let st = last.stats();
        println!(
            "lark/compile/{name:<15} warm: median {:>7.2} ms wall, {} on a CPU \
             (last: DFA {:.2} ms, index {:.2} ms, {} states, {} fragments)",
            wall[25],
            cpu.map_or("?".into(), |c| format!("{c:.2} ms")),
            st.dfa_time.as_secs_f64() * 1e3,
            st.index_time.as_secs_f64() * 1e3,
            st.dfa_states,
            st.fragments,
        );
    }
    let mut rng = StdRng::seed_from_u64(5);
    for (name, text) in grammars() {
        let c = compiler
            .compile_uncached(&Source::lark(&text).expect("parses"))
            .expect("compiles");
        let mut v = walks(&c, &mut rng);
        v.sort_by(f64::total_cmp);
        let p = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        println!(
            "lark/mask/{name:<18} masks {:>6}  p50 {:>7.2}  p99 {:>7.2}  max {:>8.1} µs",
            v.len(),
            p(0.5),
            p(0.99),
            v[v.len() - 1]
        );
    }
}

criterion_group!(benches, bench);

fn main() {
    // `cargo test` runs bench targets without `--bench`.
    if !std::env::args().any(|a| a == "--bench") {
        println!("lark bench: run it with `cargo bench --bench lark`");
        return;
    }
    benches();
    masks();
    Criterion::default().configure_from_args().final_summary();
}
