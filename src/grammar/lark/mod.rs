//! # Lark: llguidance's grammar dialect
//!
//! A Lark grammar names parser rules (`name: ...`) and terminals
//! (`NAME: ...`); the language is that of `start`:
//!
//! ```text
//! start: sum
//! sum: sum "+" product | product
//! product: NUMBER ("*" NUMBER)*
//! %import common.NUMBER
//! %ignore " "
//! ```
//!
//! The semantics are llguidance's (`docs/syntax.md`): terminals, and every
//! string, regex and `%json` block written in a rule, are **lexemes**; the
//! text is a sequence of lexemes with `%ignore`d text allowed between two
//! of them (never inside a terminal, never before the first lexeme, after
//! the last, or before a `%json` block); rules combine lexemes
//! context-free.
//!
//! ## Pipeline
//!
//! `lex` and `parse` read the text into `ast::Item`s (errors carry
//! line and column); `lower` resolves names and makes each lexeme a
//! `regex_syntax` `Hir` and each rule a tree over lexemes; `greedy`
//! checks that llguidance's lexer splits every text as the grammar does;
//! `emit` writes the result as GBNF rules ([`crate::grammar::gbnf`]),
//! which the GBNF lowering compiles: inlined to one DFA when regular,
//! recursion exact on the pushdown engine ([`crate::pda`]) otherwise. So a
//! Lark grammar has every guarantee a GBNF one has (no dead end, EOS only
//! where the text is complete, rollback, jump-forward).
//!
//! ## Where the languages could differ, and what is done about it
//!
//! llguidance's lexer is greedy and never backtracks: with `/a+/ "ab"`,
//! `aab` is refused (the `a+` lexeme takes both `a`s). A grammar over
//! characters would accept it. `greedy::check` proves, per lexeme and
//! what may follow it, that no such split exists, and refuses the grammar
//! (naming both lexemes and a byte) when it cannot: what is compiled is
//! then llguidance's language, or refused. The remaining differences,
//! all in the direction of constrain accepting less:
//!
//! * ignored text at the very end: llguidance allows it when the parser
//!   could still take another lexeme (`start: "x" "y"?` accepts `x `);
//!   constrain never ends on ignored text;
//! * `%json` follows constrain's JSON Schema compiler with compact
//!   whitespace; llguidance's JSON allows whitespace between its tokens;
//! * `A & ~B` is taken over valid UTF-8 texts (llguidance's complement also
//!   holds invalid byte sequences; outputs are text here).
//!
//! ## Refused by name (fail closed)
//!
//! Templates, priorities, `%override`, `%declare`, a non-empty
//! `stop=` (it hides text by backtracking tokens), `max_tokens=N` for
//! `N > 0` (it cuts the lexeme by tokens), `%regex` other than
//! `substring_chunks` / `substring_words` / `substring_chars`, `~` outside
//! `A & ~B`, a `%lark {}` block lexed apart inside a grammar with
//! `%ignore`, any `%llguidance` option other than `no_forcing`, stop and
//! ordinary tokens named as special tokens, `<[*]>`, and `@name` without a
//! grammar list, unknown, numeric or used inside itself. `capture`, `temperature`, `-> alias` and the marks `?rule` `!rule`
//! change no language and are accepted.
//!
//! ## Special tokens and grammar lists
//!
//! `<|im_end|>`, `<[151657]>` and token ranges (`tokens`) are lexemes of
//! placeholder bytes no text holds; compiling puts in the spelling of the
//! token as a grammar symbol of the vocabulary, and refuses stop tokens,
//! ordinary tokens and names the vocabulary lacks. llguidance's grammar
//! list (`toplevel`, [`Lark::parse_grammar_list`]) gives `@name` the
//! grammar of that name: a Lark grammar lowered as a `%lark` block, a JSON
//! Schema as `%json`; recursion through `@` is refused.
//!
//! ## Parametric rules
//!
//! `name::_` rules (`ast::ParamExpr`, `ast::ParamCond`) are written
//! out by `lower` as one rule per parameter value reached from `start`,
//! an alternative kept where its `%if` holds (at most
//! `lower::MAX_PARAM_INSTANCES` values).
//!
//! ## Nested grammars
//!
//! `%lark { ... }` is a grammar of its own (`lower` gives it a scope of
//! names). With the enclosing grammar's `%ignore` (and no `temperature`
//! anywhere) llguidance lexes it in the enclosing lexeme class: its rules
//! read as if written in place. Otherwise it is its own class
//! (`lower::Sym::Sub`): its `%ignore` between its own lexemes only, no
//! ignored text at its edges, and no first byte shared with a lexeme of
//! another class beside it (`greedy::check`).
//!
//! ## Lazy lexemes
//!
//! `rule[lazy]: BODY` and `rule[suffix=S]: BODY` are one lexeme that
//! llguidance's lexer takes at the first point `BODY` (then `S`) matches:
//! `terminals::shortest` computes that language exactly, and
//! `greedy::check` refuses a grammar where taking it there could cut
//! another lexeme of its context. See `docs/lark.md` for the table.

pub(crate) mod ast;
pub(crate) mod emit;
pub mod error;
pub(crate) mod greedy;
pub(crate) mod lex;
pub(crate) mod lower;
pub(crate) mod parse;
pub(crate) mod scan;
pub(crate) mod terminals;
pub(crate) mod tokens;
pub(crate) mod toplevel;

pub use error::LarkError;
pub use terminals::parse_regex;

use super::gbnf::{Gbnf, GbnfError};
use std::path::{Path, PathBuf};

/// A parsed Lark grammar, checked and written as GBNF rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lark {
    /// File stem or another label.
    pub name: String,
    /// The grammar text (the cache key of the compiled grammar).
    pub text: String,
    /// The grammar as GBNF rules (what is compiled). A grammar with
    /// special tokens holds placeholders in them until the vocabulary is
    /// known (the compiler then puts in the tokens).
    pub gbnf: Gbnf,
    /// The distinct special-token references.
    pub(crate) specials: Vec<tokens::Special>,
}

impl Lark {
    /// Parses, lowers and checks Lark text (see the module docs). A text
    /// that begins with `{` is llguidance's grammar list
    /// ([`Lark::parse_grammar_list`]).
    pub fn parse(name: &str, text: &str) -> Result<Lark, LarkError> {
        if toplevel::is_grammar_list(text) {
            return Lark::parse_grammar_list(name, text);
        }
        let items = parse::parse(lex::lex(text)?)?;
        let sym = lower::lower(&items, None, &crate::schema::SchemaOptions::default())?;
        Lark::checked(name, text, sym)
    }

    /// Parses llguidance's grammar list (`TopLevelGrammar` JSON:
    /// `{"grammars": [{"name": "main", "lark_grammar": "..."}, {"name":
    /// "sub", "json_schema": {...}}]}`): the first grammar is the output's,
    /// and `@sub` in a Lark grammar is the grammar of that name, used where
    /// it is written (a Lark grammar as a `%lark { ... }` block, a JSON
    /// Schema as `%json`). An error inside one grammar of the list is
    /// [`LarkError::InGrammar`], at its line and column in that grammar's
    /// text.
    pub fn parse_grammar_list(name: &str, text: &str) -> Result<Lark, LarkError> {
        let top = toplevel::parse(text)?;
        let list = Some((top.main_name.as_str(), top.subs.as_slice()));
        let sym = lower::lower(&top.main, list, &crate::schema::SchemaOptions::default())
            .map_err(|e| e.in_grammar(&top.main_name))?;
        Lark::checked(name, text, sym)
    }

    /// The lowered grammar `sym` checked against llguidance's lexer and
    /// written as GBNF rules.
    fn checked(name: &str, text: &str, sym: lower::SymGrammar) -> Result<Lark, LarkError> {
        let closed = greedy::check(&sym)?;
        let gbnf = emit::emit(&sym, name, text, &closed)?;
        Ok(Lark {
            name: name.to_string(),
            text: text.to_string(),
            gbnf,
            specials: sym.specials,
        })
    }

    /// Whether the grammar names special tokens (its GBNF rules then hold
    /// placeholders until the compiler puts in the tokens of its
    /// vocabulary).
    pub fn has_special_tokens(&self) -> bool {
        !self.specials.is_empty()
    }

    /// The GBNF rules with every special token put in as the vocabulary
    /// spells it as a grammar symbol; a name or id that is not a special,
    /// non-stop token of the vocabulary is refused at the reference.
    pub(crate) fn with_tokens(
        &self,
        table: &tokens::TokenTable,
    ) -> Result<std::borrow::Cow<'_, Gbnf>, LarkError> {
        if self.specials.is_empty() {
            return Ok(std::borrow::Cow::Borrowed(&self.gbnf));
        }
        let spellings = self
            .specials
            .iter()
            .map(|s| {
                tokens::resolve(s, table).map_err(|e| match &s.grammar {
                    Some(g) => e.in_grammar(g),
                    None => e,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(std::borrow::Cow::Owned(tokens::substitute(
            &self.gbnf, &spellings,
        )))
    }

    /// Reads and parses a Lark file (errors name the file).
    pub fn load(path: impl AsRef<Path>) -> Result<Lark, super::GrammarError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| super::GrammarError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Lark::parse(&name, &text).map_err(|source| super::GrammarError::Lark {
            path: PathBuf::from(path),
            source,
        })
    }

    /// A GBNF error of the written grammar, in the Lark grammar's terms.
    pub fn map_error(&self, e: GbnfError) -> Result<LarkError, GbnfError> {
        match e {
            GbnfError::LeftRecursion { rule, line, column } => Ok(LarkError::LeftRecursion {
                rule: rule
                    .strip_prefix("r.")
                    .or_else(|| rule.strip_prefix("f."))
                    .unwrap_or(&rule)
                    .to_string(),
                line,
                column,
            }),
            e => Err(e),
        }
    }
}

#[cfg(test)]
mod tests;
