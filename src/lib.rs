//! # constrain
//!
//! Structured-output decoding that always parses. A JSON Schema, a regex or a
//! named grammar is compiled into a byte-level DFA ([`dfa::ByteDfa`]), lifted to
//! the token level over a vocabulary ([`vocab::Vocabulary`]) into an immutable,
//! shareable [`index::TokenIndex`], and walked per request by a cheap
//! [`guide::Guide`] that says, at every step, which tokens keep the text inside
//! the language. The [`sampling`] pipeline ([`sampling::Sampler`]) then turns masked logits into a
//! token, and [`generate`] drives a [`model::LanguageModel`].
//!
//! ```text
//! JSON Schema ──schema::──▶ regex ──┐
//! regex / grammars/*.regex ─────────┼─▶ dfa::ByteDfa ──┐
//! tokenizer.json / GGUF ─vocab::──▶ Vocabulary ────────┴─▶ index::TokenIndex (Arc)
//!                                                               │
//! model:: logits ─▶ sampling::Sampler ─▶ token ─▶ guide::Guide ◀┘
//! ```
//!
//! The library never prints; the binary (`src/main.rs`, `src/cli/`) does.

pub mod check;
pub mod dfa;
pub mod generate;
pub mod grammar;
pub mod guide;
pub mod index;
pub mod maskbench;
pub mod model;
pub mod process;
pub mod sampling;
pub mod schema;
pub mod vocab;

/// Any error of the library, by stage.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Dfa(#[from] DfaError),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Vocab(#[from] VocabError),
    #[error(transparent)]
    Guide(#[from] GuideError),
    #[error(transparent)]
    Schema(#[from] schema::SchemaError),
    #[error(transparent)]
    Grammar(#[from] grammar::GrammarError),
}

pub use dfa::{ByteDfa, Dfa, DfaConfig, DfaError, LazyDfa};
pub use guide::{Guide, GuideError};
pub use index::{IndexConfig, IndexError, TokenIndex, TokenSet};
pub use vocab::{TokenId, VocabError, Vocabulary};
