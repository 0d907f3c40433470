//! The tokenizer stored in a GGUF file (`tokenizer.ggml.*`), rebuilt as a
//! Hugging Face `tokenizers::Tokenizer` and a [`Vocabulary`].
//!
//! llama.cpp writes byte-level BPE vocabularies as: `tokens` (GPT-2 byte-level
//! strings, one per id, padded to the logits width with `[PAD…]` entries),
//! `token_type` (1 normal, 3 control, 4 user-defined, 5 unused...), `merges`
//! (`"a b"` strings, in rank order), `eos_token_id`, and `pre` naming the
//! pre-tokenizer regex. Normal tokens are the BPE vocabulary; control tokens
//! become special added tokens and user-defined ones (`<tool_call>`) non-special
//! added tokens, as in Qwen's `tokenizer.json`; unused padding ids are holes.
//! The result tokenizes text the same way Qwen's `tokenizer.json` does (checked
//! by `tests/model_gguf.rs` on the real file), except for added tokens the GGUF
//! does not list.

use crate::gguf::{as_u64, GgufFile};
use crate::ModelError;
use constrain::vocab::{TextTokenizer, TokenId, Vocabulary};
use tokenizers::decoders::DecoderWrapper;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::normalizers::{unicode::NFC, NormalizerWrapper};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::processors::PostProcessorWrapper;
use tokenizers::{AddedToken, SplitDelimiterBehavior, Tokenizer};

/// Qwen2 / Qwen2.5 / Qwen3 pre-tokenizer split regex (`tokenizer.ggml.pre = "qwen2"`).
pub const QWEN2_PRETOKENIZER: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

const TYPE_NORMAL: u64 = 1;
const TYPE_CONTROL: u64 = 3;
const TYPE_USER_DEFINED: u64 = 4;

/// A tokenizer and vocabulary read from GGUF metadata.
pub struct GgufTokenizer {
    /// Text → token ids.
    pub tokenizer: TextTokenizer,
    /// Token ids → bytes, EOS set (logits width = number of ids; widen it with
    /// [`crate::check_compatible`]).
    pub vocab: Vocabulary,
    /// `tokenizer.ggml.eos_token_id`, when present.
    pub eos_token_id: Option<TokenId>,
}

/// Rebuilds the tokenizer stored in an opened GGUF file.
pub fn gguf_tokenizer(file: &GgufFile) -> Result<GgufTokenizer, ModelError> {
    let model = file.string("tokenizer.ggml.model")?;
    if model != "gpt2" {
        return Err(ModelError::Tokenizer(format!(
            "tokenizer.ggml.model is {model:?}; only byte-level BPE (\"gpt2\") is supported"
        )));
    }
    let pre = match file.string("tokenizer.ggml.pre") {
        Ok(p) => p.to_string(),
        Err(_) => "qwen2".to_string(),
    };
    let pattern = match pre.as_str() {
        "qwen2" => QWEN2_PRETOKENIZER,
        other => {
            return Err(ModelError::Tokenizer(format!(
                "tokenizer.ggml.pre is {other:?}; only the \"qwen2\" pre-tokenizer is supported"
            )))
        }
    };
    let tokens = file.strings("tokenizer.ggml.tokens")?;
    let types: Vec<u64> = match file.metadata().get("tokenizer.ggml.token_type") {
        Some(_) => {
            let arr = file.array("tokenizer.ggml.token_type")?;
            if arr.len() != tokens.len() {
                return Err(file.meta_err(
                    "tokenizer.ggml.token_type",
                    format!("{} types for {} tokens", arr.len(), tokens.len()),
                ));
            }
            arr.iter()
                .map(|v| {
                    as_u64(v).ok_or_else(|| {
                        file.meta_err("tokenizer.ggml.token_type", "non-integer element")
                    })
                })
                .collect::<Result<_, _>>()?
        }
        None => tokens
            .iter()
            .map(|t| {
                if t.starts_with("<|") && t.ends_with("|>") {
                    TYPE_CONTROL
                } else {
                    TYPE_NORMAL
                }
            })
            .collect(),
    };
    let merges_raw = file.strings("tokenizer.ggml.merges")?;
    let mut merges = Vec::with_capacity(merges_raw.len());
    for (i, m) in merges_raw.iter().enumerate() {
        match m.split_once(' ') {
            Some((a, b)) if !a.is_empty() && !b.is_empty() => {
                merges.push((a.to_string(), b.to_string()))
            }
            _ => {
                return Err(file.meta_err(
                    "tokenizer.ggml.merges",
                    format!("merge {i} ({m:?}) is not two tokens separated by a space"),
                ))
            }
        }
    }

    let mut regular: Vec<(u32, String)> = Vec::with_capacity(tokens.len());
    let mut added: Vec<(u32, String, bool)> = Vec::new();
    let mut bpe_vocab: Vec<(String, u32)> = Vec::with_capacity(tokens.len());
    for (i, (&tok, &ty)) in tokens.iter().zip(&types).enumerate() {
        let id = i as u32;
        match ty {
            TYPE_NORMAL => regular.push((id, tok.to_string())),
            TYPE_CONTROL => added.push((id, tok.to_string(), true)),
            TYPE_USER_DEFINED => added.push((id, tok.to_string(), false)),
            _ => continue, // unused padding, unknown, byte tokens: holes
        }
        bpe_vocab.push((tok.to_string(), id));
    }

    let eos_token_id = file
        .opt_integer("tokenizer.ggml.eos_token_id")?
        .map(|e| TokenId(e as u32));
    let mut vocab = Vocabulary::from_byte_level(regular, added.clone(), None).or_else(|e| {
        // No conventionally named EOS: fall back to the id the GGUF names.
        match (e, eos_token_id) {
            (constrain::vocab::VocabError::NoEos(_), Some(eos)) => {
                let regular = tokens
                    .iter()
                    .zip(&types)
                    .enumerate()
                    .filter(|(_, (_, &ty))| ty == TYPE_NORMAL)
                    .map(|(i, (t, _))| (i as u32, t.to_string()))
                    .collect();
                Vocabulary::from_byte_level(regular, added.clone(), Some(vec![eos]))
            }
            (e, _) => Err(e),
        }
    })?;
    if let Some(eos) = eos_token_id {
        if !vocab.is_eos(eos) {
            if !added.iter().any(|a| a.0 == eos.0) {
                return Err(ModelError::Tokenizer(format!(
                    "tokenizer.ggml.eos_token_id {eos} is not a control token of the vocabulary"
                )));
            }
            let mut e = vocab.eos().to_vec();
            e.push(eos);
            e.sort();
            vocab = vocab.with_eos(e)?;
        }
    }

    let bpe = BPE::builder()
        .vocab_and_merges(bpe_vocab.into_iter().collect::<Vocab>(), merges)
        .build()
        .map_err(|e| ModelError::Tokenizer(format!("bpe model: {e}")))?;
    let mut tk = Tokenizer::new(bpe);
    tk.with_normalizer(Some(NormalizerWrapper::NFC(NFC)))
        .map_err(|e| ModelError::Tokenizer(format!("normalizer: {e}")))?;
    let split = Split::new(
        SplitPattern::Regex(pattern.to_string()),
        SplitDelimiterBehavior::Isolated,
        false,
    )
    .map_err(|e| ModelError::Tokenizer(format!("pre-tokenizer regex: {e}")))?;
    tk.with_pre_tokenizer(Some(PreTokenizerWrapper::Sequence(Sequence::new(vec![
        PreTokenizerWrapper::Split(split),
        PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, false, false)),
    ]))));
    tk.with_post_processor(Some(PostProcessorWrapper::ByteLevel(ByteLevel::new(
        false, false, false,
    ))));
    tk.with_decoder(Some(DecoderWrapper::ByteLevel(ByteLevel::new(
        false, false, false,
    ))));
    let special: Vec<AddedToken> = added
        .iter()
        .filter(|a| a.2)
        .map(|a| AddedToken::from(a.1.clone(), true).normalized(false))
        .collect();
    let plain: Vec<AddedToken> = added
        .iter()
        .filter(|a| !a.2)
        .map(|a| AddedToken::from(a.1.clone(), false).normalized(false))
        .collect();
    tk.add_special_tokens(special)
        .map_err(|e| ModelError::Tokenizer(format!("added tokens: {e}")))?;
    tk.add_tokens(plain)
        .map_err(|e| ModelError::Tokenizer(format!("added tokens: {e}")))?;
    for a in &added {
        if tk.token_to_id(&a.1) != Some(a.0) {
            return Err(ModelError::Tokenizer(format!(
                "added token {:?} did not keep its id {}",
                a.1, a.0
            )));
        }
    }
    Ok(GgufTokenizer {
        tokenizer: TextTokenizer::from_tokenizer(tk),
        vocab,
        eos_token_id,
    })
}
