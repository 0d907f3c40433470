//! # JSON Schema → regex
//!
//! This module turns a JSON Schema (a `serde_json::Value`) into a regex in the
//! syntax of the `regex` crate whose *whole-text* matches are JSON documents
//! that parse and validate against the schema. The regex then becomes a
//! [`ByteDfa`](crate::dfa::ByteDfa) like any other pattern.
//!
//! It works in two stages:
//!
//! 1. `ir`: `Value` → typed `ir::Schema`. Every keyword is classified here:
//!    enforced (parsed into a typed field), annotation (dropped silently), or
//!    unsupported / unknown (an error naming the keyword and its JSON Pointer,
//!    or a [`SchemaWarning`] in lenient mode). Local `$ref`s stay symbolic
//!    (`ir::Schema::Ref`) so that recursion can be unrolled lazily.
//! 2. [`regex`]: IR → regex text. `$ref`s are resolved there (a
//!    recursive reference is unrolled [`SchemaOptions::max_depth`] times, past
//!    which that branch is simply not offered), `allOf` members are
//!    intersected into one node, `anyOf`/`oneOf` become alternations (after a
//!    disjointness proof for `oneOf`, or with the complements of the other
//!    branches), `not`/`if`/dependencies become `anyOf` groups
//!    (`regex/logic.rs`), and scalar languages that must be intersected or
//!    subtracted go through product automata ([`crate::dfa::algebra`]).
//!
//! Numeric ranges (`numeric`), string formats (`formats`), ECMA-262
//! patterns (`pattern`) and the whitespace policy ([`whitespace`]) live in
//! their own files.
//!
//! ## Invariants (what the tests check against an independent validator)
//!
//! - **Sound**: every text the regex matches parses as JSON and validates
//!   against the schema. When a keyword cannot be enforced exactly, the
//!   compiler either fails (fail closed) or *narrows* the language to a subset
//!   it can describe (documented per case below; never a superset).
//! - Strings are JSON strings: no raw control characters, escapes only of the
//!   JSON kinds, and every `format`/`pattern` is confined to text a JSON string
//!   may contain. Lengths count Unicode code points (an escape is one).
//!
//! ## Documented narrowings (sound, but some valid documents are not produced)
//!
//! - Key order: properties come in `properties` order unless
//!   [`SchemaOptions::property_order`] is [`PropertyOrder::Any`] or the mode
//!   is [`JsonMode::Compliant`]: then declared properties (up to 64) and extra
//!   keys come in any order, each declared one at most once, the required
//!   ones all present (a register of written keys per open object, not a
//!   permutation regex: see `crate::dfa::regs`). An object whose key count
//!   is bounded by `minProperties` / `maxProperties` beyond what `required`
//!   implies accepts any order only up to
//!   [`SchemaOptions::any_order_max_properties`] declared properties, and
//!   extra keys after the declared ones.
//!   Extra keys are written without `\u` escapes, so that no spelling of a
//!   declared name can pass as an extra key.
//! - Free-form values ("any JSON value") nest at most
//!   [`SchemaOptions::free_form_depth`] containers deep; values of implicit
//!   extra keys (compliant mode) [`SchemaOptions::extra_value_depth`], or
//!   [`SchemaOptions::root_extra_value_depth`] for the document's own object.
//! - Strings constrained by `pattern`/`format`/`enum` use the canonical
//!   (`json.dumps`) spelling of each character: `\"`, `\\`, `\n`-style escapes
//!   and `\u00XX` for other control characters; no `\/` or `\u` escapes of
//!   printable characters.
//! - Numbers with bounds other than 0 are written without an exponent;
//!   exponents have at most two digits (so values stay in `f64` range).
//! - Integers are written in canonical form (`5`, not `5.0` or `-0`).
//! - `patternProperties` (one pattern, or several with `true` schemas): extra
//!   keys are keys matching the pattern, with its schema; keys matching no
//!   pattern are not offered even where `additionalProperties` would allow
//!   them. Declared keys matching the pattern also take its schema.
//! - `not`, `if`/`then`/`else`, dependencies and overlapping `oneOf`
//!   branches are exact through the IR's boolean algebra
//!   (`regex/logic.rs`); the few complements it cannot write are errors,
//!   and the complement of `integer` among numbers is the numbers written
//!   with a fractional part (at most 6 + 9 digits).
//! - `oneOf` branches are made disjoint where possible by never writing, in
//!   one branch, a key that another branch requires; otherwise branch `i`
//!   becomes `Bᵢ ∧ ¬Bⱼ`.
//! - In [`JsonMode::Strict`] an object that declares no properties is
//!   free-form (any keys), since "no keys at all" is rarely what is meant.
//! - Integer `format`s of OpenAPI/schemars (`int32`, `uint8`, ...) become
//!   bounds (validators ignore them).
//! - `uniqueItems` over more than [`SchemaOptions::max_unique_values`]
//!   listed values: distinct values in the order the schema lists them
//!   (with a warning); over items with no small finite set of values: an
//!   error naming the keyword (ignored with a warning when lenient).
//! - `multipleOf` on integers: exact for bounded ranges (enumerated) and for
//!   divisors of a power of ten (at most 15 digits); fractional `multipleOf`
//!   fails closed (floating-point semantics differ between validators).
//!
//! ## Defaults
//!
//! [`SchemaOptions::default`]: compact whitespace, strict JSON semantics,
//! recursion depth 3, free-form depth 3, fail closed on everything.

pub mod documents;
mod escapes;
mod eval;
pub(crate) mod formats;
pub(crate) mod ir;
pub(crate) mod numeric;
pub(crate) mod pattern;
pub(crate) mod pushdown;
pub mod regex;
pub mod tools;
pub(crate) mod unique_sites;
pub mod whitespace;
pub use escapes::Escapes;
mod witness;

pub use documents::Documents;
pub use tools::tools_schema;

pub use whitespace::Whitespace;

use serde_json::Value;
use std::fmt;

/// The order of an object's properties (see [`SchemaOptions::property_order`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PropertyOrder {
    /// The order of `properties` (required and optional ones alike), extra
    /// keys after them: what a model is asked to write.
    #[default]
    Schema,
    /// Any order, each key at most once, every required one present
    /// (XGrammar's `any_order`; JSON Schema's own meaning).
    Any,
}

/// What "the schema says" means for generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum JsonMode {
    /// Generation semantics: an absent `additionalProperties` means *no* extra
    /// keys, and an absent `type` is inferred from the keywords present
    /// (`properties` → object, `items` → array, `minLength` → string, ...).
    #[default]
    Strict,
    /// JSON Schema's own meaning: absent `additionalProperties` allows extra
    /// keys with any value, an absent `type` allows every type, and objects
    /// accept their keys in any order ([`PropertyOrder::Any`]).
    Compliant,
}

/// Compiler options. `Config is a value`: build it, clone it, keep it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SchemaOptions {
    /// Whitespace policy between JSON tokens (default [`Whitespace::Compact`]).
    pub whitespace: Whitespace,
    /// JSON semantics (default [`JsonMode::Strict`]).
    pub mode: JsonMode,
    /// How many times one `$ref` may be entered recursively inside itself
    /// where recursion is unrolled into a regular language (default 3).
    /// Deeper nesting is not offered there. (Where recursion is exact, on the
    /// pushdown engine, [`Self::max_stack_depth`] bounds it instead.)
    pub max_depth: usize,
    /// How many recursive `$ref`s may be open at once where recursion is
    /// exact (the pushdown engine's stack limit; default 1024).
    pub max_stack_depth: usize,
    /// Downgrade unsupported keywords to warnings (default false). The
    /// resulting regex then does not enforce them: output may not validate.
    pub lenient: bool,
    /// Compile a `oneOf` whose branches cannot be proven disjoint as `anyOf`
    /// (default false: such a `oneOf` is an error). Output may then match
    /// two branches and fail validation.
    pub coerce_one_of: bool,
    /// Treat keywords that no JSON Schema draft defines as annotations, with a
    /// warning (default false: they are errors). Near-misses of real keywords
    /// (`maxlength`, `additonalProperties`) stay errors unless `lenient`.
    /// In [`JsonMode::Compliant`] every unknown keyword, near-misses
    /// included, is ignored with a warning, as validators ignore it.
    pub allow_unknown_keywords: bool,
    /// Nesting depth of free-form ("any JSON value") values (default 3)
    /// where they are written as regex copies (a vocabulary without every
    /// single byte, or [`Self::free_form_calls`] off).
    pub free_form_depth: usize,
    /// Nesting depth of the values of *implicit* extra keys (compliant mode,
    /// `additionalProperties` absent); default 3. Each object with implicit
    /// extras carries one copy of this free-form value, so it dominates DFA
    /// size on large schemas (depth 1: ≈ 0.9k states per object, depth 3:
    /// ≈ 13k).
    pub extra_value_depth: usize,
    /// The same for the implicit extra keys of the document's own object
    /// (the root, when it is an object): at least [`Self::extra_value_depth`].
    /// Default 3; [`SchemaOptions::compliant`] 2, where
    /// [`Self::extra_value_depth`] is 1: one copy per schema, so it costs
    /// little, and MaskBench instances often put an array of objects or an
    /// object of objects under an undeclared top-level key.
    pub root_extra_value_depth: usize,
    /// Where the pushdown engine is usable (a vocabulary with every single
    /// byte), write every free-form value (`{}`, `true`, items or values
    /// without a schema, compliant mode's implicit extra-key values) as a
    /// call of one shared "any JSON value" fragment: exact at any depth up
    /// to [`Self::max_stack_depth`] instead of [`Self::free_form_depth`] /
    /// [`Self::extra_value_depth`] containers deep. Default `false`: the
    /// depth-bounded copies (and the regular path) unless the text runs past
    /// [`Self::max_regex_len`]. On a MaskBench dev sample, `true` passes 33
    /// more of 233 schemas (0 invalid accepted) but first visits of the
    /// schemas moved to the pushdown engine raise TBM p99 from ~0.1 ms to
    /// ~11 ms (`docs/json-schema.md`, "Free-form values as one shared
    /// fragment").
    pub free_form_calls: bool,
    /// [`Self::free_form_calls`] for the schemas that ask for arbitrary
    /// JSON: where the pushdown engine is usable, a schema with an
    /// *explicit* free-form value (`{}`, `true`, items without a schema,
    /// an object that declares nothing) is compiled with every free-form
    /// value a call of the shared fragment, exact at any depth, unless
    /// that would keep some object's members in declared order (the
    /// engine's fragments write member sets so): then as copies, as
    /// without it. Schemas whose only free-form values are compliant
    /// mode's implicit extra-key values keep the copies (and the regular
    /// path). Default `false`; [`SchemaOptions::compliant`] `true`
    /// (MaskBench dev: 13 more of the 148 schemas whose valid instances
    /// were rejected; `docs/json-schema.md`).
    pub deep_free_form: bool,
    /// The order of an object's properties (default
    /// [`PropertyOrder::Schema`]; [`JsonMode::Compliant`] and
    /// [`Self::any_order`] always take any order).
    pub property_order: PropertyOrder,
    /// Objects in any order past the permutation regex's limits
    /// ([`Self::any_order_max_properties`], [`Self::any_order_max_len`])
    /// as member sets, exact (default `true`); `false` keeps their declared
    /// order there, as regex syntax writes them (cheaper first visits of
    /// their states: see `docs/performance.md`).
    pub member_sets: bool,
    /// Objects whose key count `minProperties` / `maxProperties` bound
    /// beyond `required` accept their declared properties in any order only
    /// up to this many (default 3; their regex grows like `e·n!`); other
    /// objects take any order up to 64 declared properties.
    pub any_order_max_properties: usize,
    /// Every object accepts its declared properties in any order, in
    /// either mode (XGrammar's `any_order`, set by a structural tag's
    /// `json_schema`): an object with more than
    /// [`Self::any_order_max_properties`] properties, or whose any-order
    /// regex passes [`Self::any_order_max_len`], is refused naming the
    /// limit rather than kept in declared order (default `false`).
    pub any_order: bool,
    /// ... and when the any-order regex of the object's keys stays within
    /// this many bytes (default 4 KiB; it repeats each value about
    /// `e·(n-1)!` times, so nested objects fall back to declared order).
    pub any_order_max_len: usize,
    /// Largest counted repetition (`maxLength`, `maxItems`, ...) unrolled
    /// into the regex (default 10,000); larger bounds are an error naming the
    /// keyword rather than a silently dropped bound.
    pub max_repeat: u64,
    /// Narrow every `maxLength` above this to this (default `None`: exact).
    /// A counted string costs about 9 DFA states per character, so
    /// `maxLength: 4096` alone is ≈ 37k states; the cap is sound (shorter
    /// strings still validate) and reported as a warning.
    pub max_length_cap: Option<u64>,
    /// Largest regex text produced, in bytes (default 16 MiB).
    pub max_regex_len: usize,
    /// Where the pushdown engine is usable (a vocabulary with every single
    /// byte), a schema whose regex text would run past this many bytes is
    /// written with every bare `$ref` a call of its target's fragment: each
    /// definition generated and determinized once instead of copied at
    /// each use (`schema::regex::calls`). Values at or above
    /// [`Self::max_regex_len`] mean "only past that limit" (the behaviour
    /// before this knob). Default 16 MiB, the same as `max_regex_len`
    /// (off): 64 KiB cut TTFM p90 / p99 on a random MaskBench dev sample
    /// from 147 / 796 ms to 91 / 347 ms but raised TBM p99 from 78 µs to
    /// 6.6 ms (the pushdown engine's first visits; `docs/performance.md`,
    /// "Shared definitions past a lower text threshold").
    pub shared_refs_len: usize,
    /// Largest number of disjuncts of one complement (default 256); the
    /// `anyOf`/`oneOf` branch combinations explored for one node are bounded
    /// by 64 times this (16,384), after contradictory branches are pruned.
    pub max_branches: usize,
    /// Largest number of values an integer `multipleOf` with bounds may be
    /// enumerated into (default 4,096).
    pub max_enumerated_multiples: u64,
    /// Most states of a product automaton built to intersect or subtract
    /// two scalar languages (`not: {pattern}`, several patterns on one
    /// string, non-integers within bounds, `propertyNames` beside declared
    /// names); default 4,096.
    pub max_product_states: usize,
    /// Longest regex text such a product is turned back into (default
    /// 256 KiB; state elimination can grow it exponentially).
    pub max_product_len: usize,
    /// `uniqueItems` is exact when the items have at most this many
    /// possible values (default 6; the regex lists every ordering of
    /// distinct values, about `e·k!` branches); more listed values are
    /// narrowed to the listed order, with a warning.
    pub max_unique_values: usize,
    /// Strings with no `pattern`, `format` or listed values, and keys of
    /// objects with no declared names, may spell any character as
    /// `\uXXXX` (either case; a surrogate pair past U+FFFF, counted as one
    /// character): llguidance's `json_allow_general_unicode_escapes`, set by
    /// a Lark `%json` block's `x-guidance`. Default `false`: one spelling
    /// per character but for control characters (`\n` or `\u000a`).
    pub general_unicode_escapes: bool,
    /// The escapes strings may use (default: all of them); a narrower set
    /// (llguidance's `json_allowed_escapes`, set by a Lark `%json` block's
    /// `x-guidance`) is enforced where the compiler spells the strings and
    /// refused under `pattern`, `format`, `propertyNames`, `not` and for
    /// names and values it cannot spell ([`Escapes`]).
    pub allowed_escapes: Escapes,
    /// `uniqueItems` over items with no small finite set of values (strings,
    /// numbers) is checked at run time by the matcher ([`crate::unique`]),
    /// where the array's place in the document alone says it is checked
    /// (default `true`). Only a [`crate::Compiler`] compiling the schema as
    /// the whole output can do that: [`compile`] (a regex alone), tools,
    /// structural tags and grammars turn it off and refuse the keyword
    /// there as before.
    pub unique_items_check: bool,
}

crate::config_setters!(SchemaOptions {
    whitespace: Whitespace,
    mode: JsonMode,
    max_depth: usize,
    max_stack_depth: usize,
    lenient: bool,
    coerce_one_of: bool,
    allow_unknown_keywords: bool,
    free_form_depth: usize,
    extra_value_depth: usize,
    root_extra_value_depth: usize,
    free_form_calls: bool,
    deep_free_form: bool,
    property_order: PropertyOrder,
    member_sets: bool,
    any_order_max_properties: usize,
    any_order: bool,
    any_order_max_len: usize,
    max_repeat: u64,
    max_length_cap: Option<u64>,
    max_regex_len: usize,
    shared_refs_len: usize,
    max_branches: usize,
    max_enumerated_multiples: u64,
    max_product_states: usize,
    max_product_len: usize,
    max_unique_values: usize,
    general_unicode_escapes: bool,
    allowed_escapes: Escapes,
    unique_items_check: bool,
});

impl Default for SchemaOptions {
    fn default() -> Self {
        SchemaOptions {
            whitespace: Whitespace::Compact,
            mode: JsonMode::Strict,
            max_depth: 3,
            max_stack_depth: 1024,
            lenient: false,
            coerce_one_of: false,
            allow_unknown_keywords: false,
            free_form_depth: 3,
            extra_value_depth: 3,
            root_extra_value_depth: 3,
            free_form_calls: false,
            deep_free_form: false,
            property_order: PropertyOrder::Schema,
            member_sets: true,
            any_order_max_properties: 3,
            any_order: false,
            any_order_max_len: 4096,
            max_repeat: 10_000,
            max_length_cap: None,
            max_regex_len: 16 << 20,
            shared_refs_len: 16 << 20,
            max_branches: 256,
            max_enumerated_multiples: 4096,
            max_product_states: 4096,
            max_product_len: 256 << 10,
            max_unique_values: 6,
            general_unicode_escapes: false,
            allowed_escapes: Escapes::ALL,
            unique_items_check: true,
        }
    }
}

impl SchemaOptions {
    /// The options the MaskBench runner uses: JSON Schema semantics, any JSON
    /// whitespace (at most 2 bytes per slot), unknown keywords treated as
    /// annotations, values of implicit extra keys nesting at most one
    /// container (measured: depth 1 keeps the median DFA near 3k states,
    /// depth 3 multiplies it by ~5 for a 1-point gain in passing schemas),
    /// and `maxLength` above 1024 narrowed to 1024 (with a warning).
    /// Free-form values are calls where the schema has an explicit one
    /// ([`Self::deep_free_form`]), and product automata may take 16,384
    /// states and 1 MiB of text (MaskBench dev: 7 more schemas, the
    /// slowest 2 s to compile; 65,536 states and 4 MiB pass 2 more at
    /// 10 s each).
    pub fn compliant() -> SchemaOptions {
        SchemaOptions {
            whitespace: Whitespace::Flexible { max: 2 },
            mode: JsonMode::Compliant,
            allow_unknown_keywords: true,
            extra_value_depth: 1,
            root_extra_value_depth: 2,
            deep_free_form: true,
            max_length_cap: Some(1024),
            max_product_states: 16_384,
            max_product_len: 1 << 20,
            ..Default::default()
        }
    }
}

/// A JSON Pointer (RFC 6901) into the schema document.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Pointer(pub String);

impl Pointer {
    /// The pointer to the whole document (the empty string).
    pub fn root() -> Pointer {
        Pointer(String::new())
    }
    /// The pointer to a child key or index.
    pub fn push(&self, token: &str) -> Pointer {
        let escaped = token.replace('~', "~0").replace('/', "~1");
        Pointer(format!("{}/{}", self.0, escaped))
    }
    /// The pointer to a child array element.
    pub fn push_index(&self, i: usize) -> Pointer {
        Pointer(format!("{}/{}", self.0, i))
    }
    /// The pointer's text (`""` for the root, else `/`-separated escaped
    /// tokens).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Pointer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("(root)")
        } else {
            f.write_str(&self.0)
        }
    }
}

/// Why a schema did not compile. Every variant names where (a JSON Pointer).
#[derive(Debug, Clone, thiserror::Error)]
pub enum SchemaError {
    /// A keyword that changes what validates and that the compiler does not
    /// enforce.
    #[error("unsupported keyword \"{keyword}\" at {pointer}")]
    Unsupported {
        /// The keyword's name.
        keyword: String,
        /// Where, in the schema document.
        pointer: Pointer,
    },
    /// A keyword no JSON Schema draft defines and that is not a known
    /// annotation.
    #[error("unknown keyword \"{keyword}\" at {pointer}")]
    Unknown {
        /// The keyword's name.
        keyword: String,
        /// Where, in the schema document.
        pointer: Pointer,
    },
    /// A keyword value the compiler supports in general but not this value or
    /// combination (`format: "int32"`, fractional `multipleOf`, ...).
    #[error("unsupported {what} at {pointer}: {detail}")]
    UnsupportedValue {
        /// The keyword or construct (`format "int128"`, `multipleOf`, ...).
        what: String,
        /// Where, in the schema document.
        pointer: Pointer,
        /// Why it is not supported.
        detail: String,
    },
    /// Keywords that contradict each other, so nothing (or not what was
    /// meant) could validate.
    #[error("contradiction at {pointer}: {detail}")]
    Contradiction {
        /// Where, in the schema document.
        pointer: Pointer,
        /// Which keywords contradict each other, and how.
        detail: String,
    },
    /// A keyword with a value of the wrong shape.
    #[error("invalid schema at {pointer}: {detail}")]
    Invalid {
        /// Where, in the schema document.
        pointer: Pointer,
        /// What is wrong with the value.
        detail: String,
    },
    /// A `pattern` the regex engine cannot express (lookaround,
    /// backreferences, ...) or cannot confine.
    #[error("unsupported pattern at {pointer}: {detail}")]
    Pattern {
        /// Where, in the schema document.
        pointer: Pointer,
        /// What in the pattern could not be compiled.
        detail: String,
    },
    /// A `$ref` that is not a local reference.
    #[error("unresolvable $ref \"{reference}\" at {pointer}")]
    Ref {
        /// The `$ref` value as written.
        reference: String,
        /// Where, in the schema document.
        pointer: Pointer,
    },
    /// A `oneOf` whose branches could not be proven disjoint.
    /// `cause` says why the exact form (`Bᵢ ∧ ¬Bⱼ`) could not be built.
    #[error("oneOf at {pointer}: branches {first} and {second} may both match (set SchemaOptions::coerce_one_of to compile it as anyOf); exactly-one failed: {cause}")]
    OneOfOverlap {
        /// Where the `oneOf` is, in the schema document.
        pointer: Pointer,
        /// 0-based index of the first of the two branches.
        first: usize,
        /// 0-based index of the second of the two branches.
        second: usize,
        /// Why the exact (complemented) form could not be built.
        cause: String,
    },
    /// A size knob was hit.
    #[error(
        "{what} at {pointer} is {size}, over the limit of {limit} (raise SchemaOptions::{knob})"
    )]
    TooBig {
        /// What grew too big (`regex text`, `anyOf/oneOf branch
        /// combinations`, ...).
        what: String,
        /// Where, in the schema document.
        pointer: Pointer,
        /// Its size, in the limit's unit (bytes of regex, branches, levels,
        /// ...).
        size: u64,
        /// The limit it passed.
        limit: u64,
        /// The [`SchemaOptions`] field that sets the limit.
        knob: &'static str,
    },
    /// The schema (or the part at the pointer) admits no JSON value at all
    /// within the compiler's bounds.
    #[error("schema at {pointer} admits no value{detail}")]
    Empty {
        /// Where, in the schema document.
        pointer: Pointer,
        /// The bounds it was searched within, as ` (...)` text appended to
        /// the message (empty when none).
        detail: String,
    },
}

impl SchemaError {
    /// Where in the schema document the problem is.
    pub fn pointer(&self) -> &Pointer {
        match self {
            SchemaError::Unsupported { pointer, .. }
            | SchemaError::Unknown { pointer, .. }
            | SchemaError::UnsupportedValue { pointer, .. }
            | SchemaError::Contradiction { pointer, .. }
            | SchemaError::Invalid { pointer, .. }
            | SchemaError::Pattern { pointer, .. }
            | SchemaError::Ref { pointer, .. }
            | SchemaError::OneOfOverlap { pointer, .. }
            | SchemaError::TooBig { pointer, .. }
            | SchemaError::Empty { pointer, .. } => pointer,
        }
    }

    /// Whether lenient mode may downgrade this error to a warning (the
    /// construct is then ignored, widening what is accepted).
    pub fn is_downgradable(&self) -> bool {
        matches!(
            self,
            SchemaError::Unsupported { .. }
                | SchemaError::Unknown { .. }
                | SchemaError::UnsupportedValue { .. }
                | SchemaError::Pattern { .. }
        )
    }
}

/// Something the compiler did not enforce (lenient mode) or narrowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaWarning {
    /// Where, in the schema document.
    pub pointer: Pointer,
    /// What was ignored or narrowed, and how.
    pub message: String,
}

impl fmt::Display for SchemaWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at {}", self.message, self.pointer)
    }
}

/// The compiled constraint.
#[derive(Debug, Clone)]
pub struct CompiledSchema {
    /// Regex (regex crate syntax) whose whole-text matches are the documents.
    pub regex: String,
    /// What was downgraded or narrowed; empty in the default configuration
    /// unless a documented narrowing applied.
    pub warnings: Vec<SchemaWarning>,
}

/// Compiles `schema` into a regex.
///
/// ```
/// use constrain::schema::{compile, SchemaOptions};
/// let schema = serde_json::json!({
///     "type": "object",
///     "properties": {"age": {"type": "integer", "minimum": 0, "maximum": 120}},
///     "required": ["age"]
/// });
/// let out = compile(&schema, &SchemaOptions::default())?;
/// let re = regex::Regex::new(&format!("^(?:{})$", out.regex)).unwrap();
/// assert!(re.is_match(r#"{"age":42}"#));
/// assert!(!re.is_match(r#"{"age":121}"#));
/// # Ok::<(), constrain::schema::SchemaError>(())
/// ```
pub fn compile(schema: &Value, opts: &SchemaOptions) -> Result<CompiledSchema, SchemaError> {
    regex::compile_document(schema, &opts.clone().unique_items_check(false))
}

/// The JSON Schema of a Rust type, through `schemars`.
pub fn schema_for_type<T: schemars::JsonSchema>() -> Value {
    let schema = schemars::SchemaGenerator::default().root_schema_for::<T>();
    schema.to_value()
}

/// Compiles the schema of a Rust type, so that the generated text
/// deserializes into a `T`.
///
/// ```
/// use constrain::schema::{compile_type, SchemaOptions};
/// #[derive(schemars::JsonSchema, serde::Deserialize)]
/// struct Point { x: i32, y: i32 }
/// let out = compile_type::<Point>(&SchemaOptions::default())?;
/// let re = regex::Regex::new(&format!("^(?:{})$", out.regex)).unwrap();
/// assert!(re.is_match(r#"{"x":1,"y":-2}"#));
/// let p: Point = serde_json::from_str(r#"{"x":1,"y":-2}"#).unwrap();
/// assert_eq!(p.y, -2);
/// # Ok::<(), constrain::schema::SchemaError>(())
/// ```
pub fn compile_type<T: schemars::JsonSchema>(
    opts: &SchemaOptions,
) -> Result<CompiledSchema, SchemaError> {
    compile(&schema_for_type::<T>(), opts)
}
