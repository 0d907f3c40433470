//! Shared CLI pieces: error reporting, asset paths, the constraint source
//! flags (`--regex`, `--grammar`, `--schema`) and index options.

use super::schema_args::SchemaArgs;
use anyhow::Context;
use constrain::dfa::{ByteDfa, DfaConfig};
use constrain::grammar::Grammar;
use constrain::index::{IndexConfig, TokenIndex};
use constrain::vocab::{TextTokenizer, Vocabulary, QWEN_LOGITS_WIDTH};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// Prints one `error:` line (the error and its causes joined) and returns exit code 2.
pub fn report(e: &anyhow::Error) -> ExitCode {
    let mut msg = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !msg.contains(&c) {
            msg.push_str(": ");
            msg.push_str(&c);
        }
    }
    eprintln!("error: {}", msg.replace('\n', " "));
    ExitCode::from(2)
}

/// `$CONSTRAIN_HOME`, default `~/.cache/constrain`.
pub fn constrain_home() -> PathBuf {
    std::env::var_os("CONSTRAIN_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/constrain")
        })
}

/// Where the constraint comes from: exactly one of the flags.
#[derive(clap::Args, Clone, Debug)]
#[group(required = true, multiple = false)]
pub struct SourceArgs {
    /// A regex (full-match semantics: the whole output must match).
    #[arg(long)]
    pub regex: Option<String>,
    /// A grammar file (`grammars/*.regex`: a comment header, then a regex).
    #[arg(long)]
    pub grammar: Option<PathBuf>,
    /// A JSON Schema file.
    #[arg(long)]
    pub schema: Option<PathBuf>,
}

/// Tokenizer and index options.
#[derive(clap::Args, Clone, Debug)]
pub struct IndexArgs {
    /// tokenizer.json (default: $CONSTRAIN_HOME/tokenizer.json).
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
    /// Logits width of the model (ids past the tokenizer are always masked).
    #[arg(long, default_value_t = QWEN_LOGITS_WIDTH)]
    pub logits_width: usize,
    /// Compute masks on first visit instead of all at build time.
    #[arg(long)]
    pub lazy: bool,
    /// Threads for the index build (0 = all cores).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Largest DFA transition table, in bytes.
    #[arg(long, default_value_t = DfaConfig::default().dfa_size_limit)]
    pub dfa_size_limit: usize,
    /// Largest Thompson NFA built from the pattern, in bytes.
    #[arg(long, default_value_t = DfaConfig::default().nfa_size_limit)]
    pub nfa_size_limit: usize,
    /// Most automaton states the index explores.
    #[arg(long, default_value_t = IndexConfig::default().max_states)]
    pub max_states: usize,
    /// Determinize at most this many DFA states up front; a bigger DFA, and
    /// its masks, are built on demand as outputs visit them (0: always build
    /// the whole DFA and index).
    #[arg(long, default_value_t = DfaConfig::default().lazy_states.unwrap_or(0))]
    pub lazy_states: usize,
}

impl IndexArgs {
    pub fn tokenizer_path(&self) -> PathBuf {
        self.tokenizer
            .clone()
            .unwrap_or_else(|| constrain_home().join("tokenizer.json"))
    }

    fn checked_tokenizer_path(&self) -> anyhow::Result<PathBuf> {
        let p = self.tokenizer_path();
        if !p.exists() {
            anyhow::bail!(
                "tokenizer not found at {} (run scripts/fetch-assets or pass --tokenizer)",
                p.display()
            );
        }
        Ok(p)
    }

    pub fn vocabulary(&self) -> anyhow::Result<Arc<Vocabulary>> {
        let p = self.checked_tokenizer_path()?;
        let v = Vocabulary::from_tokenizer_json_file(&p)?;
        let width = self.logits_width.max(v.num_ids());
        Ok(Arc::new(v.with_logits_width(width)?))
    }

    pub fn text_tokenizer(&self) -> anyhow::Result<TextTokenizer> {
        let p = self.checked_tokenizer_path()?;
        TextTokenizer::from_file(&p)
            .with_context(|| format!("cannot load tokenizer {}", p.display()))
    }

    pub fn dfa_config(&self) -> DfaConfig {
        DfaConfig {
            dfa_size_limit: self.dfa_size_limit,
            determinize_size_limit: self
                .dfa_size_limit
                .max(DfaConfig::default().determinize_size_limit),
            nfa_size_limit: self.nfa_size_limit,
            lazy_states: (self.lazy_states > 0).then_some(self.lazy_states),
            ..Default::default()
        }
    }

    pub fn index_config(&self) -> IndexConfig {
        IndexConfig {
            eager: !self.lazy,
            threads: self.threads,
            max_states: self.max_states,
            ..Default::default()
        }
    }
}

/// Reads a JSON file, naming it in errors.
pub fn read_json(path: &std::path::Path, what: &str) -> anyhow::Result<serde_json::Value> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read {what} {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{what} {} is not valid JSON", path.display()))
}

/// The regex a source stands for. Schema warnings (lenient mode) go to stderr.
pub fn source_regex(src: &SourceArgs, schema: &SchemaArgs) -> anyhow::Result<String> {
    if let Some(re) = &src.regex {
        return Ok(re.clone());
    }
    if let Some(path) = &src.grammar {
        return Ok(Grammar::load(path)?.pattern);
    }
    if let Some(path) = &src.schema {
        let value = read_json(path, "schema")?;
        let compiled = constrain::schema::compile(&value, &schema.options())
            .with_context(|| format!("schema {}", path.display()))?;
        for w in &compiled.warnings {
            eprintln!("warning: {w}");
        }
        return Ok(compiled.regex);
    }
    anyhow::bail!("give one of --regex, --grammar, --schema")
}

/// A built index with the figures `compile` prints.
pub struct Built {
    pub index: Arc<TokenIndex>,
    pub dfa_states: usize,
    pub dfa_memory: usize,
    pub dfa_time: std::time::Duration,
}

/// Regex → DFA → index.
pub fn build_index(regex: &str, vocab: Arc<Vocabulary>, args: &IndexArgs) -> anyhow::Result<Built> {
    let t = std::time::Instant::now();
    let dfa = ByteDfa::build(regex, &args.dfa_config())?;
    let dfa_time = t.elapsed();
    let (dfa_states, dfa_memory) = match &dfa {
        constrain::Dfa::Eager(d) => (d.state_count(), d.memory_usage()),
        // Grows on demand: the states determinized before it went lazy.
        constrain::Dfa::Lazy(d) => (d.state_count(), 0),
    };
    let index = TokenIndex::build_dfa(dfa, vocab, &args.index_config())?;
    Ok(Built {
        index: Arc::new(index),
        dfa_states,
        dfa_memory,
        dfa_time,
    })
}
