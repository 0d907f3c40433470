//! What a pushdown configuration's mask costs, first visits included, with
//! and without the split of each mask into shared per-top-frame halves
//! (`IndexConfig::pda_split`): `cargo bench --bench pda_masks`.
//!
//! Each mode compiles every case afresh (no cache) and walks the valid
//! instances token by token, timing `Matcher::allowed` at every step (a
//! configuration's first visit computes its mask; later visits read it).
//! Printed per mode: masks timed, p50 / p90 / p99 / max in µs, steps over
//! 1 ms, and the total time spent in masks.
//!
//! Cases: `grammars/json.gbnf` over the valid instances of the MaskBench
//! files, and the MaskBench files themselves under compliant options with
//! `free_form_calls` when they compile through the pushdown engine
//! (fragments). Files: those listed
//! (one path a line) in `$CONSTRAIN_PDA_BENCH_LIST`, else every 25th file of
//! `../shared/corpora/maskbench-dev`. Skips with a message when the tokenizer
//! or the corpus is absent.

use constrain::grammar::gbnf::{Gbnf, GbnfOptions};
use constrain::index::IndexConfig;
use constrain::schema::SchemaOptions;
use constrain::vocab::{TextTokenizer, Vocabulary};
use constrain::{Compiled, Compiler, CompilerConfig, Source};
use constrain_testkit::assets;
use constrain_testkit::maskbench::{load_file, python_dumps};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

fn files() -> Vec<PathBuf> {
    if let Ok(list) = std::env::var("CONSTRAIN_PDA_BENCH_LIST") {
        let text = std::fs::read_to_string(&list).expect("the list file");
        return text
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .map(PathBuf::from)
            .collect();
    }
    let Some(corpora) = assets::corpora() else {
        return Vec::new();
    };
    let mut all: Vec<PathBuf> = std::fs::read_dir(corpora.join("maskbench-dev"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    all.sort();
    all.into_iter().step_by(25).collect()
}

/// Times `allowed()` along each text's tokens; the texts the compiled
/// source rejects stop where they are rejected.
fn walk(c: &Compiled, texts: &[String], tok: &TextTokenizer, out: &mut Vec<f64>) {
    for text in texts {
        let Ok(tokens) = tok.encode(text) else {
            continue;
        };
        let mut m = c.matcher();
        for &t in &tokens {
            let t0 = Instant::now();
            let ok = m.allowed().contains(t);
            out.push(t0.elapsed().as_secs_f64() * 1e6);
            if !ok || !m.accept_token(t) {
                break;
            }
        }
    }
}

fn report(what: &str, mut v: Vec<f64>) {
    if v.is_empty() {
        println!("{what:<40} no masks timed");
        return;
    }
    v.sort_by(f64::total_cmp);
    let p = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    let total: f64 = v.iter().sum();
    let slow = v.iter().filter(|&&x| x > 1000.0).count();
    println!(
        "{what:<40} masks {:>7}  p50 {:>8.2}  p90 {:>8.2}  p99 {:>9.2}  max {:>10.1} µs  >1ms {:>5}  total {:>9.1} ms",
        v.len(),
        p(0.5),
        p(0.9),
        p(0.99),
        v[v.len() - 1],
        slow,
        total / 1000.0
    );
}

fn compiler(vocab: &Arc<Vocabulary>, split: bool) -> Compiler {
    Compiler::new(
        vocab.clone(),
        CompilerConfig::default()
            .index(IndexConfig::default().threads(1).pda_split(split))
            .cache_entries(0),
    )
}

fn main() {
    // `cargo test` runs bench targets without `--bench`: a measurement of
    // minutes has no place in the test run.
    if !std::env::args().any(|a| a == "--bench") {
        println!("pda_masks bench: run it with `cargo bench --bench pda_masks`");
        return;
    }
    let (Some(vocab), Some(tok)) = (assets::qwen_vocab(), assets::qwen_tokenizer()) else {
        eprintln!("pda_masks bench: skipped (no tokenizer; run scripts/fetch-assets)");
        return;
    };
    let files = files();
    if files.is_empty() {
        eprintln!("pda_masks bench: skipped (no MaskBench corpus in ../shared/corpora)");
        return;
    }
    let cases: Vec<_> = files
        .iter()
        .filter_map(|f| load_file(f).ok())
        .flatten()
        .collect();
    let valid = |c: &constrain_testkit::maskbench::Case| -> Vec<String> {
        c.instances
            .iter()
            .filter(|i| i.valid)
            .map(|i| python_dumps(&i.data))
            .collect()
    };
    let json = std::fs::read_to_string(assets::repo_root().join("grammars/json.gbnf")).unwrap();
    let json = Source::Gbnf {
        grammar: Gbnf::parse("json.gbnf", &json).unwrap(),
        options: GbnfOptions::default(),
    };
    println!("{} MaskBench files, {} cases", files.len(), cases.len());
    for split in [false, true] {
        let mode = if split { "split" } else { "whole" };
        let c = compiler(&vocab, split);
        // The JSON grammar: one compile, every valid instance.
        let t0 = Instant::now();
        let g = c.compile_uncached(&json).expect("json.gbnf compiles");
        let ttfm = t0.elapsed().as_secs_f64() * 1e6;
        let mut v = Vec::new();
        for case in &cases {
            walk(&g, &valid(case), tok, &mut v);
        }
        report(&format!("json.gbnf [{mode}] (TTFM {ttfm:.0} µs)"), v);
        // The schemas that compile to fragments, each compiled afresh.
        let mut v = Vec::new();
        let mut n = 0;
        for case in &cases {
            let source = Source::json_schema(case.schema.clone())
                .with_schema_options(SchemaOptions::compliant().free_form_calls(true));
            let Ok(s) = c.compile_uncached(&source) else {
                continue;
            };
            if s.stats().fragments == 0 {
                continue;
            }
            n += 1;
            walk(&s, &valid(case), tok, &mut v);
        }
        report(&format!("{n} schemas with fragments [{mode}]"), v);
    }
}
