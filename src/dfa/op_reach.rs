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
/// serves both searches.
pub(crate) fn reaches(nfa: &Nfa) -> (Vec<u32>, Vec<u32>) {
    let n = nfa.len();
    // Reversed edges in CSR form, with their plain cost (`NOT_PLAIN`: no
    // plain byte) and byte cost.
    const NOT_PLAIN: u32 = u32::MAX;
    let mut start = vec![0u32; n + 1];
    for (_, _, edges) in nfa.states() {
        for e in edges {
            start[e.next as usize + 1] += 1;
        }
    }
    for k in 0..n {
        start[k + 1] += start[k];
    }
    let mut fill = start.clone();
    let mut rev = vec![(0u32, 0u32, 0u32); start[n] as usize];
    for (q, kind, edges) in nfa.states() {
        for e in edges {
            let (plain, byte) = match kind {
                Kind::Bytes => (plain_cost(e.lo, e.hi).unwrap_or(NOT_PLAIN), 1),
                _ => (0, 0),
            };
            let t = e.next as usize;
            rev[fill[t] as usize] = (q, plain, byte);
            fill[t] += 1;
        }
    }
    let ops: Vec<u32> = nfa
        .states()
        .filter(|&(_, kind, _)| kind == Kind::Op)
        .map(|(q, _, _)| q)
        .collect();
    // A 0-1 breadth-first search from every operation.
    let search = |cost: &dyn Fn(&(u32, u32, u32)) -> u32| {
        let mut dist = vec![u32::MAX; n];
        let mut queue: VecDeque<u32> = ops.iter().copied().collect();
        for &q in &ops {
            dist[q as usize] = 0;
        }
        while let Some(t) = queue.pop_front() {
            let d = dist[t as usize];
            for e in &rev[start[t as usize] as usize..start[t as usize + 1] as usize] {
                let c = cost(e);
                if c == NOT_PLAIN {
                    continue;
                }
                let (src, nd) = (e.0, d + c);
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
    (search(&|e| e.1), search(&|e| e.2))
}

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
}
