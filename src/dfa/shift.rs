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
        if s == 0 || self.det.nfa().runs().is_empty() {
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
}

impl LazyDfa {
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
        if s == 0 || t == 0 || self.det.nfa().runs().is_empty() {
            return false;
        }
        let nfa = self.det.nfa();
        nfa.is_next_unit(self.det.key(s), self.det.key(t), horizon)
    }
}
