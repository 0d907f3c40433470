//! # GBNF: llama.cpp's grammar format
//!
//! A GBNF grammar is a set of named rules; the language is that of the rule
//! `root`:
//!
//! ```text
//! # A comma-separated list of small numbers.
//! root ::= item ("," ws item)*
//! item ::= [1-9] [0-9]? | "0"
//! ws   ::= " "?
//! ```
//!
//! [`Gbnf::parse`] reads the text ([`parse`], following llama.cpp's
//! `llama-grammar.cpp`) into rules of [`ast::Expr`] and checks what the
//! whole grammar needs: no rule defined twice, every referenced rule
//! defined, a `root`. `lower` turns it into the automaton input.
//!
//! ## Compilation
//!
//! [`lower::lower`] inlines the rules into one `regex_syntax` `Hir` (built
//! from the AST, never through regex text): characters become their UTF-8
//! byte sequences, `.` and negated classes any valid code point except those
//! excluded. Recursion is handled in three ways:
//!
//! * **Immediate left recursion** `a ::= a x | y` is rewritten to `y x*`,
//!   **immediate right recursion** `a ::= x a | y` to `x* y` (both exact,
//!   found through groups and optional tails: `list ::= item ("," list)?`
//!   is exact). Any other left recursion is a [`GbnfError::LeftRecursion`]
//!   naming the rule (llama.cpp rejects every left recursion).
//! * **Other recursion** (`value ::= "[" value "]" | "x"`) is exact through
//!   pushdown automata ([`crate::pda`]): [`lower::fragments`] makes each
//!   rule in a cycle of references (and `root`) a fragment whose references
//!   to recursive rules are call markers, `pushdown.rs` builds them into a
//!   [`Pda`](crate::pda::Pda), and the index's pushdown engine keeps a
//!   return stack ([`GbnfOptions::max_stack_depth`]).
//! * **Fallback**: over a vocabulary without every single byte (the engine
//!   needs byte-live = token-live), other recursion is unrolled: a rule may
//!   be entered at most [`GbnfOptions::max_depth`] `+ 1` times inside
//!   itself, past which the deeper branch is dropped — a **sound subset**
//!   of the grammar's language.
//!
//! Every bound on the untrusted grammar is a named limit: repetition counts
//! ([`parse::MAX_REPETITION`]), group nesting ([`parse::MAX_NESTING`]), the
//! size of the unrolled grammar ([`GbnfOptions::max_nodes`]).

pub mod ast;
mod error;
pub mod lower;
pub mod parse;
pub(crate) mod pushdown;

pub use ast::{Expr, Pos, Rule};
pub use error::GbnfError;
pub use lower::lower;

use super::error::GrammarError;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A parsed GBNF grammar: rules in file order, every reference defined, a
/// `root` present.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gbnf {
    /// File stem or another label (`json`).
    pub name: String,
    /// The rules in the order they are written.
    pub rules: Vec<Rule>,
    /// The grammar text (the cache key of the compiled grammar).
    pub text: String,
}

/// How a GBNF grammar is compiled. `Config is a value`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct GbnfOptions {
    /// Fallback only (a vocabulary without every single byte, or
    /// [`lower::lower`] called directly): how many times a (non-tail)
    /// recursive rule may be entered inside itself (default 3, the JSON
    /// Schema front end's `max_depth`). Deeper nesting is not offered. The
    /// pushdown engine ignores it.
    pub max_depth: usize,
    /// Largest unrolled grammar, in syntax-tree nodes (default 262,144).
    pub max_nodes: usize,
    /// Pushdown engine: most frames on a matcher's return stack (default
    /// 1,024). Nesting deeper than this is not offered (masks never lead
    /// into it); the index reports the limit when it was reached.
    pub max_stack_depth: usize,
    /// Pushdown engine: most stacks one matcher configuration holds at once
    /// (an ambiguous grammar can keep several parses alive; default 256).
    /// Past it the extra parses are dropped (a sound subset, never a dead
    /// end) and the index reports the limit.
    pub max_stacks: usize,
}

crate::config_setters!(GbnfOptions {
    max_depth: usize,
    max_nodes: usize,
    max_stack_depth: usize,
    max_stacks: usize,
});

impl Default for GbnfOptions {
    fn default() -> Self {
        GbnfOptions {
            max_depth: 3,
            max_nodes: 1 << 18,
            max_stack_depth: 1024,
            max_stacks: 256,
        }
    }
}

impl Gbnf {
    /// Parses GBNF text and checks its rules (see the module docs).
    pub fn parse(name: &str, text: &str) -> Result<Gbnf, GbnfError> {
        let rules = parse::parse(text)?;
        let mut first: HashMap<&str, Pos> = HashMap::new();
        for r in &rules {
            if let Some(p) = first.get(r.name.as_str()) {
                return Err(GbnfError::DuplicateRule {
                    name: r.name.clone(),
                    line: r.pos.line,
                    column: r.pos.column,
                    first_line: p.line,
                });
            }
            first.insert(&r.name, r.pos);
        }
        let mut undefined = None;
        for r in &rules {
            r.body.for_each_ref(&mut |n, p| {
                if undefined.is_none() && !first.contains_key(n) {
                    undefined = Some(GbnfError::UndefinedRule {
                        name: n.to_string(),
                        line: p.line,
                        column: p.column,
                    });
                }
            });
        }
        if let Some(e) = undefined {
            return Err(e);
        }
        if !first.contains_key("root") {
            return Err(GbnfError::NoRoot);
        }
        Ok(Gbnf {
            name: name.to_string(),
            rules,
            text: text.to_string(),
        })
    }

    /// Reads and parses a GBNF file (errors name the file).
    pub fn load(path: impl AsRef<Path>) -> Result<Gbnf, GrammarError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| GrammarError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Gbnf::parse(&name, &text).map_err(|source| GrammarError::Gbnf {
            path: PathBuf::from(path),
            source,
        })
    }

    /// The rule named `name`.
    pub fn rule(&self, name: &str) -> Option<&Rule> {
        self.rules.iter().find(|r| r.name == name)
    }
}

#[cfg(test)]
mod tests;
