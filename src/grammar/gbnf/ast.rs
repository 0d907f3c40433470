//! The GBNF syntax tree: rules of expressions over Unicode code points.
//!
//! A group `( ... )` is not a node of its own: it is the [`Expr::Alt`] (or
//! the single sequence) inside it. An empty [`Expr::Seq`] is the empty
//! string. Every character is a Unicode scalar value (`char`); the parser
//! rejects surrogates and values past U+10FFFF. [`Expr::Bytes`], written
//! only by front ends, holds raw bytes.

/// A position in the grammar text: 1-based line and column (in characters).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pos {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
}

impl std::fmt::Display for Pos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

/// One rule `name ::= body`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// `[a-zA-Z0-9-]+`.
    pub name: String,
    /// The expression right of `::=`.
    pub body: Expr,
    /// Where the rule's name starts.
    pub pos: Pos,
}

/// An expression of a rule body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expr {
    /// `a | b | ...` (at least two alternatives).
    Alt(Vec<Expr>),
    /// `a b ...` (empty: the empty string).
    Seq(Vec<Expr>),
    /// `"..."`: these characters in order (never empty; `""` is an empty
    /// [`Expr::Seq`]).
    Literal(Vec<char>),
    /// `[...]` / `[^...]`: one character in (or, negated, outside) the
    /// inclusive ranges. `[]` matches nothing, `[^]` any character.
    Class {
        /// Inclusive character ranges, as written.
        ranges: Vec<(char, char)>,
        /// Whether the class is `[^...]`.
        negated: bool,
    },
    /// `.`: any one character.
    Any,
    /// These bytes in order, not necessarily UTF-8 (never empty). The GBNF
    /// text parser never writes it: front ends do, for the spelling of a
    /// special token (a byte string no text holds, see
    /// [`crate::Vocabulary::spelling`]).
    Bytes(Vec<u8>),
    /// A reference to the rule `name`, written at `pos`.
    Ref {
        /// The rule referred to.
        name: String,
        /// Where the reference is written.
        pos: Pos,
    },
    /// `x*`, `x+`, `x?`, `x{m}`, `x{m,}`, `x{m,n}` (`max: None`: unbounded).
    Repeat {
        /// The repeated expression.
        expr: Box<Expr>,
        /// The fewest repetitions.
        min: u32,
        /// The most repetitions (`None`: unbounded).
        max: Option<u32>,
    },
}

impl Expr {
    /// Calls `f` on every rule reference in the expression, in order.
    pub fn for_each_ref(&self, f: &mut dyn FnMut(&str, Pos)) {
        match self {
            Expr::Alt(v) | Expr::Seq(v) => v.iter().for_each(|e| e.for_each_ref(f)),
            Expr::Ref { name, pos } => f(name, *pos),
            Expr::Repeat { expr, .. } => expr.for_each_ref(f),
            Expr::Literal(_) | Expr::Class { .. } | Expr::Any | Expr::Bytes(_) => {}
        }
    }

    /// Whether a character class (after negation) contains `c`.
    pub fn class_contains(ranges: &[(char, char)], negated: bool, c: char) -> bool {
        ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != negated
    }
}
