//! A state's mask built on its free part's: see [`Lazy::free_part_mask`].

use super::{Building, Core, Lazy, DEAD, LEVEL_LOOP, LEVEL_UNLIMITED};
use crate::vocab::trie::{self, VocabTries, PLAIN_LEVELS};
use crate::vocab::Vocabulary;
use std::sync::atomic::Ordering;

impl Lazy {
    /// The mask of `s` (EOS aside) from that of its free part `t`
    /// ([`LazyDfa::free_part`](crate::dfa::LazyDfa::free_part)), when that
    /// is known: every token `t` allows, `s` allows, so the mask is `t`'s
    /// plus the tokens that only the other threads of `s` keep alive. Those
    /// are found by walking the token trie from `s` and `t` side by side:
    /// below a node where both are in the same state the tokens fare alike,
    /// and there the walk turns back. At a key's start in an object with
    /// extra keys, `t` is the extra-key trie's threads, the same at every
    /// position, so the walk follows only the declared names still allowed
    /// there; without it each position searched the plain reach of every
    /// name and walked the whole trie again.
    ///
    /// The first state that holds `t` and many other threads (a key's
    /// start, one per declared name left) is computed the usual way, whose
    /// plain-reach search also serves the states inside its keys; `warm`
    /// then gets `t`, whose mask the caller computes after, in the same
    /// step: the slow first visit of an object's keys pays for it, not the
    /// second. `None` (nothing built) when `s` has no such part, or when the
    /// side-by-side walk passes [`FREE_PART_WALK`] nodes.
    pub(super) fn free_part_mask(
        &self,
        core: &mut Core,
        s: u32,
        tries: &VocabTries,
        vocab: &Vocabulary,
        warm: &mut Option<u32>,
    ) -> Option<Building> {
        let t = core.dfa.free_part(s)?;
        // A part whose sibling has a mask gets its own cheaply, now.
        if self.cell(t)?.get().is_none() && self.mask_sibling(core, t, false).is_some() {
            self.warm(core, Some(t), tries, vocab);
        }
        let Some(base) = self.cell(t)?.get().cloned() else {
            let others = core.dfa.nfa_key(s).len() - core.dfa.nfa_key(t).len();
            if others >= FREE_PART_OTHERS {
                *warm = Some(t);
            }
            return None;
        };
        let lt = core.plain_level(t);
        if lt != LEVEL_LOOP && lt != LEVEL_UNLIMITED {
            return None;
        }
        // A string body's loop has its own cheap walk, and its mask is what
        // `t`'s walk may settle subtrees by (`walk_to_loops`): never
        // computed from `t`.
        if core.plain_level(s) != LEVEL_UNLIMITED {
            return None;
        }
        let mut m = Building::copy_of(&base, core, tries, vocab.logits_width());
        // EOS is no token of the trie: `t`'s mask holds it when `t` accepts
        // (then so does `s`), and `compute` adds it for `s`.
        // `t` never loses plain text, so it allows every plain token, and so
        // does `s`: only the other tokens can differ.
        let rest = &tries.plain_level(PLAIN_LEVELS.len() - 1).rest;
        if walk_beside(core, rest, s, t, &mut m) {
            m.add_dups(rest);
            self.from_free_parts.fetch_add(1, Ordering::Relaxed);
            return Some(m);
        }
        if let Some(ids) = m.ids.take() {
            Building::give_back(m.set, &ids, core);
        }
        None
    }

    /// Computes the mask of free part `t` ([`Lazy::free_part_mask`]) for
    /// the states that will hold it, unless known.
    pub(super) fn warm(
        &self,
        core: &mut Core,
        t: Option<u32>,
        tries: &VocabTries,
        vocab: &Vocabulary,
    ) {
        let Some(t) = t else { return };
        if let Some(cell) = self.cell(t) {
            cell.get_or_init(|| self.compute(core, t, tries, vocab));
        }
    }
}

/// Fewest threads besides its free part a state must hold for
/// [`Lazy::free_part_mask`] to compute the free part's mask for it.
const FREE_PART_OTHERS: usize = 8;

/// Most trie nodes [`Lazy::free_part_mask`]'s side-by-side walk visits
/// before it gives up (the declared names of a big object take a few
/// hundred).
const FREE_PART_WALK: usize = 8192;

/// Adds to `m` the tokens of `trie` that `s` allows and `t` does not,
/// where `t`'s threads are some of those of `s`: walks both side by side,
/// leaving a subtree where they meet (its tokens fare alike) or `s` dies.
/// `false` when it passes [`FREE_PART_WALK`] nodes.
fn walk_beside(core: &mut Core, trie: &trie::TokenTrie, s: u32, t: u32, m: &mut Building) -> bool {
    let mut from_s = vec![0u32; trie.max_depth + 1];
    let mut from_t = vec![0u32; trie.max_depth + 1];
    from_s[0] = s;
    from_t[0] = t;
    let n = trie.len();
    let (mut i, mut visited) = (0usize, 0usize);
    while i < n {
        let d = trie.depth[i] as usize;
        let a = core.next(from_s[d - 1], trie.byte[i]);
        let b = match from_t[d - 1] {
            DEAD => DEAD,
            p => core.next(p, trie.byte[i]),
        };
        if a == DEAD || a == b {
            i = trie.end[i] as usize;
            continue;
        }
        visited += 1;
        if visited > FREE_PART_WALK {
            return false;
        }
        from_s[d] = a;
        from_t[d] = b;
        let tok = trie.token[i];
        // Where `t` is still live the token is in its mask already.
        if tok != trie::NONE && b == DEAD {
            m.insert(tok);
        }
        i += 1;
    }
    true
}
