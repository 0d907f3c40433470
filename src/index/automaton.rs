//! The byte-automaton trait the index is built over, and its compaction into
//! a dense table of *live* states.
//!
//! [`ByteAutomaton`] is deliberately small (start, next on a byte, accepting at
//! end of input, dead) so that products (intersection) or complements of
//! automata can be indexed exactly like a plain regex DFA.
//!
//! `LiveTable` is what the index walks: every state reachable from the start
//! that can still reach acceptance, renumbered `0..n`, with transitions over
//! byte classes; a transition into a state that cannot reach acceptance is
//! `DEAD`. So "the next state is not `DEAD`" *is* "the text can still be
//! completed" — the invariant that makes every mask free of dead ends. The
//! table also keeps, per state, the shortest distance in bytes to acceptance
//! (the canonical shortest completion and forced bytes are derived from it by
//! the algorithms of `steps.rs`, shared with the other engines).

use super::steps::{canonical_byte, reverse_reach, Steps};
use super::IndexError;
use crate::dfa::class_reps;
use std::collections::HashMap;
use std::hash::Hash;

/// A deterministic automaton over bytes.
pub trait ByteAutomaton {
    /// A state; cheap to copy and hash.
    type State: Copy + Eq + Hash;
    /// The start state.
    fn start(&self) -> Self::State;
    /// The state after reading `byte` in `s`.
    fn next(&self, s: Self::State, byte: u8) -> Self::State;
    /// Whether no continuation from `s` can ever be accepted (a sink).
    fn is_dead(&self, s: Self::State) -> bool;
    /// Whether the text read so far is in the language.
    fn is_accepting(&self, s: Self::State) -> bool;
    /// `classes[b]`: bytes with the same class always lead to the same state.
    /// The default treats every byte as its own class.
    fn byte_classes(&self) -> [u8; 256] {
        let mut c = [0u8; 256];
        for (i, x) in c.iter_mut().enumerate() {
            *x = i as u8;
        }
        c
    }
}

impl ByteAutomaton for crate::dfa::ByteDfa {
    type State = regex_automata::util::primitives::StateID;
    fn start(&self) -> Self::State {
        crate::dfa::ByteDfa::start(self)
    }
    #[inline]
    fn next(&self, s: Self::State, byte: u8) -> Self::State {
        crate::dfa::ByteDfa::next(self, s, byte)
    }
    fn is_dead(&self, s: Self::State) -> bool {
        crate::dfa::ByteDfa::is_dead(self, s)
    }
    fn is_accepting(&self, s: Self::State) -> bool {
        crate::dfa::ByteDfa::is_accepting(self, s)
    }
    fn byte_classes(&self) -> [u8; 256] {
        crate::dfa::ByteDfa::byte_classes(self)
    }
}

pub(crate) use crate::vocab::trie::DEAD;

/// Dense transition table over the live, reachable states of an automaton.
#[derive(Clone, Debug)]
pub(crate) struct LiveTable {
    pub(crate) classes: [u8; 256],
    /// One representative byte per class.
    pub(crate) reps: Vec<u8>,
    pub(crate) stride: usize,
    pub(crate) trans: Vec<u32>,
    pub(crate) accepting: Vec<bool>,
    /// How many bytes each class has.
    pub(crate) class_size: Vec<u32>,
    /// Shortest number of bytes from the state to acceptance.
    pub(crate) dist: Vec<u32>,
    pub(crate) start: u32,
}

impl LiveTable {
    /// Explores `a` from its start state and keeps the live states.
    /// `max_states` bounds the exploration (before liveness pruning).
    pub fn new<A: ByteAutomaton>(a: &A, max_states: usize) -> Result<LiveTable, IndexError> {
        let classes = a.byte_classes();
        let (reps, class_size) = class_reps(&classes);
        let stride = reps.len();
        // 1. Reachable states (dead ones collapse to DEAD).
        let mut ids: HashMap<A::State, u32, foldhash::fast::RandomState> = HashMap::default();
        let mut states: Vec<A::State> = Vec::new();
        let start = a.start();
        if a.is_dead(start) {
            return Err(IndexError::EmptyLanguage);
        }
        ids.insert(start, 0);
        states.push(start);
        let mut trans: Vec<u32> = Vec::new();
        let mut i = 0;
        while i < states.len() {
            let s = states[i];
            for &b in &reps {
                let n = a.next(s, b);
                let id = if a.is_dead(n) {
                    DEAD
                } else if let Some(&id) = ids.get(&n) {
                    id
                } else {
                    let id = states.len() as u32;
                    if states.len() >= max_states {
                        return Err(IndexError::TooManyStates { limit: max_states });
                    }
                    ids.insert(n, id);
                    states.push(n);
                    id
                };
                trans.push(id);
            }
            i += 1;
        }
        let n = states.len();
        let accepting_all: Vec<bool> = states.iter().map(|&s| a.is_accepting(s)).collect();
        // 2. Distance to acceptance by a reverse BFS.
        let mut off: Vec<u32> = Vec::with_capacity(n + 1);
        let mut succ: Vec<u32> = Vec::with_capacity(trans.len());
        off.push(0);
        for row in trans.chunks(stride) {
            succ.extend(row.iter().copied().filter(|&t| t != DEAD));
            off.push(succ.len() as u32);
        }
        let seeds: Vec<u32> = (0..n as u32)
            .filter(|&s| accepting_all[s as usize])
            .collect();
        let dist = reverse_reach(n, &seeds, &off, &succ);
        drop((off, succ));
        if dist[0] == u32::MAX {
            return Err(IndexError::EmptyLanguage);
        }
        // 3. Renumber live states in exploration order (start stays 0).
        let mut new_id = vec![DEAD; n];
        let mut live: Vec<usize> = Vec::new();
        for s in 0..n {
            if dist[s] != u32::MAX {
                new_id[s] = live.len() as u32;
                live.push(s);
            }
        }
        let m = live.len();
        let mut t2 = vec![DEAD; m * stride];
        let mut accepting = vec![false; m];
        let mut dist2 = vec![0u32; m];
        for (ni, &s) in live.iter().enumerate() {
            for c in 0..stride {
                let t = trans[s * stride + c];
                t2[ni * stride + c] = if t == DEAD { DEAD } else { new_id[t as usize] };
            }
            accepting[ni] = accepting_all[s];
            dist2[ni] = dist[s];
        }
        Ok(LiveTable {
            classes,
            reps,
            stride,
            trans: t2,
            accepting,
            class_size,
            dist: dist2,
            start: 0,
        })
    }

    /// Number of live states.
    #[inline]
    pub fn len(&self) -> usize {
        self.accepting.len()
    }

    /// Next state on `byte`, or [`DEAD`].
    #[inline(always)]
    pub fn next(&self, s: u32, byte: u8) -> u32 {
        // SAFETY-free indexing: s < len and class < stride by construction.
        self.trans[s as usize * self.stride + self.classes[byte as usize] as usize]
    }

    /// State after `bytes`, or [`DEAD`].
    #[inline]
    pub fn walk(&self, mut s: u32, bytes: &[u8]) -> u32 {
        for &b in bytes {
            s = self.next(s, b);
            if s == DEAD {
                return DEAD;
            }
        }
        s
    }

    /// Memory of the table in bytes.
    pub fn memory_usage(&self) -> usize {
        self.trans.len() * 4 + self.accepting.len() * (1 + 4)
    }
}

impl LiveTable {
    /// A random text of the language: random live bytes, stopping at an
    /// accepting state with probability `1/8`, and following the shortest
    /// completion once `soft_max` bytes are written. For tests and soak runs.
    pub fn random_text(&self, rng: &mut impl rand::Rng, soft_max: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut s = self.start;
        let mut live: Vec<u8> = Vec::with_capacity(256);
        loop {
            if self.accepting[s as usize] && (out.len() >= soft_max || rng.random_range(0..8) == 0)
            {
                return out;
            }
            let b = if out.len() >= soft_max {
                match canonical_byte(self, s) {
                    Some(b) => b,
                    None => return out,
                }
            } else {
                live.clear();
                live.extend((0..=255u8).filter(|&b| self.next(s, b) != DEAD));
                if live.is_empty() {
                    return out;
                }
                live[rng.random_range(0..live.len())]
            };
            out.push(b);
            s = self.next(s, b);
        }
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
