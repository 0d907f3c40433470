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
    Const { at: Pointer, value: String },
    /// `json_schema` (and the deprecated `qwen_xml_parameter`).
    JsonSchema {
        at: Pointer,
        schema: Value,
        style: String,
        any_order: bool,
    },
    /// `grammar`: GBNF / XGrammar EBNF text.
    Grammar { at: Pointer, text: String },
    /// `regex`: a regex, full match.
    Regex { at: Pointer, pattern: String },
    /// `any_text`.
    AnyText {
        at: Pointer,
        excludes: Vec<String>,
        max_chars: Option<u32>,
        max_tokens: Option<u32>,
    },
    /// `sequence`.
    Sequence { at: Pointer, elements: Vec<Format> },
    /// `or`.
    Or { at: Pointer, elements: Vec<Format> },
    /// `optional` (0..1), `plus` (1..), `star` (0..), `repeat` (min..=max).
    Repeat {
        at: Pointer,
        content: Box<Format>,
        min: u32,
        max: Option<u32>,
    },
    /// `tag`.
    Tag(Tag),
    /// `triggered_tags`.
    TriggeredTags {
        at: Pointer,
        triggers: Vec<String>,
        tags: Vec<Tag>,
        at_least_one: bool,
        stop_after_first: bool,
        excludes: Vec<String>,
    },
    /// `tags_with_separator`.
    TagsWithSeparator {
        at: Pointer,
        tags: Vec<Tag>,
        separator: String,
        at_least_one: bool,
        stop_after_first: bool,
    },
    /// `dispatch`: `(pattern, format)` rules over free text.
    Dispatch {
        at: Pointer,
        rules: Vec<(String, Format)>,
        looped: bool,
        excludes: Vec<String>,
    },
    /// `token`: one special token.
    Token { at: Pointer, token: TokenName },
    /// `exclude_token`: any one token but some (refused when lowered: one
    /// token of text is no language over bytes).
    ExcludeToken { at: Pointer },
    /// `any_tokens`: text and special tokens, but the excluded ones.
    AnyTokens {
        at: Pointer,
        exclude: Vec<(Pointer, TokenName)>,
        max_tokens: Option<u32>,
    },
    /// `token_triggered_tags`: free tokens until a trigger token, which
    /// opens the tag that begins with it.
    TokenTriggeredTags {
        at: Pointer,
        triggers: Vec<(Pointer, TokenName)>,
        tags: Vec<Tag>,
        exclude: Vec<(Pointer, TokenName)>,
        at_least_one: bool,
        stop_after_first: bool,
    },
    /// `token_dispatch`: `(token, format)` rules over free tokens.
    TokenDispatch {
        at: Pointer,
        rules: Vec<((Pointer, TokenName), Format)>,
        looped: bool,
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
        line: usize,
        column: usize,
        message: String,
    },
    /// A field is missing, has the wrong type, or the shape is malformed.
    #[error("structural tag at {pointer}: {message}")]
    Invalid { pointer: Pointer, message: String },
    /// A construct XGrammar defines that constrain does not compile yet.
    #[error("structural tag at {pointer}: {construct} is not supported: {reason}")]
    Unsupported {
        pointer: Pointer,
        construct: String,
        reason: String,
    },
    /// An embedded JSON Schema was refused.
    #[error("structural tag at {pointer}: {source}")]
    Schema {
        pointer: Pointer,
        #[source]
        source: SchemaError,
    },
    /// A `regex` format's pattern does not parse.
    #[error("structural tag at {pointer}: bad regex: {message}")]
    Regex { pointer: Pointer, message: String },
    /// A `grammar` format was refused.
    #[error("structural tag at {pointer}: {source}")]
    Grammar {
        pointer: Pointer,
        #[source]
        source: crate::grammar::gbnf::GbnfError,
    },
    /// A free-text automaton passed a limit.
    #[error("structural tag at {pointer}: {what} passes its limit (raise {limit})")]
    TooBig {
        pointer: Pointer,
        what: String,
        limit: &'static str,
    },
    /// The tag admits no text at all.
    #[error("structural tag at {pointer}: the format admits no text")]
    Empty { pointer: Pointer },
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
