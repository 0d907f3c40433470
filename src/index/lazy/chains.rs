//! Chains: states where the state after `k` plain characters (or bytes of
//! one set, a pattern's class) does not depend on which they are, so a
//! token's plain prefix is skipped to its chain state
//! ([`Lazy::chain_mask`], [`Lazy::byte_chain_mask`]). Split from `mod.rs`
//! by job.

use super::{
    trie, Building, Core, Lazy, VocabTries, CHAIN_LEVEL, DEAD, NO_LEVEL, PLAIN_LEVELS, UNKNOWN,
};
use std::sync::Arc;

/// Plain characters lead the state to different states.
pub(super) const MIXED: u32 = u32::MAX - 2;

/// Most byte chains one index uses (the tries are built once per
/// vocabulary and shared, [`VocabTries::byte_chain`]); states of further
/// byte sets walk as before.
pub(super) const BYTE_CHAINS_MAX: usize = 8;

/// A byte chain of this index: the vocabulary's tokens seen through one set
/// of ASCII bytes ([`trie::ByteChainTokens`]), and a byte of each class of
/// this automaton that meets the set.
pub(super) struct ByteChain {
    tokens: Arc<trie::ByteChainTokens>,
    reps: Vec<u8>,
}

impl ByteChain {
    pub(super) fn new(set: u128, tries: &VocabTries, classes: &[u8; 256]) -> Option<ByteChain> {
        let in_set = |b: u8| b < 128 && (set >> b) & 1 == 1;
        let mut seen = [false; 256];
        let reps = (0..128u8)
            .filter(|&b| {
                in_set(b) && !std::mem::replace(&mut seen[classes[b as usize] as usize], true)
            })
            .collect();
        Some(ByteChain {
            tokens: tries.byte_chain(set)?,
            reps,
        })
    }
}

impl Core {
    /// The state every plain character leads `s` to, when it is one and the
    /// same for all of them ([`DEAD`] when all die); `None` otherwise.
    pub(super) fn uniform_successor(&mut self, s: u32) -> Option<u32> {
        if s == DEAD {
            return Some(DEAD);
        }
        self.grow();
        let cached = self.uniform[s as usize];
        if cached != UNKNOWN {
            return (cached != MIXED).then_some(cached);
        }
        let mut to: Option<u32> = None;
        let mut same = |t: u32| *to.get_or_insert(t) == t;
        let dfa = &mut self.dfa;
        let mut step = |x: u32, b: u8| match x {
            DEAD => DEAD,
            _ => match dfa.next(x, b) {
                0 => DEAD,
                t => t,
            },
        };
        let mut ok = self.plain.ascii.iter().all(|&b| same(step(s, b)));
        let (mut cur, mut next) = (Vec::new(), Vec::new());
        for seq in &self.plain.utf8 {
            if !ok {
                break;
            }
            cur.clear();
            cur.push(s);
            for reps in seq {
                next.clear();
                for &q in &cur {
                    for &b in reps {
                        let x = step(q, b);
                        if !next.contains(&x) {
                            next.push(x);
                        }
                    }
                }
                std::mem::swap(&mut cur, &mut next);
            }
            ok = cur.iter().all(|&t| same(t));
        }
        self.grow();
        let u = match (ok, to) {
            (true, Some(t)) => t,
            _ => MIXED,
        };
        self.uniform[s as usize] = u;
        (u != MIXED).then_some(u)
    }

    /// Fills `chain` with `s` and the states `1..len` plain characters lead
    /// it to, when each of those states sends every plain character to one
    /// next state (so the state after `k` plain characters does not depend
    /// on which they are). `false` when some state on the way does not.
    pub(super) fn plain_chain(&mut self, s: u32, len: usize, chain: &mut Vec<u32>) -> bool {
        chain.clear();
        chain.push(s);
        while chain.len() < len {
            let last = chain[chain.len() - 1];
            let Some(t) = self.uniform_successor(last) else {
                return false;
            };
            if t == last {
                // A loop (or dead from here on): the rest of the chain is t.
                chain.resize(len, t);
                return true;
            }
            if chain.len() == 1 && t != DEAD && self.dfa.is_next_unit(s, t, self.horizon) {
                // A long counted string's character: no token tells the
                // states further on from s (see `dfa/shift.rs`).
                chain.resize(len, s);
                return true;
            }
            chain.push(t);
        }
        true
    }

    /// The byte-chain set of `s` ([`super::super::byte_chain_set`]).
    pub(super) fn byte_chain_set(&mut self, s: u32) -> Option<u128> {
        super::super::byte_chain_set(|b| self.next(s, b))
    }

    /// Like [`Core::plain_chain`] for the bytes of byte chain `id`: `chain`
    /// gets `s` and the states `1..=BYTE_CHAIN_CAP` bytes of the set lead it
    /// to; `false` when some state on the way sends them to different states.
    pub(super) fn byte_chain(&mut self, s: u32, id: usize, chain: &mut Vec<u32>) -> bool {
        let bc = self.byte_chains[id].clone();
        let reps = &bc.reps;
        chain.clear();
        chain.push(s);
        while chain.len() <= trie::BYTE_CHAIN_CAP {
            let c = chain[chain.len() - 1];
            let t = if c == DEAD {
                DEAD
            } else if let Some(&t) = self.byte_succ.get(&(c, id as u32)) {
                t
            } else {
                let first = self.next(c, reps[0]);
                let t = if reps[1..].iter().all(|&b| self.next(c, b) == first) {
                    first
                } else {
                    MIXED
                };
                self.byte_succ.insert((c, id as u32), t);
                t
            };
            if t == MIXED {
                return false;
            }
            if chain.len() == 1 && t != DEAD && self.dfa.is_next_unit(s, t, self.horizon) {
                // A long counted class (`[0-9a-z]{1,255}`): as for a plain
                // chain.
                chain.resize(trie::BYTE_CHAIN_CAP + 1, s);
                return true;
            }
            chain.push(t);
        }
        true
    }
}

impl Lazy {
    /// The mask of `s` (EOS aside) when `s` starts a chain of states where
    /// the state after `k` plain characters does not depend on which they
    /// are, live for more than `PLAIN_LEVELS[CHAIN_LEVEL]` characters, and is
    /// not a string body's loop (that case has its cheaper walk): the plain
    /// tokens that short, and a walk of [`BodyTries::chain_suffixes`](trie::BodyTries)
    /// where each token's plain prefix (up to that many characters) is
    /// skipped to its chain state. A counted string's states are all new, one
    /// per character; without the chain each would need the plain-reach
    /// search and a walk of every plain prefix.
    pub(super) fn chain_mask(
        &self,
        core: &mut Core,
        s: u32,
        tries: &VocabTries,
    ) -> Option<Building> {
        let trie = &tries.body().chain_suffixes;
        let limit = PLAIN_LEVELS[CHAIN_LEVEL] as usize;
        if trie.len() == 0 || core.uniform_successor(s)? == s {
            return None;
        }
        let mut chain = Vec::new();
        // (Keys count at most `limit` plain characters.)
        if !core.plain_chain(s, limit + 1, &mut chain) || chain[limit] == DEAD {
            return None;
        }
        let mut m = Building::from(tries.plain_level(CHAIN_LEVEL));
        m.add_set(&tries.body().chain_partial);
        walk_chain(core, trie, &chain, &mut m);
        Some(m)
    }

    /// The mask of `s` (EOS aside) when plain text may not follow it but a
    /// big set of ASCII bytes (a pattern's class) all lead it to one state,
    /// and so on along a chain: see [`ByteChain`]. Without the chain, each of
    /// a counted class's states would need a walk of every token made of
    /// the class (tens of thousands for `[0-9a-zA-Z_-]`).
    pub(super) fn byte_chain_mask(
        &self,
        core: &mut Core,
        s: u32,
        tries: &VocabTries,
    ) -> Option<Building> {
        if core.plain_level(s) != NO_LEVEL {
            return None;
        }
        let set = core.byte_chain_set(s)?;
        // The set's bytes, which the full trie's walk below leaves out.
        let except = [set as u64, (set >> 64) as u64, 0, 0];
        let id = match core.byte_chain_ids.get(&set) {
            Some(&id) => id,
            None if core.byte_chains.len() >= BYTE_CHAINS_MAX => return None,
            None => {
                let classes = core.dfa.byte_classes();
                let chain = ByteChain::new(set, tries, &classes)?;
                core.byte_chains.push(Arc::new(chain));
                let id = core.byte_chains.len() - 1;
                core.byte_chain_ids.insert(set, id);
                id
            }
        };
        let mut chain = Vec::new();
        if !core.byte_chain(s, id, &mut chain) {
            return None;
        }
        let bc = core.byte_chains[id].clone();
        // Tokens of `j` bytes of the set are live when the chain is, `j` on.
        let live = chain.iter().take_while(|&&c| c != DEAD).count() - 1;
        let (set, fp) = &bc.tokens.sets[live.min(trie::BYTE_CHAIN_CAP)];
        let mut m = Building {
            set: set.clone(),
            fp: *fp,
            ids: None,
            level: None,
        };
        // Tokens whose first byte is outside the set: the full trie from
        // the chain's first state.
        tries
            .full
            .walk_live_roots_except(chain[0], core, except, |t| m.insert(t));
        m.add_dups(&tries.full);
        walk_chain(core, &bc.tokens.trie, &chain, &mut m);
        Some(m)
    }
}

/// Walks a trie whose keys start with one byte `k`, the number of leading
/// bytes a chain skips: from `chain[k]`, then byte by byte. Adds the live
/// tokens and the duplicates of those added.
fn walk_chain(core: &mut Core, trie: &trie::TokenTrie, chain: &[u32], m: &mut Building) {
    // The walk's start stands for "before the key's first byte", which picks
    // the chain state.
    const BEFORE_KEY: u32 = u32::MAX - 3;
    trie.walk(
        BEFORE_KEY,
        |s, b| match s {
            BEFORE_KEY => chain[b as usize],
            _ => core.next(s, b),
        },
        |t| m.insert(t),
    );
    m.add_dups(trie);
}
