//! # Limits reached while masks are made on demand
//!
//! A lazy index determinizes states, and the pushdown engine interns
//! configurations, as the matcher first visits them. Where that passes a
//! configured limit the part of the language beyond it is not offered (the
//! mask stays sound: it only ever loses tokens), and the index keeps the
//! first [`LimitHit`] so that a caller can say which limit cut the language
//! and which option raises it.

use crate::dfa::DfaError;

/// A resource limit a lazy index reached while it ran.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LimitHit {
    /// An automaton determinized on demand passed one of its size limits.
    #[error("{}, determinized on demand: {source}", whose(.rule))]
    Determinize {
        /// The grammar rule (or schema fragment) whose automaton it was;
        /// `None`: the document's single automaton.
        rule: Option<String>,
        /// The limit, naming the option that raises it.
        source: DfaError,
    },
    /// Nesting reached the stack depth limit (`knob` names the option).
    #[error("the stack depth limit {knob} was reached: deeper nesting is not offered")]
    StackDepth {
        /// The option that bounds the depth.
        knob: String,
    },
    /// An ambiguous grammar kept more parses at once than allowed.
    #[error(
        "the limit GbnfOptions::max_stacks ({limit}) on the parses kept at once was reached: \
         some parses of an ambiguous grammar were dropped"
    )]
    Stacks {
        /// `GbnfOptions::max_stacks`.
        limit: usize,
    },
    /// The pushdown engine interned more configurations than allowed.
    #[error(
        "the pushdown engine interned more than {limit} configurations (the limit \
         IndexConfig::max_states)"
    )]
    Configurations {
        /// `IndexConfig::max_states`.
        limit: usize,
    },
}

fn whose(rule: &Option<String>) -> String {
    match rule {
        None => "the document's automaton".into(),
        Some(r) => format!("the automaton of {r}"),
    }
}
