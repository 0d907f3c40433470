//! # The lazy DFA: states determinized on first use
//!
//! [`LazyDfa`] holds the sparse determinizer paused: a state's row is
//! filled when a walk first leaves it (whole, or a class at a time), and its
//! liveness and distance to acceptance come from the NFA when it is created.
//! Hitting a size limit leaves the state with no live transition and records
//! the [`DfaError`]; [`LazyDfa::into_eager`] finishes the whole table.
//! The free-part and shift-back caches are filled by `free.rs` and
//! `shift.rs`, which is why the fields are visible to the parent module.

use super::error::limit_error;
use super::{determinize, free, op_reach, ByteDfa, DfaConfig, DfaError, Nfa};

/// A DFA whose states are determinized on first use: the subset construction
/// of [`ByteDfa`], paused. Liveness and the distance to acceptance of a state
/// are known when it is created (from the NFA), so nothing here needs the
/// whole automaton. State 0 is dead, as in [`ByteDfa`].
///
/// Size limits still hold: when exploring a state would pass
/// [`DfaConfig::dfa_size_limit`], the determinization memory limit or the
/// state limit set by [`LazyDfa::set_max_states`], that state is left with no
/// live transition and [`LazyDfa::limit_error`] says which limit was hit.
pub struct LazyDfa {
    pub(super) det: determinize::Determinizer,
    /// Whether each state's row is filled (index = state id).
    pub(super) explored: Vec<bool>,
    pub(super) failed: Option<DfaError>,
    pub(super) config: DfaConfig,
    pub(super) max_states: usize,
    pub(super) pattern_len: usize,
    /// Per NFA state, whether it is a plain-text loop thread (see
    /// [`LazyDfa::has_plain_loop_thread`]); empty until first asked.
    pub(super) loop_thread: Vec<u8>,
    /// Which NFA states are free ([`free`]), found on demand.
    pub(super) free: free::FreeThreads,
    /// Per DFA state, the classes of its row filled one at a time.
    pub(super) classes_done: Vec<u8>,
    /// Per DFA state, its free part ([`LazyDfa::free_part`]): a state,
    /// [`free::NO_PART`], or [`free::PART_UNKNOWN`].
    pub(super) free_part: Vec<u32>,
    /// Per DFA state, the state its threads move back to along runs of
    /// copies ([`LazyDfa::shifted_back`]; itself when they do not).
    pub(super) shifted: Vec<u32>,
    /// Per NFA state, its plain reach to a member-set operation
    /// ([`op_reach::reaches`]); empty until first asked.
    pub(super) op_reach: Vec<u32>,
    /// The same in bytes, and per DFA state its least over the threads
    /// ([`LazyDfa::byte_op_reach`]).
    pub(super) op_byte_reach: Vec<u32>,
    pub(super) byte_reach_of: Vec<u32>,
}

/// Classes of a state's row filled one at a time before the rest is filled
/// at once ([`LazyDfa::set_class_rows`]): a state a trie walk leaves by many
/// bytes costs one pass over its threads, not one per class.
const CLASSES_ALONE: u8 = 4;

/// [`LazyDfa::byte_op_reach`] not computed yet (a reach past every token
/// is as good as never, so reaches are capped below this).
const REACH_UNKNOWN: u32 = u32::MAX;

const LOOP_UNKNOWN: u8 = 0;
const LOOP_YES: u8 = 1;
const LOOP_NO: u8 = 2;

impl std::fmt::Debug for LazyDfa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyDfa")
            .field("states", &self.det.len())
            .field("explored", &self.explored.iter().filter(|&&e| e).count())
            .finish()
    }
}

impl LazyDfa {
    /// A lazy DFA over a determinizer whose first `explored` states are
    /// already explored; `size` stands for the pattern length.
    pub(super) fn over(
        det: determinize::Determinizer,
        explored: usize,
        size: usize,
        config: &DfaConfig,
    ) -> LazyDfa {
        LazyDfa {
            explored: vec![true; explored],
            det,
            failed: None,
            config: config.clone(),
            max_states: usize::MAX,
            pattern_len: size,
            loop_thread: Vec::new(),
            free: Default::default(),
            classes_done: Vec::new(),
            free_part: Vec::new(),
            shifted: Vec::new(),
            op_reach: Vec::new(),
            op_byte_reach: Vec::new(),
            byte_reach_of: Vec::new(),
        }
    }

    /// The anchored start state (0 when the language is empty).
    pub fn start(&self) -> u32 {
        self.det.start
    }

    /// Next state on `byte` (0: dead), determinizing `s` on first use: its
    /// whole row, or with [`LazyDfa::set_class_rows`] the one class of
    /// `byte`.
    #[inline]
    pub fn next(&mut self, s: u32, byte: u8) -> u32 {
        let si = s as usize;
        let at = si * self.det.stride + self.det.classes[byte as usize] as usize;
        if si >= self.explored.len() || !self.explored[si] {
            if !self.det.lazy_rows {
                self.explore(si);
            } else if self.det.trans[at] == determinize::UNCOMPUTED {
                return self.explore_class(si, at - si * self.det.stride);
            }
        }
        self.det.trans[at]
    }

    /// From now on, fills a state's row one class at a time as
    /// [`LazyDfa::next`] asks for them ([`LazyDfa::ensure_row`] fills the
    /// rest): a state a trie walk passes through with a few bytes does not
    /// create a successor for each of its hundred classes (a third of the
    /// states a whole-row exploration made were never entered).
    pub fn set_class_rows(&mut self) {
        if self.det.lazy_rows {
            return;
        }
        self.det.lazy_rows = true;
        let stride = self.det.stride;
        for i in 1..self.det.len() {
            if !self.is_explored(i as u32) {
                self.det.trans[i * stride..(i + 1) * stride].fill(determinize::UNCOMPUTED);
            }
        }
    }

    /// Fills the whole row of `s` (see [`LazyDfa::set_class_rows`]).
    #[inline]
    pub fn ensure_row(&mut self, s: u32) {
        if !self.is_explored(s) {
            self.explore(s as usize);
        }
    }

    /// The transition of `s` on class `c` alone (its row not filled), or,
    /// past [`CLASSES_ALONE`] of them, the whole row.
    #[cold]
    fn explore_class(&mut self, s: usize, c: usize) -> u32 {
        if self.classes_done.len() <= s {
            self.classes_done.resize(self.det.len().max(s + 1), 0);
        }
        if self.classes_done[s] >= CLASSES_ALONE {
            self.explore(s);
            return self.det.trans[s * self.det.stride + c];
        }
        self.classes_done[s] += 1;
        match self.limited(|det| det.explore_class(s, c)) {
            Ok(t) => t,
            Err(e) => {
                self.det.trans[s * self.det.stride + c] = 0;
                if self.failed.is_none() {
                    self.failed = e;
                }
                0
            }
        }
    }

    #[cold]
    fn explore(&mut self, s: usize) {
        if self.explored.len() < self.det.len() {
            self.explored.resize(self.det.len(), false);
        }
        self.explored[s] = true;
        let res = self.limited(|det| det.explore(s));
        if let Err(e) = res {
            if self.det.lazy_rows {
                // The classes not filled are dead; those filled (one at a
                // time before, or by this exploration) keep their targets:
                // masks may have been computed through them.
                self.det.close_row(s);
            } else {
                let row = s * self.det.stride;
                self.det.trans[row..row + self.det.stride].fill(0);
            }
            if self.failed.is_none() {
                self.failed = e;
            }
        }
        if self.explored.len() < self.det.len() {
            self.explored.resize(self.det.len(), false);
        }
    }

    /// Runs `f` (a step of the determinizer) unless a limit was hit
    /// before (`Err(None)`: already reported), and checks the limits after
    /// it: the determinizer's own and the state count.
    pub(super) fn limited<T>(
        &mut self,
        f: impl FnOnce(&mut determinize::Determinizer) -> Result<T, determinize::Limit>,
    ) -> Result<T, Option<DfaError>> {
        if self.failed.is_some() {
            return Err(None);
        }
        match f(&mut self.det) {
            Ok(_) if self.det.len() > self.max_states => Err(Some(DfaError::TooBig {
                what: "lazy DFA's state count",
                limit: self.max_states,
                knob: "IndexConfig::max_states",
            })),
            Ok(t) => Ok(t),
            Err(l) => Err(Some(limit_error(l, &self.config))),
        }
    }

    /// Whether the text that led to `s` is in the language.
    #[inline]
    pub fn is_accepting(&self, s: u32) -> bool {
        self.det.accepting[s as usize]
    }

    /// Whether the row of `s` is filled (its transitions are final).
    #[inline]
    pub fn is_explored(&self, s: u32) -> bool {
        self.explored.get(s as usize).is_some_and(|&e| e)
    }

    /// The transitions of an explored state `s`, one per byte class (0:
    /// dead).
    pub fn row(&self, s: u32) -> &[u32] {
        let at = s as usize * self.det.stride;
        &self.det.trans[at..at + self.det.stride]
    }

    /// Whether `s` holds an NFA thread that every "plain" text keeps alive
    /// (a string body's loop): then so does `s`, whatever its other threads
    /// do. `successors(dfa, d, out)` is the caller's notion of plain text:
    /// it puts in `out` the states one plain character leads `d` to and says
    /// whether none of them is dead. A thread `q` qualifies when every
    /// successor of the state made of `q` alone still contains `q` (then by
    /// induction no plain text loses it). Answers per NFA state are cached.
    pub(crate) fn has_plain_loop_thread(
        &mut self,
        s: u32,
        successors: &mut dyn FnMut(&mut LazyDfa, u32, &mut Vec<u32>) -> bool,
    ) -> bool {
        if self.loop_thread.is_empty() {
            self.loop_thread = vec![LOOP_UNKNOWN; self.det.nfa_len()];
        }
        let key: Vec<u32> = self.det.key(s).to_vec();
        let mut succ = Vec::new();
        for q in key {
            // (With member sets a key's threads run past the NFA's states.)
            if q as usize >= self.loop_thread.len() {
                self.loop_thread.resize(q as usize + 1, LOOP_UNKNOWN);
            }
            let known = self.loop_thread[q as usize];
            let yes = if known != LOOP_UNKNOWN {
                known == LOOP_YES
            } else if !self.det.reads_bytes(q) {
                false
            } else {
                let d = match self.det.single(q) {
                    Ok(d) if self.failed.is_none() => d,
                    _ => return false,
                };
                succ.clear();
                let live = d != 0 && successors(self, d, &mut succ);
                let yes = live
                    && succ
                        .iter()
                        .all(|&t| self.det.key(t).binary_search(&q).is_ok());
                self.loop_thread[q as usize] = if yes { LOOP_YES } else { LOOP_NO };
                yes
            };
            if yes {
                return true;
            }
        }
        false
    }

    /// Fewest bytes from `s` to acceptance (`u32::MAX` for the dead state).
    #[inline]
    pub(crate) fn dist(&self, s: u32) -> u32 {
        self.det.dist[s as usize]
    }

    /// Fewest bytes from `s` to acceptance; `None` when no text from `s`
    /// is accepted (the dead state).
    pub fn distance(&self, s: u32) -> Option<u32> {
        Some(self.dist(s)).filter(|&d| d != u32::MAX)
    }

    /// The NFA the DFA is determinized from.
    pub(crate) fn nfa(&self) -> &Nfa {
        self.det.nfa()
    }

    /// The NFA states (byte-reading and match) of state `s`, sorted: those
    /// that can reach a match.
    /// With member sets, the sorted NFA states of the threads of `s`: what
    /// `s` shares with the states that differ from it only in their
    /// registers, its siblings ([`op_reach`]). `None` without member sets.
    pub(crate) fn skeleton(&self, s: u32) -> Option<Box<[u32]>> {
        if !self.det.has_regs() || s == 0 {
            return None;
        }
        let mut v = self.det.states_of(self.det.key(s));
        v.sort_unstable();
        Some(v.into())
    }

    /// The fewest plain characters after which a thread of `s` meets a
    /// member-set operation (`u32::MAX`: never): below it, `s` and its
    /// siblings fare alike ([`op_reach`]).
    pub(crate) fn plain_op_reach(&mut self, s: u32) -> u32 {
        self.ensure_op_reaches();
        Self::least(&self.det, &self.op_reach, s)
    }

    /// The fewest bytes after which a thread of `s` meets a member-set
    /// operation (`u32::MAX`: never).
    pub(crate) fn byte_op_reach(&mut self, s: u32) -> u32 {
        self.ensure_op_reaches();
        let si = s as usize;
        if let Some(&r) = self.byte_reach_of.get(si) {
            if r != REACH_UNKNOWN {
                return r;
            }
        }
        let r = Self::least(&self.det, &self.op_byte_reach, s).min(REACH_UNKNOWN - 1);
        if self.byte_reach_of.len() <= si {
            self.byte_reach_of
                .resize(self.det.len().max(si + 1), REACH_UNKNOWN);
        }
        self.byte_reach_of[si] = r;
        r
    }

    fn ensure_op_reaches(&mut self) {
        if self.op_reach.is_empty() {
            let reversed = self.det.take_reversed();
            (self.op_reach, self.op_byte_reach) = op_reach::reaches(self.det.nfa(), reversed);
        }
    }

    fn least(det: &determinize::Determinizer, reach: &[u32], s: u32) -> u32 {
        if s == 0 {
            return u32::MAX;
        }
        det.key(s)
            .iter()
            .map(|&t| reach[det.state_of(t) as usize])
            .min()
            .unwrap_or(u32::MAX)
    }

    pub(crate) fn nfa_key(&self, s: u32) -> &[u32] {
        self.det.key(s)
    }

    /// States found so far (the dead state included).
    pub fn state_count(&self) -> usize {
        self.det.len()
    }

    /// Bounds the number of states; a state whose exploration passes it is
    /// left with no live transition.
    pub fn set_max_states(&mut self, max: usize) {
        self.max_states = max;
    }

    /// The limit hit while determinizing on demand, if any.
    pub fn limit_error(&self) -> Option<&DfaError> {
        self.failed.as_ref()
    }

    /// The byte → equivalence class map.
    pub fn byte_classes(&self) -> [u8; 256] {
        self.det.classes
    }

    /// Length of the pattern the DFA came from.
    pub fn pattern_len(&self) -> usize {
        self.pattern_len
    }

    /// Determinizes every remaining state.
    pub fn into_eager(mut self) -> Result<ByteDfa, DfaError> {
        let mut i = 1;
        while i < self.det.len() {
            if i >= self.explored.len() || !self.explored[i] {
                self.det
                    .explore(i)
                    .map_err(|l| limit_error(l, &self.config))?;
            }
            i += 1;
        }
        if let Some(e) = self.failed {
            return Err(e);
        }
        Ok(ByteDfa::from_table(self.det.into_table(), self.pattern_len))
    }
}

impl LazyDfa {
    /// The state made of the free threads of `s` (see the module: those from
    /// which plain text can go on forever), when they are some but not all
    /// of its threads; `None` otherwise. Its language is part of that of
    /// `s`, so every token it allows `s` allows too. At a position of an
    /// object where a key starts (or inside one), the free part is the
    /// extra-key trie's threads, the same at every position, while the
    /// declared names still allowed there differ.
    pub(crate) fn free_part(&mut self, s: u32) -> Option<u32> {
        if s == 0 {
            return None;
        }
        let si = s as usize;
        if let Some(&p) = self.free_part.get(si) {
            if p != free::PART_UNKNOWN {
                return (p != free::NO_PART).then_some(p);
            }
        }
        let key: Vec<u32> = self.det.key(s).to_vec();
        // Threads classified by their NFA states (member sets' registers
        // only narrow a thread: the split stays a subset of its threads).
        let states = self.det.states_of(&key);
        if !free::has_wide_thread(self.det.nfa(), &states) {
            if self.free_part.len() <= si {
                self.free_part
                    .resize(self.det.len().max(si + 1), free::PART_UNKNOWN);
            }
            self.free_part[si] = free::NO_PART;
            return None;
        }
        self.free
            .classify(self.det.nfa(), self.det.nfa_dist(), &states);
        let sub: Vec<u32> = key
            .iter()
            .zip(&states)
            .filter(|&(_, &q)| self.free.is_free(q))
            .map(|(&t, _)| t)
            .collect();
        let part = if sub.is_empty() || sub.len() == key.len() || self.failed.is_some() {
            free::NO_PART
        } else {
            match self.det.sub_state(&sub) {
                Ok(t) => t,
                Err(_) => free::NO_PART,
            }
        };
        if self.free_part.len() <= si {
            self.free_part
                .resize(self.det.len().max(si + 1), free::PART_UNKNOWN);
        }
        self.free_part[si] = part;
        (part != free::NO_PART).then_some(part)
    }
}
