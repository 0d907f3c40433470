//! # MaskBench runner
//!
//! Runs schemas with valid and invalid instances through the whole engine, by
//! MaskBench's rules (JSONSchemaBench, `maskbench/`):
//!
//! * JSON semantics **compliant** (absent `additionalProperties` allows extra
//!   keys), any JSON whitespace (bounded [`Whitespace::Flexible`](constrain::schema::Whitespace::Flexible));
//! * each instance is the text Python's `json.dumps(data)` writes (separators
//!   `", "` and `": "`, `ensure_ascii=False`; see [`python_dumps`]), tokenized
//!   canonically by the tokenizer; at every token the engine computes the mask
//!   and must allow that token, and at the end it must allow EOS;
//! * a schema **passes** when it compiles, every valid instance is accepted and
//!   every invalid one rejected;
//! * TTFM (time to first mask) is the compile time (schema → regex → DFA →
//!   index); TBM (time between masks) the time to get one mask and commit one
//!   token; single thread.
//!
//! Two file formats are read: MaskBench (`{"schema", "tests": [{data, valid}]}`)
//! and JSON-Schema-Test-Suite (a list of `{description, schema, tests}`; each
//! group is one schema). Each schema gets a time limit; a compile that runs
//! past it is reported as a timeout (its worker thread is left to finish on its
//! own; the index build itself stops at the deadline).

use constrain::dfa::DfaConfig;
use constrain::index::{IndexConfig, TokenIndex};
use constrain::matcher::Matcher;
use constrain::schema::SchemaOptions;
use constrain::vocab::{TextTokenizer, Vocabulary};
use constrain::{Compiler, CompilerConfig, Source};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One instance to check.
#[derive(Clone, Debug)]
pub struct Instance {
    /// The JSON document to check against the schema.
    pub data: Value,
    /// Whether the document is valid under the schema.
    pub valid: bool,
    /// The test's description (empty when the file gives none).
    pub description: String,
}

/// One schema with its instances.
#[derive(Clone, Debug)]
pub struct Case {
    /// `file` for MaskBench, `file#group-index` for the test suite.
    pub name: String,
    /// The JSON Schema.
    pub schema: Value,
    /// The documents to check against it.
    pub instances: Vec<Instance>,
}

/// The outcome class of a schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The schema compiled, every valid instance was accepted and every
    /// invalid one rejected.
    Pass,
    /// The schema did not compile.
    CompileError,
    /// The compile ran past the time limit.
    Timeout,
    /// At least one valid instance was rejected (and no invalid one accepted).
    ValidRejected,
    /// At least one invalid instance was accepted.
    InvalidAccepted,
}

/// The result of one instance.
#[derive(Clone, Debug, serde::Serialize)]
pub struct InstanceResult {
    /// Whether the instance is valid under the schema.
    pub valid: bool,
    /// Whether the engine allowed every token of the instance and then EOS.
    pub accepted: bool,
    /// Number of tokens of the instance's text (0 when it did not tokenize).
    pub tokens: usize,
    /// Where a valid instance was rejected (token index) or why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejected_at: Option<String>,
}

/// The result of one schema.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CaseResult {
    /// The case's name (see [`Case::name`]).
    pub name: String,
    /// The schema's outcome class.
    pub outcome: Outcome,
    /// The compile error or timeout message; `None` when the schema compiled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Time to first mask (the whole compile) in µs; `None` when the schema
    /// did not compile.
    pub ttfm_us: Option<f64>,
    /// Where TTFM went: schema → regex, regex → DFA, DFA → token index (µs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phases_us: Option<Phases>,
    /// Number of states of the token index; `None` when the schema did not
    /// compile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live_states: Option<usize>,
    /// Whether the DFA and masks were built on demand (a DFA past
    /// `DfaConfig::lazy_states`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub lazy: bool,
    /// Tokens whose mask step took more than 20 µs (the TBM p99 target).
    pub tbm_over_20us: usize,
    /// Tokens whose mask step took more than 100 µs.
    pub tbm_over_100us: usize,
    /// The slowest mask step in µs (0 when none ran).
    pub tbm_max_us: f64,
    /// Tokens of the instances the engine was run on, all together.
    pub tokens: usize,
    /// Number of valid instances rejected.
    pub valid_rejected: usize,
    /// Number of invalid instances accepted.
    pub invalid_accepted: usize,
    /// One result per instance, in the case's order.
    pub instances: Vec<InstanceResult>,
    /// Time of each mask step (mask plus commit of one token) in µs, in
    /// order; not serialized.
    #[serde(skip)]
    pub tbm_us: Vec<f64>,
}

/// The parts of one compile, in microseconds.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct Phases {
    /// Schema to regular expression.
    pub schema: f64,
    /// Regular expression to DFA.
    pub dfa: f64,
    /// DFA to token index.
    pub index: f64,
}

/// Runner settings.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RunConfig {
    /// Time limit of one schema's compile (default 30 s).
    pub timeout: Duration,
    /// How schemas are read (default [`SchemaOptions::compliant`]).
    pub schema: SchemaOptions,
    /// DFA construction settings (default [`DfaConfig::default`]).
    pub dfa: DfaConfig,
    /// Token index settings (default one thread).
    pub index: IndexConfig,
}

constrain::config_setters!(RunConfig {
    timeout: Duration,
    schema: SchemaOptions,
    dfa: DfaConfig,
    index: IndexConfig,
});

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            timeout: Duration::from_secs(30),
            schema: SchemaOptions::compliant(),
            dfa: DfaConfig::default(),
            index: IndexConfig::default().threads(1),
        }
    }
}

/// Why a corpus file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    /// The file could not be read or is not JSON.
    #[error("cannot read {path}: {msg}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        msg: String,
    },
    /// The file is JSON of neither supported shape.
    #[error("{path} is neither MaskBench nor JSON-Schema-Test-Suite format")]
    Format {
        /// The file.
        path: PathBuf,
    },
}

/// Reads the cases of one file (either format).
pub fn load_file(path: &Path) -> Result<Vec<Case>, CorpusError> {
    let text = std::fs::read_to_string(path).map_err(|e| CorpusError::Read {
        path: path.to_path_buf(),
        msg: e.to_string(),
    })?;
    let v: Value = serde_json::from_str(&text).map_err(|e| CorpusError::Read {
        path: path.to_path_buf(),
        msg: e.to_string(),
    })?;
    let name = path.display().to_string();
    let instances = |tests: &Value| -> Vec<Instance> {
        tests
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|t| {
                        Some(Instance {
                            data: t.get("data")?.clone(),
                            valid: t.get("valid")?.as_bool()?,
                            description: t
                                .get("description")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string(),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    match &v {
        Value::Object(o) if o.contains_key("schema") => Ok(vec![Case {
            name,
            schema: o["schema"].clone(),
            instances: instances(&o["tests"]),
        }]),
        Value::Array(groups) => Ok(groups
            .iter()
            .enumerate()
            .filter_map(|(i, g)| {
                Some(Case {
                    name: format!("{name}#{i}"),
                    schema: g.get("schema")?.clone(),
                    instances: instances(g.get("tests")?),
                })
            })
            .collect()),
        _ => Err(CorpusError::Format {
            path: path.to_path_buf(),
        }),
    }
}

/// Every `.json` file under `path` (a file or a directory, recursively), sorted.
pub fn collect_files(path: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if path.is_dir() {
        if let Ok(rd) = std::fs::read_dir(path) {
            for e in rd.flatten() {
                out.extend(collect_files(&e.path()));
            }
        }
    } else if path.extension().is_some_and(|e| e == "json") {
        out.push(path.to_path_buf());
    }
    out.sort();
    out
}

/// The text Python's `json.dumps(v)` writes: separators `", "` and `": "`,
/// `ensure_ascii=False`, floats as `repr(float)`.
pub fn python_dumps(v: &Value) -> String {
    let mut s = String::new();
    dumps_into(v, &mut s);
    s
}

fn dumps_into(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if n.is_f64() {
                out.push_str(&python_float_repr(n.as_f64().unwrap_or(0.0)));
            } else {
                out.push_str(&n.to_string());
            }
        }
        Value::String(s) => out.push_str(&python_string(s)),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                dumps_into(x, out);
            }
            out.push(']');
        }
        Value::Object(o) => {
            out.push('{');
            for (i, (k, x)) in o.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&python_string(k));
                out.push_str(": ");
                dumps_into(x, out);
            }
            out.push('}');
        }
    }
}

/// A JSON string as Python writes it with `ensure_ascii=False`.
fn python_string(s: &str) -> String {
    constrain::schema::regex::py_string(s)
}

/// `repr(float)` in Python: shortest round-trip digits, scientific notation
/// when the exponent is below -4 or at least 16, `.0` on integral values.
pub fn python_float_repr(f: f64) -> String {
    constrain::schema::regex::py_float(f)
}

/// The runner's set-up, done once before the first schema's clock starts (as
/// the peers' runners build their tokenizer tables first): compiles a trivial
/// schema and fills one mask and one step, after building the vocabulary's
/// lazily built tables ([`Vocabulary::build_index_tables`]: byte tries,
/// plain levels, string-body and first-byte tables), so that they exist
/// before any case is timed. Returns how long that took; an error names what failed.
pub fn prepare_vocabulary(vocab: &Arc<Vocabulary>, cfg: &RunConfig) -> Result<Duration, String> {
    let t = Instant::now();
    vocab.build_index_tables();
    let (index, _) = compile_case(&serde_json::json!({"type": "string"}), vocab, cfg)?;
    let mut row = vec![0u32; constrain::bitmask_words(vocab.logits_width())];
    let mut g = Matcher::from_index(index);
    // The first step fills the start state's mask; whether the quote token
    // exists in this vocabulary does not matter, only that the tables are built.
    let quote = vocab
        .text_tokens()
        .find(|(_, b)| *b == b"\"")
        .map_or(vocab.eos()[0], |(id, _)| id);
    let _ = engine_step(&mut g, &mut row, quote);
    Ok(t.elapsed())
}

/// Compiles a schema to an index (what TTFM measures), with the time of
/// each phase.
pub fn compile_case(
    schema_value: &Value,
    vocab: &Arc<Vocabulary>,
    cfg: &RunConfig,
) -> Result<(Arc<TokenIndex>, Phases), String> {
    let source = Source::json_schema(schema_value.clone()).with_schema_options(cfg.schema.clone());
    compile_source(&source, vocab, cfg)
}

/// Compiles a source as the runner does (one thread, no cache, the run's
/// limits), through the library's [`Compiler`].
pub fn compile_source(
    source: &Source,
    vocab: &Arc<Vocabulary>,
    cfg: &RunConfig,
) -> Result<(Arc<TokenIndex>, Phases), String> {
    let compiler = Compiler::new(
        vocab.clone(),
        CompilerConfig::default()
            .dfa(cfg.dfa.clone())
            .index(cfg.index.clone())
            .cache_entries(0),
    );
    let compiled = compiler
        .compile_uncached(source)
        .map_err(|e| e.to_string())?;
    let st = compiled.stats();
    let us = |d: std::time::Duration| d.as_secs_f64() * 1e6;
    let phases = Phases {
        schema: us(st.schema_time),
        dfa: us(st.dfa_time),
        index: us(st.index_time),
    };
    Ok((compiled.index().clone(), phases))
}

/// One step as a serving engine takes it, and as MaskBench times it: the
/// state's mask written into a bitmask row in XGrammar's layout
/// ([`Matcher::fill_bitmask`]), token `t` read from the row, and taken.
/// `false` when `t` is not allowed.
pub fn engine_step(g: &mut Matcher, row: &mut [u32], t: constrain::TokenId) -> bool {
    g.fill_bitmask(row).is_ok()
        && row
            .get(t.as_usize() / 32)
            .is_some_and(|w| w >> (t.0 % 32) & 1 == 1)
        && g.advance(t).is_ok()
}

/// Runs one case: compile under the time limit, then every instance.
pub fn run_case(
    case: &Case,
    vocab: &Arc<Vocabulary>,
    tok: &TextTokenizer,
    cfg: &RunConfig,
) -> CaseResult {
    let mut r = CaseResult {
        name: case.name.clone(),
        outcome: Outcome::Pass,
        error: None,
        ttfm_us: None,
        phases_us: None,
        live_states: None,
        lazy: false,
        tbm_over_20us: 0,
        tbm_over_100us: 0,
        tbm_max_us: 0.0,
        tokens: 0,
        valid_rejected: 0,
        invalid_accepted: 0,
        instances: Vec::new(),
        tbm_us: Vec::new(),
    };
    let (tx, rx) = std::sync::mpsc::channel();
    {
        let source =
            Source::json_schema(case.schema.clone()).with_schema_options(cfg.schema.clone());
        let vocab = vocab.clone();
        let mut cfg = cfg.clone();
        cfg.index.deadline = Some(Instant::now() + cfg.timeout);
        std::thread::spawn(move || {
            let t = Instant::now();
            let res = compile_source(&source, &vocab, &cfg);
            let _ = tx.send((res, t.elapsed()));
        });
    }
    let index = match rx.recv_timeout(cfg.timeout) {
        Ok((Ok((index, phases)), t)) => {
            r.ttfm_us = Some(t.as_secs_f64() * 1e6);
            r.phases_us = Some(phases);
            r.live_states = Some(index.stats().states);
            r.lazy = index.is_lazy();
            index
        }
        Ok((Err(e), _)) if e.contains("deadline") => {
            r.outcome = Outcome::Timeout;
            r.error = Some(e);
            return r;
        }
        Ok((Err(e), _)) => {
            r.outcome = Outcome::CompileError;
            r.error = Some(e);
            return r;
        }
        Err(_) => {
            r.outcome = Outcome::Timeout;
            r.error = Some(format!("compile took more than {:?}", cfg.timeout));
            return r;
        }
    };
    let eos = vocab.eos()[0];
    // One bitmask row, reused across steps as an engine's buffer is.
    let mut row = vec![0u32; constrain::bitmask_words(vocab.logits_width())];
    for inst in &case.instances {
        let text = python_dumps(&inst.data);
        let tokens = match tok.encode(&text) {
            Ok(t) => t,
            Err(e) => {
                r.instances.push(InstanceResult {
                    valid: inst.valid,
                    accepted: false,
                    tokens: 0,
                    rejected_at: Some(e.to_string()),
                });
                if inst.valid {
                    r.valid_rejected += 1;
                }
                continue;
            }
        };
        if vocab.decode(&tokens) != text.as_bytes() {
            // The tokenizer normalises (NFC) or drops text: the engine would be
            // judged on another string. Count it as not accepted.
            r.instances.push(InstanceResult {
                valid: inst.valid,
                accepted: false,
                tokens: tokens.len(),
                rejected_at: Some(
                    "the tokenizer does not reproduce the text (NFC normalisation)".into(),
                ),
            });
            if inst.valid {
                r.valid_rejected += 1;
            }
            continue;
        }
        let mut g = Matcher::from_index(index.clone());
        let mut rejected_at = None;
        for (i, &t) in tokens.iter().enumerate() {
            let t0 = Instant::now();
            let ok = engine_step(&mut g, &mut row, t);
            r.tbm_us.push(t0.elapsed().as_secs_f64() * 1e6);
            if !ok {
                rejected_at = Some(format!("token {i} {}", vocab.describe(t)));
                break;
            }
        }
        if rejected_at.is_none() && !g.allows(eos) {
            rejected_at = Some("EOS not allowed at the end".into());
        }
        let accepted = rejected_at.is_none();
        r.tokens += tokens.len();
        if inst.valid && !accepted {
            r.valid_rejected += 1;
        }
        if !inst.valid && accepted {
            r.invalid_accepted += 1;
        }
        r.instances.push(InstanceResult {
            valid: inst.valid,
            accepted,
            tokens: tokens.len(),
            rejected_at,
        });
    }
    r.tbm_over_20us = r.tbm_us.iter().filter(|&&t| t > 20.0).count();
    r.tbm_over_100us = r.tbm_us.iter().filter(|&&t| t > 100.0).count();
    r.tbm_max_us = r.tbm_us.iter().copied().fold(0.0, f64::max);
    r.outcome = if r.invalid_accepted > 0 {
        Outcome::InvalidAccepted
    } else if r.valid_rejected > 0 {
        Outcome::ValidRejected
    } else {
        Outcome::Pass
    };
    r
}

/// Percentiles of a sample.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Percentiles {
    /// The median.
    pub p50: f64,
    /// The 90th percentile.
    pub p90: f64,
    /// The 99th percentile.
    pub p99: f64,
    /// The largest value.
    pub max: f64,
}

impl Percentiles {
    /// The percentiles of `v` (nearest rank, sorting `v` in place); all 0
    /// when `v` is empty.
    pub fn of(v: &mut [f64]) -> Percentiles {
        if v.is_empty() {
            return Percentiles::default();
        }
        v.sort_by(|a, b| a.total_cmp(b));
        let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
        Percentiles {
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            max: v[v.len() - 1],
        }
    }
}

/// The summary of a run; exactly these keys are written.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Summary {
    /// Number of schemas run.
    pub schemas: usize,
    /// Schemas whose outcome is [`Outcome::Pass`].
    pub passing: usize,
    /// Schemas that did not compile.
    pub compile_error: usize,
    /// Schemas whose compile ran past the time limit.
    pub timeout: usize,
    /// Valid instances rejected, over all schemas.
    pub valid_rejected: usize,
    /// Invalid instances accepted, over all schemas.
    pub invalid_accepted: usize,
    /// Tokens checked, over all schemas.
    pub tokens: usize,
    /// Time to first mask over the compiled schemas, in µs.
    pub ttfm_us: Percentiles,
    /// Time between masks over all checked tokens, in µs.
    pub tbm_us: Percentiles,
}

impl Summary {
    /// Aggregates results: `schemas`, `passing`, `compile_error` and `timeout`
    /// count schemas; `valid_rejected` and `invalid_accepted` count instances.
    pub fn of(results: &[CaseResult]) -> Summary {
        let mut s = Summary {
            schemas: results.len(),
            ..Default::default()
        };
        let mut ttfm = Vec::new();
        let mut tbm = Vec::new();
        for r in results {
            match r.outcome {
                Outcome::Pass => s.passing += 1,
                Outcome::CompileError => s.compile_error += 1,
                Outcome::Timeout => s.timeout += 1,
                _ => {}
            }
            s.valid_rejected += r.valid_rejected;
            s.invalid_accepted += r.invalid_accepted;
            s.tokens += r.tokens;
            ttfm.extend(r.ttfm_us);
            tbm.extend_from_slice(&r.tbm_us);
        }
        s.ttfm_us = Percentiles::of(&mut ttfm);
        s.tbm_us = Percentiles::of(&mut tbm);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn python_float_repr_matches_python() {
        for (f, s) in [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (-2.5, "-2.5"),
            (1e16, "1e+16"),
            (1.5e-7, "1.5e-07"),
            (123456789.125, "123456789.125"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1e15, "1000000000000000.0"),
            (3.14e100, "3.14e+100"),
        ] {
            assert_eq!(python_float_repr(f), s, "{f}");
        }
    }

    #[test]
    fn python_dumps_separators_and_escapes() {
        let v = json!({"a": [1, 2.0, "x\"y\n"], "北": null, "t": true});
        assert_eq!(
            python_dumps(&v),
            r#"{"a": [1, 2.0, "x\"y\n"], "北": null, "t": true}"#
        );
        assert_eq!(python_dumps(&json!("\u{1}")), r#""\u0001""#);
    }
}
