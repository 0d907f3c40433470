//! The `tokenizers` model over cached [`BpeTables`]: byte-level BPE that
//! merges exactly as the crate's `BPE` model, without its hash maps.
//!
//! [`CachedBpe`] is plugged into a `tokenizers::TokenizerImpl` whose other
//! parts (added-token splitting, normalizer, pre-tokenizer, post-processor)
//! are the crate's own, read from the tables' shell ([`fast_tokenizer`]).
//! It sees one pre-token at a time, written in the GPT-2 byte chars, and
//! does what `BPE::merge_word` + `Word::merge_all` do for a model with no
//! unknown token, prefix, suffix, dropout or byte fallback:
//!
//! 1. with `ignore_merges`, a pre-token that is a token is that token;
//! 2. every char that is a token is a symbol (a char that is not is
//!    dropped, as the crate drops it when there is no unknown token);
//! 3. the adjacent pair of lowest merge rank is merged, the leftmost first
//!    among equal ranks, until no pair has a merge.

use super::bpe::BpeTables;
use super::{bytelevel, TokenId, Vocabulary};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;
use tokenizers::{
    AddedToken, DecoderWrapper, Model, NormalizerWrapper, PaddingParams, PostProcessorWrapper,
    PreTokenizerWrapper, Token, TokenizerBuilder, TokenizerImpl, TruncationParams,
};

/// The tokenizer [`fast_tokenizer`] builds.
pub(crate) type FastTokenizer = TokenizerImpl<
    CachedBpe,
    NormalizerWrapper,
    PreTokenizerWrapper,
    PostProcessorWrapper,
    DecoderWrapper,
>;

/// Byte-level BPE over [`BpeTables`] and the token bytes of a [`Vocabulary`].
pub(crate) struct CachedBpe {
    vocab: Arc<Vocabulary>,
    tables: Arc<BpeTables>,
    /// GPT-2 byte char → byte (chars up to U+0143; `None` past the table).
    char_byte: Vec<Option<u8>>,
    byte_char: [char; 256],
}

impl CachedBpe {
    fn new(vocab: Arc<Vocabulary>, tables: Arc<BpeTables>) -> Self {
        let byte_char = bytelevel::byte_to_char();
        let mut char_byte = vec![None; 0x144];
        for (b, &c) in byte_char.iter().enumerate() {
            char_byte[c as usize] = Some(b as u8);
        }
        CachedBpe {
            vocab,
            tables,
            char_byte,
            byte_char,
        }
    }

    fn byte_of(&self, c: char) -> Option<u8> {
        self.char_byte.get(c as usize).copied().flatten()
    }

    /// The model token written `s` (byte chars), as `model.vocab` maps it.
    fn lookup(&self, s: &str) -> Option<u32> {
        let bytes: Option<Vec<u8>> = s.chars().map(|c| self.byte_of(c)).collect();
        self.tables.token_of(&self.vocab, &bytes?)
    }

    /// The text of a model token (byte chars).
    fn text(&self, id: u32) -> Option<String> {
        let b = self.vocab.token_bytes(TokenId(id))?;
        // Only model tokens: `by_bytes` holds exactly those.
        self.tables.token_of(&self.vocab, b).filter(|&x| x == id)?;
        Some(b.iter().map(|&x| self.byte_char[x as usize]).collect())
    }

    /// The ids of one pre-token, with their byte offsets in it.
    fn merge_word(&self, w: &str) -> Vec<(u32, usize, usize)> {
        // Symbols: (id, start, len, prev, next); len 0 marks a merged-away one.
        struct Sym {
            id: u32,
            start: usize,
            len: usize,
            prev: isize,
            next: isize,
        }
        let mut syms: Vec<Sym> = Vec::with_capacity(w.len());
        let mut end = 0usize;
        for c in w.chars() {
            let Some(b) = self.byte_of(c) else { continue };
            let n = syms.len() as isize;
            if let Some(last) = syms.last_mut() {
                last.next = n;
            }
            syms.push(Sym {
                id: self.tables.byte_ids[b as usize],
                start: end,
                len: c.len_utf8(),
                prev: n - 1,
                next: -1,
            });
            end += c.len_utf8();
        }
        // Min-heap of (rank, position, merged id).
        let mut queue: BinaryHeap<Reverse<(u32, usize, u32)>> = syms
            .windows(2)
            .enumerate()
            .filter_map(|(i, p)| {
                let (rank, new) = self.tables.merge(p[0].id, p[1].id)?;
                Some(Reverse((rank, i, new)))
            })
            .collect();
        while let Some(Reverse((_, pos, new))) = queue.pop() {
            if syms[pos].len == 0 || syms[pos].next == -1 {
                continue;
            }
            let next = syms[pos].next as usize;
            // A stale entry: the pair at `pos` changed since it was queued.
            if self
                .tables
                .merge(syms[pos].id, syms[next].id)
                .is_none_or(|m| m.1 != new)
            {
                continue;
            }
            let (rlen, rnext) = (syms[next].len, syms[next].next);
            syms[pos].id = new;
            syms[pos].len += rlen;
            syms[pos].next = rnext;
            syms[next].len = 0;
            if rnext >= 0 {
                syms[rnext as usize].prev = pos as isize;
            }
            if syms[pos].prev >= 0 {
                let prev = syms[pos].prev as usize;
                if let Some((rank, id)) = self.tables.merge(syms[prev].id, syms[pos].id) {
                    queue.push(Reverse((rank, prev, id)));
                }
            }
            if rnext >= 0 {
                if let Some((rank, id)) = self.tables.merge(syms[pos].id, syms[rnext as usize].id) {
                    queue.push(Reverse((rank, pos, id)));
                }
            }
        }
        syms.iter()
            .filter(|s| s.len > 0)
            .map(|s| (s.id, s.start, s.start + s.len))
            .collect()
    }
}

impl Model for CachedBpe {
    type Trainer = tokenizers::models::bpe::BpeTrainer;

    fn tokenize(&self, sequence: &str) -> tokenizers::Result<Vec<Token>> {
        if self.tables.ignore_merges {
            if let Some(id) = self.lookup(sequence) {
                return Ok(vec![Token::new(
                    id,
                    sequence.to_string(),
                    (0, sequence.len()),
                )]);
            }
        }
        Ok(self
            .merge_word(sequence)
            .into_iter()
            .map(|(id, s, e)| Token::new(id, sequence[s..e].to_string(), (s, e)))
            .collect())
    }

    fn token_to_id(&self, token: &str) -> Option<u32> {
        self.lookup(token)
    }

    fn id_to_token(&self, id: u32) -> Option<String> {
        self.text(id)
    }

    fn get_vocab(&self) -> HashMap<String, u32> {
        self.tables
            .by_bytes
            .iter()
            .filter_map(|&id| Some((self.text(id)?, id)))
            .collect()
    }

    fn get_vocab_size(&self) -> usize {
        self.tables.model_len as usize
    }

    fn save(
        &self,
        _folder: &std::path::Path,
        _prefix: Option<&str>,
    ) -> tokenizers::Result<Vec<std::path::PathBuf>> {
        Err("a tokenizer read from the vocabulary cache cannot be saved".into())
    }

    fn get_trainer(&self) -> Self::Trainer {
        Default::default()
    }
}

/// The parts of tokenizer.json around the model, as [`BpeTables`] keeps them.
#[derive(serde::Deserialize)]
struct Shell {
    truncation: Option<TruncationParams>,
    padding: Option<PaddingParams>,
    added_tokens: Vec<AddedWithId>,
    normalizer: Option<NormalizerWrapper>,
    pre_tokenizer: Option<PreTokenizerWrapper>,
    post_processor: Option<PostProcessorWrapper>,
    decoder: Option<DecoderWrapper>,
}

#[derive(serde::Deserialize)]
struct AddedWithId {
    id: u32,
    #[serde(flatten)]
    token: AddedToken,
}

/// The tokenizer of `tables` over `vocab`, built as the crate builds one
/// from tokenizer.json; `Err` with the reason when the shell does not read
/// back or an added token would get another id than the file gives it.
pub(crate) fn fast_tokenizer(
    vocab: Arc<Vocabulary>,
    tables: Arc<BpeTables>,
) -> Result<FastTokenizer, String> {
    let shell: Shell = serde_json::from_str(&tables.shell).map_err(|e| e.to_string())?;
    let mut tk = TokenizerBuilder::new()
        .with_model(CachedBpe::new(vocab, tables))
        .with_normalizer(shell.normalizer)
        .with_pre_tokenizer(shell.pre_tokenizer)
        .with_post_processor(shell.post_processor)
        .with_decoder(shell.decoder)
        .with_truncation(shell.truncation)
        .with_padding(shell.padding)
        .build()
        .map_err(|e| e.to_string())?;
    let ids: Vec<(u32, String)> = shell
        .added_tokens
        .iter()
        .map(|a| (a.id, a.token.content.clone()))
        .collect();
    tk.add_tokens(shell.added_tokens.into_iter().map(|a| a.token))
        .map_err(|e| e.to_string())?;
    for (id, content) in ids {
        if tk.token_to_id(&content) != Some(id) {
            return Err(format!("added token {content:?} would not get id {id}"));
        }
    }
    Ok(tk)
}
