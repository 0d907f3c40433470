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

use super::nfa::{Kind, Nfa};
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

/// Per NFA state, the fewest plain characters, then the fewest bytes, a
/// thread there reads before its closure meets an [`Op`](Kind::Op) state
/// (`u32::MAX`: never; an `Op` state itself is 0). Plain characters are a
/// lower bound: a range counts as its cheapest byte. One reversed edge list
/// serves both searches: per edge its source and, in the two low bits, its
/// kind ([`EPS`], [`PLAIN_0`], [`PLAIN_1`], [`NOT_PLAIN`]), four bytes an
/// edge (this runs on a mask step, once per automaton, over every edge of
/// an NFA that may have a million states).
pub(crate) fn reaches(nfa: &Nfa) -> (Vec<u32>, Vec<u32>) {
    let n = nfa.len();
    if n >= 1 << 30 {
        // No room for the edge class: every state next to an operation
        // (siblings then share nothing, which is always sound).
        return (vec![0; n], vec![0; n]);
    }
    let mut start = vec![0u32; n + 1];
    let mut ops = Vec::new();
    for (q, kind, edges) in nfa.states() {
        if kind == Kind::Op {
            ops.push(q);
        }
        for e in edges {
            start[e.next as usize + 1] += 1;
        }
    }
    if ops.is_empty() {
        return (vec![u32::MAX; n], vec![u32::MAX; n]);
    }
    for k in 0..n {
        start[k + 1] += start[k];
    }
    // Filled from each range's end down: `start[t + 1]` ends as the start
    // of `t`'s range, then shifted back.
    let mut rev = vec![0u32; start[n] as usize];
    for (q, kind, edges) in nfa.states() {
        for e in edges {
            let class = match kind {
                Kind::Bytes => match plain_cost(e.lo, e.hi) {
                    Some(0) => PLAIN_0,
                    Some(_) => PLAIN_1,
                    None => NOT_PLAIN,
                },
                _ => EPS,
            };
            let t = e.next as usize + 1;
            start[t] -= 1;
            rev[start[t] as usize] = q << 2 | class;
        }
    }
    start.copy_within(1..=n, 0);
    start[n] = rev.len() as u32;
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
            for &e in &rev[start[t as usize] as usize..start[t as usize + 1] as usize] {
                let c = cost[(e & 3) as usize];
                if c == u32::MAX {
                    continue;
                }
                let (src, nd) = (e >> 2, d + c);
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
            let got = reaches(&nfa);
            assert_eq!(got, reference(&nfa), "{p}");
            if p != "abc" {
                assert!(got.1.iter().any(|&d| d > 0 && d != u32::MAX), "{p}");
            } else {
                assert!(got.0.iter().all(|&d| d == u32::MAX));
            }
        }
    }
}
