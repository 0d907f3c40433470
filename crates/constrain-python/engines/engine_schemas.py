"""The JSON Schemas the in-engine checks (vllm_llm.py, sglang_engine.py) constrain to."""

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 120}},
    "required": ["name", "age"],
}
FLAGS = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3}},
    "required": ["ok", "tags"],
}
