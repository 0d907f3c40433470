//! # The step algorithms written once for every automaton the index walks
//!
//! [`Steps`] is the few questions they ask — a step on a byte, acceptance,
//! the distance to acceptance, the byte classes — and every index engine
//! (through its `Backend`) answers them, as does a bare
//! [`LiveTable`](super::LiveTable):
//!
//! * [`forced_byte`] — the only byte that keeps a non-accepting state live;
//! * [`has_continuation`] — whether any byte does;
//! * [`canonical_byte`] — the first byte of the canonical shortest
//!   completion (the smallest byte one step closer to acceptance);
//! * [`reverse_reach`] — a breadth-first search backwards from a set of
//!   states over explicit edges (distance to acceptance, and the plain-text
//!   reach of string interiors, in the eager and the lazy engine).

use crate::vocab::trie::DEAD;

/// The few questions the algorithms below ask: a step, acceptance, the
/// distance to acceptance and the byte classes. Every [`Backend`] answers
/// them, and so does a bare [`LiveTable`].
pub(crate) trait Steps {
    fn step(&self, s: u32, b: u8) -> u32;
    fn accepts(&self, s: u32) -> bool;
    fn distance(&self, s: u32) -> u32;
    fn class_reps(&self) -> &[u8];
    fn class_sizes(&self) -> &[u32];
}

/// The only byte that keeps `s` live, when `s` does not accept.
pub(crate) fn forced_byte<S: Steps + ?Sized>(a: &S, s: u32) -> Option<u8> {
    if a.accepts(s) {
        return None;
    }
    let (mut live_bytes, mut only) = (0u32, 0u8);
    for (&b, &size) in a.class_reps().iter().zip(a.class_sizes()) {
        if a.step(s, b) != DEAD {
            live_bytes += size;
            only = b;
            if live_bytes > 1 {
                return None;
            }
        }
    }
    (live_bytes == 1).then_some(only)
}

/// Whether some byte keeps `s` live.
pub(crate) fn has_continuation<S: Steps + ?Sized>(a: &S, s: u32) -> bool {
    a.class_reps().iter().any(|&b| a.step(s, b) != DEAD)
}

/// The first byte of the canonical shortest completion of `s`: the smallest
/// byte whose successor is one byte closer to acceptance (`None` when `s`
/// accepts, or when no byte is, which only a lazy automaton past a size
/// limit can leave).
pub(crate) fn canonical_byte<S: Steps + ?Sized>(a: &S, s: u32) -> Option<u8> {
    if a.accepts(s) {
        return None;
    }
    let d = a.distance(s);
    // Class representatives are their classes' smallest bytes, so the first
    // one found in byte order is the smallest byte.
    let mut best: Option<u8> = None;
    for &b in a.class_reps() {
        if best.is_some_and(|x| x < b) {
            continue;
        }
        let t = a.step(s, b);
        if t != DEAD && a.distance(t).saturating_add(1) == d {
            best = Some(b);
        }
    }
    best
}

/// Breadth-first search backwards from `seeds` over the edges
/// `succ[off[k]..off[k + 1]]` of each state `k` (`n` states): the fewest
/// edges from each state to a seed (`u32::MAX`: none).
pub(crate) fn reverse_reach(n: usize, seeds: &[u32], off: &[u32], succ: &[u32]) -> Vec<u32> {
    // Reverse edges as a CSR.
    let mut rev_off = vec![0u32; n + 1];
    for &x in succ {
        rev_off[x as usize + 1] += 1;
    }
    for k in 0..n {
        rev_off[k + 1] += rev_off[k];
    }
    let mut fill = rev_off.clone();
    let mut rev = vec![0u32; succ.len()];
    for s in 0..n {
        for &x in &succ[off[s] as usize..off[s + 1] as usize] {
            rev[fill[x as usize] as usize] = s as u32;
            fill[x as usize] += 1;
        }
    }
    let mut reach = vec![u32::MAX; n];
    let mut queue: Vec<u32> = Vec::with_capacity(n);
    for &s in seeds {
        if reach[s as usize] == u32::MAX {
            reach[s as usize] = 0;
            queue.push(s);
        }
    }
    let mut qi = 0;
    while qi < queue.len() {
        let x = queue[qi] as usize;
        qi += 1;
        for &p in &rev[rev_off[x] as usize..rev_off[x + 1] as usize] {
            if reach[p as usize] == u32::MAX {
                reach[p as usize] = reach[x] + 1;
                queue.push(p);
            }
        }
    }
    reach
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::LiveTable;

    #[test]
    fn reverse_reach_counts_edges_to_the_seeds() {
        // 0 -> 1 -> 2, 3 -> 3 (a loop that never reaches the seed 2).
        let off = [0, 1, 2, 2, 3];
        let succ = [1, 2, 3];
        assert_eq!(reverse_reach(4, &[2], &off, &succ), vec![2, 1, 0, u32::MAX]);
    }

    #[test]
    fn forced_and_canonical_bytes_of_a_table() {
        let dfa = crate::dfa::ByteDfa::new("ab(c|d)|b", &Default::default()).unwrap();
        let t = LiveTable::new(&dfa, 1 << 10).unwrap();
        let s0 = t.start;
        assert_eq!(forced_byte(&t, s0), None, "a or b");
        assert_eq!(canonical_byte(&t, s0), Some(b'b'), "b is the shortest");
        let sa = t.next(s0, b'a');
        assert_eq!(forced_byte(&t, sa), Some(b'b'));
        let sab = t.next(sa, b'b');
        assert_eq!(forced_byte(&t, sab), None, "c or d");
        assert_eq!(canonical_byte(&t, sab), Some(b'c'));
        let end = t.next(sab, b'd');
        assert!(!has_continuation(&t, end));
        assert_eq!(canonical_byte(&t, end), None);
    }
}
