//! States that are another's threads moved back along a run of copies.
//!
//! A counted repetition (`maxLength: 1024` on a string, `maxItems: 100`
//! on an array of objects) is compiled as that many copies of one piece
//! ([`CopyRun`](super::nfa::CopyRun)), and the DFA has a state per copy a
//! text can be in: each character of a long string, each item of a long
//! array, is a new state whose mask the lazy index would compute afresh,
//! walking the same tokens through the same structure one copy further
//! on. [`Nfa::shift_back`](super::nfa::Nfa::shift_back) moves such a
//! state's threads back to the first copy they fit in, when no token is
//! long enough to tell the two apart (no text of the vocabulary's longest
//! token, read from either, reaches the run's last copy); the lazy index
//! then shares the mask of that earlier state.

use super::LazyDfa;

/// A state not shifted yet ([`LazyDfa::shifted_back`]).
const SHIFT_UNKNOWN: u32 = u32::MAX;

impl LazyDfa {
    /// The state whose threads are those of `s` moved back along the runs
    /// of copies they are in, when that changes them and no text of up to
    /// `horizon` bytes tells the two apart: every such text leads both to
    /// a live state or both to none (see
    /// [`Nfa::shift_back`](super::nfa::Nfa::shift_back)). So the two have
    /// the same mask over tokens of at most `horizon` bytes.
    pub(crate) fn shifted_back(&mut self, s: u32, horizon: u32) -> Option<u32> {
        if s == 0 || self.det.nfa().runs().is_empty() || self.det.has_regs() {
            return None;
        }
        let si = s as usize;
        if let Some(&t) = self.shifted.get(si) {
            if t != SHIFT_UNKNOWN {
                return (t != s).then_some(t);
            }
        }
        let moved = self.det.nfa().shift_back(self.det.key(s), horizon);
        let t = match moved {
            Some(key) => self.limited(|det| det.sub_state(&key)).unwrap_or(s),
            None => s,
        };
        if self.shifted.len() <= si {
            self.shifted
                .resize(self.det.len().max(si + 1), SHIFT_UNKNOWN);
        }
        self.shifted[si] = t;
        (t != s).then_some(t)
    }

    /// Whether `t` (the state every plain character, or every byte of a
    /// set, leads `s` to) is `s` one unit further along a run of copies,
    /// far enough from the run's end that no text of `horizon` bytes tells
    /// the states on from `s` (see
    /// [`Nfa::is_next_unit`](super::nfa::Nfa::is_next_unit)): the state `j`
    /// characters on is `s` moved `j` units, and a text of `horizon - j`
    /// bytes from it ends `horizon` units past `s` at most, the same reach
    /// as `t`'s bound allows. So for the tokens, `s` behaves as if those
    /// characters led it back to itself.
    pub(crate) fn is_next_unit(&self, s: u32, t: u32, horizon: u32) -> bool {
        if s == 0 || t == 0 || self.det.nfa().runs().is_empty() || self.det.has_regs() {
            return false;
        }
        let nfa = self.det.nfa();
        nfa.is_next_unit(self.det.key(s), self.det.key(t), horizon)
    }
}

#[cfg(test)]
mod tests {
    use crate::dfa::determinize::Determinizer;
    use crate::dfa::direct::nfa_of;

    /// The state after `text` (explored on the way).
    fn state_after(det: &mut Determinizer, text: &[u8]) -> u32 {
        let mut s = det.start;
        for &b in text {
            det.explore(s as usize).expect("no limit");
            s = det.trans[s as usize * det.stride + det.classes[b as usize] as usize];
            assert_ne!(s, 0, "{text:?} is live");
        }
        s
    }

    #[test]
    fn counted_repetitions_record_their_runs_and_copies_carry_them() {
        // 2 required digits, 298 optional ones: two runs.
        let nfa = nfa_of("a[0-9]{2,300}b");
        let counts: Vec<u32> = nfa.runs().iter().map(|r| r.count).collect();
        assert_eq!(
            counts,
            vec![298],
            "the 2 required units are too few to record"
        );
        // 50 optional items, each with a run of 40 optional digits.
        let nfa = nfa_of("(?:x[0-9]{0,40}y){0,50}");
        let outer = nfa.runs().iter().filter(|r| r.count == 50).count();
        let inner = nfa.runs().iter().filter(|r| r.count == 40).count();
        assert_eq!(
            (outer, inner),
            (1, 50),
            "one run of items, a digit run per item"
        );
    }

    #[test]
    fn a_state_moves_back_along_its_run_only_far_from_the_end() {
        let nfa = nfa_of("a[0-9]{0,400}b");
        let mut det = Determinizer::new(nfa, usize::MAX, usize::MAX);
        let start = state_after(&mut det, b"a");
        let key_start = det.key(start).to_vec();
        let one = state_after(&mut det, b"a1");
        let key_one = det.key(one).to_vec();
        let digits = |n: usize| -> Vec<u8> {
            std::iter::once(b'a')
                .chain(std::iter::repeat_n(b'7', n))
                .collect()
        };
        // Far from the end: back to the first copy (the state after `a`),
        // from one digit on or a hundred.
        for n in [1, 100] {
            let s = state_after(&mut det, &digits(n));
            let back = det.nfa().shift_back(det.key(s), 128);
            assert_eq!(back.as_deref(), Some(&key_start[..]), "after {n} digits");
        }
        // No bound holds for an unbounded horizon (the chain's before any
        // mask sets it).
        let s = state_after(&mut det, &digits(100));
        assert_eq!(det.nfa().shift_back(det.key(s), u32::MAX), None);
        assert!(!det.nfa().is_next_unit(&key_start, &key_one, u32::MAX));
        // A 128-byte text from 300 digits on could reach the last copies.
        let s = state_after(&mut det, &digits(300));
        assert_eq!(det.nfa().shift_back(det.key(s), 128), None);
        // The state after `a` has nothing to move back.
        let s = state_after(&mut det, b"a");
        assert_eq!(det.nfa().shift_back(det.key(s), 128), None);
        // One digit on is the next unit (within the bound), two are not.
        assert!(det.nfa().is_next_unit(&key_start, &key_one, 128));
        let two = state_after(&mut det, b"a12");
        assert!(!det.nfa().is_next_unit(&key_start, det.key(two), 128));
        // Nor is one digit on near the end.
        let (near, next) = (digits(300), digits(301));
        let (a, b) = (state_after(&mut det, &near), state_after(&mut det, &next));
        let ka = det.key(a).to_vec();
        assert!(!det.nfa().is_next_unit(&ka, det.key(b), 128));
    }
}
