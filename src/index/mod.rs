//! # Token index: which tokens keep the text inside the language
//!
//! A [`TokenIndex`] lifts a byte automaton to the token level over a
//! [`Vocabulary`]. For every live state of the automaton (reachable from the
//! start *and* able to reach acceptance) it knows the set of allowed tokens as
//! a bitset of the logits width ([`TokenSet`]); where a token leads is found by
//! walking its bytes through the compact transition table (a few table lookups),
//! which costs less than storing ~150k successor ids per string-interior state.
//!
//! ## Invariants
//!
//! * A token is in a state's mask exactly when reading its bytes ends in a live
//!   state, i.e. one from which acceptance is reachable. So no mask allows a
//!   dead end.
//! * EOS ids are in a mask exactly when the state accepts.
//! * Added tokens and ids past the tokenizer are never in a mask.
//! * A live state that allows nothing (possible only with a vocabulary that
//!   lacks some single bytes) is reported at build time as
//!   [`IndexError::IncompatibleVocabulary`].
//! * The index is immutable, `Send + Sync`, and shared through `Arc`.
//!
//! ## How it is built (eager mode)
//!
//! Measured in `shared/notes/index-build-measurements.md`: walking every token
//! from every state costs seconds; the walk over a depth-first token trie skips
//! a whole subtree at the first dead byte. On top of that, states are grouped
//! by **bounded-horizon equivalence**: two states whose futures agree (live vs
//! dead) on every string of at most `horizon` bytes allow the same tokens of
//! at most `horizon` bytes. A Moore-style partition refinement run for
//! `horizon` rounds finds those classes; one representative per class walks
//! the trie of *short* tokens, and every state walks the small trie of the few
//! *long* tokens on its own. Masks are deduplicated (one `Arc` per distinct
//! set), and class walks run in parallel on a rayon pool (`threads`).
//!
//! In lazy mode a state's mask is computed on first visit (one walk of the
//! full trie) and cached in the shared index; both modes give identical masks.
//! An index over a [`LazyDfa`](crate::dfa::LazyDfa) (a DFA too big to
//! determinize up front, see [`TokenIndex::build_dfa`]) is lazy in both: the
//! automaton and the masks grow as guides visit states (`lazy.rs`).
//!
//! ## Budget
//!
//! For every state the index keeps an upper bound on the fewest tokens that
//! reach acceptance: the greedy longest-token tokenization of the canonical
//! shortest byte completion. It is consistent along that path (taking its
//! first token lowers the bound by exactly one), which is what a `max_tokens`
//! guard needs to never cut a structure in half.

pub mod automaton;
mod lazy;
pub(crate) mod trie;

pub use automaton::{ByteAutomaton, LiveTable, DEAD};

use crate::vocab::{TokenId, Vocabulary};
use rayon::prelude::*;
use std::collections::HashMap;

/// Hash map with a fast, non-cryptographic hasher (keys here are our own).
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use trie::{TokenTrie, VocabTries};

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

/// How to build an index. Defaults are documented per field.
#[derive(Clone, Debug)]
pub struct IndexConfig {
    /// Precompute every state's mask at build time (default `true`). When
    /// `false`, masks are computed on first visit and cached.
    pub eager: bool,
    /// Worker threads for the eager build: 0 = all cores (default), 1 = the
    /// calling thread only.
    pub threads: usize,
    /// Longest token handled by the bounded-horizon class walk (default 16);
    /// longer tokens are walked per state.
    pub horizon: usize,
    /// Most automaton states explored (default 2,000,000).
    pub max_states: usize,
    /// Most memory for distinct masks, in bytes (default 1 GiB).
    pub max_mask_memory: usize,
    /// Give up with [`IndexError::Deadline`] after this instant (default none).
    pub deadline: Option<Instant>,
}

impl Default for IndexConfig {
    fn default() -> Self {
        IndexConfig {
            eager: true,
            threads: 0,
            horizon: 16,
            max_states: 2_000_000,
            max_mask_memory: 1 << 30,
            deadline: None,
        }
    }
}

/// Why an index could not be built.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("the language is empty: no text can ever be accepted")]
    EmptyLanguage,
    #[error("the automaton has more than {limit} states (raise it with --max-states / IndexConfig::max_states)")]
    TooManyStates { limit: usize },
    #[error(
        "the masks need more than {limit} bytes (raise it with --max-mask-memory / IndexConfig::max_mask_memory)"
    )]
    TooMuchMemory { limit: usize },
    #[error("incompatible vocabulary: after {prefix:?} the text can continue but no token fits")]
    IncompatibleVocabulary { prefix: String },
    #[error("index build passed its deadline")]
    Deadline,
    #[error("cannot start the thread pool: {0}")]
    Threads(String),
    #[error(transparent)]
    Dfa(#[from] crate::dfa::DfaError),
}

/// Figures about a built index.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct IndexStats {
    /// Live states (reachable and able to reach acceptance).
    pub states: usize,
    /// Byte classes of the automaton.
    pub byte_classes: usize,
    /// Bounded-horizon classes walked (eager mode).
    pub horizon_classes: usize,
    /// States where every plain token is allowed (string interiors).
    pub body_states: usize,
    /// Distinct masks stored.
    pub distinct_masks: usize,
    /// Memory of the table and masks, in bytes.
    pub memory_bytes: usize,
    /// Wall time of the build.
    pub build_time: Duration,
    /// Whether the automaton and masks are built on demand (then `states`
    /// counts the states found when the index was built).
    pub lazy: bool,
}

/// The per-state allowed-token sets of an automaton over a vocabulary.
pub struct TokenIndex {
    vocab: Arc<Vocabulary>,
    tries: Arc<VocabTries>,
    table: LiveTable,
    masks: Vec<OnceLock<Arc<TokenSet>>>,
    /// Upper bound on tokens to acceptance, per state (`u32::MAX`: unknown).
    budget: Vec<u32>,
    /// The largest known budget of any state (`None`: unknown, as for a
    /// lazy index); see [`TokenIndex::max_tokens_to_accept`].
    max_budget: Option<u32>,
    /// Token-level liveness, when the vocabulary lacks single bytes (see
    /// `enforce_token_liveness`); `None`: byte-live implies token-live.
    token_live: Option<Vec<bool>>,
    /// Per state, the plain level whose tokens are all allowed there
    /// (`NO_LEVEL`: none; see [`plain_reach`]).
    plain_level: Vec<u8>,
    /// `Some` for an index over a lazy DFA: then `table`, `masks`, `budget`
    /// and `plain_level` are empty and every query goes through here.
    lazy: Option<Box<lazy::Lazy>>,
    empty: TokenSet,
    stats: IndexStats,
}

impl std::fmt::Debug for TokenIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenIndex")
            .field("stats", &self.stats)
            .finish()
    }
}

/// An identifier of a live state of an index.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StateId(pub u32);

impl TokenIndex {
    /// Builds the index of `automaton` over `vocab`.
    pub fn build<A: ByteAutomaton>(
        automaton: &A,
        vocab: Arc<Vocabulary>,
        config: &IndexConfig,
    ) -> Result<TokenIndex, IndexError> {
        let t0 = Instant::now();
        let horizon = config.horizon.max(1);
        let tries = if horizon == IndexConfig::default().horizon {
            vocab
                .tries
                .get_or_init(|| Arc::new(VocabTries::new(&vocab, horizon)))
                .clone()
        } else {
            Arc::new(VocabTries::new(&vocab, horizon))
        };
        let table = LiveTable::new(automaton, config.max_states)?;
        let n = table.len();
        let mut index = TokenIndex {
            empty: TokenSet::new(vocab.logits_width()),
            masks: (0..n).map(|_| OnceLock::new()).collect(),
            budget: Vec::new(),
            max_budget: None,
            plain_level: Vec::new(),
            token_live: None,
            lazy: None,
            stats: IndexStats {
                states: n,
                byte_classes: table.stride,
                ..Default::default()
            },
            vocab,
            tries,
            table,
        };
        index.budget = index.compute_budget();
        index.max_budget = index
            .budget
            .iter()
            .copied()
            .filter(|&b| b != u32::MAX)
            .max();
        let reach = plain_reach(&index.table);
        index.plain_level = reach
            .iter()
            .map(|&r| {
                trie::PLAIN_LEVELS
                    .iter()
                    .rposition(|&k| k <= r)
                    .map_or(NO_LEVEL, |l| l as u8)
            })
            .collect();
        index.stats.body_states = index.plain_level.iter().filter(|&&l| l != NO_LEVEL).count();
        if config.eager {
            index.build_eager(config)?;
            index.enforce_token_liveness()?;
        } else {
            index.enforce_token_liveness()?;
        }
        index.stats.build_time = t0.elapsed();
        index.stats.memory_bytes = index.memory_usage();
        Ok(index)
    }

    /// Builds the index of a [`Dfa`](crate::dfa::Dfa): eagerly for a whole
    /// DFA ([`TokenIndex::build`]), lazily for a [`LazyDfa`](crate::dfa::LazyDfa):
    /// masks and the automaton itself then grow on first visit, and the build
    /// only checks the start state. A vocabulary that lacks some single byte
    /// needs the whole automaton (token-level liveness), so a lazy DFA is then
    /// finished and indexed eagerly.
    pub fn build_dfa(
        dfa: crate::dfa::Dfa,
        vocab: Arc<Vocabulary>,
        config: &IndexConfig,
    ) -> Result<TokenIndex, IndexError> {
        let dfa = match dfa {
            crate::dfa::Dfa::Eager(d) => return Self::build(&d, vocab, config),
            crate::dfa::Dfa::Lazy(d) => *d,
        };
        if !has_every_byte(&vocab) {
            return Self::build(&dfa.into_eager()?, vocab, config);
        }
        let t0 = Instant::now();
        let start = dfa.start();
        if start == 0 || dfa.dist(start) == u32::MAX {
            return Err(IndexError::EmptyLanguage);
        }
        let tries = vocab
            .tries
            .get_or_init(|| Arc::new(VocabTries::new(&vocab, IndexConfig::default().horizon)))
            .clone();
        let classes = dfa.byte_classes();
        let stride = classes.iter().map(|&c| c as usize).max().unwrap_or(0) + 1;
        let states = dfa.state_count();
        let lazy = lazy::Lazy::new(dfa, config.max_states);
        let mut index = TokenIndex {
            empty: TokenSet::new(vocab.logits_width()),
            masks: Vec::new(),
            budget: Vec::new(),
            max_budget: None,
            plain_level: Vec::new(),
            token_live: None,
            lazy: Some(Box::new(lazy)),
            stats: IndexStats {
                states,
                byte_classes: stride,
                lazy: true,
                ..Default::default()
            },
            table: LiveTable::empty(classes),
            vocab,
            tries,
        };
        // The first mask is part of what a caller waits for anyway.
        index.allowed(StateId(start));
        index.stats.build_time = t0.elapsed();
        if let Some(l) = &index.lazy {
            index.stats.distinct_masks = l.mask_memory().0;
        }
        index.stats.memory_bytes = index.memory_usage();
        Ok(index)
    }

    /// Whether the automaton and masks are built on demand.
    pub fn is_lazy(&self) -> bool {
        self.lazy.is_some()
    }

    /// The limit a lazy index's automaton hit while growing, if any: states
    /// past it were left without live transitions (their masks are empty).
    pub fn lazy_limit_error(&self) -> Option<String> {
        self.lazy.as_ref().and_then(|l| l.core().limit_error())
    }

    /// Whether masks were pruned by token-level liveness (the vocabulary lacks
    /// some single bytes, so some byte-live continuations cannot be spelled).
    pub fn is_token_pruned(&self) -> bool {
        self.token_live.is_some()
    }

    /// The vocabulary the index is over.
    pub fn vocab(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// Figures about the index.
    pub fn stats(&self) -> &IndexStats {
        &self.stats
    }

    /// The compact live transition table (`None` for an index over a lazy
    /// DFA, which has no complete table).
    pub fn table(&self) -> Option<&LiveTable> {
        self.lazy.is_none().then_some(&self.table)
    }

    /// The start state.
    pub fn start(&self) -> StateId {
        match &self.lazy {
            Some(l) => StateId(l.start),
            None => StateId(self.table.start),
        }
    }

    /// Number of live states (for a lazy index: states found so far, which
    /// may include some that cannot be completed; those are never entered).
    pub fn num_states(&self) -> usize {
        match &self.lazy {
            Some(l) => l.core().state_count(),
            None => self.table.len(),
        }
    }

    /// Whether the text that led to `s` is in the language.
    #[inline]
    pub fn is_accepting(&self, s: StateId) -> bool {
        match &self.lazy {
            Some(l) => l.core().is_accepting(s.0),
            None => self.table.accepting[s.0 as usize],
        }
    }

    /// The allowed tokens in `s` (EOS included where `s` accepts). Computed
    /// on first use in lazy mode.
    #[inline]
    pub fn allowed(&self, s: StateId) -> &TokenSet {
        if let Some(l) = &self.lazy {
            return l
                .allowed(s.0, &self.tries, &self.vocab)
                .unwrap_or(&self.empty);
        }
        self.masks[s.0 as usize].get_or_init(|| Arc::new(self.compute_mask(s.0)))
    }

    /// Whether some byte can follow the text that led to `s`.
    pub fn has_text_continuation(&self, s: StateId) -> bool {
        match &self.lazy {
            Some(l) => l.core().has_continuation(s.0),
            None => self
                .table
                .reps
                .iter()
                .any(|&b| self.table.next(s.0, b) != DEAD),
        }
    }

    /// The state after byte `b` in `s`; `None` when `b` cannot follow.
    pub fn next_byte_state(&self, s: StateId, b: u8) -> Option<StateId> {
        let n = match &self.lazy {
            Some(l) => l.core().next(s.0, b),
            None => self.table.next(s.0, b),
        };
        (n != DEAD).then_some(StateId(n))
    }

    /// An empty set of the logits width.
    pub fn empty_set(&self) -> &TokenSet {
        &self.empty
    }

    /// The state after `t` in `s`; `None` when `t` is not allowed there. EOS
    /// leaves the state unchanged (and is allowed only when `s` accepts).
    #[inline]
    pub fn next_state(&self, s: StateId, t: TokenId) -> Option<StateId> {
        match self.vocab.token_bytes(t) {
            Some(bytes) if !bytes.is_empty() => {
                let n = match &self.lazy {
                    Some(l) => l.core().walk(s.0, bytes),
                    None => self.table.walk(s.0, bytes),
                };
                let live = n != DEAD && self.token_live.as_ref().is_none_or(|l| l[n as usize]);
                live.then_some(StateId(n))
            }
            Some(_) => None,
            None => (self.vocab.is_eos(t) && self.is_accepting(s)).then_some(s),
        }
    }

    /// An upper bound on the fewest tokens that bring `s` to acceptance
    /// (0 when `s` accepts); `None` when the vocabulary cannot spell the
    /// shortest completion.
    #[inline]
    pub fn tokens_to_accept(&self, s: StateId) -> Option<u32> {
        let b = match &self.lazy {
            Some(l) => l.core().budget(&self.tries, s.0),
            None => self.budget[s.0 as usize],
        };
        (b != u32::MAX).then_some(b)
    }

    /// An upper bound on [`TokenIndex::tokens_to_accept`] over every state
    /// (`None` when not known, as for a lazy index). With more tokens left
    /// than this, no token can break a `max_tokens` budget.
    pub fn max_tokens_to_accept(&self) -> Option<u32> {
        self.max_budget
    }

    /// Shortest completion of `s`, in bytes.
    pub fn bytes_to_accept(&self, s: StateId) -> u32 {
        match &self.lazy {
            Some(l) => l.core().dist(s.0),
            None => self.table.dist[s.0 as usize],
        }
    }

    /// The byte every continuation of `s` must start with, if there is one
    /// and `s` does not accept.
    #[inline]
    pub fn forced_byte(&self, s: StateId) -> Option<u8> {
        match &self.lazy {
            Some(l) => l.core().forced_byte(s.0),
            None => self.table.forced[s.0 as usize],
        }
    }

    fn memory_usage(&self) -> usize {
        let mut seen = std::collections::HashSet::new();
        if let Some(l) = &self.lazy {
            return l.mask_memory().1;
        }
        let mut m = self.table.memory_usage() + self.budget.len() * 4 + self.masks.len() * 8;
        for cell in &self.masks {
            if let Some(a) = cell.get() {
                if seen.insert(Arc::as_ptr(a)) {
                    m += a.memory_usage();
                }
            }
        }
        m
    }

    fn eos_into(&self, s: u32, set: &mut TokenSet) {
        if self.table.accepting[s as usize] {
            for &e in self.vocab.eos() {
                set.insert(e);
            }
        }
    }

    /// One walk of the full trie from `s` (lazy mode and the reference).
    fn compute_mask(&self, s: u32) -> TokenSet {
        let mut set;
        let level = self.plain_level[s as usize];
        if level != NO_LEVEL {
            let level = &self.tries.plain_levels[level as usize];
            set = level.set.clone();
            walk_into(&level.rest, &self.table, s, &mut set);
        } else {
            set = TokenSet::new(self.vocab.logits_width());
            walk_into(&self.tries.full, &self.table, s, &mut set);
        }
        self.eos_into(s, &mut set);
        set
    }

    /// With every single byte in the vocabulary, a byte-live state is also
    /// live at the token level (spell the completion byte by byte). Without,
    /// a state may allow tokens yet never reach acceptance in tokens (`a*b`
    /// over a vocabulary without `b`): compute token-level liveness over the
    /// explicit token graph, drop tokens into token-dead states from every
    /// mask, and refuse the build when the start is token-dead or a
    /// token-live state is left with nothing. Costs states × allowed tokens;
    /// only vocabularies missing single bytes (small, custom ones) pay it.
    fn enforce_token_liveness(&mut self) -> Result<(), IndexError> {
        if has_every_byte(&self.vocab) {
            return Ok(());
        }
        let n = self.table.len();
        let masks: Vec<TokenSet> = (0..n as u32)
            .map(|s| self.allowed(StateId(s)).clone())
            .collect();
        let succ: Vec<Vec<(TokenId, u32)>> = (0..n)
            .map(|s| {
                masks[s]
                    .iter()
                    .filter(|&t| !self.vocab.is_eos(t))
                    .filter_map(|t| {
                        let b = self.vocab.token_bytes(t)?;
                        let x = self.table.walk(s as u32, b);
                        (x != DEAD).then_some((t, x))
                    })
                    .collect()
            })
            .collect();
        let mut live: Vec<bool> = self.table.accepting.clone();
        loop {
            let mut changed = false;
            for s in 0..n {
                if !live[s] && succ[s].iter().any(|&(_, x)| live[x as usize]) {
                    live[s] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        if !live[self.table.start as usize] {
            return Err(self.incompatible(self.table.start));
        }
        let cells: Vec<OnceLock<Arc<TokenSet>>> = (0..n).map(|_| OnceLock::new()).collect();
        for s in 0..n {
            let mut m = masks[s].clone();
            for &(t, x) in &succ[s] {
                if !live[x as usize] {
                    m.remove(t);
                }
            }
            if live[s] && m.is_empty() {
                return Err(self.incompatible(s as u32));
            }
            let _ = cells[s].set(Arc::new(m));
        }
        self.masks = cells;
        self.token_live = Some(live);
        Ok(())
    }

    fn incompatible(&self, s: u32) -> IndexError {
        IndexError::IncompatibleVocabulary {
            prefix: String::from_utf8_lossy(&self.example_prefix(s)).into_owned(),
        }
    }

    /// Some text leading from the start to `s` (BFS over byte classes).
    fn example_prefix(&self, target: u32) -> Vec<u8> {
        let n = self.table.len();
        let mut parent: Vec<Option<(u32, u8)>> = vec![None; n];
        let mut seen = vec![false; n];
        let mut queue = std::collections::VecDeque::from([self.table.start]);
        seen[self.table.start as usize] = true;
        while let Some(s) = queue.pop_front() {
            if s == target {
                break;
            }
            for &b in &self.table.reps {
                let t = self.table.next(s, b);
                if t != DEAD && !seen[t as usize] {
                    seen[t as usize] = true;
                    parent[t as usize] = Some((s, b));
                    queue.push_back(t);
                }
            }
        }
        let mut out = Vec::new();
        let mut s = target;
        while let Some((p, b)) = parent[s as usize] {
            out.push(b);
            s = p;
        }
        out.reverse();
        out
    }

    /// Greedy tokenization of each state's canonical shortest completion.
    fn compute_budget(&self) -> Vec<u32> {
        let t = &self.table;
        let n = t.len();
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.sort_unstable_by_key(|&s| t.dist[s as usize]);
        let mut budget = vec![u32::MAX; n];
        for &s in &order {
            if t.accepting[s as usize] {
                budget[s as usize] = 0;
                continue;
            }
            // Follow the canonical path, at most the longest token's length.
            let mut path_states = Vec::with_capacity(16);
            let mut cur = s;
            let tok = trie::longest_prefix_token(&self.tries.full, |k| {
                if k == 0 {
                    cur = s;
                    path_states.clear();
                }
                if t.accepting[cur as usize] {
                    return None;
                }
                let b = t.next_byte[cur as usize];
                cur = t.next(cur, b);
                path_states.push(cur);
                Some(b)
            });
            if let Some((len, _)) = tok {
                let after = path_states[len - 1];
                let rest = budget[after as usize];
                if rest != u32::MAX {
                    budget[s as usize] = rest + 1;
                }
            }
        }
        budget
    }

    /// Every mask at build time. A state's mask is the union of: its plain
    /// level's precomputed set (string-body states), one walk of the tokens
    /// of at most `horizon` bytes shared by its bounded-horizon class (and
    /// plain level), and a walk of the longer tokens from the state itself.
    fn build_eager(&mut self, config: &IndexConfig) -> Result<(), IndexError> {
        let n = self.table.len();
        let width = self.vocab.logits_width();
        let level = &self.plain_level;
        let rounds = self.tries.horizon.min(self.tries.short.max_depth);
        let (class_of, _) = horizon_classes(&self.table, rounds);
        // One short walk per (class, plain level) pair.
        let mut walk_of_key: FastMap<(u32, u8), u32> = FastMap::default();
        let mut walks: Vec<(u32, u8)> = Vec::new(); // (representative, level)
        let walk_of: Vec<u32> = (0..n)
            .map(|s| {
                let key = (class_of[s], level[s]);
                *walk_of_key.entry(key).or_insert_with(|| {
                    walks.push((s as u32, level[s]));
                    walks.len() as u32 - 1
                })
            })
            .collect();
        self.stats.horizon_classes = walks.len();
        let table = &self.table;
        let tries = &self.tries;
        let short_trie = |l: u8| {
            if l == NO_LEVEL {
                &tries.short
            } else {
                &tries.plain_levels[l as usize].rest_short
            }
        };
        let long_trie = |l: u8| {
            if l == NO_LEVEL {
                &tries.long
            } else {
                &tries.plain_levels[l as usize].rest_long
            }
        };
        let expired = std::sync::atomic::AtomicBool::new(false);
        let past_deadline = || {
            if let Some(d) = config.deadline {
                if Instant::now() > d {
                    expired.store(true, std::sync::atomic::Ordering::Relaxed);
                }
            }
            expired.load(std::sync::atomic::Ordering::Relaxed)
        };
        // Short walks are lists of ids (most are a handful of tokens; a
        // 19 KB bitset per walk was most of their cost), in the trie's
        // byte-lexicographic order, so equal sets are equal lists; a walk
        // whose list would outgrow a bitset becomes one.
        let mut short_lists: Vec<Walked> = Vec::new();
        let mut short_fps: Vec<u64> = Vec::new();
        let mut long_lists: Vec<Vec<u32>> = Vec::new();
        run_with_threads(config.threads, &mut || {
            (short_lists, short_fps) = walks
                .par_iter()
                .map(|&(s, l)| {
                    let mut walked = Walked::List(Vec::new());
                    let mut fp = 0u64;
                    if !past_deadline() {
                        short_trie(l).walk(
                            s,
                            |s, b| table.next(s, b),
                            |t| {
                                walked.push(t, width);
                                fp = fp.wrapping_add(mix(t));
                            },
                        );
                    }
                    (walked, fp)
                })
                .unzip();
            // Liveness of the first `rounds` bytes is the same across a class:
            // when no long token survives that far from the representative,
            // none does from any state of the class, and the per-state walk
            // is skipped.
            let deep: Vec<bool> = walks
                .par_iter()
                .map(|&(s, l)| long_trie(l).reaches_depth(s, rounds, |s, b| table.next(s, b)))
                .collect();
            long_lists = (0..n as u32)
                .into_par_iter()
                .map(|s| {
                    let mut v = Vec::new();
                    if !deep[walk_of[s as usize] as usize] || (s % 64 == 0 && past_deadline()) {
                        return v;
                    }
                    long_trie(level[s as usize]).walk(s, |s, b| table.next(s, b), |t| v.push(t));
                    v
                })
                .collect();
        })?;
        if past_deadline() {
            return Err(IndexError::Deadline);
        }
        // Walks with equal results share one id, so that states differing
        // only in their class compose one mask.
        // (Keyed by fingerprint, confirmed by content: a collision only
        // costs a missed merge.)
        let mut short_ids: FastMap<u64, u32> = FastMap::default();
        let short_id: Vec<u32> = (0..short_lists.len())
            .map(|w| {
                let first = *short_ids.entry(short_fps[w]).or_insert(w as u32);
                if short_lists[first as usize] == short_lists[w] {
                    first
                } else {
                    w as u32
                }
            })
            .collect();
        // Compose per state and deduplicate. A mask's fingerprint is the sum
        // of `mix` over its ids, kept up to date as ids are added, so the
        // 19 KB sets are only compared, never hashed; a fingerprint hit is
        // confirmed by content (a collision only costs a missed merge).
        let mut by_key: FastMap<(u32, u8, bool, &[u32]), Arc<TokenSet>> = FastMap::default();
        let mut by_fp: FastMap<u64, Arc<TokenSet>> = FastMap::default();
        let mut distinct = 0usize;
        let mut memory = 0usize;
        for s in 0..n {
            let w = walk_of[s];
            let key = (
                short_id[w as usize],
                level[s],
                table.accepting[s],
                long_lists[s].as_slice(),
            );
            let mask = match by_key.get(&key) {
                Some(m) => m.clone(),
                None => {
                    let (mut set, mut fp) = if level[s] != NO_LEVEL {
                        let pl = &tries.plain_levels[level[s] as usize];
                        (pl.set.clone(), pl.fingerprint)
                    } else {
                        (TokenSet::new(width), 0)
                    };
                    // A plain level's set and its `rest` tries' tokens are
                    // disjoint, so the walk's fingerprint adds exactly.
                    short_lists[w as usize].add_to(&mut set);
                    fp = fp.wrapping_add(short_fps[w as usize]);
                    let mut add = |set: &mut TokenSet, t: u32| {
                        if set.insert_new(TokenId(t)) {
                            fp = fp.wrapping_add(mix(t));
                        }
                    };
                    for &t in &long_lists[s] {
                        add(&mut set, t);
                    }
                    for &(f, d) in &tries.full.dups {
                        if set.contains(TokenId(f)) {
                            add(&mut set, d);
                        }
                    }
                    if table.accepting[s] {
                        for &e in self.vocab.eos() {
                            add(&mut set, e.0);
                        }
                    }
                    let shared = by_fp.get(&fp).filter(|a| ***a == set).cloned();
                    let arc = match shared {
                        Some(a) => a,
                        None => {
                            memory += set.memory_usage();
                            if memory > config.max_mask_memory {
                                return Err(IndexError::TooMuchMemory {
                                    limit: config.max_mask_memory,
                                });
                            }
                            distinct += 1;
                            let a = Arc::new(set);
                            by_fp.entry(fp).or_insert_with(|| a.clone());
                            a
                        }
                    };
                    by_key.insert(key, arc.clone());
                    arc
                }
            };
            let _ = self.masks[s].set(mask);
        }
        self.stats.distinct_masks = distinct;
        Ok(())
    }
}

/// Runs `f` on `threads` workers: 1 is the calling thread only (rayon's
/// parallel iterators inside `f` then run sequentially on a one-thread
/// pool), 0 the global pool (all cores).
fn run_with_threads(threads: usize, f: &mut (dyn FnMut() + Send)) -> Result<(), IndexError> {
    if threads == 0 {
        f();
        return Ok(());
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| IndexError::Threads(e.to_string()))?;
    pool.install(f);
    Ok(())
}

/// Whether every single byte is a text token (then whatever text can follow
/// can be spelled, so byte-live states are token-live).
fn has_every_byte(vocab: &Vocabulary) -> bool {
    let mut single = [false; 256];
    for (_, b) in vocab.text_tokens() {
        if b.len() == 1 {
            single[b[0] as usize] = true;
        }
    }
    single.iter().all(|&x| x)
}

/// Adds to `set` the tokens of `trie` (and their duplicates) that keep `s`
/// live (lazy mode and the reference walk).
fn walk_into(trie: &TokenTrie, table: &LiveTable, s: u32, set: &mut TokenSet) {
    trie.walk(s, |s, b| table.next(s, b), |t| set.insert(TokenId(t)));
    for &(first, dup) in &trie.dups {
        if set.contains(TokenId(first)) {
            set.insert(TokenId(dup));
        }
    }
}

/// The result of one short walk: its ids in trie order, or a bitset once
/// the list would be larger than one.
#[derive(PartialEq, Eq)]
enum Walked {
    List(Vec<u32>),
    Set(TokenSet),
}

impl Walked {
    #[inline]
    fn push(&mut self, t: u32, width: usize) {
        match self {
            Walked::List(list) => {
                list.push(t);
                if list.len() * 32 > width {
                    let mut set = TokenSet::new(width);
                    for &x in list.iter() {
                        set.insert(TokenId(x));
                    }
                    *self = Walked::Set(set);
                }
            }
            Walked::Set(set) => set.insert(TokenId(t)),
        }
    }

    fn add_to(&self, set: &mut TokenSet) {
        match self {
            Walked::List(list) => list.iter().for_each(|&t| set.insert(TokenId(t))),
            Walked::Set(b) => set.union_with(b),
        }
    }
}

/// A token id's share of a set fingerprint (the sum over the set's ids:
/// order-independent, and updatable as ids are added).
#[inline]
pub(crate) fn mix(t: u32) -> u64 {
    (t as u64 ^ 0x9E37_79B9_7F4A_7C15).wrapping_mul(0xD6E8_FEB8_6659_FD93)
}

/// Partition refinement for `h` rounds: states in one class agree on
/// liveness for every string of at most `h` bytes. Returns the class of each
/// state and the number of classes.
fn horizon_classes(t: &LiveTable, h: usize) -> (Vec<u32>, usize) {
    let n = t.len();
    // The live transitions of each state, (class, target) in class order: most
    // states have a few among dozens of classes, so signatures are built
    // from these rather than from full rows.
    let mut off: Vec<u32> = Vec::with_capacity(n + 1);
    let mut edges: Vec<(u32, u32)> = Vec::new();
    for s in 0..n {
        off.push(edges.len() as u32);
        let row = &t.trans[s * t.stride..(s + 1) * t.stride];
        for (c, &x) in row.iter().enumerate() {
            if x != DEAD {
                edges.push((c as u32, x));
            }
        }
    }
    off.push(edges.len() as u32);
    let out = |s: usize| &edges[off[s] as usize..off[s + 1] as usize];
    let mut class = vec![0u32; n];
    let mut next = vec![0u32; n];
    let mut count = 1usize;
    for _ in 0..h {
        // A state's signature is its class and the classes its live
        // transitions lead to; states are looked up by the signature's hash
        // and confirmed against the class's first state (an unequal state
        // with an equal hash goes to an exact map).
        let same = |a: usize, b: usize, class: &[u32]| {
            class[a] == class[b]
                && out(a).len() == out(b).len()
                && out(a)
                    .iter()
                    .zip(out(b))
                    .all(|(x, y)| x.0 == y.0 && class[x.1 as usize] == class[y.1 as usize])
        };
        let mut by_hash: FastMap<u64, u32> = FastMap::default();
        by_hash.reserve(count * 2);
        let mut exact: FastMap<Vec<u32>, u32> = FastMap::default();
        let mut reps: Vec<u32> = Vec::new();
        for s in 0..n {
            let mut hash = (class[s] as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            for &(c, x) in out(s) {
                hash = (hash.rotate_left(26) ^ ((c as u64) << 32 | class[x as usize] as u64))
                    .wrapping_mul(0xD6E8_FEB8_6659_FD93);
            }
            let id = reps.len() as u32;
            let first = *by_hash.entry(hash).or_insert(id);
            next[s] = if first == id {
                reps.push(s as u32);
                id
            } else if same(reps[first as usize] as usize, s, &class) {
                first
            } else {
                let mut sig = vec![class[s]];
                for &(c, x) in out(s) {
                    sig.extend([c, class[x as usize]]);
                }
                let id = reps.len() as u32;
                let e = *exact.entry(sig).or_insert(id);
                if e == id {
                    reps.push(s as u32);
                }
                e
            };
        }
        let new_count = reps.len();
        std::mem::swap(&mut class, &mut next);
        if new_count == count {
            break;
        }
        count = new_count;
    }
    (class, count)
}

/// UTF-8 sequences of characters at or above U+0080 (RFC 3629 table), as
/// byte ranges per position.
const UTF8_SEQUENCES: &[&[(u8, u8)]] = &[
    &[(0xC2, 0xDF), (0x80, 0xBF)],
    &[(0xE0, 0xE0), (0xA0, 0xBF), (0x80, 0xBF)],
    &[(0xE1, 0xEC), (0x80, 0xBF), (0x80, 0xBF)],
    &[(0xED, 0xED), (0x80, 0x9F), (0x80, 0xBF)],
    &[(0xEE, 0xEF), (0x80, 0xBF), (0x80, 0xBF)],
    &[(0xF0, 0xF0), (0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF)],
    &[(0xF1, 0xF3), (0x80, 0xBF), (0x80, 0xBF), (0x80, 0xBF)],
    &[(0xF4, 0xF4), (0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF)],
];

pub(crate) const NO_LEVEL: u8 = u8::MAX;

/// Appends to `out` the states one plain character (a byte of `ascii`, or a
/// whole UTF-8 sequence over the class representatives of `utf8`) leads to
/// from `s`; false when one of them is dead.
fn plain_successors(
    mut step: impl FnMut(u32, u8) -> u32,
    s: u32,
    reps: &PlainReps,
    cur: &mut Vec<u32>,
    next: &mut Vec<u32>,
    out: &mut Vec<u32>,
) -> bool {
    for &b in &reps.ascii {
        let x = step(s, b);
        if x == DEAD {
            return false;
        }
        out.push(x);
    }
    for seq in &reps.utf8 {
        cur.clear();
        cur.push(s);
        for reps in seq {
            next.clear();
            for &q in cur.iter() {
                for &b in reps {
                    let x = step(q, b);
                    if x == DEAD {
                        return false;
                    }
                    if !next.contains(&x) {
                        next.push(x);
                    }
                }
            }
            std::mem::swap(cur, next);
        }
        out.extend_from_slice(cur);
    }
    true
}

/// For every state, how many *plain* characters may follow it for sure: every
/// printable ASCII byte but `"` and `\\` and every complete UTF-8 character
/// at or above U+0080 (through live intermediate states) counts as one, and
/// `r(s)` is the largest number such that every plain text of at most `r(s)`
/// characters from `s` stays live (`u32::MAX`: any length, a greatest
/// fixpoint). So in `s` every plain token of at most `r(s)` characters is
/// allowed, and the mask is a precomputed plain set plus a walk over the
/// other tokens ([`trie::PlainLevel`]). These are the interiors of JSON
/// strings — unbounded (`r = ∞`), counted by `maxLength` (`r` = what is
/// left), and property names — the most expensive states to walk otherwise.
/// Exact: liveness is all a mask needs.
/// One byte per class of the plain ASCII characters, and per UTF-8 sequence
/// shape one byte per class at each position (what [`plain_successors`]
/// tries).
pub(crate) struct PlainReps {
    ascii: Vec<u8>,
    utf8: Vec<Vec<Vec<u8>>>,
}

impl PlainReps {
    fn new(classes: &[u8; 256]) -> PlainReps {
        let mut seen = [false; 256];
        let mut ascii: Vec<u8> = Vec::new();
        for b in 0x20u8..=0x7E {
            if b != b'"' && b != b'\\' && !seen[classes[b as usize] as usize] {
                seen[classes[b as usize] as usize] = true;
                ascii.push(b);
            }
        }
        let utf8: Vec<Vec<Vec<u8>>> = UTF8_SEQUENCES
            .iter()
            .map(|seq| {
                seq.iter()
                    .map(|&(lo, hi)| {
                        let mut seen = [false; 256];
                        (lo..=hi)
                            .filter(|&b| {
                                let c = classes[b as usize] as usize;
                                !std::mem::replace(&mut seen[c], true)
                            })
                            .collect()
                    })
                    .collect()
            })
            .collect();
        PlainReps { ascii, utf8 }
    }
}

fn plain_reach(t: &LiveTable) -> Vec<u32> {
    let n = t.len();
    let reps = PlainReps::new(&t.classes);
    // Plain successors of each state (one character), or not a candidate.
    let mut ok = vec![true; n];
    let mut succ_start = vec![0u32; n + 1];
    let mut succ: Vec<u32> = Vec::new();
    let mut cur: Vec<u32> = Vec::new();
    let mut next: Vec<u32> = Vec::new();
    for s in 0..n as u32 {
        let first = succ.len();
        if !plain_successors(
            |q, b| t.next(q, b),
            s,
            &reps,
            &mut cur,
            &mut next,
            &mut succ,
        ) {
            ok[s as usize] = false;
            succ.truncate(first);
            succ_start[s as usize + 1] = succ.len() as u32;
            continue;
        }
        succ[first..].sort_unstable();
        let mut w = first;
        for r in first..succ.len() {
            if r == first || succ[r] != succ[w - 1] {
                succ[w] = succ[r];
                w += 1;
            }
        }
        succ.truncate(w);
        succ_start[s as usize + 1] = succ.len() as u32;
    }
    // Reverse edges, then remove states that reach a non-candidate.
    let mut rev_start = vec![0u32; n + 1];
    for &x in &succ {
        rev_start[x as usize + 1] += 1;
    }
    for k in 0..n {
        rev_start[k + 1] += rev_start[k];
    }
    let mut fill = rev_start.clone();
    let mut rev = vec![0u32; succ.len()];
    for s in 0..n {
        for &x in &succ[succ_start[s] as usize..succ_start[s + 1] as usize] {
            rev[fill[x as usize] as usize] = s as u32;
            fill[x as usize] += 1;
        }
    }
    // r = 0 where some plain character dies; otherwise 1 + the least r of
    // the plain successors: a BFS backwards from the r = 0 states.
    let mut reach = vec![u32::MAX; n];
    let mut queue: Vec<u32> = (0..n as u32).filter(|&s| !ok[s as usize]).collect();
    for &s in &queue {
        reach[s as usize] = 0;
    }
    let mut qi = 0;
    while qi < queue.len() {
        let x = queue[qi];
        qi += 1;
        for &p in &rev[rev_start[x as usize] as usize..rev_start[x as usize + 1] as usize] {
            if reach[p as usize] == u32::MAX {
                reach[p as usize] = reach[x as usize] + 1;
                queue.push(p);
            }
        }
    }
    reach
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The straightforward refinement (full rows as signatures) that
    /// `horizon_classes` must agree with.
    fn horizon_classes_dense(t: &LiveTable, h: usize) -> Vec<u32> {
        let n = t.len();
        let mut class = vec![0u32; n];
        for _ in 0..h {
            let mut map: HashMap<Vec<u32>, u32> = HashMap::new();
            let next: Vec<u32> = (0..n)
                .map(|s| {
                    let mut sig = vec![class[s]];
                    sig.extend((0..t.stride).map(|c| {
                        let x = t.trans[s * t.stride + c];
                        if x == DEAD {
                            u32::MAX
                        } else {
                            class[x as usize]
                        }
                    }));
                    let id = map.len() as u32;
                    *map.entry(sig).or_insert(id)
                })
                .collect();
            class = next;
        }
        class
    }

    fn same_partition(a: &[u32], b: &[u32]) -> bool {
        let mut ab: HashMap<u32, u32> = HashMap::new();
        let mut ba: HashMap<u32, u32> = HashMap::new();
        a.iter()
            .zip(b)
            .all(|(&x, &y)| *ab.entry(x).or_insert(y) == y && *ba.entry(y).or_insert(x) == x)
    }

    #[test]
    fn sparse_horizon_refinement_matches_the_dense_one() {
        for pattern in [
            r#"\{"name": "[a-z]{1,12}", "kind": (?:"alpha"|"beta"|"gamma")(?:, "n": -?[0-9]+)?\}"#,
            r#"\[(?:"(?:[^"\\]|\\.)*"(?:, ?"(?:[^"\\]|\\.)*"){0,3})?\]"#,
            r"(?:ab|cd|abcdx){1,6}[0-9]{0,20}",
            "",
        ] {
            let dfa = crate::dfa::ByteDfa::new(pattern, &Default::default()).unwrap();
            let t = LiveTable::new(&dfa, 1 << 20).unwrap();
            for h in [0, 1, 3, 16] {
                let (sparse, count) = horizon_classes(&t, h);
                let dense = horizon_classes_dense(&t, h);
                assert!(same_partition(&sparse, &dense), "{pattern} h={h}");
                let distinct: std::collections::HashSet<_> = sparse.iter().collect();
                assert_eq!(distinct.len(), count, "{pattern} h={h}");
            }
        }
    }
}
