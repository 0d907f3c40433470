//! # Compiler: the one way from a source to a shareable compiled artefact
//!
//! Every consumer — the CLI, generation, the MaskBench runner, the soak, the
//! fuzz targets, benches and examples — turns a constraint into something a
//! [`Matcher`] can walk the same way: a [`Compiler`] over one vocabulary and
//! one [`CompilerConfig`], and [`Compiler::compile`] of a [`Source`].
//!
//! ```text
//! Source::JsonSchema ─ schema:: ─┐
//! Source::Tools ──── tools_schema┤
//! Source::Regex ─────────────────┼─▶ regex ─▶ dfa::ByteDfa::build ─▶ index::TokenIndex ─▶ Arc<Compiled>
//! Source::Grammar ─ grammar file ┘            (eager, or lazy past      (eager over an eager DFA,
//!                                              DfaConfig::lazy_states)   lazy over a lazy one)
//! Source::Gbnf ─ grammar::gbnf::lower ─▶ Hir ─▶ dfa::ByteDfa::build_hir ─┘ (no regex text)
//! Source::Lark ─ grammar::lark ─▶ GBNF rules ─▶ as Source::Gbnf
//! ```
//!
//! ## What the compiler decides
//!
//! * **Eager or lazy.** A DFA of at most [`DfaConfig::lazy_states`] states
//!   (default [`crate::dfa::LAZY_STATES`], 128) is determinized and indexed
//!   up front; a bigger one — any source whose eager index would cost more
//!   than a few milliseconds, which is most JSON Schemas — is determinized,
//!   and its masks computed, as matchers visit it, so the first mask comes
//!   after the NFA and one state. [`IndexConfig::eager`] `= false` makes even
//!   a small DFA's masks lazy; `lazy_states: None` makes every DFA eager.
//! * **Every resource limit** (NFA, DFA and determinizer memory, states,
//!   mask memory, schema sizes) comes from the config and is named in the
//!   error when hit.
//! * **The cache.** Compiled artefacts are kept in a bounded LRU cache keyed
//!   by the source and its options (one compiler has one vocabulary, so the
//!   vocabulary is part of every key): a second compile of the same schema
//!   returns the same `Arc`. The cache is bounded by entries
//!   ([`CompilerConfig::cache_entries`]) and by the index memory it holds
//!   ([`CompilerConfig::cache_bytes`]); errors are not cached.
//!
//! ## Invariants
//!
//! * A [`Compiled`] is immutable, `Send + Sync`, and shared through `Arc`;
//!   everything that changes per request lives in the [`Matcher`].
//! * Two compiles of equal sources under equal options give equal languages
//!   (the cache may return the same artefact).
//! * The compiler never prints; schema warnings (lenient mode, narrowings)
//!   are in [`Compiled::warnings`].
//!
//! ```
//! use constrain::{Compiler, CompilerConfig, Source, TokenId, Vocabulary};
//! use std::sync::Arc;
//!
//! // A toy vocabulary: the 256 single bytes (ids 0..=255) and EOS (256).
//! let tokens = (0..=255u8).map(|b| (TokenId(b as u32), vec![b]));
//! let vocab = Arc::new(Vocabulary::new(tokens, [TokenId(256)], 257)?);
//! let compiler = Compiler::new(vocab, CompilerConfig::default());
//! let compiled = compiler.compile(&Source::regex("(yes|no)"))?;
//! let mut m = compiled.matcher();
//! for &b in b"yes" {
//!     assert!(m.accept_token(TokenId(b as u32)));
//! }
//! assert!(m.is_accepting());
//! assert!(m.accept_token(TokenId(256)) && m.is_terminated());
//! // The same source again comes from the cache.
//! assert!(std::sync::Arc::ptr_eq(&compiled, &compiler.compile(&Source::regex("(yes|no)"))?));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::cancel::{CancelToken, Fired};
use crate::dfa::{ByteDfa, Dfa, DfaConfig, DfaError};
use crate::grammar::gbnf::{self, Gbnf, GbnfError, GbnfOptions};
use crate::grammar::lark::{Lark, LarkError};
use crate::grammar::{Grammar, GrammarError, GrammarFile};
use crate::index::{IndexConfig, IndexError, TokenIndex};
use crate::matcher::Matcher;
use crate::schema::{self, SchemaError, SchemaOptions, SchemaWarning};
use crate::tags::{StructuralTag, TagError};
use crate::vocab::Vocabulary;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What to compile.
#[derive(Clone, Debug)]
pub enum Source {
    /// A JSON Schema document, compiled with `options`.
    JsonSchema {
        /// The schema document.
        schema: serde_json::Value,
        /// How the schema is read and the JSON laid out.
        options: SchemaOptions,
    },
    /// An OpenAI `tools` array: the output is one call
    /// `{"name": ..., "arguments": {...}}` to exactly one tool
    /// ([`schema::tools_schema`]), compiled with `options`.
    Tools {
        /// The `tools` array, as in the request.
        tools: serde_json::Value,
        /// How the tools' parameter schemas are read and the JSON laid out.
        options: SchemaOptions,
    },
    /// A regex in the `regex` crate's syntax, full-match semantics.
    Regex(String),
    /// A named grammar file (`grammars/*.regex`: a comment header, then a
    /// regex), already read ([`Source::grammar_file`]).
    Grammar(Grammar),
    /// A GBNF grammar (llama.cpp's format), compiled with `options`
    /// ([`Source::gbnf`], or [`Source::grammar_file`] of a `.gbnf` file).
    Gbnf {
        /// The parsed grammar.
        grammar: Gbnf,
        /// Its recursion, size and stack limits.
        options: GbnfOptions,
    },
    /// An XGrammar structural tag (free text, reasoning and tool calls in
    /// one language, [`crate::tags`]); its embedded JSON Schemas are
    /// compiled with `options` ([`Source::structural_tag`]: strict, with
    /// whitespace bounded per slot).
    StructuralTag {
        /// The parsed tag.
        tag: StructuralTag,
        /// The options of the tag's embedded JSON Schemas.
        options: SchemaOptions,
    },
    /// A Lark grammar (llguidance's dialect), checked against llguidance's
    /// greedy lexer and compiled through its GBNF rules with `options`
    /// ([`Source::lark`], or [`Source::grammar_file`] of a `.lark` file).
    Lark {
        /// The parsed grammar.
        grammar: Lark,
        /// The recursion, size and stack limits of the GBNF rules it becomes.
        options: GbnfOptions,
    },
}

impl Source {
    /// A JSON Schema with the default options (strict semantics, compact
    /// whitespace).
    pub fn json_schema(schema: serde_json::Value) -> Source {
        Source::JsonSchema {
            schema,
            options: SchemaOptions::default(),
        }
    }

    /// An OpenAI `tools` array with the default schema options.
    pub fn tools(tools: serde_json::Value) -> Source {
        Source::Tools {
            tools,
            options: SchemaOptions::default(),
        }
    }

    /// A regex (full match).
    pub fn regex(pattern: impl Into<String>) -> Source {
        Source::Regex(pattern.into())
    }

    /// Reads a grammar file: GBNF when its extension is `.gbnf`, Lark for
    /// `.lark`, llguidance's grammar list for `.json`, a regex grammar file
    /// (`grammars/*.regex`) otherwise.
    pub fn grammar_file(path: impl AsRef<Path>) -> Result<Source, CompileError> {
        Ok(match crate::grammar::load(path)? {
            GrammarFile::Regex(g) => Source::Grammar(g),
            GrammarFile::Gbnf(grammar) => Source::Gbnf {
                grammar,
                options: GbnfOptions::default(),
            },
            GrammarFile::Lark(grammar) => Source::Lark {
                grammar,
                options: GbnfOptions::default(),
            },
        })
    }

    /// A GBNF grammar given as text, with the default options.
    pub fn gbnf(text: &str) -> Result<Source, CompileError> {
        Ok(Source::Gbnf {
            grammar: Gbnf::parse("gbnf", text)?,
            options: GbnfOptions::default(),
        })
    }

    /// A structural tag's JSON (the envelope, the legacy shape or a bare
    /// format), its schemas compiled with [`StructuralTag::schema_options`].
    pub fn structural_tag(tag: &serde_json::Value) -> Result<Source, CompileError> {
        Ok(Source::StructuralTag {
            tag: StructuralTag::from_json(tag)?,
            options: StructuralTag::schema_options(),
        })
    }

    /// A Lark grammar given as text, with the default options.
    pub fn lark(text: &str) -> Result<Source, CompileError> {
        Ok(Source::Lark {
            grammar: Lark::parse("lark", text)?,
            options: GbnfOptions::default(),
        })
    }

    /// llguidance's grammar list (`{"grammars": [...]}`, its `TopLevelGrammar`
    /// JSON) with the default options: the first grammar is the output's,
    /// `@name` in a Lark grammar the grammar of that name
    /// ([`Lark::parse_grammar_list`]). [`Source::lark`] takes the same
    /// text too (a text that begins with `{`).
    pub fn llguidance(text: &str) -> Result<Source, CompileError> {
        Ok(Source::Lark {
            grammar: Lark::parse_grammar_list("llguidance", text)?,
            options: GbnfOptions::default(),
        })
    }

    /// The same source with other schema options (no effect on a regex or a
    /// regex grammar file; a GBNF grammar takes their `max_depth`, which
    /// bounds only its unrolled fallback: its recursion is exact on the
    /// pushdown engine).
    pub fn with_schema_options(mut self, opts: SchemaOptions) -> Source {
        match &mut self {
            Source::JsonSchema { options, .. }
            | Source::Tools { options, .. }
            | Source::StructuralTag { options, .. } => *options = opts,
            Source::Gbnf { options, .. } | Source::Lark { options, .. } => {
                options.max_depth = opts.max_depth
            }
            Source::Regex(_) | Source::Grammar(_) => {}
        }
        self
    }

    /// The cache key: the kind, the options that change the language, and
    /// the source text.
    fn cache_key(&self) -> String {
        match self {
            Source::JsonSchema { schema, options } => format!("schema\0{options:?}\0{schema}"),
            Source::Tools { tools, options } => format!("tools\0{options:?}\0{tools}"),
            Source::Regex(p) => format!("regex\0{p}"),
            Source::Grammar(g) => format!("grammar\0{}", g.pattern),
            Source::Gbnf { grammar, options } => format!("gbnf\0{options:?}\0{}", grammar.text),
            Source::StructuralTag { tag, options } => format!("tag\0{options:?}\0{}", tag.text()),
            Source::Lark { grammar, options } => format!("lark\0{options:?}\0{}", grammar.text),
        }
    }
}

/// Largest transition table of one fragment's DFA when a schema's
/// definitions are shared fragments because its text ran past
/// [`SchemaOptions::shared_refs_len`] (below the text limit): past it the
/// compiler gives up sharing and compiles the schema as without the
/// threshold. Fragments are determinized whole, so this bounds the time an
/// attempt that does not pay can waste (a 512 MiB fragment took 15 s before
/// it failed); shared fragments that pay are far smaller.
pub const SHARED_FRAGMENT_DFA_BYTES: usize = 8 << 20;

/// How to compile. `Config is a value`: build it, clone it, keep it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct CompilerConfig {
    /// Limits and the lazy threshold of the byte DFA (default
    /// [`DfaConfig::default`]: lazy past 128 states).
    pub dfa: DfaConfig,
    /// Limits and threads of the token index (default
    /// [`IndexConfig::default`]: eager masks over an eager DFA, all cores).
    pub index: IndexConfig,
    /// Most compiled artefacts kept in the cache (default 64; 0: no cache).
    pub cache_entries: usize,
    /// Most index memory the cache holds, in bytes (default 2 GiB). An
    /// artefact bigger than this is returned but not kept.
    pub cache_bytes: usize,
}

crate::config_setters!(CompilerConfig {
    dfa: DfaConfig,
    index: IndexConfig,
    cache_entries: usize,
    cache_bytes: usize,
});

impl Default for CompilerConfig {
    fn default() -> Self {
        CompilerConfig {
            dfa: DfaConfig::default(),
            index: IndexConfig::default(),
            cache_entries: 64,
            cache_bytes: 2 << 30,
        }
    }
}

/// Why a source did not compile. Each variant says where.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// The JSON Schema (or a tool's parameters) is invalid or unsupported;
    /// the error names the keyword and its JSON Pointer.
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// A grammar file could not be read or holds no pattern.
    #[error(transparent)]
    Grammar(#[from] GrammarError),
    /// A GBNF grammar does not parse (line and column), is left-recursive
    /// in a form that cannot be rewritten (the rule), or passes a limit.
    #[error(transparent)]
    Gbnf(#[from] GbnfError),
    /// A structural tag is malformed or holds a construct that is not
    /// supported (the JSON Pointer inside the tag).
    #[error(transparent)]
    Tag(#[from] TagError),
    /// A Lark grammar does not parse, uses a construct that is refused
    /// (named, with line and column), or could be lexed by llguidance's
    /// greedy lexer otherwise than the grammar reads it.
    #[error(transparent)]
    Lark(#[from] LarkError),
    /// The regex does not parse, or its automaton passes a size limit.
    #[error(transparent)]
    Dfa(#[from] DfaError),
    /// The token index could not be built (a limit, an empty language, a
    /// vocabulary that cannot spell the language).
    #[error(transparent)]
    Index(#[from] IndexError),
    /// The compile's [`CancelToken`] was cancelled (its caller went away).
    #[error("compile cancelled")]
    Cancelled,
    /// The compile ran past the time budget of its [`CancelToken`].
    #[error("compile passed its time budget of {limit_ms} ms")]
    TimedOut {
        /// The budget, in milliseconds.
        limit_ms: u64,
    },
}

impl CompileError {
    fn from_fired(f: Fired) -> CompileError {
        match f {
            Fired::Cancelled => CompileError::Cancelled,
            Fired::TimedOut(d) => CompileError::TimedOut {
                limit_ms: d.as_millis().min(u128::from(u64::MAX)) as u64,
            },
        }
    }
}

/// A cancellation point between the compiler's phases: the error of the
/// thread's current token once it has fired ([`crate::cancel`]).
fn checkpoint() -> Result<(), CompileError> {
    match crate::cancel::current() {
        Some(f) => Err(CompileError::from_fired(f)),
        None => Ok(()),
    }
}

impl From<gbnf::pushdown::PushdownError> for CompileError {
    fn from(e: gbnf::pushdown::PushdownError) -> Self {
        match e {
            gbnf::pushdown::PushdownError::Gbnf(e) => e.into(),
            gbnf::pushdown::PushdownError::Dfa(e) => e.into(),
        }
    }
}

impl From<schema::pushdown::PushdownError> for CompileError {
    fn from(e: schema::pushdown::PushdownError) -> Self {
        match e {
            schema::pushdown::PushdownError::Schema(e) => e.into(),
            schema::pushdown::PushdownError::Dfa(e) => e.into(),
        }
    }
}

/// Where a compile spent its time, and what it built.
#[derive(Clone, Debug, Default)]
pub struct CompileStats {
    /// Schema → regex (zero for a regex or grammar).
    pub schema_time: Duration,
    /// Regex → byte DFA (for a lazy DFA: the part determinized up front).
    pub dfa_time: Duration,
    /// DFA → token index (for a lazy index: the first mask).
    pub index_time: Duration,
    /// DFA states (for a lazy DFA: the states determinized so far).
    pub dfa_states: usize,
    /// DFA transition table bytes (0 for a lazy DFA).
    pub dfa_memory: usize,
    /// Length of the regex the source became, in bytes.
    pub regex_len: usize,
    /// Grammar fragments of the pushdown engine (0: one flat DFA). Then
    /// `dfa_states` counts the fragments' states, and the index builds
    /// its configurations and masks on demand.
    pub fragments: usize,
    /// Of those, the fragments determinized on demand (the document of a
    /// schema, and its called fragments whose text is long): only the
    /// states matchers visit are built.
    pub lazy_fragments: usize,
}

impl CompileStats {
    /// The whole compile: what a request waits for before its first mask.
    pub fn total(&self) -> Duration {
        self.schema_time + self.dfa_time + self.index_time
    }
}

/// A compiled constraint: immutable, shared by every request that uses it.
#[derive(Debug)]
pub struct Compiled {
    index: Arc<TokenIndex>,
    warnings: Vec<SchemaWarning>,
    stats: CompileStats,
}

impl Compiled {
    /// A new matcher at the start (cheap: an `Arc` clone and one state).
    pub fn matcher(&self) -> Matcher {
        Matcher::from_index(self.index.clone())
    }

    /// The same artefact with `budget` kept by its matchers (the index
    /// was just built, so it is not shared yet).
    fn with_token_budget(mut self, budget: Option<crate::index::TokenBudget>) -> Compiled {
        let unique = Arc::get_mut(&mut self.index);
        debug_assert!(unique.is_some() || budget.is_none());
        if let Some(index) = unique {
            index.set_token_budget(budget);
        }
        self
    }

    /// The same artefact with `unique` checked by its matchers.
    fn with_unique_items(mut self, unique: Option<crate::unique::UniqueItems>) -> Compiled {
        if let Some(index) = Arc::get_mut(&mut self.index) {
            index.set_unique_items(unique);
        }
        self
    }

    /// The token index.
    pub fn index(&self) -> &Arc<TokenIndex> {
        &self.index
    }

    /// The vocabulary it is over.
    pub fn vocab(&self) -> &Arc<Vocabulary> {
        self.index.vocab()
    }

    /// What the schema compiler downgraded (lenient mode) or narrowed.
    pub fn warnings(&self) -> &[SchemaWarning] {
        &self.warnings
    }

    /// Times and sizes of the compile.
    pub fn stats(&self) -> &CompileStats {
        &self.stats
    }

    /// Whether the automaton (and its masks) grow as matchers visit states.
    pub fn is_lazy(&self) -> bool {
        self.index.is_lazy()
    }
}

/// Compiles sources over one vocabulary, with a bounded cache.
pub struct Compiler {
    vocab: Arc<Vocabulary>,
    config: CompilerConfig,
    cache: Mutex<Cache>,
}

impl std::fmt::Debug for Compiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compiler")
            .field("config", &self.config)
            .finish()
    }
}

impl Compiler {
    /// A compiler over `vocab` (its logits width is the matchers' mask width).
    pub fn new(vocab: Arc<Vocabulary>, config: CompilerConfig) -> Compiler {
        Compiler {
            vocab,
            config,
            cache: Mutex::new(Cache::default()),
        }
    }

    /// The vocabulary.
    pub fn vocab(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// The configuration.
    pub fn config(&self) -> &CompilerConfig {
        &self.config
    }

    /// Compiles `source`, or returns the cached artefact of an equal source.
    pub fn compile(&self, source: &Source) -> Result<Arc<Compiled>, CompileError> {
        if self.config.cache_entries == 0 {
            return self.compile_uncached(source).map(Arc::new);
        }
        let key = source.cache_key();
        if let Some(hit) = self.lock_cache().get(&key) {
            return Ok(hit);
        }
        let compiled = Arc::new(self.compile_uncached(source)?);
        let bytes = compiled.index.stats().memory_bytes;
        self.lock_cache().insert(
            key,
            compiled.clone(),
            bytes,
            self.config.cache_entries,
            self.config.cache_bytes,
        );
        Ok(compiled)
    }

    /// [`Self::compile_uncached`] that stops soon after `token` fires
    /// (cancelled, or past its deadline): then the error is
    /// [`CompileError::Cancelled`] or [`CompileError::TimedOut`], whatever
    /// the phase that noticed it. The token is polled between phases and
    /// at every state the subset construction explores; the eager index
    /// stops at the token's deadline ([`crate::cancel`]).
    pub fn compile_cancellable(
        &self,
        source: &Source,
        token: &CancelToken,
    ) -> Result<Compiled, CompileError> {
        let mut config = self.config.clone();
        if let Some(d) = token.deadline() {
            config.index.deadline = Some(config.index.deadline.map_or(d, |o| o.min(d)));
        }
        let compiler = Compiler::new(self.vocab.clone(), config);
        let r = crate::cancel::scope(Some(token), || compiler.compile_uncached(source));
        match token.fired() {
            // A loop that noticed the token returned its own limit error;
            // a result finished past it is dropped as well (fail closed).
            Some(f) => Err(CompileError::from_fired(f)),
            None => r,
        }
    }

    /// Compiles `source` without looking at or filling the cache.
    pub fn compile_uncached(&self, source: &Source) -> Result<Compiled, CompileError> {
        let mut stats = CompileStats::default();
        let t = Instant::now();
        // A structural tag's leading region bounded in tokens.
        let mut budget = None;
        // `Some(limit)`: schema text, which may hold the generator's
        // one-copy constructs (written out past `limit` bytes).
        // Arrays of distinct items the matcher checks (a schema that is
        // the whole output).
        let mut unique = None;
        let (regex, warnings, schema_text) = match source {
            Source::JsonSchema { schema, options } => {
                if options.unique_items_check {
                    let bundled = schema::documents::bundle(schema, &Default::default());
                    unique = Some(schema::unique_sites::sites(&bundled).trie);
                }
                match self.schema_regex(schema, options, &mut stats, t)? {
                    Ok((r, w)) => (r, w, Some(options.max_regex_len)),
                    Err(done) => return Ok(done.with_unique_items(unique)),
                }
            }
            Source::Tools { tools, options } => {
                let schema = schema::tools_schema(tools)?;
                let options = &options.clone().unique_items_check(false);
                match self.schema_regex(&schema, options, &mut stats, t)? {
                    Ok((r, w)) => (r, w, Some(options.max_regex_len)),
                    Err(done) => return Ok(done),
                }
            }
            Source::StructuralTag { tag, options } => {
                let every_byte = crate::index::has_every_byte(&self.vocab);
                let tokens = self.vocab_tokens();
                let options = &options.clone().unique_items_check(false);
                let mut low = crate::tags::lower(tag.format(), options, every_byte, &tokens)?;
                budget = low
                    .budget
                    .as_ref()
                    .and_then(|b| b.token_budget(&tokens.spellings()));
                if low.bodies.len() > 1 {
                    return Ok(self
                        .fragments_with(
                            &low.names,
                            &low.bodies,
                            low.warnings,
                            options,
                            &self.config.dfa,
                            stats,
                            t,
                        )?
                        .with_token_budget(budget));
                }
                let regex = low.bodies.pop().flatten().unwrap_or_default();
                (regex, low.warnings, Some(options.max_regex_len))
            }
            Source::Regex(p) => (p.clone(), Vec::new(), None),
            Source::Grammar(g) => (g.pattern.clone(), Vec::new(), None),
            Source::Gbnf { grammar, options } => {
                return self.compile_gbnf(grammar, options, stats, t);
            }
            Source::Lark { grammar, options } => {
                let gbnf = if grammar.has_special_tokens() {
                    let tokens = self.vocab_tokens();
                    grammar.with_tokens(&crate::grammar::lark::tokens::TokenTable {
                        symbols: &tokens.symbols,
                        stops: &tokens.stops,
                        num_ids: self.vocab.num_ids(),
                    })?
                } else {
                    std::borrow::Cow::Borrowed(&grammar.gbnf)
                };
                return self
                    .compile_gbnf(&gbnf, options, stats, t)
                    .map_err(|e| match e {
                        CompileError::Gbnf(g) => match grammar.map_error(g) {
                            Ok(l) => CompileError::Lark(l),
                            Err(g) => CompileError::Gbnf(g),
                        },
                        e => e,
                    });
            }
        };
        stats.schema_time = t.elapsed();
        stats.regex_len = regex.len();
        checkpoint()?;
        let t = Instant::now();
        let dfa = match schema_text {
            Some(max_len) => ByteDfa::build_schema(&regex, &self.config.dfa, max_len)?,
            None => ByteDfa::build(&regex, &self.config.dfa)?,
        };
        drop(regex);
        Ok(self
            .finish(dfa, warnings, stats, t)?
            .with_token_budget(budget)
            .with_unique_items(unique))
    }

    /// The vocabulary's special tokens (grammar symbols) and stop tokens,
    /// as structural tags and Lark grammars name them.
    fn vocab_tokens(&self) -> crate::tags::VocabTokens {
        crate::tags::VocabTokens {
            symbols: self
                .vocab
                .symbols()
                .map(|(id, text, spelled)| (id.0, text.to_string(), spelled.to_vec()))
                .collect(),
            stops: self
                .vocab
                .added_tokens()
                .iter()
                .filter(|(id, _, _)| self.vocab.is_eos(*id))
                .map(|(id, text, _)| (id.0, text.clone()))
                .collect(),
        }
    }

    /// A GBNF grammar (also a Lark grammar's rules): its fragments on the
    /// pushdown engine when recursion remains, else one DFA.
    fn compile_gbnf(
        &self,
        grammar: &Gbnf,
        options: &GbnfOptions,
        mut stats: CompileStats,
        t: Instant,
    ) -> Result<Compiled, CompileError> {
        // Recursion beyond immediate left/right recursion: exact,
        // through fragments and a return stack (the pushdown
        // engine needs every single byte in the vocabulary; without
        // it the grammar is unrolled as before).
        if crate::index::has_every_byte(&self.vocab) {
            if let Some(frags) = gbnf::lower::fragments(grammar, options)? {
                stats.schema_time = t.elapsed();
                checkpoint()?;
                let t = Instant::now();
                let pda =
                    gbnf::pushdown::build(&frags, options, grammar.text.len(), &self.config.dfa)?;
                return self.finish_pda(pda, Vec::new(), stats, t);
            }
        }
        // Lowered straight to a syntax tree: no regex text.
        let hir = gbnf::lower(grammar, options)?;
        stats.schema_time = t.elapsed();
        checkpoint()?;
        let t = Instant::now();
        let dfa = ByteDfa::build_hir(&hir, grammar.text.len(), &self.config.dfa)?;
        drop(hir);
        self.finish(dfa, Vec::new(), stats, t)
    }

    /// A schema's regex and warnings; or, when a recursive `$ref` is met
    /// and the vocabulary has every single byte, the schema compiled
    /// through the pushdown engine (`Err`: finished; recursion exact, see
    /// `schema::regex::calls`). A schema without recursion gets exactly
    /// the regex `schema::compile` writes.
    ///
    /// With [`SchemaOptions::free_form_calls`] (or
    /// [`SchemaOptions::deep_free_form`]), a schema that fails to
    /// compile so (a size limit, or a language left empty) is compiled
    /// again with it off, and that result (or error) stands: turning the
    /// option on never loses a schema the regular path compiles.
    #[allow(clippy::type_complexity)]
    fn schema_regex(
        &self,
        schema: &serde_json::Value,
        options: &SchemaOptions,
        stats: &mut CompileStats,
        t: Instant,
    ) -> Result<Result<(String, Vec<SchemaWarning>), Compiled>, CompileError> {
        match self.schema_regex_once(schema, options, stats, t) {
            Err(_)
                if (options.free_form_calls || options.deep_free_form)
                    && crate::index::has_every_byte(&self.vocab) =>
            {
                let regular = SchemaOptions {
                    free_form_calls: false,
                    deep_free_form: false,
                    ..options.clone()
                };
                *stats = CompileStats::default();
                self.schema_regex_once(schema, &regular, stats, t)
            }
            r => r,
        }
    }

    #[allow(clippy::type_complexity)]
    fn schema_regex_once(
        &self,
        schema: &serde_json::Value,
        options: &SchemaOptions,
        stats: &mut CompileStats,
        t: Instant,
    ) -> Result<Result<(String, Vec<SchemaWarning>), Compiled>, CompileError> {
        if !crate::index::has_every_byte(&self.vocab) {
            let c = schema::regex::compile_document(schema, options)?;
            return Ok(Ok((c.regex, c.warnings)));
        }
        if options.shared_refs_len >= options.max_regex_len {
            return self.schema_fragments(schema, options, &self.config.dfa, stats, t);
        }
        // Shared definitions are determinized whole, one DFA per fragment:
        // each within SHARED_FRAGMENT_DFA_BYTES here, and when one runs
        // past it (or another DFA limit), the schema is compiled as without
        // the lower threshold (one lazy DFA, or the fragments of its
        // recursion under the configured limits).
        let capped = DfaConfig {
            dfa_size_limit: self
                .config
                .dfa
                .dfa_size_limit
                .min(SHARED_FRAGMENT_DFA_BYTES),
            determinize_size_limit: self
                .config
                .dfa
                .determinize_size_limit
                .min(4 * SHARED_FRAGMENT_DFA_BYTES),
            ..self.config.dfa.clone()
        };
        match self.schema_fragments(schema, options, &capped, stats, t) {
            Err(CompileError::Dfa(DfaError::TooBig { .. })) => {
                let whole = SchemaOptions {
                    shared_refs_len: options.max_regex_len,
                    ..options.clone()
                };
                self.schema_fragments(schema, &whole, &self.config.dfa, stats, t)
            }
            r => r,
        }
    }

    /// [`Self::schema_regex`] for a vocabulary with every single byte.
    #[allow(clippy::type_complexity)]
    fn schema_fragments(
        &self,
        schema: &serde_json::Value,
        options: &SchemaOptions,
        dfa: &DfaConfig,
        stats: &mut CompileStats,
        t: Instant,
    ) -> Result<Result<(String, Vec<SchemaWarning>), Compiled>, CompileError> {
        let (names, bodies, warnings) =
            match schema::regex::compile_fragments_compact(schema, options)? {
                schema::regex::SchemaFragments::Regex(c) => return Ok(Ok((c.regex, c.warnings))),
                schema::regex::SchemaFragments::Fragments {
                    names,
                    bodies,
                    warnings,
                } => (names, bodies, warnings),
            };
        let stats = std::mem::take(stats);
        self.fragments_with(&names, &bodies, warnings, options, dfa, stats, t)
            .map(Err)
    }

    /// Schema-text fragments (`names[0]` the document) → the pushdown
    /// engine's index, under the DFA limits `dfa`.
    #[allow(clippy::too_many_arguments)]
    fn fragments_with(
        &self,
        names: &[String],
        bodies: &[Option<String>],
        warnings: Vec<SchemaWarning>,
        options: &SchemaOptions,
        dfa: &DfaConfig,
        mut stats: CompileStats,
        t: Instant,
    ) -> Result<Compiled, CompileError> {
        stats.schema_time = t.elapsed();
        stats.regex_len = bodies.iter().flatten().map(String::len).sum();
        checkpoint()?;
        let t = Instant::now();
        let pda = schema::pushdown::build(names, bodies, options, dfa)?;
        self.finish_pda(pda, warnings, stats, t)
    }

    /// Fragments → the pushdown engine's index: the end of every compile
    /// with a stack (`t`: when the fragments' build started).
    fn finish_pda(
        &self,
        pda: crate::pda::Pda,
        warnings: Vec<SchemaWarning>,
        mut stats: CompileStats,
        t: Instant,
    ) -> Result<Compiled, CompileError> {
        stats.dfa_time = t.elapsed();
        stats.dfa_states = pda.states;
        stats.fragments = pda.fragment_count();
        stats.lazy_fragments = pda.lazy_fragment_count();
        checkpoint()?;
        let t = Instant::now();
        let index = TokenIndex::build_pda(pda, self.vocab.clone(), &self.config.index)?;
        stats.index_time = t.elapsed();
        Ok(Compiled {
            index: Arc::new(index),
            warnings,
            stats,
        })
    }

    /// DFA → token index: the common end of every compile (`t`: when the
    /// DFA build started).
    fn finish(
        &self,
        dfa: Dfa,
        warnings: Vec<SchemaWarning>,
        mut stats: CompileStats,
        t: Instant,
    ) -> Result<Compiled, CompileError> {
        stats.dfa_time = t.elapsed();
        (stats.dfa_states, stats.dfa_memory) = match &dfa {
            Dfa::Eager(d) => (d.state_count(), d.memory_usage()),
            Dfa::Lazy(d) => (d.state_count(), 0),
        };
        checkpoint()?;
        let t = Instant::now();
        let index = TokenIndex::build_dfa(dfa, self.vocab.clone(), &self.config.index)?;
        stats.index_time = t.elapsed();
        Ok(Compiled {
            index: Arc::new(index),
            warnings,
            stats,
        })
    }

    /// Number of artefacts in the cache.
    pub fn cache_len(&self) -> usize {
        self.lock_cache().map.len()
    }

    /// Empties the cache.
    pub fn clear_cache(&self) {
        *self.lock_cache() = Cache::default();
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        // A panic while holding the lock cannot leave the map inconsistent
        // (every update is one insert or remove), so a poisoned lock is used.
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A least-recently-used map bounded by entries and bytes.
#[derive(Default)]
struct Cache {
    map: HashMap<String, Entry>,
    clock: u64,
    bytes: usize,
}

struct Entry {
    compiled: Arc<Compiled>,
    bytes: usize,
    used: u64,
}

impl Cache {
    fn get(&mut self, key: &str) -> Option<Arc<Compiled>> {
        self.clock += 1;
        let e = self.map.get_mut(key)?;
        e.used = self.clock;
        Some(e.compiled.clone())
    }

    fn insert(
        &mut self,
        key: String,
        compiled: Arc<Compiled>,
        bytes: usize,
        max_entries: usize,
        max_bytes: usize,
    ) {
        if bytes > max_bytes {
            return;
        }
        self.clock += 1;
        if let Some(old) = self.map.insert(
            key,
            Entry {
                compiled,
                bytes,
                used: self.clock,
            },
        ) {
            self.bytes -= old.bytes;
        }
        self.bytes += bytes;
        while self.map.len() > max_entries || self.bytes > max_bytes {
            let Some(oldest) = self
                .map
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(e) = self.map.remove(&oldest) {
                self.bytes -= e.bytes;
            }
        }
    }
}
