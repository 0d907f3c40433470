//! # Token index (API skeleton; implementation in progress)

use crate::vocab::{TokenId, Vocabulary};
use std::sync::Arc;

/// A set of token ids as a bitset over the logits width.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct TokenSet {
    words: Box<[u64]>,
    width: usize,
}

impl TokenSet {
    pub fn new(width: usize) -> Self {
        TokenSet {
            words: vec![0u64; width.div_ceil(64)].into_boxed_slice(),
            width,
        }
    }
    pub fn width(&self) -> usize {
        self.width
    }
    #[inline]
    pub fn contains(&self, t: TokenId) -> bool {
        let i = t.as_usize();
        i < self.width && self.words[i >> 6] >> (i & 63) & 1 == 1
    }
    #[inline]
    pub fn insert(&mut self, t: TokenId) {
        let i = t.as_usize();
        self.words[i >> 6] |= 1 << (i & 63);
    }
    #[inline]
    pub fn remove(&mut self, t: TokenId) {
        let i = t.as_usize();
        self.words[i >> 6] &= !(1 << (i & 63));
    }
    pub fn words(&self) -> &[u64] {
        &self.words
    }
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }
    pub fn iter(&self) -> impl Iterator<Item = TokenId> + '_ {
        self.words.iter().enumerate().flat_map(|(wi, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let b = w.trailing_zeros();
                w &= w - 1;
                Some(TokenId((wi * 64) as u32 + b))
            })
        })
    }
}

pub trait ByteAutomaton {}

#[derive(Clone, Debug, Default)]
pub struct IndexConfig {}

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("todo")]
    Todo,
}

pub struct TokenIndex {
    vocab: Arc<Vocabulary>,
}

impl TokenIndex {
    pub fn vocab(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }
}
