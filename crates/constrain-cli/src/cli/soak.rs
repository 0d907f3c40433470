//! `constrain soak [--corpus DIR] --schemas N --samples M --seed S`: proves
//! "always parses" at scale. The real generation loop
//! ([`constrain_model::generate::generate`]) runs over the real Qwen vocabulary with
//! a fake model that emits random logits (shifted noise, spikes, a random EOS
//! boost and occasional NaN/±inf), under random sampling settings, for `N`
//! schemas of a MaskBench-format folder, `M` outputs each. Every output must
//! be accepted by the guide, parse as JSON and validate against its schema
//! with the `jsonschema` crate. Schemas that do not compile (or that the
//! validator does not understand) are skipped and counted.
//!
//! Progress goes to stderr; the last line on stdout is the summary
//! (`soak: X outputs over N schemas, F failed; ...`). Exit 0 when nothing
//! failed, 1 when an output failed, 2 on bad input.

use super::common::IndexArgs;
use super::schema_args::SchemaArgs;
use anyhow::Context;
use constrain::dfa::DfaConfig;
use constrain::index::IndexConfig;
use constrain::sampling::SamplingConfig;
use constrain::vocab::{TextTokenizer, TokenId, Vocabulary, QWEN_LOGITS_WIDTH};
use constrain::Matcher;
use constrain::{Compiler, CompilerConfig, Source};
use constrain_model::generate::{generate, GenerateConfig};
use constrain_model::{LanguageModel, ModelError};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct SoakArgs {
    /// A MaskBench-format folder (`{"schema": ...}` per file).
    #[arg(long, default_value = "../shared/corpora/maskbench-dev")]
    corpus: PathBuf,
    /// Schemas to run (that compile); picked in a seeded random order.
    #[arg(long, default_value_t = 20)]
    schemas: usize,
    /// Outputs per schema.
    #[arg(long, default_value_t = 50)]
    samples: usize,
    /// Seed of everything random (schema order, logits, sampling).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Token budget per output (raised to what a schema needs, plus 16).
    #[arg(long, default_value_t = 48)]
    max_tokens: usize,
    /// Time limit for building one schema's index, in seconds.
    #[arg(long, default_value_t = 20.0)]
    timeout_s: f64,
    /// Largest DFA per schema, in bytes (also bounds determinization).
    #[arg(long, default_value_t = 64 << 20)]
    dfa_size_limit: usize,
    /// Schemas run in parallel.
    #[arg(long, default_value_t = 1)]
    jobs: usize,
    /// Print at most this many failing outputs (to stderr).
    #[arg(long, default_value_t = 10)]
    show_failures: usize,
    /// Write every failure as one JSON line here (file, sample, seed, kind, detail, output).
    #[arg(long)]
    failures: Option<PathBuf>,
    /// tokenizer.json (default: $CONSTRAIN_HOME/tokenizer.json).
    #[arg(long)]
    tokenizer: Option<PathBuf>,
    #[command(flatten)]
    schema: SchemaArgs,
}

/// A model that emits random logits: a random window of a fixed noise table
/// (cheap, and the ranking changes every step), a few spikes, an EOS boost
/// one step in four, and now and then a NaN or an infinity.
struct RandomModel {
    width: usize,
    noise: Vec<f32>,
    eos: Vec<TokenId>,
    rng: StdRng,
}

impl RandomModel {
    fn new(width: usize, eos: Vec<TokenId>, seed: u64) -> RandomModel {
        let mut rng = StdRng::seed_from_u64(seed);
        let noise = (0..2 * width)
            .map(|_| {
                // Roughly normal (sum of uniforms), scaled like real logits.
                let s: f32 = (0..4).map(|_| rng.random::<f32>()).sum();
                (s - 2.0) * 4.0
            })
            .collect();
        RandomModel {
            width,
            noise,
            eos,
            rng,
        }
    }
}

impl LanguageModel for RandomModel {
    fn forward(&mut self, tokens: &[TokenId], _pos: usize) -> Result<Vec<f32>, ModelError> {
        let _ = tokens;
        let off = self.rng.random_range(0..self.width);
        let mut logits = self.noise[off..off + self.width].to_vec();
        for _ in 0..self.rng.random_range(0..4) {
            let i = self.rng.random_range(0..self.width);
            logits[i] += self.rng.random_range(5.0..15.0);
        }
        if self.rng.random_range(0..4) == 0 {
            let boost = self.rng.random_range(0.0..20.0);
            for e in &self.eos {
                logits[e.as_usize()] += boost;
            }
        }
        if self.rng.random_range(0..50) == 0 {
            let i = self.rng.random_range(0..self.width);
            logits[i] = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY][self.rng.random_range(0..3)];
        }
        Ok(logits)
    }
    fn reset(&mut self) {}
    fn logits_width(&self) -> usize {
        self.width
    }
    fn context_length(&self) -> usize {
        1 << 20
    }
}

fn random_sampling(rng: &mut StdRng) -> SamplingConfig {
    let pick = |rng: &mut StdRng, xs: &[f32]| xs[rng.random_range(0..xs.len())];
    SamplingConfig::default()
        .temperature(pick(rng, &[0.0, 0.3, 0.7, 1.0, 1.5]))
        .top_k([0, 5, 50][rng.random_range(0..3)])
        .top_p(pick(rng, &[1.0, 0.95, 0.5]))
        .min_p(pick(rng, &[0.0, 0.05]))
        .repetition_penalty(pick(rng, &[1.0, 1.1]))
}

#[derive(Default)]
struct Counts {
    files: AtomicUsize,
    schemas: AtomicUsize,
    compile_errors: AtomicUsize,
    no_validator: AtomicUsize,
    outputs: AtomicUsize,
    failed: AtomicUsize,
    shown: AtomicUsize,
    /// Failures by kind (see `KINDS`).
    kinds: [AtomicUsize; 4],
}

const KINDS: [&str; 4] = ["generation error", "not accepted", "not JSON", "invalid"];

struct Shared<'a> {
    args: &'a SoakArgs,
    vocab: Arc<Vocabulary>,
    tok: TextTokenizer,
    dfa: DfaConfig,
    counts: Counts,
    /// Next file to try.
    next: Mutex<usize>,
    files: Vec<PathBuf>,
    failures: Option<Mutex<std::io::BufWriter<std::fs::File>>>,
}

pub fn run(a: SoakArgs) -> anyhow::Result<ExitCode> {
    let opts = a.schema.options();
    if opts.lenient || opts.coerce_one_of {
        anyhow::bail!("--lenient and --coerce-one-of let outputs break their schema; the soak checks that they never do");
    }
    if a.schemas == 0 || a.samples == 0 {
        anyhow::bail!("--schemas and --samples must be at least 1");
    }
    if a.timeout_s.is_nan() || a.timeout_s <= 0.0 {
        anyhow::bail!("--timeout-s must be positive, got {}", a.timeout_s);
    }
    if !a.corpus.is_dir() {
        anyhow::bail!(
            "corpus folder not found: {} (pass --corpus DIR)",
            a.corpus.display()
        );
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(&a.corpus)
        .with_context(|| format!("cannot read {}", a.corpus.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    if files.is_empty() {
        anyhow::bail!("no *.json files in {}", a.corpus.display());
    }
    files.sort();
    files.shuffle(&mut StdRng::seed_from_u64(a.seed));
    let index_args = IndexArgs {
        tokenizer: a.tokenizer.clone(),
        logits_width: Some(QWEN_LOGITS_WIDTH),
        lazy: false,
        threads: 1,
        dfa_size_limit: a.dfa_size_limit,
        nfa_size_limit: DfaConfig::default().nfa_size_limit,
        max_states: IndexConfig::default().max_states,
        lazy_states: DfaConfig::default().lazy_states.unwrap_or(0),
    };
    let (vocab, tok) = index_args.vocabulary_and_tokenizer()?;
    let failures = match &a.failures {
        Some(p) => Some(Mutex::new(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("cannot write {}", p.display()))?,
        ))),
        None => None,
    };
    let shared = Shared {
        failures,
        args: &a,
        vocab,
        tok,
        dfa: DfaConfig::default()
            .dfa_size_limit(a.dfa_size_limit)
            .determinize_size_limit(a.dfa_size_limit),
        counts: Counts::default(),
        next: Mutex::new(0),
        files,
    };
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for job in 0..a.jobs.max(1) {
            let shared = &shared;
            s.spawn(move || worker(shared, job));
        }
    });
    if let Some(f) = &shared.failures {
        use std::io::Write;
        f.lock()
            .unwrap_or_else(|e| e.into_inner())
            .flush()
            .context("cannot write the failures file")?;
    }
    let c = &shared.counts;
    let failed = c.failed.load(Relaxed);
    let kinds: Vec<String> = KINDS
        .iter()
        .zip(&c.kinds)
        .filter(|(_, n)| n.load(Relaxed) > 0)
        .map(|(k, n)| format!("{} {k}", n.load(Relaxed)))
        .collect();
    let kinds = if kinds.is_empty() {
        String::new()
    } else {
        format!(": {}", kinds.join(", "))
    };
    println!(
        "soak: {} outputs over {} schemas, {} failed{kinds} ({} files tried: {} did not compile, {} not understood by the validator; {:.0} s)",
        c.outputs.load(Relaxed),
        c.schemas.load(Relaxed),
        failed,
        c.files.load(Relaxed),
        c.compile_errors.load(Relaxed),
        c.no_validator.load(Relaxed),
        t0.elapsed().as_secs_f64()
    );
    Ok(if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Takes files until `--schemas` schemas have run.
fn worker(sh: &Shared, job: usize) {
    let a = sh.args;
    let opts = a.schema.options();
    let index_cfg = IndexConfig::default().threads(1);
    loop {
        let i = {
            let mut next = sh.next.lock().unwrap_or_else(|e| e.into_inner());
            if *next >= sh.files.len() || sh.counts.schemas.load(Relaxed) >= a.schemas {
                return;
            }
            *next += 1;
            *next - 1
        };
        let path = &sh.files[i];
        sh.counts.files.fetch_add(1, Relaxed);
        let schema = match std::fs::read_to_string(path)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v.get("schema").cloned())
        {
            Some(s) => s,
            None => {
                sh.counts.compile_errors.fetch_add(1, Relaxed);
                continue;
            }
        };
        let Ok(validator) = constrain_testkit::oracle::validator_for(&schema) else {
            sh.counts.no_validator.fetch_add(1, Relaxed);
            continue;
        };
        let compiler = Compiler::new(
            sh.vocab.clone(),
            CompilerConfig::default()
                .dfa(sh.dfa.clone())
                .index(
                    index_cfg
                        .clone()
                        .deadline(Some(Instant::now() + Duration::from_secs_f64(a.timeout_s))),
                )
                .cache_entries(0),
        );
        let source = Source::json_schema(schema.clone()).with_schema_options(opts.clone());
        let index = match compiler.compile(&source) {
            Ok(c) => c.index().clone(),
            Err(_) => {
                sh.counts.compile_errors.fetch_add(1, Relaxed);
                continue;
            }
        };
        // Claim a schema slot (another worker may have filled the last one).
        if sh.counts.schemas.fetch_add(1, Relaxed) >= a.schemas {
            sh.counts.schemas.fetch_sub(1, Relaxed);
            return;
        }
        let seed = a.seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut rng = StdRng::seed_from_u64(seed);
        let mut model = RandomModel::new(sh.vocab.logits_width(), sh.vocab.eos().to_vec(), seed);
        let need = Matcher::from_index(index.clone()).tokens_to_accept();
        let max_tokens = match need {
            Some(n) => a.max_tokens.max(n as usize + 16),
            None => a.max_tokens.max(256),
        };
        for k in 0..a.samples {
            let mut guide = Matcher::from_index(index.clone());
            let gen_cfg = GenerateConfig::default()
                .max_tokens(max_tokens)
                .sampling(random_sampling(&mut rng))
                .seed(rng.random())
                .jump_forward(rng.random_range(0..2) == 0)
                .ignore_eos(false)
                .mask_overlap(true);
            let result = generate(
                &mut model,
                &sh.vocab,
                Some(&sh.tok),
                Some(&mut guide),
                &[TokenId(0)],
                &gen_cfg,
                &mut |_| {},
            );
            sh.counts.outputs.fetch_add(1, Relaxed);
            // (kind, detail, output)
            let why: Option<(usize, String, String)> = match result {
                Err(e) => Some((0, e.to_string(), String::new())),
                Ok(g) if !g.accepted => {
                    Some((1, "the guide did not accept the output".into(), g.text()))
                }
                Ok(g) => match std::str::from_utf8(&g.bytes)
                    .map_err(|e| e.to_string())
                    .and_then(|s| {
                        serde_json::from_str::<serde_json::Value>(s).map_err(|e| e.to_string())
                    }) {
                    Err(e) => Some((2, e, g.text())),
                    Ok(v) => validator
                        .validate(&v)
                        .err()
                        .map(|e| (3, e.to_string(), g.text())),
                },
            };
            if let Some((kind, detail, output)) = why {
                sh.counts.failed.fetch_add(1, Relaxed);
                sh.counts.kinds[kind].fetch_add(1, Relaxed);
                if sh.counts.shown.fetch_add(1, Relaxed) < a.show_failures {
                    eprintln!(
                        "FAIL {} (sample {k}, seed {seed}): {}: {detail}: {output}",
                        path.display(),
                        KINDS[kind]
                    );
                }
                if let Some(f) = &sh.failures {
                    use std::io::Write;
                    let line = serde_json::json!({
                        "file": path.display().to_string(),
                        "sample": k,
                        "seed": seed,
                        "kind": KINDS[kind],
                        "detail": detail,
                        "output": output,
                    });
                    let mut f = f.lock().unwrap_or_else(|e| e.into_inner());
                    let _ = writeln!(f, "{line}");
                }
            }
        }
        let done = sh.counts.schemas.load(Relaxed);
        if done % 10 == 0 || done == a.schemas {
            eprintln!(
                "[job {job}] {done}/{} schemas, {} outputs, {} failed",
                a.schemas,
                sh.counts.outputs.load(Relaxed),
                sh.counts.failed.load(Relaxed)
            );
        }
    }
}
