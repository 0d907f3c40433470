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
mod free;
pub(crate) mod nfa;
pub(crate) mod ordered;
mod parse;
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

/// Why a pattern did not become a DFA.
#[derive(Debug, thiserror::Error)]
pub enum DfaError {
    /// The pattern does not parse; `offset` is a byte offset into it.
    #[error("bad regex at byte {offset}: {message}")]
    Syntax { offset: usize, message: String },
    /// The pattern parses but its automaton exceeds a configured limit.
    #[error("regex too big: the {what} exceeds its limit of {limit} bytes (raise it with {knob})")]
    TooBig {
        what: &'static str,
        limit: usize,
        knob: &'static str,
    },
    /// Anything else regex-automata refuses.
    #[error("cannot build a DFA: {0}")]
    Build(String),
}

/// An anchored, full-match DFA over bytes.
///
/// The table is our own: state 0 is dead, `trans[state * stride + class]` is
/// the next state. It is built by [`determinize`]'s sparse subset construction,
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
                direct::parse_nfa_with(pattern, Some(config.nfa_size_limit), true, true)
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
        direct::parse_nfa_with(text, Some(config.nfa_size_limit), true, true)
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
    det: determinize::Determinizer,
    /// Whether each state's row is filled (index = state id).
    explored: Vec<bool>,
    failed: Option<DfaError>,
    config: DfaConfig,
    max_states: usize,
    pattern_len: usize,
    /// Per NFA state, whether it is a plain-text loop thread (see
    /// [`LazyDfa::has_plain_loop_thread`]); empty until first asked.
    loop_thread: Vec<u8>,
    /// Which NFA states are free ([`free`]), found on demand.
    free: free::FreeThreads,
    /// Per DFA state, the classes of its row filled one at a time.
    classes_done: Vec<u8>,
    /// Per DFA state, its free part ([`LazyDfa::free_part`]): a state,
    /// [`free::NO_PART`], or [`free::PART_UNKNOWN`].
    free_part: Vec<u32>,
    /// Per DFA state, the state its threads move back to along runs of
    /// copies ([`LazyDfa::shifted_back`]; itself when they do not).
    shifted: Vec<u32>,
}

/// Classes of a state's row filled one at a time before the rest is filled
/// at once ([`LazyDfa::set_class_rows`]): a state a trie walk leaves by many
/// bytes costs one pass over its threads, not one per class.
const CLASSES_ALONE: u8 = 4;

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
    fn over(
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
    fn limited<T>(
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
    pub fn dist(&self, s: u32) -> u32 {
        self.det.dist[s as usize]
    }

    /// The NFA the DFA is determinized from.
    pub(crate) fn nfa(&self) -> &Nfa {
        self.det.nfa()
    }

    /// The NFA states (byte-reading and match) of state `s`, sorted: those
    /// that can reach a match.
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
fn limit_error(l: determinize::Limit, config: &DfaConfig) -> DfaError {
    match l {
        determinize::Limit::Dfa => too_big_dfa(config),
        determinize::Limit::Determinize => too_big_determinize(config),
    }
}

fn too_big_nfa(config: &DfaConfig) -> DfaError {
    DfaError::TooBig {
        what: "NFA",
        limit: config.nfa_size_limit,
        knob: "DfaConfig::nfa_size_limit",
    }
}

fn too_big_dfa(config: &DfaConfig) -> DfaError {
    DfaError::TooBig {
        what: "DFA",
        limit: config.dfa_size_limit,
        knob: "DfaConfig::dfa_size_limit",
    }
}

fn too_big_determinize(config: &DfaConfig) -> DfaError {
    DfaError::TooBig {
        what: "determinization memory",
        limit: config.determinize_size_limit,
        knob: "DfaConfig::determinize_size_limit",
    }
}

fn syntax_error(e: &regex_syntax::Error) -> DfaError {
    match e {
        regex_syntax::Error::Parse(e) => DfaError::Syntax {
            offset: e.span().start.offset,
            message: e.kind().to_string(),
        },
        regex_syntax::Error::Translate(e) => DfaError::Syntax {
            offset: e.span().start.offset,
            message: e.kind().to_string(),
        },
        other => DfaError::Syntax {
            offset: 0,
            message: other.to_string(),
        },
    }
}

fn build_error(e: &dense::BuildError, config: &DfaConfig) -> DfaError {
    use std::error::Error as _;
    // regex-automata's top-level message for an NFA failure is only "error
    // building NFA"; the reason is in its source, a `thompson::BuildError`.
    if let Some(nfa) = e
        .source()
        .and_then(|s| s.downcast_ref::<thompson::BuildError>())
    {
        return nfa_error(nfa, config);
    }
    let msg = e.to_string();
    if !e.is_size_limit_exceeded() {
        return DfaError::Build(msg);
    }
    // The DFA-size message also says "during determinization", so test it first.
    if msg.starts_with("DFA exceeded size limit") || msg.contains("number of DFA states") {
        too_big_dfa(config)
    } else if msg.starts_with("determinization exceeded") {
        too_big_determinize(config)
    } else {
        DfaError::Build(msg)
    }
}

fn nfa_error(nfa: &thompson::BuildError, config: &DfaConfig) -> DfaError {
    use std::error::Error as _;
    // A syntax error (with its position) is the NFA error's own source.
    if let Some(syn) = nfa
        .source()
        .and_then(|s| s.downcast_ref::<regex_syntax::Error>())
    {
        return syntax_error(syn);
    }
    let nfa_msg = nfa.to_string();
    if nfa.size_limit().is_some() || nfa_msg.contains("NFA states") {
        return too_big_nfa(config);
    }
    DfaError::Build(format!("error building NFA: {nfa_msg}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_match_semantics() {
        let d = ByteDfa::new("a+b?", &DfaConfig::default()).unwrap();
        assert!(d.matches(b"a"));
        assert!(d.matches(b"aaab"));
        assert!(!d.matches(b""));
        assert!(!d.matches(b"ab "), "anchored at the end");
        assert!(!d.matches(b"ba"), "anchored at the start");
    }

    #[test]
    fn syntax_error_names_the_offset() {
        match ByteDfa::new("ab(c", &DfaConfig::default()) {
            Err(DfaError::Syntax { offset, .. }) => assert_eq!(offset, 2),
            other => panic!("expected a syntax error, got {other:?}"),
        }
    }

    #[test]
    fn size_limit_is_reported() {
        let cfg = DfaConfig {
            dfa_size_limit: 10_000,
            determinize_size_limit: 10_000,
            ..Default::default()
        };
        let e = ByteDfa::new("[a-z]{0,50}x[a-z]{20}", &cfg).unwrap_err();
        assert!(matches!(e, DfaError::TooBig { .. }), "{e}");
        assert!(e.to_string().contains("raise it"), "{e}");
    }

    #[test]
    fn each_limit_is_named_by_its_own_knob() {
        let nfa = ByteDfa::new(r"\w{1000}{100}", &DfaConfig::default()).unwrap_err();
        assert!(nfa.to_string().contains("the NFA exceeds"), "{nfa}");
        let cfg = DfaConfig {
            dfa_size_limit: 200_000,
            ..Default::default()
        };
        let dfa = ByteDfa::new("[ab]*a[ab]{20}", &cfg).unwrap_err();
        assert!(
            dfa.to_string()
                .contains("the DFA exceeds its limit of 200000"),
            "{dfa}"
        );
        let cfg = DfaConfig {
            determinize_size_limit: 100_000,
            ..Default::default()
        };
        let det = ByteDfa::new("[ab]*a[ab]{20}", &cfg).unwrap_err();
        assert!(
            det.to_string()
                .contains("determinization memory exceeds its limit of 100000"),
            "{det}"
        );
    }

    #[test]
    fn deep_nesting_up_to_the_limit_parses() {
        let deep = format!("{}a{}", "(?:".repeat(990), ")".repeat(990));
        assert!(ByteDfa::new(&deep, &DfaConfig::default())
            .unwrap()
            .matches(b"a"));
        let too_deep = format!("{}a{}", "(?:".repeat(1100), ")".repeat(1100));
        assert!(matches!(
            ByteDfa::new(&too_deep, &DfaConfig::default()),
            Err(DfaError::Syntax { .. })
        ));
    }

    #[test]
    fn sparse_determinizer_agrees_with_regex_automata() {
        let cfg = DfaConfig::default();
        for pattern in [
            "a+b?",
            "",
            "[a-z]{0,5}x[a-z]{3}",
            r#"\{"(?:[^"\\]|\\.)*":\s*(?:true|false|null|-?\d+(?:\.\d+)?)\}"#,
            r"[\x{80}-\x{10FFFF}]+|é{2,3}|😀",
            r"(?:ab|a)*(?:b|bc)",
            r"(a|b)*a(a|b){4}",
            r"(?i)schema|[^x]",
            r"(?s).{2,4}",
            r"[^\x00-\x7F]",
        ] {
            let ours = ByteDfa::new(pattern, &cfg).unwrap();
            let reference = ByteDfa::new_reference(pattern, &cfg).unwrap();
            assert_eq!(first_difference(&ours, &reference), None, "{pattern}");
            assert!(ours.state_count() <= reference.state_count(), "{pattern}");
        }
    }

    #[test]
    fn difference_finder_finds_the_shortest_witness() {
        let cfg = DfaConfig::default();
        let a = ByteDfa::new("a*", &cfg).unwrap();
        let b = ByteDfa::new("a{0,2}", &cfg).unwrap();
        assert_eq!(first_difference(&a, &b), Some(b"aaa".to_vec()));
        let c = ByteDfa::new("x|y", &cfg).unwrap();
        let d = ByteDfa::new("[xz]", &cfg).unwrap();
        assert_eq!(first_difference(&c, &d).map(|w| w.len()), Some(1));
    }

    #[test]
    fn look_around_uses_the_reference_path() {
        let d = ByteDfa::new(r"x(?-u:\b)y?|^b$", &DfaConfig::default()).unwrap();
        assert!(d.matches(b"x"));
        assert!(d.matches(b"b"));
        assert!(!d.matches(b"xy"), "no word boundary between 'x' and 'y'");
    }

    /// Rows filled a class at a time (some states' rows filled whole
    /// midway) give the same automaton as rows filled whole: a walk over
    /// pairs of states reached by the same bytes agrees on every byte's
    /// deadness, acceptance and distance.
    #[test]
    fn rows_filled_a_class_at_a_time_give_the_same_automaton() {
        let cfg = DfaConfig::default();
        for p in [
            r#"\{"a":(?:[0-9]+|"[^"\\]{0,5}")(?:,"[a-z]{1,3}":null)*\}"#,
            r"(?:ab|a[^b]|[^a]b){2,4}(?:é|中文)?",
            r#""(?:[^"\\\x00-\x1F]|\\["\\bfnrt]){2,40}""#,
        ] {
            let nfa = || direct::parse_nfa(p, None, true).unwrap().unwrap();
            let mut whole = ByteDfa::lazy_nfa(nfa(), p.len(), &cfg);
            let mut by_class = ByteDfa::lazy_nfa(nfa(), p.len(), &cfg);
            by_class.set_class_rows();
            let mut seen = std::collections::HashSet::new();
            let mut queue = std::collections::VecDeque::from([(whole.start(), by_class.start())]);
            let mut k = 0;
            while let Some((a, b)) = queue.pop_front() {
                k += 1;
                if k % 7 == 0 {
                    by_class.ensure_row(b);
                }
                assert_eq!(whole.is_accepting(a), by_class.is_accepting(b), "{p}");
                assert_eq!(whole.dist(a), by_class.dist(b), "{p}");
                for byte in 0..=255u8 {
                    let (x, y) = (whole.next(a, byte), by_class.next(b, byte));
                    assert_eq!(x == 0, y == 0, "{p}: byte {byte}");
                    if x != 0 && seen.len() < 2000 && seen.insert((x, y)) {
                        queue.push_back((x, y));
                    }
                }
            }
            assert!(by_class.limit_error().is_none());
        }
    }
}
