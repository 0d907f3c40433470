//! The Lark syntax tree, as written: items (rules, terminals, statements)
//! of expansions, before any name is resolved.
//!
//! The shapes follow llguidance's Lark dialect: a rule or terminal body is
//! [`Expansions`] (alternatives), each alternative an [`Alias`] (one or more
//! `&`-joined [`Expansion`]s, an optional `-> alias`), each expansion a
//! sequence of [`Expr`] (an [`Atom`] with an optional `?` `*` `+` or a
//! repetition range). Every node that can be refused carries its [`Pos`].

pub use crate::grammar::gbnf::Pos;

/// Alternatives `a | b | ...` (at least one).
#[derive(Clone, Debug, PartialEq)]
pub struct Expansions {
    pub pos: Pos,
    pub alts: Vec<Alias>,
}

/// One alternative: `x & y ... -> alias`.
#[derive(Clone, Debug, PartialEq)]
pub struct Alias {
    /// The `&`-joined sequences (one without `&`).
    pub conjuncts: Vec<Expansion>,
    /// Where the first `&` is written (`None`: no `&`).
    pub and_pos: Option<Pos>,
}

/// A sequence of expressions (empty: the empty string).
#[derive(Clone, Debug, PartialEq)]
pub struct Expansion(pub Vec<Expr>);

/// An atom with its repetition.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub atom: Atom,
    /// `(min, max)`; `max: None` is unbounded. `?` is `(0, Some(1))`, `*`
    /// `(0, None)`, `+` `(1, None)`, `~ n` `(n, Some(n))`, `~ m..n` and
    /// `{m,n}` as written.
    pub repeat: Option<(u32, Option<u32>)>,
    pub pos: Pos,
}

/// An atom.
#[derive(Clone, Debug, PartialEq)]
pub enum Atom {
    /// `( ... )`.
    Group(Expansions),
    /// `[ ... ]`: optional.
    Maybe(Expansions),
    /// `~atom`: the complement (terminals only).
    Not(Box<Atom>, Pos),
    Value(Value, Pos),
}

/// A leaf.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `"..."` with its flags (`i`).
    String(String, bool),
    /// `"a".."z"`.
    Range(char, char),
    /// `/.../flags`: the pattern and its flags.
    Regex(String, String),
    /// A rule or terminal name.
    Name(String),
    /// `<|...|>`, `<name>`, `<[...]>`.
    SpecialToken(String),
    /// `@name`.
    GrammarRef(String),
    /// `%json { ... }`.
    Json(serde_json::Value),
    /// `%regex { ... }`.
    RegexExt(serde_json::Value),
}

/// A rule's or lexeme's `[...]` options.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Options {
    /// `capture` / `capture="name"` (no effect on the language).
    pub capture: bool,
    /// `temperature=x` (a sampling hint: no effect on the language).
    pub temperature: bool,
    /// `lazy`: the rule is one lexeme that ends at the first point it
    /// matches (where it is written).
    pub lazy: Option<Pos>,
    /// `suffix=VALUE`: the rule is one lazy lexeme of its body followed by
    /// the value (a string, regex or terminal name), ending at the first
    /// point the two match (where the option is written).
    pub suffix: Option<(Box<Atom>, Pos)>,
    /// `stop_capture="name"` (with `suffix`: no effect on the language).
    pub stop_capture: Option<Pos>,
    /// `stop=...` was given (refused; see `refused`).
    pub stop: bool,
    /// The first option that changes the language and is refused (`stop`,
    /// `max_tokens`), with its position and why.
    pub refused: Option<(String, Pos, &'static str)>,
}

/// `name: ...` (a parser rule) or `NAME: ...` (a terminal).
#[derive(Clone, Debug, PartialEq)]
pub struct Def {
    /// Without the tree-shaping marks `?` and `!`.
    pub name: String,
    pub pos: Pos,
    pub terminal: bool,
    pub options: Options,
    pub body: Expansions,
}

/// A top-level item.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    Def(Def),
    /// `%ignore ...`.
    Ignore(Expansions, Pos),
    /// `%import common.X [-> Y]`, `%import common (X, Y)`: (common name,
    /// local name) pairs.
    Import(Vec<(String, String)>, Pos),
    /// `%llguidance { ... }`.
    LlGuidance(serde_json::Value, Pos),
}
