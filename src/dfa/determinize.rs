//! # Subset construction over a Thompson NFA, sparse in the byte classes
//!
//! regex-automata's dense determinizer computes, for every DFA state, the
//! successor on *every* byte class and hashes each result (SipHash), even when
//! the NFA states in the DFA state read one or two classes at most. Schema
//! regexes have many byte classes (every character of every property name
//! splits the alphabet) and most DFA states have very few live transitions,
//! so most of that work finds the dead state. Here a DFA state's successors are
//! gathered from its NFA states' own byte ranges: classes no range covers go to
//! the dead state without any work, adjacent classes reached by the same NFA
//! states share one closure, and DFA states are keyed by the *sorted* set of
//! their byte-reading and matching NFA states, hashed with foldhash.
//!
//! Semantics are those of [`super::ByteDfa`]: anchored at the start, a text is
//! in the language when the state after its last byte contains the NFA's match
//! state (every thread is kept, as with `MatchKind::All`). NFAs with
//! look-around assertions are not handled here (the caller uses
//! regex-automata's determinizer for them).
//!
//! NFA states that cannot reach the match state are dropped from every
//! closure, so a DFA state is dead exactly when its key is empty (state 0):
//! the DFA never has a state that is alive but cannot be completed. The
//! fewest bytes from each NFA state to the match state are computed once, so a
//! DFA state's distance to acceptance is the least over its key, known the
//! moment the state is created. That is what lets [`Determinizer`] run
//! *lazily* ([`super::LazyDfa`]): rows are filled on demand (whole, or a
//! class at a time: [`Determinizer::explore_class`]), and liveness and
//! distances never need the whole automaton.

use super::nfa::{Kind, Nfa};
use super::regs::{self, Registers};
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// A determinized automaton: state 0 is the dead state; transitions are
/// `trans[state * stride + class]`.
pub(super) struct Table {
    pub classes: [u8; 256],
    pub stride: usize,
    pub trans: Vec<u32>,
    pub accepting: Vec<bool>,
    pub start: u32,
}

/// Which configured bound the construction hit.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Limit {
    /// The transition table (`DfaConfig::dfa_size_limit`).
    Dfa,
    /// The state keys and their map (`DfaConfig::determinize_size_limit`).
    Determinize,
}

/// Most NFA state ids [`Closure`] keeps memoized closures of (64 MiB); past
/// it, closures are searched each time.
const MEMO_CAP: usize = 16 << 20;

/// Closure scratch: a visited mark per NFA state and a DFS stack, and the
/// memoized closure of each single NFA state reached by a byte.
struct Closure {
    mark: Vec<u32>,
    generation: u32,
    stack: Vec<u32>,
    /// Scratch for one seed's closure.
    seed_scratch: Vec<u32>,
    /// Per NFA state, `(offset + 1, len)` of its closure in `arena`
    /// (`(0, 0)`: not memoized yet, so the table is allocated zeroed and
    /// its pages are only touched where closures are: most of a big NFA's
    /// states are never a DFA state's successor seed).
    memo: Vec<(u32, u32)>,
    arena: Vec<u32>,
}

impl Closure {
    fn new(n: usize) -> Closure {
        Closure {
            mark: vec![0; n],
            generation: 0,
            stack: Vec::new(),
            seed_scratch: Vec::new(),
            memo: vec![(0, 0); n],
            arena: Vec::new(),
        }
    }

    /// A fresh mark value (every mark is older).
    fn next_generation(&mut self) -> u32 {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.mark.iter_mut().for_each(|m| *m = 0);
            self.generation = 1;
        }
        self.generation
    }

    /// As [`Closure::run`], from the union of the seeds' own closures, each
    /// searched once and then kept: a DFA state's successors on a class are
    /// mostly the closure of one or a few NFA states that many other DFA
    /// states reach too, and the search walks a graph of millions of states
    /// in no useful order (a cache miss per state).
    fn of(&mut self, nfa: &Nfa, dist: &[u32], seeds: &[u32], out: &mut Vec<u32>) {
        out.clear();
        for &s in seeds {
            if self.memo[s as usize].0 == 0 {
                if self.arena.len() >= MEMO_CAP {
                    return self.run(nfa, dist, seeds, out);
                }
                let mut one = std::mem::take(&mut self.seed_scratch);
                self.run(nfa, dist, &[s], &mut one);
                let off = self.arena.len();
                self.arena.extend_from_slice(&one);
                self.memo[s as usize] = (off as u32 + 1, one.len() as u32);
                self.seed_scratch = one;
            }
        }
        if let [s] = seeds {
            let (off, len) = self.memo[*s as usize];
            let off = off as usize - 1;
            out.extend_from_slice(&self.arena[off..off + len as usize]);
            return;
        }
        // The closures overlap: keep each state once (by mark), then sort.
        let g = self.next_generation();
        for &s in seeds {
            let (off, len) = self.memo[s as usize];
            let off = off as usize - 1;
            for &q in &self.arena[off..off + len as usize] {
                let m = &mut self.mark[q as usize];
                if *m != g {
                    *m = g;
                    out.push(q);
                }
            }
        }
        out.sort_unstable();
    }

    /// Appends to `out`, sorted, the byte-reading and match states reachable
    /// from `seeds` through epsilon transitions.
    /// NFA states with `dist == u32::MAX` (no path to the match state) are
    /// neither kept nor followed.
    fn run(&mut self, nfa: &Nfa, dist: &[u32], seeds: &[u32], out: &mut Vec<u32>) {
        out.clear();
        let g = self.next_generation();
        self.stack.extend(seeds.iter().rev());
        while let Some(id) = self.stack.pop() {
            let m = &mut self.mark[id as usize];
            if *m == g || dist[id as usize] == u32::MAX {
                continue;
            }
            *m = g;
            match nfa.kind(id) {
                Kind::Bytes | Kind::Match => out.push(id),
                // (Operation states only occur with member sets, whose
                // closures `Registers` computes.)
                Kind::Eps | Kind::Op => self
                    .stack
                    .extend(nfa.edges(id).iter().rev().map(|e| e.next)),
            }
        }
        out.sort_unstable();
    }
}

/// Fewest bytes from each NFA state to the match state (`u32::MAX`: none), by
/// a 0-1 breadth-first search over reversed edges (epsilon edges cost 0, byte
/// edges 1).
pub(super) fn nfa_distances(nfa: &Nfa) -> Vec<u32> {
    let n = nfa.len();
    // Reversed edges in CSR form: (source, weight) per target.
    let mut count = vec![0u32; n + 1];
    let each = |f: &mut dyn FnMut(usize, usize, u8)| {
        for (id, kind, edges) in nfa.states() {
            let w = u8::from(kind == Kind::Bytes);
            for e in edges {
                f(e.next as usize, id as usize, w);
            }
        }
    };
    each(&mut |t, _, _| count[t + 1] += 1);
    for k in 0..n {
        count[k + 1] += count[k];
    }
    // Each target's edges are written from the end of its range down, so
    // `count[t]` ends as the range's start again (no second offset table).
    // An edge is its source, with the top bit set for a byte edge (NFA ids
    // are below 2^31).
    const BYTE_EDGE: u32 = 1 << 31;
    let mut rev = vec![0u32; count[n] as usize];
    each(&mut |t, src, w| {
        count[t + 1] -= 1;
        rev[count[t + 1] as usize] = src as u32 | if w == 1 { BYTE_EDGE } else { 0 };
    });
    // (Now `count[t + 1]` is the start of `t`'s range: shift back.)
    count.copy_within(1..=n, 0);
    count[n] = rev.len() as u32;
    let mut dist = vec![u32::MAX; n];
    let mut deque = std::collections::VecDeque::new();
    for q in 0..n as u32 {
        if nfa.is_match(q) {
            dist[q as usize] = 0;
            deque.push_back(q);
        }
    }
    while let Some(t) = deque.pop_front() {
        let d = dist[t as usize];
        for &e in &rev[count[t as usize] as usize..count[t as usize + 1] as usize] {
            let (src, w) = (e & !BYTE_EDGE, (e >> 31) as u8);
            let nd = d + w as u32;
            if nd < dist[src as usize] {
                dist[src as usize] = nd;
                if w == 0 {
                    deque.push_front(src);
                } else {
                    deque.push_back(src);
                }
            }
        }
    }
    dist
}

/// An edge reading text and marker bytes alike (the unanchored prefix's
/// `(?s-u:.)` among them: allowed where the anchored start cannot reach).
const MIXED: u32 = u32::MAX - 1;

/// The cost of a byte-range edge under call-marker `weights` (see
/// [`nfa_distances_weighted`]; [`MIXED`] for text and markers alike).
fn marker_cost(weights: &[u32; 256], start: u8, end: u8) -> u32 {
    if end < 0xF5 {
        return 1;
    }
    if start < 0xF5 {
        return MIXED;
    }
    // Markers alternated with one another share a range: the edge
    // costs the cheapest (each byte still leads to its own call).
    (start.max(0xF5)..=end)
        .map(|b| weights[b as usize])
        .min()
        .unwrap_or(u32::MAX)
}

/// [`nfa_distances`] where a byte at or above `0xF5` (no UTF-8 text holds
/// one) costs `weights[b]` instead of 1 (`u32::MAX`: the edge is not
/// taken): a call marker of the pushdown engine costs its callee's shortest
/// text. `None` when some transition's byte range holds such a byte along
/// with others (a marker must be a transition of its own).
fn nfa_distances_weighted(nfa: &Nfa, weights: &[u32; 256]) -> Option<Vec<u32>> {
    let n = nfa.len();
    let cost = |start: u8, end: u8| marker_cost(weights, start, end);
    // Reversed edges in CSR form: (source, weight) per target.
    let mut count = vec![0u32; n + 1];
    let mut fwd: Vec<(u32, u32, u32)> = Vec::new();
    for (id, kind, edges) in nfa.states() {
        for e in edges {
            let w = match kind {
                Kind::Bytes => cost(e.lo, e.hi),
                _ => 0,
            };
            fwd.push((e.next, id, w));
        }
    }
    if fwd.iter().any(|e| e.2 == MIXED) {
        // Forward reachability from the anchored start.
        let mut out = fwd.clone();
        out.sort_unstable_by_key(|e| e.1);
        let mut off = vec![0u32; n + 1];
        for e in &out {
            off[e.1 as usize + 1] += 1;
        }
        for k in 0..n {
            off[k + 1] += off[k];
        }
        let mut seen = vec![false; n];
        let mut todo = vec![nfa.start()];
        while let Some(x) = todo.pop() {
            if std::mem::replace(&mut seen[x as usize], true) {
                continue;
            }
            for e in &out[off[x as usize] as usize..off[x as usize + 1] as usize] {
                if e.2 == MIXED {
                    return None;
                }
                todo.push(e.0);
            }
        }
        for e in fwd.iter_mut().filter(|e| e.2 == MIXED) {
            e.2 = 1;
        }
    }
    fwd.sort_unstable();
    fwd.dedup();
    for &(t, _, _) in &fwd {
        count[t as usize + 1] += 1;
    }
    for k in 0..n {
        count[k + 1] += count[k];
    }
    let mut dist = vec![u32::MAX; n];
    let mut heap = std::collections::BinaryHeap::new();
    for q in 0..n as u32 {
        if nfa.is_match(q) {
            dist[q as usize] = 0;
            heap.push(std::cmp::Reverse((0u32, q)));
        }
    }
    while let Some(std::cmp::Reverse((d, t))) = heap.pop() {
        if d > dist[t as usize] {
            continue;
        }
        for &(_, src, w) in &fwd[count[t as usize] as usize..count[t as usize + 1] as usize] {
            if w == u32::MAX {
                continue;
            }
            let nd = d.saturating_add(w);
            if nd < dist[src as usize] {
                dist[src as usize] = nd;
                heap.push(std::cmp::Reverse((nd, src)));
            }
        }
    }
    Some(dist)
}

/// The subset construction as a process: states are numbered as they are
/// found, and each state's row is filled by [`Determinizer::explore`], all at
/// once ([`determinize`]) or on demand ([`super::LazyDfa`]).
pub(super) struct Determinizer {
    nfa: Nfa,
    pub classes: [u8; 256],
    pub stride: usize,
    /// Per NFA state, the fewest bytes to the match state.
    nfa_dist: Vec<u32>,
    closure: Closure,
    keys: Vec<Arc<[u32]>>,
    /// State ids by their key's hash: growing the map rehashes only the
    /// stored hashes (a map keyed by the keys rehashed every key, hundreds
    /// of NFA states long inside big objects, at each doubling).
    map: FastMap<u64, u32>,
    /// The states whose key's hash an earlier state's key already had.
    collided: FastMap<Arc<[u32]>, u32>,
    hasher: foldhash::fast::RandomState,
    /// `trans[state * stride + class]`; rows of unexplored states are 0.
    pub trans: Vec<u32>,
    pub accepting: Vec<bool>,
    /// Per DFA state, the fewest bytes to acceptance (`u32::MAX` for dead).
    pub dist: Vec<u32>,
    pub start: u32,
    key_bytes: usize,
    dfa_limit: usize,
    det_limit: usize,
    /// Per class, the NFA states it leads to from the state being explored.
    buckets: Vec<Vec<u32>>,
    touched: Vec<usize>,
    scratch: Vec<u32>,
    /// New states' rows start as [`UNCOMPUTED`] (filled one class at a time,
    /// [`Determinizer::explore_class`]) rather than dead.
    pub lazy_rows: bool,
    /// The targets of one class ([`Determinizer::explore_class`]).
    targets: Vec<u32>,
    /// Threads with member-set registers ([`super::regs`]), when the NFA
    /// has member sets: keys then hold thread ids, not NFA states.
    regs: Option<Box<Registers>>,
    /// With member sets, the NFA's reversed edges that the register
    /// distances were searched over, kept for [`super::op_reach::reaches`]
    /// ([`Determinizer::take_reversed`]).
    reversed: Option<super::op_reach::Reversed>,
}

/// A transition not computed yet (rows filled one class at a time).
pub(super) const UNCOMPUTED: u32 = u32::MAX;

impl Determinizer {
    /// Computes the NFA distances (unless the NFA's builder kept them) and
    /// the start state.
    pub fn new(mut nfa: Nfa, dfa_limit: usize, det_limit: usize) -> Determinizer {
        let kept = nfa.take_distances();
        if nfa.has_ops() {
            let (base, costs, reversed) = regs::distances(&nfa, &|_| 1);
            let regs = Registers::new(&nfa, costs);
            let mut d = Self::with_distances(nfa, base, Some(regs), dfa_limit, det_limit);
            d.reversed = Some(reversed);
            return d;
        }
        let nfa_dist = kept.unwrap_or_else(|| nfa_distances(&nfa));
        Self::with_distances(nfa, nfa_dist, None, dfa_limit, det_limit)
    }

    /// [`Determinizer::new`] with the bytes at or above `0xF5` (call
    /// markers) costing `weights[b]` in the distances
    /// ([`nfa_distances_weighted`]); `None` when a marker byte shares a
    /// transition with other bytes.
    pub fn new_weighted(
        nfa: Nfa,
        weights: &[u32; 256],
        dfa_limit: usize,
        det_limit: usize,
    ) -> Option<Determinizer> {
        let nfa_dist = nfa_distances_weighted(&nfa, weights)?;
        if nfa.has_ops() {
            // (The weighted search above only vouched that no marker byte
            // shares an edge.)
            let (base, costs, reversed) =
                regs::distances(&nfa, &|e| match marker_cost(weights, e.lo, e.hi) {
                    MIXED => 1,
                    c => c,
                });
            let regs = Registers::new(&nfa, costs);
            let mut d = Self::with_distances(nfa, base, Some(regs), dfa_limit, det_limit);
            d.reversed = Some(reversed);
            return Some(d);
        }
        Some(Self::with_distances(
            nfa, nfa_dist, None, dfa_limit, det_limit,
        ))
    }

    fn with_distances(
        nfa: Nfa,
        nfa_dist: Vec<u32>,
        regs: Option<Registers>,
        dfa_limit: usize,
        det_limit: usize,
    ) -> Determinizer {
        let classes = *nfa.byte_classes();
        let stride = classes[255] as usize + 1;
        let n = nfa.len();
        let mut d = Determinizer {
            classes,
            stride,
            nfa_dist,
            closure: Closure::new(n),
            // State 0 is dead (its key is the empty set).
            keys: vec![Arc::from(Vec::new())],
            map: FastMap::default(),
            collided: FastMap::default(),
            hasher: Default::default(),
            trans: vec![0; stride],
            accepting: vec![false],
            dist: vec![u32::MAX],
            start: 0,
            key_bytes: 0,
            dfa_limit,
            det_limit,
            buckets: vec![Vec::new(); stride],
            touched: Vec::new(),
            scratch: Vec::new(),
            lazy_rows: false,
            targets: Vec::new(),
            regs: regs.map(Box::new),
            reversed: None,
            nfa,
        };
        let h = d.hasher.hash_one(&*d.keys[0]);
        d.map.insert(h, 0);
        let mut scratch = std::mem::take(&mut d.scratch);
        let start = d.nfa.start();
        d.close(&[start], &mut scratch);
        if !scratch.is_empty() {
            // A limit hit here is reported by the first explored row; the
            // state is added before the limits are checked.
            d.start = match d.intern(&scratch) {
                Ok(t) => t,
                Err(_) => (d.keys.len() - 1) as u32,
            };
        }
        d.scratch = scratch;
        d
    }

    /// The NFA's reversed edges kept from the compile (once; `None` after,
    /// or without member sets).
    pub fn take_reversed(&mut self) -> Option<super::op_reach::Reversed> {
        self.reversed.take()
    }

    /// Number of states found so far (the dead state included).
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// The NFA states (byte-reading and match) of DFA state `s`, sorted.
    pub fn key(&self, s: u32) -> &[u32] {
        &self.keys[s as usize]
    }

    /// The NFA.
    pub fn nfa(&self) -> &Nfa {
        &self.nfa
    }

    /// Whether NFA state `q` is a byte-reading state.
    pub fn reads_bytes(&self, q: u32) -> bool {
        !self.nfa.is_match(self.state(q))
    }

    /// Whether the keys hold member-set threads ([`super::regs`]) rather
    /// than NFA states: the NFA-state shortcuts of the lazy DFA (free
    /// parts, loop threads, shifts along copies) are then off.
    pub fn has_regs(&self) -> bool {
        self.regs.is_some()
    }

    /// The NFA state of each thread of `key`.
    pub fn states_of(&self, key: &[u32]) -> Vec<u32> {
        key.iter().map(|&t| self.state(t)).collect()
    }

    /// The NFA state of thread `t` (itself without member sets).
    #[inline]
    pub fn state_of(&self, t: u32) -> u32 {
        self.state(t)
    }

    /// The NFA state of thread `t` (itself without member sets).
    #[inline]
    fn state(&self, t: u32) -> u32 {
        match &self.regs {
            Some(r) => r.state(t),
            None => t,
        }
    }

    /// Thread `t`'s fewest bytes to the match.
    #[inline]
    fn thread_dist(&self, t: u32) -> u32 {
        match &self.regs {
            Some(r) => r.dist(&self.nfa_dist, t),
            None => self.nfa_dist[t as usize],
        }
    }

    /// The closure of `seeds` (threads) into `out`, memoized per seed
    /// without member sets.
    fn close(&mut self, seeds: &[u32], out: &mut Vec<u32>) {
        match &mut self.regs {
            Some(r) => r.closure(&self.nfa, &self.nfa_dist, seeds, out),
            None => self.closure.of(&self.nfa, &self.nfa_dist, seeds, out),
        }
    }

    /// The thread that thread `of` becomes on reaching NFA state `q`.
    #[inline]
    fn moved(&mut self, of: u32, q: u32) -> u32 {
        match &mut self.regs {
            Some(r) => r.moved(&self.nfa, &self.nfa_dist, of, q),
            None => q,
        }
    }

    /// Per NFA state, the fewest bytes to the match state (`u32::MAX`:
    /// never).
    pub fn nfa_dist(&self) -> &[u32] {
        &self.nfa_dist
    }

    /// The DFA state whose key is `key` (sorted byte-reading and match
    /// states that can reach the match), added if new: a subset of a
    /// state's threads is a state too (it need not be reachable).
    pub fn sub_state(&mut self, key: &[u32]) -> Result<u32, Limit> {
        debug_assert!(key.windows(2).all(|w| w[0] < w[1]));
        self.intern(key)
    }

    /// Number of NFA states.
    pub fn nfa_len(&self) -> usize {
        self.nfa_dist.len()
    }

    /// The DFA state whose key is the closure of NFA state `q` alone (added
    /// if new; it need not be reachable from the start).
    pub fn single(&mut self, q: u32) -> Result<u32, Limit> {
        let mut scratch = std::mem::take(&mut self.scratch);
        match &mut self.regs {
            Some(r) => r.closure(&self.nfa, &self.nfa_dist, &[q], &mut scratch),
            None => self
                .closure
                .run(&self.nfa, &self.nfa_dist, &[q], &mut scratch),
        }
        let r = if scratch.is_empty() {
            Ok(0)
        } else {
            self.intern(&scratch)
        };
        self.scratch = scratch;
        r
    }

    /// The id of the state with this (sorted, live) key, adding it if new.
    fn intern(&mut self, key: &[u32]) -> Result<u32, Limit> {
        let h = self.hasher.hash_one(key);
        let taken = match self.map.get(&h) {
            Some(&t) if *self.keys[t as usize] == *key => return Ok(t),
            Some(_) => match self.collided.get(key) {
                Some(&t) => return Ok(t),
                None => true,
            },
            None => false,
        };
        let id = self.keys.len() as u32;
        let k: Arc<[u32]> = Arc::from(key);
        self.key_bytes += k.len() * 4 + 48;
        let accepting = k.iter().any(|&s| self.nfa.is_match(self.state(s)));
        self.accepting.push(accepting);
        let dist = k
            .iter()
            .map(|&s| self.thread_dist(s))
            .min()
            .unwrap_or(u32::MAX);
        self.dist.push(dist);
        if taken {
            self.collided.insert(k.clone(), id);
        } else {
            self.map.insert(h, id);
        }
        self.keys.push(k);
        let fill = if self.lazy_rows { UNCOMPUTED } else { 0 };
        self.trans.resize(self.trans.len() + self.stride, fill);
        if self.trans.len() * 4 > self.dfa_limit {
            return Err(Limit::Dfa);
        }
        let reg_bytes = self.regs.as_ref().map_or(0, |r| r.bytes());
        if self.key_bytes + reg_bytes > self.det_limit || self.keys.len() >= u32::MAX as usize {
            return Err(Limit::Determinize);
        }
        Ok(id)
    }

    /// Fills the row of state `i`. On an error the row may be partly filled;
    /// the states found so far stay valid.
    pub fn explore(&mut self, i: usize) -> Result<(), Limit> {
        // Cancellation point (crate::cancel): the compiler names the error.
        if crate::cancel::poll() {
            return Err(Limit::Determinize);
        }
        let key = self.keys[i].clone();
        let classes = &self.classes;
        let class_span =
            |lo: u8, hi: u8| classes[lo as usize] as usize..=classes[hi as usize] as usize;
        let buckets = &mut self.buckets;
        let touched = &mut self.touched;
        for &s in key.iter() {
            let q = match &self.regs {
                Some(r) => r.state(s),
                None => s,
            };
            if self.nfa.kind(q) != Kind::Bytes {
                continue;
            }
            for e in self.nfa.edges(q) {
                let next = match &mut self.regs {
                    Some(r) => r.moved(&self.nfa, &self.nfa_dist, s, e.next),
                    None => e.next,
                };
                for c in class_span(e.lo, e.hi) {
                    if buckets[c].is_empty() {
                        touched.push(c);
                    }
                    buckets[c].push(next);
                }
            }
        }
        touched.sort_unstable();
        let mut result = Ok(());
        let mut prev: Option<(usize, u32)> = None;
        let touched = std::mem::take(&mut self.touched);
        let mut scratch = std::mem::take(&mut self.scratch);
        for &c in &touched {
            let target = match prev {
                Some((pc, t)) if pc + 1 == c && self.buckets[pc] == self.buckets[c] => t,
                _ => {
                    let seeds = std::mem::take(&mut self.buckets[c]);
                    self.close(&seeds, &mut scratch);
                    self.buckets[c] = seeds;
                    if scratch.is_empty() {
                        0
                    } else {
                        match self.intern(&scratch) {
                            Ok(t) => t,
                            Err(e) => {
                                result = Err(e);
                                break;
                            }
                        }
                    }
                }
            };
            self.trans[i * self.stride + c] = target;
            prev = Some((c, target));
        }
        // Clear only after all comparisons with the previous bucket are done.
        for &c in &touched {
            self.buckets[c].clear();
        }
        self.touched = touched;
        self.touched.clear();
        self.scratch = scratch;
        if self.lazy_rows && result.is_ok() {
            // Classes no edge reads are dead.
            self.close_row(i);
        }
        result
    }

    /// Makes the classes of state `i`'s row not computed yet dead.
    pub fn close_row(&mut self, i: usize) {
        for t in &mut self.trans[i * self.stride..(i + 1) * self.stride] {
            if *t == UNCOMPUTED {
                *t = 0;
            }
        }
    }

    /// Fills the transition of state `i` on byte class `c` alone (see
    /// [`Determinizer::lazy_rows`]) and returns it.
    pub fn explore_class(&mut self, i: usize, c: usize) -> Result<u32, Limit> {
        let mut targets = std::mem::take(&mut self.targets);
        targets.clear();
        let key = self.keys[i].clone();
        for &s in key.iter() {
            let q = self.state(s);
            if self.nfa.kind(q) != Kind::Bytes {
                continue;
            }
            for k in 0..self.nfa.edges(q).len() {
                let e = self.nfa.edges(q)[k];
                let (lo, hi) = (self.classes[e.lo as usize], self.classes[e.hi as usize]);
                if (lo as usize..=hi as usize).contains(&c) {
                    let t = self.moved(s, e.next);
                    targets.push(t);
                }
            }
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        self.close(&targets, &mut scratch);
        let r = if scratch.is_empty() {
            Ok(0)
        } else {
            self.intern(&scratch)
        };
        self.scratch = scratch;
        self.targets = targets;
        let t = r?;
        self.trans[i * self.stride + c] = t;
        Ok(t)
    }

    /// The finished table (every state explored).
    pub fn into_table(self) -> Table {
        Table {
            classes: self.classes,
            stride: self.stride,
            trans: self.trans,
            accepting: self.accepting,
            start: self.start,
        }
    }
}

/// Determinizes `nfa` from its anchored start state, every state at once.
/// `nfa` must have no look-around assertions.
pub(super) fn determinize(nfa: Nfa, dfa_limit: usize, det_limit: usize) -> Result<Table, Limit> {
    let mut d = Determinizer::new(nfa, dfa_limit, det_limit);
    let mut i = 1;
    while i < d.len() {
        d.explore(i)?;
        i += 1;
    }
    Ok(d.into_table())
}
