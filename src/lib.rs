//! # constrain
//!
//! Structured-output decoding that always parses. A [`Compiler`] over one
//! vocabulary ([`vocab::Vocabulary`]) turns a [`Source`] — a JSON Schema, an
//! OpenAI `tools` array, a regex, a regex grammar file or a GBNF grammar — into a byte-level DFA
//! ([`dfa::ByteDfa`]) and lifts it to the token level: an immutable,
//! shareable [`Compiled`] artefact (cached by source and options). Each request
//! walks it with a cheap [`Matcher`] that says, at every step, which tokens
//! keep the text inside the language (as a [`index::TokenSet`] or an
//! XGrammar-layout bitmask). The [`sampling`] pipeline ([`sampling::Sampler`])
//! then turns masked logits into a token.
//!
//! ```text
//! JSON Schema ─ schema:: ─┐
//! tools array ─ schema:: ─┤
//! regex / grammar file ───┼─▶ dfa::ByteDfa ─▶ index::TokenIndex ─▶ Arc<Compiled> (cached)
//! tokenizer.json ─ vocab:: ─▶ Vocabulary ──────────┘                     │
//!                                                                      Matcher (per request)
//! model logits ─▶ mask (Matcher) ─▶ sampling::Sampler ─▶ token ─▶ Matcher::accept_token
//! ```
//!
//! The crates beside this one: `constrain-model` (the `LanguageModel` trait,
//! candle Qwen, the generation loop), `constrain-cli` (the binary),
//! `constrain-testkit` (oracles, MaskBench runner, fake and tiny models).
//! The library never prints; the binary does.

pub mod compiler;
pub mod dfa;
pub mod grammar;
pub mod index;
pub mod matcher;
pub mod pda;
pub mod sampling;
pub mod schema;
pub mod tags;
pub mod tools;
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
    Matcher(#[from] MatcherError),
    #[error(transparent)]
    Schema(#[from] schema::SchemaError),
    #[error(transparent)]
    Grammar(#[from] grammar::GrammarError),
    #[error(transparent)]
    Gbnf(#[from] grammar::gbnf::GbnfError),
    #[error(transparent)]
    Tag(#[from] tags::TagError),
}

pub use compiler::{CompileError, CompileStats, Compiled, Compiler, CompilerConfig, Source};
pub use dfa::{ByteDfa, Dfa, DfaConfig, DfaError, LazyDfa};
pub use index::{IndexConfig, IndexError, TokenIndex, TokenSet};
pub use matcher::{bitmask_words, Matcher, MatcherError};
pub use vocab::{TokenId, VocabError, Vocabulary};
