//! # Fragments determinized on demand: the document, and long called ones
//!
//! A schema compiled through the pushdown engine (a recursive `$ref`, or
//! free-form values as calls of the shared "any JSON value" fragment) has
//! one large fragment, the document, and a few small ones. Built whole, the
//! document's DFA was most of the time to first mask: a Kubernetes schema's
//! took 1.5 s where the regular path, lazy past 128 states, takes
//! milliseconds, and some passed the DFA size limit altogether. Here the
//! document is a [`LazyDfa`], as the regular path's large DFAs are: only
//! the states the matchers visit are determinized.
//!
//! What the engine needs per fragment state is known per state, so it is
//! filled as states are met ([`Fragment::ensure`]):
//!
//! * **calls**: the document's text is rewritten with **one-byte call
//!   markers** (`0xF5 + k` for its `k`-th distinct callee, bytes no UTF-8
//!   text holds) instead of the three-byte `0xF8 hi lo`, so a state's calls
//!   are the states its marker bytes lead to, one lookup each;
//! * **acceptance** and **text bytes**: from the state's row;
//! * **distance to the end, with calls**: the determinizer's distances are
//!   computed on the NFA; there a marker byte costs its callee's shortest
//!   text within the room the stack leaves it (`u32::MAX`: no room, the
//!   edge is not taken), not 1 ([`ByteDfa::lazy_weighted`]). The document is
//!   never called (fragment ids start at 1), so it always sits at depth 1
//!   with room `max_stack_depth - 1` above it: one weighting is exact for
//!   every document frame, and [`Fragment::dist_within`] returns it. `need`
//!   (the frames a state needs above it) only decides whether a frame may
//!   exist at depth 1, so it is 0 for every state that can finish (the
//!   determinizer keeps no other).
//!
//! The one-byte markers leave room for 11 callees (`0xF5..=0xFF`); a
//! document calling more is determinized on demand as a long called
//! fragment is (below), and one whose syntax needs look-around, or one
//! where a marker byte would share a transition with other bytes, is built
//! whole as before. A size limit hit while determinizing on demand cuts the
//! state's row and is reported by the engine like its own limits (the
//! lazy index does the same).
//!
//! ## Called fragments, determinized on demand
//!
//! A schema with shared definitions has dozens of called fragments (a
//! Kubernetes schema: 97, `PodSpec`'s text 32 KB), and determinizing them
//! whole was most of its DFA phase, though a document visits few of their
//! states. A called fragment whose text is long (past 4 bytes per state of
//! [`DfaConfig::lazy_threshold`]: 512 bytes by default; never with a size
//! limit below its default, so that a fragment past it is refused at
//! compile time) is a [`LazyDfa`] too, over the NFA of its own text, with
//! the ordinary three-byte markers (no limit on its callees: a state's
//! calls are read through the marker's intermediate states). A callee sits
//! at every depth, so one weighting of its markers cannot be exact: its
//! distances **within each room** are computed per NFA state by
//! [`Pda::distances`] (the NFA's states are nodes of the same level-by-level
//! search as the DFA states of fragments built whole), and a DFA state's
//! are the least of its NFA states' ([`LazyRoom`]: the texts from a DFA
//! state are the union of its NFA states'), merged when the state is first
//! met. `need` is the least room with a finite distance, as for a fragment
//! built whole, so the engine keeps every frame it opens finishable. The
//! lazy DFA's own distances count a marker as its three bytes: they only
//! decide which threads can finish at all. The shared "any JSON value"
//! fragment is always built whole: its frames' masks are shared between
//! compiles by state number.

use super::{BuildError, FragDfa, Fragment, OwnedBody, Pda, CALL_MARKER, INF};
use crate::dfa::{ByteDfa, DfaConfig, LazyDfa};

/// The first one-byte call marker.
pub(crate) const LAZY_MARKER: u8 = 0xF5;

/// The document fragment parsed (syntax tree or NFA) with one-byte call markers, and
/// which callee each marker byte calls.
#[derive(Debug)]
pub(crate) struct LazyBody {
    pub body: OwnedBody,
    /// (marker byte, callee fragment).
    pub markers: Vec<(u8, u16)>,
}

/// A lazy fragment's automaton and what was filled per state.
#[derive(Debug)]
pub(crate) struct LazyFrag {
    pub dfa: LazyDfa,
    pub(super) markers: Markers,
    /// Per state: calls and text bytes filled.
    filled: Vec<bool>,
    /// The DFA's limit error was handed to the engine.
    reported: bool,
    /// A called fragment's distances at every room (`None`: the document,
    /// whose one room is in its DFA's own distances).
    pub(super) room: Option<LazyRoom>,
}

/// How a lazy fragment's text writes its calls.
#[derive(Debug)]
pub(crate) enum Markers {
    /// The document's one-byte markers: (marker byte, callee).
    Short(Vec<(u8, u16)>),
    /// The ordinary `0xF8 hi lo` (callee `hi lo`), among this many
    /// fragments.
    Long(usize),
}

/// The calls an NFA's three-byte markers make from `after` (the NFA state
/// that `0xF8` leads to): `(callee, NFA state returned to)`.
pub(crate) fn marker_calls(nfa: &crate::dfa::Nfa, after: u32) -> Vec<(u16, u32)> {
    let mut out = Vec::new();
    for (hi, q) in byte_steps(nfa, after) {
        for (lo, r) in byte_steps(nfa, q) {
            out.push((u16::from_be_bytes([hi, lo]), r));
        }
    }
    out
}

/// The bytes read from NFA state `q` (through its epsilon closure), each
/// with the state it leads to.
fn byte_steps(nfa: &crate::dfa::Nfa, q: u32) -> Vec<(u8, u32)> {
    use crate::dfa::nfa::Kind;
    let (mut out, mut todo, mut seen) = (Vec::new(), vec![q], Vec::new());
    while let Some(x) = todo.pop() {
        if seen.contains(&x) {
            continue;
        }
        seen.push(x);
        match nfa.kind(x) {
            // (A fragment's NFA has no member sets: `Kind::Op` is a move.)
            Kind::Eps | Kind::Op => todo.extend(nfa.edges(x).iter().map(|e| e.next)),
            Kind::Bytes => {
                for e in nfa.edges(x) {
                    out.extend((e.lo..=e.hi).map(|b| (b, e.next)));
                }
            }
            Kind::Match => {}
        }
    }
    out
}

/// The distances of a lazy callee within each room ([`Fragment::dist_within`]),
/// per NFA state from [`Pda::distances`], and per DFA state the least of its
/// NFA states' (a DFA state's texts are the union of its NFA states').
#[derive(Debug, Default)]
pub(crate) struct LazyRoom {
    /// Per NFA state `q`, `nfa_steps[nfa_off[q]..nfa_off[q + 1]]`: the
    /// `(room, bytes)` steps, as [`Fragment`]'s per DFA state.
    pub(super) nfa_off: Vec<u32>,
    pub(super) nfa_steps: Vec<(u32, u32)>,
    /// Per DFA state found so far: the span of its steps in `steps`.
    span: Vec<(u32, u32)>,
    steps: Vec<(u32, u32)>,
}

impl LazyRoom {
    /// The steps of NFA state `q`.
    fn of(&self, q: u32) -> &[(u32, u32)] {
        &self.nfa_steps[self.nfa_off[q as usize] as usize..self.nfa_off[q as usize + 1] as usize]
    }

    /// Records DFA state `t`'s steps, the pointwise least over `key` (its
    /// NFA states); returns `(need, dist)`: the least room that finishes
    /// and the bytes at unbounded room ([`INF`] when none).
    fn merge(&mut self, t: u32, key: &[u32]) -> (u32, u32) {
        let mut rooms: Vec<u32> = key
            .iter()
            .flat_map(|&q| self.of(q).iter().map(|x| x.0))
            .collect();
        rooms.sort_unstable();
        rooms.dedup();
        let off = self.steps.len() as u32;
        let mut last = INF;
        for &r in &rooms {
            let v = key
                .iter()
                .filter_map(|&q| self.of(q).iter().rev().find(|x| x.0 <= r).map(|x| x.1))
                .min()
                .unwrap_or(INF);
            if v < last {
                self.steps.push((r, v));
                last = v;
            }
        }
        if self.span.len() <= t as usize {
            self.span.resize(t as usize + 1, (0, 0));
        }
        let len = self.steps.len() as u32 - off;
        self.span[t as usize] = (off, len);
        let s = &self.steps[off as usize..];
        (
            s.first().map_or(INF, |x| x.0),
            s.last().map_or(INF, |x| x.1),
        )
    }

    /// Fewest bytes from DFA state `t` within `room` ([`INF`]: none).
    pub(super) fn within(&self, t: u32, room: u32) -> u32 {
        let Some(&(off, len)) = self.span.get(t as usize) else {
            return INF;
        };
        self.steps[off as usize..(off + len) as usize]
            .iter()
            .rev()
            .find(|x| x.0 <= room)
            .map_or(INF, |x| x.1)
    }
}

impl Fragment {
    /// Fills the per-state data of state `s` (and the acceptance and
    /// distances of every state found so far) of a lazy fragment; nothing
    /// for one built whole.
    pub(crate) fn ensure(&mut self, s: u32) {
        let FragDfa::Lazy(l) = &mut self.dfa else {
            return;
        };
        if l.filled.get(s as usize).copied().unwrap_or(false) {
            return;
        }
        // Exploring the row finds new states: size the tables after it.
        let mut has_text = false;
        for b in 0..LAZY_MARKER {
            if l.dfa.next(s, b) != 0 {
                has_text = true;
                break;
            }
        }
        let mut calls = Vec::new();
        match &l.markers {
            Markers::Short(markers) => {
                for &(m, g) in markers {
                    let r = l.dfa.next(s, m);
                    if r != 0 {
                        calls.push((g, r));
                    }
                }
            }
            &Markers::Long(nfrags) => {
                let m = l.dfa.next(s, CALL_MARKER);
                if m != 0 {
                    for g in (0..nfrags.min(1 << 16)).map(|g| g as u16) {
                        let [hi, lo] = g.to_be_bytes();
                        let h = l.dfa.next(m, hi);
                        let r = if h == 0 { 0 } else { l.dfa.next(h, lo) };
                        if r != 0 {
                            calls.push((g, r));
                        }
                    }
                }
            }
        }
        let n = l.dfa.state_count();
        let old = self.accepting.len();
        if old < n {
            self.accepting.resize(n, false);
            self.has_text.resize(n, false);
            self.calls.resize(n, Vec::new());
            self.dist.resize(n, INF);
            self.need.resize(n, INF);
            l.filled.resize(n, false);
            for t in old.max(1)..n {
                self.accepting[t] = l.dfa.is_accepting(t as u32);
                if let Some(room) = &mut l.room {
                    // A callee: its distances at every room.
                    let (need, d) = room.merge(t as u32, l.dfa.nfa_key(t as u32));
                    self.dist[t] = d;
                    self.need[t] = need;
                    continue;
                }
                let d = l.dfa.dist(t as u32);
                self.dist[t] = d;
                self.need[t] = if d == INF { INF } else { 0 };
            }
        }
        if s != 0 {
            l.filled[s as usize] = true;
            self.has_text[s as usize] = has_text;
            self.calls[s as usize] = calls;
        }
    }

    /// The lazy DFA's limit error, once (later calls: `None`).
    pub(crate) fn take_lazy_limit(&mut self) -> Option<crate::index::LimitHit> {
        let FragDfa::Lazy(l) = &mut self.dfa else {
            return None;
        };
        if l.reported {
            return None;
        }
        let source = l.dfa.limit_error()?.clone();
        l.reported = true;
        Some(crate::index::LimitHit::Determinize {
            rule: l.room.as_ref().map(|_| self.name.to_string()),
            source,
        })
    }

    /// Bounds the lazy DFA's states (the engine's configuration limit).
    pub(crate) fn set_max_states(&mut self, max: usize) {
        if let FragDfa::Lazy(l) = &mut self.dfa {
            l.dfa.set_max_states(max);
        }
    }
}

impl Pda {
    /// A called fragment determinized on demand: its NFA (with the
    /// ordinary three-byte markers) under a lazy DFA whose distances count
    /// a marker as bytes (the DFA only drops threads that cannot finish
    /// whatever the callees do; the room each frame has is the engine's to
    /// judge, from [`LazyRoom`], filled by [`Pda::distances`]). `None` when
    /// a marker shares a transition with text.
    pub(super) fn lazy_callee(
        name: &str,
        nfa: crate::dfa::Nfa,
        nfrags: usize,
        size: usize,
        config: &DfaConfig,
    ) -> Option<Fragment> {
        // A byte range holding text and marker bytes alike would read a
        // marker as text.
        let mixed = nfa
            .states()
            .any(|(_, _, es)| es.iter().any(|e| e.lo < LAZY_MARKER && e.hi >= LAZY_MARKER));
        if mixed {
            return None;
        }
        let dfa = ByteDfa::lazy_nfa(nfa, size, config);
        let start = dfa.start();
        Some(Fragment {
            name: name.to_string(),
            start,
            dfa: FragDfa::Lazy(Box::new(LazyFrag {
                dfa,
                markers: Markers::Long(nfrags),
                filled: vec![false],
                reported: false,
                room: Some(LazyRoom::default()),
            })),
            calls: vec![Vec::new()],
            accepting: vec![false],
            has_text: vec![false],
            dist: vec![INF],
            need: vec![INF],
            room_off: Vec::new(),
            room_steps: Vec::new(),
        })
    }

    /// Replaces fragment 0 (a placeholder) with the lazy document of
    /// `body`, its marker bytes weighted by the callees' distances (which
    /// must be known). `false` when the body does not fit the lazy build.
    pub(super) fn lazy_document(
        &mut self,
        body: LazyBody,
        size: usize,
        config: &DfaConfig,
    ) -> Result<bool, BuildError> {
        // The document sits at depth 1: a callee's frame at depth 2 has
        // `max - 2` frames of room above it.
        let mut weights = [u32::MAX; 256];
        for &(m, g) in &body.markers {
            let Some(c) = self.frags.get(g as usize) else {
                return Ok(false);
            };
            if g == 0 || m < LAZY_MARKER {
                return Ok(false);
            }
            weights[m as usize] = match self.max_stack_depth.checked_sub(2) {
                Some(room) => c.dist_within(c.start, room),
                None => INF,
            };
        }
        let dfa = match body.body {
            OwnedBody::Hir(h) => {
                ByteDfa::lazy_weighted(&h, size, config, &weights).map_err(BuildError::Dfa)?
            }
            OwnedBody::Nfa(n) => ByteDfa::lazy_weighted_nfa(n, size, config, &weights),
        };
        let Some(dfa) = dfa else {
            return Ok(false);
        };
        let f = &mut self.frags[0];
        f.start = dfa.start();
        f.dfa = FragDfa::Lazy(Box::new(LazyFrag {
            dfa,
            markers: Markers::Short(body.markers),
            filled: vec![false],
            reported: false,
            room: None,
        }));
        f.accepting = vec![false];
        f.has_text = vec![false];
        f.calls = vec![Vec::new()];
        f.dist = vec![INF];
        f.need = vec![INF];
        f.room_off = Vec::new();
        f.room_steps = Vec::new();
        let start = f.start;
        f.ensure(start);
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex_syntax::hir::Hir;

    fn hir(p: &str) -> Hir {
        regex_syntax::ParserBuilder::new()
            .utf8(false)
            .build()
            .parse(p)
            .unwrap()
    }

    fn lazy(p: &str, w: &[(u8, u32)]) -> Option<LazyDfa> {
        let mut weights = [u32::MAX; 256];
        for &(b, c) in w {
            weights[b as usize] = c;
        }
        ByteDfa::lazy_weighted(&hir(p), p.len(), &DfaConfig::default(), &weights).unwrap()
    }

    #[test]
    fn a_marker_costs_its_callees_shortest_text() {
        // a·call(5)·b = 7, cd·call(1) = 3.
        let d = lazy(r"a(?-u:\xF5)b|cd(?-u:\xF6)", &[(0xF5, 5), (0xF6, 1)]).unwrap();
        assert_eq!(d.dist(d.start()), 3);
        let mut d = d;
        let a = d.next(d.start(), b'a');
        assert_eq!(d.dist(a), 6);
        // A call with no room (u32::MAX) is never taken: only cd·call.
        let d = lazy(r"a(?-u:\xF5)b|cd(?-u:\xF6)", &[(0xF6, 1)]).unwrap();
        assert_eq!(d.dist(d.start()), 3);
        let mut d = d;
        assert_eq!(
            d.next(d.start(), b'a'),
            0,
            "a leads only to a call without room"
        );
    }

    #[test]
    fn markers_alternated_share_a_range_and_each_still_calls() {
        let mut d = lazy(r"x(?:(?-u:\xF5)|(?-u:\xF6))y", &[(0xF5, 4), (0xF6, 2)]).unwrap();
        assert_eq!(d.dist(d.start()), 4);
        let x = d.next(d.start(), b'x');
        let (r5, r6) = (d.next(x, 0xF5), d.next(x, 0xF6));
        assert!(r5 != 0 && r6 != 0);
    }

    #[test]
    fn a_text_range_over_marker_bytes_is_refused() {
        assert!(lazy(r"a(?-u:[\x00-\xFF])(?-u:\xF5)", &[(0xF5, 1)]).is_none());
    }
}
