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

/// One alternative: `x & y ... -> alias %if cond`.
#[derive(Clone, Debug, PartialEq)]
pub struct Alias {
    /// The `&`-joined sequences (one without `&`).
    pub conjuncts: Vec<Expansion>,
    /// Where the first `&` is written (`None`: no `&`).
    pub and_pos: Option<Pos>,
    /// `%if cond` (parametric rules), where written.
    pub cond: Option<(ParamCond, Pos)>,
}

/// Bits `start..end` of a rule's 64-bit parameter (`[x:y]`; `_` is
/// `[0:64]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamRef {
    pub start: u32,
    pub end: u32,
}

impl ParamRef {
    pub fn mask(self) -> u64 {
        let width = self.end - self.start;
        let ones = if width >= 64 {
            u64::MAX
        } else {
            (1u64 << width) - 1
        };
        ones << self.start
    }

    pub fn eval(self, p: u64) -> u64 {
        (p & self.mask()) >> self.start
    }
}

/// The parameter passed to a parametric rule (`name::expr`), from the
/// current one `p` (llguidance's `docs/parametric.md`).
#[derive(Clone, Debug, PartialEq)]
pub enum ParamExpr {
    /// A number.
    Const(u64),
    /// `_`: `p`.
    SelfRef,
    /// `incr([x:y])`: add one to the bits, saturating.
    Incr(ParamRef),
    /// `decr([x:y])`: take one from the bits, saturating.
    Decr(ParamRef),
    /// `bit_or(v)`, `set_bit(k)`.
    Or(u64),
    /// `bit_and(v)`, `clear_bit(k)`.
    And(u64),
}

impl ParamExpr {
    pub fn eval(&self, p: u64) -> u64 {
        match self {
            ParamExpr::Const(v) => *v,
            ParamExpr::SelfRef => p,
            ParamExpr::Incr(r) if p & r.mask() == r.mask() => p,
            ParamExpr::Incr(r) => p.wrapping_add(1u64 << r.start),
            ParamExpr::Decr(r) if p & r.mask() == 0 => p,
            ParamExpr::Decr(r) => p.wrapping_sub(1u64 << r.start),
            ParamExpr::Or(v) => p | v,
            ParamExpr::And(v) => p & v,
        }
    }

    /// Whether it reads the current parameter.
    pub fn needs_param(&self) -> bool {
        !matches!(self, ParamExpr::Const(_))
    }
}

/// A condition on the current parameter (`%if`).
#[derive(Clone, Debug, PartialEq)]
pub enum ParamCond {
    True,
    /// `eq ne lt le gt ge` of the bits and a number (`bit_clear`,
    /// `bit_set`, `is_zeros`, `is_ones` are `eq`).
    Cmp(ParamRef, std::cmp::Ordering, bool, u64),
    /// `bit_count_*`: the number of set bits against a count.
    Count(ParamRef, std::cmp::Ordering, bool, u32),
    And(Box<ParamCond>, Box<ParamCond>),
    Or(Box<ParamCond>, Box<ParamCond>),
    Not(Box<ParamCond>),
}

impl ParamCond {
    /// `(ord, eq)`: holds when the comparison is `ord`, or equal if `eq`
    /// (`lt`: `(Less, false)`, `le`: `(Less, true)`, `eq`: `(Equal,
    /// true)`, `ne`: `(Equal, false)`, the last negated).
    pub fn eval(&self, p: u64) -> bool {
        fn cmp(a: u64, ord: std::cmp::Ordering, eq: bool, b: u64) -> bool {
            match ord {
                std::cmp::Ordering::Equal => (a == b) == eq,
                o => a.cmp(&b) == o || (eq && a == b),
            }
        }
        match self {
            ParamCond::True => true,
            ParamCond::Cmp(r, o, e, v) => cmp(r.eval(p), *o, *e, *v),
            ParamCond::Count(r, o, e, k) => cmp(r.eval(p).count_ones() as u64, *o, *e, *k as u64),
            ParamCond::And(a, b) => a.eval(p) && b.eval(p),
            ParamCond::Or(a, b) => a.eval(p) || b.eval(p),
            ParamCond::Not(a) => !a.eval(p),
        }
    }
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
    /// `name::expr`: a parametric rule and the parameter passed to it.
    NameParam(String, ParamExpr),
    /// `<|...|>`, `<name>`, `<[...]>`.
    SpecialToken(String),
    /// `@name`.
    GrammarRef(String),
    /// `%json { ... }`.
    Json(serde_json::Value),
    /// `%regex { ... }`.
    RegexExt(serde_json::Value),
    /// `%lark { ... }`: a grammar of its own (its `start`, terminals and
    /// `%ignore`), used as a rule.
    NestedLark(Vec<Item>),
}

/// A rule's or lexeme's `[...]` options.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Options {
    /// `capture` / `capture="name"` (no effect on the language).
    pub capture: bool,
    /// `temperature=x` (a sampling hint: no effect on the language).
    pub temperature: bool,
    /// `suffix=VALUE`: the rule is one lazy lexeme of its body followed by
    /// the value (a string, regex or terminal name), ending at the first
    /// point the two match (where the option is written). `lazy` is
    /// `suffix=//` unless a non-empty stop or suffix is given, as in
    /// llguidance.
    pub suffix: Option<(Box<Atom>, Pos)>,
    /// `stop=VALUE`, where written.
    pub stop: Option<(Box<Atom>, Pos)>,
    /// `stop_capture="name"` (with `suffix`: no effect on the language).
    pub stop_capture: Option<Pos>,
    /// `max_tokens=N`, where written.
    pub max_tokens: Option<(u64, Pos)>,
}

impl Options {
    /// The stop condition (`stop=` or `suffix=`).
    pub fn stop_like(&self) -> Option<&(Box<Atom>, Pos)> {
        self.stop.as_ref().or(self.suffix.as_ref())
    }

    /// llguidance's `is_lazy`: a stop condition other than the empty string.
    pub fn is_lazy(&self) -> bool {
        self.stop_like().is_some_and(|(a, _)| !is_empty_string(a))
    }
}

/// Whether the atom is the string `""`.
pub fn is_empty_string(a: &Atom) -> bool {
    matches!(a, Atom::Value(Value::String(s, _), _) if s.is_empty())
}

/// `name: ...` (a parser rule) or `NAME: ...` (a terminal).
#[derive(Clone, Debug, PartialEq)]
pub struct Def {
    /// Without the tree-shaping marks `?` and `!`.
    pub name: String,
    pub pos: Pos,
    pub terminal: bool,
    /// `name::_`: a parametric rule (a rule per value of its parameter).
    pub parametric: bool,
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
