//! # constrain
//!
//! Structured-output decoding that always parses. A [`Compiler`] over one
//! vocabulary ([`vocab::Vocabulary`]) turns a [`Source`] — a JSON Schema, an
//! OpenAI `tools` array, a regex, a regex grammar file or a GBNF grammar — into
//! automata and lifts them to the token level: an immutable, shareable
//! [`Compiled`] artefact (cached by source and options). Each request walks
//! it with a cheap [`Matcher`] that says, at every step, which tokens keep
//! the text inside the language (as a [`index::TokenSet`] or an
//! XGrammar-layout bitmask). The [`sampling`] pipeline ([`sampling::Sampler`])
//! then turns masked logits into a token.
//!
//! ```text
//!  front ends            automata                index engines           per request
//!  JSON Schema ┐
//!  tools array ┼ schema:: ─┬─▶ dfa::  byte DFAs ──┬─▶ index:: eager ┐
//!  regex ──────┤           │   (eager or lazy)    │          lazy  ├─▶ TokenIndex ─▶ Matcher
//!  grammar file┴ grammar:: ┴─▶ pda::  fragments ──┴─▶     pushdown ┘   (compiler::Compiled,
//!                              that call each other                     Arc, cached)
//!  tokenizer.json ─ vocab:: ─▶ Vocabulary (token bytes, tries, TokenSet) ─┘
//!
//!  model logits ─▶ mask (Matcher) ─▶ sampling::Sampler ─▶ token ─▶ Matcher::accept_token
//! ```
//!
//! The modules, in the order of the pipeline:
//!
//! * front ends: [`schema`] (JSON Schema and tools → regex text, or
//!   fragments for recursion) and [`grammar`] (regex files; GBNF → syntax
//!   trees, or fragments);
//! * automata: [`dfa`] (regex / syntax tree → byte DFA, eager or
//!   determinized on demand) and [`pda`] (fragments that call one another,
//!   each a byte DFA);
//! * [`index`]: the three mask engines behind one trait (eager, lazy,
//!   pushdown) and the [`TokenIndex`] over them;
//! * [`matcher`]: the per-request state over an index;
//! * [`compiler`]: the one way in, source → [`Compiled`], every limit, the
//!   cache;
//!
//! and beside them [`vocab`] (token ids and bytes, the vocabulary's tries,
//! [`TokenSet`]) and [`sampling`] (masked logits → token). A front end
//! calls the automata it builds; nothing calls back up the pipeline: the
//! automata know no front end, the index engines no matcher or compiler,
//! and `vocab` nothing above it.
//!
//! The crates beside this one: `constrain-model` (the `LanguageModel` trait,
//! candle Qwen, the generation loops), `constrain-cli` (the binary),
//! `constrain-testkit` (oracles, MaskBench runner, fake and tiny models).
//! The library never prints; the binary does.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

/// Builder-style setters for a configuration value: for every listed
/// field, a method of the same name that sets it and returns the value
/// (`SchemaOptions::default().lenient(true).max_depth(5)`). The configs are
/// `#[non_exhaustive]`, so code outside their crate builds them from
/// `Default::default()` (or a named constructor) and these setters, and a
/// new field is never a breaking change.
#[doc(hidden)]
#[macro_export]
macro_rules! config_setters {
    ($ty:ident { $($field:ident : $fty:ty),* $(,)? }) => {
        impl $ty {
            $(
                #[doc = concat!("Sets [`", stringify!($ty), "::", stringify!($field), "`] (builder style).")]
                #[must_use]
                pub fn $field(mut self, value: $fty) -> Self {
                    self.$field = value;
                    self
                }
            )*
        }
    };
}

// Front ends → automata → index engines → matcher → compiler.
pub mod grammar;
pub mod schema;
pub mod tags;
pub mod tools;

pub mod dfa;
pub mod pda;

pub mod index;

pub mod matcher;
pub mod region;
pub mod unique;

pub mod compiler;

// Beside the pipeline: the vocabulary below it, sampling after it.
pub mod cancel;
pub mod sampling;
pub mod vocab;

/// Any error of the library, by stage.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A regex did not become a DFA.
    #[error(transparent)]
    Dfa(#[from] DfaError),
    /// A token index could not be built.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// A vocabulary could not be loaded.
    #[error(transparent)]
    Vocab(#[from] VocabError),
    /// A matcher refused a step.
    #[error(transparent)]
    Matcher(#[from] MatcherError),
    /// A JSON Schema did not compile.
    #[error(transparent)]
    Schema(#[from] schema::SchemaError),
    /// A grammar file could not be read or compiled.
    #[error(transparent)]
    Grammar(#[from] grammar::GrammarError),
    /// A GBNF grammar did not parse or lower.
    #[error(transparent)]
    Gbnf(#[from] grammar::gbnf::GbnfError),
    /// A structural tag was refused.
    #[error(transparent)]
    Tag(#[from] tags::TagError),
}

pub use compiler::{CompileError, CompileStats, Compiled, Compiler, CompilerConfig, Source};
pub use dfa::{ByteDfa, Dfa, DfaConfig, DfaError, LazyDfa};
pub use index::{IndexConfig, IndexError, TokenIndex, TokenSet};
pub use matcher::{bitmask_words, Matcher, MatcherError};
pub use vocab::{TokenId, VocabError, Vocabulary};
