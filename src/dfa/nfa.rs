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

use super::sets::{MemberSet, RegOp};
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

/// A run of `count` identical units of states (a counted repetition's
/// copies, [`Builder::record_run`]): unit `i` is the states
/// `start + i * stride .. start + (i + 1) * stride`, a copy of unit 0 with
/// every id moved by `i * stride`; a unit's edges lead within it, to the
/// next unit's first state (the last unit's lead to the run's exit
/// instead), or to one exit state outside the run that every unit shares.
/// Nothing outside the run leads into it but to unit 0. Reading a unit
/// through takes at least `minlen` bytes. So from a set of threads inside
/// units `lo..=h` (and any outside the run), the same threads each moved
/// `d` units back read exactly the same texts, as long as no text reaches
/// the last unit: see [`Nfa::shift_back`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopyRun {
    pub start: u32,
    pub stride: u32,
    pub count: u32,
    pub minlen: u32,
}

impl CopyRun {
    fn end(&self) -> u32 {
        self.start + self.stride * self.count
    }

    /// Whether state `q` is in one of the run's units.
    fn holds(&self, q: u32) -> bool {
        (self.start..self.end()).contains(&q)
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
    /// Moves, without reading, along its one edge, doing a register
    /// operation of a member set ([`super::regs`]) that may stop the thread.
    Op,
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
    /// Runs of copies ([`CopyRun`]) by start (an enclosing run first), and
    /// each one's innermost enclosing run (`u32::MAX`: none).
    runs: Vec<CopyRun>,
    run_parent: Vec<u32>,
    /// The register operations of the [`Kind::Op`] states, by state.
    ops: Vec<(u32, RegOp)>,
    /// The member sets the operations name ([`super::regs`]).
    sets: Vec<MemberSet>,
}

impl Nfa {
    /// The register operation of [`Kind::Op`] state `q`.
    pub fn op(&self, q: u32) -> RegOp {
        let i = self
            .ops
            .binary_search_by_key(&q, |&(s, _)| s)
            .expect("an operation state");
        self.ops[i].1
    }

    /// Whether some state is a register operation (the NFA has member
    /// sets, [`super::regs`]).
    pub fn has_ops(&self) -> bool {
        !self.ops.is_empty()
    }

    /// The operation states, by id.
    pub(super) fn ops(&self) -> &[(u32, RegOp)] {
        &self.ops
    }

    /// The member sets.
    pub(super) fn sets(&self) -> &[MemberSet] {
        &self.sets
    }

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
        self.kinds.len()
            + self.offs.len() * 4
            + self.edges.len() * std::mem::size_of::<Edge>()
            + self.runs.len() * (std::mem::size_of::<CopyRun>() + 4)
    }

    /// The runs of copies the builder recorded.
    pub fn runs(&self) -> &[CopyRun] {
        &self.runs
    }

    /// The runs whose units hold state `q`, innermost first.
    fn runs_holding(&self, q: u32) -> impl Iterator<Item = usize> + '_ {
        // From the last run starting at or before q, out through the runs
        // enclosing it (runs nest or are apart).
        let last = self.runs.partition_point(|r| r.start <= q).checked_sub(1);
        std::iter::successors(last, |&i| match self.run_parent[i] {
            u32::MAX => None,
            p => Some(p as usize),
        })
        .filter(move |&i| self.runs[i].holds(q))
    }

    /// `key` (sorted threads) with the threads inside some run moved back
    /// to the same place in earlier units, as far as they go, run after run
    /// (an item's copy, then a string's inside it), when that changes it:
    /// the smaller key reads exactly the texts of up to `horizon` bytes
    /// that `key` reads, and reaches a state where each is live exactly
    /// when `key`'s is. A move is made only when every text of `horizon`
    /// bytes from the key's furthest unit stays two units short of the
    /// run's last unit (which leads out, not on), so the two walks meet
    /// the same structure at every step. `None`: no run allows a move.
    pub fn shift_back(&self, key: &[u32], horizon: u32) -> Option<Vec<u32>> {
        let mut k: Vec<u32> = key.to_vec();
        let mut moved = false;
        // Runs tried since the last move (a big object's threads are mostly
        // in the same few runs: each is tried once, not once per thread).
        let mut tried: Vec<usize> = Vec::new();
        // Each move lowers the key's sum; a few suffice in practice.
        'moves: for _ in 0..16 {
            tried.clear();
            for qi in 0..k.len() {
                for i in self.runs_holding(k[qi]) {
                    if tried.contains(&i) {
                        // (And so were the runs around it.)
                        break;
                    }
                    tried.push(i);
                    let run = self.runs[i];
                    if let Some(d) = Self::units_back(&k, run, horizon) {
                        let back = d * run.stride;
                        for q in k.iter_mut().filter(|q| run.holds(**q)) {
                            *q -= back;
                        }
                        k.sort_unstable();
                        moved = true;
                        continue 'moves;
                    }
                }
            }
            break;
        }
        moved.then_some(k)
    }

    /// Whether `next` is `key` (both sorted threads) with the threads of
    /// one run moved one unit on, all of them still inside it, and `next`
    /// could move back to `key` for texts of `horizon` bytes (see
    /// [`Nfa::shift_back`]). Then so is the state one unit on from `next`,
    /// and so on while the bound holds: a chain of states that texts of
    /// that length cannot tell from `key`'s.
    pub fn is_next_unit(&self, key: &[u32], next: &[u32], horizon: u32) -> bool {
        if key.len() != next.len() || key == next {
            return false;
        }
        let Some(&q) = key.iter().find(|q| next.binary_search(q).is_err()) else {
            return false;
        };
        self.runs_holding(q).any(|i| {
            let run = self.runs[i];
            // Every thread of the run has a unit after its own.
            if key
                .iter()
                .any(|&x| run.holds(x) && !run.holds(x + run.stride))
            {
                return false;
            }
            let mut moved: Vec<u32> = key
                .iter()
                .map(|&x| if run.holds(x) { x + run.stride } else { x })
                .collect();
            moved.sort_unstable();
            moved == next && Self::units_back(next, run, horizon).is_some()
        })
    }

    /// How many units back `run`'s threads in `key` can move (its lowest
    /// unit's index), when it is some and the move is safe for texts of
    /// `horizon` bytes (see [`Nfa::shift_back`]).
    fn units_back(key: &[u32], run: CopyRun, horizon: u32) -> Option<u32> {
        let (mut lo, mut hi) = (u32::MAX, 0u32);
        for &q in key {
            if run.holds(q) {
                let u = (q - run.start) / run.stride;
                lo = lo.min(u);
                hi = hi.max(u);
            }
        }
        if lo == u32::MAX || lo == 0 || run.minlen == 0 {
            return None;
        }
        // Units a text of `horizon` bytes can enter past the furthest one:
        // the next for free, then one per `minlen` bytes read through.
        let ahead = 1 + (horizon as u64).div_ceil(run.minlen as u64);
        (hi as u64 + ahead + 2 < run.count as u64).then_some(lo)
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
    /// Runs of copies recorded so far, by start.
    runs: std::collections::BTreeMap<u32, Vec<CopyRun>>,
    /// Register operations by state, and the member sets they name.
    ops: std::collections::BTreeMap<u32, RegOp>,
    sets: Vec<MemberSet>,
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
            runs: Default::default(),
            ops: Default::default(),
            sets: Vec::new(),
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
            runs: Default::default(),
            ops: Default::default(),
            sets: Vec::new(),
        }
    }

    /// The distance given for state `q` (0 when not kept).
    pub(crate) fn dist(&self, q: u32) -> u32 {
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

    /// A [`Kind::Op`] state doing `op` on its way to `next`.
    pub fn add_op(&mut self, op: RegOp, next: u32, dist: u32) -> Result<u32, TooBig> {
        let q = self.add(Kind::Op, &[Edge::eps(next)], dist)?;
        self.ops.insert(q, op);
        Ok(q)
    }

    /// Number of member sets recorded (the next one's id).
    pub fn set_count(&self) -> u32 {
        self.sets.len() as u32
    }

    /// Records a member set; its id.
    pub fn add_set(&mut self, set: MemberSet) -> u32 {
        self.sets.push(set);
        (self.sets.len() - 1) as u32
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
        // Operations inside the piece are copied with it (their sets name
        // states by offset, so the copy's own states).
        let inner: Vec<(u32, RegOp)> = self
            .ops
            .range(states.clone())
            .map(|(&q, &op)| (q + delta, op))
            .collect();
        self.ops.extend(inner);
        // The runs inside the piece are copied with it.
        let inner: Vec<CopyRun> = self
            .runs
            .range(states.clone())
            .flat_map(|(_, rs)| rs.iter().copied())
            .filter(|r| r.end() <= states.end)
            .collect();
        for r in inner {
            self.push_run(CopyRun {
                start: r.start + delta,
                ..r
            });
        }
        Ok(delta)
    }

    /// Records that the states from `start` on are `count` units of
    /// `stride` states each, unit `i` a copy of unit 0 moved `i * stride`,
    /// laid out and linked as [`CopyRun`] says (the caller's promise);
    /// reading one through takes at least `minlen` bytes.
    pub fn record_run(&mut self, start: u32, stride: u32, count: u32, minlen: u32) {
        if count >= 4 && stride > 0 && minlen > 0 {
            self.push_run(CopyRun {
                start,
                stride,
                count,
                minlen,
            });
        }
    }

    fn push_run(&mut self, r: CopyRun) {
        self.runs.entry(r.start).or_default().push(r);
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
        // By start, an enclosing run before those it holds; then each
        // one's innermost enclosing run.
        let mut runs: Vec<CopyRun> = self.runs.into_values().flatten().collect();
        runs.sort_unstable_by_key(|r| (r.start, std::cmp::Reverse(r.end())));
        runs.dedup();
        let mut run_parent = vec![u32::MAX; runs.len()];
        let mut open: Vec<usize> = Vec::new();
        for (i, r) in runs.iter().enumerate() {
            while open.last().is_some_and(|&j| runs[j].end() <= r.start) {
                open.pop();
            }
            if let Some(&j) = open.last() {
                run_parent[i] = j as u32;
            }
            open.push(i);
        }
        Nfa {
            kinds: self.kinds,
            offs: self.offs,
            edges: self.edges,
            start,
            classes,
            dist: self.dist,
            runs,
            run_parent,
            ops: self.ops.into_iter().collect(),
            sets: self.sets,
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
