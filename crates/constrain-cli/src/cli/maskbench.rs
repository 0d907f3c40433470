//! `constrain maskbench PATH... [--files-from LIST] [--timeout-s N]
//! [--summary-json FILE] [--jsonl FILE] [--jobs N] [--shared-refs-len N] [--no-deep-free-form]
//! [--free-form-depth N] [--extra-value-depth N] [--root-extra-value-depth N]
//! [--max-product-states N] [--max-product-len N]`: MaskBench's rules over MaskBench
//! and JSON-Schema-Test-Suite files (see `constrain_testkit::maskbench`). Progress on
//! stderr, the summary on stdout (and in `--summary-json`).

use super::common::IndexArgs;
use anyhow::Context;
use constrain_testkit::maskbench::{self, CaseResult, RunConfig, Summary};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct MaskbenchArgs {
    /// Files or folders (searched recursively for *.json).
    paths: Vec<PathBuf>,
    /// A file listing more paths, one per line (relative to the list's folder).
    #[arg(long)]
    files_from: Option<PathBuf>,
    /// Time limit per schema for compiling.
    #[arg(long, default_value_t = 30.0)]
    timeout_s: f64,
    /// Write the summary JSON here.
    #[arg(long)]
    summary_json: Option<PathBuf>,
    /// Write one JSON line per schema here.
    #[arg(long)]
    jsonl: Option<PathBuf>,
    /// Most whitespace characters between tokens (any JSON whitespace).
    #[arg(long, default_value_t = 2)]
    whitespace_max: usize,
    /// Schemas run at once, each on one thread (MaskBench measures one
    /// thread per schema; more jobs only shorten the wall time of a run).
    #[arg(long, default_value_t = 1)]
    jobs: usize,
    /// Every free-form value (compliant mode's implicit extra-key values,
    /// `{}`, `true`) a call of the shared "any JSON value" fragment: exact at
    /// any depth, at a first-visit cost in TBM (SchemaOptions::free_form_calls).
    #[arg(long)]
    free_form_calls: bool,
    /// Keep free-form values as depth-bounded copies also in schemas with
    /// an explicit free-form value (SchemaOptions::deep_free_form off).
    #[arg(long)]
    no_deep_free_form: bool,
    /// Regex text length (bytes) past which every bare `$ref` is a call of
    /// a shared pushdown fragment (SchemaOptions::shared_refs_len; default
    /// 16777216, the text limit: off; 65536 is the measured setting).
    #[arg(long)]
    shared_refs_len: Option<usize>,
    /// Containers a free-form value nests (SchemaOptions::free_form_depth;
    /// default: the compliant options').
    #[arg(long)]
    free_form_depth: Option<usize>,
    /// Containers the value of an implicit extra key nests
    /// (SchemaOptions::extra_value_depth; default: the compliant options').
    #[arg(long)]
    extra_value_depth: Option<usize>,
    /// The same for the document's own object
    /// (SchemaOptions::root_extra_value_depth).
    #[arg(long)]
    root_extra_value_depth: Option<usize>,
    /// Most states of a product automaton (SchemaOptions::max_product_states).
    #[arg(long)]
    max_product_states: Option<usize>,
    /// Longest regex text read back from a product automaton, in bytes
    /// (SchemaOptions::max_product_len).
    #[arg(long)]
    max_product_len: Option<usize>,
    #[command(flatten)]
    index: IndexArgs,
}

pub fn run(a: MaskbenchArgs) -> anyhow::Result<ExitCode> {
    let mut files = Vec::new();
    for p in &a.paths {
        if !p.exists() {
            anyhow::bail!("no such file or folder: {}", p.display());
        }
        files.extend(maskbench::collect_files(p));
    }
    if let Some(list) = &a.files_from {
        let text = std::fs::read_to_string(list)
            .with_context(|| format!("cannot read {}", list.display()))?;
        let base = list.parent().map(PathBuf::from).unwrap_or_default();
        for line in text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            let p = PathBuf::from(line);
            files.push(if p.is_absolute() || p.exists() {
                p
            } else {
                base.join(p)
            });
        }
    }
    if files.is_empty() {
        anyhow::bail!("no corpus files given (pass paths or --files-from)");
    }
    if a.jobs == 0 {
        anyhow::bail!("--jobs must be at least 1");
    }
    if !(a.timeout_s > 0.0) {
        anyhow::bail!("--timeout-s must be positive, got {}", a.timeout_s);
    }
    let t_load = Instant::now();
    let (vocab, tok) = a.index.vocabulary_and_tokenizer()?;
    let load = t_load.elapsed();
    let mut cfg = RunConfig::default().timeout(Duration::from_secs_f64(a.timeout_s));
    cfg.schema.whitespace = constrain::schema::Whitespace::Flexible {
        max: a.whitespace_max,
    };
    cfg.schema.free_form_calls = a.free_form_calls;
    if a.no_deep_free_form {
        cfg.schema.deep_free_form = false;
    }
    if let Some(n) = a.shared_refs_len {
        cfg.schema.shared_refs_len = n;
    }
    if let Some(n) = a.free_form_depth {
        cfg.schema.free_form_depth = n;
    }
    if let Some(n) = a.extra_value_depth {
        cfg.schema.extra_value_depth = n;
    }
    if let Some(n) = a.root_extra_value_depth {
        cfg.schema.root_extra_value_depth = n;
    }
    if let Some(n) = a.max_product_states {
        cfg.schema.max_product_states = n;
    }
    if let Some(n) = a.max_product_len {
        cfg.schema.max_product_len = n;
    }
    cfg.dfa = a.index.dfa_config();
    cfg.index = a.index.index_config().threads(1);
    // The set-up before the first schema's clock starts, on its own line.
    let prepare = maskbench::prepare_vocabulary(&vocab, &cfg)
        .map_err(|e| anyhow::anyhow!("vocabulary set-up failed: {e}"))?;
    eprintln!(
        "set-up: vocabulary of {} tokens read in {:.1} ms, its tables built in {:.1} ms (not in TTFM)",
        vocab.num_ids(),
        load.as_secs_f64() * 1e3,
        prepare.as_secs_f64() * 1e3
    );
    let mut jsonl = match &a.jsonl {
        Some(p) => Some(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("cannot write {}", p.display()))?,
        )),
        None => None,
    };
    let mut results: Vec<CaseResult> = Vec::new();
    let start = Instant::now();
    let n_files = files.len();
    let next = AtomicUsize::new(0);
    let (tx, rx) = std::sync::mpsc::channel::<Vec<CaseResult>>();
    std::thread::scope(|scope| -> anyhow::Result<()> {
        for _ in 0..a.jobs {
            let tx = tx.clone();
            let (next, files, vocab, tok, cfg) = (&next, &files, &vocab, &tok, &cfg);
            scope.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(f) = files.get(i) else { break };
                let rs = match maskbench::load_file(f) {
                    Ok(cases) => cases
                        .iter()
                        .map(|case| maskbench::run_case(case, vocab, tok, cfg))
                        .collect(),
                    Err(e) => {
                        eprintln!("warning: skipping {e}");
                        Vec::new()
                    }
                };
                if tx.send(rs).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        for (done, rs) in rx.iter().enumerate() {
            for r in rs {
                if let Some(w) = jsonl.as_mut() {
                    serde_json::to_writer(&mut *w, &r)?;
                    w.write_all(b"\n")?;
                }
                results.push(r);
            }
            if (done + 1) % 50 == 0 || done + 1 == n_files {
                let s = Summary::of(&results);
                eprintln!(
                    "[{}/{}] {:.0}s  passing {}/{}  compile_error {}  timeout {}  valid_rejected {}  invalid_accepted {}",
                    done + 1,
                    n_files,
                    start.elapsed().as_secs_f64(),
                    s.passing,
                    s.schemas,
                    s.compile_error,
                    s.timeout,
                    s.valid_rejected,
                    s.invalid_accepted
                );
            }
        }
        Ok(())
    })?;
    if let Some(mut w) = jsonl {
        w.flush()?;
    }
    let summary = serde_json::to_string_pretty(&Summary::of(&results))?;
    if let Some(p) = &a.summary_json {
        std::fs::write(p, &summary).with_context(|| format!("cannot write {}", p.display()))?;
    }
    println!("{summary}");
    Ok(ExitCode::SUCCESS)
}
