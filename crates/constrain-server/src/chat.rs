//! # From a chat request to a prompt and a constraint
//!
//! **The prompt** is Qwen2.5's chat template, rendered through
//! [`constrain_model::prompt::chatml`]: the system turn (the request's first
//! `system`/`developer` message, or Qwen's default persona) carries the
//! tools, one JSON per line inside `<tools></tools>` with Qwen's
//! instructions, or, for a `json_schema` response format, the schema; a
//! replayed assistant turn renders its `tool_calls` as
//! `<tool_call>\n{"name": .., "arguments": ..}\n</tool_call>` (its content
//! may be `null`); consecutive `tool` messages become one `user` turn of
//! `<tool_response>` blocks, exactly as the template does.
//!
//! **The constraint** is one [`Source`] compiled through the server's shared
//! [`constrain::Compiler`] (so a repeated schema is a cache hit):
//!
//! | request | language of the output |
//! |---|---|
//! | `response_format` `text`, no tools | none (free text) |
//! | `json_schema` / `json_object` | the schema / any JSON object |
//! | `structured_outputs` `json` / `regex` / `grammar` / `choice` / `structural_tag` | that |
//! | `response_format` `structural_tag` | the tag (free text, reasoning, calls) |
//! | tools, no response format | one structural tag in the call format ([`constrain::tools::structural_tag_with`]) |
//! | tools and a response format | the format, or calls `C(\nC)*` (`F|C…`) |
//!
//! **Tools** compile to one structural tag in the server's `--tool-format`
//! (default Qwen's `qwen_3`): free text, then calls to the end of the
//! answer, one per line (`TagOptions::calls_last`): `auto` → text, then
//! maybe calls; `required` → calls only; a named tool → that one call;
//! `none` → text that never opens a call. One automaton, one generation
//! phase, and `max_tokens` never cuts a call (a call that cannot finish is
//! not opened). Qwen's `<tool_call>` is an added token and a symbol of the
//! language: the model may write the token or its text. Without
//! `--tool-format`, a bare `{"name": ..., "arguments": ...}` object opens a
//! call too (`TagOptions::bare_calls`: what Qwen's small models often write
//! instead, and what llama.cpp's Hermes parser also takes as a call).
//! Custom tools ([`crate::custom`]) keep a lazy trigger: free text until
//! `<tool_call>`, then the call under [`Plan::trigger`].
//!
//! where `C` is `<tool_call>\n` + the tools' call schema
//! ([`constrain::schema::tools_schema`]) + `\n</tool_call>`.
//!
//! With a response format *and* `auto`, the output is either that format or
//! calls (`F|C…`) in one automaton; they differ in their first byte (`<`
//! never starts JSON).

use crate::api::{content_text, ChatRequest};
use crate::error::ApiError;
use constrain::schema::{self, SchemaOptions};
use constrain::tools::ToolFormat;
use constrain::Source;
use constrain_model::prompt::{self, Message};
use serde_json::{json, Value};

/// The text that opens a tool call in Qwen's format.
pub const TOOL_CALL_OPEN: &str = "<tool_call>";
/// Longest `stop` string: the streaming hold-back compares every suffix of
/// the output with each stop string on every token.
pub const MAX_STOP_BYTES: usize = 256;
const TOOL_CALL_CLOSE: &str = "</tool_call>";

/// What a request asks the server to do, before any model runs.
#[derive(Debug)]
pub struct Plan {
    /// The rendered prompt (ChatML, assistant turn open).
    pub prompt: String,
    /// The constraint; `None` for free text.
    pub source: Option<Source>,
    /// Where in the request the constraint came from (`param` of a compile error).
    pub source_param: &'static str,
    /// Tool calls may appear in the output (parse them out).
    pub tools_active: bool,
    /// The constraint describes a document (schema, calls): output that the
    /// constraint accepts is complete, so `finish_reason` is `stop` even at
    /// exactly the budget. False for free text (cut by the budget = `length`).
    pub structured: bool,
    /// `stop` strings; applied to free text only (cutting a structured
    /// output would break it).
    pub stop: Vec<String>,
    /// Output text already written by the prompt (`<tool_call>\n` under
    /// `required` / a named tool): the answer is `prefix` + the generation.
    pub prefix: String,
    /// Under `auto`: the constraint of the calls once the model has written
    /// `<tool_call>` (what follows `<tool_call>\n`).
    pub trigger: Option<Source>,
    /// The format calls are written in, when the tools go through a
    /// structural tag (`--tool-format`); `None`: Qwen's, by the trigger path.
    pub tool_format: Option<ToolFormat>,
    /// Under `tool_format` Qwen's: a bare `{"name": ...}` object is a call
    /// too (the default, without `--tool-format`).
    pub bare_calls: bool,
    /// The request's tools (to type the calls read back).
    pub tools: Vec<Value>,
    /// The answer may begin with a `<think>` block (`--reasoning`).
    pub reasoning: bool,
}

/// Builds the prompt and the constraint of a request; `tool_format`: the
/// server's `--tool-format`; `reasoning`: its `--reasoning` (tools then go
/// through a structural tag, Qwen's format by default, and a response
/// format after an optional thinking block).
pub fn plan(
    req: &ChatRequest,
    tool_format: Option<ToolFormat>,
    reasoning: bool,
) -> Result<Plan, ApiError> {
    let budget = thinking_budget(req, reasoning)?;
    if let Some(p) = crate::custom::plan(req)? {
        if budget.is_some() {
            return Err(ApiError::field(
                "thinking_budget",
                "a thinking budget does not apply to custom tools",
            ));
        }
        return Ok(p);
    }
    // Tools go through a structural tag: the server's format, or Qwen's,
    // where a bare call object opens a call too (small Qwen models write
    // one instead of `<tool_call>`).
    let bare_calls = tool_format.is_none();
    let tool_format = Some(tool_format.unwrap_or(ToolFormat::Qwen3));
    let tools = req.tools.clone().unwrap_or_default();
    let (format, format_param, format_schema) = response_format(req)?;
    let choice = tool_choice(req, &tools)?;
    let parallel = req.parallel_tool_calls.unwrap_or(true);

    let prompt = render(req, &tools, format_schema.as_ref())?;
    let stop = match &req.stop {
        None => Vec::new(),
        Some(crate::api::Stop::One(s)) => vec![s.clone()],
        Some(crate::api::Stop::Many(v)) => v.clone(),
    };
    if stop.len() > 4
        || stop
            .iter()
            .any(|s| s.is_empty() || s.len() > MAX_STOP_BYTES)
    {
        return Err(ApiError::field(
            "stop",
            format!("stop takes at most 4 non-empty strings of at most {MAX_STOP_BYTES} bytes"),
        ));
    }

    let tools_regex = |only: Option<&str>| -> Result<String, ApiError> {
        let selected: Vec<Value> = tools
            .iter()
            .filter(|t| only.is_none_or(|n| tool_name(t) == Some(n)))
            .cloned()
            .collect();
        let s = schema::tools_schema(&Value::Array(selected))
            .and_then(|s| schema::compile(&s, &SchemaOptions::default()))
            .map_err(|e| ApiError::field("tools", format!("the tools do not compile: {e}")))?;
        Ok(s.regex)
    };
    let call = |r: &str| {
        format!(
            "{TOOL_CALL_OPEN}\\n(?:{r})\\n{}",
            regex_escape(TOOL_CALL_CLOSE)
        )
    };
    let calls = |r: &str, many: bool| {
        if many {
            format!("{}(?:\\n{})*", call(r), call(r))
        } else {
            call(r)
        }
    };
    // The calls after an opening `<tool_call>\n`.
    let rest = |r: &str, many: bool| {
        let first = format!("(?:{r})\\n{}", regex_escape(TOOL_CALL_CLOSE));
        if many {
            format!("{first}(?:\\n{})*", call(r))
        } else {
            first
        }
    };
    let format_regex = |f: &Source| -> Result<String, ApiError> {
        match f {
            Source::JsonSchema { schema, options } => schema::compile(schema, options)
                .map(|c| c.regex)
                .map_err(|e| {
                    ApiError::field(format_param, format!("the schema does not compile: {e}"))
                }),
            Source::Regex(r) => Ok(r.clone()),
            Source::Grammar(g) => Ok(g.pattern.clone()),
            Source::Lark { grammar, .. } if grammar.has_special_tokens() => Err(ApiError::field(
                format_param,
                "a grammar with special tokens (`<|...|>`, `<[id]>`) cannot sit beside tools",
            )),
            // The lowered tree printed as a regex, to sit beside the tools.
            Source::Gbnf { grammar, options }
            | Source::Lark {
                grammar: constrain::grammar::lark::Lark { gbnf: grammar, .. },
                options,
            } => constrain::grammar::gbnf::lower(grammar, options)
                .map(|h| h.to_string())
                .map_err(|e| {
                    ApiError::field(format_param, format!("the grammar does not compile: {e}"))
                }),
            Source::Tools { .. } => Err(ApiError::internal("tools as a response format")),
            Source::StructuralTag { .. } => Err(ApiError::field(
                format_param,
                "a structural tag describes the whole output: give it without tools",
            )),
        }
    };

    let mut p = Plan {
        prompt,
        source: None,
        source_param: format_param,
        tools_active: false,
        structured: false,
        stop,
        prefix: String::new(),
        trigger: None,
        tool_format: None,
        bare_calls: false,
        tools: Vec::new(),
        reasoning,
    };
    if reasoning {
        if let (Some(f), ToolChoice::NoTools | ToolChoice::None) = (&format, &choice) {
            // The response format after an optional thinking block.
            let body = match f {
                Source::JsonSchema { schema, .. } => {
                    json!({"type": "json_schema", "json_schema": schema})
                }
                Source::Regex(r) => json!({"type": "regex", "pattern": r}),
                _ => {
                    return Err(ApiError::field(
                        format_param,
                        "with --reasoning a response format is a JSON schema or a regex",
                    ))
                }
            };
            let tag = constrain::tags::StructuralTag::from_json(&json!({"type": "structural_tag",
                "format": {"type": "sequence", "elements": [think_block(budget), body]}}))
            .map_err(|e| {
                ApiError::field(
                    format_param,
                    format!("the constraint does not compile: {e}"),
                )
            })?;
            p.source = Some(Source::StructuralTag {
                tag,
                options: constrain::tags::StructuralTag::schema_options(),
            });
            p.structured = true;
            return Ok(p);
        }
        if let (Some(_), None, ToolChoice::NoTools) = (budget, &format, &choice) {
            // Free text after a thinking block held to the budget.
            let tag = constrain::tags::StructuralTag::from_json(&json!({"type": "structural_tag",
                "format": {"type": "sequence", "elements": [think_block(budget), {"type": "any_text"}]}}))
            .map_err(|e| ApiError::field("thinking_budget", e.to_string()))?;
            p.source = Some(Source::StructuralTag {
                tag,
                options: constrain::tags::StructuralTag::schema_options(),
            });
            return Ok(p);
        }
    }
    if let (Some(fmt), None, false) = (tool_format, &format, matches!(choice, ToolChoice::NoTools))
    {
        // One structural tag: text and calls in the format, one automaton.
        let tc = match &choice {
            ToolChoice::None => constrain::tools::ToolChoice::None,
            ToolChoice::Auto | ToolChoice::NoTools => constrain::tools::ToolChoice::Auto,
            ToolChoice::Required => constrain::tools::ToolChoice::Required,
            ToolChoice::Named(n) => constrain::tools::ToolChoice::Function(n.clone()),
        };
        let opts = constrain::tools::TagOptions::default()
            .parallel(parallel)
            .reasoning(if reasoning {
                constrain::tools::Reasoning::Auto
            } else {
                constrain::tools::Reasoning::Disabled
            })
            .thinking_budget(budget)
            .bare_calls(bare_calls)
            .calls_last(true);
        let tag =
            constrain::tools::structural_tag_with(fmt, &Value::Array(tools.clone()), &tc, &opts)
                .map_err(|e| ApiError::field("tools", format!("the tools do not compile: {e}")))?;
        p.source = Some(Source::StructuralTag {
            tag,
            options: constrain::tags::StructuralTag::schema_options(),
        });
        p.source_param = "tools";
        p.tools_active = true;
        // Free text may end anywhere (cut by the budget: `length`); calls
        // alone are a document.
        p.structured = matches!(choice, ToolChoice::Required | ToolChoice::Named(_));
        p.tool_format = Some(fmt);
        p.bare_calls = bare_calls && fmt == ToolFormat::Qwen3;
        p.tools = tools;
        return Ok(p);
    }
    match (&choice, format) {
        (ToolChoice::NoTools, f) => {
            p.structured = f.is_some();
            p.source = f;
        }
        (ToolChoice::None, f) => {
            p.structured = f.is_some();
            p.source = Some(f.unwrap_or_else(|| Source::regex(text_without(TOOL_CALL_OPEN))));
        }
        (ToolChoice::Required, _) => {
            p.tools_active = true;
            p.structured = true;
            p.source_param = "tools";
            p.source = Some(Source::regex(rest(&tools_regex(None)?, parallel)));
            p.prefix = format!("{TOOL_CALL_OPEN}\n");
        }
        (ToolChoice::Named(n), _) => {
            p.tools_active = true;
            p.structured = true;
            p.source_param = "tools";
            p.source = Some(Source::regex(rest(&tools_regex(Some(n))?, false)));
            p.prefix = format!("{TOOL_CALL_OPEN}\n");
        }
        (ToolChoice::Auto, f) => {
            p.tools_active = true;
            p.source_param = "tools";
            let r = tools_regex(None)?;
            // Here with a response format only: without one, the tools
            // went through the structural tag above.
            let f = f.ok_or_else(|| ApiError::internal("tools without a response format"))?;
            p.structured = true;
            p.source = Some(Source::regex(format!(
                "(?:{})|(?:{})",
                format_regex(&f)?,
                calls(&r, parallel)
            )));
        }
    }
    p.prompt.push_str(&p.prefix);
    Ok(p)
}

/// An optional `<think>…</think>\n\n` block: no constraint inside but
/// that it closes (XGrammar's reasoning prefix in `auto` mode), and at
/// most `budget` tokens long.
fn think_block(budget: Option<u32>) -> Value {
    let mut content = json!({"type": "any_text", "excludes": ["<think>", "</think>"]});
    if let Some(n) = budget {
        content["max_tokens"] = json!(n);
    }
    json!({"type": "optional", "content": {"type": "sequence", "elements": [
        {"type": "tag", "begin": "<think>", "content": content, "end": "</think>"},
        {"type": "const_string", "value": "\n\n"}]}})
}

/// The request's `thinking_budget`, which needs `--reasoning`.
fn thinking_budget(req: &ChatRequest, reasoning: bool) -> Result<Option<u32>, ApiError> {
    const MAX: i64 = 1_000_000;
    match req.thinking_budget {
        None => Ok(None),
        Some(_) if !reasoning => Err(ApiError::field(
            "thinking_budget",
            "a thinking budget needs a reasoning model (constrain serve --reasoning)",
        )),
        Some(n @ 0..=MAX) => Ok(Some(n as u32)),
        Some(_) => Err(ApiError::field(
            "thinking_budget",
            format!("thinking_budget is an integer from 0 to {MAX}"),
        )),
    }
}

/// Splits a leading `<think>…</think>` block off `text`: (the reasoning,
/// the rest). `None` when the text opens no such block; a block the budget
/// cut is all reasoning.
pub fn split_reasoning(text: &str) -> (Option<String>, &str) {
    let t = text.trim_start();
    let Some(inner) = t.strip_prefix("<think>") else {
        return (None, text);
    };
    match inner.find("</think>") {
        Some(end) => (
            Some(inner[..end].trim().to_string()),
            inner[end + "</think>".len()..].trim_start(),
        ),
        None => (Some(inner.trim().to_string()), ""),
    }
}

enum ToolChoice {
    NoTools,
    None,
    Auto,
    Required,
    Named(String),
}

fn tool_name(t: &Value) -> Option<&str> {
    t.get("function")
        .unwrap_or(t)
        .get("name")
        .and_then(Value::as_str)
}

fn tool_choice(req: &ChatRequest, tools: &[Value]) -> Result<ToolChoice, ApiError> {
    for (i, t) in tools.iter().enumerate() {
        if t.get("type").and_then(Value::as_str) != Some("function") {
            return Err(ApiError::field(
                &format!("tools[{i}].type"),
                "only tools of type \"function\" are supported",
            ));
        }
        if tool_name(t).is_none() {
            return Err(ApiError::field(
                &format!("tools[{i}].function.name"),
                "a tool needs a function name",
            ));
        }
    }
    let c = match &req.tool_choice {
        None | Some(Value::Null) => {
            return Ok(if tools.is_empty() { ToolChoice::NoTools } else { ToolChoice::Auto })
        }
        Some(Value::String(s)) => match s.as_str() {
            "none" => ToolChoice::None,
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            other => {
                return Err(ApiError::field(
                    "tool_choice",
                    format!("unknown tool_choice {other:?}; expected \"none\", \"auto\", \"required\" or {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}"),
                ))
            }
        },
        Some(v) => match v.pointer("/function/name").and_then(Value::as_str) {
            Some(n) if v.get("type").and_then(Value::as_str) == Some("function") => {
                if !tools.iter().any(|t| tool_name(t) == Some(n)) {
                    return Err(ApiError::field("tool_choice", format!("tool_choice names {n:?}, which is not among the tools")));
                }
                ToolChoice::Named(n.to_string())
            }
            _ => {
                return Err(ApiError::field(
                    "tool_choice",
                    "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}",
                ))
            }
        },
    };
    if tools.is_empty() && !matches!(c, ToolChoice::None) {
        return Err(ApiError::field(
            "tool_choice",
            "tool_choice needs a non-empty tools array",
        ));
    }
    Ok(if tools.is_empty() {
        ToolChoice::NoTools
    } else {
        c
    })
}

/// The response format as a source, the field it came from, and a schema
/// to show the model in the system prompt.
fn response_format(
    req: &ChatRequest,
) -> Result<(Option<Source>, &'static str, Option<Value>), ApiError> {
    if let (Some(_), Some(_)) = (&req.response_format, &req.structured_outputs) {
        return Err(ApiError::field(
            "structured_outputs",
            "give response_format or structured_outputs, not both",
        ));
    }
    if let Some(so) = &req.structured_outputs {
        let obj = so.as_object().filter(|o| o.len() == 1).ok_or_else(|| {
            ApiError::field(
                "structured_outputs",
                "structured_outputs takes exactly one of json, regex, grammar, choice, structural_tag",
            )
        })?;
        let (k, v) = obj
            .iter()
            .next()
            .ok_or_else(|| ApiError::internal("empty object"))?;
        let param = "structured_outputs";
        return Ok(match (k.as_str(), v) {
            ("json", Value::String(s)) => {
                let schema: Value = serde_json::from_str(s)
                    .map_err(|e| ApiError::field("structured_outputs.json", format!("not a JSON schema: {e}")))?;
                (Some(Source::json_schema(schema.clone())), param, Some(schema))
            }
            ("json", schema) => (Some(Source::json_schema(schema.clone())), param, Some(schema.clone())),
            ("regex", Value::String(r)) => (Some(Source::regex(r.clone())), param, None),
            // llguidance's grammar list (`{"grammars": [...]}`), as vLLM's
            // guidance backend takes it.
            ("grammar", Value::String(g)) if g.trim_start().starts_with('{') => {
                let source = Source::llguidance(g).map_err(|e| {
                    ApiError::field("structured_outputs.grammar", format!("the grammar list is refused: {e}"))
                })?;
                (Some(source), param, None)
            }
            // GBNF (llama.cpp's format; vLLM passes `grammar` to its
            // backends as EBNF) when a rule is defined with `::=`.
            ("grammar", Value::String(g)) if g.contains("::=") => {
                let source = Source::gbnf(g).map_err(|e| {
                    ApiError::field("structured_outputs.grammar", format!("the grammar does not parse: {e}"))
                })?;
                (Some(source), param, None)
            }
            // Lark (llguidance's dialect) when a line defines a rule with
            // `name:` or `NAME:`, as vLLM tells the two apart.
            ("grammar", Value::String(g)) if is_lark(g) => {
                let source = Source::lark(g).map_err(|e| {
                    ApiError::field("structured_outputs.grammar", format!("the grammar does not parse: {e}"))
                })?;
                (Some(source), param, None)
            }
            ("grammar", Value::String(g)) => {
                let g = constrain::grammar::Grammar::parse("request", g).ok_or_else(|| {
                    ApiError::field("structured_outputs.grammar", "the grammar holds no pattern (a comment header, then a regex)")
                })?;
                (Some(Source::Grammar(g)), param, None)
            }
            // vLLM's `structured_outputs.structural_tag`: the tag's JSON text
            // (or the object itself).
            ("structural_tag", tag) => {
                let value = match tag {
                    Value::String(t) => serde_json::from_str(t).map_err(|e| {
                        ApiError::field("structured_outputs.structural_tag", format!("not JSON: {e}"))
                    })?,
                    other => other.clone(),
                };
                (Some(structural_tag(&value, "structured_outputs.structural_tag")?), param, None)
            }
            ("choice", Value::Array(cs)) if !cs.is_empty() => {
                let alts: Option<Vec<String>> = cs.iter().map(|c| c.as_str().map(regex_escape)).collect();
                let alts = alts.ok_or_else(|| ApiError::field("structured_outputs.choice", "choice must be an array of strings"))?;
                (Some(Source::regex(format!("(?:{})", alts.join("|")))), param, None)
            }
            _ => {
                return Err(ApiError::field(
                    "structured_outputs",
                    format!("structured_outputs.{k}: expected json (schema), regex (string), grammar (string), choice (non-empty array of strings) or structural_tag"),
                ))
            }
        });
    }
    let Some(rf) = &req.response_format else {
        return Ok((None, "response_format", None));
    };
    let param = "response_format.json_schema.schema";
    match rf.get("type").and_then(Value::as_str) {
        Some("text") => Ok((None, "response_format", None)),
        Some("json_object") => {
            let s = json!({"type": "object"});
            Ok((Some(Source::json_schema(s)), "response_format", None))
        }
        Some("json_schema") => {
            let js = rf.get("json_schema").ok_or_else(|| {
                ApiError::field("response_format.json_schema", "response_format of type json_schema needs a json_schema object")
            })?;
            if js.get("name").is_some_and(|n| !n.is_string()) {
                return Err(ApiError::field("response_format.json_schema.name", "name must be a string"));
            }
            let schema = js.get("schema").cloned().unwrap_or_else(|| json!({}));
            if !(schema.is_object() || schema.is_boolean()) {
                return Err(ApiError::field(param, "the schema must be a JSON object"));
            }
            Ok((Some(Source::json_schema(schema.clone())), param, Some(schema)))
        }
        // XGrammar's structural tag, as vLLM and SGLang take it: the whole
        // object is the tag (`format`, or the legacy `structures` and
        // `triggers`).
        Some("structural_tag") => Ok((
            Some(structural_tag(rf, "response_format")?),
            "response_format",
            None,
        )),
        other => Err(ApiError::field(
            "response_format.type",
            format!("unknown response_format type {other:?}; expected \"text\", \"json_object\", \"json_schema\" or \"structural_tag\""),
        )),
    }
}

/// Whether a grammar text is Lark: no `::=`, and some line (comments
/// aside) that defines a rule, `name:` / `NAME:` (with Lark's `?`, `!`
/// marks or a `.priority`).
fn is_lark(g: &str) -> bool {
    !g.contains("::=")
        && g.lines().any(|l| {
            let l = l.trim_start().trim_start_matches(['?', '!']);
            let name: String = l
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '.')
                .collect();
            !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && l[name.len()..].trim_start().starts_with(':')
        })
}

/// A structural tag's source, or a 400 naming the field and the JSON
/// Pointer inside the tag.
fn structural_tag(tag: &Value, field: &'static str) -> Result<Source, ApiError> {
    Source::structural_tag(tag)
        .map_err(|e| ApiError::field(field, format!("the structural tag is refused: {e}")))
}

/// The conversation with Qwen2.5's chat template, no tools or schema in
/// the system turn.
pub fn render_plain(req: &ChatRequest) -> Result<String, ApiError> {
    render(req, &[], None)
}

/// Renders the conversation with Qwen2.5's chat template.
fn render(req: &ChatRequest, tools: &[Value], schema: Option<&Value>) -> Result<String, ApiError> {
    if req.messages.is_empty() {
        return Err(ApiError::field("messages", "messages must not be empty"));
    }
    let mut msgs = req.messages.iter().enumerate().peekable();
    let first_system = match msgs.peek() {
        Some((_, m)) if m.role == "system" || m.role == "developer" => {
            let (_, m) = msgs.next().ok_or_else(|| ApiError::internal("peeked"))?;
            Some(content_text(&m.content, "messages[0]")?.unwrap_or_default())
        }
        _ => None,
    };
    let mut system = first_system.unwrap_or_else(|| prompt::QWEN_DEFAULT_SYSTEM.to_string());
    if !tools.is_empty() {
        system.push_str("\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>");
        for t in tools {
            system.push('\n');
            system.push_str(&py_json(t));
        }
        system.push_str("\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>");
    } else if let Some(s) = schema {
        system.push_str("\nRespond only with a JSON value that conforms to this JSON Schema:\n");
        system.push_str(&s.to_string());
    }
    let mut out = vec![Message::system(system)];
    let mut tool_turn: Option<String> = None;
    for (i, m) in msgs {
        let at = format!("messages[{i}]");
        if m.role != "tool" {
            if let Some(t) = tool_turn.take() {
                out.push(Message::user(t));
            }
        }
        let text = content_text(&m.content, &at)?;
        match m.role.as_str() {
            "system" | "developer" | "user" => {
                let text = text.ok_or_else(|| {
                    ApiError::field(&format!("{at}.content"), "content is required")
                })?;
                let role = if m.role == "developer" {
                    "system"
                } else {
                    m.role.as_str()
                };
                out.push(Message {
                    role: role.into(),
                    content: text,
                });
            }
            "assistant" => {
                let mut c = text.unwrap_or_default();
                for (j, call) in m.tool_calls.iter().flatten().enumerate() {
                    if j > 0 || !c.is_empty() {
                        c.push('\n');
                    }
                    let args = match &call.function.arguments {
                        Value::String(s) => s.clone(),
                        v => v.to_string(),
                    };
                    c.push_str(&format!(
                        "{TOOL_CALL_OPEN}\n{{\"name\": {}, \"arguments\": {args}}}\n{TOOL_CALL_CLOSE}",
                        Value::String(call.function.name.clone())
                    ));
                }
                out.push(Message::assistant(c));
            }
            "tool" => {
                let block = format!(
                    "<tool_response>\n{}\n</tool_response>",
                    text.unwrap_or_default()
                );
                tool_turn = Some(match tool_turn.take() {
                    None => block,
                    Some(prev) => format!("{prev}\n{block}"),
                });
            }
            other => {
                return Err(ApiError::field(
                    &format!("{at}.role"),
                    format!(
                    "unknown role {other:?}; expected system, developer, user, assistant or tool"
                ),
                ))
            }
        }
    }
    if let Some(t) = tool_turn.take() {
        out.push(Message::user(t));
    }
    Ok(prompt::chatml(&out))
}

/// JSON as Python's `json.dumps` writes it (`", "` and `": "` separators,
/// non-ASCII as is): how the Hugging Face template's `tojson` shows tools
/// to Qwen.
pub fn py_json(v: &Value) -> String {
    struct Py;
    impl serde_json::ser::Formatter for Py {
        fn begin_array_value<W: ?Sized + std::io::Write>(
            &mut self,
            w: &mut W,
            first: bool,
        ) -> std::io::Result<()> {
            if first {
                Ok(())
            } else {
                w.write_all(b", ")
            }
        }
        fn begin_object_key<W: ?Sized + std::io::Write>(
            &mut self,
            w: &mut W,
            first: bool,
        ) -> std::io::Result<()> {
            if first {
                Ok(())
            } else {
                w.write_all(b", ")
            }
        }
        fn begin_object_value<W: ?Sized + std::io::Write>(
            &mut self,
            w: &mut W,
        ) -> std::io::Result<()> {
            w.write_all(b": ")
        }
    }
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, Py);
    match serde::Serialize::serialize(v, &mut ser) {
        Ok(()) => String::from_utf8(out).unwrap_or_else(|_| v.to_string()),
        Err(_) => v.to_string(),
    }
}

/// A regex for the strings that never contain `word`, for a word whose first
/// byte occurs nowhere else in it (true of `<tool_call>`): text without
/// that byte, then blocks that start with it and do not go on to spell the
/// rest of the word.
pub fn text_without(word: &str) -> String {
    let chars: Vec<char> = word.chars().collect();
    let first = chars[0];
    debug_assert!(!chars[1..].contains(&first));
    // Block content (no `first`) that does not start with chars[k..].
    fn rest(chars: &[char], first: char) -> String {
        let c = chars[0];
        let class = format!("[^{}{}]", class_escape(first), class_escape(c));
        let more = if chars.len() > 1 {
            format!(
                "|{}{}",
                regex_escape(&c.to_string()),
                rest(&chars[1..], first)
            )
        } else {
            String::new()
        };
        format!("(?:|{class}[^{}]*{more})", class_escape(first))
    }
    let f = class_escape(first);
    format!(
        "[^{f}]*(?:{}{})*",
        regex_escape(&first.to_string()),
        rest(&chars[1..], first)
    )
}

fn class_escape(c: char) -> String {
    if c.is_alphanumeric() || c == '_' || c == '<' || c == '>' {
        c.to_string()
    } else {
        format!("\\x{{{:x}}}", c as u32)
    }
}

/// Escapes every regex metacharacter of `s`.
pub fn regex_escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A tool call parsed out of the output.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedCall {
    /// The name of the called tool.
    pub name: String,
    /// The arguments, as the JSON text of an object.
    pub arguments: String,
}

/// Splits an output into its text and its tool calls (`<tool_call>\n{json}\n</tool_call>`
/// blocks after the first `<tool_call>`). The constraint makes the calls well
/// formed; anything that does not parse is returned as text.
pub fn split_tool_calls(text: &str) -> (String, Vec<ParsedCall>) {
    let Some(at) = text.find(TOOL_CALL_OPEN) else {
        return (text.to_string(), Vec::new());
    };
    let (content, mut rest) = text.split_at(at);
    let mut calls = Vec::new();
    while let Some(r) = rest.trim_start().strip_prefix(TOOL_CALL_OPEN) {
        // Read one JSON value and only then look for the closing tag: an
        // argument string may itself contain `</tool_call>`.
        let mut values = serde_json::Deserializer::from_str(r).into_iter::<Value>();
        let Some(Ok(v)) = values.next() else {
            break;
        };
        let Some(after) = r[values.byte_offset()..]
            .trim_start()
            .strip_prefix(TOOL_CALL_CLOSE)
        else {
            break;
        };
        let (Some(name), Some(args)) = (v.get("name").and_then(Value::as_str), v.get("arguments"))
        else {
            break;
        };
        calls.push(ParsedCall {
            name: name.to_string(),
            arguments: args.to_string(),
        });
        rest = after;
    }
    if calls.is_empty() {
        return (text.to_string(), Vec::new());
    }
    (content.trim_end().to_string(), calls)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_without_rejects_the_word_anywhere() {
        let re = regex::Regex::new(&format!("^(?:{})$", text_without("<tool_call>"))).unwrap();
        for ok in [
            "",
            "hello",
            "<",
            "<tool",
            "a <tool_call",
            "x<<tool_cal",
            "<tool_call",
            "<t<to<tool_callx>",
            "é<ü",
        ] {
            assert!(re.is_match(ok), "{ok:?} should match");
        }
        for bad in [
            "<tool_call>",
            "hi <tool_call>",
            "<<tool_call>x",
            "<tool_call>\n{}",
        ] {
            assert!(!re.is_match(bad), "{bad:?} should not match");
        }
    }

    #[test]
    fn tools_are_shown_as_python_json() {
        let v = serde_json::json!({"type": "function", "function": {"name": "f", "parameters": {"enum": [1, 2]}, "d": "é"}});
        assert_eq!(
            py_json(&v),
            r#"{"type": "function", "function": {"name": "f", "parameters": {"enum": [1, 2]}, "d": "é"}}"#
        );
    }

    #[test]
    fn split_finds_calls_after_text() {
        let t = "Sure.\n<tool_call>\n{\"name\":\"f\",\"arguments\":{\"a\":1}}\n</tool_call>\n<tool_call>\n{\"name\":\"g\",\"arguments\":{}}\n</tool_call>";
        let (c, calls) = split_tool_calls(t);
        assert_eq!(c, "Sure.");
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].name, "f");
        assert_eq!(calls[0].arguments, "{\"a\":1}");
        assert_eq!(calls[1].name, "g");
    }

    /// An argument string may hold the closing tag as text (the tools'
    /// schema allows it): the call still parses, and the calls after it too.
    #[test]
    fn split_reads_a_closing_tag_inside_an_argument() {
        let t = "<tool_call>\n{\"name\":\"echo\",\"arguments\":{\"s\":\"a</tool_call>b\"}}\n</tool_call>\n<tool_call>\n{\"name\":\"g\",\"arguments\":{}}\n</tool_call>";
        let (c, calls) = split_tool_calls(t);
        assert_eq!(c, "");
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].arguments, r#"{"s":"a</tool_call>b"}"#);
        assert_eq!(calls[1].name, "g");
        // A body that is not one JSON value followed by the tag is no call.
        let (c, calls) = split_tool_calls("<tool_call>\n{\"name\":\"f\"} x </tool_call>");
        assert!(calls.is_empty());
        assert!(c.starts_with("<tool_call>"));
    }
}
