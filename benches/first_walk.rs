//! First-walk step cost (bench binary, prints figures): `cargo bench --bench
//! first_walk -- [--files N] [--every K] [--passes P] [--loops L]
//! [--dir DIR] [--compliant]`.
//!
//! What a serving engine pays per token, measured in Rust without Python's
//! call overhead: `Matcher::fill_bitmask` into one XGrammar-layout row plus
//! `accept_token`, over every token of every valid instance of MaskBench dev
//! files (every K-th file by name, the first N whose schema compiles), each
//! schema compiled the way the Python package's
//! `compile_json_schema(..., whitespace="flexible", strict=False)` compiles
//! it (compliant semantics, lazy index past 128 DFA states). Instances are
//! the real tokenizer's tokens of Python's `json.dumps` text.
//!
//! Pass 1 is every instance's first walk over a freshly compiled artefact:
//! a lazy state's first visit computes its mask inside the step. Later
//! passes walk the same instances with new matchers over the same artefacts
//! (masks computed: a row fill and a transition). `--loops L` repeats pass
//! 1 over L fresh compiles of the same schemas (a profile of first visits,
//! with compiling left out by `perf record --delay`: the compiles of all
//! loops are done before the first walk).
//!
//! Skips with a message when the tokenizer or `../shared/corpora` is absent.

use constrain::schema::{JsonMode, SchemaOptions, Whitespace};
use constrain::vocab::TokenId;
use constrain::{Compiled, Compiler, CompilerConfig, Source};
use constrain_testkit::{assets, maskbench};
use std::time::Instant;

fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("a number"))
        .unwrap_or(default)
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((p / 100.0 * v.len() as f64) as usize).min(v.len() - 1)]
}

/// The process's minor page faults so far (`/proc/self/stat`, Linux).
fn minor_faults() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command's closing parenthesis; minflt is field 10.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split(' ').nth(7)?.parse().ok()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let files = arg(&args, "--files", 100);
    let every = arg(&args, "--every", 1).max(1);
    let passes = arg(&args, "--passes", 2).max(1);
    let loops = arg(&args, "--loops", 1).max(1);
    let (Some(vocab), Some(tok), Some(corpora)) = (
        assets::qwen_vocab(),
        assets::qwen_tokenizer(),
        assets::corpora(),
    ) else {
        eprintln!("skipping first_walk: the Qwen tokenizer or ../shared/corpora is absent");
        return;
    };
    // `--compliant`: the MaskBench runner's options instead of Python's.
    let opts = if args.iter().any(|a| a == "--compliant") {
        SchemaOptions::compliant()
    } else {
        SchemaOptions::default()
            .whitespace(Whitespace::Flexible { max: 2 })
            .mode(JsonMode::Compliant)
    };
    let compiler = Compiler::new(vocab.clone(), CompilerConfig::default().cache_entries(0));
    // (schema, instances' tokens) of the files taken.
    let mut cases: Vec<(Source, Vec<Vec<TokenId>>)> = Vec::new();
    let mut skipped = 0;
    // `--dir DIR`: MaskBench-format files from DIR instead of the dev half.
    let dir = args
        .iter()
        .position(|a| a == "--dir")
        .and_then(|i| args.get(i + 1))
        .map_or_else(|| corpora.join("maskbench-dev"), std::path::PathBuf::from);
    for path in maskbench::collect_files(&dir).iter().step_by(every) {
        if cases.len() >= files {
            break;
        }
        let Ok(file) = maskbench::load_file(path) else {
            continue;
        };
        for case in file {
            let runs: Vec<Vec<TokenId>> = case
                .instances
                .iter()
                .filter(|i| i.valid)
                .filter_map(|i| {
                    let text = maskbench::python_dumps(&i.data);
                    let t = tok.encode(&text).ok()?;
                    (vocab.decode(&t) == text.as_bytes()).then_some(t)
                })
                .collect();
            if runs.is_empty() {
                continue;
            }
            let source = Source::json_schema(case.schema).with_schema_options(opts.clone());
            match compiler.compile_uncached(&source) {
                Ok(_) => cases.push((source, runs)),
                Err(_) => skipped += 1,
            }
        }
    }
    let compile_all = || -> Vec<Compiled> {
        cases
            .iter()
            .map(|(s, _)| compiler.compile_uncached(s).expect("compiled before"))
            .collect()
    };
    let t = Instant::now();
    let fresh: Vec<Vec<Compiled>> = (0..loops).map(|_| compile_all()).collect();
    println!(
        "files {} (not compiled: {skipped}), {} loop(s) compiled in {:.1} s; walking",
        cases.len(),
        loops,
        t.elapsed().as_secs_f64()
    );
    let words = constrain::bitmask_words(vocab.logits_width());
    let mut row = vec![0u32; words];
    // `--faults`: the steps split by whether they took a page fault (read
    // from /proc between steps, outside the timed part).
    let by_faults = args.iter().any(|a| a == "--faults");
    let faulted: std::cell::RefCell<Vec<(bool, f64)>> = Default::default();
    // Steps over 20 µs, by backend (eager, lazy, pushdown), with all steps.
    let over: std::cell::RefCell<[(usize, usize); 3]> = Default::default();
    let mut walk = |compiled: &[Compiled]| -> (Vec<f64>, Vec<f64>) {
        let (mut steps, mut fills) = (Vec::new(), Vec::new());
        for (c, (_, runs)) in compiled.iter().zip(&cases) {
            let kind = if c.stats().fragments > 0 {
                2
            } else {
                c.is_lazy() as usize
            };
            for tokens in runs {
                let mut m = c.matcher();
                for &t in tokens {
                    let f0 = if by_faults { minor_faults() } else { None };
                    let t0 = Instant::now();
                    m.fill_bitmask(&mut row).expect("row width");
                    let t1 = Instant::now();
                    let ok = m.accept_token(t);
                    let t2 = Instant::now();
                    if !ok {
                        break;
                    }
                    steps.push((t2 - t0).as_secs_f64() * 1e9);
                    let mut o = over.borrow_mut();
                    o[kind].1 += 1;
                    o[kind].0 += ((t2 - t0).as_secs_f64() > 20e-6) as usize;
                    fills.push((t1 - t0).as_secs_f64() * 1e9);
                    if let Some(f0) = f0 {
                        let f = minor_faults().unwrap_or(f0) > f0;
                        faulted
                            .borrow_mut()
                            .push((f, (t2 - t0).as_secs_f64() * 1e9));
                    }
                }
            }
        }
        (steps, fills)
    };
    let report = |name: &str, steps: &mut Vec<f64>, fills: &mut Vec<f64>| {
        if steps.is_empty() {
            println!("{name}: no steps");
            return;
        }
        let total: f64 = steps.iter().sum();
        println!(
            "{name}: steps {}  fill+accept ns p50 {:.0} p90 {:.0} p99 {:.0} mean {:.0}  fill only p50 {:.0} p99 {:.0}",
            steps.len(),
            pct(steps, 50.0),
            pct(steps, 90.0),
            pct(steps, 99.0),
            total / steps.len() as f64,
            pct(fills, 50.0),
            pct(fills, 99.0),
        );
    };
    // `perf record -D -1 --control fifo:CTL` records from here on when
    // `PERF_CTL_FIFO=CTL` (the compiles left out).
    if let Some(ctl) = std::env::var_os("PERF_CTL_FIFO") {
        let _ = std::fs::write(ctl, "enable\n");
    }
    let faults0 = minor_faults();
    let (mut s1, mut f1) = (Vec::new(), Vec::new());
    for compiled in &fresh {
        let (s, f) = walk(compiled);
        s1.extend(s);
        f1.extend(f);
    }
    if let Some(ctl) = std::env::var_os("PERF_CTL_FIFO") {
        let _ = std::fs::write(ctl, "disable\n");
    }
    let faults = minor_faults().zip(faults0).map(|(a, b)| a - b);
    report("pass 1 (first walk)", &mut s1, &mut f1);
    for (name, (n, of)) in ["eager", "lazy", "pushdown"].iter().zip(over.take()) {
        println!("pass 1 {name}: {n} of {of} steps over 20 µs");
    }
    if let Some(f) = faults {
        println!(
            "pass 1 page faults: {f} ({:.2} a step)",
            f as f64 / s1.len().max(1) as f64
        );
    }
    if by_faults {
        let faulted = faulted.take();
        for with in [false, true] {
            let mut v: Vec<f64> = faulted
                .iter()
                .filter(|f| f.0 == with)
                .map(|f| f.1)
                .collect();
            if !v.is_empty() {
                println!(
                    "pass 1 steps {} a page fault: {} ({:.0} %), p50 {:.0} ns, sum {:.1} ms",
                    if with { "with" } else { "without" },
                    v.len(),
                    100.0 * v.len() as f64 / faulted.len() as f64,
                    pct(&mut v, 50.0),
                    v.iter().sum::<f64>() / 1e6
                );
            }
        }
    }
    for p in 2..=passes {
        let (mut s, mut f) = walk(&fresh[0]);
        report(&format!("pass {p}"), &mut s, &mut f);
    }
}
