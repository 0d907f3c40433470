//! # Tool calls in the model's own format, as structural tags
//!
//! An OpenAI `tools` array with a `tool_choice`, for a model that writes its
//! calls its own way, becomes one structural tag ([`structural_tag`]): free
//! text (and a `<think>` block for a reasoning model) until the model opens
//! a call with its marker, the call's arguments valid for that tool's
//! parameters, the closing marker, and more text or calls. The formats are
//! XGrammar's built-in ones (`get_model_structural_tag`), under its names:
//!
//! | [`ToolFormat`] | name | a call |
//! |---|---|---|
//! | `Qwen3` | `qwen_3` | `<tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>` (Qwen 2.5, Qwen 3, Hermes) |
//! | `Llama` | `llama` | `{"name": "NAME", "parameters": ARGS}` |
//! | `Mistral` | `mistral` | `[TOOL_CALLS][{"name": "NAME", "arguments": ARGS}]` |
//! | `Qwen3Coder` | `qwen_3_coder` | `<tool_call>\n<function=NAME>\n<parameter=K>\nV\n</parameter>\n…</function>\n</tool_call>` (Qwen3-Coder, Qwen 3.5) |
//!
//! Llama 3.x calls may also open with its `<|python_tag|>` token
//! (`<|python_tag|>{"name": ..., "parameters": ...}`), as its chat template
//! writes built-in tool calls and as llama.cpp's parser reads them: both
//! openings are triggers. Qwen3-Coder's parameters are XGrammar's
//! `qwen_xml` style: a string value raw, any other value as JSON.
//!
//! `tool_choice` maps as XGrammar maps it: `auto` → `triggered_tags` (text,
//! calls, text), `required` → `triggered_tags` with `at_least_one` (the
//! output begins with a call), a named function → that one call alone,
//! `none` → free text that never opens a call; `parallel_tool_calls: false`
//! → `stop_after_first`. With reasoning, the output starts with the
//! thinking, closed by `</think>` and two newlines (the prompt has opened
//! `<think>`), inside which no constraint applies but the closing marker;
//! a thinking budget ([`structural_tag_with_budget`]) bounds it in tokens,
//! after which only the tokens that close it are allowed.

use crate::tags::StructuralTag;
use serde_json::{json, Value};

/// A model family's tool-call format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolFormat {
    /// `<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>`: Qwen 2.5,
    /// Qwen 3 and Hermes-style models.
    Qwen3,
    /// Llama 3.x JSON calls: `{"name": ..., "parameters": ...}`.
    Llama,
    /// Mistral: `[TOOL_CALLS][{"name": ..., "arguments": ...}]`.
    Mistral,
    /// Qwen3-Coder / Qwen 3.5 XML: `<tool_call>\n<function=NAME>\n` then
    /// `<parameter=K>\nV\n</parameter>\n` per argument, then
    /// `</function>\n</tool_call>`.
    Qwen3Coder,
}

impl ToolFormat {
    /// Every format, for listings and errors.
    pub const ALL: [ToolFormat; 4] = [
        ToolFormat::Qwen3,
        ToolFormat::Llama,
        ToolFormat::Mistral,
        ToolFormat::Qwen3Coder,
    ];

    /// XGrammar's name for the format (`get_model_structural_tag`).
    pub fn name(self) -> &'static str {
        match self {
            ToolFormat::Qwen3 => "qwen_3",
            ToolFormat::Llama => "llama",
            ToolFormat::Mistral => "mistral",
            ToolFormat::Qwen3Coder => "qwen_3_coder",
        }
    }

    /// The format of a name (XGrammar's, or a model family: `qwen`,
    /// `qwen2.5`, `hermes`, `llama3`).
    pub fn from_name(name: &str) -> Option<ToolFormat> {
        Some(match name.to_ascii_lowercase().as_str() {
            "qwen_3" | "qwen3" | "qwen" | "qwen2" | "qwen2.5" | "qwen_2_5" | "hermes" => {
                ToolFormat::Qwen3
            }
            "llama" | "llama3" | "llama_3" | "llama3.1" | "llama3.2" => ToolFormat::Llama,
            "mistral" => ToolFormat::Mistral,
            "qwen_3_coder" | "qwen3_coder" | "qwen3-coder" | "qwen_3_5" | "qwen3.5" => {
                ToolFormat::Qwen3Coder
            }
            _ => return None,
        })
    }

    /// The format a chat template writes calls in, read from its text (a
    /// GGUF's `tokenizer.chat_template`), or `None` when it shows none.
    pub fn from_chat_template(template: &str) -> Option<ToolFormat> {
        if template.contains("<function=") && template.contains("<parameter=") {
            Some(ToolFormat::Qwen3Coder)
        } else if template.contains("<tool_call>") {
            Some(ToolFormat::Qwen3)
        } else if template.contains("[TOOL_CALLS]") {
            Some(ToolFormat::Mistral)
        } else if template.contains("<|python_tag|>") || template.contains("\"parameters\": ") {
            Some(ToolFormat::Llama)
        } else {
            None
        }
    }

    /// How a call opens and closes, once per opening the format has: (the
    /// trigger, the begin's text up to the name, between the name and the
    /// arguments, the end, the arguments' `json_schema` style).
    fn shapes(self) -> &'static [Shape] {
        const QWEN3: &[Shape] = &[Shape {
            trigger: "<tool_call>",
            open: "<tool_call>\n{\"name\": \"",
            mid: "\", \"arguments\": ",
            end: "}\n</tool_call>",
            style: "json",
        }];
        const LLAMA: &[Shape] = &[
            Shape {
                trigger: "{\"name\": ",
                open: "{\"name\": \"",
                mid: "\", \"parameters\": ",
                end: "}",
                style: "json",
            },
            Shape {
                trigger: "<|python_tag|>",
                open: "<|python_tag|>{\"name\": \"",
                mid: "\", \"parameters\": ",
                end: "}",
                style: "json",
            },
        ];
        const MISTRAL: &[Shape] = &[Shape {
            trigger: "[TOOL_CALLS]",
            open: "[TOOL_CALLS][{\"name\": \"",
            mid: "\", \"arguments\": ",
            end: "}]",
            style: "json",
        }];
        const QWEN3_CODER: &[Shape] = &[Shape {
            trigger: "<tool_call>\n<function=",
            open: "<tool_call>\n<function=",
            mid: ">\n",
            end: "\n</function>\n</tool_call>",
            style: "qwen_xml",
        }];
        match self {
            ToolFormat::Qwen3 => QWEN3,
            ToolFormat::Llama => LLAMA,
            ToolFormat::Mistral => MISTRAL,
            ToolFormat::Qwen3Coder => QWEN3_CODER,
        }
    }

    /// The texts that open a call (each a `triggered_tags` trigger).
    pub fn triggers(self) -> Vec<&'static str> {
        self.shapes().iter().map(|s| s.trigger).collect()
    }
}

/// One way a format opens and closes a call.
struct Shape {
    trigger: &'static str,
    open: &'static str,
    mid: &'static str,
    end: &'static str,
    style: &'static str,
}

/// OpenAI's `tool_choice`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides: text, calls, or both.
    Auto,
    /// At least one call (the output begins with one).
    Required,
    /// No call: free text that never opens one.
    None,
    /// Exactly this function.
    Function(String),
}

impl ToolChoice {
    /// OpenAI's JSON (`"auto"`, `"required"`, `"none"`, or `{"type":
    /// "function", "function": {"name": ...}}`), or `None` when it is
    /// neither.
    pub fn from_json(v: &Value) -> Option<ToolChoice> {
        match v {
            Value::String(s) => Self::from_name(s),
            Value::Object(o) => o
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .map(|n| ToolChoice::Function(n.to_string())),
            _ => None,
        }
    }

    /// `auto`, `required`, `none`, or a function's name.
    pub fn from_name(s: &str) -> Option<ToolChoice> {
        Some(match s {
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            "none" => ToolChoice::None,
            "" => return None,
            name => ToolChoice::Function(name.to_string()),
        })
    }
}

/// Whether the output begins with the model's thinking.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reasoning {
    /// No thinking block.
    Disabled,
    /// The prompt opened `<think>`: the output starts inside it and must
    /// close it.
    Enabled,
    /// A whole `<think>…</think>` block may come first, or none.
    Auto,
}

/// Why a tools array could not become a tag.
#[derive(Debug, thiserror::Error)]
pub enum ToolsError {
    /// The array, a tool or the choice is malformed.
    #[error("tools at {pointer}: {message}")]
    Invalid {
        /// JSON Pointer into the tools array (empty for the array itself or
        /// the choice).
        pointer: String,
        /// What is wrong there.
        message: String,
    },
}

fn invalid(pointer: impl Into<String>, message: impl Into<String>) -> ToolsError {
    ToolsError::Invalid {
        pointer: pointer.into(),
        message: message.into(),
    }
}

/// The reasoning markers every format here shares, kept out of free text.
const THINK: [&str; 2] = ["<think>", "</think>"];

/// The structural tag of `tools` under `choice` in `format`; `parallel`:
/// whether more than one call may be made.
pub fn structural_tag(
    format: ToolFormat,
    tools: &Value,
    choice: &ToolChoice,
    parallel: bool,
    reasoning: Reasoning,
) -> Result<StructuralTag, ToolsError> {
    structural_tag_with_budget(format, tools, choice, parallel, reasoning, None)
}

/// [`structural_tag`] with a thinking budget: at most `thinking_budget`
/// tokens inside the `<think>` block (`any_text.max_tokens`), after which
/// only the tokens that close it are allowed. No effect without reasoning.
pub fn structural_tag_with_budget(
    format: ToolFormat,
    tools: &Value,
    choice: &ToolChoice,
    parallel: bool,
    reasoning: Reasoning,
    thinking_budget: Option<u32>,
) -> Result<StructuralTag, ToolsError> {
    let opts = TagOptions {
        parallel,
        reasoning,
        thinking_budget,
        ..TagOptions::default()
    };
    structural_tag_with(format, tools, choice, &opts)
}

/// How [`structural_tag_with`] builds a tag beyond the format, the tools
/// and the choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TagOptions {
    /// Whether more than one call may be made.
    pub parallel: bool,
    /// Whether the output begins with thinking.
    pub reasoning: Reasoning,
    /// At most this many tokens of thinking.
    pub thinking_budget: Option<u32>,
    /// `qwen_3` only: a bare `{"name": ..., "arguments": ...}` object (as
    /// small Qwen models write a call) opens a call too, wherever it starts.
    pub bare_calls: bool,
    /// Under `auto` and `required`: once a call opens, the answer is calls
    /// to its end, one per line (as OpenAI's API answers: the text, then
    /// the calls); otherwise text may follow them (XGrammar's
    /// `triggered_tags`).
    pub calls_last: bool,
}

crate::config_setters!(TagOptions {
    parallel: bool,
    reasoning: Reasoning,
    thinking_budget: Option<u32>,
    bare_calls: bool,
    calls_last: bool,
});

impl Default for TagOptions {
    fn default() -> Self {
        TagOptions {
            parallel: true,
            reasoning: Reasoning::Disabled,
            thinking_budget: None,
            bare_calls: false,
            calls_last: false,
        }
    }
}

/// A bare Qwen call object ([`TagOptions::bare_calls`]).
const BARE_QWEN: Shape = Shape {
    trigger: "{\"name\": ",
    open: "{\"name\": \"",
    mid: "\", \"arguments\": ",
    end: "}",
    style: "json",
};

/// The structural tag of `tools` under `choice` in `format`, as `opts`
/// says.
pub fn structural_tag_with(
    format: ToolFormat,
    tools: &Value,
    choice: &ToolChoice,
    opts: &TagOptions,
) -> Result<StructuralTag, ToolsError> {
    let TagOptions {
        parallel,
        reasoning,
        thinking_budget,
        bare_calls,
        calls_last,
    } = *opts;
    let list = tools
        .as_array()
        .ok_or_else(|| invalid("", "the tools must be an array"))?;
    let mut named = Vec::with_capacity(list.len());
    for (i, t) in list.iter().enumerate() {
        let f = t.get("function").unwrap_or(t);
        let name = f
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| invalid(format!("/{i}/function/name"), "a tool needs a name"))?;
        let params = f
            .get("parameters")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
        named.push((name.to_string(), params));
    }
    let mut shapes: Vec<&Shape> = format.shapes().iter().collect();
    if bare_calls && format == ToolFormat::Qwen3 {
        shapes.push(&BARE_QWEN);
    }
    let triggers: Vec<&str> = shapes.iter().map(|s| s.trigger).collect();
    let tag = |shape: &Shape, name: &str, params: &Value| {
        json!({"type": "tag", "begin": format!("{}{name}{}", shape.open, shape.mid),
               "content": {"type": "json_schema", "json_schema": params, "style": shape.style},
               "end": shape.end})
    };
    // Every tool under every opening of the format.
    let all_tags = || -> Vec<Value> {
        shapes
            .iter()
            .flat_map(|&sh| named.iter().map(move |(n, p)| tag(sh, n, p)))
            .collect()
    };
    let free = json!({"type": "any_text", "excludes": THINK});
    let calls = match choice {
        // Free text that never opens a call.
        ToolChoice::None => {
            let mut ex: Vec<&str> = THINK.to_vec();
            ex.extend(triggers.iter().copied());
            json!({"type": "any_text", "excludes": ex})
        }
        ToolChoice::Function(want) => {
            let (name, params) = named.iter().find(|(n, _)| n == want).ok_or_else(|| {
                invalid(
                    "",
                    format!("tool_choice names {want:?}, which is not among the tools"),
                )
            })?;
            tag(shapes[0], name, params)
        }
        ToolChoice::Auto | ToolChoice::Required if named.is_empty() => {
            if *choice == ToolChoice::Required {
                return Err(invalid(
                    "",
                    "tool_choice \"required\" needs at least one tool",
                ));
            }
            free
        }
        ToolChoice::Auto | ToolChoice::Required if calls_last => {
            let first = json!({
                "type": "triggered_tags",
                "triggers": triggers,
                "tags": all_tags(),
                "excludes": THINK,
                "at_least_one": *choice == ToolChoice::Required,
                "stop_after_first": true,
            });
            if parallel {
                json!({"type": "sequence", "elements": [first, {"type": "star", "content":
                    {"type": "sequence", "elements": [{"type": "const_string", "value": "\n"},
                        {"type": "or", "elements": all_tags()}]}}]})
            } else {
                first
            }
        }
        ToolChoice::Auto | ToolChoice::Required => json!({
            "type": "triggered_tags",
            "triggers": triggers,
            "tags": all_tags(),
            "excludes": THINK,
            "at_least_one": *choice == ToolChoice::Required,
            "stop_after_first": !parallel,
        }),
    };
    let think = |begin: &str| {
        let mut content = json!({"type": "any_text", "excludes": THINK});
        if let Some(n) = thinking_budget {
            content["max_tokens"] = json!(n);
        }
        json!({"type": "sequence", "elements": [
            {"type": "tag", "begin": begin, "content": content, "end": "</think>"},
            {"type": "const_string", "value": "\n\n"}]})
    };
    let whole = match reasoning {
        Reasoning::Disabled => calls,
        Reasoning::Enabled => json!({"type": "sequence", "elements": [think(""), calls]}),
        Reasoning::Auto => json!({"type": "sequence", "elements": [
            {"type": "optional", "content": think("<think>")}, calls]}),
    };
    StructuralTag::from_json(&json!({"type": "structural_tag", "format": whole}))
        .map_err(|e| invalid("", e.to_string()))
}
