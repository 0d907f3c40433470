//! Why a GBNF grammar was refused: [`GbnfError`], shared by the parser, the
//! lowering and the pushdown build, and wrapped by the grammar files' own
//! error (`grammar/error.rs`) with the file's path.

/// Why a GBNF grammar was refused. Each variant says where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GbnfError {
    /// The text does not parse.
    #[error("line {line}, column {column}: {message}")]
    Syntax {
        /// 1-based line of the offending text.
        line: usize,
        /// 1-based column of the offending text, in characters.
        column: usize,
        /// What the parser expected or found there.
        message: String,
    },
    /// A rule refers to a rule that is not defined.
    #[error("line {line}, column {column}: undefined rule `{name}`")]
    UndefinedRule {
        /// The name referred to.
        name: String,
        /// 1-based line of the reference.
        line: usize,
        /// 1-based column of the reference, in characters.
        column: usize,
    },
    /// A rule is defined twice.
    #[error(
        "line {line}, column {column}: rule `{name}` is defined twice (first at line {first_line})"
    )]
    DuplicateRule {
        /// The rule's name.
        name: String,
        /// 1-based line of the second definition.
        line: usize,
        /// 1-based column of the second definition's name, in characters.
        column: usize,
        /// 1-based line of the first definition.
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
        /// The left-recursive rule's name.
        rule: String,
        /// 1-based line of the rule's definition.
        line: usize,
        /// 1-based column of the rule's name, in characters.
        column: usize,
    },
    /// The unrolled grammar passes [`GbnfOptions::max_nodes`](super::GbnfOptions::max_nodes).
    #[error(
        "grammar too big: unrolled to more than {limit} nodes (the limit GbnfOptions::max_nodes; \
         a lower max_depth also shrinks it)"
    )]
    TooBig {
        /// The limit passed, in syntax-tree nodes.
        limit: usize,
    },
    /// The inlined grammar nests deeper than the automaton builders allow.
    #[error(
        "grammar too deep: rules inlined more than {limit} levels deep (lower max_depth, \
         or split long chains of rules)"
    )]
    TooDeep {
        /// The deepest nesting the automaton builders accept, in levels.
        limit: usize,
    },
    /// The shortest text of the grammar nests deeper than
    /// [`GbnfOptions::max_stack_depth`](super::GbnfOptions::max_stack_depth).
    #[error(
        "every text of the grammar nests {need} rules deep, past the limit \
         GbnfOptions::max_stack_depth ({limit})"
    )]
    StackDepth {
        /// The limit, in rules on the return stack.
        limit: usize,
        /// The depth the shortest text needs, in rules.
        need: usize,
    },
    /// The language is empty (no rule derives a finite text within
    /// `max_depth`).
    #[error("the grammar's language is empty (within a recursion depth of {max_depth})")]
    EmptyLanguage {
        /// The recursion depth the search was bounded by (`max_depth`, or
        /// `max_stack_depth` for the pushdown engine).
        max_depth: usize,
    },
}
