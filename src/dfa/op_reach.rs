//! # How far a thread is from a member set's registers
//!
//! Two DFA states whose threads sit at the same NFA states, differing only
//! in their member-set registers ([`super::regs`]), fare alike on every
//! text that meets no register operation: a byte moves a thread's NFA
//! state and leaves its stack alone, and whether a thread lives on past a
//! state it is live in depends on its NFA state alone (its stack's costs
//! are already finite). So what the lazy index learns of one such state
//! holds for its *siblings* over texts too short to reach an operation.
//! [`reaches`] gives, per NFA state, that length in plain string
//! characters (printable ASCII but `"` and `\`, and non-ASCII characters),
//! what the index's plain levels count, and in bytes, what a token walk
//! counts.

use super::nfa::{Edge, Kind, Nfa};
use std::collections::VecDeque;

/// The fewest plain characters a byte of `lo..=hi` can count for: 0 for a
/// UTF-8 continuation byte, 1 for a plain ASCII byte or a lead byte; `None`
/// when no byte of the range is part of plain text.
fn plain_cost(lo: u8, hi: u8) -> Option<u32> {
    let meets = |a: u8, b: u8| lo <= b && a <= hi;
    if meets(0x80, 0xBF) {
        Some(0)
    } else if meets(0xC0, 0xFF) || meets(b' ', b'!') || meets(b'#', b'[') || meets(b']', b'~') {
        Some(1)
    } else {
        None
    }
}

/// Every edge of an NFA reversed, in CSR form: the sources of the edges
/// into state `t` are `src[start[t]..start[t + 1]]`, each with its class
/// ([`EPS`], [`PLAIN_0`], [`PLAIN_1`], [`NOT_PLAIN`]). Built once at compile
/// time for the member-set distances ([`super::regs`]) and kept for
/// [`reaches`], which runs in a mask step: building it is about half of
/// that step on large NFAs (12 ms of 29 for 827,560 states).
pub(crate) struct Reversed {
    start: Vec<u32>,
    src: Vec<u32>,
    class: Vec<u8>,
}

impl Reversed {
    /// The reversed edges of `nfa`, and per reversed edge `weight` of the
    /// edge for a byte edge (0 for the others).
    pub(crate) fn of(nfa: &Nfa, weight: &dyn Fn(&Edge) -> u32) -> (Reversed, Vec<u32>) {
        let n = nfa.len();
        let mut start = vec![0u32; n + 1];
        for (_, _, edges) in nfa.states() {
            for e in edges {
                start[e.next as usize + 1] += 1;
            }
        }
        for k in 0..n {
            start[k + 1] += start[k];
        }
        let total = start[n] as usize;
        let (mut src, mut class, mut weights) =
            (vec![0u32; total], vec![0u8; total], vec![0; total]);
        // Filled from each range's end down: `start[t + 1]` ends as the
        // start of `t`'s range, then shifted back.
        for (q, kind, edges) in nfa.states() {
            for e in edges {
                let (c, w) = match kind {
                    Kind::Bytes => (
                        match plain_cost(e.lo, e.hi) {
                            Some(0) => PLAIN_0,
                            Some(_) => PLAIN_1,
                            None => NOT_PLAIN,
                        },
                        weight(e),
                    ),
                    _ => (EPS, 0),
                };
                let t = e.next as usize + 1;
                start[t] -= 1;
                let i = start[t] as usize;
                src[i] = q;
                class[i] = c as u8;
                weights[i] = w;
            }
        }
        start.copy_within(1..=n, 0);
        start[n] = total as u32;
        (Reversed { start, src, class }, weights)
    }

    /// Indices (into the sources and classes) of the edges into `t`.
    #[inline]
    pub(crate) fn edges_into(&self, t: u32) -> std::ops::Range<usize> {
        self.start[t as usize] as usize..self.start[t as usize + 1] as usize
    }

    /// The source of reversed edge `i`.
    #[inline]
    pub(crate) fn src(&self, i: usize) -> u32 {
        self.src[i]
    }
}

/// Per NFA state, the fewest plain characters, then the fewest bytes, a
/// thread there reads before its closure meets an [`Op`](Kind::Op) state
/// (`u32::MAX`: never; an `Op` state itself is 0). Plain characters are a
/// lower bound: a range counts as its cheapest byte. Two 0-1 breadth-first
/// searches from every operation over the reversed edges, `reversed` when
/// the compile kept them (this runs on a mask step, once per automaton,
/// over every edge of an NFA that may have a million states).
pub(crate) fn reaches(nfa: &Nfa, reversed: Option<Reversed>) -> (Vec<u32>, Vec<u32>) {
    let n = nfa.len();
    let ops: Vec<u32> = (0..n as u32).filter(|&q| nfa.kind(q) == Kind::Op).collect();
    if ops.is_empty() {
        return (vec![u32::MAX; n], vec![u32::MAX; n]);
    }
    let rev = match reversed {
        Some(r) if r.start.len() == n + 1 => r,
        _ => Reversed::of(nfa, &|_| 0).0,
    };
    // A 0-1 breadth-first search from every operation; `cost` per edge
    // class (`u32::MAX`: not followed).
    let search = |cost: [u32; 4]| {
        let mut dist = vec![u32::MAX; n];
        let mut queue: VecDeque<u32> = ops.iter().copied().collect();
        for &q in &ops {
            dist[q as usize] = 0;
        }
        while let Some(t) = queue.pop_front() {
            let d = dist[t as usize];
            for i in rev.edges_into(t) {
                let c = cost[rev.class[i] as usize];
                if c == u32::MAX {
                    continue;
                }
                let (src, nd) = (rev.src[i], d + c);
                if nd < dist[src as usize] {
                    dist[src as usize] = nd;
                    if c == 0 {
                        queue.push_front(src);
                    } else {
                        queue.push_back(src);
                    }
                }
            }
        }
        dist
    };
    (search([0, 0, 1, u32::MAX]), search([0, 1, 1, 1]))
}

/// Edge classes of [`reaches`]: an epsilon or operation edge, a byte edge
/// whose cheapest byte is a UTF-8 continuation (0 plain characters), a
/// plain byte (1), or no plain byte.
const EPS: u32 = 0;
const PLAIN_0: u32 = 1;
const PLAIN_1: u32 = 2;
const NOT_PLAIN: u32 = 3;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_count_characters() {
        assert_eq!(plain_cost(b'a', b'a'), Some(1));
        assert_eq!(plain_cost(b'"', b'"'), None);
        assert_eq!(plain_cost(b'\\', b'\\'), None);
        assert_eq!(plain_cost(0, 0x1F), None);
        assert_eq!(plain_cost(b'"', b'#'), Some(1));
        assert_eq!(plain_cost(0x80, 0x80), Some(0));
        assert_eq!(plain_cost(0xE2, 0xE2), Some(1));
    }

    /// The searches as first written: one `(source, plain, byte)` triple
    /// per reversed edge.
    fn reference(nfa: &Nfa) -> (Vec<u32>, Vec<u32>) {
        let n = nfa.len();
        let mut rev: Vec<Vec<(u32, u32, u32)>> = vec![Vec::new(); n];
        for (q, kind, edges) in nfa.states() {
            for e in edges {
                let (plain, byte) = match kind {
                    Kind::Bytes => (plain_cost(e.lo, e.hi).unwrap_or(u32::MAX), 1),
                    _ => (0, 0),
                };
                rev[e.next as usize].push((q, plain, byte));
            }
        }
        let search = |pick: &dyn Fn(&(u32, u32, u32)) -> u32| {
            let mut dist = vec![u32::MAX; n];
            let mut queue = VecDeque::new();
            for (q, kind, _) in nfa.states() {
                if kind == Kind::Op {
                    dist[q as usize] = 0;
                    queue.push_back(q);
                }
            }
            // Bellman-Ford style relaxation until nothing changes.
            while let Some(t) = queue.pop_front() {
                for e in &rev[t as usize] {
                    let c = pick(e);
                    if c == u32::MAX {
                        continue;
                    }
                    let nd = dist[t as usize] + c;
                    if nd < dist[e.0 as usize] {
                        dist[e.0 as usize] = nd;
                        queue.push_back(e.0);
                    }
                }
            }
            dist
        };
        (search(&|e| e.1), search(&|e| e.2))
    }

    #[test]
    fn reaches_agree_with_a_plain_relaxation() {
        use super::super::direct::nfa_of;
        use super::super::ordered::{write_set, SetFlags};
        let flags = |required: &[bool], extra: bool| SetFlags {
            required: required.to_vec(),
            extra,
        };
        let inner = write_set(",", &flags(&[true, false], false), &["a1", "bé"]);
        let patterns = [
            write_set(
                ",",
                &flags(&[false, false, true], false),
                &["ab", "c[0-9]+", "\"x\""],
            ),
            write_set(
                ";",
                &flags(&[false, true], true),
                &[&format!("k\\{{{inner}\\}}"), "d", "(?:é|ê)+"],
            ),
            "abc".to_string(),
        ];
        for p in &patterns {
            let nfa = nfa_of(p);
            let got = reaches(&nfa, None);
            assert_eq!(got, reference(&nfa), "{p}");
            // The same over the edges the compile keeps.
            let kept = Reversed::of(&nfa, &|_| 1).0;
            assert_eq!(reaches(&nfa, Some(kept)), got, "{p}");
            if p != "abc" {
                assert!(got.1.iter().any(|&d| d > 0 && d != u32::MAX), "{p}");
            } else {
                assert!(got.0.iter().all(|&d| d == u32::MAX));
            }
        }
    }
}
