//! The byte-automaton trait the index is built over, and its compaction into
//! a dense table of *live* states.
//!
//! [`ByteAutomaton`] is deliberately small (start, next on a byte, accepting at
//! end of input, dead) so that products (intersection) or complements of
//! automata can be indexed exactly like a plain regex DFA.
//!
//! [`LiveTable`] is what the index walks: every state reachable from the start
//! that can still reach acceptance, renumbered `0..n`, with transitions over
//! byte classes; a transition into a state that cannot reach acceptance is
//! [`DEAD`]. So "the next state is not `DEAD`" *is* "the text can still be
//! completed" — the invariant that makes every mask free of dead ends. The
//! table also keeps, per state, the shortest distance in bytes to acceptance
//! and the canonical next byte of one shortest completion.

use super::IndexError;
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

/// Per byte class (`classes[b]` is the class of byte `b`): its smallest byte,
/// and how many bytes it has.
pub(crate) fn class_reps(classes: &[u8; 256]) -> (Vec<u8>, Vec<u32>) {
    let stride = classes.iter().map(|&c| c as usize).max().unwrap_or(0) + 1;
    let mut reps = vec![0u8; stride];
    let mut size = vec![0u32; stride];
    for b in (0..=255u8).rev() {
        reps[classes[b as usize] as usize] = b;
        size[classes[b as usize] as usize] += 1;
    }
    (reps, size)
}

/// Transition target meaning "the text can no longer be completed".
pub const DEAD: u32 = u32::MAX;

/// Dense transition table over the live, reachable states of an automaton.
#[derive(Clone, Debug)]
pub struct LiveTable {
    pub(crate) classes: [u8; 256],
    /// One representative byte per class.
    pub(crate) reps: Vec<u8>,
    pub(crate) stride: usize,
    pub(crate) trans: Vec<u32>,
    pub(crate) accepting: Vec<bool>,
    /// Shortest number of bytes from the state to acceptance.
    pub(crate) dist: Vec<u32>,
    /// The first byte of the canonical shortest completion (unused when accepting).
    pub(crate) next_byte: Vec<u8>,
    /// `Some(b)` when `b` is the only byte that keeps the state live and the
    /// state does not accept (a forced byte).
    pub(crate) forced: Vec<Option<u8>>,
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
        // 2. Distance to acceptance by a reverse BFS (CSR of reverse edges).
        let mut rev_count = vec![0u32; n + 1];
        for &t in &trans {
            if t != DEAD {
                rev_count[t as usize + 1] += 1;
            }
        }
        for k in 0..n {
            rev_count[k + 1] += rev_count[k];
        }
        let mut fill = rev_count.clone();
        let mut rev = vec![0u32; rev_count[n] as usize];
        for (e, &t) in trans.iter().enumerate() {
            if t != DEAD {
                let src = (e / stride) as u32;
                rev[fill[t as usize] as usize] = src;
                fill[t as usize] += 1;
            }
        }
        let mut dist = vec![u32::MAX; n];
        let mut queue: Vec<u32> = Vec::new();
        for (s, &acc) in accepting_all.iter().enumerate() {
            if acc {
                dist[s] = 0;
                queue.push(s as u32);
            }
        }
        let mut qi = 0;
        while qi < queue.len() {
            let t = queue[qi] as usize;
            qi += 1;
            for &src in &rev[rev_count[t] as usize..rev_count[t + 1] as usize] {
                if dist[src as usize] == u32::MAX {
                    dist[src as usize] = dist[t] + 1;
                    queue.push(src);
                }
            }
        }
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
        // 4. Canonical next byte (smallest byte on a shortest completion) and forced bytes.
        let mut next_byte = vec![0u8; m];
        let mut forced = vec![None; m];
        for s in 0..m {
            let mut best: Option<u8> = None;
            let mut live_bytes = 0u32;
            let mut only: u8 = 0;
            for c in 0..stride {
                let t = t2[s * stride + c];
                if t == DEAD {
                    continue;
                }
                live_bytes += class_size[c];
                only = reps[c];
                if !accepting[s] && dist2[t as usize] + 1 == dist2[s] {
                    let b = reps[c];
                    if best.is_none_or(|x| b < x) {
                        best = Some(b);
                    }
                }
            }
            next_byte[s] = best.unwrap_or(0);
            if live_bytes == 1 && !accepting[s] {
                forced[s] = Some(only);
            }
        }
        Ok(LiveTable {
            classes,
            reps,
            stride,
            trans: t2,
            accepting,
            dist: dist2,
            next_byte,
            forced,
            start: 0,
        })
    }

    /// Number of live states.
    #[inline]
    pub fn len(&self) -> usize {
        self.accepting.len()
    }

    /// Whether the table has no states (never true for a built table).
    pub fn is_empty(&self) -> bool {
        self.accepting.is_empty()
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
        self.trans.len() * 4 + self.accepting.len() * (1 + 4 + 1 + 2)
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
                self.next_byte[s as usize]
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
