//! `constrain maskbench PATH... [--files-from LIST] [--timeout-s N]
//! [--summary-json FILE] [--jsonl FILE]`: MaskBench's rules over MaskBench
//! and JSON-Schema-Test-Suite files (see `constrain::maskbench`). Progress on
//! stderr, the summary on stdout (and in `--summary-json`).

use super::common::IndexArgs;
use anyhow::Context;
use constrain::maskbench::{self, CaseResult, RunConfig, Summary};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
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
    if !(a.timeout_s > 0.0) {
        anyhow::bail!("--timeout-s must be positive, got {}", a.timeout_s);
    }
    let vocab = a.index.vocabulary()?;
    let tok = a.index.text_tokenizer()?;
    let mut cfg = RunConfig {
        timeout: Duration::from_secs_f64(a.timeout_s),
        ..RunConfig::default()
    };
    cfg.schema.whitespace = constrain::schema::Whitespace::Flexible {
        max: a.whitespace_max,
    };
    cfg.dfa = a.index.dfa_config();
    cfg.index = constrain::index::IndexConfig {
        threads: 1,
        ..a.index.index_config()
    };
    let mut jsonl = match &a.jsonl {
        Some(p) => Some(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("cannot write {}", p.display()))?,
        )),
        None => None,
    };
    let mut results: Vec<CaseResult> = Vec::new();
    let start = Instant::now();
    let n_files = files.len();
    for (i, f) in files.iter().enumerate() {
        let cases = match maskbench::load_file(f) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("warning: skipping {e}");
                continue;
            }
        };
        for case in cases {
            let r = maskbench::run_case(&case, &vocab, &tok, &cfg);
            if let Some(w) = jsonl.as_mut() {
                serde_json::to_writer(&mut *w, &r)?;
                w.write_all(b"\n")?;
            }
            results.push(r);
        }
        if (i + 1) % 50 == 0 || i + 1 == n_files {
            let s = Summary::of(&results);
            eprintln!(
                "[{}/{}] {:.0}s  passing {}/{}  compile_error {}  timeout {}  valid_rejected {}  invalid_accepted {}",
                i + 1,
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
