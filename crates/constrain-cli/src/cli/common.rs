//! Shared CLI pieces: error reporting, asset paths, the constraint source
//! flags (`--regex`, `--grammar`, `--lark`, `--schema`, `--structural-tag`) and index options.

use super::schema_args::SchemaArgs;
use anyhow::Context;
use constrain::dfa::DfaConfig;
use constrain::index::IndexConfig;
use constrain::vocab::{BpeTables, TextTokenizer, VocabCache, Vocabulary, QWEN_LOGITS_WIDTH};
use constrain::{CompileError, Compiled, Compiler, CompilerConfig, Source};
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
    /// A grammar file: GBNF (`*.gbnf`, llama.cpp's format; recursion
    /// unrolled to --max-depth), Lark (`*.lark`, llguidance's dialect) or
    /// a regex file (`grammars/*.regex`: a comment header, then a regex).
    #[arg(long)]
    pub grammar: Option<PathBuf>,
    /// A Lark grammar given as text (llguidance's dialect, rule `start`).
    #[arg(long, value_name = "TEXT")]
    pub lark: Option<String>,
    /// A JSON Schema file.
    #[arg(long)]
    pub schema: Option<PathBuf>,
    /// An XGrammar structural tag (JSON file): free text, reasoning and
    /// tool calls in one language.
    #[arg(long, value_name = "FILE")]
    pub structural_tag: Option<PathBuf>,
}

/// Tokenizer and index options.
#[derive(clap::Args, Clone, Debug)]
pub struct IndexArgs {
    /// tokenizer.json (default: $CONSTRAIN_HOME/tokenizer.json).
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
    /// Logits width of the model (ids past the tokenizer are always masked;
    /// below the tokenizer's id count is an error). Default: the tokenizer's
    /// id count, or 151,936 for the Qwen tokenizer (the Qwen models' padded
    /// embedding width).
    #[arg(long)]
    pub logits_width: Option<usize>,
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
        Ok(self.load()?.0)
    }

    /// The vocabulary and the text tokenizer of `--tokenizer`, from one
    /// read of the vocabulary cache: the tokenizer is built from the
    /// cache's BPE tables when it has them (a millisecond), else from the
    /// tokenizer.json (a third of a second for Qwen's).
    pub fn vocabulary_and_tokenizer(&self) -> anyhow::Result<(Arc<Vocabulary>, TextTokenizer)> {
        let (v, tables) = self.load()?;
        if let Some(t) = tables {
            if let Ok(tk) = TextTokenizer::from_tables(v.clone(), t) {
                return Ok((v, tk));
            }
        }
        Ok((v, self.text_tokenizer()?))
    }

    fn load(&self) -> anyhow::Result<(Arc<Vocabulary>, Option<Arc<BpeTables>>)> {
        let p = self.checked_tokenizer_path()?;
        // From the vocabulary cache ($CONSTRAIN_HOME/vocab-cache; off with
        // CONSTRAIN_NO_CACHE=1) when it holds this tokenizer.
        let loaded = VocabCache::from_env().load(&p)?;
        if let Some(w) = &loaded.warning {
            eprintln!("warning: {w}");
        }
        let tables = loaded.tables;
        let v = loaded.vocab;
        let width = match self.logits_width {
            Some(w) => w,
            None if is_qwen(&v) => QWEN_LOGITS_WIDTH,
            None => v.num_ids(),
        };
        if width < v.num_ids() {
            anyhow::bail!(
                "--logits-width {width} is smaller than the tokenizer's {} ids ({})",
                v.num_ids(),
                p.display()
            );
        }
        Ok((Arc::new(v.with_logits_width(width)?), tables))
    }

    /// The stop tokens of the vocabulary as `[{"id": N, "token": "<|im_end|>"}]`.
    pub fn stop_tokens_json(vocab: &Vocabulary) -> serde_json::Value {
        serde_json::Value::Array(
            vocab
                .eos()
                .iter()
                .map(|&id| {
                    let token = vocab
                        .added_tokens()
                        .iter()
                        .find(|a| a.0 == id)
                        .map(|a| a.1.clone())
                        .unwrap_or_else(|| vocab.describe(id));
                    serde_json::json!({"id": id.0, "token": token})
                })
                .collect(),
        )
    }

    pub fn text_tokenizer(&self) -> anyhow::Result<TextTokenizer> {
        let p = self.checked_tokenizer_path()?;
        TextTokenizer::from_file(&p)
            .with_context(|| format!("cannot load tokenizer {}", p.display()))
    }

    pub fn dfa_config(&self) -> DfaConfig {
        DfaConfig::default()
            .dfa_size_limit(self.dfa_size_limit)
            .determinize_size_limit(
                self.dfa_size_limit
                    .max(DfaConfig::default().determinize_size_limit),
            )
            .nfa_size_limit(self.nfa_size_limit)
            .lazy_states((self.lazy_states > 0).then_some(self.lazy_states))
    }

    /// The compiler's configuration: these limits, no cache (one compile
    /// per process).
    pub fn compiler_config(&self) -> CompilerConfig {
        CompilerConfig::default()
            .dfa(self.dfa_config())
            .index(self.index_config())
            .cache_entries(0)
    }

    pub fn index_config(&self) -> IndexConfig {
        IndexConfig::default()
            .eager(!self.lazy)
            .threads(self.threads)
            .max_states(self.max_states)
    }
}

/// Reads a JSON file, naming it in errors.
pub fn read_json(path: &std::path::Path, what: &str) -> anyhow::Result<serde_json::Value> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read {what} {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{what} {} is not valid JSON", path.display()))
}

/// The source the flags name. A grammar or schema file is read here (errors
/// name the file).
pub fn source(src: &SourceArgs, schema: &SchemaArgs) -> anyhow::Result<(Source, String)> {
    if let Some(re) = &src.regex {
        return Ok((Source::regex(re.clone()), "regex".into()));
    }
    if let Some(path) = &src.grammar {
        return Ok((
            Source::grammar_file(path)?.with_schema_options(schema.options()),
            format!("grammar {}", path.display()),
        ));
    }
    if let Some(text) = &src.lark {
        return Ok((
            Source::lark(text)
                .map_err(|e| anyhow::Error::new(e).context("--lark"))?
                .with_schema_options(schema.options()),
            "--lark".into(),
        ));
    }
    if let Some(path) = &src.schema {
        let value = schema.prepare(read_json(path, "schema")?, path)?;
        return Ok((
            Source::json_schema(value).with_schema_options(schema.options()),
            format!("schema {}", path.display()),
        ));
    }
    if let Some(path) = &src.structural_tag {
        return Ok((
            structural_tag(path, schema)?,
            format!("structural tag {}", path.display()),
        ));
    }
    anyhow::bail!("give one of --regex, --grammar, --lark, --schema, --structural-tag")
}

/// Reads a structural tag file; its schemas take the schema flags, with the
/// tag's default whitespace unless `--whitespace` is given.
pub fn structural_tag(path: &std::path::Path, schema: &SchemaArgs) -> anyhow::Result<Source> {
    let value = read_json(path, "structural tag")?;
    let tag = constrain::tags::StructuralTag::from_json(&value)
        .with_context(|| format!("invalid structural tag {}", path.display()))?;
    Ok(Source::StructuralTag {
        tag,
        options: schema.tag_options(),
    })
}

/// Compiles `source` (labelled `what` in errors) with the index flags'
/// limits; schema warnings (lenient mode, narrowings) go to stderr.
pub fn compile(
    source: &Source,
    what: &str,
    vocab: Arc<Vocabulary>,
    args: &IndexArgs,
) -> anyhow::Result<Arc<Compiled>> {
    let compiler = Compiler::new(vocab, args.compiler_config());
    let compiled = compiler.compile(source).map_err(|e| match e {
        CompileError::Schema(_) | CompileError::Gbnf(_) | CompileError::Lark(_) => {
            anyhow::Error::new(e).context(what.to_string())
        }
        e => e.into(),
    })?;
    for w in compiled.warnings() {
        eprintln!("warning: {w}");
    }
    Ok(compiled)
}

/// The Qwen2 / Qwen2.5 / Qwen3 tokenizer: `<|im_end|>` is id 151645 and the
/// ids fit in the models' 151,936 logits.
fn is_qwen(v: &Vocabulary) -> bool {
    v.num_ids() <= QWEN_LOGITS_WIDTH
        && v.added_tokens()
            .iter()
            .any(|a| a.0 .0 == 151_645 && a.1 == "<|im_end|>")
}
