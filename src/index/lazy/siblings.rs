//! # Siblings: states that differ only in the keys written so far
//!
//! With properties in any order a DFA state carries member-set registers,
//! the keys of each open object written so far ([`crate::dfa::regs`]). The
//! same position of an object is then a new state for each set of keys
//! before it, and each would pay a first visit: a walk of the token trie
//! that determinizes every state it passes, all of them new as well.
//!
//! Two states whose threads sit at the same NFA states (the same
//! *skeleton*, [`LazyDfa::skeleton`](crate::dfa::LazyDfa::skeleton)) are
//! siblings. A byte moves a thread's NFA state and leaves its registers
//! alone, and a live thread stays live exactly when its NFA state can still
//! reach the match, so along any text that meets no register operation the
//! two walks pass sibling states and every token fares alike. Per NFA state
//! the fewest bytes (and plain characters) to an operation are known
//! (`dfa/op_reach.rs`), which bounds where the walks may part:
//!
//! * **Levels** ([`Core::sibling_level`]): a state whose sibling has a plain
//!   level takes the lesser of that level and the level its own distance to
//!   an operation allows, without a plain-reach search.
//! * **Masks** ([`Lazy::sibling_mask`]): a state whose sibling has a mask
//!   starts from a copy of it. The trie nodes below which a token may meet an
//!   operation — its *crossings* — are found once per sibling by a walk of
//!   the trie over the sibling's own states (pruned where the operation is
//!   farther than the subtree's longest token); each state then decides
//!   only the tokens below its crossings itself. Objects whose values are
//!   strings, literals or free-form JSON have few crossings (a token must
//!   end the value and pass the separator).

use super::{level_of_reach, Building, Core, Lazy, LEVEL_LOOP, LEVEL_UNLIMITED, LEVEL_YET};
use crate::index::NO_LEVEL;
use crate::vocab::trie::{self, TokenTrie, VocabTries, DEAD, PLAIN_LEVELS};
use crate::vocab::{TokenId, Vocabulary};
use std::sync::Arc;

/// Where a sibling's mask must be decided again ([module docs](self)).
pub(super) struct Crossings {
    /// Whether the nodes are the full trie's; otherwise the last plain
    /// level's `rest` trie (no plain text of the state meets an operation,
    /// so the plain tokens fare alike).
    full: bool,
    /// Per crossing, its node and the bytes on the way to its parent.
    at: Vec<(u32, Box<[u8]>)>,
}

/// Most crossings kept per sibling, and most trie nodes below them; past
/// either, masks are walked as usual (a state right before a separator
/// has every token crossing, and its own walk has shortcuts this has not).
const CROSSINGS_MAX: usize = 256;
const CROSSING_NODES_MAX: usize = 2048;
/// Most nodes the walk that finds a sibling's crossings visits.
const CROSSING_WALK_MAX: usize = 1 << 16;

impl Core {
    /// The plain level of `s` from a sibling's, when one has a level: plain
    /// texts that meet no register operation (fewer than
    /// [`LazyDfa::plain_op_reach`](crate::dfa::LazyDfa::plain_op_reach)
    /// characters) fare alike from both, so the reach of `s` is at least the
    /// lesser of the sibling's and one less than that. A lower bound, so
    /// never too high (the walk decides the rest); unlimited only where no
    /// operation is within plain reach, and then exact.
    pub(super) fn sibling_level(&mut self, s: u32) -> Option<u8> {
        let skeleton = self.dfa.skeleton(s)?;
        let &s0 = self.level_siblings.get(&skeleton)?;
        let l0 = match self.level.get(s0 as usize).copied() {
            None | Some(LEVEL_YET) => return None,
            Some(LEVEL_LOOP) => LEVEL_UNLIMITED,
            Some(l) => l,
        };
        let k = self.dfa.plain_op_reach(s);
        let cap = if k == u32::MAX {
            LEVEL_UNLIMITED
        } else {
            level_of_reach(k.saturating_sub(1))
        };
        Some(if l0 == NO_LEVEL || cap == NO_LEVEL {
            NO_LEVEL
        } else {
            l0.min(cap)
        })
    }

    /// Lets the siblings of `s`, whose level is known, take theirs from it.
    pub(super) fn add_level_sibling(&mut self, s: u32) {
        if let Some(skeleton) = self.dfa.skeleton(s) {
            self.level_siblings.entry(skeleton).or_insert(s);
        }
    }

    /// The crossings of `s0` (computed once), `None` when too many.
    fn crossings(&mut self, s0: u32, tries: &VocabTries) -> Option<Arc<Crossings>> {
        if let Some(c) = self.crossings.get(&s0) {
            return c.clone();
        }
        let c = find_crossings(self, s0, tries).map(Arc::new);
        self.crossings.insert(s0, c.clone());
        c
    }
}

impl Lazy {
    /// A sibling of `s` whose mask is known ([module docs](self)). With
    /// `computing` (the mask of `s` is being computed), `s` becomes the one
    /// its siblings start from when it is the first of its skeleton.
    pub(super) fn mask_sibling(&self, core: &mut Core, s: u32, computing: bool) -> Option<u32> {
        let skeleton = core.dfa.skeleton(s)?;
        let s0 = if computing {
            *core.mask_siblings.entry(skeleton).or_insert(s)
        } else {
            *core.mask_siblings.get(&skeleton)?
        };
        (s0 != s && self.cell(s0)?.get().is_some()).then_some(s0)
    }

    /// The mask of `s` (EOS aside) from a sibling's ([module docs](self)),
    /// or `None` (nothing built) when no sibling has one, it has too many
    /// crossings, or `s` drops a token the sibling's plain level holds.
    pub(super) fn sibling_mask(
        &self,
        core: &mut Core,
        s: u32,
        tries: &VocabTries,
        vocab: &Vocabulary,
    ) -> Option<Building> {
        let s0 = self.mask_sibling(core, s, true)?;
        let base = self.cell(s0)?.get()?.clone();
        let crossings = core.crossings(s0, tries)?;
        let mut m = Building::copy_of(&base, core, tries, vocab.logits_width());
        // `compute` adds EOS where `s` accepts.
        for &e in vocab.eos() {
            m.remove(e.0);
        }
        let trie = if crossings.full {
            &tries.full
        } else {
            &tries.plain_level(PLAIN_LEVELS.len() - 1).rest
        };
        if redecide(core, s, trie, &crossings, tries, &mut m) {
            self.from_siblings
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Some(m)
        } else {
            if let Some(ids) = m.ids.take() {
                Building::give_back(m.set, &ids, core);
            }
            None
        }
    }
}

/// Decides the tokens below each crossing from `s` itself, in `m` (a copy
/// of the sibling's mask), and their duplicates. `false` when a token of
/// `m`'s plain level must go.
fn redecide(
    core: &mut Core,
    s: u32,
    trie: &TokenTrie,
    crossings: &Crossings,
    tries: &VocabTries,
    m: &mut Building,
) -> bool {
    let level = m.level.map(|l| &tries.plain_level(l as usize).set);
    let in_level = |t: u32| level.is_some_and(|l| l.contains(TokenId(t)));
    let mut stack = vec![DEAD; trie.max_depth + 1];
    let mut changed = Vec::new();
    for (node, prefix) in &crossings.at {
        let i = *node as usize;
        let mut x = s;
        for &b in prefix.iter() {
            if x == DEAD {
                break;
            }
            x = core.next(x, b);
        }
        stack[trie.depth[i] as usize - 1] = x;
        for j in i..trie.end[i] as usize {
            let d = trie.depth[j] as usize;
            let p = stack[d - 1];
            let st = if p == DEAD {
                DEAD
            } else {
                core.next(p, trie.byte[j])
            };
            stack[d] = st;
            let t = trie.token[j];
            if t == trie::NONE {
                continue;
            }
            let want = st != DEAD;
            let explicit = m.set.contains(TokenId(t));
            if want && !explicit && !in_level(t) {
                m.insert(t);
                changed.push(t);
            } else if !want && explicit {
                m.remove(t);
                changed.push(t);
            } else if !want && in_level(t) {
                return false;
            }
        }
    }
    if !changed.is_empty() {
        changed.sort_unstable();
        for &(first, dup) in &trie.dups {
            if changed.binary_search(&first).is_err() {
                continue;
            }
            if m.set.contains(TokenId(first)) {
                m.insert(dup);
            } else if in_level(dup) {
                return false;
            } else {
                m.remove(dup);
            }
        }
    }
    true
}

/// The crossings of `s0`: a walk of the trie over `s0`'s own states that
/// leaves a subtree where a step may meet a register operation (the
/// state before it is at most one byte from one), where the state dies (so
/// does the sibling's), or where the operation is farther than the
/// subtree's longest token. `None` past [`CROSSINGS_MAX`] crossings,
/// [`CROSSING_NODES_MAX`] nodes below them or [`CROSSING_WALK_MAX`] walked.
fn find_crossings(core: &mut Core, s0: u32, tries: &VocabTries) -> Option<Crossings> {
    let full = core.dfa.plain_op_reach(s0) != u32::MAX;
    let trie = if full {
        &tries.full
    } else {
        &tries.plain_level(PLAIN_LEVELS.len() - 1).rest
    };
    let heights = heights(tries, full);
    let mut stack = vec![DEAD; trie.max_depth + 1];
    let mut bytes = vec![0u8; trie.max_depth + 1];
    stack[0] = s0;
    let mut at = Vec::new();
    let mut below = 0usize;
    let (n, mut i, mut visited) = (trie.len(), 0usize, 0usize);
    while i < n {
        visited += 1;
        if visited > CROSSING_WALK_MAX {
            return None;
        }
        let d = trie.depth[i] as usize;
        let p = stack[d - 1];
        if core.dfa.byte_op_reach(p) <= 1 {
            at.push((i as u32, Box::from(&bytes[..d - 1])));
            below += trie.end[i] as usize - i;
            if at.len() > CROSSINGS_MAX || below > CROSSING_NODES_MAX {
                return None;
            }
            i = trie.end[i] as usize;
            continue;
        }
        let st = core.next(p, trie.byte[i]);
        if st == DEAD || core.dfa.byte_op_reach(st) > u32::from(heights[i]) {
            i = trie.end[i] as usize;
            continue;
        }
        stack[d] = st;
        bytes[d - 1] = trie.byte[i];
        i += 1;
    }
    Some(Crossings { full, at })
}

/// Per node of the full trie (or of the last plain level's `rest` trie),
/// the most bytes a token below it has past it; kept per vocabulary.
fn heights(tries: &VocabTries, full: bool) -> Arc<Box<[u16]>> {
    let key = if full {
        "trie heights: full"
    } else {
        "trie heights: plain rest"
    };
    let mut shared = tries.shared.0.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(h) = shared
        .get(key)
        .and_then(|a| a.clone().downcast::<Box<[u16]>>().ok())
    {
        return h;
    }
    let trie = if full {
        &tries.full
    } else {
        &tries.plain_level(PLAIN_LEVELS.len() - 1).rest
    };
    let h = Arc::new(subtree_heights(trie));
    shared.insert(key.to_string(), h.clone());
    h
}

/// Per node, the most bytes below it (children come after their parent, a
/// subtree ends at `end`).
fn subtree_heights(trie: &TokenTrie) -> Box<[u16]> {
    let n = trie.len();
    let mut deepest: Vec<u16> = trie.depth.clone();
    for i in (0..n).rev() {
        let (mut j, end) = (i + 1, trie.end[i] as usize);
        while j < end {
            deepest[i] = deepest[i].max(deepest[j]);
            j = trie.end[j] as usize;
        }
    }
    (0..n).map(|i| deepest[i] - trie.depth[i]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heights_are_the_longest_token_below() {
        // "a", "ab", "abc", "b": nodes a(1) b(2) c(3) b(1), depth-first.
        let mut trie = TokenTrie::default();
        trie.byte = b"abcb".to_vec();
        trie.depth = vec![1, 2, 3, 1];
        trie.end = vec![3, 3, 3, 4];
        trie.token = vec![0, 1, 2, 3];
        assert_eq!(&*subtree_heights(&trie), &[2, 1, 0, 0]);
    }
}
