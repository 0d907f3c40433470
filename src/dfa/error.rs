//! # Why a pattern did not become a DFA
//!
//! [`DfaError`] and the functions that turn regex-syntax's, regex-automata's
//! and the determinizer's failures into it: a syntax error keeps its byte
//! offset, and a size limit names the [`DfaConfig`] knob that raises it
//! (regex-automata's own messages are matched to tell its limits apart).

use super::determinize;
use super::DfaConfig;
use regex_automata::dfa::dense;
use regex_automata::nfa::thompson;

/// Why a pattern did not become a DFA.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DfaError {
    /// The pattern does not parse.
    #[error("bad regex at byte {offset}: {message}")]
    Syntax {
        /// 0-based byte offset of the error in the pattern.
        offset: usize,
        /// The parser's message.
        message: String,
    },
    /// The pattern parses but its automaton exceeds a configured limit.
    #[error("regex too big: the {what} exceeds its limit of {limit} bytes (raise it with {knob})")]
    TooBig {
        /// The structure that grew too big (`NFA`, `DFA`, `determinization
        /// memory`).
        what: &'static str,
        /// The limit passed, in bytes.
        limit: usize,
        /// The [`DfaConfig`] field that raises it (`DfaConfig::dfa_size_limit`).
        knob: &'static str,
    },
    /// Anything else regex-automata refuses.
    #[error("cannot build a DFA: {0}")]
    Build(String),
}

pub(super) fn limit_error(l: determinize::Limit, config: &DfaConfig) -> DfaError {
    match l {
        determinize::Limit::Dfa => too_big_dfa(config),
        determinize::Limit::Determinize => too_big_determinize(config),
    }
}

pub(super) fn too_big_nfa(config: &DfaConfig) -> DfaError {
    DfaError::TooBig {
        what: "NFA",
        limit: config.nfa_size_limit,
        knob: "DfaConfig::nfa_size_limit",
    }
}

pub(super) fn too_big_dfa(config: &DfaConfig) -> DfaError {
    DfaError::TooBig {
        what: "DFA",
        limit: config.dfa_size_limit,
        knob: "DfaConfig::dfa_size_limit",
    }
}

pub(super) fn too_big_determinize(config: &DfaConfig) -> DfaError {
    DfaError::TooBig {
        what: "determinization memory",
        limit: config.determinize_size_limit,
        knob: "DfaConfig::determinize_size_limit",
    }
}

pub(super) fn syntax_error(e: &regex_syntax::Error) -> DfaError {
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

pub(super) fn build_error(e: &dense::BuildError, config: &DfaConfig) -> DfaError {
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

pub(super) fn nfa_error(nfa: &thompson::BuildError, config: &DfaConfig) -> DfaError {
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
