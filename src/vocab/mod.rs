//! # Vocabulary: token id → raw bytes
//!
//! The token index works on bytes, the model on token ids; [`Vocabulary`] is
//! the bridge. It is read from a Hugging Face `tokenizer.json` (byte-level BPE,
//! as Qwen, GPT-2 and Llama-3 use) by inverting the GPT-2 byte↔char table
//! ([`bytelevel`]), so a token's bytes may be partial UTF-8 (an emoji split in
//! two tokens is two byte strings that are each invalid UTF-8).
//!
//! ## What enters the index
//!
//! * Ordinary BPE tokens (`model.vocab`): their bytes.
//! * The **EOS set** (Qwen: `<|im_end|>` 151645 and `<|endoftext|>` 151643): never
//!   text; the index allows them exactly in accepting states.
//! * Every other **added token**, special or not, is kept *out* of the index:
//!   the masks never allow it. This includes Qwen's non-special added tokens
//!   `<tool_call>`, `</tool_call>`, `<think>`, `</think>`, `<|fim_*|>`,
//!   `<|repo_name|>`, `<|file_sep|>`, `<tool_response>`: they are control
//!   markers to the model, and letting one into a JSON string would hand the
//!   model's control channel to the output. The same characters can still be
//!   produced through ordinary BPE pieces (`<`, `think`, `>`), so no text is
//!   lost; only the single control token is.
//! * The **logits width** may exceed the tokenizer (Qwen2.5: 151,936 logits for
//!   151,669 ids). Ids at or past the tokenizer's size have no bytes and are
//!   always masked.
//!
//! ## Special tokens as grammar symbols
//!
//! An added token that is not a stop token (Qwen's `<tool_call>` 151657,
//! `<think>`, `</think>`) has no text bytes, but it has a **spelling**: three
//! bytes `0xC0 0x80|hi 0x80|lo` ([`SYMBOL_LEAD`], then its place among the
//! added tokens in two 6-bit digits), bytes no UTF-8 text holds. The index
//! walks spellings ([`Vocabulary::spelling`]), so a grammar that writes a
//! token's spelling allows exactly that token there, and a grammar that
//! does not (every JSON Schema, regex and GBNF text) never allows it, as
//! before. Ordinary tokens that hold `0xC0` or `0xC1` (single-byte tokens
//! no UTF-8 text uses) are left out of the index of a vocabulary with
//! symbols, so that no other token can write a spelling. Structural tags
//! write the spelling of a special token wherever its text is a trigger, a
//! begin or an end ([`crate::tags`]).
//!
//! Which tokenizers are read (byte-level BPE and SentencePiece with byte
//! fallback), the leading-space rule and the stop-token set are described in
//! [`hf`].
//!
//! Invariants: `token_bytes(id)` is `Some` exactly for indexable tokens, never
//! for EOS or other added tokens; every EOS id is below `logits_width()`.

pub mod bpe;
#[cfg(feature = "tokenizers")]
mod bpe_model;
pub mod bytelevel;
mod cache;
mod codec;
pub mod hf;
mod token_set;
#[cfg(feature = "tokenizers")]
mod tokenizer;
pub(crate) mod trie;

pub use bpe::BpeTables;
pub use cache::{CacheStatus, CachedVocabulary, VocabCache};
pub use hf::{StopConfig, TokenEncoding};
pub(crate) use token_set::mix;
pub use token_set::TokenSet;

#[cfg(feature = "tokenizers")]
pub use tokenizer::TextTokenizer;

use std::fmt;
use std::path::Path;

/// A token id, as the model and the tokenizer number it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct TokenId(pub u32);

impl TokenId {
    /// The id as an index into a logits vector.
    #[inline]
    pub fn as_usize(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for TokenId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Logits width of the Qwen2 / Qwen2.5 / Qwen3 models (embedding rows), larger
/// than the 151,669 ids the tokenizer knows.
pub const QWEN_LOGITS_WIDTH: usize = 151_936;

/// Names recognised as end-of-sequence when a tokenizer does not say otherwise.
pub const DEFAULT_EOS_NAMES: &[&str] = &[
    "<|im_end|>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|end_of_text|>",
    "</s>",
    "<eos>",
    "<|end|>",
    "<|eom_id|>",
    "<end_of_turn>",
    "<|return|>",
    "<|call|>",
    "<\u{ff5c}end\u{2581}of\u{2581}sentence\u{ff5c}>",
];

/// Errors reading or building a vocabulary.
#[derive(Debug, thiserror::Error)]
pub enum VocabError {
    /// The tokenizer file cannot be read.
    #[error("cannot read tokenizer {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not the `tokenizer.json` shape (the parser's message).
    #[error("malformed tokenizer.json: {0}")]
    Json(String),
    /// A tokenizer model or decoder constrain does not read (which one).
    #[error("unsupported tokenizer: {0}")]
    Unsupported(String),
    /// Two tokens share an id.
    #[error("token {id} appears twice in the tokenizer")]
    DuplicateId {
        /// The id.
        id: u32,
    },
    /// A byte-level token holds a character outside the GPT-2 byte table.
    #[error("token {token:?} (id {id}) is not byte-level BPE text: character {ch:?} has no byte")]
    NotByteLevel {
        /// The token's id.
        id: u32,
        /// The token as the file writes it.
        token: String,
        /// The character with no byte.
        ch: char,
    },
    /// The model's logits row is narrower than the token ids.
    #[error("logits width {width} is smaller than the tokenizer's {ids} ids")]
    LogitsWidth {
        /// The logits width asked for.
        width: usize,
        /// How many ids the tokenizer has.
        ids: usize,
    },
    /// No end-of-sequence token (the names looked for).
    #[error("no end-of-sequence token found (looked for {0})")]
    NoEos(String),
    /// The end-of-sequence id given is not a token.
    #[error("end-of-sequence token {0} is not in the vocabulary")]
    BadEos(u32),
    /// A stop token named beside the tokenizer is not one of its tokens.
    #[error("stop token {token:?} named in {source_file} is not in the tokenizer")]
    UnknownStop {
        /// The token's text.
        token: String,
        /// The file that names it.
        source_file: String,
    },
    /// Text could not be turned into tokens (the tokenizer's message).
    #[error("cannot tokenize: {0}")]
    Encode(String),
}

/// Token id → raw bytes, the EOS set and the logits width. Immutable once
/// built; share it through `Arc`.
#[derive(Clone)]
pub struct Vocabulary {
    /// Concatenated bytes of every indexable token.
    bytes: Vec<u8>,
    /// `spans[id] = (start, len)`; `len == u32::MAX` marks a token with no
    /// bytes (EOS, added tokens, holes).
    spans: Vec<(u32, u32)>,
    eos: Vec<TokenId>,
    /// Added tokens without text bytes: (id, text, special flag).
    added: Vec<(TokenId, String, bool)>,
    /// The added tokens that are grammar symbols (not stop tokens), by id,
    /// with their place `k` among `added`: they spell [`symbol_spelling`]`(k)`.
    symbols: Vec<(TokenId, u16)>,
    /// The spellings, three bytes per entry of `symbols`.
    spelled: Vec<u8>,
    logits_width: usize,
    max_token_len: usize,
    n_text_tokens: usize,
    /// The tokenizer prepends a space to a text it encodes alone (see [`hf`]).
    prefix_space: bool,
    /// Token tries for the index, built on first use and shared.
    pub(crate) tries: std::sync::OnceLock<std::sync::Arc<trie::VocabTries>>,
}

const NO_BYTES: u32 = u32::MAX;

/// The first byte of a special token's spelling as a grammar symbol (a byte
/// no UTF-8 text holds; see the module docs).
pub const SYMBOL_LEAD: u8 = 0xC0;

/// Most added tokens that can be symbols (two 6-bit digits).
pub const MAX_SYMBOLS: usize = 1 << 12;

/// The spelling of the `k`-th added token.
pub fn symbol_spelling(k: u16) -> [u8; 3] {
    [
        SYMBOL_LEAD,
        0x80 | (k >> 6) as u8 & 0x3F,
        0x80 | (k & 0x3F) as u8,
    ]
}

/// Whether a byte string holds a byte that only spellings use.
fn holds_lead(b: &[u8]) -> bool {
    b.iter().any(|&x| x == SYMBOL_LEAD || x == 0xC1)
}

/// Largest number of ids (and logits) accepted: 16,777,216.
pub const MAX_IDS: usize = 1 << 24;

impl fmt::Debug for Vocabulary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Vocabulary")
            .field("ids", &self.spans.len())
            .field("text_tokens", &self.n_text_tokens)
            .field("eos", &self.eos)
            .field("logits_width", &self.logits_width)
            .finish()
    }
}

impl Vocabulary {
    /// Builds a vocabulary from raw token bytes (for tests and custom
    /// tokenizers). `eos` ids carry no bytes; `logits_width` must cover every id.
    pub fn new(
        tokens: impl IntoIterator<Item = (TokenId, Vec<u8>)>,
        eos: impl IntoIterator<Item = TokenId>,
        logits_width: usize,
    ) -> Result<Self, VocabError> {
        let mut v = Vocabulary {
            bytes: Vec::new(),
            spans: Vec::new(),
            eos: eos.into_iter().collect(),
            added: Vec::new(),
            symbols: Vec::new(),
            spelled: Vec::new(),
            logits_width: 0,
            max_token_len: 0,
            n_text_tokens: 0,
            prefix_space: false,
            tries: Default::default(),
        };
        for (id, b) in tokens {
            v.push(id, Some(&b))?;
        }
        for e in v.eos.clone() {
            if e.as_usize() >= v.spans.len() {
                v.spans.resize(e.as_usize() + 1, (0, NO_BYTES));
            }
            v.spans[e.as_usize()] = (0, NO_BYTES);
        }
        v.set_logits_width(logits_width.max(1).max(v.spans.len()))?;
        if logits_width < v.spans.len() {
            return Err(VocabError::LogitsWidth {
                width: logits_width,
                ids: v.spans.len(),
            });
        }
        Ok(v)
    }

    fn empty() -> Self {
        Vocabulary {
            bytes: Vec::new(),
            spans: Vec::new(),
            eos: Vec::new(),
            added: Vec::new(),
            symbols: Vec::new(),
            spelled: Vec::new(),
            logits_width: 0,
            max_token_len: 0,
            n_text_tokens: 0,
            prefix_space: false,
            tries: Default::default(),
        }
    }

    fn push(&mut self, id: TokenId, bytes: Option<&[u8]>) -> Result<(), VocabError> {
        let i = id.as_usize();
        if i >= MAX_IDS {
            return Err(VocabError::Unsupported(format!(
                "token id {id} is too large (ids must be below {MAX_IDS})"
            )));
        }
        if i >= self.spans.len() {
            self.spans.resize(i + 1, (0, NO_BYTES));
        } else if self.spans[i].1 != NO_BYTES {
            return Err(VocabError::DuplicateId { id: id.0 });
        }
        if let Some(b) = bytes {
            self.spans[i] = (self.bytes.len() as u32, b.len() as u32);
            self.bytes.extend_from_slice(b);
            self.max_token_len = self.max_token_len.max(b.len());
            self.n_text_tokens += 1;
        }
        Ok(())
    }

    fn set_logits_width(&mut self, width: usize) -> Result<(), VocabError> {
        if width > MAX_IDS {
            return Err(VocabError::Unsupported(format!(
                "logits width {width} is too large (at most {MAX_IDS})"
            )));
        }
        if width < self.spans.len() {
            return Err(VocabError::LogitsWidth {
                width,
                ids: self.spans.len(),
            });
        }
        for e in &self.eos {
            if e.as_usize() >= self.spans.len() {
                return Err(VocabError::BadEos(e.0));
            }
        }
        self.logits_width = width;
        Ok(())
    }

    /// Reads a Hugging Face `tokenizer.json` file (byte-level BPE, or
    /// SentencePiece BPE with byte fallback; see [`hf`]). Stop tokens named by
    /// a `tokenizer_config.json` / `generation_config.json` in the same
    /// directory join the default EOS names.
    pub fn from_tokenizer_json_file(path: impl AsRef<Path>) -> Result<Self, VocabError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| VocabError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let stops = match path.parent() {
            Some(dir) => StopConfig::from_dir(if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            })?,
            None => StopConfig::default(),
        };
        hf::parse(&text, &stops)
    }

    /// Parses the text of a Hugging Face `tokenizer.json` with stop tokens
    /// from its configs (see [`StopConfig`]).
    pub fn from_tokenizer_json_with_stops(
        json: &str,
        stops: &StopConfig,
    ) -> Result<Self, VocabError> {
        hf::parse(json, stops)
    }

    /// Whether the tokenizer prepends a space (`▁`) to a text it encodes on
    /// its own (Llama 2). Token bytes never hide it: see [`hf`].
    pub fn adds_prefix_space(&self) -> bool {
        self.prefix_space
    }

    /// Parses the text of a Hugging Face `tokenizer.json` (byte-level BPE, or
    /// SentencePiece BPE with byte fallback; see [`hf`]).
    /// The logits width is the number of ids; widen it with
    /// [`Vocabulary::with_logits_width`] for models with padded embeddings.
    pub fn from_tokenizer_json(json: &str) -> Result<Self, VocabError> {
        hf::parse(json, &StopConfig::default())
    }

    /// Builds a vocabulary from byte-level BPE token strings (GPT-2 char
    /// mapping), as tokenizer.json and GGUF files store them. `added` are
    /// (id, text, special) control tokens kept out of the index; `eos` picks
    /// the EOS ids (default: the added tokens named in [`DEFAULT_EOS_NAMES`]).
    pub fn from_byte_level(
        regular: Vec<(u32, String)>,
        added: Vec<(u32, String, bool)>,
        eos: Option<Vec<TokenId>>,
    ) -> Result<Self, VocabError> {
        let table = bytelevel::char_to_byte_table();
        let mut v = Vocabulary {
            bytes: Vec::new(),
            spans: Vec::new(),
            eos: Vec::new(),
            added: Vec::new(),
            symbols: Vec::new(),
            spelled: Vec::new(),
            logits_width: 0,
            max_token_len: 0,
            n_text_tokens: 0,
            prefix_space: false,
            tries: Default::default(),
        };
        let added_ids: std::collections::HashSet<u32> = added.iter().map(|a| a.0).collect();
        let mut regular = regular;
        regular.sort_unstable_by_key(|r| r.0);
        let mut buf = Vec::with_capacity(64);
        for (id, s) in &regular {
            if added_ids.contains(id) {
                continue;
            }
            buf.clear();
            for ch in s.chars() {
                match table.get(&ch) {
                    Some(&b) => buf.push(b),
                    None => {
                        return Err(VocabError::NotByteLevel {
                            id: *id,
                            token: s.clone(),
                            ch,
                        });
                    }
                }
            }
            v.push(TokenId(*id), Some(&buf))?;
        }
        for (id, text, special) in &added {
            v.push(TokenId(*id), None)?;
            v.added.push((TokenId(*id), text.clone(), *special));
        }
        v.eos = match eos {
            Some(e) => e,
            None => {
                let mut e: Vec<TokenId> = added
                    .iter()
                    .filter(|a| DEFAULT_EOS_NAMES.contains(&a.1.as_str()))
                    .map(|a| TokenId(a.0))
                    .collect();
                e.sort();
                if e.is_empty() {
                    return Err(VocabError::NoEos(DEFAULT_EOS_NAMES.join(", ")));
                }
                e
            }
        };
        let n = v.spans.len();
        v.set_logits_width(n)?;
        v.assign_symbols();
        Ok(v)
    }

    /// Gives every added token that is not a stop token its spelling
    /// (again, after the stop set changed).
    fn assign_symbols(&mut self) {
        let mut symbols: Vec<(TokenId, u16)> = self
            .added
            .iter()
            .enumerate()
            .take(MAX_SYMBOLS)
            .filter(|(_, a)| !self.eos.contains(&a.0))
            .map(|(k, a)| (a.0, k as u16))
            .collect();
        symbols.sort_unstable();
        self.spelled = symbols
            .iter()
            .flat_map(|&(_, k)| symbol_spelling(k))
            .collect();
        if !symbols.is_empty() {
            self.max_token_len = self.max_token_len.max(3);
        }
        self.symbols = symbols;
        self.tries = Default::default();
    }

    /// The bytes the index walks for a token: its text, or its spelling as a
    /// grammar symbol ([`SYMBOL_LEAD`]); `None` for stop tokens, ids past the
    /// tokenizer, and (in a vocabulary with symbols) ordinary tokens holding
    /// a spelling's lead byte.
    #[inline]
    pub fn spelling(&self, id: TokenId) -> Option<&[u8]> {
        match self.token_bytes(id) {
            Some(b) if self.symbols.is_empty() || !holds_lead(b) => Some(b),
            Some(_) => None,
            None => {
                let i = self.symbols.binary_search_by_key(&id, |s| s.0).ok()?;
                Some(&self.spelled[3 * i..3 * i + 3])
            }
        }
    }

    /// Every token the index walks, with its [`Vocabulary::spelling`], in id
    /// order.
    pub fn spellings(&self) -> impl Iterator<Item = (TokenId, &[u8])> + '_ {
        let n = self.spans.len();
        (0..n as u32).filter_map(move |i| self.spelling(TokenId(i)).map(|b| (TokenId(i), b)))
    }

    /// The added tokens that are grammar symbols, with their text and
    /// spelling, in id order.
    pub fn symbols(&self) -> impl Iterator<Item = (TokenId, &str, &[u8])> + '_ {
        self.symbols.iter().enumerate().map(|(i, &(id, k))| {
            (
                id,
                self.added[k as usize].1.as_str(),
                &self.spelled[3 * i..3 * i + 3],
            )
        })
    }

    /// The same vocabulary with a wider logits vector (ids past the tokenizer
    /// are always masked). Errors when `width` is below the number of ids.
    pub fn with_logits_width(mut self, width: usize) -> Result<Self, VocabError> {
        self.set_logits_width(width)?;
        // Tries built already (a cached vocabulary's) do not depend on the
        // width, only their lazily built sets do: kept when not shared.
        let tries = self
            .tries
            .take()
            .and_then(|t| std::sync::Arc::try_unwrap(t).ok());
        if let Some(t) = tries {
            let _ = self.tries.set(std::sync::Arc::new(t.with_width(width)));
        }
        Ok(self)
    }

    /// The same vocabulary with another EOS set.
    pub fn with_eos(mut self, eos: Vec<TokenId>) -> Result<Self, VocabError> {
        for e in &eos {
            if e.as_usize() >= self.spans.len() {
                return Err(VocabError::BadEos(e.0));
            }
            if self.spans[e.as_usize()].1 != NO_BYTES {
                self.n_text_tokens -= 1;
                self.spans[e.as_usize()] = (0, NO_BYTES);
            }
        }
        self.eos = eos;
        self.assign_symbols();
        Ok(self)
    }

    /// Number of logits a model produces (mask width).
    #[inline]
    pub fn logits_width(&self) -> usize {
        self.logits_width
    }

    /// Number of ids the tokenizer knows (text, EOS and added tokens).
    pub fn num_ids(&self) -> usize {
        self.spans.len()
    }

    /// Number of tokens that carry text and may enter the index.
    pub fn num_text_tokens(&self) -> usize {
        self.n_text_tokens
    }

    /// Length in bytes of the longest text token.
    pub fn max_token_len(&self) -> usize {
        self.max_token_len
    }

    /// The EOS ids.
    pub fn eos(&self) -> &[TokenId] {
        &self.eos
    }

    /// Whether `id` ends the sequence.
    #[inline]
    pub fn is_eos(&self, id: TokenId) -> bool {
        self.eos.contains(&id)
    }

    /// Added tokens kept out of the index, with their text and special flag.
    pub fn added_tokens(&self) -> &[(TokenId, String, bool)] {
        &self.added
    }

    /// The raw bytes of an indexable token; `None` for EOS, added tokens and
    /// ids past the tokenizer.
    #[inline]
    pub fn token_bytes(&self, id: TokenId) -> Option<&[u8]> {
        let &(start, len) = self.spans.get(id.as_usize())?;
        if len == NO_BYTES {
            return None;
        }
        Some(&self.bytes[start as usize..(start + len) as usize])
    }

    /// Every indexable token with its bytes, in id order.
    pub fn text_tokens(&self) -> impl Iterator<Item = (TokenId, &[u8])> + '_ {
        self.spans.iter().enumerate().filter_map(|(i, &(s, l))| {
            (l != NO_BYTES).then(|| (TokenId(i as u32), &self.bytes[s as usize..(s + l) as usize]))
        })
    }

    /// The bytes of a token sequence (EOS and added tokens contribute their
    /// text for added tokens, nothing for EOS).
    pub fn decode(&self, ids: &[TokenId]) -> Vec<u8> {
        let mut out = Vec::new();
        for &id in ids {
            if let Some(b) = self.token_bytes(id) {
                out.extend_from_slice(b);
            } else if let Some(a) = self.added.iter().find(|a| a.0 == id && !self.is_eos(id)) {
                out.extend_from_slice(a.1.as_bytes());
            }
        }
        out
    }

    /// Writes every field to a cache payload ([`cache`]).
    pub(crate) fn encode_cache(&self, e: &mut codec::Enc) {
        e.bytes(&self.bytes);
        e.u32s(self.spans.iter().flat_map(|&(s, l)| [s, l]));
        e.u32s(self.eos.iter().map(|t| t.0));
        e.u64(self.added.len() as u64);
        for (id, text, special) in &self.added {
            e.u32(id.0);
            e.u8(*special as u8);
            e.bytes(text.as_bytes());
        }
        e.u32s(self.symbols.iter().flat_map(|&(id, k)| [id.0, k as u32]));
        e.bytes(&self.spelled);
        e.u64(self.logits_width as u64);
        e.u64(self.max_token_len as u64);
        e.u64(self.n_text_tokens as u64);
        e.u8(self.prefix_space as u8);
    }

    /// Reads what [`Vocabulary::encode_cache`] wrote, checking every span and id.
    pub(crate) fn decode_cache(d: &mut codec::Dec<'_>) -> Result<Self, String> {
        let bytes = d.bytes()?.to_vec();
        let flat = d.u32s()?;
        if flat.len() % 2 != 0 || flat.len() / 2 > MAX_IDS {
            return Err("bad token spans".into());
        }
        let spans: Vec<(u32, u32)> = flat.chunks_exact(2).map(|c| (c[0], c[1])).collect();
        let n_ids = spans.len();
        let mut n_text = 0usize;
        let mut max_len = 0usize;
        for &(s, l) in &spans {
            if l != NO_BYTES {
                if s as usize + l as usize > bytes.len() {
                    return Err("token span out of range".into());
                }
                n_text += 1;
                max_len = max_len.max(l as usize);
            }
        }
        let eos: Vec<TokenId> = d.u32s()?.into_iter().map(TokenId).collect();
        let n_added = d.usize()?;
        if n_added > n_ids {
            return Err("bad added tokens".into());
        }
        let mut added = Vec::with_capacity(n_added);
        for _ in 0..n_added {
            let id = d.u32()?;
            let special = d.u8()? != 0;
            let text = std::str::from_utf8(d.bytes()?)
                .map_err(|_| "added token is not UTF-8".to_string())?
                .to_string();
            if id as usize >= n_ids {
                return Err("added token id out of range".into());
            }
            added.push((TokenId(id), text, special));
        }
        let flat = d.u32s()?;
        if flat.len() % 2 != 0 {
            return Err("bad symbols".into());
        }
        let symbols: Vec<(TokenId, u16)> = flat
            .chunks_exact(2)
            .map(|c| (TokenId(c[0]), c[1] as u16))
            .collect();
        let spelled = d.bytes()?.to_vec();
        let logits_width = d.usize()?;
        let max_token_len = d.usize()?;
        let n_text_tokens = d.usize()?;
        let prefix_space = d.u8()? != 0;
        let symbols_ok = spelled.len() == 3 * symbols.len()
            && flat
                .chunks_exact(2)
                .all(|c| (c[0] as usize) < n_ids && (c[1] as usize) < added.len());
        if !symbols_ok
            || eos.iter().any(|e| e.as_usize() >= n_ids)
            || n_text != n_text_tokens
            || max_token_len < max_len
            || logits_width < n_ids
            || logits_width > MAX_IDS
        {
            return Err("inconsistent vocabulary".into());
        }
        Ok(Vocabulary {
            bytes,
            spans,
            eos,
            added,
            symbols,
            spelled,
            logits_width,
            max_token_len,
            n_text_tokens,
            prefix_space,
            tries: Default::default(),
        })
    }

    /// A printable form of a token for messages (`"ab"`, `<|im_end|>`, `#151700`).
    pub fn describe(&self, id: TokenId) -> String {
        if let Some(b) = self.token_bytes(id) {
            return format!("{:?}", String::from_utf8_lossy(b));
        }
        if let Some(a) = self.added.iter().find(|a| a.0 == id) {
            return a.1.clone();
        }
        if self.is_eos(id) {
            return format!("<eos #{id}>");
        }
        format!("#{id}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_level_tokens_decode_to_raw_bytes() {
        // "Ġ" is the GPT-2 char for the space byte; "ä¸" are the chars of 0xE4 0xB8.
        let v = Vocabulary::from_byte_level(
            vec![(0, "a".into()), (1, "Ġb".into()), (2, "ä¸".into())],
            vec![(3, "<|im_end|>".into(), true), (4, "<think>".into(), false)],
            None,
        )
        .unwrap();
        assert_eq!(v.token_bytes(TokenId(1)), Some(&b" b"[..]));
        assert_eq!(v.token_bytes(TokenId(2)), Some(&[0xE4u8, 0xB8][..]));
        assert_eq!(v.eos(), &[TokenId(3)]);
        assert_eq!(v.token_bytes(TokenId(3)), None);
        assert_eq!(
            v.token_bytes(TokenId(4)),
            None,
            "non-special added tokens stay out"
        );
        assert_eq!(v.num_text_tokens(), 3);
        let w = v.with_logits_width(8).unwrap();
        assert_eq!(w.logits_width(), 8);
        assert_eq!(w.token_bytes(TokenId(7)), None);
        assert!(w.clone().with_logits_width(2).is_err());
    }

    #[test]
    fn not_byte_level_is_an_error() {
        let e = Vocabulary::from_byte_level(
            vec![(0, "\u{4e2d}".into())],
            vec![(1, "</s>".into(), true)],
            None,
        );
        assert!(matches!(e, Err(VocabError::NotByteLevel { .. })));
    }

    #[test]
    fn missing_eos_is_an_error() {
        let e = Vocabulary::from_byte_level(vec![(0, "a".into())], vec![], None);
        assert!(matches!(e, Err(VocabError::NoEos(_))));
    }
}
