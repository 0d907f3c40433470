"""`compile_json_schema(..., documents={uri: schema})`: `$ref`s into other
registered documents resolve like into the main one, checked against the
`jsonschema` package (given the same documents through `referencing`) on the
tiny vocabulary of conftest.py; an unregistered URI is a CompileError naming
`$ref` (nothing is fetched)."""

import json

import pytest

import constrain

ADDRESS = {
    "$id": "https://example.com/address.json",
    "type": "object",
    "properties": {"zip": {"$ref": "#zip"}, "n": {"$ref": "types.json#/$defs/n"}},
    "required": ["zip"],
    "additionalProperties": False,
    "$defs": {"zip": {"$anchor": "zip", "type": "string", "pattern": "^[0-9]{2}$"}},
}
TYPES = {"$defs": {"n": {"type": "integer", "minimum": 0, "maximum": 9}}}
DOCS = {"https://example.com/address.json": ADDRESS, "https://example.com/types.json": json.dumps(TYPES)}
SCHEMA = {"type": "array", "items": {"$ref": "https://example.com/address.json"}, "maxItems": 2}


def accepts(compiled, text):
    m = constrain.Matcher(compiled)
    return m.accept_tokens([b for b in text.encode()]) and m.is_accepting()


def test_refs_resolve_into_registered_documents(tiny_compiler):
    c = tiny_compiler.compile_json_schema(SCHEMA, documents=DOCS)
    cases = [
        ('[{"zip":"12"}]', True),
        ('[{"zip":"12","n":3},{"zip":"00"}]', True),
        ('[{"zip":"123"}]', False),
        ('[{"zip":"12","n":10}]', False),
        ('[{"n":1}]', False),
    ]
    jsonschema = pytest.importorskip("jsonschema", reason="the jsonschema package is the oracle here")
    referencing = pytest.importorskip("referencing", reason="the oracle needs the referencing package")
    registry = referencing.Registry().with_resources(
        (uri, referencing.Resource.from_contents(json.loads(d) if isinstance(d, str) else d,
                                                 default_specification=referencing.jsonschema.DRAFT202012))
        for uri, d in DOCS.items()
    )
    validator = jsonschema.Draft202012Validator(SCHEMA, registry=registry)
    for text, valid in cases:
        assert validator.is_valid(json.loads(text)) == valid, text
        assert accepts(c, text) == valid, text


def test_unregistered_and_bad_documents_raise(tiny_compiler):
    with pytest.raises(constrain.CompileError, match="unresolvable"):
        tiny_compiler.compile_json_schema(SCHEMA)
    with pytest.raises(constrain.CompileError, match="b.json"):
        tiny_compiler.compile_json_schema(
            {"$ref": "https://example.com/a.json"},
            documents={"https://example.com/a.json": {"$id": "https://example.com/b.json"}},
        )
    with pytest.raises(ValueError, match="keys are URIs"):
        tiny_compiler.compile_json_schema(SCHEMA, documents={1: {}})
