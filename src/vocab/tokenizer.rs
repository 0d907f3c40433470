//! Canonical tokenization of text with the real tokenizer (the `tokenizers`
//! crate), for `constrain check`, the MaskBench runner and prompts.
//!
//! [`TextTokenizer::encode`] tokenizes a text as the model would *output* it
//! after a prompt: a tokenizer that prepends a space to a text encoded on its
//! own (Llama 2's `Prepend("▁")`, a `Metaspace` prepend scheme) is run with
//! that rule turned off, so the ids' bytes are exactly the text's bytes.
//! [`TextTokenizer::encode_standalone`] keeps the rule (prompts). For
//! byte-level tokenizers such as Qwen's the two are the same.
//!
//! Two ways to load one: [`TextTokenizer::from_file`] builds the full
//! `tokenizers::Tokenizer` from `tokenizer.json` (a third of a second for
//! Qwen's 11 MB file); [`TextTokenizer::from_tables`] builds the same
//! tokenizer around a BPE model over the vocabulary cache's
//! [`BpeTables`](super::BpeTables) in about a millisecond (see
//! [`super::bpe`]). Both give the same ids.

use super::bpe_model::{fast_tokenizer, FastTokenizer};
use super::{BpeTables, TokenId, VocabError, Vocabulary};
use std::path::Path;
use std::sync::Arc;

/// A loaded Hugging Face tokenizer that turns text into token ids.
pub struct TextTokenizer {
    kind: Kind,
}

enum Kind {
    Full {
        inner: Box<tokenizers::Tokenizer>,
        /// `inner` without its prefix-space rule, when it has one.
        output: Option<Box<tokenizers::Tokenizer>>,
    },
    /// Over cached tables (no prefix-space rule: the tables exist only
    /// for files without one).
    Cached(Box<FastTokenizer>),
}

impl TextTokenizer {
    /// Loads `tokenizer.json`.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, VocabError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| VocabError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_bytes(&bytes)
    }

    /// Parses the bytes of a `tokenizer.json`.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, VocabError> {
        let inner = tokenizers::Tokenizer::from_bytes(bytes)
            .map_err(|e| VocabError::Json(e.to_string()))?;
        // Only the two fields the prefix-space rule reads are built as
        // values; the rest (the 11 MB vocabulary and merges of Qwen's file)
        // is skipped, not copied into a second tree.
        #[derive(serde::Deserialize)]
        struct Rules {
            #[serde(default)]
            normalizer: serde_json::Value,
            #[serde(default)]
            pre_tokenizer: serde_json::Value,
        }
        let rules: Rules =
            serde_json::from_slice(bytes).map_err(|e| VocabError::Json(e.to_string()))?;
        let rules = serde_json::json!({
            "normalizer": rules.normalizer,
            "pre_tokenizer": rules.pre_tokenizer,
        });
        let output = if super::hf::adds_prefix_space(&rules) {
            let mut json: serde_json::Value =
                serde_json::from_slice(bytes).map_err(|e| VocabError::Json(e.to_string()))?;
            super::hf::without_prefix_space(&mut json);
            let text = serde_json::to_string(&json).map_err(|e| VocabError::Json(e.to_string()))?;
            Some(Box::new(
                tokenizers::Tokenizer::from_bytes(text.as_bytes())
                    .map_err(|e| VocabError::Json(e.to_string()))?,
            ))
        } else {
            None
        };
        Ok(TextTokenizer {
            kind: Kind::Full {
                inner: Box::new(inner),
                output,
            },
        })
    }

    /// The tokenizer of a vocabulary cache's tables
    /// ([`CachedVocabulary::tables`](super::CachedVocabulary::tables)) over
    /// the vocabulary read with them. It encodes as
    /// [`TextTokenizer::from_file`] of the same tokenizer.json does; `Err`
    /// when the tables do not build a tokenizer (then use `from_file`).
    pub fn from_tables(vocab: Arc<Vocabulary>, tables: Arc<BpeTables>) -> Result<Self, VocabError> {
        let tk = fast_tokenizer(vocab, tables).map_err(VocabError::Json)?;
        Ok(TextTokenizer {
            kind: Kind::Cached(Box::new(tk)),
        })
    }

    /// Wraps an already built tokenizer (e.g. one made from GGUF metadata).
    pub fn from_tokenizer(inner: tokenizers::Tokenizer) -> Self {
        TextTokenizer {
            kind: Kind::Full {
                inner: Box::new(inner),
                output: None,
            },
        }
    }

    /// The wrapped `tokenizers::Tokenizer`; `None` for one built
    /// [`TextTokenizer::from_tables`].
    pub fn inner(&self) -> Option<&tokenizers::Tokenizer> {
        match &self.kind {
            Kind::Full { inner, .. } => Some(&**inner),
            Kind::Cached(_) => None,
        }
    }

    /// Whether this tokenizer was built from cached tables.
    pub fn is_cached(&self) -> bool {
        matches!(self.kind, Kind::Cached(_))
    }

    /// Token ids of `text` as model output: no BOS, no prepended space.
    pub fn encode(&self, text: &str) -> Result<Vec<TokenId>, VocabError> {
        match &self.kind {
            Kind::Full { inner, output } => {
                ids(output.as_deref().unwrap_or(&**inner).encode(text, false))
            }
            Kind::Cached(tk) => ids(tk.encode(text, false)),
        }
    }

    /// Token ids of `text` encoded on its own, as the tokenizer file says
    /// (Llama 2 prepends `▁`); no BOS.
    pub fn encode_standalone(&self, text: &str) -> Result<Vec<TokenId>, VocabError> {
        match &self.kind {
            Kind::Full { inner, .. } => ids(inner.encode(text, false)),
            Kind::Cached(tk) => ids(tk.encode(text, false)),
        }
    }

    /// The id of a token given by its text (`<|im_end|>`).
    pub fn token_to_id(&self, token: &str) -> Option<TokenId> {
        match &self.kind {
            Kind::Full { inner, .. } => inner.token_to_id(token),
            Kind::Cached(tk) => tk.token_to_id(token),
        }
        .map(TokenId)
    }

    /// The text of a token id as the tokenizer writes it (`<|im_end|>`, `Ġthe`).
    pub fn id_to_token(&self, id: TokenId) -> Option<String> {
        match &self.kind {
            Kind::Full { inner, .. } => inner.id_to_token(id.0),
            Kind::Cached(tk) => tk.id_to_token(id.0),
        }
    }
}

fn ids(enc: tokenizers::Result<tokenizers::Encoding>) -> Result<Vec<TokenId>, VocabError> {
    let enc = enc.map_err(|e| VocabError::Encode(e.to_string()))?;
    Ok(enc.get_ids().iter().map(|&i| TokenId(i)).collect())
}
