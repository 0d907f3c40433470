//! # OpenAI custom tools: a tool whose input is text in a grammar
//!
//! A custom tool (`{"type": "custom", "custom": {"name", "description",
//! "format"}}`) takes free-form text instead of JSON arguments. Its
//! `format` is `{"type": "text"}` (any text) or `{"type": "grammar",
//! "grammar": {"syntax": "lark" | "regex", "definition": ...}}`: a Lark
//! grammar in llguidance's dialect ([`constrain::grammar::lark`]) or a
//! regex in the `regex` crate's syntax (what OpenAI documents). The call
//! comes back as OpenAI returns it: `tool_calls: [{"id", "type": "custom",
//! "custom": {"name", "input"}}]`.
//!
//! ## How a call is written
//!
//! The system turn lists the tools and tells the model to call one as
//!
//! ```text
//! <tool_call>
//! NAME
//! INPUT
//! ```
//!
//! and after `<tool_call>\n` the output is constrained to the union, over
//! the callable tools, of `NAME\n` followed by the tool's grammar: one
//! GBNF grammar whose rules are each tool's rules under a prefix
//! ([`calls_source`]). The input runs to the end of the output, so it needs
//! no closing tag and is read back exactly: the name is the first line
//! after `<tool_call>\n`, the input everything after it ([`split_call`]).
//!
//! | `tool_choice` | output |
//! |---|---|
//! | `{"type": "custom", "custom": {"name": N}}` | one call of `N` (`<tool_call>\n` ends the prompt) |
//! | `"required"` | one call of any tool (likewise) |
//! | `"auto"` (the default) | free text; once the model writes `<tool_call>` (or opens its answer with a bare `{"name"`, which the runner also reads as the start of a call), one call |
//! | `"none"` | text that never contains `<tool_call>` |
//!
//! One call per answer (`parallel_tool_calls` has no effect here). Custom
//! and function tools in one request, a response format beside custom
//! tools, OpenAI's `allowed_tools` choice and replayed custom calls in
//! `messages` are refused by name (400). The server's `--tool-format` and
//! `--reasoning` do not apply to custom tools.

use crate::api::ChatRequest;
use crate::chat::{text_without, ParsedCall, Plan, TOOL_CALL_OPEN};
use crate::error::ApiError;
use constrain::grammar::gbnf::{Expr, Gbnf, GbnfOptions, Rule};
use constrain::grammar::lark::Lark;
use constrain::Source;
use serde_json::{json, Value};

/// Longest custom tool name (OpenAI's limit for tool names).
pub const MAX_NAME: usize = 64;

/// A custom tool's input format.
#[derive(Debug, Clone, PartialEq)]
pub enum Format {
    /// `{"type": "text"}`: any text.
    Text,
    /// `{"type": "grammar", "grammar": {"syntax": "lark", "definition"}}`.
    Lark(String),
    /// `{"type": "grammar", "grammar": {"syntax": "regex", "definition"}}`.
    Regex(String),
}

/// One custom tool of a request.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomTool {
    /// The tool's name (`custom.name`), unique among the request's tools.
    pub name: String,
    /// What the tool does (`custom.description`); `None` when absent.
    pub description: Option<String>,
    /// The language of the tool's input (`custom.format`).
    pub format: Format,
}

/// Whether a tool of the request is a custom tool.
pub fn is_custom(tool: &Value) -> bool {
    tool.get("type").and_then(Value::as_str) == Some("custom")
}

/// Whether a job's tools are custom tools (its calls are read back by
/// [`split_call`] and returned as `type: "custom"`).
pub fn active(tools: &[Value]) -> bool {
    tools.first().is_some_and(is_custom)
}

/// Reads the request's custom tools; `None` when it has none. Function
/// tools beside them, and malformed entries, are a 400 naming the field.
pub fn tools(req: &ChatRequest) -> Result<Option<Vec<CustomTool>>, ApiError> {
    let Some(list) = &req.tools else {
        return Ok(None);
    };
    if !list.iter().any(is_custom) {
        return Ok(None);
    }
    let mut out: Vec<CustomTool> = Vec::new();
    for (i, t) in list.iter().enumerate() {
        let at = format!("tools[{i}]");
        if !is_custom(t) {
            return Err(ApiError::field(
                &format!("{at}.type"),
                "custom tools and tools of another type in one request are not supported yet",
            ));
        }
        let c = t.get("custom").and_then(Value::as_object).ok_or_else(|| {
            ApiError::field(
                &format!("{at}.custom"),
                "a custom tool needs a \"custom\" object",
            )
        })?;
        let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
        if name.is_empty()
            || name.len() > MAX_NAME
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(ApiError::field(
                &format!("{at}.custom.name"),
                format!(
                    "a custom tool's name is 1 to {MAX_NAME} characters of a-z, A-Z, 0-9, _ and -"
                ),
            ));
        }
        if out.iter().any(|o| o.name == name) {
            return Err(ApiError::field(
                &format!("{at}.custom.name"),
                format!("two tools are named {name:?}"),
            ));
        }
        let description = match c.get("description") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                return Err(ApiError::field(
                    &format!("{at}.custom.description"),
                    "description must be a string",
                ))
            }
        };
        let format = format(c.get("format"), &format!("{at}.custom.format"))?;
        out.push(CustomTool {
            name: name.to_string(),
            description,
            format,
        });
    }
    Ok(Some(out))
}

fn format(f: Option<&Value>, at: &str) -> Result<Format, ApiError> {
    let Some(f) = f.filter(|f| !f.is_null()) else {
        return Ok(Format::Text);
    };
    match f.get("type").and_then(Value::as_str) {
        Some("text") => Ok(Format::Text),
        Some("grammar") => {
            let g = f.get("grammar").ok_or_else(|| {
                ApiError::field(
                    &format!("{at}.grammar"),
                    "a grammar format needs a \"grammar\" object",
                )
            })?;
            let def = g.get("definition").and_then(Value::as_str).ok_or_else(|| {
                ApiError::field(
                    &format!("{at}.grammar.definition"),
                    "the grammar's definition must be a string",
                )
            })?;
            match g.get("syntax").and_then(Value::as_str) {
                Some("lark") => Ok(Format::Lark(def.to_string())),
                Some("regex") => Ok(Format::Regex(def.to_string())),
                other => Err(ApiError::field(
                    &format!("{at}.grammar.syntax"),
                    format!("unknown grammar syntax {other:?}; expected \"lark\" or \"regex\""),
                )),
            }
        }
        other => Err(ApiError::field(
            &format!("{at}.type"),
            format!("unknown custom tool format {other:?}; expected \"text\" or \"grammar\""),
        )),
    }
}

/// A tool's input language as GBNF rules (root `root`); a grammar that
/// does not parse is a 400 naming the tool's field, the line and column.
pub fn tool_grammar(tool: &CustomTool, at: &str) -> Result<Gbnf, ApiError> {
    let param = format!("{at}.custom.format.grammar.definition");
    let lark = match &tool.format {
        Format::Text => "start: /(?s:.*)/".to_string(),
        Format::Lark(def) => def.clone(),
        Format::Regex(re) => {
            // Checked on its own first, so that an error speaks of the
            // regex and not of the grammar it is wrapped in.
            constrain::grammar::lark::parse_regex(
                re,
                constrain::grammar::gbnf::Pos { line: 1, column: 1 },
            )
            .map_err(|e| ApiError::field(&param, format!("the regex does not parse: {e}")))?;
            format!("start: /{}/", slash_escape(re))
        }
    };
    let what = match tool.format {
        Format::Regex(_) => "regex",
        _ => "grammar",
    };
    let l = Lark::parse(&tool.name, &lark)
        .map_err(|e| ApiError::field(&param, format!("the {what} is refused: {e}")))?;
    if l.has_special_tokens() {
        // A tool's input is text between the call's markers.
        return Err(ApiError::field(
            &param,
            "special tokens (`<|...|>`, `<[id]>`) are not supported in a custom tool's grammar",
        ));
    }
    Ok(l.gbnf)
}

/// `/` escaped (outside escapes) so the regex sits between Lark's slashes.
fn slash_escape(re: &str) -> String {
    let mut out = String::with_capacity(re.len());
    let mut it = re.chars();
    while let Some(c) = it.next() {
        match c {
            '\\' => {
                out.push(c);
                if let Some(d) = it.next() {
                    out.push(d);
                }
            }
            '/' => out.push_str("\\/"),
            c => out.push(c),
        }
    }
    out
}

fn rename(e: &mut Expr, prefix: &str) {
    match e {
        Expr::Alt(v) | Expr::Seq(v) => v.iter_mut().for_each(|x| rename(x, prefix)),
        Expr::Ref { name, .. } => *name = format!("{prefix}{name}"),
        Expr::Repeat { expr, .. } => rename(expr, prefix),
        Expr::Literal(_) | Expr::Class { .. } | Expr::Any | Expr::Bytes(_) => {}
    }
}

/// What follows `<tool_call>\n`: `NAME\n` and the tool's input, for one
/// of `tools` (with their indices in the request, for error fields).
pub fn calls_source(tools: &[(usize, &CustomTool)]) -> Result<Source, ApiError> {
    let mut rules = Vec::new();
    let mut alts = Vec::new();
    let pos = constrain::grammar::gbnf::Pos { line: 1, column: 1 };
    let mut key = Vec::new();
    for &(i, t) in tools {
        let g = tool_grammar(t, &format!("tools[{i}]"))?;
        let prefix = format!("t{i}.");
        for mut r in g.rules {
            rename(&mut r.body, &prefix);
            r.name = format!("{prefix}{}", r.name);
            rules.push(r);
        }
        alts.push(Expr::Seq(vec![
            Expr::Literal(format!("{}\n", t.name).chars().collect()),
            Expr::Ref {
                name: format!("{prefix}root"),
                pos,
            },
        ]));
        key.push(json!([t.name, format!("{:?}", t.format)]));
    }
    let body = if alts.len() == 1 {
        alts.pop().unwrap_or(Expr::Seq(Vec::new()))
    } else {
        Expr::Alt(alts)
    };
    rules.insert(
        0,
        Rule {
            name: "root".into(),
            body,
            pos,
        },
    );
    Ok(Source::Gbnf {
        grammar: Gbnf {
            name: "custom-tools".into(),
            rules,
            text: json!({"custom_tool_calls": key}).to_string(),
        },
        options: GbnfOptions::default(),
    })
}

enum Choice {
    None,
    Auto,
    Required,
    Named(usize),
}

fn choice(req: &ChatRequest, tools: &[CustomTool]) -> Result<Choice, ApiError> {
    let expected = "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"custom\", \"custom\": {\"name\": ...}} with custom tools";
    Ok(match &req.tool_choice {
        None | Some(Value::Null) => Choice::Auto,
        Some(Value::String(s)) => match s.as_str() {
            "none" => Choice::None,
            "auto" => Choice::Auto,
            "required" => Choice::Required,
            _ => return Err(ApiError::field("tool_choice", expected)),
        },
        Some(v) => match (
            v.get("type").and_then(Value::as_str),
            v.pointer("/custom/name").and_then(Value::as_str),
        ) {
            (Some("custom"), Some(n)) => match tools.iter().position(|t| t.name == n) {
                Some(i) => Choice::Named(i),
                None => {
                    return Err(ApiError::field(
                        "tool_choice",
                        format!("tool_choice names {n:?}, which is not among the tools"),
                    ))
                }
            },
            (Some("allowed_tools"), _) => {
                return Err(ApiError::field(
                    "tool_choice",
                    "tool_choice of type \"allowed_tools\" is not supported yet",
                ))
            }
            _ => return Err(ApiError::field("tool_choice", expected)),
        },
    })
}

/// The system prompt's section on the tools.
fn instructions(tools: &[CustomTool]) -> String {
    let mut s = String::from("\n\n# Tools\n\nYou may call one of the following tools. A tool takes free-form text as its input, in the format given.\n\n<tools>");
    for t in tools {
        let format = match &t.format {
            Format::Text => json!({"type": "text"}),
            Format::Lark(d) => json!({"type": "grammar", "syntax": "lark", "definition": d}),
            Format::Regex(d) => json!({"type": "grammar", "syntax": "regex", "definition": d}),
        };
        let mut v = json!({"name": t.name, "format": format});
        if let Some(d) = &t.description {
            v["description"] = json!(d);
        }
        s.push('\n');
        s.push_str(&crate::chat::py_json(&v));
    }
    s.push_str("\n</tools>\n\nTo call a tool, write <tool_call>, a newline, the tool's name, a newline, then its input:\n<tool_call>\n<tool-name>\n<input>");
    s
}

/// The plan of a request with custom tools; `None` when it has none (the
/// function-tool path then plans it).
pub fn plan(req: &ChatRequest) -> Result<Option<Plan>, ApiError> {
    let Some(tools) = tools(req)? else {
        return Ok(None);
    };
    if let Some(rf) = &req.response_format {
        if rf.get("type").and_then(Value::as_str) != Some("text") {
            return Err(ApiError::field(
                "response_format",
                "a response format beside custom tools is not supported yet",
            ));
        }
    }
    if req.structured_outputs.is_some() {
        return Err(ApiError::field(
            "structured_outputs",
            "structured_outputs beside custom tools is not supported yet",
        ));
    }
    for (i, m) in req.messages.iter().enumerate() {
        if m.tool_calls.as_ref().is_some_and(|c| !c.is_empty()) {
            return Err(ApiError::field(
                &format!("messages[{i}].tool_calls"),
                "replaying tool calls in a conversation with custom tools is not supported yet",
            ));
        }
    }
    let choice = choice(req, &tools)?;
    let mut prompt = crate::chat::render_plain(req)?;
    // The tools go at the end of the system turn, which opens the prompt.
    let open = "<|im_start|>system\n";
    let end = prompt
        .strip_prefix(open)
        .and_then(|r| r.find("<|im_end|>"))
        .map(|e| e + open.len())
        .ok_or_else(|| ApiError::internal("the prompt does not open with a system turn"))?;
    prompt.insert_str(end, &instructions(&tools));
    let stop = match &req.stop {
        None => Vec::new(),
        Some(crate::api::Stop::One(s)) => vec![s.clone()],
        Some(crate::api::Stop::Many(v)) => v.clone(),
    };
    let all: Vec<(usize, &CustomTool)> = tools.iter().enumerate().collect();
    let mut p = Plan {
        prompt,
        source: None,
        source_param: "tools",
        tools_active: true,
        structured: false,
        stop,
        prefix: String::new(),
        trigger: None,
        tool_format: None,
        bare_calls: false,
        tools: req.tools.clone().unwrap_or_default(),
        reasoning: false,
    };
    match choice {
        Choice::None => {
            p.tools_active = false;
            p.tools = Vec::new();
            p.source = Some(Source::regex(text_without(TOOL_CALL_OPEN)));
        }
        Choice::Auto => p.trigger = Some(calls_source(&all)?),
        Choice::Required | Choice::Named(_) => {
            let only = match choice {
                Choice::Named(i) => vec![all[i]],
                _ => all,
            };
            p.source = Some(calls_source(&only)?);
            p.structured = true;
            p.prefix = format!("{TOOL_CALL_OPEN}\n");
        }
    }
    p.prompt.push_str(&p.prefix);
    Ok(Some(p))
}

/// Splits an output into its text and its one custom call: the text
/// before `<tool_call>\n`, then the tool's name up to a newline, then the
/// input to the end. An output without a complete opening is all text.
pub fn split_call(text: &str, tools: &[Value]) -> (String, Vec<ParsedCall>) {
    let open = format!("{TOOL_CALL_OPEN}\n");
    let Some(at) = text.find(&open) else {
        return (text.to_string(), Vec::new());
    };
    let rest = &text[at + open.len()..];
    let Some((name, input)) = rest.split_once('\n') else {
        return (text.to_string(), Vec::new());
    };
    let known = tools
        .iter()
        .any(|t| t.pointer("/custom/name").and_then(Value::as_str) == Some(name));
    if !known {
        return (text.to_string(), Vec::new());
    }
    (
        text[..at].trim_end().to_string(),
        vec![ParsedCall {
            name: name.to_string(),
            arguments: input.to_string(),
        }],
    )
}

/// A custom call as the `tool_calls` entry OpenAI returns.
pub fn call_json(id: String, call: &ParsedCall) -> Value {
    json!({"id": id, "type": "custom", "custom": {"name": call.name, "input": call.arguments}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(body: Value) -> ChatRequest {
        crate::api::parse_request(body.to_string().as_bytes()).unwrap()
    }

    fn lark_tool(name: &str, def: &str) -> Value {
        json!({"type": "custom", "custom": {"name": name, "format": {"type": "grammar",
            "grammar": {"syntax": "lark", "definition": def}}}})
    }

    #[test]
    fn a_named_tool_constrains_the_output_to_its_name_and_grammar() {
        let r = req(json!({"messages": [{"role": "user", "content": "hi"}],
            "tools": [lark_tool("math", "start: NUM \"+\" NUM\nNUM: /[0-9]+/"),
                      {"type": "custom", "custom": {"name": "say"}}],
            "tool_choice": {"type": "custom", "custom": {"name": "math"}}}));
        let p = plan(&r).unwrap().unwrap();
        assert!(p.prompt.ends_with("<|im_start|>assistant\n<tool_call>\n"));
        assert!(p.prompt.contains("\"name\": \"math\""));
        let Some(Source::Gbnf { grammar, .. }) = &p.source else {
            panic!("a grammar")
        };
        assert_eq!(grammar.rules[0].name, "root");
        assert!(p.structured && p.tools_active);
    }

    #[test]
    fn bad_grammars_are_400s_naming_the_field_line_and_column() {
        let r = req(json!({"messages": [{"role": "user", "content": "hi"}],
            "tools": [lark_tool("math", "start: NUM\nNUM: (\"a\"")],
            "tool_choice": "required"}));
        let e = plan(&r).unwrap_err();
        assert_eq!(
            e.param.as_deref(),
            Some("tools[0].custom.format.grammar.definition")
        );
        assert!(e.message.contains("line 2"), "{}", e.message);
        let r = req(json!({"messages": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "custom", "custom": {"name": "r", "format": {"type": "grammar",
                "grammar": {"syntax": "regex", "definition": "a(b"}}}}],
            "tool_choice": "required"}));
        let e = plan(&r).unwrap_err();
        assert!(e.message.contains("regex does not parse"), "{}", e.message);
        // A tool's input is text: special tokens are refused by name.
        let r = req(json!({"messages": [{"role": "user", "content": "hi"}],
            "tools": [lark_tool("t", "start: \"a\" <|im_end|>")],
            "tool_choice": "required"}));
        let e = plan(&r).unwrap_err();
        assert!(e.message.contains("special tokens"), "{}", e.message);
    }

    #[test]
    fn mixed_tool_types_and_unknown_names_are_refused() {
        let r = req(json!({"messages": [{"role": "user", "content": "hi"}],
            "tools": [lark_tool("a", "start: \"x\""), {"type": "function", "function": {"name": "f"}}]}));
        assert_eq!(
            plan(&r).unwrap_err().param.as_deref(),
            Some("tools[1].type")
        );
        let r = req(json!({"messages": [{"role": "user", "content": "hi"}],
            "tools": [lark_tool("a", "start: \"x\"")],
            "tool_choice": {"type": "custom", "custom": {"name": "b"}}}));
        assert_eq!(plan(&r).unwrap_err().param.as_deref(), Some("tool_choice"));
        let r = req(json!({"messages": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "function", "function": {"name": "f"}}]}));
        assert!(plan(&r).unwrap().is_none());
    }

    #[test]
    fn split_call_reads_the_name_line_and_the_input_to_the_end() {
        let tools = vec![lark_tool("math", "start: \"x\"")];
        let (text, calls) = split_call("thinking\n<tool_call>\nmath\n1 +\n2", &tools);
        assert_eq!(text, "thinking");
        assert_eq!(calls[0].name, "math");
        assert_eq!(calls[0].arguments, "1 +\n2");
        let (text, calls) = split_call("<tool_call>\nother\nx", &tools);
        assert!(calls.is_empty() && text.starts_with("<tool_call>"));
        assert_eq!(slash_escape(r"a/b\/c"), r"a\/b\/c");
    }
}
