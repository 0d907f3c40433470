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

use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::util::primitives::StateID;
use regex_automata::util::start;
use regex_automata::{nfa::thompson, Anchored, MatchKind};

/// Deepest nesting of groups and repetitions a pattern may have (regex-syntax
/// defaults to 250, which deeply nested schemas exceed; the parser is
/// recursive, so this still bounds its stack use).
pub const NEST_LIMIT: u32 = 1000;

/// Size limits for turning a pattern into a DFA. Defaults are documented on
/// each field; all are in bytes of heap memory.
#[derive(Clone, Debug)]
pub struct DfaConfig {
    /// Largest Thompson NFA (default 256 MiB).
    pub nfa_size_limit: usize,
    /// Memory the determinizer may use while building (default 1 GiB).
    pub determinize_size_limit: usize,
    /// Largest final DFA transition table (default 512 MiB).
    pub dfa_size_limit: usize,
    /// Minimize the DFA (default false: measured 20–30x slower for a median
    /// gain of 8 %; see `shared/notes/schema-dfa-sizes.md`).
    pub minimize: bool,
}

impl Default for DfaConfig {
    fn default() -> Self {
        DfaConfig {
            nfa_size_limit: 256 << 20,
            determinize_size_limit: 1 << 30,
            dfa_size_limit: 512 << 20,
            minimize: false,
        }
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
#[derive(Clone, Debug)]
pub struct ByteDfa {
    dfa: dense::DFA<Vec<u32>>,
    start: StateID,
    pattern_len: usize,
}

impl ByteDfa {
    /// Builds the DFA of `pattern` (regex crate syntax, Unicode-aware; the
    /// whole text must match).
    pub fn new(pattern: &str, config: &DfaConfig) -> Result<ByteDfa, DfaError> {
        let dfa = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .start_kind(StartKind::Anchored)
                    .match_kind(MatchKind::All)
                    .minimize(config.minimize)
                    .byte_classes(true)
                    .dfa_size_limit(Some(config.dfa_size_limit))
                    .determinize_size_limit(Some(config.determinize_size_limit)),
            )
            .syntax(regex_automata::util::syntax::Config::new().nest_limit(NEST_LIMIT))
            .thompson(thompson::Config::new().nfa_size_limit(Some(config.nfa_size_limit)))
            .build(pattern)
            .map_err(|e| build_error(&e, config))?;
        let start = dfa
            .start_state(&start::Config::new().anchored(Anchored::Yes))
            .map_err(|e| DfaError::Build(e.to_string()))?;
        Ok(ByteDfa {
            dfa,
            start,
            pattern_len: pattern.len(),
        })
    }

    /// The underlying regex-automata DFA.
    pub fn inner(&self) -> &dense::DFA<Vec<u32>> {
        &self.dfa
    }

    /// The anchored start state.
    pub fn start(&self) -> StateID {
        self.start
    }

    /// Next state on `byte`.
    #[inline]
    pub fn next(&self, s: StateID, byte: u8) -> StateID {
        self.dfa.next_state(s, byte)
    }

    /// Whether the text read so far is in the language.
    #[inline]
    pub fn is_accepting(&self, s: StateID) -> bool {
        self.dfa.is_match_state(self.dfa.next_eoi_state(s))
    }

    /// Whether no continuation can ever match.
    #[inline]
    pub fn is_dead(&self, s: StateID) -> bool {
        self.dfa.is_dead_state(s) || self.dfa.is_quit_state(s)
    }

    /// Whether the whole of `text` is in the language.
    pub fn matches(&self, text: &[u8]) -> bool {
        let mut s = self.start;
        for &b in text {
            s = self.next(s, b);
            if self.is_dead(s) {
                return false;
            }
        }
        self.is_accepting(s)
    }

    /// Number of states reachable from the start state (dead state included).
    pub fn state_count(&self) -> usize {
        let classes = self.byte_classes();
        let mut reps: Vec<u8> = Vec::new();
        let mut seen_class = [false; 256];
        for b in 0..=255u8 {
            if !seen_class[classes[b as usize] as usize] {
                seen_class[classes[b as usize] as usize] = true;
                reps.push(b);
            }
        }
        let mut seen = std::collections::HashSet::new();
        let mut stack = vec![self.start];
        seen.insert(self.start);
        while let Some(s) = stack.pop() {
            for &b in &reps {
                let n = self.next(s, b);
                if seen.insert(n) {
                    stack.push(n);
                }
            }
        }
        seen.len()
    }

    /// Heap memory of the transition table, in bytes.
    pub fn memory_usage(&self) -> usize {
        self.dfa.memory_usage()
    }

    /// Length of the pattern the DFA came from.
    pub fn pattern_len(&self) -> usize {
        self.pattern_len
    }

    /// The byte → equivalence class map (bytes in one class behave alike).
    pub fn byte_classes(&self) -> [u8; 256] {
        let bc = self.dfa.byte_classes();
        let mut out = [0u8; 256];
        for b in 0..=255u8 {
            out[b as usize] = bc.get(b);
        }
        out
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
        // A syntax error (with its position) is the NFA error's own source.
        if let Some(syn) = nfa
            .source()
            .and_then(|s| s.downcast_ref::<regex_syntax::Error>())
        {
            return syntax_error(syn);
        }
        let nfa_msg = nfa.to_string();
        if nfa.size_limit().is_some() || nfa_msg.contains("NFA states") {
            return DfaError::TooBig {
                what: "NFA",
                limit: config.nfa_size_limit,
                knob: "--nfa-size-limit / DfaConfig::nfa_size_limit",
            };
        }
        return DfaError::Build(format!("error building NFA: {nfa_msg}"));
    }
    let msg = e.to_string();
    if !e.is_size_limit_exceeded() {
        return DfaError::Build(msg);
    }
    // The DFA-size message also says "during determinization", so test it first.
    if msg.starts_with("DFA exceeded size limit") || msg.contains("number of DFA states") {
        DfaError::TooBig {
            what: "DFA",
            limit: config.dfa_size_limit,
            knob: "--dfa-size-limit / DfaConfig::dfa_size_limit",
        }
    } else if msg.starts_with("determinization exceeded") {
        DfaError::TooBig {
            what: "determinization memory",
            limit: config.determinize_size_limit,
            knob: "--dfa-size-limit / DfaConfig::determinize_size_limit",
        }
    } else {
        DfaError::Build(msg)
    }
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
}
