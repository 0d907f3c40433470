//! The request body of `POST /v1/chat/completions`, as the OpenAI API
//! defines it, and its checks. Fields the server does not use (`user`,
//! `store`, `metadata`, ...) are accepted and ignored, as vLLM and
//! llama.cpp's server do; a field it uses with a bad value is a 400 that
//! names the field (`param`).

use crate::error::ApiError;
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;

/// `POST /v1/chat/completions`.
#[derive(Debug, Deserialize)]
pub struct ChatRequest {
    #[serde(default)]
    pub model: Option<String>,
    pub messages: Vec<ChatMessage>,
    #[serde(default)]
    pub response_format: Option<Value>,
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
    #[serde(default)]
    pub tool_choice: Option<Value>,
    #[serde(default)]
    pub parallel_tool_calls: Option<bool>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    #[serde(default)]
    pub max_tokens: Option<i64>,
    #[serde(default)]
    pub max_completion_tokens: Option<i64>,
    #[serde(default)]
    pub temperature: Option<f32>,
    #[serde(default)]
    pub top_p: Option<f32>,
    #[serde(default)]
    pub seed: Option<i64>,
    #[serde(default)]
    pub stop: Option<Stop>,
    #[serde(default)]
    pub n: Option<i64>,
    #[serde(default)]
    pub frequency_penalty: Option<f32>,
    #[serde(default)]
    pub presence_penalty: Option<f32>,
    #[serde(default)]
    pub logit_bias: Option<HashMap<String, f32>>,
    #[serde(default)]
    pub logprobs: Option<bool>,
    #[serde(default)]
    pub top_logprobs: Option<i64>,
    /// vLLM's extension: `{"json": schema} | {"regex": ..} | {"grammar": ..}
    /// | {"choice": [..]}`.
    #[serde(default)]
    pub structured_outputs: Option<Value>,
    /// constrain's extension: `true` returns each choice's step trace (what
    /// `constrain --trace` writes) as the choice's `constrain_trace` (in the
    /// last chunk of a stream); the playground draws it.
    #[serde(default)]
    pub constrain_trace: Option<bool>,
    /// With `--reasoning`: at most this many tokens of thinking, then only
    /// the tokens that close it (`thinking_token_budget` is read as well).
    #[serde(default, alias = "thinking_token_budget")]
    pub thinking_budget: Option<i64>,
}

#[derive(Debug, Deserialize, Default)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: Option<bool>,
}

/// `stop`: one string or up to four.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Stop {
    One(String),
    Many(Vec<String>),
}

/// One message of the conversation.
#[derive(Debug, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    /// A string, an array of `{"type":"text","text":..}` parts, or `null`
    /// (an assistant turn that only calls tools).
    #[serde(default)]
    pub content: Option<Value>,
    #[serde(default)]
    pub tool_calls: Option<Vec<ToolCallIn>>,
    #[serde(default)]
    pub tool_call_id: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
}

/// A tool call replayed in an assistant message.
#[derive(Debug, Deserialize)]
pub struct ToolCallIn {
    #[serde(default)]
    pub id: Option<String>,
    pub function: FunctionCallIn,
}

#[derive(Debug, Deserialize)]
pub struct FunctionCallIn {
    pub name: String,
    /// A JSON string (OpenAI), or an object (accepted too).
    pub arguments: Value,
}

/// Parses a body into a [`ChatRequest`]; malformed JSON or a field of the
/// wrong type is a 400 saying where.
pub fn parse_request(body: &[u8]) -> Result<ChatRequest, ApiError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad(
            None,
            format!(
                "the request body is not valid JSON: {e} (line {}, column {})",
                e.line(),
                e.column()
            ),
        )
    })?;
    if !v.is_object() {
        return Err(ApiError::bad(
            None,
            "the request body must be a JSON object",
        ));
    }
    for key in ["messages"] {
        if v.get(key).is_none() {
            return Err(ApiError::field(
                key,
                format!("missing required field \"{key}\""),
            ));
        }
    }
    // Name the field whose type is wrong: deserialize field by field first.
    if let Some(obj) = v.as_object() {
        for (k, val) in obj {
            let probe = serde_json::json!({ "messages": [], k.clone(): val.clone() });
            let probe = if k == "messages" {
                serde_json::json!({ "messages": val.clone() })
            } else {
                probe
            };
            if let Err(e) = serde_json::from_value::<ChatRequest>(probe) {
                return Err(ApiError::field(
                    k,
                    format!("invalid value for \"{k}\": {e}"),
                ));
            }
        }
    }
    serde_json::from_value(v).map_err(|e| ApiError::bad(None, format!("invalid request: {e}")))
}

/// The text of a message's `content` (string or text parts); `None` for
/// `null` or absent.
pub fn content_text(content: &Option<Value>, at: &str) -> Result<Option<String>, ApiError> {
    match content {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Array(parts)) => {
            let mut out = String::new();
            for (i, p) in parts.iter().enumerate() {
                match (p.get("type").and_then(Value::as_str), p.get("text")) {
                    (Some("text"), Some(Value::String(t))) => out.push_str(t),
                    _ => {
                        return Err(ApiError::field(
                            &format!("{at}.content[{i}]"),
                            "only {\"type\": \"text\", \"text\": ...} content parts are supported",
                        ))
                    }
                }
            }
            Ok(Some(out))
        }
        Some(_) => Err(ApiError::field(
            &format!("{at}.content"),
            "content must be a string, an array of text parts, or null",
        )),
    }
}
