//! # OpenAI `tools` arrays as one JSON Schema
//!
//! A tool call is `{"name": <one tool's name>, "arguments": <its parameters>}`.
//! [`tools_schema`] turns a `tools` array (`[{"type": "function", "function":
//! {"name", "parameters"}}, ...]`, or bare `{"name", "parameters"}` entries)
//! into the schema of exactly such an object: one closed object per tool,
//! joined by `anyOf` when there are several (the `name` constants make the
//! branches disjoint).

use super::{Pointer, SchemaError};
use serde_json::{json, Value};

/// The JSON Schema of one call to one of `tools`. A tool without parameters
/// takes `{}` as arguments.
pub fn tools_schema(tools: &Value) -> Result<Value, SchemaError> {
    let arr = tools.as_array().ok_or_else(|| SchemaError::Invalid {
        pointer: Pointer::root(),
        detail: "tools must be a JSON array".into(),
    })?;
    if arr.is_empty() {
        return Err(SchemaError::Invalid {
            pointer: Pointer::root(),
            detail: "the tools array is empty".into(),
        });
    }
    let mut branches = Vec::new();
    for (i, t) in arr.iter().enumerate() {
        let at = Pointer::root().push_index(i);
        let (f, at) = match t.get("function") {
            Some(f) => (f, at.push("function")),
            None => (t, at),
        };
        let name = f
            .get("name")
            .and_then(|n| n.as_str())
            .ok_or_else(|| SchemaError::Invalid {
                pointer: at.clone(),
                detail: "a tool needs a \"name\" string".into(),
            })?;
        let params = f
            .get("parameters")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
        branches.push(json!({
            "type": "object",
            "properties": {"name": {"const": name}, "arguments": params},
            "required": ["name", "arguments"],
            "additionalProperties": false
        }));
    }
    Ok(if branches.len() == 1 {
        branches.pop().unwrap_or_default()
    } else {
        json!({ "anyOf": branches })
    })
}
