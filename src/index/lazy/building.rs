//! A mask being built ([`Building`]): a bitset with its fingerprint, and
//! the ids added when it started empty.

use super::{Core, Mask};
use crate::vocab::trie::{self, VocabTries};
use crate::vocab::{mix, TokenId, TokenSet};

/// A mask being built, with its fingerprint.
pub(super) struct Building {
    pub set: TokenSet,
    pub fp: u64,
    /// The ids added, when the set started empty (the automaton's scratch
    /// set): a small result is kept as a list.
    pub ids: Option<Vec<u32>>,
    /// The plain level whose set the mask holds besides `set` (which then
    /// holds none of its tokens; `fp` counts them).
    pub level: Option<u8>,
}

impl Building {
    /// A copy of `mask` to build on (a list's with its level, by the
    /// automaton's scratch set; a bitset's whole).
    pub fn copy_of(mask: &Mask, core: &mut Core, tries: &VocabTries, width: usize) -> Building {
        match mask {
            Mask::Dense(set, fp) => Building {
                set: (**set).clone(),
                fp: *fp,
                ids: None,
                level: None,
            },
            Mask::Sparse { level, ids, .. } => {
                let mut m = Building::scratch(core, width);
                if let Some(l) = level {
                    m.level = Some(*l);
                    m.fp = tries.plain_level(*l as usize).fingerprint;
                }
                for &id in ids.iter() {
                    m.insert(id);
                }
                m
            }
        }
    }

    pub fn from(level: &trie::PlainLevel) -> Building {
        Building {
            set: level.set.clone(),
            fp: level.fingerprint,
            ids: None,
            level: None,
        }
    }

    /// An empty mask in the automaton's scratch set (a bitset of `width`),
    /// keeping its ids.
    pub fn scratch(core: &mut Core, width: usize) -> Building {
        let set = match core.scratch.take() {
            Some(set) if set.width() == width => set,
            _ => TokenSet::new(width),
        };
        Building {
            set,
            fp: 0,
            ids: Some(Vec::new()),
            level: None,
        }
    }

    /// Returns a scratch set holding `ids` to the automaton, empty again.
    pub fn give_back(mut set: TokenSet, ids: &[u32], core: &mut Core) {
        for &t in ids {
            set.remove(TokenId(t));
        }
        core.scratch = Some(set);
    }

    pub fn remove(&mut self, t: u32) {
        if self.set.contains(TokenId(t)) {
            self.set.remove(TokenId(t));
            self.fp = self.fp.wrapping_sub(mix(t));
            if let Some(ids) = &mut self.ids {
                if let Some(p) = ids.iter().position(|&x| x == t) {
                    ids.swap_remove(p);
                }
            }
        }
    }

    #[inline]
    pub fn insert(&mut self, t: u32) {
        if self.set.insert_new(TokenId(t)) {
            self.fp = self.fp.wrapping_add(mix(t));
            if let Some(ids) = &mut self.ids {
                ids.push(t);
            }
        }
    }

    /// Adds a precomputed set with its fingerprint; it must share no token
    /// with the set being built (fingerprints add). Never on a set built
    /// from scratch (its id list would miss them).
    pub fn add_set(&mut self, (set, fp): &(TokenSet, u64)) {
        debug_assert!(self.ids.is_none() && self.level.is_none());
        self.set.union_with(set);
        self.fp = self.fp.wrapping_add(*fp);
    }

    /// Adds each of `trie`'s duplicate tokens whose twin is in the set
    /// (both are tokens of `trie`: never of a plain level's set).
    pub fn add_dups(&mut self, trie: &trie::TokenTrie) {
        for &(first, dup) in &trie.dups {
            if self.set.contains(TokenId(first)) {
                self.insert(dup);
            }
        }
    }
}
