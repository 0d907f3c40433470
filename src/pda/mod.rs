//! # The pushdown engine: grammar fragments that call one another
//!
//! A grammar whose recursion is more than immediate left or right recursion
//! (`value ::= "[" value "]" | "x"`) is not regular, and no byte DFA holds
//! it. Here it becomes a set of **fragments**, one per rule that lies in a
//! cycle of references (plus `root`): each fragment is that rule's body with
//! every non-recursive rule inlined and every reference to a recursive rule
//! replaced by a *call marker* (`0xF8 hi lo`, bytes no UTF-8 text holds),
//! determinized by the ordinary [`ByteDfa`] machinery. The marker edges are
//! then read back out of each DFA as **call edges** (`calls[state] =
//! [(callee, return state)]`) and hidden from the text transitions
//! ([`Fragment`]).
//!
//! ## Run time: a DFA over sets of stacks, built on demand
//!
//! A configuration of the pushdown automaton is a *stack of frames* (fragment,
//! DFA state); the top frame is where text is read, the frames below hold the
//! return states. Because calls and returns read no bytes, and a grammar may
//! be ambiguous, the matcher is in a small **set** of stacks at once. The
//! engine ([`engine`]) interns stacks as persistent linked lists (a frame and
//! a parent pointer: pushing is one node, popping is following the pointer,
//! and equal stacks share their nodes) and interns each *closed* set of
//! stacks (calls expanded, finished fragments returned) as one state of a
//! lazily built DFA. That DFA is what the [`TokenIndex`](crate::TokenIndex)
//! walks: per state a transition row filled on first use and a mask computed
//! on first visit (one walk of the vocabulary trie) and then shared by every
//! matcher of the compiled grammar. So the [`Matcher`](crate::Matcher) keeps
//! its one-state-per-token history and `rollback` restores the stack with a
//! pop, exactly as for a regular source.
//!
//! ## Invariants
//!
//! * **No dead ends.** Unproductive rules (no finite derivation) are found
//!   at build time and every frame that needs one is never created; every
//!   other frame can finish. With the depth limit, a frame at depth `d` in a
//!   state that needs `k` more frames to finish exists only when `d + k ≤
//!   max_stack_depth` ([`Fragment::need`]), so every stack the engine holds
//!   can still be completed, and a token is allowed exactly when its bytes
//!   lead to a non-empty set.
//! * **EOS** only where some stack has finished its last frame.
//! * **Budget.** A stack's shortest completion is the sum of each frame's
//!   shortest completion ([`Fragment::dist`], a callee counted by its own
//!   shortest text); the set's is the least. The index tokenizes the
//!   canonical shortest completion greedily, as for a DFA, so `max_tokens`
//!   never cuts a recursive structure in half.
//! * **Limits.** [`GbnfOptions::max_stack_depth`](crate::grammar::gbnf::GbnfOptions::max_stack_depth)
//!   bounds the frames, `max_stacks` the stacks of one configuration,
//!   [`IndexConfig::max_states`](crate::IndexConfig::max_states) the interned
//!   configurations; each hit is reported by
//!   [`TokenIndex::lazy_limit_error`](crate::TokenIndex::lazy_limit_error)
//!   naming its knob.
//!
//! ## Why not XGrammar's split (yet)
//!
//! XGrammar precomputes, per fragment state, the tokens decided inside the
//! fragment and checks the rest against the stack at run time. Here the
//! whole mask of a configuration is computed once and memoized per
//! configuration, which makes the steady-state cost of a step a table
//! lookup and a mask copy whatever the grammar; a configuration seen for the
//! first time pays one trie walk. See the README section "Grammars with a
//! stack" for the figures.

mod engine;
pub(crate) mod schema;

pub(crate) use engine::Engine;

use crate::dfa::{ByteDfa, DfaConfig};
use crate::grammar::gbnf::lower::{Fragments, CALL_MARKER};
use crate::grammar::gbnf::{GbnfError, GbnfOptions};
use regex_automata::util::primitives::StateID;

/// Not reachable / unknown.
pub(crate) const INF: u32 = u32::MAX;

/// One fragment: a byte DFA whose call markers became call edges.
#[derive(Debug)]
pub(crate) struct Fragment {
    /// The rule it came from.
    pub name: String,
    dfa: ByteDfa,
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
}

impl Fragment {
    /// The state after text byte `b` (0: dead). Bytes that no UTF-8 text
    /// holds (call markers among them) are dead.
    #[inline]
    pub fn next(&self, s: u32, b: u8) -> u32 {
        if b >= 0xF5 {
            return 0;
        }
        self.dfa
            .next(StateID::new_unchecked(s as usize), b)
            .as_usize() as u32
    }

    fn states(&self) -> usize {
        self.accepting.len()
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

/// Why [`Pda::build_with`] refused the fragments.
#[derive(Debug)]
pub(crate) enum BuildError {
    /// No text of the root fragment can finish.
    Empty,
    /// Every text nests `need` frames, past the depth limit.
    Depth { need: usize },
    /// A fragment's automaton could not be built.
    Compile(crate::CompileError),
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
    /// Total DFA states of the fragments.
    pub states: usize,
}

impl Pda {
    /// Determinizes each fragment and reads its call edges back out.
    pub fn build(
        fragments: &Fragments,
        opts: &GbnfOptions,
        size: usize,
        config: &DfaConfig,
    ) -> Result<Pda, crate::CompileError> {
        let limits = Limits {
            max_stack_depth: opts.max_stack_depth,
            max_stacks: opts.max_stacks,
            depth_knob: format!("GbnfOptions::max_stack_depth ({})", opts.max_stack_depth),
        };
        Self::build_with(fragments, &limits, size, config).map_err(|e| match e {
            BuildError::Empty => GbnfError::EmptyLanguage {
                max_depth: opts.max_stack_depth,
            }
            .into(),
            BuildError::Depth { need } => GbnfError::StackDepth {
                limit: opts.max_stack_depth,
                need,
            }
            .into(),
            BuildError::Compile(e) => e,
        })
    }

    /// [`Pda::build`] for any front end: the limits are given with the
    /// name of the option that set them, and the two refusals that a front
    /// end words itself (an empty language, a shortest text deeper than the
    /// stack) come back as [`BuildError`].
    pub(crate) fn build_with(
        fragments: &Fragments,
        limits: &Limits,
        size: usize,
        config: &DfaConfig,
    ) -> Result<Pda, BuildError> {
        let n = fragments.bodies.len();
        let mut frags = Vec::with_capacity(n);
        for (name, body) in fragments.names.iter().zip(&fragments.bodies) {
            let hir = body.clone().unwrap_or_else(regex_syntax::hir::Hir::fail);
            let dfa =
                ByteDfa::from_hir(&hir, size, config).map_err(|e| BuildError::Compile(e.into()))?;
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
            states: 0,
        };
        pda.states = pda.frags.iter().map(Fragment::states).sum();
        pda.join_classes();
        pda.distances();
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
        for s in 1..count as u32 {
            accepting[s as usize] = dfa.is_accepting(id(s));
            has_text[s as usize] = (0..0xF5u8).any(|b| dfa.next(id(s), b).as_usize() != 0);
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
            dfa,
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
                    .map(|f| f.dfa.byte_classes()[b as usize] as u16)
                    .collect()
            };
            let next = ids.len() as u8;
            self.classes[b as usize] = *ids.entry(key).or_insert(next);
        }
        (self.reps, self.class_size) = crate::index::automaton::class_reps(&self.classes);
    }

    /// The fixpoints of `dist` and `need` over every fragment (both only
    /// decrease, so the sweeps end).
    fn distances(&mut self) {
        let reps = self.reps.clone();
        loop {
            let mut changed = false;
            for f in 0..self.frags.len() {
                for s in 1..self.frags[f].states() {
                    let fr = &self.frags[f];
                    let (mut d, mut k) = if fr.accepting[s] { (0, 0) } else { (INF, INF) };
                    for &b in &reps {
                        let t = fr.next(s as u32, b) as usize;
                        if t != 0 && fr.dist[t] != INF {
                            d = d.min(fr.dist[t].saturating_add(1));
                            k = k.min(fr.need[t]);
                        }
                    }
                    for &(g, r) in &fr.calls[s] {
                        let callee = &self.frags[g as usize];
                        let (cd, ck) = (
                            callee.dist[callee.start as usize],
                            callee.need[callee.start as usize],
                        );
                        let (rd, rk) = (fr.dist[r as usize], fr.need[r as usize]);
                        if cd != INF && rd != INF {
                            d = d.min(cd.saturating_add(rd));
                            k = k.min(ck.saturating_add(1).max(rk));
                        }
                    }
                    let fr = &mut self.frags[f];
                    if d < fr.dist[s] || k < fr.need[s] {
                        fr.dist[s] = fr.dist[s].min(d);
                        fr.need[s] = fr.need[s].min(k);
                        changed = true;
                    }
                }
            }
            if !changed {
                return;
            }
        }
    }

    /// Number of fragments.
    pub fn fragment_count(&self) -> usize {
        self.frags.len()
    }

    /// The rule names of the fragments (`root` first).
    pub fn fragment_names(&self) -> impl Iterator<Item = &str> {
        self.frags.iter().map(|f| f.name.as_str())
    }
}
