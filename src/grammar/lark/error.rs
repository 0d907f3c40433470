//! Why a Lark grammar was refused: [`LarkError`], each variant with the line
//! and column it is about. It depends on nothing else of the front end, so
//! the grammar errors above it can name it without a circle.

/// Why a Lark grammar was refused. Each variant says where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LarkError {
    /// The text does not parse.
    #[error("line {line}, column {column}: {message}")]
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },
    /// A construct of the dialect the compiler does not enforce (yet).
    #[error("line {line}, column {column}: {construct} is not supported: {reason}")]
    Unsupported {
        construct: String,
        line: usize,
        column: usize,
        reason: String,
    },
    /// A name is used but not defined.
    #[error("line {line}, column {column}: undefined name `{name}`")]
    Undefined {
        name: String,
        line: usize,
        column: usize,
    },
    /// A name is defined twice.
    #[error(
        "line {line}, column {column}: `{name}` is defined twice (first at line {first_line})"
    )]
    Duplicate {
        name: String,
        line: usize,
        column: usize,
        first_line: usize,
    },
    /// No `start` rule.
    #[error("line 1, column 1: the grammar has no `start` rule")]
    NoStart,
    /// A terminal refers to itself.
    #[error(
        "line {line}, column {column}: terminal `{name}` refers to itself (terminals are regular)"
    )]
    RecursiveTerminal {
        name: String,
        line: usize,
        column: usize,
    },
    /// A `/regex/` does not parse.
    #[error("line {line}, column {column}: {message}")]
    Regex {
        line: usize,
        column: usize,
        message: String,
    },
    /// A `%json` schema is refused by the JSON Schema compiler.
    #[error("line {line}, column {column}: %json: {message}")]
    Schema {
        line: usize,
        column: usize,
        message: String,
    },
    /// llguidance's greedy lexer could split some text differently from
    /// the grammar (see [`super::greedy`]).
    #[error("line {line}, column {column}: lexer conflict: {message}")]
    Lexer {
        line: usize,
        column: usize,
        message: String,
    },
    /// A size limit.
    #[error("line {line}, column {column}: limit: {message}")]
    Limit {
        line: usize,
        column: usize,
        message: String,
    },
    /// Left recursion through several rules.
    #[error(
        "line {line}, column {column}: rule `{rule}` is left-recursive through other rules \
         (only the immediate form `a: a x | y` is supported)"
    )]
    LeftRecursion {
        rule: String,
        line: usize,
        column: usize,
    },
}
