//! # The lazy index: masks of a [`LazyDfa`], computed on first visit
//!
//! A schema DFA of a million states takes seconds to determinize and as long
//! again to index, yet one output visits a few thousand of them. Past
//! [`DfaConfig::lazy_states`](crate::DfaConfig::lazy_states) the DFA is left
//! lazy and so is its index: a state's mask is one walk of the full token trie
//! from it, made the first time a guide asks, and then cached (deduplicated)
//! for every later request.
//!
//! Everything the eager index knows per state is known here without the whole
//! automaton, because the determinizer drops NFA states that cannot reach a
//! match and knows each new state's distance to acceptance:
//!
//! * a transition is live exactly when it does not lead to state 0, so masks
//!   never allow a dead end;
//! * the canonical shortest completion follows, from each state, the smallest
//!   byte whose successor is one byte closer to acceptance, which is what the
//!   `max_tokens` budget tokenizes greedily (as in the eager index).
//!
//! ## No lock on the hot path
//!
//! The determinizer and what is derived from it while computing masks sit
//! in a [`Core`] behind a mutex, taken only on a state's *first* visit (its
//! row determinized, its mask computed). What a matcher reads per token is
//! published out of it into write-once, lock-free storage: masks in
//! write-once cells, transitions in an append-only arena of atomic rows
//! (`index/arena.rs`), a state's acceptance and distance in atomic slots
//! ([`Published`]), budgets in the shared memo of `backend.rs`. A transition is published when a
//! walk first takes it (under the lock), not when its state is explored:
//! most states a mask's trie walk explores are never entered by a matcher.
//! So once any matcher has taken a transition, every matcher on every
//! thread masks and advances through it with a few loads and no lock.
//! (Chosen over per-matcher caches: those repeat every first visit per
//! request, and a state's first visit — a walk of the token trie — costs
//! thousands of times a lookup; a shared, published cache pays it once per
//! compiled artefact.)
//!
//! ## Small masks as id lists
//!
//! Most first visits of a JSON Schema's states are inside literals (a
//! property name, `true`, a punctuation run), where a handful of tokens are
//! allowed (MaskBench's first 100 files: median 14, 92 % at most 1,000),
//! yet a bitset over the Qwen vocabulary is 19 KB: five fresh pages for
//! every new state, whose faults and zeroing were half of a first visit. So
//! a mask built from scratch (no plain level) with at most [`SPARSE_MAX`]
//! tokens is kept as its ids ([`Mask::Sparse`]), built in a bitset
//! the automaton keeps for reuse; [`Lazy::fill_row`] writes it into a
//! bitmask row directly, and a bitset is made only when someone asks
//! [`Lazy::allowed`] for it.
//!
//! The lazy index needs every single byte in the vocabulary (then byte-live
//! is token-live); the caller falls back to the eager build otherwise.

use super::arena::{Arena, Slots};
use super::backend::Classes;
use super::steps::reverse_reach;
use super::{plain_successors, LimitHit, PlainReps, NO_LEVEL};
use crate::dfa::LazyDfa;
use crate::vocab::trie::{self, VocabTries, CHAIN_LEVEL, DEAD, PLAIN_LEVELS};
use crate::vocab::{mix, TokenId, TokenSet, Vocabulary};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

mod building;
mod chains;
mod free_part;
mod published;
mod siblings;
use building::Building;
use chains::ByteChain;
use published::{Published, ACCEPTS};

/// Mask cells in the first segment of [`Lazy::masks`] (doubling from there).
const MASK_BASE: usize = 64;
/// Not computed yet.
const UNKNOWN: u32 = u32::MAX - 1;
/// Plain level not computed yet.
const LEVEL_YET: u8 = u8::MAX - 1;
/// The last (unlimited) plain level, and every plain character leads back
/// to the state itself (a string body): walk [`BodyTries::body_suffixes`](trie::BodyTries).
const LEVEL_LOOP: u8 = PLAIN_LEVELS.len() as u8;
/// The level of unlimited reach (no plain text ever dies) that is not a
/// string body's loop. Always exact: searches cut short never give it.
const LEVEL_UNLIMITED: u8 = LEVEL_LOOP - 1;
/// Most states the plain-reach search of one state visits; past it, the
/// depth fully searched is a lower bound.
const PLAIN_SEARCH: usize = 4096;

/// The automaton and what is derived from it per state, grown on demand.
pub(super) struct Core {
    dfa: LazyDfa,
    /// The vocabulary's longest token, in bytes (set before each mask;
    /// `u32::MAX` before the first, which no chain's bound meets).
    horizon: u32,
    /// States whose acceptance and distance are published (`0..this`).
    info_published: usize,
    plain: PlainReps,
    level: Vec<u8>,
    /// Per state, the one state every plain character leads it to
    /// ([`DEAD`] included), [`MIXED`](chains::MIXED) when characters differ, or
    /// [`UNKNOWN`].
    uniform: Vec<u32>,
    /// The byte chains built so far, by their byte set.
    byte_chains: Vec<Arc<ByteChain>>,
    byte_chain_ids: HashMap<u128, usize, foldhash::fast::RandomState>,
    /// Per (state, byte chain), the one state every byte of the chain's set
    /// leads the state to ([`DEAD`] included), or [`MIXED`](chains::MIXED).
    byte_succ: HashMap<(u32, u32), u32, foldhash::fast::RandomState>,
    /// An empty bitset of the logits width, lent to each mask built from
    /// scratch and cleared after it (see "Small masks as id lists").
    scratch: Option<TokenSet>,
    /// Per byte class, its bytes (a 256-bit set).
    class_bytes: Vec<[u64; 4]>,
    /// Per string-body state and `rest` trie node where
    /// [`Lazy::walk_to_loops`] entered it, the tokens below the node the
    /// state's mask allows ([`Lazy::settled`]).
    settled: HashMap<(u32, u32), Arc<[u32]>, foldhash::fast::RandomState>,
    /// With member sets, per skeleton ([`LazyDfa::skeleton`]), a state whose
    /// plain level (whose mask) its siblings take theirs from
    /// ([`siblings`]).
    level_siblings: HashMap<Box<[u32]>, u32, foldhash::fast::RandomState>,
    mask_siblings: HashMap<Box<[u32]>, u32, foldhash::fast::RandomState>,
    /// Per state whose siblings start from its mask, their crossings.
    crossings: HashMap<u32, Option<Arc<siblings::Crossings>>, foldhash::fast::RandomState>,
}

impl trie::LiveBytes for Core {
    #[inline]
    fn next(&mut self, s: u32, b: u8) -> u32 {
        Core::next(self, s, b)
    }

    /// One pass over the row of `s` (determinized on first use).
    fn live(&mut self, s: u32) -> [u64; 4] {
        let mut set = [0u64; 4];
        if s == DEAD {
            return set;
        }
        self.dfa.ensure_row(s);
        // Without a branch per class (schema automata have about a hundred
        // classes, and which are live is unpredictable).
        for (&t, bytes) in self.dfa.row(s).iter().zip(&self.class_bytes) {
            let m = 0u64.wrapping_sub((t != 0) as u64);
            for (w, b) in set.iter_mut().zip(bytes) {
                *w |= b & m;
            }
        }
        set
    }
}

/// The plain level of a reach (plain characters before one may die).
fn level_of_reach(reach: u32) -> u8 {
    PLAIN_LEVELS
        .iter()
        .rposition(|&k| k <= reach)
        .map_or(NO_LEVEL, |l| l as u8)
}

/// Subtrees of at least this many nodes settled by a string-body state's
/// mask are kept per (state, node) ([`Lazy::settled`]); smaller ones are
/// tested token by token each time.
const SETTLED_MEMO: usize = 32;

impl Core {
    /// Next state on `b`, or [`DEAD`].
    #[inline]
    pub fn next(&mut self, s: u32, b: u8) -> u32 {
        match self.dfa.next(s, b) {
            0 => DEAD,
            t => t,
        }
    }

    pub fn is_accepting(&self, s: u32) -> bool {
        self.dfa.is_accepting(s)
    }

    pub fn dist(&self, s: u32) -> u32 {
        self.dfa.dist(s)
    }

    fn grow(&mut self) {
        let n = self.dfa.state_count();
        if self.level.len() < n {
            self.level.resize(n, LEVEL_YET);
            self.uniform.resize(n, UNKNOWN);
        }
    }

    /// The plain level of `s` (as in the eager index): the largest
    /// [`PLAIN_LEVELS`] entry not above the fewest plain characters that lead
    /// from `s` to a state where some plain character dies.
    ///
    /// A breadth-first search collects the states plain text leads `s` to;
    /// when it finishes (at most [`PLAIN_SEARCH`] states), a reverse search
    /// from the states where a plain character dies gives the exact reach of
    /// *every* state found, and all their levels are cached (a property
    /// name's states are searched once, not once per state). A search cut
    /// short uses the depth it completed, a lower bound, so the level is never
    /// too high.
    fn plain_level(&mut self, s: u32) -> u8 {
        self.grow();
        let cached = self.level[s as usize];
        if cached != LEVEL_YET {
            return cached;
        }
        // No plain text dies from a part of s whose own plain text never
        // dies (the extra-key trie of an object, whatever declared names
        // are left, inside a key or at its start): that part's reach is
        // searched once for every position that holds it. (Nor is s a
        // string body: its other threads die on some plain text.) Only once
        // the part's own level is known: the search below also gives the
        // levels of every state inside the keys, which the first position
        // needs.
        if let Some(t) = self.dfa.free_part(s) {
            let lt = self.level.get(t as usize).copied().unwrap_or(LEVEL_YET);
            if lt == LEVEL_LOOP || lt == LEVEL_UNLIMITED {
                self.grow();
                self.level[s as usize] = LEVEL_UNLIMITED;
                return LEVEL_UNLIMITED;
            }
        }
        // Fast path: a string body (every plain character leads back to s).
        let (mut cur, mut next, mut succ) = (Vec::new(), Vec::new(), Vec::new());
        {
            let dfa = &mut self.dfa;
            let step = |x: u32, b: u8| match dfa.next(x, b) {
                0 => DEAD,
                t => t,
            };
            let live = plain_successors(step, s, &self.plain, &mut cur, &mut next, &mut succ);
            self.grow();
            if !live {
                self.level[s as usize] = NO_LEVEL;
                return NO_LEVEL;
            }
            if succ.iter().all(|&t| t == s) {
                self.level[s as usize] = LEVEL_LOOP;
                return LEVEL_LOOP;
            }
        }
        if let Some(level) = self.sibling_level(s) {
            self.level[s as usize] = level;
            return level;
        }
        // A thread of s that no plain text can kill (a free string's body,
        // as every property name of an object with implicit extra keys has)
        // makes the reach unlimited without searching the states plain text
        // leads to, which for property names are one per declared prefix.
        let plain = &self.plain;
        let mut successors = |dfa: &mut LazyDfa, d: u32, out: &mut Vec<u32>| {
            let step = |x: u32, b: u8| match dfa.next(x, b) {
                0 => DEAD,
                t => t,
            };
            plain_successors(step, d, plain, &mut cur, &mut next, out)
        };
        if self.dfa.has_plain_loop_thread(s, &mut successors) {
            self.grow();
            let level = LEVEL_UNLIMITED;
            self.level[s as usize] = level;
            return level;
        }
        let mut index = HashMap::<u32, u32, foldhash::fast::RandomState>::default();
        index.insert(s, 0);
        let mut states = vec![s];
        let mut depth = vec![0u32];
        let mut ok = Vec::new();
        // Successors of state k: succ[off[k]..off[k + 1]] (indices into states).
        let mut off = vec![0u32];
        let mut edges: Vec<u32> = Vec::new();
        let mut cut = None;
        // States met whose plain text never dies, known from an earlier
        // search (a level of unlimited reach is exact): not searched again.
        // Other objects' property names lead into the same name states, and
        // without this each search walked all of them again.
        let mut known = Vec::new();
        let mut k = 0;
        while k < states.len() {
            let q = states[k];
            let cached = self.level.get(q as usize).copied().unwrap_or(LEVEL_YET);
            if k > 0 && (cached == LEVEL_LOOP || cached == LEVEL_UNLIMITED) {
                // No successors: the reverse search finds no dying state
                // through it, so its reach, and theirs, stays unlimited.
                ok.push(true);
                known.push(k);
                off.push(edges.len() as u32);
                k += 1;
                continue;
            }
            succ.clear();
            let dfa = &mut self.dfa;
            let step = |x: u32, b: u8| match dfa.next(x, b) {
                0 => DEAD,
                t => t,
            };
            let live = plain_successors(step, q, &self.plain, &mut cur, &mut next, &mut succ);
            ok.push(live);
            if live {
                for &t in &succ {
                    let j = *index.entry(t).or_insert_with(|| {
                        states.push(t);
                        depth.push(depth[k] + 1);
                        (states.len() - 1) as u32
                    });
                    edges.push(j);
                }
            }
            off.push(edges.len() as u32);
            k += 1;
            if states.len() > PLAIN_SEARCH {
                // States before k are searched; the first unsearched one's
                // depth bounds the reach of s from below.
                let first_not_ok = (0..k).filter(|&i| !ok[i]).map(|i| depth[i]).min();
                cut = Some(first_not_ok.unwrap_or(u32::MAX).min(depth[k]));
                break;
            }
        }
        self.grow();
        let level_of = |reach: u32, is_loop: bool| {
            if reach == u32::MAX && is_loop {
                LEVEL_LOOP
            } else {
                level_of_reach(reach)
            }
        };
        if let Some(reach) = cut {
            let level = level_of(reach, false);
            self.level[s as usize] = level;
            self.add_level_sibling(s);
            return level;
        }
        // Exact reach of every state found: a reverse breadth-first search
        // from the states where some plain character dies.
        let n = states.len();
        let seeds: Vec<u32> = (0..n as u32).filter(|&i| !ok[i as usize]).collect();
        let reach = reverse_reach(n, &seeds, &off, &edges);
        let mut known = known.into_iter().peekable();
        for i in 0..n {
            if known.next_if_eq(&i).is_some() {
                continue;
            }
            // A string body: every plain character leads back to it.
            let is_loop = ok[i]
                && edges[off[i] as usize..off[i + 1] as usize]
                    .iter()
                    .all(|&j| j as usize == i);
            self.level[states[i] as usize] = level_of(reach[i], is_loop);
            self.add_level_sibling(states[i]);
        }
        self.level[s as usize]
    }

    /// Whether `s` is a string body's loop (every plain character leads
    /// back to it). A state one plain character leads elsewhere is not,
    /// and its level is not searched for this.
    fn is_loop(&mut self, s: u32) -> bool {
        self.grow();
        match self.level[s as usize] {
            LEVEL_YET => match self.plain.ascii.first().copied() {
                Some(b) if self.next(s, b) != s => false,
                _ => self.plain_level(s) == LEVEL_LOOP,
            },
            l => l == LEVEL_LOOP,
        }
    }

    /// States found so far.
    pub fn state_count(&self) -> usize {
        self.dfa.state_count()
    }

    /// The limit the automaton hit while growing, if any.
    pub fn limit_error(&self) -> Option<LimitHit> {
        self.dfa.limit_error().map(|e| LimitHit::Determinize {
            rule: None,
            source: e.clone(),
        })
    }
}

/// Most tokens a mask kept as an id list ([`Mask::Sparse`]) holds: 4 KB of
/// ids, against 19 KB for a Qwen bitset.
const SPARSE_MAX: usize = 1024;

/// A state's mask: a bitset shared by the states that have it, or the ids
/// of a small one (in trie order: nothing reads them in id order), plus
/// the plain tokens of a plain level, with its bitset made on demand.
enum Mask {
    /// A bitset and its fingerprint.
    Dense(Arc<TokenSet>, u64),
    Sparse {
        /// The plain level whose set ([`trie::PlainLevel::set`], disjoint
        /// from `ids`) the mask also holds.
        level: Option<u8>,
        ids: Box<[u32]>,
        dense: OnceLock<Arc<TokenSet>>,
    },
}

impl Mask {
    /// The mask as a bitset (an id list's made on first use, shared with
    /// equal masks of `lazy`).
    fn dense(&self, lazy: &Lazy, tries: &VocabTries, width: usize) -> &Arc<TokenSet> {
        match self {
            Mask::Dense(a, _) => a,
            Mask::Sparse { level, ids, dense } => dense.get_or_init(|| {
                let (mut set, mut fp) = match level {
                    Some(l) => {
                        let l = tries.plain_level(*l as usize);
                        (l.set.clone(), l.fingerprint)
                    }
                    None => (TokenSet::new(width), 0u64),
                };
                for &t in ids.iter() {
                    set.insert(TokenId(t));
                    fp = fp.wrapping_add(mix(t));
                }
                lazy.intern(set, fp)
            }),
        }
    }
}

/// A state's mask, computed once.
type MaskCell = OnceLock<Arc<Mask>>;

/// The lazy half of a [`super::TokenIndex`].
pub(super) struct Lazy {
    core: Mutex<Core>,
    pub start: u32,
    /// Rows and state facts readable without the lock.
    published: Published,
    classes: Classes,
    budgets: Slots,
    /// Write-once mask cells, one per state.
    masks: Arena<MaskCell>,
    /// Distinct masks by hash, so equal masks share one allocation.
    distinct: Mutex<HashMap<u64, Vec<Arc<TokenSet>>, foldhash::fast::RandomState>>,
    /// Masks kept as id lists ([`Mask::Sparse`]) and their ids' bytes.
    sparse: std::sync::atomic::AtomicUsize,
    sparse_bytes: std::sync::atomic::AtomicUsize,
    /// Masks computed from a free part's ([`Lazy::free_part_mask`]).
    from_free_parts: std::sync::atomic::AtomicUsize,
    /// Masks shared with a state earlier along a run of copies
    /// ([`LazyDfa::shifted_back`]).
    from_shifts: std::sync::atomic::AtomicUsize,
    /// Masks made from a sibling's ([`Lazy::sibling_mask`]).
    from_siblings: std::sync::atomic::AtomicUsize,
}

impl Lazy {
    /// Wraps `dfa` (start state already checked live) with room for
    /// `max_states` states.
    pub fn new(mut dfa: LazyDfa, max_states: usize) -> Lazy {
        dfa.set_max_states(max_states);
        dfa.set_class_rows();
        let classes = dfa.byte_classes();
        let start = dfa.start();
        let lazy = Lazy {
            published: Published::new(classes, max_states),
            classes: Classes::new(&classes),
            budgets: Slots::new(max_states),
            core: Mutex::new(Core {
                dfa,
                // Until a mask sets it: no run's bound holds.
                horizon: u32::MAX,
                info_published: 0,
                plain: PlainReps::new(&classes),
                level: Vec::new(),
                uniform: Vec::new(),
                byte_chains: Vec::new(),
                byte_chain_ids: HashMap::default(),
                byte_succ: HashMap::default(),
                scratch: None,
                class_bytes: class_byte_sets(&classes),
                settled: HashMap::default(),
                level_siblings: HashMap::default(),
                mask_siblings: HashMap::default(),
                crossings: HashMap::default(),
            }),
            start,
            masks: Arena::new(max_states, 1, MASK_BASE),
            distinct: Mutex::new(HashMap::default()),
            sparse: Default::default(),
            sparse_bytes: Default::default(),
            from_free_parts: Default::default(),
            from_shifts: Default::default(),
            from_siblings: Default::default(),
        };
        lazy.publish_info(&mut lazy.core());
        lazy
    }

    /// Runs `f` on the locked automaton, then publishes the facts of the
    /// states it found (rows: see [`Lazy::walk_locked`]).
    fn locked<R>(&self, f: impl FnOnce(&mut Core) -> R) -> R {
        let mut core = self.core();
        let r = f(&mut core);
        self.publish_info(&mut core);
        r
    }

    /// The slow path of a walk: the rest of `bytes` from `s` under the lock,
    /// publishing every transition taken. This is the only place
    /// transitions are published: most a first visit finds are those of
    /// its trie walk's prefixes, which no matcher enters (publishing each
    /// row when explored was a sixth of a first visit's time, and most of
    /// the memory it touched). One transition at a time, since rows are
    /// filled a class at a time ([`LazyDfa::set_class_rows`]): a state a
    /// matcher passes through inside a token is not explored whole for it.
    #[cold]
    fn walk_locked(&self, s: u32, bytes: &[u8]) -> u32 {
        self.locked(|core| {
            let mut s = s;
            for &b in bytes {
                let t = core.next(s, b);
                self.publish_info(core);
                self.published.publish(s, b, t);
                if t == DEAD {
                    return DEAD;
                }
                s = t;
            }
            s
        })
    }

    /// Publishes the facts of every state found so far.
    fn publish_info(&self, core: &mut Core) {
        let n = core.dfa.state_count();
        for s in core.info_published..n {
            let s = s as u32;
            let d = core.dfa.dist(s).min(ACCEPTS - 1);
            let acc = if core.dfa.is_accepting(s) { ACCEPTS } else { 0 };
            self.published.info.set(s, d | acc);
        }
        core.info_published = core.info_published.max(n);
    }

    /// The automaton, locked. A panic while it was held cannot leave it
    /// inconsistent for readers (rows are filled before they are marked), so
    /// a poisoned lock is entered anyway.
    pub fn core(&self) -> MutexGuard<'_, Core> {
        self.core.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn cell(&self, s: u32) -> Option<&MaskCell> {
        Some(&self.masks.get_or_alloc(s as usize)?[0])
    }

    /// The mask of `s`, computed on first use.
    fn mask(&self, s: u32, tries: &VocabTries, vocab: &Vocabulary) -> Option<&Mask> {
        let cell = self.cell(s)?;
        if let Some(m) = cell.get() {
            return Some(m);
        }
        let mask = self.locked(|core| cell.get_or_init(|| self.compute(core, s, tries, vocab)));
        Some(mask)
    }

    /// The mask of `s` as a bitset, computed on first use.
    pub fn allowed(&self, s: u32, tries: &VocabTries, vocab: &Vocabulary) -> Option<&TokenSet> {
        Some(
            self.mask(s, tries, vocab)?
                .dense(self, tries, vocab.logits_width()),
        )
    }

    /// Whether the mask of `s` holds `t`: an id list is searched, its
    /// bitset not made.
    pub fn allows(&self, s: u32, t: TokenId, tries: &VocabTries, vocab: &Vocabulary) -> bool {
        match self.mask(s, tries, vocab) {
            Some(Mask::Dense(set, _)) => set.contains(t),
            Some(Mask::Sparse { level, ids, dense }) => match dense.get() {
                Some(set) => set.contains(t),
                None => {
                    level.is_some_and(|l| tries.plain_level(l as usize).set.contains(t))
                        || ids.contains(&t.0)
                }
            },
            None => false,
        }
    }

    /// Writes the mask of `s` into a bitmask row (see
    /// [`super::TokenIndex::fill_row`]): an id list without a bitset.
    pub fn fill_row(&self, s: u32, tries: &VocabTries, vocab: &Vocabulary, row: &mut [u32]) {
        match self.mask(s, tries, vocab) {
            Some(Mask::Dense(set, _)) => set.write_u32_words(row),
            Some(Mask::Sparse { level, ids, .. }) => {
                match level {
                    Some(l) => tries.plain_level(*l as usize).set.write_u32_words(row),
                    None => row.fill(0),
                }
                for &t in ids.iter() {
                    if let Some(w) = row.get_mut(t as usize / 32) {
                        *w |= 1u32 << (t % 32);
                    }
                }
            }
            None => row.fill(0),
        }
    }

    /// The mask of `s` with the automaton already locked.
    fn allowed_locked(
        &self,
        core: &mut Core,
        s: u32,
        tries: &VocabTries,
        vocab: &Vocabulary,
    ) -> Option<Arc<TokenSet>> {
        let cell = self.cell(s)?;
        Some(
            cell.get_or_init(|| self.compute(core, s, tries, vocab))
                .dense(self, tries, vocab.logits_width())
                .clone(),
        )
    }

    fn compute(
        &self,
        core: &mut Core,
        s: u32,
        tries: &VocabTries,
        vocab: &Vocabulary,
    ) -> Arc<Mask> {
        // A state one copy (or more) further along a counted repetition
        // than one whose mask it has: that mask, shared.
        let horizon = tries.full.max_depth as u32;
        core.horizon = horizon;
        if let Some(t) = core.dfa.shifted_back(s, horizon) {
            if let Some(cell) = self.cell(t) {
                let m = cell
                    .get_or_init(|| self.compute(core, t, tries, vocab))
                    .clone();
                self.from_shifts.fetch_add(1, Ordering::Relaxed);
                return m;
            }
        }
        // The set's fingerprint (the sum of `mix` over its ids) is kept up to
        // date as ids are added, so equal masks are found without hashing
        // 19 KB.
        let mut warm = None;
        let sibling = self.sibling_mask(core, s, tries, vocab);
        let mut m = match sibling.or_else(|| self.free_part_mask(core, s, tries, vocab, &mut warm))
        {
            Some(m) => m,
            None => match self.chain_mask(core, s, tries) {
                Some(m) => m,
                None => match self.byte_chain_mask(core, s, tries) {
                    Some(m) => m,
                    None => self.level_mask(core, s, tries, vocab),
                },
            },
        };
        if core.is_accepting(s) {
            for &e in vocab.eos() {
                m.insert(e.0);
            }
        }
        if let Some(ids) = m.ids.take() {
            if ids.len() <= SPARSE_MAX {
                Building::give_back(m.set, &ids, core);
                self.sparse.fetch_add(1, Ordering::Relaxed);
                self.sparse_bytes
                    .fetch_add(ids.len() * 4, Ordering::Relaxed);
                let mask = Arc::new(Mask::Sparse {
                    level: m.level,
                    ids: ids.into_boxed_slice(),
                    dense: OnceLock::new(),
                });
                self.warm(core, warm, tries, vocab);
                return mask;
            }
            // A big one keeps the scratch set as its bitset, with the
            // level's tokens.
            if let Some(l) = m.level {
                m.set.union_with(&tries.plain_level(l as usize).set);
            }
        }
        let fp = m.fp;
        let mask = Arc::new(Mask::Dense(self.intern(m.set, fp), fp));
        self.warm(core, warm, tries, vocab);
        mask
    }

    /// The one shared bitset equal to `set` (whose fingerprint is `fp`).
    fn intern(&self, set: TokenSet, fp: u64) -> Arc<TokenSet> {
        let mut distinct = self.distinct.lock().unwrap_or_else(|p| p.into_inner());
        let same = distinct.entry(fp).or_default();
        if let Some(a) = same.iter().find(|a| ***a == set) {
            return a.clone();
        }
        let a = Arc::new(set);
        same.push(a.clone());
        a
    }

    /// The mask of `s` (EOS aside) from its plain level: the level's plain
    /// tokens and a walk of the other tokens.
    fn level_mask(
        &self,
        core: &mut Core,
        s: u32,
        tries: &VocabTries,
        vocab: &Vocabulary,
    ) -> Building {
        // String-body states: the level's plain tokens are all allowed, so
        // only the other tokens are walked.
        let level = core.plain_level(s);
        let (mut m, trie) = if level == LEVEL_LOOP {
            let l = tries.plain_level(PLAIN_LEVELS.len() - 1);
            let mut m = Building::from(l);
            m.add_set(&tries.body().body_partial);
            (m, &tries.body().body_suffixes)
        } else if level != NO_LEVEL {
            // The level's plain tokens by reference, the walk's from
            // scratch (a 19 KB copy of the level's set per state was most
            // of the memory a first walk touched).
            let l = tries.plain_level(level as usize);
            let mut m = Building::scratch(core, vocab.logits_width());
            m.level = Some(level);
            m.fp = l.fingerprint;
            (m, &l.rest)
        } else {
            // From scratch: the automaton's empty set, and the ids added.
            (Building::scratch(core, vocab.logits_width()), &tries.full)
        };
        if level == (PLAIN_LEVELS.len() - 1) as u8 {
            self.walk_to_loops(core, s, tries, vocab, &mut m);
        } else {
            trie.walk_live_roots(s, core, |t| m.insert(t));
        }
        m.add_dups(trie);
        m
    }

    /// Walks the last plain level's `rest` trie from `s` (a state from which
    /// no plain text dies, but not a string body itself: a property name
    /// that may still become a declared one or any other). Where the walk,
    /// on a whole plain character, enters a string-body state `g`, every
    /// token below shares `g`'s fate: the rest of its plain prefix leads `g`
    /// back to `g`, and what follows is what `g`'s own mask was decided on.
    /// So the subtree is settled by `g`'s mask (computed once, cheaply, from
    /// the token suffixes) instead of by stepping the automaton through
    /// thousands of plain prefixes.
    fn walk_to_loops(
        &self,
        core: &mut Core,
        s: u32,
        tries: &VocabTries,
        vocab: &Vocabulary,
        set: &mut Building,
    ) {
        let trie = &tries.plain_level(PLAIN_LEVELS.len() - 1).rest;
        let boundary = &tries.body().body_rest_boundary;
        let mut stack = vec![0u32; trie.max_depth + 1];
        stack[0] = s;
        let n = trie.len();
        let mut i = 0usize;
        while i < n {
            let d = trie.depth[i] as usize;
            let st = core.next(stack[d - 1], trie.byte[i]);
            if st == DEAD {
                i = trie.end[i] as usize;
                continue;
            }
            if boundary[i] && st != s && core.is_loop(st) {
                let end = trie.end[i] as usize;
                if end - i < SETTLED_MEMO {
                    if let Some(m) = self.allowed_locked(core, st, tries, vocab) {
                        allowed_below(trie, i..end, &m).for_each(|t| set.insert(t));
                        i = end;
                        continue;
                    }
                } else if let Some(ids) = self.settled(core, st, i, tries, vocab) {
                    for &t in ids.iter() {
                        set.insert(t);
                    }
                    i = end;
                    continue;
                }
            }
            stack[d] = st;
            let t = trie.token[i];
            if t != trie::NONE {
                set.insert(t);
            }
            i += 1;
        }
    }

    /// The tokens of the last plain level's `rest` trie below node `i`
    /// that the mask of string-body state `g` allows, found once per
    /// `(g, i)`: [`Lazy::walk_to_loops`] settles the subtree of a node where
    /// it enters `g`, and the walks of every state of a property name enter
    /// the same free-key loop at the same first characters (testing each
    /// of the subtree's tokens against `g`'s mask every time was 20 µs of
    /// each first visit of a name's state: the trie has twelve thousand
    /// nodes, most of them settled at the first character).
    fn settled(
        &self,
        core: &mut Core,
        g: u32,
        i: usize,
        tries: &VocabTries,
        vocab: &Vocabulary,
    ) -> Option<Arc<[u32]>> {
        if let Some(ids) = core.settled.get(&(g, i as u32)) {
            return Some(ids.clone());
        }
        let m = self.allowed_locked(core, g, tries, vocab)?;
        let trie = &tries.plain_level(PLAIN_LEVELS.len() - 1).rest;
        let ids: Arc<[u32]> = allowed_below(trie, i..trie.end[i] as usize, &m).collect();
        core.settled.insert((g, i as u32), ids.clone());
        Some(ids)
    }

    /// Distinct masks computed so far and their memory (id lists counted
    /// each; a bitset made from one on demand counts among the bitsets).
    pub fn mask_memory(&self) -> (usize, usize) {
        let distinct = self.distinct.lock().unwrap_or_else(|p| p.into_inner());
        let n: usize = distinct.values().map(Vec::len).sum();
        let bytes: usize = distinct.values().flatten().map(|a| a.memory_usage()).sum();
        (
            n + self.sparse.load(Ordering::Relaxed),
            bytes + self.sparse_bytes.load(Ordering::Relaxed),
        )
    }
}

/// The tokens of `trie`'s nodes `nodes` (a subtree) that `m` allows.
fn allowed_below<'a>(
    trie: &'a trie::TokenTrie,
    nodes: std::ops::Range<usize>,
    m: &'a TokenSet,
) -> impl Iterator<Item = u32> + 'a {
    trie.token[nodes]
        .iter()
        .copied()
        .filter(move |&t| t != trie::NONE && m.contains(TokenId(t)))
}

/// Per byte class of `classes`, its bytes as a 256-bit set.
fn class_byte_sets(classes: &[u8; 256]) -> Vec<[u64; 4]> {
    let n = classes.iter().map(|&c| c as usize).max().unwrap_or(0) + 1;
    let mut sets = vec![[0u64; 4]; n];
    for (b, &c) in classes.iter().enumerate() {
        sets[c as usize][b / 64] |= 1 << (b % 64);
    }
    sets
}

impl super::Backend for Lazy {
    fn start(&self) -> u32 {
        self.start
    }

    fn num_states(&self) -> usize {
        self.core().state_count()
    }

    #[inline]
    fn is_accepting(&self, s: u32) -> bool {
        match self.published.info(s) {
            Some((acc, _)) => acc,
            None => self.core().is_accepting(s),
        }
    }

    fn dist(&self, s: u32) -> u32 {
        match self.published.info(s) {
            Some((_, d)) => d,
            None => self.core().dist(s),
        }
    }

    fn allowed(&self, s: u32, tries: &VocabTries, vocab: &Vocabulary) -> Option<&TokenSet> {
        Lazy::allowed(self, s, tries, vocab)
    }

    fn fill_row(&self, s: u32, tries: &VocabTries, vocab: &Vocabulary, row: &mut [u32]) {
        Lazy::fill_row(self, s, tries, vocab, row)
    }

    fn allows(&self, s: u32, t: TokenId, tries: &VocabTries, vocab: &Vocabulary) -> bool {
        Lazy::allows(self, s, t, tries, vocab)
    }

    #[inline]
    fn walk(&self, mut s: u32, bytes: &[u8]) -> u32 {
        for (i, &b) in bytes.iter().enumerate() {
            match self.published.next(s, b) {
                Some(DEAD) => return DEAD,
                Some(t) => s = t,
                None => return self.walk_locked(s, &bytes[i..]),
            }
        }
        s
    }

    #[inline]
    fn next_byte(&self, s: u32, b: u8) -> u32 {
        match self.published.next(s, b) {
            Some(t) => t,
            None => self.walk_locked(s, &[b]),
        }
    }

    fn classes(&self) -> &Classes {
        &self.classes
    }

    fn budgets(&self) -> &Slots {
        &self.budgets
    }

    fn memory_usage(&self) -> usize {
        self.mask_memory().1 + self.published.memory_usage() + self.budgets.memory_usage()
    }

    fn masks_from_free_parts(&self) -> usize {
        self.from_free_parts.load(Ordering::Relaxed)
    }

    fn masks_from_siblings(&self) -> usize {
        self.from_siblings.load(Ordering::Relaxed)
    }

    fn masks_from_shifts(&self) -> usize {
        self.from_shifts.load(Ordering::Relaxed)
    }

    fn limit_error(&self) -> Option<LimitHit> {
        self.core().limit_error()
    }
}
