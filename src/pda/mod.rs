//! # Pushdown automata: grammar fragments that call one another
//!
//! A grammar whose recursion is more than immediate left or right recursion
//! (`value ::= "[" value "]" | "x"`) is not regular, and no byte DFA holds
//! it. Here it becomes a set of **fragments**, one per rule that lies in a
//! cycle of references (plus `root`): each fragment is that rule's body with
//! every non-recursive rule inlined and every reference to a recursive rule
//! replaced by a *call marker* ([`CALL_MARKER`] `hi lo`, bytes no UTF-8
//! text holds), determinized by the ordinary [`ByteDfa`] machinery. The
//! marker edges are then read back out of each DFA as **call edges**
//! (`calls[state] = [(callee, return state)]`) and hidden from the text
//! transitions (`Fragment`). A schema's document and its long called
//! fragments are determinized on demand instead, their per-state data
//! filled as states are met (`lazy`).
//!
//! This module is the fragment builder alone, over [`crate::dfa`]: the front
//! ends hand it their fragments (GBNF: [`Fragments`], through
//! `grammar::gbnf::pushdown`; JSON Schema: `schema::pushdown`) and word its
//! refusals (`BuildError`) themselves, and the index's pushdown engine
//! (`index/pushdown.rs`) runs the result: sets of stacks of frames
//! (fragment, state) interned as the states of a DFA built on demand, each
//! mask the union of its top frames' context-independent tokens and the
//! exit tokens resolved against the stack (XGrammar's split). See
//! `docs/design/pushdown.md`.
//!
//! ## Invariants
//!
//! * **No dead ends.** Unproductive rules (no finite derivation) are found
//!   at build time and every frame that needs one is never created; every
//!   other frame can finish. With the depth limit, a frame at depth `d` in a
//!   state that needs `k` more frames to finish exists only when `d + k ≤
//!   max_stack_depth` (`Fragment::need`), so every stack the engine holds
//!   can still be completed, and a token is allowed exactly when its bytes
//!   lead to a non-empty set.
//! * **EOS** only where some stack has finished its last frame.
//! * **Budget.** A stack's shortest completion is the sum of each frame's
//!   shortest way out *within the room the depth limit leaves above it*
//!   (`Fragment::dist_within`: near the limit the shortest text may need
//!   a call that no longer fits, and the way out is longer); the set's is
//!   the least. So the distance is exact at every depth, some byte always
//!   leads one byte closer, and the index tokenizes the canonical shortest
//!   completion greedily, as for a DFA: the budget is always known and
//!   `max_tokens` never cuts a recursive structure in half, at the stack
//!   limit too.
//! * **Limits.** `max_stack_depth` (the front end's option, named in
//!   `Limits::depth_knob`) bounds the frames, `max_stacks` the stacks of one configuration,
//!   [`IndexConfig::max_states`](crate::IndexConfig::max_states) the interned
//!   configurations; each hit is reported by
//!   [`TokenIndex::lazy_limit_error`](crate::TokenIndex::lazy_limit_error)
//!   naming its knob.
//!
pub(crate) mod lazy;

use crate::dfa::{class_reps, ByteDfa, DfaConfig, DfaError};
use regex_automata::util::primitives::StateID;
use regex_syntax::hir::Hir;

/// First byte of a call marker in a fragment's syntax tree: `0xF8 hi lo`
/// calls fragment `hi * 256 + lo`. No UTF-8 text holds a byte at or above
/// 0xF5, so a marker never meets a character of the grammar.
pub const CALL_MARKER: u8 = 0xF8;

/// A grammar split into fragments (what GBNF's
/// [`fragments`](crate::grammar::gbnf::lower::fragments) hands over).
#[derive(Clone, Debug)]
pub struct Fragments {
    /// Rule name of each fragment; fragment 0 is `root`.
    pub names: Vec<String>,
    /// Each fragment's body: its rule lowered with every other rule inlined
    /// except the recursive ones, which are call markers
    /// ([`CALL_MARKER`]). `None`: the body's language is empty.
    pub bodies: Vec<Option<Hir>>,
}

/// Not reachable / unknown.
pub(crate) const INF: u32 = u32::MAX;

/// One fragment: a byte DFA whose call markers became call edges.
#[derive(Debug)]
pub(crate) struct Fragment {
    /// The rule it came from.
    pub name: String,
    dfa: FragDfa,
    /// The start state.
    pub start: u32,
    /// Per state: the calls it can make (callee, state to return to).
    pub calls: Vec<Vec<(u16, u32)>>,
    /// Per state: whether the fragment may end there (return).
    pub accepting: Vec<bool>,
    /// Per state: whether some text byte can follow.
    pub has_text: Vec<bool>,
    /// Per state: fewest bytes to the fragment's end (callees counted by
    /// their shortest text); [`INF`] for a state that cannot finish.
    pub dist: Vec<u32>,
    /// Per state: fewest frames above this one needed to finish it (0: a
    /// path without calls); [`INF`] for a state that cannot finish.
    pub need: Vec<u32>,
    /// Per state `s`, `room_steps[room_off[s]..room_off[s + 1]]`: the
    /// `(room, bytes)` pairs at which the fewest bytes to finish `s` with
    /// `room` frames available above it drops, by increasing room (the
    /// first is `need`, the last `dist`).
    room_off: Vec<u32>,
    room_steps: Vec<(u32, u32)>,
}

/// A fragment's automaton: built whole, or (the schema front end's
/// document) determinized on demand ([`lazy`]).
#[derive(Debug)]
pub(crate) enum FragDfa {
    Eager(ByteDfa),
    Lazy(Box<lazy::LazyFrag>),
}

impl Fragment {
    /// The state after text byte `b` (0: dead). Bytes that no UTF-8 text
    /// holds (call markers among them) are dead. A lazy fragment's state
    /// is determinized on first use; call [`Fragment::ensure`] on the
    /// result before reading its per-state data.
    #[inline]
    pub fn next(&mut self, s: u32, b: u8) -> u32 {
        if b >= 0xF5 {
            return 0;
        }
        match &mut self.dfa {
            FragDfa::Eager(d) => d.next(StateID::new_unchecked(s as usize), b).as_usize() as u32,
            FragDfa::Lazy(l) => l.dfa.next(s, b),
        }
    }

    /// [`Fragment::next`] of a fragment built whole (0 for a lazy one: the
    /// build-time analyses never see one).
    #[inline]
    pub(crate) fn next_eager(&self, s: u32, b: u8) -> u32 {
        match &self.dfa {
            FragDfa::Eager(d) if b < 0xF5 => {
                d.next(StateID::new_unchecked(s as usize), b).as_usize() as u32
            }
            _ => 0,
        }
    }

    /// Whether the fragment is determinized on demand.
    pub fn is_lazy(&self) -> bool {
        matches!(self.dfa, FragDfa::Lazy(_))
    }

    /// The DFA of a fragment determinized on demand (`None` for one built
    /// whole).
    pub(crate) fn lazy_dfa(&mut self) -> Option<&mut crate::dfa::LazyDfa> {
        match &mut self.dfa {
            FragDfa::Lazy(l) => Some(&mut l.dfa),
            FragDfa::Eager(_) => None,
        }
    }

    /// Number of states (determinized so far, for a lazy fragment).
    pub(crate) fn states(&self) -> usize {
        self.accepting.len()
    }

    /// Fewest bytes to finish the fragment from `s` when at most `room`
    /// frames may be opened above it ([`INF`]: it cannot finish so). This
    /// is what a frame at depth `d` under the stack limit `L` has left
    /// (`room = L - d`): near the limit the shortest text may need a call
    /// that no longer fits, and the way out is longer than [`Fragment::dist`].
    pub fn dist_within(&self, s: u32, room: u32) -> u32 {
        if let FragDfa::Lazy(l) = &self.dfa {
            return match &l.room {
                Some(r) => r.within(s, room),
                // The document, always at depth 1: its distances were
                // computed for that room ([`lazy`]).
                None => self.dist[s as usize],
            };
        }
        let steps = &self.room_steps
            [self.room_off[s as usize] as usize..self.room_off[s as usize + 1] as usize];
        steps
            .iter()
            .rev()
            .find(|x| x.0 <= room)
            .map_or(INF, |x| x.1)
    }
}

/// The smallest text byte (below `0xF5`, where the markers start) of each
/// byte class of `classes` that has one.
fn text_class_reps(classes: &[u8; 256]) -> Vec<u8> {
    let mut reps = Vec::new();
    let mut seen = [false; 256];
    for b in 0..0xF5u8 {
        if !std::mem::replace(&mut seen[classes[b as usize] as usize], true) {
            reps.push(b);
        }
    }
    reps
}

/// One level of [`Pda::distances`]' search: distances lowered in place,
/// with the states lowered at this level.
struct Lowering {
    d: Vec<u32>,
    queue: Buckets,
    /// Per state, the last level that lowered it (0: none since level 0).
    touched_at: Vec<u32>,
    touched: Vec<u32>,
    level: u32,
}

impl Lowering {
    /// Lowers state `x` to `c` if that is less, and queues it.
    #[inline]
    fn lower(&mut self, x: u32, c: u32) {
        if c < self.d[x as usize] {
            self.d[x as usize] = c;
            self.queue.push(c, x);
            if std::mem::replace(&mut self.touched_at[x as usize], self.level) != self.level {
                self.touched.push(x);
            }
        }
    }
}

/// A monotone priority queue of states by distance (Dial's buckets): what
/// a Dijkstra over small integer distances needs, a push and a pop in
/// constant time (a binary heap's were most of a level's search). Distances
/// past [`Buckets::MAX`] wait in a heap.
#[derive(Default)]
struct Buckets {
    buckets: Vec<Vec<u32>>,
    /// No bucket below this one holds a state.
    cur: usize,
    far: std::collections::BinaryHeap<std::cmp::Reverse<(u32, u32)>>,
}

impl Buckets {
    const MAX: usize = 1 << 16;

    /// Queues `x` at distance `c` (never below the last popped distance).
    #[inline]
    fn push(&mut self, c: u32, x: u32) {
        let c = c as usize;
        if c >= Self::MAX {
            self.far.push(std::cmp::Reverse((c as u32, x)));
            return;
        }
        if c >= self.buckets.len() {
            self.buckets
                .resize_with((c + 1).next_power_of_two(), Vec::new);
        }
        self.buckets[c].push(x);
        self.cur = self.cur.min(c);
    }

    /// The state queued at the least distance, with it.
    #[inline]
    fn pop(&mut self) -> Option<(u32, u32)> {
        while self.cur < self.buckets.len() {
            if let Some(x) = self.buckets[self.cur].pop() {
                return Some((self.cur as u32, x));
            }
            self.cur += 1;
        }
        // (No rewind: a push below `cur` lowers it.)
        self.far.pop().map(|std::cmp::Reverse(p)| p)
    }
}

/// A fragment's body as a front end hands it over: a syntax tree (GBNF, or
/// a schema text outside the direct parser's subset) or an NFA built
/// straight from the text ([`ByteDfa::fragment_nfa`]).
pub(crate) enum Body<'a> {
    Hir(&'a regex_syntax::hir::Hir),
    Nfa(&'a crate::dfa::Nfa),
}

/// A fragment's text parsed (what a [`Body`] borrows): a syntax tree, or
/// an NFA straight from the subset parser.
pub(crate) enum OwnedBody {
    Hir(regex_syntax::hir::Hir),
    Nfa(crate::dfa::Nfa),
}

impl OwnedBody {
    pub(crate) fn body(&self) -> Body<'_> {
        match self {
            OwnedBody::Hir(h) => Body::Hir(h),
            OwnedBody::Nfa(n) => Body::Nfa(n),
        }
    }
}

impl std::fmt::Debug for OwnedBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OwnedBody::Hir(h) => f.debug_tuple("Hir").field(h).finish(),
            OwnedBody::Nfa(n) => write!(f, "Nfa({} states)", n.len()),
        }
    }
}

impl Body<'_> {
    /// The fragment's whole DFA.
    fn dfa(&self, size: usize, config: &DfaConfig) -> Result<ByteDfa, DfaError> {
        match self {
            Body::Hir(h) => ByteDfa::from_hir(h, size, config),
            Body::Nfa(n) => ByteDfa::from_nfa_whole((*n).clone(), size, config),
        }
    }
}

/// The limits of an engine, with the name of the option that set the depth.
#[derive(Clone, Debug)]
pub(crate) struct Limits {
    pub max_stack_depth: usize,
    pub max_stacks: usize,
    /// The option and its value, as errors name them.
    pub depth_knob: String,
}

/// Why [`Pda::build`] refused the fragments (each front end words these
/// in its own error type).
#[derive(Debug)]
pub(crate) enum BuildError {
    /// No text of the root fragment can finish.
    Empty,
    /// Every text nests `need` frames, past the depth limit.
    Depth { need: usize },
    /// A fragment's automaton could not be built.
    Dfa(DfaError),
    /// The lazy document was unfit for the lazy build and the document's
    /// own body was left unparsed (its text is long, and the lazy document
    /// is a copy of it): the caller parses it and builds again without a
    /// lazy document.
    NotLazy,
}

/// The compiled fragments of a grammar, with the limits of its engine.
#[derive(Debug)]
pub struct Pda {
    pub(crate) frags: Vec<Fragment>,
    /// Bytes alike in every fragment share a class.
    pub(crate) classes: [u8; 256],
    /// Smallest byte of each class, and the class sizes.
    pub(crate) reps: Vec<u8>,
    pub(crate) class_size: Vec<u32>,
    pub(crate) max_stack_depth: u32,
    /// The option that set `max_stack_depth` and its value, as errors
    /// name them.
    pub(crate) depth_knob: String,
    pub(crate) max_stacks: usize,
    /// Per fragment: the key under which its frames' masks are shared by
    /// every engine over the vocabulary (a fragment that calls only itself,
    /// whose DFA is fixed by its text: the schema front end's "any JSON
    /// value"); `None`: kept per engine.
    pub(crate) share: Vec<Option<String>>,
    /// Total DFA states of the fragments.
    pub states: usize,
}

impl Pda {
    /// Determinizes each fragment and reads its call edges back out, for
    /// any front end: the limits are given with the name of the option that
    /// set them, and the two refusals that a front end words itself (an
    /// empty language, a shortest text deeper than the stack) come back as
    /// [`BuildError`], as does an automaton that could not be built.
    pub(crate) fn build(
        names: &[String],
        bodies: &[Option<Body<'_>>],
        limits: &Limits,
        size: usize,
        config: &DfaConfig,
        lazy_doc: Option<lazy::LazyBody>,
        lazy_callees: &[bool],
    ) -> Result<Pda, BuildError> {
        let n = bodies.len();
        let mut frags = Vec::with_capacity(n);
        let fail = regex_syntax::hir::Hir::fail();
        for (i, (name, body)) in names.iter().zip(bodies).enumerate() {
            if let (true, Some(Body::Nfa(nfa))) = (lazy_callees.get(i) == Some(&true), body) {
                // A called fragment determinized on demand ([`lazy`]), unless
                // a marker shares a transition with text.
                if let Some(f) = Self::lazy_callee(name, (*nfa).clone(), n, size, config) {
                    frags.push(f);
                    continue;
                }
            }
            // With a lazy document, fragment 0 is a placeholder that admits
            // nothing until the callees' distances are known.
            let body = match body {
                Some(b) if i > 0 || lazy_doc.is_none() => b,
                _ => &Body::Hir(&fail),
            };
            let dfa = body.dfa(size, config).map_err(BuildError::Dfa)?;
            frags.push(Self::fragment(name, dfa, n));
        }
        let mut pda = Pda {
            frags,
            classes: [0; 256],
            reps: Vec::new(),
            class_size: Vec::new(),
            max_stack_depth: limits.max_stack_depth.min(u32::MAX as usize - 1) as u32,
            depth_knob: limits.depth_knob.clone(),
            max_stacks: limits.max_stacks.max(1),
            share: vec![None; n],
            states: 0,
        };
        pda.join_classes();
        pda.distances();
        if let Some(body) = lazy_doc {
            if !pda.lazy_document(body, size, config)? {
                // Not fit for the lazy build: the whole DFA, as before.
                if bodies.first().is_some_and(Option::is_none) {
                    return Err(BuildError::NotLazy);
                }
                return Self::build(names, bodies, limits, size, config, None, lazy_callees);
            }
            pda.join_classes();
        }
        pda.states = pda.frags.iter().map(Fragment::states).sum();
        // (A document determinized on demand as a long callee: its start's
        // distances are read from the room search when first met.)
        let start = pda.frags[0].start;
        pda.frags[0].ensure(start);
        let root = &pda.frags[0];
        let (d, need) = (
            root.dist[root.start as usize],
            root.need[root.start as usize],
        );
        if d == INF {
            return Err(BuildError::Empty);
        }
        if need as usize + 1 > limits.max_stack_depth {
            return Err(BuildError::Depth {
                need: need as usize + 1,
            });
        }
        Ok(pda)
    }

    fn fragment(name: &str, dfa: ByteDfa, nfrags: usize) -> Fragment {
        let count = dfa.state_count();
        let id = |s: u32| StateID::new_unchecked(s as usize);
        let mut calls = vec![Vec::new(); count];
        let mut accepting = vec![false; count];
        let mut has_text = vec![false; count];
        // One text byte per byte class (bytes of a class lead every state
        // alike): a few lookups per state instead of 245.
        let text_reps = text_class_reps(&dfa.byte_classes());
        for s in 1..count as u32 {
            accepting[s as usize] = dfa.is_accepting(id(s));
            has_text[s as usize] = text_reps
                .iter()
                .any(|&b| dfa.next(id(s), b).as_usize() != 0);
            let m = dfa.next(id(s), CALL_MARKER);
            if m.as_usize() == 0 {
                continue;
            }
            for f in 0..nfrags {
                let [hi, lo] = (f as u16).to_be_bytes();
                let r = dfa.next(dfa.next(m, hi), lo).as_usize() as u32;
                if r != 0 {
                    calls[s as usize].push((f as u16, r));
                }
            }
        }
        Fragment {
            name: name.to_string(),
            start: dfa.start().as_usize() as u32,
            dist: vec![INF; count],
            need: vec![INF; count],
            room_off: vec![0; count + 1],
            room_steps: Vec::new(),
            dfa: FragDfa::Eager(dfa),
            calls,
            accepting,
            has_text,
        }
    }

    /// One byte-class map for every fragment (bytes at or above 0xF5 are
    /// one dead class).
    fn join_classes(&mut self) {
        let mut ids: std::collections::HashMap<Vec<u16>, u8> = Default::default();
        for b in 0..=255u8 {
            let key: Vec<u16> = if b >= 0xF5 {
                vec![u16::MAX]
            } else {
                self.frags
                    .iter()
                    .map(|f| match &f.dfa {
                        FragDfa::Eager(d) => d.byte_classes()[b as usize] as u16,
                        FragDfa::Lazy(l) => l.dfa.byte_classes()[b as usize] as u16,
                    })
                    .collect()
            };
            let next = ids.len() as u8;
            self.classes[b as usize] = *ids.entry(key).or_insert(next);
        }
        (self.reps, self.class_size) = class_reps(&self.classes);
    }

    /// The fewest bytes to finish each fragment state **with `k` frames of
    /// room above it**, for every `k` that changes it (see
    /// [`Fragment::dist_within`]), and from them `dist` (unbounded room) and
    /// `need` (the least room that finishes at all).
    ///
    /// Level `k` is a shortest-path problem inside the fragments: a text byte
    /// costs 1, a call to `g` costs `g`'s start at level `k - 1` (level 0
    /// makes no call), an accepting state costs 0. Level 0 is a breadth-first
    /// search over the reversed edges; each later level lowers the previous
    /// one's distances from the call edges whose cost dropped (see the
    /// body). The levels stop changing once the callees' starts do, which
    /// takes at most one level per fragment (a shortest derivation repeats
    /// no rule along a path), and never go past the stack limit. A lazy
    /// called fragment takes part with its NFA's states (an epsilon edge
    /// costs 0), its per-state results kept in its [`lazy::LazyRoom`].
    fn distances(&mut self) {
        use crate::dfa::nfa::Kind;
        // The nodes: a fragment built whole has its DFA states; a lazy
        // callee its NFA states (a DFA state's distance is then the least
        // of its NFA states', [`lazy::LazyRoom`]).
        let nodes: Vec<usize> = self
            .frags
            .iter()
            .map(|f| match &f.dfa {
                FragDfa::Lazy(l) if l.room.is_some() => l.dfa.nfa().len(),
                _ => f.states(),
            })
            .collect();
        let base: Vec<u32> = nodes
            .iter()
            .scan(0u32, |acc, &n| {
                let b = *acc;
                *acc += n as u32;
                Some(b)
            })
            .collect();
        let total = nodes.iter().sum::<usize>();
        // Reversed edges (CSR by target; an NFA's epsilon edge, which reads
        // nothing, is its source with the top bit set) and reversed calls.
        const FREE: u32 = 1 << 31;
        let mut rev_off = vec![0u32; total + 1];
        let mut edges: Vec<(u32, u32)> = Vec::new();
        let mut calls: Vec<(u32, u32, u16)> = Vec::new();
        let mut targets: Vec<u32> = Vec::new();
        let mut accepting: Vec<u32> = Vec::new();
        let mut starts: Vec<u32> = Vec::new();
        for (f, fr) in self.frags.iter().enumerate() {
            let b0 = base[f];
            match &fr.dfa {
                FragDfa::Lazy(l) if l.room.is_some() => {
                    let nfa = l.dfa.nfa();
                    starts.push(b0 + nfa.start());
                    for (q, kind, es) in nfa.states() {
                        match kind {
                            Kind::Match => accepting.push(b0 + q),
                            // (No member sets in a fragment: `Op` is a move.)
                            Kind::Eps | Kind::Op => {
                                edges.extend(es.iter().map(|e| (b0 + e.next, (b0 + q) | FREE)))
                            }
                            Kind::Bytes => {
                                for e in es {
                                    if e.lo < 0xF5 {
                                        edges.push((b0 + e.next, b0 + q));
                                    }
                                    if (e.lo..=e.hi).contains(&CALL_MARKER) {
                                        // `0xF8 hi lo`: a call of fragment
                                        // `hi lo`, returning to where `lo` leads.
                                        for (g, r) in lazy::marker_calls(nfa, e.next) {
                                            if (g as usize) < self.frags.len() {
                                                calls.push((b0 + r, b0 + q, g));
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                _ => {
                    starts.push(b0 + fr.start);
                    // The fragment's own classes (the joint ones split them
                    // further).
                    let reps = match &fr.dfa {
                        FragDfa::Eager(d) => text_class_reps(&d.byte_classes()),
                        FragDfa::Lazy(_) => Vec::new(),
                    };
                    for s in 1..fr.states() as u32 {
                        if fr.accepting[s as usize] {
                            accepting.push(b0 + s);
                        }
                        // This state's distinct targets (a few; no global sort).
                        targets.clear();
                        for &b in &reps {
                            let t = fr.next_eager(s, b);
                            if t != 0 && targets.last() != Some(&t) {
                                targets.push(t);
                            }
                        }
                        targets.sort_unstable();
                        targets.dedup();
                        edges.extend(targets.iter().map(|&t| (b0 + t, b0 + s)));
                        for &(g, r) in &fr.calls[s as usize] {
                            calls.push((b0 + r, b0 + s, g));
                        }
                    }
                }
            }
        }
        // CSR by target: a counting sort.
        for &(t, _) in &edges {
            rev_off[t as usize + 1] += 1;
        }
        for k in 0..total {
            rev_off[k + 1] += rev_off[k];
        }
        let mut rev = vec![0u32; edges.len()];
        let mut fill = rev_off.clone();
        for &(t, s) in &edges {
            rev[fill[t as usize] as usize] = s;
            fill[t as usize] += 1;
        }
        drop(edges);
        calls.sort_unstable();
        let mut call_off = vec![0u32; total + 1];
        for &(r, _, _) in &calls {
            call_off[r as usize + 1] += 1;
        }
        for k in 0..total {
            call_off[k + 1] += call_off[k];
        }

        // Level 0 (no calls) is a 0-1 breadth-first search over the text
        // edges. Level `k` only lowers distances (a call costs its callee's
        // start at level `k - 1`, never more than at `k - 2`), and only
        // through call edges whose callee's start dropped: so each level
        // starts from the previous one's distances and a Dijkstra is seeded
        // with just those edges (a label-correcting search: every value
        // stays the length of some path, and it stops where no edge lowers
        // one).
        let mut d = vec![INF; total];
        let mut entries: Vec<(u32, u32, u32)> = Vec::new();
        let mut queue: std::collections::VecDeque<u32> = std::collections::VecDeque::new();
        for &a in &accepting {
            d[a as usize] = 0;
            queue.push_back(a);
        }
        while let Some(x) = queue.pop_front() {
            let x = x as usize;
            for &e in &rev[rev_off[x] as usize..rev_off[x + 1] as usize] {
                let (p, w) = ((e & !FREE) as usize, u32::from(e & FREE == 0));
                if d[x] + w < d[p] {
                    d[p] = d[x] + w;
                    if w == 0 {
                        queue.push_front(p as u32);
                    } else {
                        queue.push_back(p as u32);
                    }
                }
            }
        }
        entries.extend(
            d.iter()
                .enumerate()
                .filter(|x| *x.1 != INF)
                .map(|(x, &c)| (x as u32, 0, c)),
        );
        // Per fragment: its start's distance one level down, and two.
        let mut start_cost: Vec<u32> = starts.iter().map(|&s| d[s as usize]).collect();
        let mut older_cost = vec![INF; starts.len()];
        let mut lw = Lowering {
            d,
            queue: Buckets::default(),
            touched_at: vec![0; total],
            touched: Vec::new(),
            level: 0,
        };
        for level in 1..=self.max_stack_depth {
            lw.level = level;
            lw.touched.clear();
            // Seeds: the call edges whose cost dropped since the last level.
            for &(r, p, g) in &calls {
                let (c, old) = (start_cost[g as usize], older_cost[g as usize]);
                if c != INF && c != old && lw.d[r as usize] != INF {
                    lw.lower(p, lw.d[r as usize].saturating_add(c));
                }
            }
            while let Some((dx, x)) = lw.queue.pop() {
                let x = x as usize;
                if dx > lw.d[x] {
                    continue;
                }
                for &e in &rev[rev_off[x] as usize..rev_off[x + 1] as usize] {
                    lw.lower(e & !FREE, dx + u32::from(e & FREE == 0));
                }
                for &(_, p, g) in &calls[call_off[x] as usize..call_off[x + 1] as usize] {
                    let c = start_cost[g as usize];
                    if c != INF {
                        lw.lower(p, dx.saturating_add(c));
                    }
                }
            }
            if lw.touched.is_empty() {
                break;
            }
            entries.extend(lw.touched.iter().map(|&x| (x, level, lw.d[x as usize])));
            older_cost.copy_from_slice(&start_cost);
            for (c, &s) in start_cost.iter_mut().zip(&starts) {
                *c = lw.d[s as usize];
            }
        }
        // Per node: its (room, distance) steps, by room (a stable counting
        // sort by node: the entries were made level by level).
        let mut first = vec![0u32; total + 1];
        for &(x, _, _) in &entries {
            first[x as usize + 1] += 1;
        }
        for k in 0..total {
            first[k + 1] += first[k];
        }
        let mut by_node = vec![(0u32, 0u32); entries.len()];
        let mut fill = first.clone();
        for &(x, level, c) in &entries {
            by_node[fill[x as usize] as usize] = (level, c);
            fill[x as usize] += 1;
        }
        drop(entries);
        for (f, fr) in self.frags.iter_mut().enumerate() {
            let (b0, n) = (base[f] as usize, nodes[f]);
            let lo = first[b0] as usize;
            let off: Vec<u32> = first[b0..=b0 + n].iter().map(|&o| o - lo as u32).collect();
            let steps = by_node[lo..first[b0 + n] as usize].to_vec();
            match &mut fr.dfa {
                FragDfa::Lazy(l) if l.room.is_some() => {
                    let room = l.room.as_mut().expect("a callee");
                    room.nfa_off = off;
                    room.nfa_steps = steps;
                }
                _ => {
                    for s in 0..n {
                        let st = &steps[off[s] as usize..off[s + 1] as usize];
                        fr.need[s] = st.first().map_or(INF, |x| x.0);
                        fr.dist[s] = st.last().map_or(INF, |x| x.1);
                    }
                    fr.room_off = off;
                    fr.room_steps = steps;
                }
            }
        }
        // A lazy callee's start, with its distances now known.
        for fr in &mut self.frags {
            if matches!(&fr.dfa, FragDfa::Lazy(l) if l.room.is_some()) {
                let start = fr.start;
                fr.ensure(start);
            }
        }
    }

    /// Number of fragments.
    pub fn fragment_count(&self) -> usize {
        self.frags.len()
    }

    /// Number of fragments determinized on demand.
    pub fn lazy_fragment_count(&self) -> usize {
        self.frags.iter().filter(|f| f.is_lazy()).count()
    }

    /// The rule names of the fragments (`root` first).
    pub fn fragment_names(&self) -> impl Iterator<Item = &str> {
        self.frags.iter().map(|f| f.name.as_str())
    }
}

impl Pda {
    /// The fragments a lazy callee may call before reading a byte: its
    /// NFA searched from the start through epsilon edges and the calls of
    /// fragments whose shortest text is empty.
    fn lazy_first_calls(&self, l: &lazy::LazyFrag) -> Vec<usize> {
        use crate::dfa::nfa::Kind;
        let nfa = l.dfa.nfa();
        let mut out = Vec::new();
        let mut seen = vec![false; nfa.len()];
        let mut todo = vec![nfa.start()];
        while let Some(q) = todo.pop() {
            if std::mem::replace(&mut seen[q as usize], true) {
                continue;
            }
            match nfa.kind(q) {
                Kind::Eps | Kind::Op => todo.extend(nfa.edges(q).iter().map(|e| e.next)),
                Kind::Bytes => {
                    for e in nfa.edges(q) {
                        if !(e.lo..=e.hi).contains(&CALL_MARKER) {
                            continue;
                        }
                        for (g, r) in lazy::marker_calls(nfa, e.next) {
                            let Some(c) = self.frags.get(g as usize) else {
                                continue;
                            };
                            out.push(g as usize);
                            if c.dist[c.start as usize] == 0 {
                                todo.push(r);
                            }
                        }
                    }
                }
                Kind::Match => {}
            }
        }
        out
    }

    /// A fragment that can call into its own cycle before any byte is read
    /// (calls at states reached from its start through nullable callees
    /// only), when there is one.
    pub(crate) fn left_recursive(&self) -> Option<usize> {
        let n = self.frags.len();
        // first[f]: the fragments f may call before reading a byte.
        let first: Vec<Vec<usize>> = (0..n)
            .map(|f| {
                let fr = &self.frags[f];
                let mut out = Vec::new();
                if let FragDfa::Lazy(l) = &fr.dfa {
                    if l.room.is_some() {
                        out = self.lazy_first_calls(l);
                    }
                    // (The lazy document is never called: in no cycle.)
                    return out;
                }
                let mut seen = vec![false; fr.accepting.len()];
                let mut todo = vec![fr.start as usize];
                while let Some(s) = todo.pop() {
                    if std::mem::replace(&mut seen[s], true) {
                        continue;
                    }
                    for &(g, r) in &fr.calls[s] {
                        out.push(g as usize);
                        let c = &self.frags[g as usize];
                        if c.dist[c.start as usize] == 0 {
                            todo.push(r as usize);
                        }
                    }
                }
                out
            })
            .collect();
        // A cycle in `first` through f.
        (0..n).find(|&f| {
            let mut seen = vec![false; n];
            let mut todo = first[f].clone();
            while let Some(g) = todo.pop() {
                if g == f {
                    return true;
                }
                if !std::mem::replace(&mut seen[g], true) {
                    todo.extend(&first[g]);
                }
            }
            false
        })
    }
}
