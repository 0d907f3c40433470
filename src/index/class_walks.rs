//! # The eager engine's class walks, put together from shared subtrees
//!
//! The eager build walks the trie of short tokens once per bounded-horizon
//! class (see [`super`]). Those walks repeat one another: below a token's
//! first byte a walk depends only on the state that byte leads to, and the
//! representatives of many classes lead to the same states, or to states of
//! one class (a word's loop is entered from its first character, from the
//! loop itself and from every context that shares the word). So a class
//! walk is planned as a list of subtrees, each a (trie, node, class of the
//! state there) triple; each distinct subtree is walked once, and the class
//! walks are put together from the subtrees' hits. Two states of one class
//! agree on the liveness of every string of at most the horizon, so they
//! agree on the short tokens below any node.
//!
//! A class whose representative starts a **byte chain** (a big set `A` of
//! ASCII bytes, a pattern's class, all lead it to one state, and so on for
//! [`BYTE_CHAIN_CAP`] bytes: `[A-Za-z ]{0,40}`, one state per byte, or the
//! loop of `[a-z0-9_./-]*`) takes the tokens made of `A` alone as one
//! precomputed set per length, and its other subtrees from the
//! vocabulary's [`ByteChainTokens`] trie, keyed by the count of leading
//! bytes of `A` and then the bytes after (as the lazy engine does,
//! `lazy/chains.rs`); tokens that start outside `A` are the short trie's
//! subtrees, shared as above. Without it each state of a counted class
//! walked the tens of thousands of tokens made of `A`, in states that share
//! no subtree (each byte leads to the next state of the count), and each
//! context of a word walked them again. `A` is cut down to its letters,
//! digits and space when those are enough (any subset keeps the chain), so
//! that classes differing in punctuation share one set's tries; a set's
//! tries are built (tens of milliseconds, once per vocabulary) only for
//! [`CHAIN_MIN_USES`] walks or more, else they must be cached already.

use super::{FastMap, LiveTable, NO_LEVEL};
use crate::vocab::trie::{ByteChainTokens, TokenTrie, VocabTries, BYTE_CHAIN_CAP, DEAD, NONE};
use crate::vocab::{mix, TokenId, TokenSet};
use rayon::prelude::*;
use std::sync::Arc;

/// The ASCII letters, digits and space, as a byte set.
const WORD_BYTES: u128 =
    (1 << b' ') | (0x3ff << b'0') | (0x3ff_ffff << b'A') | (0x3ff_ffff << b'a');

/// Fewest walks that have a byte set's chain for an index to build its
/// tries (tens of milliseconds, once per vocabulary); below, the walks of a
/// set whose tries are not built yet go the usual way.
const CHAIN_MIN_USES: usize = 4;

/// Most byte sets one index takes byte chains of (each is built once per
/// vocabulary and shared, tens of milliseconds the first time); states of
/// further sets are walked.
const CHAIN_SETS_MAX: usize = 8;

/// The short walk of every class representative `(state, plain level)` of
/// `walks`, with its fingerprint (the sum of [`mix`] over its ids): the
/// tokens of at most `tries.horizon` bytes of the level's `rest_short` trie
/// (or of every short token, for `NO_LEVEL`) that keep the state live.
/// Duplicates of the full trie are not added. `stop` is polled per subtree
/// (a deadline); once it returns `true` the results are incomplete. Runs on
/// the current rayon pool.
pub(super) fn short_walks(
    table: &LiveTable,
    class_of: &[u32],
    walks: &[(u32, u8)],
    tries: &VocabTries,
    width: usize,
    stop: &(dyn Fn() -> bool + Sync),
) -> (Vec<Walked>, Vec<u64>) {
    let short_trie = |l: u8| {
        if l == NO_LEVEL {
            &tries.short
        } else {
            &tries.plain_level(l as usize).rest_short
        }
    };
    // Plan: each walk's base set (a byte chain's tokens made of its bytes)
    // and subtrees.
    let mut chains: Vec<(u128, Arc<ByteChainTokens>)> = Vec::new();
    let mut planner = Planner {
        table,
        class_of,
        sub_of: FastMap::default(),
        subs: Vec::new(),
    };
    let mut plans: Vec<Plan> = Vec::with_capacity(walks.len());
    // The byte chains of the walks, taken where their set's tries are
    // built already or serve enough walks to pay for their build.
    let found: Vec<Option<([u32; BYTE_CHAIN_CAP + 1], u128)>> = walks
        .iter()
        .map(|&(s, l)| match l {
            NO_LEVEL => byte_chain(table, s, tries),
            _ => None,
        })
        .collect();
    let mut uses: FastMap<u128, usize> = FastMap::default();
    for (_, set) in found.iter().flatten() {
        *uses.entry(*set).or_default() += 1;
    }
    for (&(s, l), found) in walks.iter().zip(found) {
        let mut ids = Vec::new();
        let chain = found.and_then(|(chain, set)| {
            let c = match chains.iter().position(|c| c.0 == set) {
                Some(c) => c,
                None if chains.len() >= CHAIN_SETS_MAX => return None,
                None if uses[&set] < CHAIN_MIN_USES && !tries.has_byte_chain(set) => return None,
                None => {
                    chains.push((set, tries.byte_chain(set)?));
                    chains.len() - 1
                }
            };
            Some((chain, c))
        });
        let base = match chain {
            Some((chain, c)) => {
                let chain_tokens = chains[c].1.clone();
                let trie = &chain_tokens.trie;
                // Tokens that start outside the set (not in the chain's
                // trie): the short trie's subtrees, shared with the other
                // walks.
                for (b, r) in tries.short.roots() {
                    let q = table.next(s, b);
                    if q != DEAD && (b >= 128 || (chains[c].0 >> b) & 1 == 0) {
                        let t = (NO_LEVEL as u32, &tries.short);
                        planner.add(&mut ids, t, r, q, usize::MAX);
                    }
                }
                for (j, k) in trie.roots() {
                    let j = j as usize;
                    let from = chain.get(j).copied().unwrap_or(DEAD);
                    // A token of the key `j` is `j` bytes of the set, then
                    // the bytes below the key's node; no deeper than the
                    // horizon.
                    if from == DEAD || j >= tries.horizon {
                        continue;
                    }
                    for (b, node) in trie.children(k) {
                        let q = table.next(from, b);
                        if q != DEAD {
                            let t = (CHAIN_TRIE + c as u32, trie);
                            planner.add(&mut ids, t, node, q, tries.horizon + 1 - j);
                        }
                    }
                }
                // Tokens of `j` bytes of the set are live when the chain
                // is, `j` on.
                Some((c, chain[1..].iter().take_while(|&&x| x != DEAD).count()))
            }
            None => {
                for (b, r) in short_trie(l).roots() {
                    let q = table.next(s, b);
                    if q != DEAD {
                        planner.add(&mut ids, (l as u32, short_trie(l)), r, q, usize::MAX);
                    }
                }
                None
            }
        };
        plans.push((base, ids));
    }
    let trie_of = |t: u32| -> &TokenTrie {
        if t >= CHAIN_TRIE {
            &chains[(t - CHAIN_TRIE) as usize].1.trie
        } else {
            short_trie(t as u8)
        }
    };
    let mut walked: Vec<(Walked, u64)> = planner
        .subs
        .par_iter()
        .map(|sub| {
            let mut walked = Walked::List(Vec::new());
            let mut fp = 0u64;
            if sub.parts.is_empty() && !stop() {
                trie_of(sub.trie).walk_subtree(
                    sub.node,
                    sub.state,
                    sub.max_depth,
                    |s, b| table.next(s, b),
                    |t| {
                        walked.push(t, width);
                        fp = fp.wrapping_add(mix(t));
                    },
                );
            }
            // A big subtree's hits as a bitset: a walk then takes them in
            // one union instead of id by id.
            walked.set_if_longer(SUB_SET_MIN, width);
            (walked, fp)
        })
        .collect();
    // A split subtree's hits: its parts', in order (each part comes before
    // the subtrees it is part of).
    for (i, sub) in planner.subs.iter().enumerate() {
        if sub.parts.is_empty() {
            continue;
        }
        let mut out = Walked::List(Vec::new());
        let mut fp = 0u64;
        for &p in &sub.parts {
            out.extend(&walked[p as usize].0, width);
            fp = fp.wrapping_add(walked[p as usize].1);
        }
        out.set_if_longer(SUB_SET_MIN, width);
        walked[i] = (out, fp);
    }
    plans
        .par_iter()
        .map(|(base, ids)| {
            let (mut out, mut fp) = match base {
                Some((c, live)) => {
                    let (set, fp) = &chains[*c].1.sets[*live];
                    (Walked::Set(set.clone()), *fp)
                }
                None => (Walked::List(Vec::new()), 0),
            };
            // In trie order, as one walk of the whole trie would list them.
            for &i in ids {
                out.extend(&walked[i as usize].0, width);
                fp = fp.wrapping_add(walked[i as usize].1);
            }
            if let (Some((c, _)), Walked::Set(set)) = (base, &mut out) {
                // Tokens whose keys are equal (other bytes of the set, the
                // same bytes after) fare alike.
                for &(first, dup) in &chains[*c].1.trie.dups {
                    if set.contains(TokenId(first)) && set.insert_new(TokenId(dup)) {
                        fp = fp.wrapping_add(mix(dup));
                    }
                }
            }
            (out, fp)
        })
        .unzip()
}

/// Subtrees of more nodes than this are planned as the token at their root
/// and their children's subtrees, put together once per (trie, node, class)
/// from those parts' hits: walks that enter one big subtree (the
/// tokens after a space, say) from states of different classes then share
/// the parts below it where those states meet again (the word after the
/// space, the same in every context).
/// (Measured on the shell allow-list grammar: a quarter fewer trie nodes
/// visited; below about 16k nodes the extra parts cost more than they save.)
const SPLIT_NODES: u32 = 32768;

/// The subtrees of the class walks, each planned once per (trie, node,
/// class of the state there).
struct Planner<'a> {
    table: &'a LiveTable,
    class_of: &'a [u32],
    sub_of: FastMap<(u32, u32, u32), u32>,
    subs: Vec<Sub>,
}

impl Planner<'_> {
    /// Appends to `ids` the subtrees that list the tokens below `node` of
    /// the trie `(id, trie)` (itself included) live from `q`, no deeper
    /// than `max_depth`, in trie order.
    fn add(
        &mut self,
        ids: &mut Vec<u32>,
        (t, trie): (u32, &TokenTrie),
        node: usize,
        q: u32,
        max_depth: usize,
    ) {
        let key = (t, node as u32, self.class_of[q as usize]);
        if let Some(&i) = self.sub_of.get(&key) {
            ids.push(i);
            return;
        }
        let depth = trie.depth[node] as usize;
        if trie.end[node] - node as u32 > SPLIT_NODES && depth < max_depth {
            let mut split = Vec::new();
            if trie.token[node] != NONE {
                // The token at the node alone: live wherever `q` is.
                split.push(self.sub((t, node as u32, u32::MAX), t, node, q, depth));
            }
            for (b, child) in trie.children(node) {
                let r = self.table.next(q, b);
                if r != DEAD {
                    self.add(&mut split, (t, trie), child, r, max_depth);
                }
            }
            self.subs.push(Sub {
                trie: t,
                node,
                state: q,
                max_depth,
                parts: split,
            });
            let id = self.subs.len() as u32 - 1;
            self.sub_of.insert(key, id);
            ids.push(id);
            return;
        }
        ids.push(self.sub(key, t, node, q, max_depth));
    }

    fn sub(
        &mut self,
        key: (u32, u32, u32),
        trie: u32,
        node: usize,
        q: u32,
        max_depth: usize,
    ) -> u32 {
        *self.sub_of.entry(key).or_insert_with(|| {
            self.subs.push(Sub {
                trie,
                node,
                state: q,
                max_depth,
                parts: Vec::new(),
            });
            self.subs.len() as u32 - 1
        })
    }
}

/// A walk's plan: its base set (a byte chain's index and live length), and
/// its subtrees in trie order.
type Plan = (Option<(usize, usize)>, Vec<u32>);

/// Most hits of a subtree kept as a list of ids.
const SUB_SET_MIN: usize = 1024;

/// The first trie id of the byte chains' tries (below: plain levels).
const CHAIN_TRIE: u32 = 256;

/// A subtree to walk: the trie (a plain level, or `CHAIN_TRIE` plus a byte
/// chain's index), its node, the live state there and the deepest node to
/// visit.
struct Sub {
    trie: u32,
    node: usize,
    state: u32,
    max_depth: usize,
    /// A split subtree: the subtrees it is put together from (empty: walk
    /// it).
    parts: Vec<u32>,
}

/// The chain of `s` (the states `0..=BYTE_CHAIN_CAP` bytes of its set lead
/// it to, [`DEAD`] once dead) and its set, when `s` starts a byte chain
/// (see the module essay) and the vocabulary's tokens are walked to the
/// default horizon or further.
fn byte_chain(
    table: &LiveTable,
    s: u32,
    tries: &VocabTries,
) -> Option<([u32; BYTE_CHAIN_CAP + 1], u128)> {
    if tries.horizon < BYTE_CHAIN_CAP {
        return None;
    }
    // The ASCII bytes that lead `s` to its most common live successor.
    let best = super::byte_chain_set(|b| table.next(s, b))?;
    // Its letters, digits and space, when they are enough: any subset of
    // the set keeps the chain (the others are walked as bytes after it),
    // and patterns that differ in punctuation (`[A-Za-z0-9_./-]`,
    // `[A-Za-z0-9_.,:=/-]`) then share one set's tries. (Space starts a
    // third of the vocabulary's tokens: a set that has it keeps it.)
    let set = match best & WORD_BYTES {
        a if a.count_ones() >= super::BYTE_CHAIN_MIN_BYTES => a,
        _ => best,
    };
    let bytes: Vec<u8> = (0..128u8).filter(|&b| (set >> b) & 1 == 1).collect();
    let mut chain = [DEAD; BYTE_CHAIN_CAP + 1];
    chain[0] = s;
    for k in 1..=BYTE_CHAIN_CAP {
        let c = chain[k - 1];
        if c == DEAD {
            break;
        }
        let t = table.next(c, bytes[0]);
        if bytes[1..].iter().any(|&b| table.next(c, b) != t) {
            return None;
        }
        chain[k] = t;
    }
    Some((chain, set))
}

/// The result of one short walk: its ids in trie order, or a bitset once
/// the list would be larger than one.
#[derive(PartialEq, Eq)]
pub(super) enum Walked {
    List(Vec<u32>),
    Set(TokenSet),
}

impl Walked {
    #[inline]
    fn push(&mut self, t: u32, width: usize) {
        match self {
            Walked::List(list) => {
                list.push(t);
                self.set_if_longer(width / 32, width);
            }
            Walked::Set(set) => set.insert(TokenId(t)),
        }
    }

    /// A list of more than `max` ids becomes a bitset of `width`.
    fn set_if_longer(&mut self, max: usize, width: usize) {
        if matches!(self, Walked::List(list) if list.len() > max) {
            self.make_set(width);
        }
    }

    /// A list becomes a bitset of `width`.
    fn make_set(&mut self, width: usize) {
        if let Walked::List(list) = self {
            let mut set = TokenSet::new(width);
            list.iter().for_each(|&t| set.insert(TokenId(t)));
            *self = Walked::Set(set);
        }
    }

    /// Appends the ids of `other` (a set makes this one a set).
    fn extend(&mut self, other: &Walked, width: usize) {
        match other {
            Walked::List(list) => list.iter().for_each(|&t| self.push(t, width)),
            Walked::Set(b) => {
                self.make_set(width);
                if let Walked::Set(set) = self {
                    set.union_with(b);
                }
            }
        }
    }

    /// Adds the ids to `set`.
    pub(super) fn add_to(&self, set: &mut TokenSet) {
        match self {
            Walked::List(list) => list.iter().for_each(|&t| set.insert(TokenId(t))),
            Walked::Set(b) => set.union_with(b),
        }
    }
}
