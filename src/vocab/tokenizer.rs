//! Canonical tokenization of text with the real tokenizer (the `tokenizers`
//! crate), for `constrain check`, the MaskBench runner and prompts.

use super::{TokenId, VocabError};
use std::path::Path;

/// A loaded Hugging Face tokenizer that turns text into token ids.
pub struct TextTokenizer {
    inner: tokenizers::Tokenizer,
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
        Ok(TextTokenizer { inner })
    }

    /// Wraps an already built tokenizer (e.g. one made from GGUF metadata).
    pub fn from_tokenizer(inner: tokenizers::Tokenizer) -> Self {
        TextTokenizer { inner }
    }

    /// The wrapped tokenizer.
    pub fn inner(&self) -> &tokenizers::Tokenizer {
        &self.inner
    }

    /// Token ids of `text`, without added special tokens (no BOS).
    pub fn encode(&self, text: &str) -> Result<Vec<TokenId>, VocabError> {
        let enc = self
            .inner
            .encode(text, false)
            .map_err(|e| VocabError::Encode(e.to_string()))?;
        Ok(enc.get_ids().iter().map(|&i| TokenId(i)).collect())
    }

    /// The id of a token given by its text (`<|im_end|>`).
    pub fn token_to_id(&self, token: &str) -> Option<TokenId> {
        self.inner.token_to_id(token).map(TokenId)
    }
}
