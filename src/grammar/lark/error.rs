//! Why a Lark grammar was refused: [`LarkError`], each variant with the line
//! and column it is about. It depends on nothing else of the front end, so
//! the grammar errors above it can name it without a circle.

/// Why a Lark grammar was refused. Each variant says where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LarkError {
    /// The text does not parse.
    #[error("line {line}, column {column}: {message}")]
    Syntax {
        /// 1-based line of the construct in the grammar text.
        line: usize,
        /// 1-based column (in characters) on that line.
        column: usize,
        /// What is wrong, in words.
        message: String,
    },
    /// A construct of the dialect the compiler does not enforce (yet).
    #[error("line {line}, column {column}: {construct} is not supported: {reason}")]
    Unsupported {
        /// The construct, as the grammar spells it.
        construct: String,
        /// 1-based line of the construct in the grammar text.
        line: usize,
        /// 1-based column (in characters) on that line.
        column: usize,
        /// Why it is not supported.
        reason: String,
    },
    /// A name is used but not defined.
    #[error("line {line}, column {column}: undefined name `{name}`")]
    Undefined {
        /// The name.
        name: String,
        /// 1-based line of the construct in the grammar text.
        line: usize,
        /// 1-based column (in characters) on that line.
        column: usize,
    },
    /// A name is defined twice.
    #[error(
        "line {line}, column {column}: `{name}` is defined twice (first at line {first_line})"
    )]
    Duplicate {
        /// The name.
        name: String,
        /// 1-based line of the construct in the grammar text.
        line: usize,
        /// 1-based column (in characters) on that line.
        column: usize,
        /// 1-based line of the first definition.
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
        /// The name.
        name: String,
        /// 1-based line of the construct in the grammar text.
        line: usize,
        /// 1-based column (in characters) on that line.
        column: usize,
    },
    /// A `/regex/` does not parse.
    #[error("line {line}, column {column}: {message}")]
    Regex {
        /// 1-based line of the construct in the grammar text.
        line: usize,
        /// 1-based column (in characters) on that line.
        column: usize,
        /// What is wrong, in words.
        message: String,
    },
    /// A `%json` schema is refused by the JSON Schema compiler.
    #[error("line {line}, column {column}: %json: {message}")]
    Schema {
        /// 1-based line of the construct in the grammar text.
        line: usize,
        /// 1-based column (in characters) on that line.
        column: usize,
        /// What is wrong, in words.
        message: String,
    },
    /// llguidance's greedy lexer could split some text differently from
    /// the grammar (see `greedy`).
    #[error("line {line}, column {column}: lexer conflict: {message}")]
    Lexer {
        /// 1-based line of the construct in the grammar text.
        line: usize,
        /// 1-based column (in characters) on that line.
        column: usize,
        /// What is wrong, in words.
        message: String,
    },
    /// A size limit.
    #[error("line {line}, column {column}: limit: {message}")]
    Limit {
        /// 1-based line of the construct in the grammar text.
        line: usize,
        /// 1-based column (in characters) on that line.
        column: usize,
        /// What is wrong, in words.
        message: String,
    },
    /// Left recursion through several rules.
    #[error(
        "line {line}, column {column}: rule `{rule}` is left-recursive through other rules \
         (only the immediate form `a: a x | y` is supported)"
    )]
    LeftRecursion {
        /// The rule.
        rule: String,
        /// 1-based line of the construct in the grammar text.
        line: usize,
        /// 1-based column (in characters) on that line.
        column: usize,
    },
    /// An error inside one grammar of an llguidance grammar list (its
    /// line and column are in that grammar's text).
    #[error("{error} (in grammar `{grammar}`)")]
    InGrammar {
        /// The grammar's name in the list (`grammars[i]` when it has none).
        grammar: String,
        /// The error, positioned in that grammar's text.
        error: Box<LarkError>,
    },
}

impl LarkError {
    /// The error as one inside the grammar `grammar` of a list (an error
    /// already placed in a grammar stays where it is).
    pub fn in_grammar(self, grammar: &str) -> LarkError {
        match self {
            e @ LarkError::InGrammar { .. } => e,
            e => LarkError::InGrammar {
                grammar: grammar.to_string(),
                error: Box::new(e),
            },
        }
    }
}
