//! The one-stop entry: an [`Engine`] holds a model, its tokenizer, its
//! vocabulary and a compiler over it, and runs every loop of this module
//! (plain, traced, speculative, guided, beam) on a compiled constraint.

use super::beam_loop::{beam_search, beam_search_traced, BeamConfig, BeamGeneration};
use super::guidance_loop::{generate_guided, generate_guided_traced, Guidance};
use super::speculative_loop::{
    generate_speculative, generate_speculative_traced, SpeculativeConfig,
};
use super::types::{GenerateConfig, GenerateError, Generation};
use super::{generate, generate_traced};
use crate::trace::TraceStep;
use crate::{prompt, LanguageModel};
use constrain::index::TokenIndex;
use constrain::matcher::Matcher;
use constrain::vocab::{TextTokenizer, TokenId, Vocabulary};
use constrain::{Compiled, Compiler, CompilerConfig, Source};
use std::sync::Arc;

/// A model with its tokenizer and vocabulary: the library's one-stop entry.
///
/// ```
/// use constrain_model::generate::{Engine, GenerateConfig};
/// use constrain_testkit::{tiny, FakeModel};
///
/// // Offline: the tiny test vocabulary and a model with flat logits.
/// let tok = tiny::tokenizer()?;
/// let width = tok.vocab.logits_width();
/// let mut engine = Engine::new(FakeModel::uniform(width), tok.tokenizer, tok.vocab)?;
/// let index = engine.regex_index(r#"\{"ok":(true|false)\}"#)?;
/// let prompt = engine.prompt_tokens("Is it ok?", None, false)?;
/// let out = engine.generate(&prompt, Some(index), &GenerateConfig::default(), &mut |_| {})?;
/// assert!(out.text() == r#"{"ok":true}"# || out.text() == r#"{"ok":false}"#);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Engine<M: LanguageModel> {
    model: M,
    tokenizer: TextTokenizer,
    vocab: Arc<Vocabulary>,
    compiler: Compiler,
}

impl Engine<crate::QwenModel> {
    /// Loads a GGUF model and its tokenizer (see [`crate::load`]).
    pub fn load(
        path: impl AsRef<std::path::Path>,
        tokenizer: &crate::TokenizerSource,
    ) -> Result<Self, GenerateError> {
        let l = crate::load(path, tokenizer)?;
        Ok(Engine {
            compiler: Compiler::new(l.vocab.clone(), CompilerConfig::default()),
            model: l.model,
            tokenizer: l.tokenizer,
            vocab: l.vocab,
        })
    }
}

impl<M: LanguageModel> Engine<M> {
    /// Puts the pieces together; the vocabulary is widened to the model's
    /// logits width (an error when the tokenizer has more ids than logits).
    pub fn new(
        model: M,
        tokenizer: TextTokenizer,
        vocab: impl Into<Arc<Vocabulary>>,
    ) -> Result<Self, GenerateError> {
        let vocab: Arc<Vocabulary> = vocab.into();
        let width = model.logits_width();
        let vocab = if vocab.logits_width() == width {
            vocab
        } else {
            Arc::new(crate::check_compatible((*vocab).clone(), width)?)
        };
        Ok(Engine {
            compiler: Compiler::new(vocab.clone(), CompilerConfig::default()),
            model,
            tokenizer,
            vocab,
        })
    }

    /// The same engine compiling with `config` (limits, lazy threshold,
    /// cache size).
    pub fn with_compiler_config(mut self, config: CompilerConfig) -> Self {
        self.compiler = Compiler::new(self.vocab.clone(), config);
        self
    }

    /// The compiler (over this engine's vocabulary, with its cache).
    pub fn compiler(&self) -> &Compiler {
        &self.compiler
    }

    /// Compiles a constraint over this engine's vocabulary (cached).
    pub fn compile(&self, source: &Source) -> Result<Arc<Compiled>, GenerateError> {
        Ok(self.compiler.compile(source)?)
    }

    /// The model.
    pub fn model(&mut self) -> &mut M {
        &mut self.model
    }

    /// The vocabulary (logits width = the model's).
    pub fn vocab(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// The text tokenizer.
    pub fn tokenizer(&self) -> &TextTokenizer {
        &self.tokenizer
    }

    /// The token index of a regex over this vocabulary.
    pub fn regex_index(&self, regex: &str) -> Result<Arc<TokenIndex>, GenerateError> {
        Ok(self.compile(&Source::regex(regex))?.index().clone())
    }

    /// The token index of a JSON Schema (default options); returns the
    /// compiler's warnings too.
    pub fn schema_index(
        &self,
        schema: &serde_json::Value,
    ) -> Result<(Arc<TokenIndex>, Vec<String>), GenerateError> {
        let c = self.compile(&Source::json_schema(schema.clone()))?;
        let warnings = c.warnings().iter().map(|w| w.to_string()).collect();
        Ok((c.index().clone(), warnings))
    }

    /// Tokenizes a prompt: ChatML with `system` (Qwen's default persona when
    /// `None`) and `user` turns, or `user` as is when `raw`.
    pub fn prompt_tokens(
        &self,
        user: &str,
        system: Option<&str>,
        raw: bool,
    ) -> Result<Vec<TokenId>, GenerateError> {
        let text = if raw {
            user.to_string()
        } else {
            prompt::chatml(&[
                prompt::Message::system(system.unwrap_or(prompt::QWEN_DEFAULT_SYSTEM)),
                prompt::Message::user(user),
            ])
        };
        Ok(self.tokenizer.encode(&text)?)
    }

    /// Generates from prompt tokens, constrained by `index` when given.
    pub fn generate(
        &mut self,
        prompt: &[TokenId],
        index: Option<Arc<TokenIndex>>,
        config: &GenerateConfig,
        on_bytes: &mut dyn FnMut(&[u8]),
    ) -> Result<Generation, GenerateError> {
        let mut guide = index.map(Matcher::from_index);
        generate(
            &mut self.model,
            &self.vocab,
            Some(&self.tokenizer),
            guide.as_mut(),
            prompt,
            config,
            on_bytes,
        )
    }

    /// [`Engine::generate`], also recording the step trace (see
    /// [`crate::trace`]); the output is the same as without it.
    pub fn generate_traced(
        &mut self,
        prompt: &[TokenId],
        index: Option<Arc<TokenIndex>>,
        config: &GenerateConfig,
        on_bytes: &mut dyn FnMut(&[u8]),
    ) -> Result<(Generation, Vec<TraceStep>), GenerateError> {
        let mut guide = index.map(Matcher::from_index);
        generate_traced(
            &mut self.model,
            &self.vocab,
            Some(&self.tokenizer),
            guide.as_mut(),
            prompt,
            config,
            on_bytes,
        )
    }

    /// Speculative decoding from prompt tokens, constrained by `index` when
    /// given: `draft` proposes, this engine's model verifies (see
    /// [`generate_speculative`]).
    pub fn generate_speculative<D: LanguageModel + ?Sized>(
        &mut self,
        draft: &mut D,
        prompt: &[TokenId],
        index: Option<Arc<TokenIndex>>,
        config: &GenerateConfig,
        spec: &SpeculativeConfig,
        on_bytes: &mut dyn FnMut(&[u8]),
    ) -> Result<Generation, GenerateError> {
        // The rollback window speculative decoding needs, and no more.
        let mut guide = index.map(|i| Matcher::from_index(i).with_max_rollback(spec.draft_tokens));
        generate_speculative(
            &mut self.model,
            draft,
            &self.vocab,
            Some(&self.tokenizer),
            guide.as_mut(),
            prompt,
            config,
            spec,
            on_bytes,
        )
    }

    /// [`Engine::generate_speculative`], also recording the step trace of
    /// the target's distribution (see [`generate_speculative_traced`]).
    pub fn generate_speculative_traced<D: LanguageModel + ?Sized>(
        &mut self,
        draft: &mut D,
        prompt: &[TokenId],
        index: Option<Arc<TokenIndex>>,
        config: &GenerateConfig,
        spec: &SpeculativeConfig,
        on_bytes: &mut dyn FnMut(&[u8]),
    ) -> Result<(Generation, Vec<TraceStep>), GenerateError> {
        let mut guide = index.map(|i| Matcher::from_index(i).with_max_rollback(spec.draft_tokens));
        generate_speculative_traced(
            &mut self.model,
            draft,
            &self.vocab,
            Some(&self.tokenizer),
            guide.as_mut(),
            prompt,
            config,
            spec,
            on_bytes,
        )
    }

    /// [`Engine::generate_guided`], also recording the step trace of the
    /// guided distribution (see [`generate_guided_traced`]).
    pub fn generate_guided_traced(
        &mut self,
        prompt: &[TokenId],
        index: Option<Arc<TokenIndex>>,
        config: &GenerateConfig,
        guidance: Guidance<'_>,
        on_bytes: &mut dyn FnMut(&[u8]),
    ) -> Result<(Generation, Vec<TraceStep>), GenerateError> {
        let mut guide = index.map(Matcher::from_index);
        generate_guided_traced(
            &mut self.model,
            &self.vocab,
            Some(&self.tokenizer),
            guide.as_mut(),
            prompt,
            config,
            guidance,
            on_bytes,
        )
    }

    /// Generation steered by classifier-free guidance or contrastive
    /// decoding (see [`generate_guided`]).
    pub fn generate_guided(
        &mut self,
        prompt: &[TokenId],
        index: Option<Arc<TokenIndex>>,
        config: &GenerateConfig,
        guidance: Guidance<'_>,
        on_bytes: &mut dyn FnMut(&[u8]),
    ) -> Result<Generation, GenerateError> {
        let mut guide = index.map(Matcher::from_index);
        generate_guided(
            &mut self.model,
            &self.vocab,
            Some(&self.tokenizer),
            guide.as_mut(),
            prompt,
            config,
            guidance,
            on_bytes,
        )
    }

    /// Constrained beam search from prompt tokens under `index` (see
    /// [`beam_search`]).
    pub fn beam_search(
        &mut self,
        prompt: &[TokenId],
        index: Arc<TokenIndex>,
        config: &BeamConfig,
    ) -> Result<BeamGeneration, GenerateError> {
        let guide = Matcher::from_index(index);
        beam_search(
            &mut self.model,
            &self.vocab,
            Some(&self.tokenizer),
            &guide,
            prompt,
            config,
        )
    }

    /// [`Engine::beam_search`], also returning the winning hypothesis's step
    /// trace (see [`beam_search_traced`]).
    pub fn beam_search_traced(
        &mut self,
        prompt: &[TokenId],
        index: Arc<TokenIndex>,
        config: &BeamConfig,
    ) -> Result<(BeamGeneration, Vec<TraceStep>), GenerateError> {
        let guide = Matcher::from_index(index);
        beam_search_traced(
            &mut self.model,
            &self.vocab,
            Some(&self.tokenizer),
            &guide,
            prompt,
            config,
        )
    }

    /// Generates one JSON value valid for `schema`, answering `user` (the
    /// system message shows the schema).
    pub fn generate_json(
        &mut self,
        schema: &serde_json::Value,
        user: &str,
        config: &GenerateConfig,
    ) -> Result<serde_json::Value, GenerateError> {
        let (index, _warnings) = self.schema_index(schema)?;
        let system = prompt::schema_system_message(schema);
        let p = self.prompt_tokens(user, Some(&system), false)?;
        let out = self.generate(&p, Some(index), config, &mut |_| {})?;
        Ok(serde_json::from_slice(&out.bytes)?)
    }

    /// Generates a `T` whose JSON Schema is derived by `schemars`.
    ///
    /// ```
    /// use constrain_model::generate::{Engine, GenerateConfig};
    /// use constrain_testkit::{tiny, FakeModel};
    ///
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Verdict {
    ///     ok: bool,
    ///     score: u8,
    /// }
    ///
    /// // Offline: the tiny test vocabulary and a model with flat logits.
    /// let tok = tiny::tokenizer()?;
    /// let model = FakeModel::uniform(tok.vocab.logits_width());
    /// let mut engine = Engine::new(model, tok.tokenizer, tok.vocab)?;
    /// let v: Verdict = engine.generate_typed("Is it ok?", &GenerateConfig::greedy(40))?;
    /// assert!(v.score <= u8::MAX);
    /// # let _ = v.ok;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn generate_typed<T>(
        &mut self,
        user: &str,
        config: &GenerateConfig,
    ) -> Result<T, GenerateError>
    where
        T: schemars::JsonSchema + serde::de::DeserializeOwned,
    {
        let mut schema = constrain::schema::schema_for_type::<T>();
        strip_numeric_formats(&mut schema);
        let v = self.generate_json(&schema, user, config)?;
        Ok(serde_json::from_value(v)?)
    }
}

/// Replaces the `format` annotations schemars puts on Rust numeric types
/// (`"int32"`, `"uint8"`, `"double"`...), which are not JSON Schema formats,
/// by the ranges they stand for (`minimum` / `maximum`, kept when schemars
/// already gives tighter ones), so that the value always fits the Rust type.
fn strip_numeric_formats(v: &mut serde_json::Value) {
    use serde_json::json;
    let range = |f: &str| -> Option<(serde_json::Value, serde_json::Value)> {
        Some(match f {
            "int8" => (json!(i8::MIN), json!(i8::MAX)),
            "int16" => (json!(i16::MIN), json!(i16::MAX)),
            "int32" | "int" => (json!(i32::MIN), json!(i32::MAX)),
            "int64" => (json!(i64::MIN), json!(i64::MAX)),
            "uint8" => (json!(0), json!(u8::MAX)),
            "uint16" => (json!(0), json!(u16::MAX)),
            "uint32" | "uint" => (json!(0), json!(u32::MAX)),
            "uint64" => (json!(0), json!(u64::MAX)),
            _ => return None,
        })
    };
    match v {
        serde_json::Value::Object(m) => {
            let numeric_type = match m.get("type") {
                Some(serde_json::Value::String(t)) => t == "integer" || t == "number",
                Some(serde_json::Value::Array(ts)) => {
                    ts.iter().any(|t| t == "integer" || t == "number")
                }
                _ => false,
            };
            let format = m.get("format").and_then(|f| f.as_str()).map(str::to_string);
            if let (true, Some(f)) = (numeric_type, format) {
                if let Some((lo, hi)) = range(&f) {
                    m.entry("minimum").or_insert(lo);
                    m.entry("maximum").or_insert(hi);
                    m.remove("format");
                } else if matches!(f.as_str(), "float" | "double" | "int128" | "uint128") {
                    m.remove("format");
                }
            }
            for (_, x) in m.iter_mut() {
                strip_numeric_formats(x);
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(strip_numeric_formats),
        _ => {}
    }
}
