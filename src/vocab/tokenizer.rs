//! Canonical tokenization of text with the real tokenizer (the `tokenizers`
//! crate), for `constrain check`, the MaskBench runner and prompts.
//!
//! [`TextTokenizer::encode`] tokenizes a text as the model would *output* it
//! after a prompt: a tokenizer that prepends a space to a text encoded on its
//! own (Llama 2's `Prepend("▁")`, a `Metaspace` prepend scheme) is run with
//! that rule turned off, so the ids' bytes are exactly the text's bytes.
//! [`TextTokenizer::encode_standalone`] keeps the rule (prompts). For
//! byte-level tokenizers such as Qwen's the two are the same.

use super::{TokenId, VocabError};
use std::path::Path;

/// A loaded Hugging Face tokenizer that turns text into token ids.
pub struct TextTokenizer {
    inner: tokenizers::Tokenizer,
    /// `inner` without its prefix-space rule, when it has one.
    output: Option<tokenizers::Tokenizer>,
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
            Some(
                tokenizers::Tokenizer::from_bytes(text.as_bytes())
                    .map_err(|e| VocabError::Json(e.to_string()))?,
            )
        } else {
            None
        };
        Ok(TextTokenizer { inner, output })
    }

    /// Wraps an already built tokenizer (e.g. one made from GGUF metadata).
    pub fn from_tokenizer(inner: tokenizers::Tokenizer) -> Self {
        TextTokenizer {
            inner,
            output: None,
        }
    }

    /// The wrapped tokenizer.
    pub fn inner(&self) -> &tokenizers::Tokenizer {
        &self.inner
    }

    /// Token ids of `text` as model output: no BOS, no prepended space.
    pub fn encode(&self, text: &str) -> Result<Vec<TokenId>, VocabError> {
        Self::encode_with(self.output.as_ref().unwrap_or(&self.inner), text)
    }

    /// Token ids of `text` encoded on its own, as the tokenizer file says
    /// (Llama 2 prepends `▁`); no BOS.
    pub fn encode_standalone(&self, text: &str) -> Result<Vec<TokenId>, VocabError> {
        Self::encode_with(&self.inner, text)
    }

    fn encode_with(tk: &tokenizers::Tokenizer, text: &str) -> Result<Vec<TokenId>, VocabError> {
        let enc = tk
            .encode(text, false)
            .map_err(|e| VocabError::Encode(e.to_string()))?;
        Ok(enc.get_ids().iter().map(|&i| TokenId(i)).collect())
    }

    /// The id of a token given by its text (`<|im_end|>`).
    pub fn token_to_id(&self, token: &str) -> Option<TokenId> {
        self.inner.token_to_id(token).map(TokenId)
    }
}
