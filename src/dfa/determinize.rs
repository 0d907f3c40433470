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

use regex_automata::nfa::thompson::{State, NFA};
use regex_automata::util::primitives::StateID as NfaId;
use std::collections::HashMap;
use std::rc::Rc;

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

/// Closure scratch: a visited mark per NFA state and a DFS stack.
struct Closure {
    mark: Vec<u32>,
    generation: u32,
    stack: Vec<NfaId>,
}

impl Closure {
    /// Appends to `out`, sorted, the byte-reading and match states reachable
    /// from `seeds` through epsilon transitions.
    fn run(&mut self, nfa: &NFA, seeds: &[u32], out: &mut Vec<u32>) {
        out.clear();
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.mark.iter_mut().for_each(|m| *m = 0);
            self.generation = 1;
        }
        let g = self.generation;
        for &s in seeds.iter().rev() {
            self.stack.push(NfaId::new_unchecked(s as usize));
        }
        while let Some(id) = self.stack.pop() {
            let m = &mut self.mark[id.as_usize()];
            if *m == g {
                continue;
            }
            *m = g;
            match nfa.state(id) {
                State::ByteRange { .. }
                | State::Sparse(_)
                | State::Dense(_)
                | State::Match { .. } => out.push(id.as_u32()),
                State::Union { alternates } => self.stack.extend(alternates.iter().rev()),
                State::BinaryUnion { alt1, alt2 } => {
                    self.stack.push(*alt2);
                    self.stack.push(*alt1);
                }
                State::Capture { next, .. } => self.stack.push(*next),
                State::Fail => {}
                // Excluded by the caller (`look_set_any` is empty).
                State::Look { .. } => unreachable!("look-around in a look-free NFA"),
            }
        }
        out.sort_unstable();
    }
}

/// Determinizes `nfa` from its anchored start state. `nfa` must have no
/// look-around assertions.
pub(super) fn determinize(nfa: &NFA, dfa_limit: usize, det_limit: usize) -> Result<Table, Limit> {
    debug_assert!(nfa.look_set_any().is_empty());
    let bc = nfa.byte_classes();
    let mut classes = [0u8; 256];
    for b in 0..=255u8 {
        classes[b as usize] = bc.get(b);
    }
    let stride = classes[255] as usize + 1;
    let mut closure = Closure {
        mark: vec![0; nfa.states().len()],
        generation: 0,
        stack: Vec::new(),
    };
    let is_match = |key: &[u32]| {
        key.iter().any(|&s| {
            matches!(
                nfa.state(NfaId::new_unchecked(s as usize)),
                State::Match { .. }
            )
        })
    };

    // State 0 is dead (its key is the empty set).
    let mut keys: Vec<Rc<[u32]>> = vec![Rc::from(Vec::new())];
    let mut map: FastMap<Rc<[u32]>, u32> = FastMap::default();
    map.insert(keys[0].clone(), 0);
    let mut trans: Vec<u32> = vec![0; stride];
    let mut accepting = vec![false];
    let mut key_bytes = 0usize;

    let mut scratch = Vec::new();
    closure.run(nfa, &[nfa.start_anchored().as_u32()], &mut scratch);
    let start = if scratch.is_empty() {
        0
    } else {
        let k: Rc<[u32]> = Rc::from(scratch.as_slice());
        accepting.push(is_match(&k));
        keys.push(k.clone());
        map.insert(k, 1);
        trans.resize(2 * stride, 0);
        1
    };

    // Per class, the NFA states it leads to from the current DFA state.
    let mut buckets: Vec<Vec<u32>> = vec![Vec::new(); stride];
    let mut touched: Vec<usize> = Vec::new();
    let class_span = |lo: u8, hi: u8| classes[lo as usize] as usize..=classes[hi as usize] as usize;
    let mut i = 1;
    while i < keys.len() {
        let key = keys[i].clone();
        for &s in key.iter() {
            let mut push = |c: usize, next: NfaId| {
                if buckets[c].is_empty() {
                    touched.push(c);
                }
                buckets[c].push(next.as_u32());
            };
            match nfa.state(NfaId::new_unchecked(s as usize)) {
                State::ByteRange { trans: t } => {
                    for c in class_span(t.start, t.end) {
                        push(c, t.next);
                    }
                }
                State::Sparse(sp) => {
                    for t in sp.transitions.iter() {
                        for c in class_span(t.start, t.end) {
                            push(c, t.next);
                        }
                    }
                }
                State::Dense(d) => {
                    // One push per class: bytes of a class share the target.
                    let mut last = usize::MAX;
                    for (b, &next) in d.transitions.iter().enumerate() {
                        let c = classes[b] as usize;
                        if c != last && next != NfaId::ZERO {
                            push(c, next);
                        }
                        last = c;
                    }
                }
                _ => {}
            }
        }
        touched.sort_unstable();
        let mut prev: Option<(usize, u32)> = None;
        for &c in &touched {
            let target = match prev {
                Some((pc, t)) if pc + 1 == c && buckets[pc] == buckets[c] => t,
                _ => {
                    closure.run(nfa, &buckets[c], &mut scratch);
                    match map.get(scratch.as_slice()) {
                        Some(&t) => t,
                        None => {
                            let id = keys.len() as u32;
                            let k: Rc<[u32]> = Rc::from(scratch.as_slice());
                            key_bytes += k.len() * 4 + 48;
                            accepting.push(is_match(&k));
                            keys.push(k.clone());
                            map.insert(k, id);
                            trans.resize(trans.len() + stride, 0);
                            if trans.len() * 4 > dfa_limit {
                                return Err(Limit::Dfa);
                            }
                            if key_bytes > det_limit || keys.len() >= u32::MAX as usize {
                                return Err(Limit::Determinize);
                            }
                            id
                        }
                    }
                }
            };
            trans[i * stride + c] = target;
            prev = Some((c, target));
        }
        // Clear only after all comparisons with the previous bucket are done.
        for &c in &touched {
            buckets[c].clear();
        }
        touched.clear();
        i += 1;
    }
    Ok(Table {
        classes,
        stride,
        trans,
        accepting,
        start,
    })
}
