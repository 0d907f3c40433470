//! # constrain-testkit: the tools that check constrain
//!
//! Shared by the tests of every crate, the fuzz targets, the benches and the
//! CLI's `maskbench` / `soak` commands, so that none of it sits in the public
//! library:
//!
//! * [`check`]: invariants of the index and the matcher, each checked against
//!   an independent oracle and reported as a [`check::Violation`]; the fuzz
//!   targets and the replay of their regressions call the same functions;
//! * [`earley`]: an Earley recognizer over GBNF grammars, the oracle of
//!   the GBNF compiler;
//! * [`maskbench`]: the MaskBench runner (compliant semantics, `json.dumps`
//!   instances, TTFM / TBM);
//! * [`FakeModel`] (scripted logits) and [`tiny`] (tiny random-weight GGUF
//!   files and a tiny byte-level vocabulary) for model tests without weights;
//! * [`assets`]: where the real tokenizer, model and corpora are, with a
//!   message when they are absent;
//! * [`oracle`]: the `jsonschema` validator with `multipleOf` read exactly
//!   over decimals (as constrain compiles it);
//! * [`process`]: the process settings of the measuring binaries;
//! * [`budget`]: the tiny byte vocabulary and the adversarial `max_tokens`
//!   run of the budget-safety tests.

#![deny(missing_docs)]
pub mod assets;
pub mod budget;
pub mod check;
pub mod earley;
mod fake;
pub mod maskbench;
pub mod oracle;
pub mod process;
pub mod tiny;

pub use fake::{hashed_logits, sequence_hash, FakeModel};
