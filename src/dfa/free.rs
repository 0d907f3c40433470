//! # Free threads: NFA states from which plain text can go on forever
//!
//! A thread is *free* when some path of plain bytes (the bytes of JSON
//! string characters written as themselves: printable ASCII but `"` and
//! `\`, and the bytes of multi-byte UTF-8) and epsilon moves leads from it
//! into a cycle of such: a string body's loop, or the free-key trie of an
//! object with extra keys, whose every node leads to one. A declared
//! property name's literal is not free: its plain path ends at the closing
//! quote.
//!
//! The lazy index splits a state into its free threads and the rest
//! ([`LazyDfa::free_part`](super::LazyDfa::free_part)): the free part is shared by every
//! position of an object where extra keys may start, while the declared
//! names left differ from one position to the next.
//!
//! Which threads are free only steers that split (any subset of a state's
//! threads allows a subset of its tokens); it never decides a mask.

use super::nfa::{Kind, Nfa};

const UNKNOWN: u8 = 0;
const FREE: u8 = 1;
const BOUNDED: u8 = 2;

/// Most NFA states one classification explores; past it, every state it
/// met is taken as bounded (no split), so none is explored again. A key's
/// threads reach their own three tries (declared names' paths, the other
/// keys', the names' proper prefixes) and the free tail: about 8,000 NFA
/// states for 78 names (`JsonSchemaStore---rustfmt`; at 4,096 the search
/// gave up and left that object without a free part).
const SEARCH: usize = 1 << 15;

/// Whether `b` can be a byte of a plain character other than JSON's
/// punctuation (`,:[]{}`): a free thread needs a cycle of string text, and
/// without punctuation the search from a value's start stays inside the
/// value's own literal or number instead of running through the rest of
/// the document's automaton.
#[inline]
fn plain_byte(b: u8) -> bool {
    (0x20..=0x7E).contains(&b) && !b"\"\\,:[]{}".contains(&b) || (0x80..=0xF4).contains(&b)
}

/// Whether the range `lo..=hi` holds a plain byte.
fn plain_range(lo: u8, hi: u8) -> bool {
    (lo..=hi).any(plain_byte)
}

/// Fewest bytes a thread's edges must read for [`has_wide_thread`].
const WIDE: u32 = 32;

/// Whether some thread of `key` reads at least [`WIDE`] bytes, some of
/// them plain: the class of a string body, of a free key's next character,
/// or of a trie node's exit. A state without one (a value's start, a
/// number, a literal) has no free part worth finding, and is not searched.
pub(super) fn has_wide_thread(nfa: &Nfa, key: &[u32]) -> bool {
    key.iter().any(|&q| {
        nfa.kind(q) == Kind::Bytes
            && nfa
                .edges(q)
                .iter()
                .filter(|e| plain_range(e.lo, e.hi))
                .map(|e| (e.hi - e.lo) as u32 + 1)
                .sum::<u32>()
                >= WIDE
    })
}

/// Per NFA state, whether it is free, found on demand and kept.
#[derive(Default)]
pub(super) struct FreeThreads {
    memo: Vec<u8>,
    /// Per NFA state, its index in the search under way plus one
    /// ([`NOT_MET`]: not met), reset after each search.
    local: Vec<u32>,
}

/// An NFA state the search under way has not met (`local` holds an
/// index plus one).
const NOT_MET: u32 = 0;

impl FreeThreads {
    /// Whether `q` is free; [`FreeThreads::classify`] must have seen it.
    #[inline]
    pub fn is_free(&self, q: u32) -> bool {
        self.memo.get(q as usize) == Some(&FREE)
    }

    /// Classifies `roots` (and every state met on the way): the plain
    /// subgraph they reach is explored, then its states with no way into a
    /// cycle are peeled off from the sinks up; what is left reaches one.
    /// States that cannot reach the match (`dist` is `u32::MAX`) are left
    /// out, as the determinizer drops them.
    pub fn classify(&mut self, nfa: &Nfa, dist: &[u32], roots: &[u32]) {
        if self.memo.len() < nfa.len() {
            // Zeroed allocations: pages are touched only as states are met.
            self.memo = vec![UNKNOWN; nfa.len()];
            self.local = vec![NOT_MET; nfa.len()];
        }
        if roots.iter().all(|&q| self.memo[q as usize] != UNKNOWN) {
            return;
        }
        // Local graph: unknown states by index, their successors (local
        // indices; `FOREVER` for an edge into a known free state).
        const FOREVER: u32 = u32::MAX;
        let mut nodes: Vec<u32> = Vec::new();
        for &q in roots {
            if self.memo[q as usize] == UNKNOWN && self.local[q as usize] == NOT_MET {
                nodes.push(q);
                self.local[q as usize] = nodes.len() as u32;
            }
        }
        let mut off: Vec<u32> = vec![0];
        let mut succ: Vec<u32> = Vec::new();
        let mut k = 0;
        while k < nodes.len() {
            if nodes.len() > SEARCH {
                for &q in &nodes {
                    self.memo[q as usize] = BOUNDED;
                    self.local[q as usize] = NOT_MET;
                }
                return;
            }
            let q = nodes[k];
            let edges = nfa.edges(q);
            let kind = nfa.kind(q);
            for e in edges {
                let follows = match kind {
                    Kind::Eps | Kind::Op => true,
                    Kind::Bytes => plain_range(e.lo, e.hi),
                    Kind::Match => false,
                };
                let r = e.next;
                if !follows || dist[r as usize] == u32::MAX {
                    continue;
                }
                match self.memo[r as usize] {
                    FREE => succ.push(FOREVER),
                    BOUNDED => {}
                    _ => {
                        if self.local[r as usize] == NOT_MET {
                            nodes.push(r);
                            self.local[r as usize] = nodes.len() as u32;
                        }
                        succ.push(self.local[r as usize] - 1);
                    }
                }
            }
            off.push(succ.len() as u32);
            k += 1;
        }
        // Peel: a state all of whose successors are bounded is bounded.
        let n = nodes.len();
        let mut out_deg: Vec<u32> = (0..n).map(|i| off[i + 1] - off[i]).collect();
        let mut pred_count = vec![0u32; n + 1];
        for &j in &succ {
            if j != FOREVER {
                pred_count[j as usize + 1] += 1;
            }
        }
        for i in 0..n {
            pred_count[i + 1] += pred_count[i];
        }
        let mut preds = vec![0u32; pred_count[n] as usize];
        let mut fill = pred_count.clone();
        for i in 0..n {
            for &j in &succ[off[i] as usize..off[i + 1] as usize] {
                if j != FOREVER {
                    preds[fill[j as usize] as usize] = i as u32;
                    fill[j as usize] += 1;
                }
            }
        }
        let mut queue: Vec<u32> = (0..n as u32)
            .filter(|&i| out_deg[i as usize] == 0)
            .collect();
        let mut bounded = vec![false; n];
        while let Some(j) = queue.pop() {
            bounded[j as usize] = true;
            for &p in &preds[pred_count[j as usize] as usize..pred_count[j as usize + 1] as usize] {
                out_deg[p as usize] -= 1;
                if out_deg[p as usize] == 0 {
                    queue.push(p);
                }
            }
        }
        for (i, &q) in nodes.iter().enumerate() {
            self.memo[q as usize] = if bounded[i] { BOUNDED } else { FREE };
            self.local[q as usize] = NOT_MET;
        }
    }
}

/// A state's free part not found yet.
pub(super) const PART_UNKNOWN: u32 = u32::MAX;
/// A state with no free part smaller than itself.
pub(super) const NO_PART: u32 = u32::MAX - 1;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dfa::determinize::Determinizer;

    use crate::dfa::direct::nfa_of;

    /// The free threads of the start state of `pattern`, as the bytes they
    /// read first.
    fn free_first_bytes(pattern: &str) -> (usize, usize) {
        let nfa = nfa_of(pattern);
        let det = Determinizer::new(nfa.clone(), usize::MAX, usize::MAX);
        let key = det.key(det.start).to_vec();
        let mut f = FreeThreads::default();
        f.classify(&nfa, det.nfa_dist(), &key);
        (key.iter().filter(|&&q| f.is_free(q)).count(), key.len())
    }

    #[test]
    fn a_literal_ended_by_a_quote_is_bounded_and_a_loop_is_free() {
        // `name"` dies at the quote; `[a-z]*"` can read letters forever.
        assert_eq!(free_first_bytes(r#"name""#), (0, 1));
        let (free, all) = free_first_bytes(r#"(?:name|[a-z][a-z]*)""#);
        assert_eq!((free, all), (1, 2));
    }

    #[test]
    fn a_path_into_a_loop_is_free_and_a_counted_run_is_not() {
        // Each trie node leads on to the free tail.
        let (free, all) = free_first_bytes(r#"(?:a(?:b|[^b"])|[^a"])[^"]*""#);
        assert_eq!(free, all);
        // A bounded count has no cycle.
        assert_eq!(free_first_bytes(r#"[a-z]{0,5}""#).0, 0);
    }
}
