"""Structural tags from Python: `Compiler.compile_structural_tag` on a dict,
JSON text and an XGrammar-style object, pointer-precise errors, and the
SGLang backend's `dispatch_structural_tag` (legacy and current shapes), on
the tiny hand-checkable vocabulary of conftest.py."""

import json
import pathlib
import sys

import pytest

import constrain
from conftest import sglang_backend, TINY_EOS

ARGS = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
TAG = {
    "type": "structural_tag",
    "format": {
        "type": "triggered_tags",
        "triggers": ["<f="],
        "tags": [{"type": "tag", "begin": "<f=a>", "content": {"type": "json_schema", "json_schema": ARGS}, "end": "</f>"}],
    },
}


def accepts(compiled, text):
    m = constrain.Matcher(compiled)
    return m.accept_tokens([b for b in text.encode()]) and m.is_accepting()


def test_a_tag_from_a_dict_text_or_object(tiny_compiler):
    c = tiny_compiler.compile_structural_tag(TAG)
    assert accepts(c, 'hi <f=a>{"x": 1}</f> bye')
    assert not accepts(c, 'hi <f=a>{"x": "1"}</f>')
    assert not accepts(c, "hi <f=b")

    class Dumped:
        """What XGrammar's pydantic StructuralTag offers."""

        def model_dump_json(self):
            return json.dumps(TAG)

    for same in (json.dumps(TAG), Dumped()):
        assert tiny_compiler.compile_structural_tag(same).same_as(c)
    m = constrain.Matcher(c)
    assert m.accept_tokens([b for b in b"no call"])
    assert m.accept_token(TINY_EOS) and m.is_terminated()


def test_bad_tags_name_their_pointer(tiny_compiler):
    bad = json.loads(json.dumps(TAG))
    bad["format"]["tags"][0]["begin"] = "<g=a>"
    with pytest.raises(constrain.CompileError, match="none of the triggers") as e:
        tiny_compiler.compile_structural_tag(bad)
    assert e.value.kind == "structural_tag" and e.value.pointer == "/format/tags/0/begin"
    with pytest.raises(constrain.CompileError, match="unknown format type") as e:
        tiny_compiler.compile_structural_tag({"type": "structural_tag", "format": {"type": "nope"}})
    assert e.value.pointer == "/format/type"
    with pytest.raises(constrain.CompileError, match="not valid JSON"):
        tiny_compiler.compile_structural_tag('{"type": ')


def test_sglang_dispatches_structural_tags(tiny_path):
    # SGLang is not installed here: its documented backend interface comes
    # from the test double (tests/doubles), as in test_adapters.py.
    sys.path.insert(0, str(pathlib.Path(__file__).parent / "doubles"))
    base, backend = sglang_backend(tiny_path, 300)
    legacy = {"structures": [{"begin": "<f=a>", "schema": ARGS, "end": "</f>"}], "triggers": ["<f="]}
    for key in (json.dumps(TAG), json.dumps(legacy)):
        g = backend._init_value_dispatch(("structural_tag", key), False)
        assert not isinstance(g, base.InvalidGrammarObject), key
        assert accepts(g.compiled, 'a<f=a>{"x":2}</f>') and not accepts(g.compiled, "a<f=a>{}</f>")
    bad = '{"type": "structural_tag", "format": {"type": "nope"}}'
    assert isinstance(backend._init_value_dispatch(("structural_tag", bad), False), base.InvalidGrammarObject)
