//! # A Thompson NFA in three flat vectors
//!
//! regex-automata's NFA keeps a heap allocation per sparse or union state,
//! and its builder another; a schema with counted repetitions (`maxItems:
//! 100` of objects holding `maxLength: 1024` strings) unrolls to millions of
//! states, and building them one allocation at a time was most of such a
//! schema's time to first mask. Here every state is a kind and a span of one
//! edge vector (compressed sparse rows), so a state costs a few bytes and a
//! repetition's copies are made by copying a span of states with their
//! targets shifted ([`Builder::copy`]) instead of compiling the repeated
//! piece again.
//!
//! A state either reads bytes (its edges are byte ranges, each with its
//! target), or is an epsilon state (its edges' targets are alternatives; one
//! edge is a plain jump, none a dead end), or is the match state. The
//! determinizer ([`super::determinize`]) keeps every thread, so the order of
//! alternatives carries no meaning.

use regex_automata::nfa::thompson::{self, State};
use regex_automata::util::primitives::StateID as ThompsonId;
use std::ops::Range;

/// An edge target not set yet: the exit of a piece under construction.
pub(super) const HOLE: u32 = u32::MAX;

/// One edge: a byte range and its target (for epsilon states the range is
/// unused).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Edge {
    pub lo: u8,
    pub hi: u8,
    pub next: u32,
}

impl Edge {
    /// An epsilon edge to `next`.
    pub fn eps(next: u32) -> Edge {
        Edge { lo: 0, hi: 0, next }
    }
}

/// What a state does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Reads one byte in one of its edges' ranges.
    Bytes,
    /// Moves, without reading, to any of its edges' targets.
    Eps,
    /// The text read so far is in the language.
    Match,
}

/// An anchored NFA without look-around or captures (see the module doc).
#[derive(Clone)]
pub struct Nfa {
    kinds: Vec<Kind>,
    /// `edges[offs[q]..offs[q + 1]]` are state `q`'s edges.
    offs: Vec<u32>,
    edges: Vec<Edge>,
    start: u32,
    classes: [u8; 256],
    /// The fewest bytes from each state to the match state (`u32::MAX`:
    /// none), when the builder knew them.
    dist: Option<Vec<u32>>,
}

impl Nfa {
    /// Number of states.
    pub fn len(&self) -> usize {
        self.kinds.len()
    }

    /// Whether there are no states (never, for a built NFA).
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }

    /// The (anchored) start state.
    pub fn start(&self) -> u32 {
        self.start
    }

    /// What state `q` does.
    #[inline]
    pub fn kind(&self, q: u32) -> Kind {
        self.kinds[q as usize]
    }

    /// State `q`'s edges.
    #[inline]
    pub fn edges(&self, q: u32) -> &[Edge] {
        &self.edges[self.offs[q as usize] as usize..self.offs[q as usize + 1] as usize]
    }

    /// Whether `q` is a match state.
    #[inline]
    pub fn is_match(&self, q: u32) -> bool {
        self.kinds[q as usize] == Kind::Match
    }

    /// The byte → class map: bytes of one class lead alike from every state.
    pub fn byte_classes(&self) -> &[u8; 256] {
        &self.classes
    }

    /// The fewest bytes from each state to the match state, taken out, when
    /// the builder computed them (the direct compiler does; `None` here
    /// means the caller searches the graph).
    pub(super) fn take_distances(&mut self) -> Option<Vec<u32>> {
        self.dist.take()
    }

    /// Heap memory, in bytes.
    pub fn memory_usage(&self) -> usize {
        self.kinds.len() + self.offs.len() * 4 + self.edges.len() * std::mem::size_of::<Edge>()
    }

    /// Every state, as `(id, kind, edges)`.
    pub fn states(&self) -> impl Iterator<Item = (u32, Kind, &[Edge])> + '_ {
        (0..self.len() as u32).map(move |q| (q, self.kind(q), self.edges(q)))
    }

    /// regex-automata's NFA (made from a syntax tree) in this layout, state
    /// ids kept; `None` when it has look-around assertions (the caller uses
    /// regex-automata's determinizer for those). Captures become epsilon
    /// jumps, a dense state one edge per run of bytes with one target.
    pub fn from_thompson(nfa: &thompson::NFA) -> Option<Nfa> {
        if !nfa.look_set_any().is_empty() {
            return None;
        }
        let mut b = Builder::new(usize::MAX);
        let byte = |lo: u8, hi: u8, next: ThompsonId| Edge {
            lo,
            hi,
            next: next.as_u32(),
        };
        let mut edges: Vec<Edge> = Vec::new();
        for st in nfa.states() {
            edges.clear();
            let kind = match st {
                State::ByteRange { trans } => {
                    edges.push(byte(trans.start, trans.end, trans.next));
                    Kind::Bytes
                }
                State::Sparse(sp) => {
                    edges.extend(sp.transitions.iter().map(|t| byte(t.start, t.end, t.next)));
                    Kind::Bytes
                }
                State::Dense(d) => {
                    let mut b = 0usize;
                    while b < 256 {
                        let next = d.transitions[b];
                        let mut e = b;
                        while e + 1 < 256 && d.transitions[e + 1] == next {
                            e += 1;
                        }
                        if next != ThompsonId::ZERO {
                            edges.push(byte(b as u8, e as u8, next));
                        }
                        b = e + 1;
                    }
                    Kind::Bytes
                }
                State::Union { alternates } => {
                    edges.extend(alternates.iter().map(|&a| Edge::eps(a.as_u32())));
                    Kind::Eps
                }
                State::BinaryUnion { alt1, alt2 } => {
                    edges.push(Edge::eps(alt1.as_u32()));
                    edges.push(Edge::eps(alt2.as_u32()));
                    Kind::Eps
                }
                State::Capture { next, .. } => {
                    edges.push(Edge::eps(next.as_u32()));
                    Kind::Eps
                }
                State::Fail => Kind::Eps,
                State::Match { .. } => Kind::Match,
                State::Look { .. } => return None,
            };
            b.add(kind, &edges, 0).ok()?;
        }
        Some(b.finish(nfa.start_anchored().as_u32()))
    }
}

/// The NFA passed [`Builder`]'s size limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooBig;

/// Builds an [`Nfa`] state by state (ids in order of addition). A piece
/// under construction leaves its exit as a [`HOLE`] in the last edge of its
/// end state, set later by [`Builder::patch`]. A builder made by
/// [`Builder::with_distances`] also keeps each state's distance to the match
/// state, given when the state is added.
pub struct Builder {
    kinds: Vec<Kind>,
    offs: Vec<u32>,
    edges: Vec<Edge>,
    dist: Option<Vec<u32>>,
    /// `split[b]`: a byte class starts at `b` (some range starts at `b` or
    /// ends at `b - 1`).
    split: [bool; 257],
    limit: usize,
}

impl Builder {
    /// A builder whose NFA may use at most `limit` bytes (counted as
    /// [`Builder::size`] does); distances given to it are ignored.
    pub fn new(limit: usize) -> Builder {
        Builder {
            kinds: Vec::new(),
            offs: vec![0],
            edges: Vec::new(),
            dist: None,
            split: [false; 257],
            limit,
        }
    }

    /// [`Builder::new`] keeping distances, with room for about `states`
    /// states.
    pub fn with_distances(limit: usize, states: usize) -> Builder {
        let mut offs = Vec::with_capacity(states + 1);
        offs.push(0);
        Builder {
            kinds: Vec::with_capacity(states),
            offs,
            edges: Vec::with_capacity(states),
            dist: Some(Vec::with_capacity(states)),
            split: [false; 257],
            limit,
        }
    }

    /// The distance given for state `q` (0 when not kept).
    pub fn dist(&self, q: u32) -> u32 {
        self.dist.as_ref().map_or(0, |d| d[q as usize])
    }

    /// Number of states so far.
    pub fn len(&self) -> u32 {
        self.kinds.len() as u32
    }

    /// The NFA's size as the limit counts it: 16 bytes a state (its kind
    /// and offset here, its distance, mark and closure slot in the
    /// determinizer) and 8 an edge.
    pub fn size(&self) -> usize {
        self.kinds.len() * 16 + self.edges.len() * 8
    }

    fn check(&self) -> Result<(), TooBig> {
        if self.size() > self.limit || self.edges.len() >= u32::MAX as usize / 2 {
            return Err(TooBig);
        }
        Ok(())
    }

    /// Adds a state, `dist` bytes from the match state at the fewest; its id.
    pub fn add(&mut self, kind: Kind, edges: &[Edge], dist: u32) -> Result<u32, TooBig> {
        if let Some(d) = &mut self.dist {
            d.push(dist);
        }
        if kind == Kind::Bytes {
            for e in edges {
                self.split[e.lo as usize] = true;
                self.split[e.hi as usize + 1] = true;
            }
        }
        self.kinds.push(kind);
        self.edges.extend_from_slice(edges);
        self.offs.push(self.edges.len() as u32);
        self.check()?;
        Ok(self.len() - 1)
    }

    /// A byte-reading state with one range.
    pub fn add_range(&mut self, lo: u8, hi: u8, next: u32, dist: u32) -> Result<u32, TooBig> {
        self.add(Kind::Bytes, &[Edge { lo, hi, next }], dist)
    }

    /// An epsilon state with one edge, to be patched: an empty piece, or the
    /// shared exit of a piece's branches.
    pub fn add_empty(&mut self, dist: u32) -> Result<u32, TooBig> {
        self.add(Kind::Eps, &[Edge::eps(HOLE)], dist)
    }

    /// Sets the exit of the piece that ends at `end` (the [`HOLE`] in its
    /// last edge) to `target`.
    pub fn patch(&mut self, end: u32, target: u32) {
        let last = self.offs[end as usize + 1] as usize - 1;
        debug_assert_eq!(self.edges[last].next, HOLE, "patching a set edge");
        self.edges[last].next = target;
    }

    /// Appends a copy of `states` (made by one piece: their edges lead
    /// within them, or to the piece's exit [`HOLE`], which the copy keeps
    /// as a hole whatever the original's is now); the id shift from an
    /// original state to its copy. `end` is the original piece's end state.
    /// Distances move by `shift` (the copy's exit is that much farther from
    /// the match state than the original's; unreachable stays unreachable).
    pub fn copy(&mut self, states: Range<u32>, end: u32, shift: i64) -> Result<u32, TooBig> {
        let delta = self.len() - states.start;
        let (e0, e1) = (
            self.offs[states.start as usize] as usize,
            self.offs[states.end as usize] as usize,
        );
        let n = (states.end - states.start) as usize;
        if self.size() + n * 16 + (e1 - e0) * 8 > self.limit
            || self.edges.len() + (e1 - e0) >= u32::MAX as usize / 2
        {
            return Err(TooBig);
        }
        if let Some(d) = &mut self.dist {
            d.reserve(n);
            for i in states.start as usize..states.end as usize {
                let x = d[i];
                d.push(if x == u32::MAX {
                    x
                } else {
                    (x as i64 + shift) as u32
                });
            }
        }
        let shift = self.edges.len() as u32 - e0 as u32;
        self.kinds
            .extend_from_within(states.start as usize..states.end as usize);
        self.offs.reserve(n);
        for i in states.start as usize..states.end as usize {
            let o = self.offs[i + 1] + shift;
            self.offs.push(o);
        }
        self.edges.reserve(e1 - e0);
        for i in e0..e1 {
            let mut e = self.edges[i];
            if e.next.wrapping_sub(states.start) < states.end - states.start {
                e.next += delta;
            } else {
                // Only the exit leaves the piece.
                e.next = HOLE;
            }
            self.edges.push(e);
        }
        let last = self.offs[(end + delta) as usize + 1] as usize - 1;
        self.edges[last].next = HOLE;
        Ok(delta)
    }

    /// The NFA, starting at `start`.
    pub fn finish(self, start: u32) -> Nfa {
        let mut classes = [0u8; 256];
        let mut class = 0u8;
        for (b, c) in classes.iter_mut().enumerate() {
            if b > 0 && self.split[b] {
                class += 1;
            }
            *c = class;
        }
        Nfa {
            kinds: self.kinds,
            offs: self.offs,
            edges: self.edges,
            start,
            classes,
            dist: self.dist,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_shifts_inner_targets_and_keeps_the_exit_a_hole() {
        // A piece "ab": 0 --a--> 1 --b--> HOLE.
        let mut b = Builder::with_distances(usize::MAX, 0);
        let s1 = b.add_range(b'b', b'b', HOLE, 1).unwrap();
        let s0 = b.add_range(b'a', b'a', s1, 2).unwrap();
        // The original's exit already patched somewhere outside.
        let out = b.add_empty(0).unwrap();
        b.patch(s1, out);
        let delta = b.copy(0..2, s1, 3).unwrap();
        assert_eq!((b.dist(3), b.dist(4)), (4, 5), "distances shifted");
        assert_eq!(delta, 3);
        assert_eq!(b.edges[b.offs[4] as usize].next, 3, "a → b inside the copy");
        assert_eq!(b.edges[b.offs[3] as usize].next, HOLE, "the copy's exit");
        let nfa = b.finish(s0);
        assert_eq!(nfa.len(), 5);
        assert_eq!(nfa.edges(s1)[0].next, out, "the original keeps its exit");
        let c = nfa.byte_classes();
        assert_ne!(c[b'a' as usize], c[b'b' as usize]);
        assert_ne!(c[b'a' as usize], c[b'a' as usize - 1]);
        assert_ne!(c[b'b' as usize], c[b'b' as usize + 1]);
    }

    #[test]
    fn the_limit_counts_states_and_edges() {
        let mut b = Builder::new(100);
        for _ in 0..4 {
            b.add_range(0, 255, HOLE, 1).unwrap();
        }
        // 4 × 24 = 96 bytes; a fifth state passes 100.
        assert_eq!(b.add_range(0, 255, HOLE, 1), Err(TooBig));
        let mut b = Builder::new(100);
        b.add_range(0, 255, HOLE, 1).unwrap();
        b.add_range(0, 255, HOLE, 1).unwrap();
        assert_eq!(b.copy(0..2, 1, 0).map(|_| ()), Ok(()));
        assert_eq!(b.copy(0..2, 1, 0), Err(TooBig));
    }
}
