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
    /// The model to use (OpenAI's `model`); accepted and ignored, the server
    /// answers with the one model it loaded.
    #[serde(default)]
    pub model: Option<String>,
    /// The conversation so far (OpenAI's `messages`), rendered into the prompt.
    pub messages: Vec<ChatMessage>,
    /// The output format (OpenAI's `response_format`): `type` `text`,
    /// `json_object`, `json_schema` or `structural_tag`; `None` is free text.
    #[serde(default)]
    pub response_format: Option<Value>,
    /// The tools the model may call (OpenAI's `tools`); `None` is no tools.
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
    /// Whether and which tool the model must call (OpenAI's `tool_choice`):
    /// `"none"`, `"auto"`, `"required"` or a named tool; `None` is `"auto"`
    /// when tools are given.
    #[serde(default)]
    pub tool_choice: Option<Value>,
    /// Whether one reply may make several tool calls (OpenAI's
    /// `parallel_tool_calls`); default `true`.
    #[serde(default)]
    pub parallel_tool_calls: Option<bool>,
    /// Whether to answer with server-sent events, one chunk per piece of
    /// output (OpenAI's `stream`); default `false`.
    #[serde(default)]
    pub stream: Option<bool>,
    /// Options of a streamed answer (OpenAI's `stream_options`).
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    /// The most tokens to generate per choice (OpenAI's deprecated
    /// `max_tokens`); `max_completion_tokens` wins when both are given, and
    /// `None` uses the server's default.
    #[serde(default)]
    pub max_tokens: Option<i64>,
    /// The most tokens to generate per choice (OpenAI's
    /// `max_completion_tokens`); `None` falls back to `max_tokens`.
    #[serde(default)]
    pub max_completion_tokens: Option<i64>,
    /// The sampling temperature, 0 to 2 (OpenAI's `temperature`); default 1.
    #[serde(default)]
    pub temperature: Option<f32>,
    /// The nucleus sampling mass, in (0, 1] (OpenAI's `top_p`); default 1.
    #[serde(default)]
    pub top_p: Option<f32>,
    /// The sampling seed (OpenAI's `seed`); `None` draws a random one. Choice
    /// `i` of `n` uses `seed + i`.
    #[serde(default)]
    pub seed: Option<i64>,
    /// Strings that end the output when generated, cut from it (OpenAI's
    /// `stop`); applied to free text only.
    #[serde(default)]
    pub stop: Option<Stop>,
    /// How many choices to generate (OpenAI's `n`); default 1, at most the
    /// server's `max_n`.
    #[serde(default)]
    pub n: Option<i64>,
    /// Penalty, -2 to 2, on a token's logit per earlier occurrence in the
    /// output (OpenAI's `frequency_penalty`); default 0.
    #[serde(default)]
    pub frequency_penalty: Option<f32>,
    /// Penalty, -2 to 2, on the logit of a token that already occurs in the
    /// output (OpenAI's `presence_penalty`); default 0.
    #[serde(default)]
    pub presence_penalty: Option<f32>,
    /// Values added to the logits of the given token ids, keyed by the id as
    /// a string (OpenAI's `logit_bias`).
    #[serde(default)]
    pub logit_bias: Option<HashMap<String, f32>>,
    /// Whether to return the log-probability of each output token (OpenAI's
    /// `logprobs`); default `false`.
    #[serde(default)]
    pub logprobs: Option<bool>,
    /// How many most likely alternatives, 0 to 20, to return with each output
    /// token (OpenAI's `top_logprobs`); needs `logprobs: true`.
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

/// OpenAI's `stream_options`.
#[derive(Debug, Deserialize, Default)]
pub struct StreamOptions {
    /// Whether a last chunk before `[DONE]` carries the token usage
    /// (OpenAI's `include_usage`); default `false`.
    #[serde(default)]
    pub include_usage: Option<bool>,
}

/// `stop`: one string or up to four.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Stop {
    /// A single stop string.
    One(String),
    /// A list of stop strings.
    Many(Vec<String>),
}

/// One message of the conversation.
#[derive(Debug, Deserialize)]
pub struct ChatMessage {
    /// Who wrote the message (OpenAI's `role`): `system`, `developer`,
    /// `user`, `assistant` or `tool`.
    pub role: String,
    /// A string, an array of `{"type":"text","text":..}` parts, or `null`
    /// (an assistant turn that only calls tools).
    #[serde(default)]
    pub content: Option<Value>,
    /// The tool calls an assistant message made (OpenAI's `tool_calls`).
    #[serde(default)]
    pub tool_calls: Option<Vec<ToolCallIn>>,
    /// The call a `tool` message answers (OpenAI's `tool_call_id`).
    #[serde(default)]
    pub tool_call_id: Option<String>,
    /// An optional name of the message's author (OpenAI's `name`).
    #[serde(default)]
    pub name: Option<String>,
}

/// A tool call replayed in an assistant message.
#[derive(Debug, Deserialize)]
pub struct ToolCallIn {
    /// The call's id (OpenAI's `id`), which a later `tool` message cites.
    #[serde(default)]
    pub id: Option<String>,
    /// The function called and its arguments (OpenAI's `function`).
    pub function: FunctionCallIn,
}

/// The function of a [`ToolCallIn`].
#[derive(Debug, Deserialize)]
pub struct FunctionCallIn {
    /// The name of the function called (OpenAI's `name`).
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
