//! # Structural tags: free text, reasoning and tool calls in one language
//!
//! Function calling as models emit it is not one JSON document: free text
//! or a `<think>` block, then a call opened by the model's own marker, its
//! arguments, a closing marker, and maybe more text. XGrammar's
//! *structural tags* describe exactly that, as a tree of formats
//! ([`Format`]): primitives (`const_string`, `json_schema`, `grammar`,
//! `regex`, `any_text`), compositions (`sequence`, `or`, `optional`,
//! `plus`, `star`, `repeat`), and tagging (`tag`, `triggered_tags`,
//! `tags_with_separator`, `dispatch`). This module reads XGrammar's JSON
//! ([`StructuralTag::from_json`], every refusal naming a JSON Pointer) and
//! lowers the tree onto constrain's own automata (`lower`): one regex
//! text in the schema compiler's syntax, or — when an embedded JSON Schema
//! is recursive — fragments for the pushdown engine, so the compiled tag
//! has every guarantee of any other source (no dead end, EOS only where
//! the output is complete, `max_tokens` never cutting a call in half).
//!
//! ## Semantics (XGrammar 0.2.8's, checked against it)
//!
//! * **Free text** (`any_text`) holds none of its `excludes` and none of
//!   the end strings of the nearest enclosing `tag` (XGrammar's automatic
//!   end detection), anywhere inside it. `max_chars` bounds it in
//!   characters.
//! * **Triggers dispatch on the first one completed**: `triggered_tags`
//!   reads free text until a trigger completes, and the tag whose `begin`
//!   starts with that trigger must follow; then free text again. With
//!   `at_least_one` the output *begins* with a tag; with
//!   `stop_after_first` at most one tag and nothing after it. `dispatch` is
//!   the same with a pattern consumed and then its format.
//! * **JSON** inside a tag is compiled by constrain's JSON Schema compiler
//!   with the options of the [`crate::Source::StructuralTag`] (by default
//!   strict, with flexible whitespace bounded per slot, as XGrammar's
//!   `any_whitespace`).
//!
//! ## What is refused, by name
//!
//! `exclude_token`, ordinary (not special) tokens in the token-level
//! formats, `any_text.max_tokens` anywhere but the tag that opens the
//! output (see [`crate::region`]), `minimax_m3_xml`, and recursive
//! `grammar`s: each is a [`TagError::Unsupported`] naming the construct and
//! its pointer, never silently dropped. The token-level formats (`token`,
//! `any_tokens`, `token_triggered_tags`, `token_dispatch`, token begins
//! and ends) match special tokens by id: each is a symbol of the language
//! (see [`crate::vocab::Vocabulary::symbols`]).

mod cohere;
mod lower;
mod parse;
mod text;
mod xml;

pub(crate) use lower::{lower, VocabTokens};

use crate::schema::{Pointer, SchemaError, SchemaOptions};

/// Whitespace bytes allowed per slot in a tag's JSON by default
/// ([`StructuralTag::schema_options`]).
pub const TAG_WHITESPACE: usize = 8;
use serde_json::Value;

/// A parsed structural tag: its format tree and its canonical JSON text
/// (the cache key).
#[derive(Clone, Debug)]
pub struct StructuralTag {
    format: Format,
    text: String,
}

impl StructuralTag {
    /// Reads XGrammar's structural-tag JSON: `{"type": "structural_tag",
    /// "format": F}`, the legacy `{"type": "structural_tag", "structures":
    /// [{"begin", "schema", "end"}], "triggers": [...]}`, or a bare format.
    pub fn from_json(value: &Value) -> Result<StructuralTag, TagError> {
        Ok(StructuralTag {
            format: parse::parse(value)?,
            text: value.to_string(),
        })
    }

    /// [`StructuralTag::from_json`] of JSON text.
    pub fn parse(text: &str) -> Result<StructuralTag, TagError> {
        let value: Value = serde_json::from_str(text).map_err(|e| TagError::Json {
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })?;
        Self::from_json(&value)
    }

    /// The schema options a tag's embedded JSON Schemas are compiled with
    /// by default: strict (no extra keys, as XGrammar's `strict_mode`),
    /// with up to [`TAG_WHITESPACE`] whitespace bytes wherever JSON allows
    /// whitespace (XGrammar allows any amount; constrain never an
    /// unbounded run).
    pub fn schema_options() -> SchemaOptions {
        SchemaOptions {
            whitespace: crate::schema::Whitespace::Flexible {
                max: TAG_WHITESPACE,
            },
            ..SchemaOptions::default()
        }
    }

    /// The text the tag lowers to, for reading (`--print-regex`): one regex,
    /// or one `NAME ::= REGEX` line per fragment when an embedded schema is
    /// recursive (calls are raw marker bytes there). Special tokens are
    /// matched by their text only here.
    pub fn lowered_text(&self, options: &SchemaOptions) -> Result<String, TagError> {
        let low = lower(&self.format, options, true, &Default::default())?;
        if low.bodies.len() == 1 {
            return Ok(low.bodies[0].clone().unwrap_or_default());
        }
        Ok(low
            .names
            .iter()
            .zip(&low.bodies)
            .map(|(n, b)| format!("{n} ::= {}", b.as_deref().unwrap_or("(no text)")))
            .collect::<Vec<_>>()
            .join("\n"))
    }

    /// The format tree.
    pub fn format(&self) -> &Format {
        &self.format
    }

    /// The JSON it was read from, compact.
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// A tag's begin: text, or one token (`{"type": "token", ...}`).
#[derive(Clone, Debug)]
pub enum TokenRef {
    /// Spelled text.
    Text(String),
    /// One token.
    Token(TokenName),
}

/// A token as a format names it: by id or by its text. Only special
/// tokens (symbols of the language) can be matched as tokens; stop tokens
/// may be excluded (they never stand inside the output anyway).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenName {
    /// A token id.
    Id(u32),
    /// A token's text (`"<|tool_call|>"`).
    Text(String),
}

impl std::fmt::Display for TokenName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenName::Id(i) => write!(f, "token {i}"),
            TokenName::Text(t) => write!(f, "token {t:?}"),
        }
    }
}

/// `begin content end`, `end` any of `ends`.
#[derive(Clone, Debug)]
pub struct Tag {
    /// Where the tag is in the JSON.
    pub at: Pointer,
    /// The text that opens it.
    pub begin: TokenRef,
    /// What is inside.
    pub content: Box<Format>,
    /// The texts that may close it (at least one, unless `end_token`).
    pub ends: Vec<String>,
    /// The token that closes it, when `end` is a token.
    pub end_token: Option<(Pointer, TokenName)>,
}

/// One node of a structural tag, with its JSON Pointer.
#[derive(Clone, Debug)]
pub enum Format {
    /// `const_string`: exactly `value`.
    Const {
        /// Where the format is in the JSON.
        at: Pointer,
        /// The text.
        value: String,
    },
    /// `json_schema` (and the deprecated `qwen_xml_parameter`).
    JsonSchema {
        /// Where the format is in the JSON.
        at: Pointer,
        /// The schema document.
        schema: Value,
        /// How the value is written: `json`, or an XML parameter style
        /// (`qwen_xml`, `glm_xml`, ...).
        style: String,
        /// Whether an object's properties may come in any order.
        any_order: bool,
    },
    /// `grammar`: GBNF / XGrammar EBNF text.
    Grammar {
        /// Where the format is in the JSON.
        at: Pointer,
        /// The grammar text.
        text: String,
    },
    /// `regex`: a regex, full match.
    Regex {
        /// Where the format is in the JSON.
        at: Pointer,
        /// The pattern, in the `regex` crate's syntax.
        pattern: String,
    },
    /// `any_text`.
    AnyText {
        /// Where the format is in the JSON.
        at: Pointer,
        /// Strings the text never holds (each non-empty).
        excludes: Vec<String>,
        /// The most characters (`None`: unbounded).
        max_chars: Option<u32>,
        /// The most tokens (`None`: unbounded; only in the tag that opens
        /// the output).
        max_tokens: Option<u32>,
    },
    /// `sequence`.
    Sequence {
        /// Where the format is in the JSON.
        at: Pointer,
        /// The formats, one after another.
        elements: Vec<Format>,
    },
    /// `or`.
    Or {
        /// Where the format is in the JSON.
        at: Pointer,
        /// The alternatives.
        elements: Vec<Format>,
    },
    /// `optional` (0..1), `plus` (1..), `star` (0..), `repeat` (min..=max).
    Repeat {
        /// Where the format is in the JSON.
        at: Pointer,
        /// The repeated format.
        content: Box<Format>,
        /// The fewest repetitions.
        min: u32,
        /// The most repetitions (`None`: unbounded).
        max: Option<u32>,
    },
    /// `tag`.
    Tag(Tag),
    /// `triggered_tags`.
    TriggeredTags {
        /// Where the format is in the JSON.
        at: Pointer,
        /// The texts that open a tag once completed (at least one).
        triggers: Vec<String>,
        /// The tags a trigger may open.
        tags: Vec<Tag>,
        /// Whether the output must begin with a tag.
        at_least_one: bool,
        /// Whether at most one tag is allowed, with nothing after it.
        stop_after_first: bool,
        /// Strings that free text never holds.
        excludes: Vec<String>,
    },
    /// `tags_with_separator`.
    TagsWithSeparator {
        /// Where the format is in the JSON.
        at: Pointer,
        /// The tags that may follow one another.
        tags: Vec<Tag>,
        /// The text between two tags.
        separator: String,
        /// Whether at least one tag is required.
        at_least_one: bool,
        /// Whether at most one tag is allowed.
        stop_after_first: bool,
    },
    /// `dispatch`: `(pattern, format)` rules over free text.
    Dispatch {
        /// Where the format is in the JSON.
        at: Pointer,
        /// Each pattern that, once completed in free text, must be
        /// followed by its format.
        rules: Vec<(String, Format)>,
        /// `loop` (default true): whether free text and dispatches go on
        /// after the first; otherwise at most one, with nothing after it.
        looped: bool,
        /// Strings that free text never holds.
        excludes: Vec<String>,
    },
    /// `token`: one special token.
    Token {
        /// Where the format is in the JSON.
        at: Pointer,
        /// The token.
        token: TokenName,
    },
    /// `exclude_token`: any one token but some (refused when lowered: one
    /// token of text is no language over bytes).
    ExcludeToken {
        /// Where the format is in the JSON.
        at: Pointer,
    },
    /// `any_tokens`: text and special tokens, but the excluded ones.
    AnyTokens {
        /// Where the format is in the JSON.
        at: Pointer,
        /// The special tokens never allowed, each with where it is named.
        exclude: Vec<(Pointer, TokenName)>,
        /// The most tokens (`None`: unbounded; any bound is refused when
        /// lowered, in favour of `any_text.max_tokens`).
        max_tokens: Option<u32>,
    },
    /// `token_triggered_tags`: free tokens until a trigger token, which
    /// opens the tag that begins with it.
    TokenTriggeredTags {
        /// Where the format is in the JSON.
        at: Pointer,
        /// The tokens that open a tag (at least one), each with where it is
        /// named.
        triggers: Vec<(Pointer, TokenName)>,
        /// The tags a trigger may open.
        tags: Vec<Tag>,
        /// The special tokens never allowed among the free tokens.
        exclude: Vec<(Pointer, TokenName)>,
        /// Whether the output must begin with a tag.
        at_least_one: bool,
        /// Whether at most one tag is allowed, with nothing after it.
        stop_after_first: bool,
    },
    /// `token_dispatch`: `(token, format)` rules over free tokens.
    TokenDispatch {
        /// Where the format is in the JSON.
        at: Pointer,
        /// Each token (with where it is named) that must be followed by
        /// its format.
        rules: Vec<((Pointer, TokenName), Format)>,
        /// `loop` (default true): whether free tokens and dispatches go on
        /// after the first; otherwise at most one, with nothing after it.
        looped: bool,
        /// The special tokens never allowed among the free tokens.
        exclude: Vec<(Pointer, TokenName)>,
    },
}

/// Why a structural tag was refused. Each variant names where, as a JSON
/// Pointer into the tag.
#[derive(Debug, thiserror::Error)]
pub enum TagError {
    /// The text is not JSON.
    #[error("structural tag: bad JSON at line {line}, column {column}: {message}")]
    Json {
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error, in bytes.
        column: usize,
        /// The JSON parser's message.
        message: String,
    },
    /// A field is missing, has the wrong type, or the shape is malformed.
    #[error("structural tag at {pointer}: {message}")]
    Invalid {
        /// JSON Pointer into the tag.
        pointer: Pointer,
        /// What is wrong there.
        message: String,
    },
    /// A construct XGrammar defines that constrain does not compile yet.
    #[error("structural tag at {pointer}: {construct} is not supported: {reason}")]
    Unsupported {
        /// JSON Pointer into the tag.
        pointer: Pointer,
        /// The construct refused (`exclude_token`, `a recursive grammar`).
        construct: String,
        /// Why it is refused.
        reason: String,
    },
    /// An embedded JSON Schema was refused.
    #[error("structural tag at {pointer}: {source}")]
    Schema {
        /// JSON Pointer to the schema in the tag.
        pointer: Pointer,
        /// The schema compiler's error (its pointer is into the schema).
        #[source]
        source: SchemaError,
    },
    /// A `regex` format's pattern does not parse.
    #[error("structural tag at {pointer}: bad regex: {message}")]
    Regex {
        /// JSON Pointer into the tag.
        pointer: Pointer,
        /// The regex parser's message.
        message: String,
    },
    /// A `grammar` format was refused.
    #[error("structural tag at {pointer}: {source}")]
    Grammar {
        /// JSON Pointer into the tag.
        pointer: Pointer,
        /// The GBNF error, with its line and column in the grammar text.
        #[source]
        source: crate::grammar::gbnf::GbnfError,
    },
    /// A free-text automaton passed a limit.
    #[error("structural tag at {pointer}: {what} passes its limit (raise {limit})")]
    TooBig {
        /// JSON Pointer into the tag.
        pointer: Pointer,
        /// What passed its limit, with the underlying error.
        what: String,
        /// The limit to raise (`SchemaOptions::max_product_states`, ...).
        limit: &'static str,
    },
    /// The tag admits no text at all.
    #[error("structural tag at {pointer}: the format admits no text")]
    Empty {
        /// JSON Pointer into the tag.
        pointer: Pointer,
    },
}

impl TagError {
    /// The JSON Pointer the error names (none for bad JSON text).
    pub fn pointer(&self) -> Option<&Pointer> {
        match self {
            TagError::Json { .. } => None,
            TagError::Invalid { pointer, .. }
            | TagError::Unsupported { pointer, .. }
            | TagError::Schema { pointer, .. }
            | TagError::Regex { pointer, .. }
            | TagError::Grammar { pointer, .. }
            | TagError::TooBig { pointer, .. }
            | TagError::Empty { pointer } => Some(pointer),
        }
    }
}
