//! `Compiler` and `Compiled`: XGrammar's `GrammarCompiler` and
//! `CompiledGrammar` over the core `constrain::Compiler` (one way in, one
//! cache).

use crate::errors;
use crate::tokenizer::TokenizerInfo;
use constrain::schema::{JsonMode, SchemaOptions, Whitespace};
use constrain::{grammar::Grammar, CompilerConfig, Source};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use std::sync::Arc;

/// Compiles JSON Schemas, regexes, tool lists and grammar files over one
/// vocabulary. Compiled objects are cached (by source and options) up to
/// `cache_bytes` of index memory; compiling releases the GIL, so several
/// threads may compile at once.
#[pyclass(frozen, module = "constrain")]
pub struct Compiler {
    inner: Arc<constrain::Compiler>,
    info: Py<TokenizerInfo>,
}

/// A compiled constraint: immutable, shareable across threads and matchers.
#[pyclass(frozen, module = "constrain")]
pub struct Compiled {
    pub inner: Arc<constrain::Compiled>,
    info: Py<TokenizerInfo>,
}

/// XGrammar's builtin JSON grammar (its `root ::= basic_array |
/// basic_object`), in GBNF: the language of `grammars/json.gbnf` with an
/// object or array at the top.
const BUILTIN_JSON: &str = r#"
root   ::= ws ( object | array ) ws
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( ws "," ws member )* ws )? "}"
member ::= string ws ":" ws value
array  ::= "[" ws ( value ( ws "," ws value )* ws )? "]"
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" hex hex hex hex ) )* "\""
hex    ::= [0-9a-fA-F]
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws     ::= [ \t\n]{0,4}
"#;

/// A schema given as `str`/`bytes` (JSON text) or as a Python value
/// (`dict`, `bool`, `list`), serialized with `json.dumps`.
fn json_value(py: Python<'_>, obj: &Bound<'_, PyAny>, what: &str) -> PyResult<serde_json::Value> {
    let text: String = if let Ok(s) = obj.cast::<PyString>() {
        s.to_cow()?.into_owned()
    } else if let Ok(b) = obj.cast::<PyBytes>() {
        String::from_utf8_lossy(b.as_bytes()).into_owned()
    } else {
        let dumps = py.import("json")?.getattr("dumps")?;
        dumps
            .call1((obj,))
            .map_err(|e| {
                PyTypeError::new_err(format!(
                    "the {what} must be JSON text or a JSON-serializable value: {e}"
                ))
            })?
            .extract()?
    };
    serde_json::from_str(&text).map_err(|e| {
        errors::compile_error(
            py,
            format!(
                "the {what} is not valid JSON: {e} (line {}, column {})",
                e.line(),
                e.column()
            ),
            "schema",
            None,
            None,
        )
    })
}

fn whitespace(name: &str, max: usize) -> PyResult<Whitespace> {
    match name {
        "compact" => Ok(Whitespace::Compact),
        "flexible" => Ok(Whitespace::Flexible { max }),
        "python" => Ok(Whitespace::Python),
        other => Err(PyValueError::new_err(format!(
            "whitespace must be \"compact\", \"flexible\" or \"python\", not {other:?}"
        ))),
    }
}

impl Compiler {
    fn compile(&self, py: Python<'_>, source: Source) -> PyResult<Compiled> {
        let inner = self.inner.clone();
        let compiled = py
            .detach(move || inner.compile(&source))
            .map_err(|e| errors::from_compile(py, e))?;
        Ok(Compiled {
            inner: compiled,
            info: self.info.clone_ref(py),
        })
    }
}

#[pymethods]
impl Compiler {
    /// `cache_bytes`: most index memory the cache keeps (default 2 GiB; 0
    /// disables caching). `max_threads`: threads building an index (default
    /// 0 = all cores). `lazy_states`: automata of more states than this are
    /// built, and their masks computed, as matchers first reach each state
    /// (default 128: compiling takes milliseconds, a state's first visit
    /// pays its mask); `None` builds every automaton and mask up front, as
    /// XGrammar does (slower compiles, every step a copy).
    #[new]
    #[pyo3(signature = (tokenizer_info, cache_bytes=2usize << 30, max_threads=0, lazy_states=Some(constrain::dfa::LAZY_STATES)))]
    fn new(
        tokenizer_info: Py<TokenizerInfo>,
        cache_bytes: usize,
        max_threads: usize,
        lazy_states: Option<usize>,
    ) -> Self {
        let mut config = CompilerConfig::default().cache_bytes(cache_bytes);
        if cache_bytes == 0 {
            config.cache_entries = 0;
        }
        config.index.threads = max_threads;
        config.dfa.lazy_states = lazy_states;
        let vocab = tokenizer_info.get().vocab.clone();
        Compiler {
            inner: Arc::new(constrain::Compiler::new(vocab, config)),
            info: tokenizer_info,
        }
    }

    /// A JSON Schema (`str` or `dict`). `whitespace`: `"compact"` (none, the
    /// default), `"flexible"` (any JSON whitespace, at most
    /// `whitespace_max` bytes per slot, default 2) or `"python"`
    /// (`json.dumps`' `", "` and `": "`). `strict=True`: generation
    /// semantics (an absent `additionalProperties` means no extra keys);
    /// `strict=False`: JSON Schema's own semantics, and keywords or `format`
    /// values no draft defines are ignored with a warning (`warnings.warn`,
    /// also in `Compiled.warnings`), as the CLI's `maskbench` compiles them.
    ///
    /// XGrammar's arguments, where they mean the same: `any_whitespace`
    /// (True: `"flexible"`, bounded by `max_whitespace_cnt` or
    /// `whitespace_max`), `separators` (`(",", ":")`: compact,
    /// `(", ", ": ")`: python, XGrammar's default without `any_whitespace`),
    /// `strict_mode` (= `strict`). `indent` other than None raises: no
    /// whitespace policy here writes newlines and indentation.
    ///
    /// `documents={uri: schema}` registers other schema documents (dicts or
    /// JSON text) that `$ref`s may name by absolute URI; they resolve like
    /// the main document (their own `$id`, anchors, JSON Pointers). Nothing
    /// is fetched; the JSON Schema meta-schemas are built in.
    #[pyo3(signature = (
        schema, *, whitespace=None, strict=None, whitespace_max=None,
        any_whitespace=None, indent=None, separators=None, strict_mode=None,
        max_whitespace_cnt=None, documents=None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn compile_json_schema(
        &self,
        py: Python<'_>,
        schema: &Bound<'_, PyAny>,
        whitespace: Option<&str>,
        strict: Option<bool>,
        whitespace_max: Option<usize>,
        any_whitespace: Option<bool>,
        indent: Option<&Bound<'_, PyAny>>,
        separators: Option<(String, String)>,
        strict_mode: Option<bool>,
        max_whitespace_cnt: Option<usize>,
        documents: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<Compiled> {
        let mut schema = json_value(py, schema, "schema")?;
        if let Some(documents) = documents {
            let mut docs = constrain::schema::Documents::new();
            for (uri, doc) in documents.iter() {
                let uri: String = uri.extract().map_err(|_| {
                    PyValueError::new_err("documents: the keys are URIs (str)")
                })?;
                let doc = json_value(py, &doc, &format!("documents[{uri:?}]"))?;
                docs.insert(&uri, doc)
                    .map_err(|e| errors::from_compile(py, e.into()))?;
            }
            schema = docs
                .bundle(&schema)
                .map_err(|e| errors::from_compile(py, e.into()))?;
        }
        let strict = match (strict, strict_mode) {
            (Some(a), Some(b)) if a != b => {
                return Err(PyValueError::new_err(format!(
                    "strict={a} and strict_mode={b} disagree (strict_mode is XGrammar's name for strict)"
                )))
            }
            (a, b) => a.or(b).unwrap_or(true),
        };
        if let Some(i) = indent.filter(|i| !i.is_none()) {
            return Err(PyValueError::new_err(format!(
                "indent={i} is not supported: no whitespace policy here writes newlines and \
                 indentation; use any_whitespace=True (or whitespace=\"flexible\") instead"
            )));
        }
        let max = match (max_whitespace_cnt, whitespace_max) {
            (Some(a), Some(b)) if a != b => {
                return Err(PyValueError::new_err(format!(
                    "max_whitespace_cnt={a} and whitespace_max={b} disagree"
                )))
            }
            (a, b) => a.or(b).unwrap_or(2),
        };
        let xgrammar = match (any_whitespace, separators) {
            (None, None) => None,
            (Some(true), _) => Some("flexible"),
            (_, None) => Some("python"),
            (_, Some((comma, colon))) => Some(match (comma.as_str(), colon.as_str()) {
                (",", ":") => "compact",
                (", ", ": ") => "python",
                _ => {
                    return Err(PyValueError::new_err(format!(
                        "separators=({comma:?}, {colon:?}) is not supported: \
                         (\",\", \":\") or (\", \", \": \") only"
                    )))
                }
            }),
        };
        let policy = match (whitespace, xgrammar) {
            (Some(a), Some(b)) if a != b => {
                return Err(PyValueError::new_err(format!(
                    "whitespace={a:?} disagrees with XGrammar's any_whitespace/separators, which say {b:?}"
                )))
            }
            (a, b) => a.or(b).unwrap_or("compact"),
        };
        let mut options = schema_options(policy, strict, max)?;
        options.allow_unknown_keywords = !strict;
        let compiled = self.compile(py, Source::JsonSchema { schema, options })?;
        compiled.warn(py)?;
        Ok(compiled)
    }

    /// XGrammar's builtin JSON grammar: any JSON object or array, nested to
    /// any depth, with up to 4 blanks (space, tab, newline) between tokens.
    fn compile_builtin_json_grammar(&self, py: Python<'_>) -> PyResult<Compiled> {
        let source = Source::gbnf(BUILTIN_JSON).map_err(|e| errors::from_compile(py, e))?;
        self.compile(py, source)
    }

    /// A regex (the `regex` crate's syntax), matched in full.
    fn compile_regex(&self, py: Python<'_>, pattern: &str) -> PyResult<Compiled> {
        self.compile(py, Source::regex(pattern))
    }

    /// An OpenAI `tools` array (`list` or JSON text): the output is one call
    /// `{"name": ..., "arguments": {...}}` to one of the tools.
    #[pyo3(signature = (tools, *, whitespace="compact", strict=true, whitespace_max=2))]
    fn compile_tools(
        &self,
        py: Python<'_>,
        tools: &Bound<'_, PyAny>,
        whitespace: &str,
        strict: bool,
        whitespace_max: usize,
    ) -> PyResult<Compiled> {
        let tools = json_value(py, tools, "tools array")?;
        let options = schema_options(whitespace, strict, whitespace_max)?;
        self.compile(py, Source::Tools { tools, options })
    }

    /// A grammar. `syntax`: `"lark"` (llguidance's dialect, rule
    /// `start`), `"gbnf"` or `"ebnf"` (llama.cpp's format, as XGrammar's
    /// `compile_grammar` takes EBNF; rule `root`), `"regex"` (the regex
    /// grammar-file format, `grammars/*.regex`: `# ` comment lines, then a
    /// regex that may be wrapped over lines). Without `syntax`: GBNF when
    /// the text defines a rule with `::=`, otherwise the regex format. A
    /// malformed grammar raises `CompileError` naming line and column.
    #[pyo3(signature = (grammar, syntax=None))]
    fn compile_grammar(
        &self,
        py: Python<'_>,
        grammar: &str,
        syntax: Option<&str>,
    ) -> PyResult<Compiled> {
        let syntax = syntax.unwrap_or(if grammar.contains("::=") {
            "gbnf"
        } else {
            "regex"
        });
        let source = match syntax {
            "gbnf" | "ebnf" => Source::gbnf(grammar).map_err(|e| errors::from_compile(py, e))?,
            "lark" => Source::lark(grammar).map_err(|e| errors::from_compile(py, e))?,
            "regex" => Source::Grammar(Grammar::parse("grammar", grammar).ok_or_else(|| {
                errors::compile_error(
                    py,
                    "the grammar holds no pattern after its comment header".into(),
                    "grammar",
                    None,
                    None,
                )
            })?),
            other => {
                return Err(PyValueError::new_err(format!(
                    "syntax must be \"lark\", \"gbnf\", \"ebnf\" or \"regex\", not {other:?}"
                )))
            }
        };
        self.compile(py, source)
    }

    /// An XGrammar structural tag: a `dict`, JSON text, or an XGrammar
    /// `StructuralTag` / format object (anything with `model_dump_json()`),
    /// in the envelope `{"type": "structural_tag", "format": ...}`, the
    /// legacy `{"structures": [...], "triggers": [...]}` shape, or a bare
    /// format. The JSON inside is compiled strict, with flexible whitespace
    /// (at most `whitespace_max` bytes per slot, default 8) unless
    /// `whitespace` says otherwise. A malformed or unsupported tag raises
    /// `CompileError` naming the JSON Pointer inside the tag.
    #[pyo3(signature = (tag, *, whitespace="flexible", strict=true, whitespace_max=constrain::tags::TAG_WHITESPACE))]
    fn compile_structural_tag(
        &self,
        py: Python<'_>,
        tag: &Bound<'_, PyAny>,
        whitespace: &str,
        strict: bool,
        whitespace_max: usize,
    ) -> PyResult<Compiled> {
        let value = if tag.hasattr("model_dump_json")? {
            let text = tag.call_method0("model_dump_json")?;
            json_value(py, &text, "structural tag")?
        } else {
            json_value(py, tag, "structural tag")?
        };
        let tag = constrain::tags::StructuralTag::from_json(&value)
            .map_err(|e| errors::from_compile(py, e.into()))?;
        let options = schema_options(whitespace, strict, whitespace_max)?;
        self.compile(py, Source::StructuralTag { tag, options })
    }

    /// Number of compiled objects in the cache.
    fn cache_len(&self) -> usize {
        self.inner.cache_len()
    }

    /// Empties the cache.
    fn clear_cache(&self) {
        self.inner.clear_cache()
    }

    #[getter]
    fn tokenizer_info(&self, py: Python<'_>) -> Py<TokenizerInfo> {
        self.info.clone_ref(py)
    }
}

impl Compiled {
    /// Passes the schema compiler's warnings to Python's `warnings.warn`
    /// (the library never prints; the caller's warning filters decide).
    fn warn(&self, py: Python<'_>) -> PyResult<()> {
        let warnings = self.inner.warnings();
        if warnings.is_empty() {
            return Ok(());
        }
        let warn = py.import("warnings")?.getattr("warn")?;
        for w in warnings {
            warn.call1((format!("constrain: {w}"),))?;
        }
        Ok(())
    }
}

#[pymethods]
impl Compiled {
    #[getter]
    fn tokenizer_info(&self, py: Python<'_>) -> Py<TokenizerInfo> {
        self.info.clone_ref(py)
    }

    /// What the schema compiler narrowed or downgraded, as messages.
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.inner
            .warnings()
            .iter()
            .map(|w| w.to_string())
            .collect()
    }

    /// Whether masks are computed as matchers visit states.
    #[getter]
    fn is_lazy(&self) -> bool {
        self.inner.is_lazy()
    }

    /// Index memory, in bytes.
    #[getter]
    fn memory_size_bytes(&self) -> usize {
        self.inner.index().stats().memory_bytes
    }

    /// Compile time, in seconds.
    #[getter]
    fn compile_seconds(&self) -> f64 {
        self.inner.stats().total().as_secs_f64()
    }

    /// For tests: the token ids the core allows after taking `token_ids`
    /// from the start (a fresh core matcher, its `TokenSet` iterated), with
    /// the tokenizer's stop tokens; `None` when a token is refused. An
    /// independent decoding of the core's masks to compare bitmasks with.
    fn _core_allowed(&self, py: Python<'_>, token_ids: Vec<u32>) -> Option<Vec<u32>> {
        let inner = self.inner.clone();
        py.detach(move || {
            let mut m = inner.matcher();
            for t in token_ids {
                if !m.accept_token(constrain::TokenId(t)) {
                    return None;
                }
            }
            Some(m.allowed().iter().map(|t| t.0).collect())
        })
    }

    /// Whether two objects are the same compiled artefact (a cache hit).
    fn same_as(&self, other: &Compiled) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    fn __repr__(&self) -> String {
        format!(
            "Compiled(lazy={}, memory_size_bytes={})",
            self.inner.is_lazy(),
            self.inner.index().stats().memory_bytes
        )
    }
}

/// The schema options both `compile_json_schema` and `compile_tools` take:
/// the whitespace policy and strict (generation) or compliant semantics.
fn schema_options(
    whitespace: &str,
    strict: bool,
    whitespace_max: usize,
) -> PyResult<SchemaOptions> {
    Ok(SchemaOptions::default().whitespace(self::whitespace(whitespace, whitespace_max)?).mode(if strict {
            JsonMode::Strict
        } else {
            JsonMode::Compliant
        }))
}
