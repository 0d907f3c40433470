//! # Byte DFA: regex → anchored, full-match DFA over bytes
//!
//! [`ByteDfa`] wraps a `regex_automata::dfa::dense::DFA` built with
//! *full-match* semantics: the start state is anchored and a string is in the
//! language exactly when the state reached after its last byte, fed the
//! end-of-input transition, is a match state (regex-automata reports matches one
//! byte late). `MatchKind::All` keeps every thread alive, so the DFA describes
//! the whole language, not a leftmost match.
//!
//! Resource bounds on untrusted patterns are [`DfaConfig`] knobs (NFA size,
//! determinization memory, final DFA size); hitting one is a
//! [`DfaError::TooBig`] that names the limit and how to raise it. A bad pattern
//! is a [`DfaError::Syntax`] naming the byte offset of the problem.
//!
//! The token index does not use this type directly: it works over the small
//! [`ByteAutomaton`](crate::index::ByteAutomaton) trait, which `ByteDfa`
//! implements.

pub(crate) use classes::class_reps;
pub use error::DfaError;
use error::{build_error, limit_error, nfa_error, syntax_error, too_big_nfa};
pub use lazy::LazyDfa;
#[doc(hidden)]
pub use nfa::Nfa;
use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::util::primitives::StateID;
use regex_automata::util::start;
use regex_automata::{nfa::thompson, Anchored, MatchKind};

pub mod algebra;
mod classes;
mod determinize;
mod direct;
mod error;
mod free;
mod lazy;
pub(crate) mod nfa;
mod op_reach;
pub(crate) mod ordered;
mod parse;
pub(crate) mod regs;
pub(crate) mod sets;
mod shift;

/// Deepest nesting of groups and repetitions a pattern may have (regex-syntax
/// defaults to 250, which deeply nested schemas exceed; the parser is
/// recursive, so this still bounds its stack use).
pub const NEST_LIMIT: u32 = 1000;

/// The default [`DfaConfig::lazy_states`]: DFAs of more states are built
/// lazily. An eager index costs about 10–20 µs per state on one core (a
/// 137-state DFA: 3 ms; MaskBench dev's median schema, 1,750 states: 27 ms;
/// its p99, 160,000 states: a second), while a lazy build costs the NFA and
/// the first mask. Measured on 102 MaskBench dev files, one thread, a shared
/// 2-core machine (`constrain maskbench --files-from ... --jobs 1`): TTFM
/// p50 / p90 / p99 went from 30 / 560 / 2,400 ms (200,000 states, the old
/// default) to 1.7 / 104 / 450 ms (128), and TBM p90 / p99 from 0.6 / 8 µs
/// to 10 / 145 µs (a state's first visit pays its row and its mask). 1 state
/// gave the same figures; 128 keeps small patterns (a few milliseconds to
/// build) eager, with every mask precomputed and a known largest budget.
pub const LAZY_STATES: usize = 128;

/// Size limits for turning a pattern into a DFA. Defaults are documented on
/// each field; all are in bytes of heap memory.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DfaConfig {
    /// Largest Thompson NFA (default 256 MiB; an NFA compiled from the
    /// schema compiler's subset counts 16 bytes a state and 8 an edge).
    pub nfa_size_limit: usize,
    /// Memory the determinizer may use while building (default 1 GiB).
    pub determinize_size_limit: usize,
    /// Largest final DFA transition table (default 512 MiB).
    pub dfa_size_limit: usize,
    /// Minimize the DFA (default false: measured 20–30x slower for a median
    /// gain of 8 % in states over MaskBench schemas; see `docs/design/dfa.md`).
    pub minimize: bool,
    /// [`ByteDfa::build`] determinizes at most this many states up front and
    /// leaves the rest to be determinized on demand ([`LazyDfa`]), and the
    /// token index over it computes masks as matchers visit states; `None`
    /// always builds the whole DFA. Default [`LAZY_STATES`] (128): lazy
    /// wherever an eager build costs more than a few milliseconds.
    pub lazy_states: Option<usize>,
}

crate::config_setters!(DfaConfig {
    nfa_size_limit: usize,
    determinize_size_limit: usize,
    dfa_size_limit: usize,
    minimize: bool,
    lazy_states: Option<usize>,
});

impl Default for DfaConfig {
    fn default() -> Self {
        DfaConfig {
            nfa_size_limit: 256 << 20,
            determinize_size_limit: 1 << 30,
            dfa_size_limit: 512 << 20,
            minimize: false,
            lazy_states: Some(LAZY_STATES),
        }
    }
}

/// With a DFA or determinization limit set below its default and the
/// default [`DfaConfig::lazy_states`], DFAs of up to this many states are
/// still built whole (the old lazy threshold), so that a pattern over that
/// limit is refused at compile time, as a caller who sets a small limit
/// expects (`constrain compile --dfa-size-limit`), rather than when a matcher
/// reaches it (a lazy DFA past a limit leaves states without masks). An
/// explicit other `lazy_states` is taken as given.
pub const LIMIT_CHECK_STATES: usize = 200_000;

impl DfaConfig {
    /// The number of states past which [`ByteDfa::build`] goes lazy:
    /// [`DfaConfig::lazy_states`], or [`LIMIT_CHECK_STATES`] when it is the
    /// default and a size limit is below its default.
    pub fn lazy_threshold(&self) -> Option<usize> {
        let d = DfaConfig::default();
        let small_limit = self.dfa_size_limit < d.dfa_size_limit
            || self.determinize_size_limit < d.determinize_size_limit;
        self.lazy_states.map(|n| {
            if small_limit && n == LAZY_STATES {
                LIMIT_CHECK_STATES
            } else {
                n
            }
        })
    }
}

/// An anchored, full-match DFA over bytes.
///
/// The table is our own: state 0 is dead, `trans[state * stride + class]` is
/// the next state. It is built by `determinize`'s sparse subset construction,
/// or, for patterns with look-around assertions or when minimization is asked
/// for, copied out of a regex-automata dense DFA.
#[derive(Clone, Debug)]
pub struct ByteDfa {
    classes: [u8; 256],
    stride: usize,
    trans: Vec<u32>,
    accepting: Vec<bool>,
    start: u32,
    pattern_len: usize,
}

/// A DFA built whole, or one too big to build up front that is determinized
/// on demand (see [`ByteDfa::build`]).
// Built once per pattern and consumed at once: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Dfa {
    /// Every state determinized.
    Eager(ByteDfa),
    /// States past [`DfaConfig::lazy_states`] are determinized on first use.
    Lazy(Box<LazyDfa>),
}

impl ByteDfa {
    /// Builds the DFA of `pattern`, or, when it has more than
    /// [`DfaConfig::lazy_states`] states, a [`LazyDfa`] that keeps the states
    /// determinized so far and finds the rest on demand. Patterns with
    /// look-around, and `minimize`, always build the whole DFA.
    pub fn build(pattern: &str, config: &DfaConfig) -> Result<Dfa, DfaError> {
        let Some(lazy_states) = config.lazy_threshold() else {
            return Ok(Dfa::Eager(ByteDfa::new(pattern, config)?));
        };
        let nfa = match Self::nfa(pattern, config)? {
            Some(nfa) if !config.minimize => nfa,
            _ => return Ok(Dfa::Eager(Self::new_reference(pattern, config)?)),
        };
        Self::determinize(nfa, pattern.len(), lazy_states, config)
    }

    /// [`ByteDfa::build`] of the schema compiler's text (or a structural
    /// tag's, which may spell special tokens as raw byte groups), which may hold its
    /// one-copy constructs `(?&SEP|K1|...|Kn)` and `(?*SEP|ITEM)`
    /// ([`ordered`]): read by the subset parser with one copy of each
    /// member or item; a text outside
    /// the subset is expanded into plain regex syntax (at most `max_len`
    /// bytes, the limit named `SchemaOptions::max_regex_len`) for
    /// regex-syntax.
    pub(crate) fn build_schema(
        pattern: &str,
        config: &DfaConfig,
        max_len: usize,
    ) -> Result<Dfa, DfaError> {
        if !config.minimize {
            // Raw byte groups are read too: a structural tag's special
            // tokens are written as their spellings (`(?-u:\xC0..)`).
            if let Some(nfa) =
                direct::parse_nfa_with(pattern, Some(config.nfa_size_limit), true, true, true)
            {
                let nfa = nfa.map_err(|_| too_big_nfa(config))?;
                let lazy_states = config.lazy_threshold().unwrap_or(usize::MAX);
                return Self::determinize(nfa, pattern.len(), lazy_states, config);
            }
        }
        let plain = ordered::expand(pattern, max_len).map_err(|_| DfaError::TooBig {
            what: "schema regex with its one-copy constructs (optional members, array items) written out",
            limit: max_len,
            knob: "SchemaOptions::max_regex_len",
        })?;
        if plain.contains("(?-u:") {
            // Spellings of special tokens: bytes no UTF-8 text holds.
            let hir = regex_syntax::ParserBuilder::new()
                .utf8(false)
                .nest_limit(NEST_LIMIT)
                .build()
                .parse(&plain)
                .map_err(|e| syntax_error(&e))?;
            return Self::build_hir(&hir, plain.len(), config);
        }
        Self::build(&plain, config)
    }

    /// Determinizes `nfa` state by state, and leaves the rest lazy once it
    /// has more than `lazy_states` states (`size` stands for the pattern
    /// length in statistics).
    fn determinize(
        nfa: Nfa,
        size: usize,
        lazy_states: usize,
        config: &DfaConfig,
    ) -> Result<Dfa, DfaError> {
        let mut det = determinize::Determinizer::new(
            nfa,
            config.dfa_size_limit,
            config.determinize_size_limit,
        );
        let mut i = 1;
        while i < det.len() {
            if det.len() > lazy_states {
                return Ok(Dfa::Lazy(Box::new(LazyDfa::over(det, i, size, config))));
            }
            det.explore(i).map_err(|l| limit_error(l, config))?;
            i += 1;
        }
        Ok(Dfa::Eager(Self::from_table(det.into_table(), size)))
    }

    /// Builds the DFA of a syntax tree made by a front end (GBNF) without a
    /// regex text: like [`ByteDfa::build`], eager up to
    /// [`DfaConfig::lazy_states`] states and lazy past them. `size` stands
    /// for the pattern length in statistics.
    pub fn build_hir(
        hir: &regex_syntax::hir::Hir,
        size: usize,
        config: &DfaConfig,
    ) -> Result<Dfa, DfaError> {
        let nfa = thompson::Compiler::new()
            .configure(thompson_config(config))
            .build_from_hir(hir)
            .map_err(|e| nfa_error(&e, config))?;
        let nfa = match Nfa::from_thompson(&nfa) {
            Some(ours) if !config.minimize => ours,
            _ => return Ok(Dfa::Eager(Self::from_nfa_reference(&nfa, size, config)?)),
        };
        let lazy_states = config.lazy_threshold().unwrap_or(usize::MAX);
        Self::determinize(nfa, size, lazy_states, config)
    }

    /// A [`LazyDfa`] of a syntax tree whose bytes at or above `0xF5` are
    /// the pushdown engine's one-byte call markers: each costs
    /// `weights[b]` in the distances to acceptance (its callee's shortest
    /// text; `u32::MAX`: never taken), so a state's distance counts the
    /// calls on its way out. Only the start state is determinized up front.
    /// `Ok(None)` when the tree needs look-around or a marker byte shares a
    /// transition with other bytes (the caller builds the whole DFA).
    pub(crate) fn lazy_weighted(
        hir: &regex_syntax::hir::Hir,
        size: usize,
        config: &DfaConfig,
        weights: &[u32; 256],
    ) -> Result<Option<LazyDfa>, DfaError> {
        let nfa = thompson::Compiler::new()
            .configure(thompson_config(config))
            .build_from_hir(hir)
            .map_err(|e| nfa_error(&e, config))?;
        let Some(nfa) = Nfa::from_thompson(&nfa) else {
            return Ok(None);
        };
        Ok(Self::lazy_weighted_nfa(nfa, size, config, weights))
    }

    /// [`ByteDfa::lazy_weighted`] of an NFA built already
    /// ([`ByteDfa::fragment_nfa`]).
    pub(crate) fn lazy_weighted_nfa(
        nfa: Nfa,
        size: usize,
        config: &DfaConfig,
        weights: &[u32; 256],
    ) -> Option<LazyDfa> {
        let det = determinize::Determinizer::new_weighted(
            nfa,
            weights,
            config.dfa_size_limit,
            config.determinize_size_limit,
        )?;
        Some(LazyDfa::over(det, 1, size, config))
    }

    /// A lazy DFA over an NFA built already, with the builder's distances
    /// (every byte costs 1: a pushdown callee's marker bytes too, which
    /// only decides which threads can finish at all).
    pub(crate) fn lazy_nfa(nfa: Nfa, size: usize, config: &DfaConfig) -> LazyDfa {
        let det = determinize::Determinizer::new(
            nfa,
            config.dfa_size_limit,
            config.determinize_size_limit,
        );
        LazyDfa::over(det, 1, size, config)
    }

    /// The NFA of a pushdown fragment's text from the schema compiler,
    /// straight from the subset parser (no syntax tree): its one-copy
    /// constructs compiled with one copy of each member and its call
    /// markers `(?-u:\xHH...)` read as raw bytes. `None` outside the
    /// subset or with [`DfaConfig::minimize`] (the caller parses with
    /// regex-syntax).
    pub(crate) fn fragment_nfa(text: &str, config: &DfaConfig) -> Option<Result<Nfa, DfaError>> {
        if config.minimize {
            return None;
        }
        direct::parse_nfa_with(text, Some(config.nfa_size_limit), true, true, false)
            .map(|r| r.map_err(|_| too_big_nfa(config)))
    }

    /// The whole DFA of an NFA ([`ByteDfa::fragment_nfa`]), never lazy.
    pub(crate) fn from_nfa_whole(
        nfa: Nfa,
        size: usize,
        config: &DfaConfig,
    ) -> Result<ByteDfa, DfaError> {
        match Self::determinize(nfa, size, usize::MAX, config)? {
            Dfa::Eager(d) => Ok(d),
            Dfa::Lazy(d) => d.into_eager(),
        }
    }

    /// The whole DFA of a syntax tree (see [`ByteDfa::build_hir`]), never lazy.
    pub fn from_hir(
        hir: &regex_syntax::hir::Hir,
        size: usize,
        config: &DfaConfig,
    ) -> Result<ByteDfa, DfaError> {
        let config = DfaConfig {
            lazy_states: None,
            ..config.clone()
        };
        match Self::build_hir(hir, size, &config)? {
            Dfa::Eager(d) => Ok(d),
            Dfa::Lazy(d) => d.into_eager(),
        }
    }

    /// regex-automata's dense determinizer over an NFA (minimization, or an
    /// NFA with look-around), copied into our layout.
    fn from_nfa_reference(
        nfa: &thompson::NFA,
        size: usize,
        config: &DfaConfig,
    ) -> Result<ByteDfa, DfaError> {
        let dfa = dense::Builder::new()
            .configure(Self::dense_config(config))
            .build_from_nfa(nfa)
            .map_err(|e| build_error(&e, config))?;
        Self::copy_dense(&dfa, size)
    }

    fn dense_config(config: &DfaConfig) -> dense::Config {
        dense::Config::new()
            .start_kind(StartKind::Anchored)
            .match_kind(MatchKind::All)
            .minimize(config.minimize)
            .byte_classes(true)
            .dfa_size_limit(Some(config.dfa_size_limit))
            .determinize_size_limit(Some(config.determinize_size_limit))
    }

    /// The syntax tree of `pattern` from the subset parser, `None` outside
    /// the subset (for tests that compare it with regex-syntax).
    #[doc(hidden)]
    pub fn parse_subset(pattern: &str) -> Option<regex_syntax::hir::Hir> {
        parse::parse(pattern)
    }

    /// The Thompson NFA of `pattern`: compiled by [`direct`] (no syntax
    /// tree) when the pattern is in the schema compiler's subset, by
    /// regex-syntax and regex-automata's compiler otherwise; `None` when it
    /// has look-around (only regex-automata's determinizer takes it). (Public
    /// for development aids that time the phases of [`ByteDfa::build`].)
    #[doc(hidden)]
    pub fn nfa(pattern: &str, config: &DfaConfig) -> Result<Option<Nfa>, DfaError> {
        if let Some(nfa) = direct::parse_nfa(pattern, Some(config.nfa_size_limit), false) {
            return nfa.map(Some).map_err(|_| too_big_nfa(config));
        }
        let nfa = thompson::Compiler::new()
            .syntax(syntax_config())
            .configure(thompson_config(config))
            .build(pattern)
            .map_err(|e| nfa_error(&e, config))?;
        Ok(Nfa::from_thompson(&nfa))
    }

    fn from_table(t: determinize::Table, pattern_len: usize) -> ByteDfa {
        ByteDfa {
            classes: t.classes,
            stride: t.stride,
            trans: t.trans,
            accepting: t.accepting,
            start: t.start,
            pattern_len,
        }
    }

    /// Builds the DFA of `pattern` (regex crate syntax, Unicode-aware; the
    /// whole text must match).
    pub fn new(pattern: &str, config: &DfaConfig) -> Result<ByteDfa, DfaError> {
        let nfa = match Self::nfa(pattern, config)? {
            Some(nfa) if !config.minimize => nfa,
            _ => return Self::new_reference(pattern, config),
        };
        let t = determinize::determinize(nfa, config.dfa_size_limit, config.determinize_size_limit)
            .map_err(|l| limit_error(l, config))?;
        Ok(Self::from_table(t, pattern.len()))
    }

    /// Builds the same DFA with regex-automata's own dense determinizer (the
    /// reference the sparse construction is tested against; also the path for
    /// look-around and minimization).
    #[doc(hidden)]
    pub fn new_reference(pattern: &str, config: &DfaConfig) -> Result<ByteDfa, DfaError> {
        let dfa = dense::Builder::new()
            .configure(Self::dense_config(config))
            .syntax(syntax_config())
            .thompson(thompson_config(config))
            .build(pattern)
            .map_err(|e| build_error(&e, config))?;
        Self::copy_dense(&dfa, pattern.len())
    }

    fn copy_dense(dfa: &dense::DFA<Vec<u32>>, pattern_len: usize) -> Result<ByteDfa, DfaError> {
        let start = dfa
            .start_state(&start::Config::new().anchored(Anchored::Yes))
            .map_err(|e| DfaError::Build(e.to_string()))?;
        // Copy the reachable part into our layout.
        let bc = dfa.byte_classes();
        let mut classes = [0u8; 256];
        for b in 0..=255u8 {
            classes[b as usize] = bc.get(b);
        }
        let stride = classes[255] as usize + 1;
        let mut reps = vec![0u8; stride];
        for b in (0..=255u8).rev() {
            reps[classes[b as usize] as usize] = b;
        }
        let dead = |s: StateID| dfa.is_dead_state(s) || dfa.is_quit_state(s);
        let mut ids: std::collections::HashMap<StateID, u32> = Default::default();
        let mut order: Vec<StateID> = vec![];
        let mut trans = vec![0u32; stride];
        let mut accepting = vec![false];
        let mut intern = |s: StateID, order: &mut Vec<StateID>, trans: &mut Vec<u32>| -> u32 {
            if dead(s) {
                return 0;
            }
            *ids.entry(s).or_insert_with(|| {
                order.push(s);
                trans.resize(trans.len() + stride, 0);
                accepting.push(dfa.is_match_state(dfa.next_eoi_state(s)));
                order.len() as u32
            })
        };
        let start = intern(start, &mut order, &mut trans);
        let mut i = 0;
        while i < order.len() {
            let s = order[i];
            for (c, &b) in reps.iter().enumerate() {
                let n = intern(dfa.next_state(s, b), &mut order, &mut trans);
                trans[(i + 1) * stride + c] = n;
            }
            i += 1;
        }
        Ok(ByteDfa {
            classes,
            stride,
            trans,
            accepting,
            start,
            pattern_len,
        })
    }

    /// The anchored start state.
    pub fn start(&self) -> StateID {
        StateID::new_unchecked(self.start as usize)
    }

    /// Next state on `byte`.
    #[inline]
    pub fn next(&self, s: StateID, byte: u8) -> StateID {
        StateID::new_unchecked(
            self.trans[s.as_usize() * self.stride + self.classes[byte as usize] as usize] as usize,
        )
    }

    /// Whether the text read so far is in the language.
    #[inline]
    pub fn is_accepting(&self, s: StateID) -> bool {
        self.accepting[s.as_usize()]
    }

    /// Whether no continuation can ever match.
    #[inline]
    pub fn is_dead(&self, s: StateID) -> bool {
        s.as_usize() == 0
    }

    /// Whether the whole of `text` is in the language.
    pub fn matches(&self, text: &[u8]) -> bool {
        let mut s = self.start();
        for &b in text {
            s = self.next(s, b);
            if self.is_dead(s) {
                return false;
            }
        }
        self.is_accepting(s)
    }

    /// Number of states (all are reachable from the start; the dead state is
    /// included).
    pub fn state_count(&self) -> usize {
        self.accepting.len()
    }

    /// Heap memory of the transition table, in bytes.
    pub fn memory_usage(&self) -> usize {
        self.trans.len() * 4 + self.accepting.len()
    }

    /// Length of the pattern the DFA came from.
    pub fn pattern_len(&self) -> usize {
        self.pattern_len
    }

    /// The byte → equivalence class map (bytes in one class behave alike).
    pub fn byte_classes(&self) -> [u8; 256] {
        self.classes
    }
}

/// Checks that two DFAs accept the same language, by a breadth-first walk
/// over pairs of states; on a difference, returns the shortest text that one
/// accepts and the other does not. (Used to test the sparse determinizer
/// against regex-automata's.)
#[doc(hidden)]
pub fn first_difference(a: &ByteDfa, b: &ByteDfa) -> Option<Vec<u8>> {
    // Bytes that are alike in both DFAs need one representative.
    let mut reps: Vec<u8> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for x in 0..=255u8 {
        if seen.insert((a.classes[x as usize], b.classes[x as usize])) {
            reps.push(x);
        }
    }
    let mut parent: std::collections::HashMap<(u32, u32), Option<((u32, u32), u8)>> =
        Default::default();
    let start = (a.start, b.start);
    parent.insert(start, None);
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(p) = queue.pop_front() {
        if a.accepting[p.0 as usize] != b.accepting[p.1 as usize] {
            let mut text = Vec::new();
            let mut cur = p;
            while let Some(Some((prev, byte))) = parent.get(&cur) {
                text.push(*byte);
                cur = *prev;
            }
            text.reverse();
            return Some(text);
        }
        for &x in &reps {
            let n = (
                a.next(StateID::new_unchecked(p.0 as usize), x).as_u32(),
                b.next(StateID::new_unchecked(p.1 as usize), x).as_u32(),
            );
            if n == (0, 0) {
                continue;
            }
            if let std::collections::hash_map::Entry::Vacant(e) = parent.entry(n) {
                e.insert(Some((p, x)));
                queue.push_back(n);
            }
        }
    }
    None
}

fn syntax_config() -> regex_automata::util::syntax::Config {
    regex_automata::util::syntax::Config::new().nest_limit(NEST_LIMIT)
}

fn thompson_config(config: &DfaConfig) -> thompson::Config {
    thompson::Config::new()
        .nfa_size_limit(Some(config.nfa_size_limit))
        .which_captures(thompson::WhichCaptures::None)
}

/// The error for a limit the determinizer hit.

#[cfg(test)]
mod tests;
