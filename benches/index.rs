//! Index benchmark (a bench binary that prints figures; `cargo bench --bench index`).
//!
//! Single-threaded eager build of the record regex of the core-engine issue over
//! the full Qwen vocabulary, its memory, per-step `allowed()` + `advance()`
//! (p50/p99), the build with all cores, lazy mode, and every `grammars/` file.

use constrain::dfa::{ByteDfa, DfaConfig};
use constrain::grammar::Grammar;
use constrain::index::{IndexConfig, TokenIndex};
use constrain::vocab::{Vocabulary, QWEN_LOGITS_WIDTH};
use constrain::Matcher;
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::sync::Arc;
use std::time::{Duration, Instant};

const RECORD: &str = r#"\{"name": "[a-zA-Z_][a-zA-Z0-9_]{0,63}", "email": "[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}", "tags": \[("[^"\\\x00-\x1f]{1,20}"(, "[^"\\\x00-\x1f]{1,20}"){0,4})?\], "age": (0|[1-9][0-9]{0,2}), "bio": "[^"\\\x00-\x1f]{0,200}"\}"#;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn build(re: &str, vocab: &Arc<Vocabulary>, cfg: &IndexConfig) -> (TokenIndex, Duration) {
    let t = Instant::now();
    let dfa = ByteDfa::new(re, &DfaConfig::default()).unwrap();
    let idx = TokenIndex::build(&dfa, vocab.clone(), cfg).unwrap();
    (idx, t.elapsed())
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("index bench: run it with `cargo bench --bench index`");
        return;
    }
    let home = std::env::var("CONSTRAIN_HOME").unwrap_or_else(|_| {
        format!(
            "{}/.cache/constrain",
            std::env::var("HOME").unwrap_or_default()
        )
    });
    let path = format!("{home}/tokenizer.json");
    if !std::path::Path::new(&path).exists() {
        eprintln!("skipping: {path} missing (run scripts/fetch-assets)");
        return;
    }
    let t = Instant::now();
    let vocab = Arc::new(
        Vocabulary::from_tokenizer_json_file(&path)
            .unwrap()
            .with_logits_width(QWEN_LOGITS_WIDTH)
            .unwrap(),
    );
    println!(
        "vocabulary load: {:.1} ms ({} text tokens)",
        ms(t.elapsed()),
        vocab.num_text_tokens()
    );
    let one = IndexConfig {
        threads: 1,
        ..Default::default()
    };
    let t = Instant::now();
    let _ = build("a", &vocab, &one);
    println!(
        "token tries (once per vocabulary): {:.1} ms",
        ms(t.elapsed())
    );

    let dfa_t = median(
        (0..3)
            .map(|_| {
                let t = Instant::now();
                ByteDfa::new(RECORD, &DfaConfig::default()).unwrap();
                t.elapsed()
            })
            .collect(),
    );
    let runs: Vec<(TokenIndex, Duration)> = (0..3).map(|_| build(RECORD, &vocab, &one)).collect();
    let st = runs[0].0.stats().clone();
    let eager1 = median(runs.iter().map(|r| r.1).collect());
    println!(
        "record regex: {} live states, {} byte classes, {} horizon classes, {} distinct masks, {:.1} MB",
        st.states, st.byte_classes, st.horizon_classes, st.distinct_masks, st.memory_bytes as f64 / 1e6
    );
    println!(
        "record regex: DFA {:.1} ms; eager build (DFA + index), 1 thread: {:.1} ms (median of 3)",
        ms(dfa_t),
        ms(eager1)
    );
    let all = IndexConfig::default();
    let eager_all = median((0..3).map(|_| build(RECORD, &vocab, &all).1).collect());
    println!(
        "record regex: eager build, all {} cores: {:.1} ms",
        rayon::current_num_threads(),
        ms(eager_all)
    );
    let lazy = IndexConfig {
        eager: false,
        ..Default::default()
    };
    let (lazy_idx, lazy_t) = build(RECORD, &vocab, &lazy);
    println!("record regex: lazy build: {:.1} ms", ms(lazy_t));

    // Per step: allowed() + advance() on random walks (eager index).
    let idx = Arc::new(runs.into_iter().next().unwrap().0);
    let mut rng = StdRng::seed_from_u64(1);
    let mut times = Vec::new();
    let mut lazy_times = Vec::new();
    let lazy_idx = Arc::new(lazy_idx);
    for (which, index) in [(0, &idx), (1, &lazy_idx)] {
        for _ in 0..200 {
            let mut g = Matcher::from_index(index.clone());
            let mut steps = 0;
            while !g.is_finished() && steps < 400 {
                // Pick the token outside the timed region (as a sampler would).
                let allowed = g.allowed();
                let n = allowed.len();
                let k = rng.random_range(0..n);
                let tok = allowed.iter().nth(k).unwrap();
                let t = Instant::now();
                let a = g.allowed();
                std::hint::black_box(a.contains(tok));
                g.advance(tok).unwrap();
                let e = t.elapsed();
                if which == 0 {
                    times.push(e)
                } else {
                    lazy_times.push(e)
                }
                steps += 1;
            }
        }
    }
    for (name, mut v) in [
        ("eager", times),
        ("lazy (first visits included)", lazy_times),
    ] {
        v.sort();
        let p = |q: f64| v[((v.len() as f64 - 1.0) * q) as usize].as_secs_f64() * 1e6;
        println!(
            "allowed()+advance() {name}: {} steps, p50 {:.2} µs, p99 {:.2} µs, max {:.1} µs",
            v.len(),
            p(0.5),
            p(0.99),
            p(1.0)
        );
    }

    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("grammars");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "regex"))
        .collect();
    files.sort();
    for f in files {
        let g = Grammar::load(&f).unwrap();
        let d = median((0..3).map(|_| build(&g.pattern, &vocab, &one).1).collect());
        let (i, _) = build(&g.pattern, &vocab, &one);
        println!(
            "grammar {:<14} {:>4} states {:>3} masks  build {:.2} ms",
            g.name,
            i.stats().states,
            i.stats().distinct_masks,
            ms(d)
        );
    }
}
