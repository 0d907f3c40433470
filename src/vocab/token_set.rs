//! # Token sets: a bitset of token ids over the logits width
//!
//! [`TokenSet`] is what every mask is: bit `i % 64` of word `i / 64` is
//! token id `i`, over exactly the logits width (ids past the tokenizer's
//! vocabulary included, never set). It writes itself into XGrammar's 32-bit
//! bitmask layout for the matcher's `fill_bitmask`, and hashes fast (masks
//! are deduplicated by hash). [`mix`] is a token id's share of an
//! order-independent set fingerprint, which the mask builders update as they
//! add ids.

use super::TokenId;

/// A set of token ids as a bitset over the logits width.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct TokenSet {
    words: Box<[u64]>,
    width: usize,
}

impl TokenSet {
    /// An empty set over `width` ids.
    pub fn new(width: usize) -> Self {
        TokenSet {
            words: vec![0u64; width.div_ceil(64)].into_boxed_slice(),
            width,
        }
    }
    /// Number of ids the set ranges over (the logits width).
    pub fn width(&self) -> usize {
        self.width
    }
    /// Whether `t` is in the set.
    #[inline]
    pub fn contains(&self, t: TokenId) -> bool {
        let i = t.as_usize();
        i < self.width && (self.words[i >> 6] >> (i & 63)) & 1 == 1
    }
    /// Adds `t` (ignored past the width).
    #[inline]
    pub fn insert(&mut self, t: TokenId) {
        let i = t.as_usize();
        if i < self.width {
            self.words[i >> 6] |= 1 << (i & 63);
        }
    }
    /// Adds `t`; whether it was not there before (false past the width).
    #[inline]
    pub fn insert_new(&mut self, t: TokenId) -> bool {
        let i = t.as_usize();
        if i >= self.width {
            return false;
        }
        let w = &mut self.words[i >> 6];
        let bit = 1u64 << (i & 63);
        let new = *w & bit == 0;
        *w |= bit;
        new
    }
    /// Removes `t`.
    #[inline]
    pub fn remove(&mut self, t: TokenId) {
        let i = t.as_usize();
        if i < self.width {
            self.words[i >> 6] &= !(1 << (i & 63));
        }
    }
    /// The bitset words (bit `i % 64` of word `i / 64` is id `i`).
    pub fn words(&self) -> &[u64] {
        &self.words
    }
    /// Number of ids in the set.
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }
    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }
    /// The ids in increasing order.
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
    /// Adds every id of `other`.
    pub fn union_with(&mut self, other: &TokenSet) {
        for (a, b) in self.words.iter_mut().zip(other.words.iter()) {
            *a |= *b;
        }
    }
    /// Heap memory in bytes.
    pub fn memory_usage(&self) -> usize {
        self.words.len() * 8
    }
    /// Writes the set into `row` in XGrammar's layout (id `t` is bit
    /// `t % 32` of `row[t / 32]`); `row` has `ceil(width / 32)` words.
    pub(crate) fn write_u32_words(&self, row: &mut [u32]) {
        // Whole pairs first (a straight copy the compiler vectorizes), then
        // an odd last word.
        let half = row.len() / 2;
        let mut pairs = row.chunks_exact_mut(2);
        for (pair, &w) in (&mut pairs).zip(self.words.iter()) {
            pair[0] = w as u32;
            pair[1] = (w >> 32) as u32;
        }
        if let [last] = pairs.into_remainder() {
            *last = self.words.get(half).map_or(0, |&w| w as u32);
        }
    }
}

/// A fast multiply-add hash of the words: masks are ~19 KB, and SipHash over
/// them was a sixth of a small schema's index build.
impl std::hash::Hash for TokenSet {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // Independent lanes (no serial multiply chain), folded at the end.
        let mut lanes = [0u64; 4];
        for (i, chunk) in self.words.chunks(4).enumerate() {
            for (l, &w) in chunk.iter().enumerate() {
                lanes[l] = lanes[l].wrapping_add(
                    (w ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
                        .wrapping_mul(0x51_7c_c1_b7_27_22_0a_95),
                );
            }
        }
        let mut h = self.width as u64;
        for l in lanes {
            h = (h.rotate_left(23) ^ l).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
        state.write_u64(h);
    }
}

/// A token id's share of a set fingerprint (the sum over the set's ids:
/// order-independent, and updatable as ids are added).
#[inline]
pub(crate) fn mix(t: u32) -> u64 {
    (t as u64 ^ 0x9E37_79B9_7F4A_7C15).wrapping_mul(0xD6E8_FEB8_6659_FD93)
}
