//! # Grammar files: regex files and GBNF
//!
//! Two file formats describe a language by name:
//!
//! * **Regex files** (`grammars/*.regex`, [`Grammar`]): a comment header,
//!   then one regex in the `regex` crate's syntax (`regex_file`).
//! * **GBNF** (`grammars/*.gbnf`, [`gbnf::Gbnf`]): llama.cpp's grammar
//!   format — named rules, alternation, grouping, literals, character
//!   classes, `.` and repetition — parsed into an AST ([`gbnf::ast`]) and
//!   lowered straight into the automaton input (a `regex_syntax` `Hir`,
//!   never regex text) by `gbnf::lower`.
//!
//! * **Lark** (`grammars/*.lark`, [`lark::Lark`]): llguidance's dialect —
//!   parser rules over lexemes, `%ignore`, `%json` — checked against
//!   llguidance's greedy lexer and written as GBNF rules ([`lark`]).
//!
//! [`load`] dispatches on the file extension: `.gbnf` is GBNF, `.lark` is
//! Lark, `.json` llguidance's grammar list (`{"grammars": [...]}`, read as
//! Lark), anything else is a regex file.

pub mod convert;
mod error;
pub mod gbnf;
pub mod lark;
mod regex_file;

pub use error::GrammarError;
pub use regex_file::Grammar;

/// A grammar file of either format, as read by [`load`].
#[derive(Clone, Debug)]
pub enum GrammarFile {
    /// A `*.regex` file (or any extension other than `.gbnf`).
    Regex(Grammar),
    /// A `*.gbnf` file.
    Gbnf(gbnf::Gbnf),
    /// A `*.lark` file, or a `*.json` grammar list.
    Lark(lark::Lark),
}

/// Whether `path` names a GBNF file (extension `.gbnf`, any case).
pub fn is_gbnf_path(path: &std::path::Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gbnf"))
}

/// Whether `path` names a Lark file (extension `.lark`, or `.json` for
/// llguidance's grammar list; any case).
pub fn is_lark_path(path: &std::path::Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("lark") || e.eq_ignore_ascii_case("json"))
}

/// Reads a grammar file, choosing the format by its extension.
pub fn load(path: impl AsRef<std::path::Path>) -> Result<GrammarFile, GrammarError> {
    let path = path.as_ref();
    if is_gbnf_path(path) {
        Ok(GrammarFile::Gbnf(gbnf::Gbnf::load(path)?))
    } else if is_lark_path(path) {
        Ok(GrammarFile::Lark(lark::Lark::load(path)?))
    } else {
        Ok(GrammarFile::Regex(Grammar::load(path)?))
    }
}
