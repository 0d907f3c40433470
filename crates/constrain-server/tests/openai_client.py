"""End-to-end check with the real `openai` client against a constrain server
(BASE_URL). Run by tests/openai_client.rs; exits non-zero on any failure."""
import concurrent.futures
import json
import os

import openai
from openai import OpenAI
from pydantic import BaseModel

client = OpenAI(base_url=os.environ["BASE_URL"], api_key="unused")
MSG = [{"role": "user", "content": "Give me data."}]
SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 0, "maximum": 99}},
    "required": ["ok", "n"],
    "additionalProperties": False,
}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "maxLength": 10}, "unit": {"enum": ["c", "f"]}},
        "required": ["city", "unit"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {
        "type": "object", "properties": {"zone": {"type": "string", "maxLength": 5}},
        "required": ["zone"], "additionalProperties": False}}},
]


def check_doc(text):
    doc = json.loads(text)
    assert set(doc) == {"ok", "n"}, doc
    assert isinstance(doc["ok"], bool) and isinstance(doc["n"], int) and 0 <= doc["n"] <= 99, doc


def check_calls(message):
    assert message.tool_calls, message
    for call in message.tool_calls:
        assert call.type == "function" and call.id
        args = json.loads(call.function.arguments)
        if call.function.name == "get_weather":
            assert set(args) == {"city", "unit"} and args["unit"] in ("c", "f"), args
        else:
            assert call.function.name == "get_time" and set(args) == {"zone"}, call


# json_schema, non-streaming.
for seed in range(3):
    r = client.chat.completions.create(model="any", messages=MSG, seed=seed, max_tokens=60,
        response_format={"type": "json_schema", "json_schema": {"name": "d", "schema": SCHEMA, "strict": True}})
    assert r.choices[0].finish_reason == "stop", r
    check_doc(r.choices[0].message.content)
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


# parse() with a pydantic model (raises on finish_reason "length").
class Data(BaseModel):
    ok: bool
    n: int


parse = getattr(client.chat.completions, "parse", None) or client.beta.chat.completions.parse
p = parse(model="any", messages=MSG, response_format=Data, max_tokens=60, seed=3)
assert isinstance(p.choices[0].message.parsed, Data), p

# Tools with each tool_choice.
conv = [
    {"role": "user", "content": "What time is it?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_time", "arguments": "{\"zone\": \"CET\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "12:00"},
    {"role": "user", "content": "And the weather in Paris?"},
]
for seed in range(2):
    r = client.chat.completions.create(model="any", messages=conv, tools=TOOLS, tool_choice="required", max_tokens=80, seed=seed)
    assert r.choices[0].finish_reason == "tool_calls"
    check_calls(r.choices[0].message)
    r = client.chat.completions.create(model="any", messages=conv, tools=TOOLS, max_tokens=80, seed=seed,
        tool_choice={"type": "function", "function": {"name": "get_weather"}})
    check_calls(r.choices[0].message)
    assert r.choices[0].message.tool_calls[0].function.name == "get_weather"
    r = client.chat.completions.create(model="any", messages=conv, tools=TOOLS, tool_choice="none", max_tokens=30, seed=seed)
    assert not r.choices[0].message.tool_calls and "<tool_call>" not in r.choices[0].message.content
    r = client.chat.completions.create(model="any", messages=conv, tools=TOOLS, tool_choice="auto", max_tokens=80, seed=seed)
    if r.choices[0].message.tool_calls:
        check_calls(r.choices[0].message)

# Streaming with usage.
text, usage, finish = "", None, None
for chunk in client.chat.completions.create(model="any", messages=MSG, stream=True, max_tokens=60,
        stream_options={"include_usage": True},
        response_format={"type": "json_schema", "json_schema": {"name": "d", "schema": SCHEMA}}):
    if chunk.choices:
        text += chunk.choices[0].delta.content or ""
        finish = chunk.choices[0].finish_reason or finish
    elif chunk.usage:
        usage = chunk.usage
check_doc(text)
assert finish == "stop" and usage and usage.completion_tokens > 0

# Errors surface as the client's exceptions.
try:
    client.chat.completions.create(model="any", messages=MSG, temperature=9)
    raise AssertionError("temperature 9 was accepted")
except openai.BadRequestError as e:
    assert e.status_code == 400 and "temperature" in str(e)
try:
    client.chat.completions.create(model="any", messages=MSG, max_tokens=1,
        response_format={"type": "json_schema", "json_schema": {"name": "d", "schema": SCHEMA}})
    raise AssertionError("a budget below the minimum was accepted")
except openai.BadRequestError as e:
    assert "at least" in str(e)


# Custom tools with a grammar: the client reads `type: "custom"` calls.
import re
CUSTOM = [{"type": "custom", "custom": {"name": "ticket", "description": "Opens a ticket.",
    "format": {"type": "grammar", "grammar": {"syntax": "regex", "definition": "[A-Z]{2}-[0-9]{2,4}"}}}},
    {"type": "custom", "custom": {"name": "sum", "format": {"type": "grammar", "grammar": {"syntax": "lark",
        "definition": "start: NUM (\"+\" NUM)*\nNUM: /[0-9]{1,3}/"}}}}]
for seed in range(3):
    r = client.chat.completions.create(model="any", messages=MSG, tools=CUSTOM, max_tokens=40, seed=seed,
        tool_choice={"type": "custom", "custom": {"name": "ticket"}})
    call = r.choices[0].message.tool_calls[0]
    assert r.choices[0].finish_reason == "tool_calls" and call.type == "custom" and call.id, r
    assert call.custom.name == "ticket" and re.fullmatch(r"[A-Z]{2}-[0-9]{2,4}", call.custom.input), call
    r = client.chat.completions.create(model="any", messages=MSG, tools=CUSTOM, max_tokens=40, seed=seed,
        tool_choice="required")
    call = r.choices[0].message.tool_calls[0]
    pattern = r"[A-Z]{2}-[0-9]{2,4}" if call.custom.name == "ticket" else r"[0-9]{1,3}(\+[0-9]{1,3})*"
    assert re.fullmatch(pattern, call.custom.input), call
try:
    client.chat.completions.create(model="any", messages=MSG, tool_choice="required", tools=[
        {"type": "custom", "custom": {"name": "g", "format": {"type": "grammar",
            "grammar": {"syntax": "lark", "definition": "start: (\"x\""}}}}])
    raise AssertionError("a bad grammar was accepted")
except openai.BadRequestError as e:
    assert e.status_code == 400 and "line 1" in str(e), e


# 8 concurrent requests.
def one(seed):
    r = client.chat.completions.create(model="any", messages=MSG, seed=seed, max_tokens=60,
        response_format={"type": "json_schema", "json_schema": {"name": "d", "schema": SCHEMA}})
    check_doc(r.choices[0].message.content)
    return True


with concurrent.futures.ThreadPoolExecutor(8) as ex:
    assert all(ex.map(one, range(8)))
print("openai client: all checks passed")
