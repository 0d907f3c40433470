//! # The backend trait, and the algorithms written once over it
//!
//! A [`TokenIndex`](super::TokenIndex) asks one of two engines what happens
//! in a state: the eager backend (`eager.rs`: a compact table of live
//! states, every mask computed at build time) or the lazy one (`lazy/`: a
//! DFA determinized, and masks computed, as matchers visit states). Both
//! implement [`Backend`], which is deliberately small: the start, a step on
//! a byte, acceptance, the distance to acceptance, the byte classes, the
//! mask of a state, and a memo for budgets.
//!
//! Everything else a matcher asks is derived here, once for both engines:
//!
//! * [`forced_byte`] — the only byte that keeps a non-accepting state live;
//! * [`has_continuation`] — whether any byte does;
//! * [`canonical_byte`] — the first byte of the canonical shortest
//!   completion (the smallest byte one step closer to acceptance);
//! * [`budget`] — an upper bound on the fewest tokens to acceptance: the
//!   greedy longest-token tokenization of the canonical shortest completion,
//!   memoized per state in a [`Slots`] array. It is consistent along that
//!   path (taking its first token lowers the bound by exactly one), which is
//!   what a `max_tokens` guard needs to never cut a structure in half;
//! * [`reverse_reach`] — a breadth-first search backwards from a set of
//!   states over explicit edges (distance to acceptance, and the plain-text
//!   reach of string interiors, in both engines).
//!
//! ## No lock on the hot path
//!
//! Every method a matcher calls per token — [`Backend::allowed`],
//! [`Backend::walk`], [`Backend::is_accepting`], [`budget`] — reads
//! write-once or atomic cells. The eager backend never writes after its
//! build. The lazy one publishes what its (locked) determinizer finds into
//! append-only atomic arrays, so a state once visited by any matcher is read
//! by every other without a lock; only the first visit of a state takes the
//! lock (see `lazy/mod.rs`).

use super::trie::{self, VocabTries};
use super::{LiveTable, TokenSet, DEAD};
use crate::vocab::{TokenId, Vocabulary};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// One byte per class and the number of bytes in each class.
#[derive(Clone, Debug)]
pub(crate) struct Classes {
    /// The smallest byte of each class.
    pub reps: Vec<u8>,
    /// How many bytes each class has.
    pub sizes: Vec<u32>,
}

impl Classes {
    pub fn new(classes: &[u8; 256]) -> Classes {
        let (reps, sizes) = super::automaton::class_reps(classes);
        Classes { reps, sizes }
    }
}

/// What a [`TokenIndex`](super::TokenIndex) asks of the engine behind it.
/// States are `u32` ids of the backend; [`DEAD`] is "no state".
pub(crate) trait Backend: Send + Sync {
    fn start(&self) -> u32;
    /// States known so far (for a lazy backend: determinized so far).
    fn num_states(&self) -> usize;
    fn is_accepting(&self, s: u32) -> bool;
    /// Shortest completion, in bytes.
    fn dist(&self, s: u32) -> u32;
    /// The state after one byte, or [`DEAD`].
    fn next_byte(&self, s: u32, b: u8) -> u32;
    /// The state after `bytes` (a token's) from `s`, or [`DEAD`] when they
    /// leave the language or lead where no token sequence can finish.
    fn walk(&self, s: u32, bytes: &[u8]) -> u32 {
        let mut s = s;
        for &b in bytes {
            s = self.next_byte(s, b);
            if s == DEAD {
                return DEAD;
            }
        }
        s
    }
    /// The byte classes (bytes of one class lead every state alike).
    fn classes(&self) -> &Classes;
    /// The allowed tokens in `s` (stop tokens included where `s` accepts);
    /// `None` past a size limit of a lazy backend.
    fn allowed(&self, s: u32, tries: &VocabTries, vocab: &Vocabulary) -> Option<&TokenSet>;
    /// Whether `t` is in [`Backend::allowed`]`(s)`; a backend whose masks
    /// may be id lists answers without making their bitset.
    fn allows(&self, s: u32, t: TokenId, tries: &VocabTries, vocab: &Vocabulary) -> bool {
        self.allowed(s, tries, vocab)
            .is_some_and(|set| set.contains(t))
    }
    /// Writes [`Backend::allowed`] into `row` (XGrammar's layout, exactly
    /// `ceil(width / 32)` words; all zero past a size limit).
    fn fill_row(&self, s: u32, tries: &VocabTries, vocab: &Vocabulary, row: &mut [u32]) {
        match self.allowed(s, tries, vocab) {
            Some(set) => set.write_u32_words(row),
            None => row.fill(0),
        }
    }
    /// The memo of [`budget`].
    fn budgets(&self) -> &Slots;
    /// The largest budget of any state, when known.
    fn max_budget(&self) -> Option<u32> {
        None
    }
    /// Bytes held by the tables and distinct masks.
    fn memory_usage(&self) -> usize;
    /// The compact live table, for a backend that has a complete one.
    fn table(&self) -> Option<&LiveTable> {
        None
    }
    /// The limit a growing automaton hit, if any.
    fn limit_error(&self) -> Option<String> {
        None
    }
    /// Whether masks were pruned by token-level liveness.
    fn is_token_pruned(&self) -> bool {
        false
    }
    /// Masks computed from a free part's mask (lazy backend only).
    fn masks_from_free_parts(&self) -> usize {
        0
    }
    /// Masks shared with a state earlier along a run of copies (lazy
    /// backend only).
    fn masks_from_shifts(&self) -> usize {
        0
    }
}

/// The few questions the algorithms below ask: a step, acceptance, the
/// distance to acceptance and the byte classes. Every [`Backend`] answers
/// them, and so does a bare [`LiveTable`].
pub(crate) trait Steps {
    fn step(&self, s: u32, b: u8) -> u32;
    fn accepts(&self, s: u32) -> bool;
    fn distance(&self, s: u32) -> u32;
    fn class_reps(&self) -> &[u8];
    fn class_sizes(&self) -> &[u32];
}

impl<B: Backend + ?Sized> Steps for B {
    #[inline]
    fn step(&self, s: u32, b: u8) -> u32 {
        self.next_byte(s, b)
    }
    #[inline]
    fn accepts(&self, s: u32) -> bool {
        self.is_accepting(s)
    }
    #[inline]
    fn distance(&self, s: u32) -> u32 {
        self.dist(s)
    }
    fn class_reps(&self) -> &[u8] {
        &self.classes().reps
    }
    fn class_sizes(&self) -> &[u32] {
        &self.classes().sizes
    }
}

/// The only byte that keeps `s` live, when `s` does not accept.
pub(crate) fn forced_byte<S: Steps + ?Sized>(a: &S, s: u32) -> Option<u8> {
    if a.accepts(s) {
        return None;
    }
    let (mut live_bytes, mut only) = (0u32, 0u8);
    for (&b, &size) in a.class_reps().iter().zip(a.class_sizes()) {
        if a.step(s, b) != DEAD {
            live_bytes += size;
            only = b;
            if live_bytes > 1 {
                return None;
            }
        }
    }
    (live_bytes == 1).then_some(only)
}

/// Whether some byte keeps `s` live.
pub(crate) fn has_continuation<S: Steps + ?Sized>(a: &S, s: u32) -> bool {
    a.class_reps().iter().any(|&b| a.step(s, b) != DEAD)
}

/// The first byte of the canonical shortest completion of `s`: the smallest
/// byte whose successor is one byte closer to acceptance (`None` when `s`
/// accepts, or when no byte is, which only a lazy automaton past a size
/// limit can leave).
pub(crate) fn canonical_byte<S: Steps + ?Sized>(a: &S, s: u32) -> Option<u8> {
    if a.accepts(s) {
        return None;
    }
    let d = a.distance(s);
    // Class representatives are their classes' smallest bytes, so the first
    // one found in byte order is the smallest byte.
    let mut best: Option<u8> = None;
    for &b in a.class_reps() {
        if best.is_some_and(|x| x < b) {
            continue;
        }
        let t = a.step(s, b);
        if t != DEAD && a.distance(t).saturating_add(1) == d {
            best = Some(b);
        }
    }
    best
}

/// An upper bound on the tokens that bring `s` to acceptance (0 when it
/// accepts): the greedy longest-token tokenization of its canonical shortest
/// completion; `u32::MAX` when some byte of it starts no token. Memoized in
/// [`Backend::budgets`] for every state on the way.
pub(crate) fn budget<B: Backend + ?Sized>(a: &B, tries: &VocabTries, s: u32) -> u32 {
    let memo = a.budgets();
    let mut chain: Vec<u32> = Vec::new();
    let mut path: Vec<u32> = Vec::with_capacity(32);
    let mut cur = s;
    let mut base = loop {
        if cur == DEAD {
            break u32::MAX;
        }
        if let Some(b) = memo.get(cur) {
            break b;
        }
        if a.is_accepting(cur) {
            memo.set(cur, 0);
            break 0;
        }
        let from = cur;
        let mut at = cur;
        let tok = trie::longest_prefix_token(&tries.full, |k| {
            if k == 0 {
                at = from;
                path.clear();
            }
            // (DEAD only after a size limit left a state without rows.)
            if at == DEAD {
                return None;
            }
            let b = canonical_byte(a, at)?;
            at = a.next_byte(at, b);
            path.push(at);
            Some(b)
        });
        match tok {
            Some((len, _)) => {
                chain.push(cur);
                cur = path[len - 1];
            }
            None => break u32::MAX,
        }
    };
    for &st in chain.iter().rev() {
        base = base.saturating_add(1);
        memo.set(st, base);
    }
    base
}

/// Breadth-first search backwards from `seeds` over the edges
/// `succ[off[k]..off[k + 1]]` of each state `k` (`n` states): the fewest
/// edges from each state to a seed (`u32::MAX`: none).
pub(crate) fn reverse_reach(n: usize, seeds: &[u32], off: &[u32], succ: &[u32]) -> Vec<u32> {
    // Reverse edges as a CSR.
    let mut rev_off = vec![0u32; n + 1];
    for &x in succ {
        rev_off[x as usize + 1] += 1;
    }
    for k in 0..n {
        rev_off[k + 1] += rev_off[k];
    }
    let mut fill = rev_off.clone();
    let mut rev = vec![0u32; succ.len()];
    for s in 0..n {
        for &x in &succ[off[s] as usize..off[s + 1] as usize] {
            rev[fill[x as usize] as usize] = s as u32;
            fill[x as usize] += 1;
        }
    }
    let mut reach = vec![u32::MAX; n];
    let mut queue: Vec<u32> = Vec::with_capacity(n);
    for &s in seeds {
        if reach[s as usize] == u32::MAX {
            reach[s as usize] = 0;
            queue.push(s);
        }
    }
    let mut qi = 0;
    while qi < queue.len() {
        let x = queue[qi] as usize;
        qi += 1;
        for &p in &rev[rev_off[x] as usize..rev_off[x + 1] as usize] {
            if reach[p as usize] == u32::MAX {
                reach[p as usize] = reach[x] + 1;
                queue.push(p);
            }
        }
    }
    reach
}

/// A lock-free, append-only array of `width` cells per index, grown in
/// segments allocated on first write: segment `k` holds `base << k` indices
/// starting at `base * (2^k - 1)`, so the segment table stays a few dozen
/// entries for any size and creating an arena costs next to nothing. Reads
/// are a segment lookup and a load; unwritten cells read as `T::default()`.
///
/// A small `base` keeps what a small automaton touches small: each new
/// segment is written in full when allocated (its cells initialized), so a
/// first segment of thousands of cells costs its page faults and its
/// zeroing at once, however few of them are used (a 64 KB first segment
/// of mask cells and a 256-state first segment of rows were a quarter of a
/// first walk's time over small MaskBench schemas, `benches/first_walk.rs`).
/// Doubling segments keep the waste below half for large ones.
pub(crate) struct Arena<T = AtomicU32> {
    /// `base` is a power of two: `1 << shift`.
    shift: u32,
    base: usize,
    width: usize,
    segments: Box<[OnceLock<Box<[T]>>]>,
}

impl<T: Default> Arena<T> {
    /// Room for `capacity` indices of `width` cells each, in segments of
    /// `base`, `2 base`, `4 base`, ... indices (`base` rounded up to a power
    /// of two).
    pub fn new(capacity: usize, width: usize, base: usize) -> Arena<T> {
        // (State ids are u32: no more than 2^32 indices are ever needed.)
        let capacity = capacity.min(1 << 32);
        let base = base.max(1).next_power_of_two();
        let mut n = 0;
        while base.saturating_mul((1usize << n) - 1) < capacity {
            n += 1;
        }
        Arena {
            shift: base.trailing_zeros(),
            base,
            width,
            segments: (0..n).map(|_| OnceLock::new()).collect(),
        }
    }

    /// Segment and offset (in cells) of index `i`.
    #[inline]
    fn locate(&self, i: usize) -> (usize, usize) {
        let q = (i >> self.shift) + 1;
        let k = (usize::BITS - 1 - q.leading_zeros()) as usize;
        (k, (i - self.base * ((1 << k) - 1)) * self.width)
    }

    /// The cells of index `i`, when its segment exists.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&[T]> {
        let (k, at) = self.locate(i);
        let seg = self.segments.get(k)?.get()?;
        Some(&seg[at..at + self.width])
    }

    /// The cells of index `i`, allocating its segment; `None` past the
    /// capacity.
    pub fn get_or_alloc(&self, i: usize) -> Option<&[T]> {
        let (k, at) = self.locate(i);
        let seg = self.segments.get(k)?.get_or_init(|| {
            (0..(self.base << k) * self.width)
                .map(|_| T::default())
                .collect()
        });
        Some(&seg[at..at + self.width])
    }

    /// Heap memory in bytes (the segments' cells, not what they point to).
    pub fn memory_usage(&self) -> usize {
        let segs: usize = (0..self.segments.len())
            .filter(|&k| self.segments[k].get().is_some())
            .map(|k| (self.base << k) * self.width * std::mem::size_of::<T>())
            .sum();
        segs + self.segments.len() * std::mem::size_of::<OnceLock<Box<[T]>>>()
    }
}

/// A `u32` value per state, written once (or with equal values by racing
/// writers) and read without a lock (an [`Arena`] of width 1). Used for
/// memos every thread may fill.
pub(crate) struct Slots(Arena);

/// Values in the first segment of a [`Slots`] (256 bytes, doubling from
/// there).
const SLOTS_BASE: usize = 64;

impl Slots {
    /// Room for `capacity` states.
    pub fn new(capacity: usize) -> Slots {
        Slots(Arena::new(capacity, 1, SLOTS_BASE))
    }

    /// The value of `s`, if set.
    #[inline]
    pub fn get(&self, s: u32) -> Option<u32> {
        match self.0.get(s as usize)?[0].load(Ordering::Relaxed) {
            0 => None,
            u32::MAX => Some(u32::MAX),
            x => Some(x - 1),
        }
    }

    /// Sets the value of `s` (ignored past the capacity).
    pub fn set(&self, s: u32, v: u32) {
        if let Some(cell) = self.0.get_or_alloc(s as usize) {
            let stored = if v >= u32::MAX - 1 { u32::MAX } else { v + 1 };
            cell[0].store(stored, Ordering::Relaxed);
        }
    }

    /// Heap memory in bytes.
    pub fn memory_usage(&self) -> usize {
        self.0.memory_usage()
    }
}

impl Steps for LiveTable {
    #[inline]
    fn step(&self, s: u32, b: u8) -> u32 {
        self.next(s, b)
    }
    fn accepts(&self, s: u32) -> bool {
        self.accepting[s as usize]
    }
    fn distance(&self, s: u32) -> u32 {
        self.dist[s as usize]
    }
    fn class_reps(&self) -> &[u8] {
        &self.reps
    }
    fn class_sizes(&self) -> &[u32] {
        &self.class_size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_keep_values_and_the_unknown_marker() {
        let s = Slots::new(3000);
        assert_eq!(s.get(5), None);
        s.set(5, 0);
        s.set(2047, 7);
        s.set(2999, u32::MAX);
        s.set(5000, 1); // past the capacity: ignored
        assert_eq!(s.get(5), Some(0));
        assert_eq!(s.get(2047), Some(7));
        assert_eq!(s.get(2999), Some(u32::MAX));
        assert_eq!(s.get(6), None);
        assert_eq!(s.get(5000), None);
    }

    #[test]
    fn arena_segments_cover_every_index_once() {
        let a: Arena = Arena::new(10_000, 3, 4);
        for i in 0..10_000 {
            let cells = a.get_or_alloc(i).unwrap();
            assert_eq!(cells.len(), 3);
            assert_eq!(cells[1].load(Ordering::Relaxed), 0, "index {i} is fresh");
            cells[1].store(i as u32 + 1, Ordering::Relaxed);
        }
        for i in 0..10_000 {
            assert_eq!(a.get(i).unwrap()[1].load(Ordering::Relaxed), i as u32 + 1);
        }
        assert!(Arena::<AtomicU32>::new(5, 1, 4)
            .get_or_alloc(1 << 20)
            .is_none());
        // A base that is not a power of two is rounded up (segments of 4,
        // 8, ...): every index still has its own cells.
        let b: Arena<u8> = Arena::new(100, 1, 3);
        let ptrs: std::collections::HashSet<*const u8> = (0..100)
            .map(|i| b.get_or_alloc(i).unwrap().as_ptr())
            .collect();
        assert_eq!(ptrs.len(), 100);
    }

    #[test]
    fn reverse_reach_counts_edges_to_the_seeds() {
        // 0 -> 1 -> 2, 3 -> 3 (a loop that never reaches the seed 2).
        let off = [0, 1, 2, 2, 3];
        let succ = [1, 2, 3];
        assert_eq!(reverse_reach(4, &[2], &off, &succ), vec![2, 1, 0, u32::MAX]);
    }

    #[test]
    fn forced_and_canonical_bytes_of_a_table() {
        let dfa = crate::dfa::ByteDfa::new("ab(c|d)|b", &Default::default()).unwrap();
        let t = LiveTable::new(&dfa, 1 << 10).unwrap();
        let s0 = t.start;
        assert_eq!(forced_byte(&t, s0), None, "a or b");
        assert_eq!(canonical_byte(&t, s0), Some(b'b'), "b is the shortest");
        let sa = t.next(s0, b'a');
        assert_eq!(forced_byte(&t, sa), Some(b'b'));
        let sab = t.next(sa, b'b');
        assert_eq!(forced_byte(&t, sab), None, "c or d");
        assert_eq!(canonical_byte(&t, sab), Some(b'c'));
        let end = t.next(sab, b'd');
        assert!(!has_continuation(&t, end));
        assert_eq!(canonical_byte(&t, end), None);
    }
}
