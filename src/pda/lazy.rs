//! # The document fragment, determinized on demand
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
//! document calling more, one whose syntax needs look-around, or one where
//! a marker byte would share a transition with other bytes is built whole
//! as before. A size limit hit while determinizing on demand cuts the
//! state's row and is reported by the engine like its own limits (the
//! lazy index does the same).

use super::{BuildError, FragDfa, Fragment, OwnedBody, Pda, INF};
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

/// The lazy document's automaton and what was filled per state.
#[derive(Debug)]
pub(crate) struct LazyDoc {
    pub dfa: LazyDfa,
    markers: Vec<(u8, u16)>,
    /// Per state: calls and text bytes filled.
    filled: Vec<bool>,
    /// The DFA's limit error was handed to the engine.
    reported: bool,
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
        for &(m, g) in &l.markers {
            let r = l.dfa.next(s, m);
            if r != 0 {
                calls.push((g, r));
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
                let d = l.dfa.dist(t as u32);
                self.accepting[t] = l.dfa.is_accepting(t as u32);
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
    pub(crate) fn take_lazy_limit(&mut self) -> Option<String> {
        let FragDfa::Lazy(l) = &mut self.dfa else {
            return None;
        };
        if l.reported {
            return None;
        }
        let e = l.dfa.limit_error()?.to_string();
        l.reported = true;
        Some(format!(
            "the document's automaton, determinized on demand: {e}"
        ))
    }

    /// Bounds the lazy DFA's states (the engine's configuration limit).
    pub(crate) fn set_max_states(&mut self, max: usize) {
        if let FragDfa::Lazy(l) = &mut self.dfa {
            l.dfa.set_max_states(max);
        }
    }
}

impl Pda {
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
            OwnedBody::Hir(h) => ByteDfa::lazy_weighted(&h, size, config, &weights)
                .map_err(|e| BuildError::Compile(e.into()))?,
            OwnedBody::Nfa(n) => ByteDfa::lazy_weighted_nfa(n, size, config, &weights),
        };
        let Some(dfa) = dfa else {
            return Ok(false);
        };
        let f = &mut self.frags[0];
        f.start = dfa.start();
        f.dfa = FragDfa::Lazy(Box::new(LazyDoc {
            dfa,
            markers: body.markers,
            filled: vec![false],
            reported: false,
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
