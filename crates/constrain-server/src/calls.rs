//! # Reading tool calls back out of a model's text, per format
//!
//! A tools request compiled through [`constrain::tools::structural_tag`]
//! makes the model write its calls in its own [`ToolFormat`]; this module
//! turns that text back into OpenAI's `tool_calls` ([`ParsedCall`]) and the
//! text around them (`content`).
//!
//! Each format opens a call with its trigger and holds one JSON value:
//!
//! | format | a call | the JSON |
//! |---|---|---|
//! | `qwen_3` | `<tool_call>\n{..}\n</tool_call>` | `{"name", "arguments"}` |
//! | `llama` | `{"name": .., "parameters": ..}` | the call itself |
//! | `mistral` | `[TOOL_CALLS][{..}, ..]` | an array of `{"name", "arguments"}` |
//!
//! The JSON value is read whole before the closing marker is looked for: an
//! argument string may itself contain `</tool_call>`. Invariant: text that
//! does not form a complete call is never dropped; it stays in the content
//! (the constraint makes calls well formed, so this only happens to text
//! that was cut or never constrained).

use crate::chat::ParsedCall;
use constrain::tools::ToolFormat;
use serde_json::Value;

/// The text that opens a call in `format` (where the parser starts looking).
fn trigger(format: ToolFormat) -> &'static str {
    match format {
        ToolFormat::Qwen3 => "<tool_call>",
        ToolFormat::Llama => "{\"name\"",
        ToolFormat::Mistral => "[TOOL_CALLS]",
    }
}

/// What closes a call after its JSON value (none for `llama`).
fn close(format: ToolFormat) -> &'static str {
    match format {
        ToolFormat::Qwen3 => "</tool_call>",
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

/// Reads one call block at the start of `s` (which begins with the
/// trigger): its calls and the length of text it spans, or `None` when it is
/// not a complete call.
fn block(format: ToolFormat, s: &str) -> Option<(Vec<ParsedCall>, usize)> {
    let body_at = match format {
        ToolFormat::Llama => 0,
        _ => trigger(format).len(),
    };
    let body = &s[body_at..];
    let mut values = serde_json::Deserializer::from_str(body).into_iter::<Value>();
    let v = values.next()?.ok()?;
    let after = &body[values.byte_offset()..];
    let end = close(format);
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
pub fn parse_calls(format: ToolFormat, text: &str) -> (String, Vec<ParsedCall>) {
    let open = trigger(format);
    let mut content = String::new();
    let mut calls = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(open) {
        match block(format, &rest[at..]) {
            Some((found, used)) => {
                content.push_str(&rest[..at]);
                calls.extend(found);
                rest = &rest[at + used..];
            }
            None => {
                // Not a call: keep the trigger as text and look further on.
                content.push_str(&rest[..at + open.len()]);
                rest = &rest[at + open.len()..];
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
    fn qwen_calls_with_text_around_them() {
        let text = "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"a </tool_call> b\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
        let (content, calls) = parse_calls(ToolFormat::Qwen3, text);
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
        let (content, calls) = parse_calls(ToolFormat::Llama, text);
        assert_eq!(content, "");
        assert_eq!(calls, vec![call("get_time", r#"{"zone":"CET"}"#)]);
    }

    #[test]
    fn mistral_calls_are_an_array() {
        let text = "ok [TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": 1}}, {\"name\": \"b\", \"arguments\": {}}]";
        let (content, calls) = parse_calls(ToolFormat::Mistral, text);
        assert_eq!(content, "ok");
        assert_eq!(calls, vec![call("a", r#"{"x":1}"#), call("b", "{}")]);
    }

    #[test]
    fn an_incomplete_call_stays_text() {
        let text = "hi <tool_call>\n{\"name\": \"a\", \"argu";
        let (content, calls) = parse_calls(ToolFormat::Qwen3, text);
        assert!(calls.is_empty());
        assert_eq!(content, text);
        // A closed JSON value without its closing marker is not a call either.
        let text = "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}";
        assert!(parse_calls(ToolFormat::Qwen3, text).1.is_empty());
    }

    #[test]
    fn text_without_a_trigger_has_no_calls() {
        for f in ToolFormat::ALL {
            let (content, calls) = parse_calls(f, "  plain words ");
            assert_eq!(content, "plain words");
            assert!(calls.is_empty());
        }
    }
}
