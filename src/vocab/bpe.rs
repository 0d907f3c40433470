//! # Byte-level BPE tables for a fast start
//!
//! Encoding a text with the Hugging Face `tokenizers` crate needs a
//! `Tokenizer` built from `tokenizer.json`: for Qwen that means parsing 11 MB
//! of JSON and hashing 151,643 vocabulary strings and 151,387 merges, about a
//! third of a second in every process, where the rest of `constrain check`
//! takes a few tens of milliseconds. [`BpeTables`] keeps what encoding needs
//! in the vocabulary cache ([`super::VocabCache`]) next to the token table,
//! in a form a later process reads without hashing anything:
//!
//! * the **merges** as sorted `(left id, right id)` keys with their rank and
//!   the merged id (binary search, no hash map to build);
//! * the id of each **single byte**, the first symbols of every word;
//! * the **model vocabulary in byte order** (for `ignore_merges` and
//!   `token_to_id`);
//! * the **shell**: every other part of `tokenizer.json` that encoding reads
//!   (normalizer, pre-tokenizer, added tokens, post-processor, decoder,
//!   truncation, padding), a few kilobytes of JSON.
//!
//! [`super::TextTokenizer::from_tables`] puts the shell back together with
//! the `tokenizers` crate's own normalizer, pre-tokenizer and added-token
//! splitter (so Qwen's split regex, NFC and `<|im_start|>` are matched by
//! the very code that matches them in the full tokenizer) around a BPE model
//! of ours over these tables, which merges exactly as the crate's `BPE`
//! does (lowest rank first, leftmost on ties).
//!
//! ## Which files get tables
//!
//! [`BpeTables::from_json`] returns `None`, and encoding falls back to the
//! full `tokenizers::Tokenizer`, unless the file is exactly a shape the model
//! here reproduces: a `BPE` model with no dropout, no unknown token, no
//! continuing-subword prefix or end-of-word suffix and no byte fallback,
//! byte-level token text (every token maps to bytes through the GPT-2
//! table, every one of the 256 bytes is a token), no prefix-space rule, and
//! added tokens that are neither in the model vocabulary nor normalized.
//! Qwen2/2.5/3, Llama 3 and gpt-oss qualify; SentencePiece files (Llama 2,
//! Gemma) and DeepSeek V3 (added tokens inside its vocabulary) do not.

use super::codec::{Dec, Enc};
use super::{bytelevel, hf, Vocabulary};
use serde_json::Value;
use std::collections::HashMap;

/// What encoding a byte-level BPE text needs, read from the vocabulary
/// cache (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BpeTables {
    /// JSON object: `truncation`, `padding`, `added_tokens`, `normalizer`,
    /// `pre_tokenizer`, `post_processor`, `decoder` of the tokenizer.json.
    pub(crate) shell: String,
    /// `model.ignore_merges`: a word that is a token is that token.
    pub(crate) ignore_merges: bool,
    /// Entries of `model.vocab`.
    pub(crate) model_len: u32,
    /// `byte_ids[b]`: the token of the single byte `b`.
    pub(crate) byte_ids: Vec<u32>,
    /// Merge keys `left << 32 | right`, strictly ascending.
    pub(crate) pair_keys: Vec<u64>,
    /// Rank of each merge (its line in the file; a later duplicate wins).
    pub(crate) pair_ranks: Vec<u32>,
    /// The merged token of each merge.
    pub(crate) pair_new: Vec<u32>,
    /// The ids of `model.vocab`, ascending by their bytes.
    pub(crate) by_bytes: Vec<u32>,
}

impl BpeTables {
    /// The tables of a parsed tokenizer.json whose vocabulary is `v`, when
    /// the file is a shape the fast encoder reproduces exactly; `None` else.
    pub fn from_json(t: &Value, v: &Vocabulary) -> Option<BpeTables> {
        let model = t.get("model")?;
        let is = |k: &str, ok: &dyn Fn(&Value) -> bool| ok(model.get(k).unwrap_or(&Value::Null));
        let empty_str = |x: &Value| x.is_null() || x.as_str() == Some("");
        let model_ok = model.get("type").and_then(Value::as_str).unwrap_or("BPE") == "BPE"
            && is("dropout", &|x| x.is_null())
            && is("unk_token", &|x| x.is_null())
            && is("continuing_subword_prefix", &empty_str)
            && is("end_of_word_suffix", &empty_str)
            && is("byte_fallback", &|x| {
                x.is_null() || x.as_bool() == Some(false)
            });
        if !model_ok
            || hf::token_encoding(t).ok()? != hf::TokenEncoding::ByteLevel
            || hf::adds_prefix_space(t)
        {
            return None;
        }
        let ignore_merges = model
            .get("ignore_merges")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let vocab = model.get("vocab")?.as_object()?;
        let mut ids: HashMap<&str, u32> = HashMap::with_capacity(vocab.len());
        for (s, id) in vocab {
            ids.insert(s.as_str(), u32::try_from(id.as_u64()?).ok()?);
        }
        // Added tokens: outside the model vocabulary (by text and id), and
        // matched on the raw text (not normalized), as the crate's splitter
        // then does for every one of them alike.
        let added = match t.get("added_tokens") {
            None | Some(Value::Null) => &[][..],
            Some(a) => a.as_array()?.as_slice(),
        };
        let model_ids: std::collections::HashSet<u32> = ids.values().copied().collect();
        for a in added {
            let content = a.get("content")?.as_str()?;
            let id = u32::try_from(a.get("id")?.as_u64()?).ok()?;
            if ids.contains_key(content)
                || model_ids.contains(&id)
                || a.get("normalized").and_then(Value::as_bool) != Some(false)
            {
                return None;
            }
        }
        // Every model token has its bytes in `v` (no id is shared with an
        // added token, so none was left out).
        let mut by_bytes: Vec<u32> = ids.values().copied().collect();
        if by_bytes
            .iter()
            .any(|&id| v.token_bytes(super::TokenId(id)).is_none())
        {
            return None;
        }
        let bytes_of = |id: u32| v.token_bytes(super::TokenId(id)).unwrap_or_default();
        by_bytes.sort_unstable_by(|&a, &b| bytes_of(a).cmp(bytes_of(b)));
        // The 256 single bytes.
        let table = bytelevel::byte_to_char();
        let mut byte_ids = Vec::with_capacity(256);
        for c in table {
            byte_ids.push(*ids.get(c.encode_utf8(&mut [0; 4]) as &str)?);
        }
        // Merges, as the crate reads them: `[a, b]` pairs or `"a b"` lines
        // (lines starting `#version` skipped); a later duplicate overrides.
        let mut merges: HashMap<u64, (u32, u32)> = HashMap::new();
        let mut joined = String::new();
        let mut rank = 0u32;
        let merges_json = model.get("merges")?.as_array()?;
        // The crate reads either form, not a mix.
        if !(merges_json.iter().all(Value::is_array) || merges_json.iter().all(Value::is_string)) {
            return None;
        }
        for m in merges_json {
            let (a, b) = match m {
                Value::Array(p) if p.len() == 2 => (p[0].as_str()?, p[1].as_str()?),
                Value::String(s) if s.starts_with("#version") => continue,
                Value::String(s) => {
                    let mut parts = s.split(' ');
                    match (parts.next(), parts.next(), parts.next()) {
                        (Some(a), Some(b), None) => (a, b),
                        _ => return None,
                    }
                }
                _ => return None,
            };
            joined.clear();
            joined.push_str(a);
            joined.push_str(b);
            let (ia, ib, inew) = (*ids.get(a)?, *ids.get(b)?, *ids.get(joined.as_str())?);
            merges.insert((ia as u64) << 32 | ib as u64, (rank, inew));
            rank += 1;
        }
        let mut merges: Vec<(u64, (u32, u32))> = merges.into_iter().collect();
        merges.sort_unstable_by_key(|m| m.0);
        let mut shell = serde_json::Map::new();
        for k in [
            "truncation",
            "padding",
            "added_tokens",
            "normalizer",
            "pre_tokenizer",
            "post_processor",
            "decoder",
        ] {
            let x = t.get(k).cloned().unwrap_or(Value::Null);
            let x = if k == "added_tokens" && x.is_null() {
                Value::Array(Vec::new())
            } else {
                x
            };
            shell.insert(k.to_string(), x);
        }
        Some(BpeTables {
            shell: serde_json::to_string(&shell).ok()?,
            ignore_merges,
            model_len: u32::try_from(ids.len()).ok()?,
            byte_ids,
            pair_keys: merges.iter().map(|m| m.0).collect(),
            pair_ranks: merges.iter().map(|m| m.1 .0).collect(),
            pair_new: merges.iter().map(|m| m.1 .1).collect(),
            by_bytes,
        })
    }

    /// The rank and merged id of the pair `(a, b)`.
    #[cfg_attr(not(feature = "tokenizers"), allow(dead_code))]
    #[inline]
    pub(crate) fn merge(&self, a: u32, b: u32) -> Option<(u32, u32)> {
        let i = self
            .pair_keys
            .binary_search(&((a as u64) << 32 | b as u64))
            .ok()?;
        Some((self.pair_ranks[i], self.pair_new[i]))
    }

    /// The model token whose bytes are `bytes`.
    #[cfg_attr(not(feature = "tokenizers"), allow(dead_code))]
    pub(crate) fn token_of(&self, v: &Vocabulary, bytes: &[u8]) -> Option<u32> {
        let i = self
            .by_bytes
            .binary_search_by(|&id| {
                v.token_bytes(super::TokenId(id))
                    .unwrap_or_default()
                    .cmp(bytes)
            })
            .ok()?;
        Some(self.by_bytes[i])
    }

    pub(crate) fn encode_cache(&self, e: &mut Enc) {
        e.bytes(self.shell.as_bytes());
        e.u8(self.ignore_merges as u8);
        e.u32(self.model_len);
        e.u32s(self.byte_ids.iter().copied());
        e.u32s(
            self.pair_keys
                .iter()
                .flat_map(|&k| [k as u32, (k >> 32) as u32]),
        );
        e.u32s(self.pair_ranks.iter().copied());
        e.u32s(self.pair_new.iter().copied());
        e.u32s(self.by_bytes.iter().copied());
    }

    /// Reads what [`BpeTables::encode_cache`] wrote, checking every id
    /// against `v` and the order of the keys.
    pub(crate) fn decode_cache(d: &mut Dec<'_>, v: &Vocabulary) -> Result<Self, String> {
        let shell = std::str::from_utf8(d.bytes()?)
            .map_err(|_| "tokenizer shell is not UTF-8".to_string())?
            .to_string();
        let ignore_merges = d.u8()? != 0;
        let model_len = d.u32()?;
        let byte_ids = d.u32s()?;
        let flat = d.u32s()?;
        let pair_keys: Vec<u64> = flat
            .chunks_exact(2)
            .map(|c| (c[1] as u64) << 32 | c[0] as u64)
            .collect();
        let pair_ranks = d.u32s()?;
        let pair_new = d.u32s()?;
        let by_bytes = d.u32s()?;
        let text = |id: u32| v.token_bytes(super::TokenId(id)).is_some();
        let ok = byte_ids.len() == 256
            && byte_ids
                .iter()
                .enumerate()
                .all(|(b, &id)| v.token_bytes(super::TokenId(id)) == Some(&[b as u8][..]))
            && flat.len() % 2 == 0
            && pair_keys.windows(2).all(|w| w[0] < w[1])
            && pair_keys
                .iter()
                .all(|&k| text(k as u32) && text((k >> 32) as u32))
            && pair_ranks.len() == pair_keys.len()
            && pair_new.len() == pair_keys.len()
            && pair_new.iter().all(|&id| text(id))
            && by_bytes.len() == model_len as usize
            && by_bytes.iter().all(|&id| text(id));
        if !ok {
            return Err("inconsistent tokenizer tables".into());
        }
        Ok(BpeTables {
            shell,
            ignore_merges,
            model_len,
            byte_ids,
            pair_keys,
            pair_ranks,
            pair_new,
            by_bytes,
        })
    }
}
