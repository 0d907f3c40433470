//! Prompts: the ChatML template Qwen models are trained on, and the default
//! system messages that show the model what it must produce.
//!
//! ```text
//! <|im_start|>system
//! {system}<|im_end|>
//! <|im_start|>user
//! {user}<|im_end|>
//! <|im_start|>assistant
//! ```
//!
//! The constraint guarantees the *form* of the output; the model still has to
//! know what is wanted to fill in sensible *values*, so by default the system
//! message shows it the JSON Schema (as outlines and the OpenAI API do), or,
//! for tool calls, the tools in Qwen's own `<tools>` format. `Raw` feeds the
//! text as is, with no template. The control markers are written as text and
//! recognised by the tokenizer as their special tokens, exactly as the
//! Hugging Face chat template does (so a user message containing
//! `<|im_end|>` is read as that marker, as it would be there).

use serde_json::Value;

/// The default assistant persona of Qwen's own template.
pub const QWEN_DEFAULT_SYSTEM: &str =
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

/// One turn of a conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text of the turn.
    pub content: String,
}

impl Message {
    /// A `system` turn with the given text.
    pub fn system(content: impl Into<String>) -> Self {
        Message {
            role: "system".into(),
            content: content.into(),
        }
    }
    /// A `user` turn with the given text.
    pub fn user(content: impl Into<String>) -> Self {
        Message {
            role: "user".into(),
            content: content.into(),
        }
    }
    /// An `assistant` turn with the given text.
    pub fn assistant(content: impl Into<String>) -> Self {
        Message {
            role: "assistant".into(),
            content: content.into(),
        }
    }
}

/// Renders messages in ChatML and opens the assistant's turn.
///
/// ```
/// use constrain_model::prompt::{chatml, Message};
/// let p = chatml(&[Message::system("Be brief."), Message::user("Hi")]);
/// assert_eq!(
///     p,
///     "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
/// );
/// ```
pub fn chatml(messages: &[Message]) -> String {
    let mut out = String::new();
    for m in messages {
        out.push_str("<|im_start|>");
        out.push_str(&m.role);
        out.push('\n');
        out.push_str(&m.content);
        out.push_str("<|im_end|>\n");
    }
    out.push_str("<|im_start|>assistant\n");
    out
}

/// The default system message for a JSON Schema: the schema, compact.
pub fn schema_system_message(schema: &Value) -> String {
    format!(
        "{QWEN_DEFAULT_SYSTEM}\nRespond only with a JSON value that conforms to this JSON Schema:\n{}",
        serde_json::to_string(schema).unwrap_or_default()
    )
}

/// The default system message for a regular expression.
pub fn regex_system_message(regex: &str) -> String {
    format!("{QWEN_DEFAULT_SYSTEM}\nRespond only with text that matches this regular expression:\n{regex}")
}

/// The default system message for tool calling, in Qwen's tool format: each
/// tool's JSON on its own line inside `<tools></tools>`, and the call asked
/// for as a bare `{"name": ..., "arguments": ...}` object.
pub fn tools_system_message(tools: &[Value]) -> String {
    let mut s = format!(
        "{QWEN_DEFAULT_SYSTEM}\n\n# Tools\n\nYou may call one of the following functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>"
    );
    for t in tools {
        s.push('\n');
        s.push_str(&serde_json::to_string(t).unwrap_or_default());
    }
    s.push_str("\n</tools>\n\nReturn the function call as a JSON object with the function name and arguments:\n{\"name\": <function-name>, \"arguments\": <args-json-object>}");
    s
}

/// The system message for calls in Qwen's own format (its chat template's
/// tool section): the tools inside `<tools></tools>`, each call asked for
/// inside `<tool_call></tool_call>`.
pub fn tool_calls_system_message(tools: &[Value]) -> String {
    let mut s = format!(
        "{QWEN_DEFAULT_SYSTEM}\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>"
    );
    for t in tools {
        s.push('\n');
        s.push_str(&serde_json::to_string(t).unwrap_or_default());
    }
    s.push_str("\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_message_shows_the_schema() {
        let s = serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}}});
        let m = schema_system_message(&s);
        assert!(m.contains(r#""city":{"type":"string"}"#));
    }

    #[test]
    fn tools_message_lists_every_tool() {
        let t = vec![
            serde_json::json!({"type": "function", "function": {"name": "a"}}),
            serde_json::json!({"type": "function", "function": {"name": "b"}}),
        ];
        let m = tools_system_message(&t);
        assert!(m.contains(r#""name":"a""#) && m.contains(r#""name":"b""#));
        assert!(m.contains("<tools>") && m.contains("</tools>"));
    }
}
