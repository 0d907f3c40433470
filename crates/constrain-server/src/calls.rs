//! # Reading tool calls back out of a model's text, per format
//!
//! A tools request compiled through [`constrain::tools::structural_tag`]
//! makes the model write its calls in its own [`ToolFormat`]; this module
//! turns that text back into OpenAI's `tool_calls` ([`ParsedCall`]) and the
//! text around them (`content`).
//!
//! | format | a call | the arguments |
//! |---|---|---|
//! | `qwen_3` | `<tool_call>\n{..}\n</tool_call>` | `{"name", "arguments"}` |
//! | `llama` | `{"name": .., "parameters": ..}`, or after `<|python_tag|>` | the call itself |
//! | `mistral` | `[TOOL_CALLS][{..}, ..]` | an array of `{"name", "arguments"}` |
//! | `qwen_3_coder` | `<tool_call>\n<function=NAME>\n<parameter=K>\nV\n</parameter>\n..</function>\n</tool_call>` | each `V`: raw text where the tool's schema makes `K` a string, else JSON |
//!
//! A JSON value is read whole before the closing marker is looked for: an
//! argument string may itself contain `</tool_call>`. Invariant: text that
//! does not form a complete call is never dropped; it stays in the content
//! (the constraint makes calls well formed, so this only happens to text
//! that was cut or never constrained).

use crate::chat::ParsedCall;
use constrain::tools::ToolFormat;
use serde_json::{Map, Value};

/// The texts that open a call in `format` (where the parser starts
/// looking), each with whether the call's text begins after it (`true`) or
/// at it (`llama`'s bare object); `bare`: Qwen's calls may also be bare
/// objects ([`constrain::tools::TagOptions::bare_calls`]).
fn openers(format: ToolFormat, bare: bool) -> &'static [(&'static str, bool)] {
    match format {
        ToolFormat::Qwen3 if bare => &[("<tool_call>", true), ("{\"name\"", false)],
        ToolFormat::Qwen3 => &[("<tool_call>", true)],
        ToolFormat::Llama => &[("{\"name\"", false), ("<|python_tag|>", true)],
        ToolFormat::Mistral => &[("[TOOL_CALLS]", true)],
        ToolFormat::Qwen3Coder => &[("<tool_call>", true)],
    }
}

/// The texts that open a call in `format` (streamed content is held back
/// from the first of them).
pub fn openers_text(format: ToolFormat, bare: bool) -> Vec<&'static str> {
    openers(format, bare).iter().map(|o| o.0).collect()
}

/// What closes a call after its JSON value (none for `llama`, `mistral`).
fn close(format: ToolFormat) -> &'static str {
    match format {
        ToolFormat::Qwen3 | ToolFormat::Qwen3Coder => "</tool_call>",
        ToolFormat::Llama | ToolFormat::Mistral => "",
    }
}

/// One call object: its name and its arguments as JSON text.
fn call_of(v: &Value) -> Option<ParsedCall> {
    let name = v.get("name")?.as_str()?;
    let args = v.get("arguments").or_else(|| v.get("parameters"))?;
    Some(ParsedCall {
        name: name.to_string(),
        arguments: args.to_string(),
    })
}

/// Whether `tools` declare parameter `key` of function `name` as a string
/// (and nothing else), so its XML value is raw text.
fn is_string_param(tools: &[Value], name: &str, key: &str) -> bool {
    let f = tools
        .iter()
        .map(|t| t.get("function").unwrap_or(t))
        .find(|f| f.get("name").and_then(Value::as_str) == Some(name));
    let ty = f
        .and_then(|f| f.get("parameters"))
        .and_then(|p| p.get("properties"))
        .and_then(|p| p.get(key))
        .and_then(|p| p.get("type"));
    matches!(ty, Some(Value::String(t)) if t == "string")
}

/// A Qwen3-Coder call at the start of `s`: `<tool_call>\n<function=NAME>\n`,
/// its parameters, `</function>\n</tool_call>`.
fn xml_block(s: &str, tools: &[Value]) -> Option<(Vec<ParsedCall>, usize)> {
    let rest = s.strip_prefix("<tool_call>")?.trim_start();
    let rest = rest.strip_prefix("<function=")?;
    let gt = rest.find('>')?;
    let name = &rest[..gt];
    if name.is_empty() || name.contains(['<', '\n']) {
        return None;
    }
    let mut rest = &rest[gt + 1..];
    let mut args = Map::new();
    loop {
        let t = rest.trim_start();
        if let Some(after) = t.strip_prefix("</function>") {
            let after_ws = after.trim_start();
            let tail = after_ws.strip_prefix("</tool_call>")?;
            let used = s.len() - tail.len();
            let arguments = Value::Object(args).to_string();
            return Some((
                vec![ParsedCall {
                    name: name.to_string(),
                    arguments,
                }],
                used,
            ));
        }
        let p = t.strip_prefix("<parameter=")?;
        let gt = p.find('>')?;
        let key = &p[..gt];
        let body = &p[gt + 1..];
        let end = body.find("</parameter>")?;
        // The template writes the value between newlines.
        let raw = body[..end].strip_prefix('\n').unwrap_or(&body[..end]);
        let raw = raw.strip_suffix('\n').unwrap_or(raw);
        let value = if is_string_param(tools, name, key) {
            Value::String(raw.to_string())
        } else {
            serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()))
        };
        args.insert(key.to_string(), value);
        rest = &body[end + "</parameter>".len()..];
    }
}

/// Reads one call block at the start of `s` (which begins with `opener`):
/// its calls and the length of text it spans, or `None` when it is not a
/// complete call.
fn block(
    format: ToolFormat,
    (opener, skip): (&str, bool),
    s: &str,
    tools: &[Value],
) -> Option<(Vec<ParsedCall>, usize)> {
    if format == ToolFormat::Qwen3Coder {
        return xml_block(s, tools);
    }
    let body_at = if skip { opener.len() } else { 0 };
    let body = &s[body_at..];
    let mut values = serde_json::Deserializer::from_str(body).into_iter::<Value>();
    let v = values.next()?.ok()?;
    let after = &body[values.byte_offset()..];
    // A bare object (the opener is its own start) has no closing marker.
    let end = if skip { close(format) } else { "" };
    let used = if end.is_empty() {
        body_at + values.byte_offset()
    } else {
        let trimmed = after.trim_start();
        trimmed.strip_prefix(end)?;
        body_at + values.byte_offset() + (after.len() - trimmed.len()) + end.len()
    };
    let calls = match &v {
        Value::Array(items) => items.iter().map(call_of).collect::<Option<Vec<_>>>()?,
        one => vec![call_of(one)?],
    };
    (!calls.is_empty()).then_some((calls, used))
}

/// Splits `text` written in `format` into its content (the text outside
/// the calls, trimmed; empty when there is none) and its calls, in order.
/// `tools` (the request's) type the XML formats' raw values.
pub fn parse_calls(format: ToolFormat, text: &str, tools: &[Value]) -> (String, Vec<ParsedCall>) {
    parse_calls_in(format, false, text, tools)
}

/// [`parse_calls`], Qwen's bare call objects read as calls when `bare`.
pub fn parse_calls_in(
    format: ToolFormat,
    bare: bool,
    text: &str,
    tools: &[Value],
) -> (String, Vec<ParsedCall>) {
    let mut content = String::new();
    let mut calls = Vec::new();
    let mut rest = text;
    // The earliest opener in what is left.
    let next = |rest: &str| {
        openers(format, bare)
            .iter()
            .filter_map(|&o| rest.find(o.0).map(|at| (at, o)))
            .min_by_key(|(at, _)| *at)
    };
    while let Some((at, opener)) = next(rest) {
        match block(format, opener, &rest[at..], tools) {
            Some((found, used)) => {
                content.push_str(&rest[..at]);
                calls.extend(found);
                rest = &rest[at + used..];
            }
            None => {
                // Not a call: keep the opener as text and look further on.
                content.push_str(&rest[..at + opener.0.len()]);
                rest = &rest[at + opener.0.len()..];
            }
        }
    }
    content.push_str(rest);
    (content.trim().to_string(), calls)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, arguments: &str) -> ParsedCall {
        ParsedCall {
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn qwen_bare_calls_are_calls_only_where_asked() {
        let text = "{\"name\": \"get_time\", \"arguments\": {}}\nand <tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
        let (content, calls) = parse_calls_in(ToolFormat::Qwen3, true, text, &[]);
        assert_eq!(content, "and");
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].name, "get_time");
        let (content, calls) = parse_calls(ToolFormat::Qwen3, text, &[]);
        assert!(content.starts_with("{\"name\": \"get_time\""));
        assert_eq!(calls.len(), 1);
    }

    #[test]
    fn qwen_calls_with_text_around_them() {
        let text = "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"a </tool_call> b\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
        let (content, calls) = parse_calls(ToolFormat::Qwen3, text, &[]);
        assert_eq!(content, "Let me look.");
        assert_eq!(
            calls,
            vec![
                call("get_weather", r#"{"city":"a </tool_call> b"}"#),
                call("get_time", "{}")
            ]
        );
    }

    #[test]
    fn llama_calls_are_bare_json() {
        let text = "{\"name\": \"get_time\", \"parameters\": {\"zone\": \"CET\"}}";
        let (content, calls) = parse_calls(ToolFormat::Llama, text, &[]);
        assert_eq!(content, "");
        assert_eq!(calls, vec![call("get_time", r#"{"zone":"CET"}"#)]);
    }

    #[test]
    fn mistral_calls_are_an_array() {
        let text = "ok [TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": 1}}, {\"name\": \"b\", \"arguments\": {}}]";
        let (content, calls) = parse_calls(ToolFormat::Mistral, text, &[]);
        assert_eq!(content, "ok");
        assert_eq!(calls, vec![call("a", r#"{"x":1}"#), call("b", "{}")]);
    }

    #[test]
    fn an_incomplete_call_stays_text() {
        let text = "hi <tool_call>\n{\"name\": \"a\", \"argu";
        let (content, calls) = parse_calls(ToolFormat::Qwen3, text, &[]);
        assert!(calls.is_empty());
        assert_eq!(content, text);
        // A closed JSON value without its closing marker is not a call either.
        let text = "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}";
        assert!(parse_calls(ToolFormat::Qwen3, text, &[]).1.is_empty());
    }

    #[test]
    fn text_without_a_trigger_has_no_calls() {
        for f in ToolFormat::ALL {
            let (content, calls) = parse_calls(f, "  plain words ", &[]);
            assert_eq!(content, "plain words");
            assert!(calls.is_empty());
        }
    }

    #[test]
    fn llama_calls_after_the_python_tag() {
        let text = "Sure. <|python_tag|>{\"name\": \"get_time\", \"parameters\": {}}";
        let (content, calls) = parse_calls(ToolFormat::Llama, text, &[]);
        assert_eq!(content, "Sure.");
        assert_eq!(calls, vec![call("get_time", "{}")]);
    }

    #[test]
    fn qwen_coder_xml_calls_typed_by_the_tools() {
        let tools = serde_json::json!([{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]);
        let tools = tools.as_array().unwrap();
        let text = "I'll look.\n<tool_call>\n<function=f>\n<parameter=city>\n42\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";
        let (content, calls) = parse_calls(ToolFormat::Qwen3Coder, text, tools);
        assert_eq!(content, "I'll look.");
        assert_eq!(calls, vec![call("f", r#"{"city":"42","days":3}"#)]);
        // Cut before its closing marker: text, not a call.
        let cut = &text[..text.len() - "</tool_call>".len()];
        let (content, calls) = parse_calls(ToolFormat::Qwen3Coder, cut, tools);
        assert!(calls.is_empty());
        assert_eq!(content, cut.trim());
    }
}
