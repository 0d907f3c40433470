//! Index benchmark over the full Qwen vocabulary (criterion): `cargo bench
//! --bench index`.
//!
//! * `build_eager/NAME`: pattern → DFA → eager index, one thread (the record
//!   regex of the core-engine issue and every `grammars/*.regex` file);
//! * `build_lazy/NAME`: pattern → lazy DFA → lazy index (the first mask);
//! * `step/{eager,lazy_warm}`: `allowed()` + `advance()` along random walks
//!   of the record regex (tokens picked beforehand), on the eager index and
//!   on a lazy index whose states the walks have all visited once (every
//!   read goes through the published, lock-free tables);
//! * `step/lazy_warm_2threads`: the same on two threads at once over one
//!   shared lazy index (per-step time; with a lock on the hot path the two
//!   threads would queue on it).
//!
//! Skips with a message when the tokenizer is absent.

use constrain::dfa::{ByteDfa, DfaConfig};
use constrain::grammar::Grammar;
use constrain::index::{IndexConfig, TokenIndex};
use constrain::vocab::{TokenId, Vocabulary};
use constrain::Matcher;
use constrain_testkit::assets;
use criterion::{black_box, criterion_group, Criterion};
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::sync::Arc;
use std::time::Instant;

const RECORD: &str = r#"\{"name": "[a-zA-Z_][a-zA-Z0-9_]{0,63}", "email": "[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}", "tags": \[("[^"\\\x00-\x1f]{1,20}"(, "[^"\\\x00-\x1f]{1,20}"){0,4})?\], "age": (0|[1-9][0-9]{0,2}), "bio": "[^"\\\x00-\x1f]{0,200}"\}"#;

fn one_thread() -> IndexConfig {
    IndexConfig::default().threads(1)
}

fn eager(re: &str, vocab: &Arc<Vocabulary>) -> TokenIndex {
    let dfa = ByteDfa::new(re, &DfaConfig::default()).unwrap();
    TokenIndex::build(&dfa, vocab.clone(), &one_thread()).unwrap()
}

fn lazy(re: &str, vocab: &Arc<Vocabulary>) -> TokenIndex {
    let cfg = DfaConfig::default().lazy_states(Some(1));
    let dfa = ByteDfa::build(re, &cfg).unwrap();
    TokenIndex::build_dfa(dfa, vocab.clone(), &one_thread()).unwrap()
}

/// Random walks over allowed tokens (each to acceptance or 400 tokens).
fn walks(index: &Arc<TokenIndex>, n: usize, seed: u64) -> Vec<Vec<TokenId>> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let mut g = Matcher::from_index(index.clone());
            let mut out = Vec::new();
            while !g.is_finished() && out.len() < 400 {
                let allowed: Vec<TokenId> = g
                    .allowed()
                    .iter()
                    .filter(|&t| !index.vocab().is_eos(t))
                    .collect();
                if allowed.is_empty() {
                    break;
                }
                let t = allowed[rng.random_range(0..allowed.len())];
                g.advance(t).unwrap();
                out.push(t);
            }
            out
        })
        .collect()
}

/// Runs `steps` allowed() + advance() steps along `walks`, cycling.
fn run_steps(index: &Arc<TokenIndex>, walks: &[Vec<TokenId>], steps: u64) {
    let mut w = 0;
    let mut i = 0;
    let mut g = Matcher::from_index(index.clone());
    for _ in 0..steps {
        if i == walks[w].len() {
            w = (w + 1) % walks.len();
            i = 0;
            g.reset();
        }
        let t = walks[w][i];
        black_box(g.allowed().contains(t));
        g.advance(t).unwrap();
        i += 1;
    }
}

fn bench(c: &mut Criterion) {
    let Some(vocab) = assets::qwen_vocab() else {
        eprintln!("skipping: index bench needs the Qwen tokenizer (run scripts/fetch-assets)");
        return;
    };
    // The vocabulary's tries are built once per vocabulary: not measured.
    let _ = eager("a", &vocab);

    let mut g = c.benchmark_group("index");
    g.sample_size(10);
    let mut patterns = vec![("record".to_string(), RECORD.to_string())];
    let dir = assets::repo_root().join("grammars");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "regex"))
        .collect();
    files.sort();
    for f in files {
        let gr = Grammar::load(&f).unwrap();
        patterns.push((gr.name.clone(), gr.pattern.clone()));
    }
    for (name, re) in &patterns {
        g.bench_function(format!("build_eager/{name}"), |b| {
            b.iter(|| black_box(eager(re, &vocab)))
        });
        g.bench_function(format!("build_lazy/{name}"), |b| {
            b.iter(|| black_box(lazy(re, &vocab)))
        });
    }
    g.finish();

    let mut g = c.benchmark_group("step");
    let eager_idx = Arc::new(eager(RECORD, &vocab));
    let lazy_idx = Arc::new(lazy(RECORD, &vocab));
    let paths = walks(&eager_idx, 50, 1);
    // Visit every state of the walks once, so the lazy runs read only.
    for p in &paths {
        let mut m = Matcher::from_index(lazy_idx.clone());
        for &t in p {
            m.advance(t).unwrap();
            black_box(m.allowed());
        }
    }
    g.bench_function("eager", |b| {
        b.iter_custom(|iters| {
            let t = Instant::now();
            run_steps(&eager_idx, &paths, iters);
            t.elapsed()
        })
    });
    g.bench_function("lazy_warm", |b| {
        b.iter_custom(|iters| {
            let t = Instant::now();
            run_steps(&lazy_idx, &paths, iters);
            t.elapsed()
        })
    });
    g.bench_function("lazy_warm_2threads", |b| {
        b.iter_custom(|iters| {
            // Per-step time with two threads stepping at once: the wall time
            // of both (each does `iters` steps).
            let t = Instant::now();
            std::thread::scope(|s| {
                for _ in 0..2 {
                    s.spawn(|| run_steps(&lazy_idx, &paths, iters));
                }
            });
            t.elapsed()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
