//! TBM and compile time of the pushdown engine:
//! `cargo run --release -p constrain-testkit --example gbnf_tbm -- [N]`
//! compiles `grammars/json.gbnf` over the Qwen vocabulary, walks the valid
//! instances of the first `N` (default 50) MaskBench dev files (as Python's
//! `json.dumps` writes them) and prints the time per token step (mask copied
//! into a bitmask row, then the token accepted): p50 / p99 / max, over a
//! first pass (configurations met for the first time pay a trie walk) and a
//! second pass over the same instances (memoized masks). Also prints the
//! compile time of a few recursive grammars. Reads
//! `$CONSTRAIN_HOME/tokenizer.json` (default `~/.cache/constrain`).
use constrain::vocab::{TextTokenizer, Vocabulary};
use constrain::{bitmask_words, Compiler, CompilerConfig, Source};
use constrain_testkit::maskbench::{load_file, python_dumps};
use std::sync::Arc;
use std::time::Instant;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        return 0.0;
    }
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(50);
    let Some(path) = constrain_testkit::assets::tokenizer_path() else {
        eprintln!("skipping: no tokenizer.json (scripts/fetch-assets)");
        return;
    };
    let v = Vocabulary::from_tokenizer_json_file(&path).unwrap();
    let vocab = Arc::new(v.with_logits_width(151_936).unwrap());
    let tok = TextTokenizer::from_file(&path).unwrap();
    let root = constrain_testkit::assets::repo_root();
    let config = CompilerConfig::default().cache_entries(0);
    let compiler = Compiler::new(vocab.clone(), config);
    // Warm the shared vocabulary tries so compile times are the grammar's.
    let _ = compiler.compile(&Source::regex("x"));
    for (name, text) in [
        (
            "json.gbnf",
            std::fs::read_to_string(root.join("grammars/json.gbnf")).unwrap(),
        ),
        (
            "arithmetic.gbnf",
            std::fs::read_to_string(root.join("grammars/arithmetic.gbnf")).unwrap(),
        ),
        (
            "mini-lang.gbnf",
            std::fs::read_to_string(root.join("grammars/mini-lang.gbnf")).unwrap(),
        ),
        ("tree", "root ::= node\nnode ::= \"{\\\"v\\\":\" [0-9]+ ( \",\\\"kids\\\":[\" node ( \",\" node )* \"]\" )? \"}\"\n".to_string()),
        ("linked list", "root ::= list\nlist ::= \"null\" | \"{\\\"v\\\":\" [0-9]+ \",\\\"next\\\":\" list \"}\"\n".to_string()),
    ] {
        let t = Instant::now();
        let c = compiler.compile(&Source::gbnf(&text).unwrap()).unwrap();
        println!(
            "compile {name}: {:.2} ms (first mask included; lazy {})",
            t.elapsed().as_secs_f64() * 1e3,
            c.is_lazy()
        );
    }
    let json = std::fs::read_to_string(root.join("grammars/json.gbnf")).unwrap();
    let compiled = compiler.compile(&Source::gbnf(&json).unwrap()).unwrap();
    let dir = root.join("../shared/corpora/maskbench-dev");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    let mut docs: Vec<Vec<constrain::TokenId>> = Vec::new();
    for f in files.iter().take(n) {
        for case in load_file(f).unwrap_or_default() {
            for inst in case.instances.iter().filter(|i| i.valid) {
                if let Ok(t) = tok.encode(&python_dumps(&inst.data)) {
                    docs.push(t);
                }
            }
        }
    }
    let mut row = vec![0u32; bitmask_words(vocab.logits_width())];
    for pass in ["first pass", "second pass"] {
        let mut us = Vec::new();
        let mut rejected = 0;
        for d in &docs {
            let mut m = compiled.matcher();
            for &t in d {
                let t0 = Instant::now();
                m.fill_bitmask(&mut row).unwrap();
                let ok = m.accept_token(t);
                us.push(t0.elapsed().as_secs_f64() * 1e6);
                if !ok {
                    rejected += 1;
                    break;
                }
            }
        }
        let count = us.len();
        println!(
            "json.gbnf {pass}: {} instances, {count} steps, TBM p50 {:.2} µs, p99 {:.2} µs, max {:.0} µs; {rejected} instances rejected",
            docs.len(),
            pct(&mut us, 0.5),
            pct(&mut us, 0.99),
            pct(&mut us, 1.0)
        );
    }
    println!(
        "configurations interned: {}, limit hit: {:?}",
        compiled.index().num_states(),
        compiled.index().lazy_limit_error()
    );
}
