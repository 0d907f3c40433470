//! Walks MaskBench instances as `constrain maskbench` does and prints, per
//! schema, how many token steps took more than 20 µs, with a histogram of
//! those (a development aid for TBM p99):
//! `cargo run --release --example tbm_profile -- FILE...`; `VERBOSE=1` also
//! prints each slow step with the text before it and its token; `PASSES=N`
//! walks the files N times (each compiled afresh) and reports the last pass
//! only, so the vocabulary's one-time tries (plain levels, byte chains,
//! string bodies: built once per process, as in a full run) are warm; with
//! N over 2 a step's time is its least over the passes after the first
//! (the machine's noise only ever adds time).
//! Reads `$CONSTRAIN_HOME/tokenizer.json` (default `~/.cache/constrain`).
use constrain::matcher::Matcher;
use constrain::schema::Whitespace;
use constrain::vocab::{TextTokenizer, Vocabulary};
use constrain_testkit::maskbench::{compile_case, engine_step, load_file, python_dumps, RunConfig};
use std::sync::Arc;
use std::time::Instant;

/// The binary's allocator, as `constrain maskbench` runs it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // As the binary's schema commands run.
    constrain_testkit::process::keep_freed_memory();
    constrain_testkit::process::no_huge_pages();
    let files: Vec<String> = std::env::args().skip(1).collect();
    if files.is_empty() {
        eprintln!("usage: tbm_profile FILE...");
        std::process::exit(2);
    }
    let home = std::env::var("CONSTRAIN_HOME").unwrap_or_else(|_| {
        format!(
            "{}/.cache/constrain",
            std::env::var("HOME").unwrap_or_default()
        )
    });
    let path = format!("{home}/tokenizer.json");
    let v = Vocabulary::from_tokenizer_json_file(&path).unwrap();
    let vocab = Arc::new(v.with_logits_width(151_936).unwrap());
    let tok = TextTokenizer::from_file(&path).unwrap();
    let mut cfg = RunConfig::default();
    cfg.schema.whitespace = Whitespace::Flexible { max: 2 };
    cfg.index.threads = 1;
    let verbose = std::env::var_os("VERBOSE").is_some();
    let mut row = vec![0u32; constrain::bitmask_words(vocab.logits_width())];
    let passes: usize = std::env::var("PASSES")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(1)
        .max(1);
    let (mut all_slow, mut all_tokens, mut slow_us) = (0usize, 0usize, 0.0f64);
    // Slow steps by 10 µs bucket: 20-30, 30-40, ..., 70 and more.
    let mut hist = [0usize; 6];
    // Per step (in walk order, the same each pass), its least time over the
    // passes after the first.
    let mut best: Vec<f64> = Vec::new();
    for pass in 1..=passes {
        // Only the last pass is reported.
        let report = pass == passes;
        (all_slow, all_tokens, slow_us, hist) = (0, 0, 0.0, [0; 6]);
        let mut step = 0usize;
        for f in &files {
            let Ok(cases) = load_file(std::path::Path::new(f)) else {
                continue;
            };
            for case in cases {
                let Ok((index, _)) = compile_case(&case.schema, &vocab, &cfg) else {
                    continue;
                };
                let (mut slow, mut tokens) = (0usize, 0usize);
                for inst in &case.instances {
                    let text = python_dumps(&inst.data);
                    let Ok(toks) = tok.encode(&text) else {
                        continue;
                    };
                    let mut g = Matcher::from_index(index.clone());
                    let mut pos = 0usize;
                    for &t in &toks {
                        let n0 = index.num_states();
                        let t0 = Instant::now();
                        let ok = engine_step(&mut g, &mut row, t);
                        let mut us = t0.elapsed().as_secs_f64() * 1e6;
                        if pass > 1 {
                            if best.len() <= step {
                                best.resize(step + 1, f64::INFINITY);
                            }
                            best[step] = best[step].min(us);
                            us = best[step];
                        }
                        step += 1;
                        let found = index.num_states() - n0;
                        tokens += 1;
                        if us > 20.0 {
                            slow += 1;
                            slow_us += us;
                            hist[((us / 10.0) as usize).clamp(2, 7) - 2] += 1;
                            if verbose && report {
                                let ctx = &text.as_bytes()[pos.saturating_sub(30)..pos];
                                println!(
                                    "{us:8.1} µs  after {:?}  token {}  ({found} states found)",
                                    String::from_utf8_lossy(ctx),
                                    vocab.describe(t)
                                );
                            }
                        }
                        pos += vocab.token_bytes(t).map_or(0, <[u8]>::len);
                        if !ok {
                            break;
                        }
                    }
                }
                if report {
                    println!(
                        "{}: {tokens} tokens, {slow} over 20 µs, lazy {}",
                        case.name,
                        index.is_lazy()
                    );
                }
                all_slow += slow;
                all_tokens += tokens;
            }
        }
    }
    println!(
        "total: {all_tokens} tokens, {all_slow} over 20 µs ({:.2} %, {:.1} ms); by 10 µs from 20: {hist:?}",
        100.0 * all_slow as f64 / all_tokens.max(1) as f64,
        slow_us / 1e3
    );
}
