//! Why a GBNF grammar was refused: [`GbnfError`], shared by the parser, the
//! lowering and the pushdown build, and wrapped by the grammar files' own
//! error (`grammar/error.rs`) with the file's path.

/// Why a GBNF grammar was refused. Each variant says where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GbnfError {
    /// The text does not parse.
    #[error("line {line}, column {column}: {message}")]
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },
    /// A rule refers to a rule that is not defined.
    #[error("line {line}, column {column}: undefined rule `{name}`")]
    UndefinedRule {
        name: String,
        line: usize,
        column: usize,
    },
    /// A rule is defined twice.
    #[error(
        "line {line}, column {column}: rule `{name}` is defined twice (first at line {first_line})"
    )]
    DuplicateRule {
        name: String,
        line: usize,
        column: usize,
        first_line: usize,
    },
    /// No rule is named `root`.
    #[error("line 1, column 1: the grammar has no `root` rule")]
    NoRoot,
    /// Left recursion other than the immediate form `a ::= a x | y`.
    #[error(
        "line {line}, column {column}: rule `{rule}` is left-recursive in a form that cannot be \
         rewritten (only the immediate form `a ::= a x | y`, rewritten to `y x*`, is supported)"
    )]
    LeftRecursion {
        rule: String,
        line: usize,
        column: usize,
    },
    /// The unrolled grammar passes [`GbnfOptions::max_nodes`](super::GbnfOptions::max_nodes).
    #[error(
        "grammar too big: unrolled to more than {limit} nodes (the limit GbnfOptions::max_nodes; \
         a lower max_depth also shrinks it)"
    )]
    TooBig { limit: usize },
    /// The inlined grammar nests deeper than the automaton builders allow.
    #[error(
        "grammar too deep: rules inlined more than {limit} levels deep (lower max_depth, \
         or split long chains of rules)"
    )]
    TooDeep { limit: usize },
    /// The shortest text of the grammar nests deeper than
    /// [`GbnfOptions::max_stack_depth`](super::GbnfOptions::max_stack_depth).
    #[error(
        "every text of the grammar nests {need} rules deep, past the limit \
         GbnfOptions::max_stack_depth ({limit})"
    )]
    StackDepth { limit: usize, need: usize },
    /// The language is empty (no rule derives a finite text within
    /// `max_depth`).
    #[error("the grammar's language is empty (within a recursion depth of {max_depth})")]
    EmptyLanguage { max_depth: usize },
}
