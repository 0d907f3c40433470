"""The Python API as engines and users porting from XGrammar drive it:
XGrammar's argument names, ``accept_string``, the builtin JSON grammar,
``apply_token_bitmask_inplace``'s shape checks (numpy; torch where it is
installed), ``compile_grammar(..., syntax=)`` with Lark, the vLLM and SGLang
adapters taking Lark, lenient ``format`` under ``strict=False``, and the
pip extras."""

import json
import pathlib
import sys
import warnings

import numpy as np
import pytest

import constrain
from conftest import sglang_backend, TINY_EOS, TINY_WIDTH, allowed_ids

sys.path.insert(0, str(pathlib.Path(__file__).parent / "doubles"))

OBJ = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


def accepts(compiled, text):
    m = constrain.Matcher(compiled)
    return m.accept_string(text) and m.is_accepting()


def test_xgrammar_json_schema_arguments(tiny_compiler):
    c = tiny_compiler
    # any_whitespace=True: blanks between tokens; False: json.dumps' separators.
    free = c.compile_json_schema(OBJ, any_whitespace=True)
    assert accepts(free, '{ "a" : 1 }') and accepts(free, '{"a":1}')
    dumps = c.compile_json_schema(OBJ, any_whitespace=False)
    assert accepts(dumps, '{"a": 1}') and not accepts(dumps, '{"a":1}')
    compact = c.compile_json_schema(OBJ, any_whitespace=False, separators=(",", ":"))
    assert accepts(compact, '{"a":1}') and not accepts(compact, '{"a": 1}')
    assert accepts(c.compile_json_schema(OBJ, separators=(", ", ": ")), '{"a": 1}')
    # max_whitespace_cnt bounds each slot.
    one = c.compile_json_schema(OBJ, any_whitespace=True, max_whitespace_cnt=1)
    assert accepts(one, '{ "a": 1}') and not accepts(one, '{  "a": 1}')
    # strict_mode is strict: extra keys refused when True, allowed when False.
    assert not accepts(c.compile_json_schema(OBJ, strict_mode=True), '{"a":1,"b":2}')
    assert accepts(c.compile_json_schema(OBJ, strict_mode=False), '{"a":1,"b":2}')
    with pytest.raises(ValueError, match="indent=2 is not supported"):
        c.compile_json_schema(OBJ, indent=2)
    with pytest.raises(ValueError, match="separators"):
        c.compile_json_schema(OBJ, any_whitespace=False, separators=(";", "="))
    with pytest.raises(ValueError, match="disagree"):
        c.compile_json_schema(OBJ, strict=True, strict_mode=False)
    with pytest.raises(ValueError, match="disagrees"):
        c.compile_json_schema(OBJ, whitespace="compact", any_whitespace=True)


def test_unknown_format_is_ignored_with_a_warning_when_not_strict(tiny_compiler):
    schema = {"type": "string", "format": ""}
    with pytest.raises(constrain.CompileError, match="format"):
        tiny_compiler.compile_json_schema(schema)
    with pytest.warns(UserWarning, match="format"):
        lenient = tiny_compiler.compile_json_schema(schema, strict=False)
    assert any("format" in w for w in lenient.warnings)
    assert accepts(lenient, '"anything"')
    # A supported format compiles without a warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tiny_compiler.compile_json_schema({"type": "string", "format": "date"}, strict=False)


def test_builtin_json_grammar(tiny_compiler):
    g = tiny_compiler.compile_builtin_json_grammar()
    assert accepts(g, '{"a": [1, {"b": null}], "c": "x"}')
    assert accepts(g, "[[[[[[true]]]]]]")
    assert not accepts(g, '"a bare string"') and not accepts(g, "{")
    assert not accepts(g, "{'a': 1}")


def test_accept_string(tiny_compiler):
    m = constrain.Matcher(tiny_compiler.compile_regex("(yes|no)!"), max_rollback_tokens=-1)
    assert not m.accept_string("nope"), "refused text"
    assert m.num_tokens == 0 and m.accept_string("") and m.num_tokens == 0
    assert m.accept_string("y")
    assert m.accept_string(b"es") and not m.is_accepting()
    assert not m.accept_string("!!") and not m.is_accepting(), "refused text leaves the state"
    bm = constrain.allocate_token_bitmask(1, TINY_WIDTH)
    m.fill_next_token_bitmask(bm)
    assert allowed_ids(bm[0], TINY_WIDTH) == [ord("!")]
    assert m.accept_string("!") and m.is_accepting()
    m.fill_next_token_bitmask(bm)
    assert allowed_ids(bm[0], TINY_WIDTH) == [TINY_EOS]
    m.rollback(1)
    assert not m.is_accepting() and m.accept_token(ord("!"))
    assert m.accept_token(TINY_EOS) and not m.accept_string("x")
    with pytest.raises(TypeError, match="str or bytes"):
        m.accept_string(3)


def test_apply_token_bitmask_shape_checks():
    bm = constrain.allocate_token_bitmask(2, 64)
    with pytest.raises(ValueError, match="batch size mismatch"):
        constrain.apply_token_bitmask_inplace(np.zeros((3, 64), dtype=np.float32), bm)
    with pytest.raises(ValueError, match="width mismatch"):
        constrain.apply_token_bitmask_inplace(np.zeros((2, 32), dtype=np.float32), bm)
    with pytest.raises(ValueError, match="width mismatch"):
        constrain.apply_token_bitmask_inplace(np.zeros((2, 96), dtype=np.float32), bm, vocab_size=96)
    # indices pick rows: the bitmask may have more rows than are masked.
    lg = np.zeros((2, 64), dtype=np.float32)
    bm[1] = 0
    constrain.apply_token_bitmask_inplace(lg, bm, indices=[1])
    assert np.isinf(lg[1]).all() and np.isfinite(lg[0]).all()


def test_apply_token_bitmask_torch():
    torch = pytest.importorskip("torch", reason="torch is not installed (scripts/test-engines runs this)")
    bm = constrain.allocate_token_bitmask(2, 64)
    bm[0, 0] = 0b101
    bm[0, 1] = 0
    lg = torch.zeros(2, 64)
    constrain.apply_token_bitmask_inplace(lg, bm)
    assert torch.isfinite(lg[0]).nonzero().flatten().tolist() == [0, 2]
    assert torch.isfinite(lg[1]).all()
    with pytest.raises(ValueError, match="batch size mismatch"):
        constrain.apply_token_bitmask_inplace(torch.zeros(3, 64), bm)


def test_compile_grammar_syntax(tiny_compiler):
    lark = tiny_compiler.compile_grammar('start: ("yes" | "no") "!"', syntax="lark")
    assert accepts(lark, "yes!") and not accepts(lark, "yes")
    for syntax in ("gbnf", "ebnf", None):
        g = tiny_compiler.compile_grammar('root ::= "a" [0-9]+', syntax=syntax)
        assert accepts(g, "a12") and not accepts(g, "a")
    assert accepts(tiny_compiler.compile_grammar("# a comment\n(ab)+", syntax="regex"), "abab")
    with pytest.raises(constrain.CompileError, match="line 1"):
        tiny_compiler.compile_grammar('start: ("yes"', syntax="lark")
    with pytest.raises(ValueError, match="syntax must be"):
        tiny_compiler.compile_grammar('start: "a"', syntax="peg")
    assert constrain.grammar_syntax('root ::= "a"') == "gbnf"
    assert constrain.grammar_syntax('start: "a"') == "lark"


def test_vllm_adapter_takes_lark(tiny_path):
    from test_adapters import SamplingParams, VllmConfig
    from vllm.v1.sample.logits_processor import BatchUpdate

    from constrain.vllm import ConstrainLogitsProcessor

    with pytest.raises(ValueError, match="constrain_grammar must be a string"):
        ConstrainLogitsProcessor.validate_params(SamplingParams({"constrain_grammar": 1}))
    proc = ConstrainLogitsProcessor(VllmConfig(tiny_path.parent), device="cpu", is_pin_memory=False)
    out = [[], []]
    proc.update_state(
        BatchUpdate(
            batch_size=2,
            removed=[],
            added=[
                (0, SamplingParams({"constrain_grammar": 'start: "no" | "yes"'}), [1], out[0]),
                (1, SamplingParams({"constrain_grammar": 'root ::= "n"'}), [1], out[1]),
            ],
            moved=[],
        )
    )
    logits = np.zeros((2, TINY_WIDTH), dtype=np.float32)
    proc.apply(logits)
    assert sorted(np.flatnonzero(np.isfinite(logits[0]))) == [ord("n"), ord("y"), 256, 257]
    assert list(np.flatnonzero(np.isfinite(logits[1]))) == [ord("n")]


def test_sglang_dispatch_ebnf_takes_lark(tiny_path):
    base, backend = sglang_backend(tiny_path, TINY_WIDTH)
    g = backend._init_value_dispatch(("ebnf", 'start: "ab"+'), False)
    assert not isinstance(g, base.InvalidGrammarObject)
    assert g.matcher.accept_string("abab") and g.matcher.is_accepting()
    assert isinstance(backend._init_value_dispatch(("ebnf", 'start: ("ab"'), False), base.InvalidGrammarObject)


def test_pip_extras():
    tomllib = pytest.importorskip("tomllib", reason="tomllib needs Python 3.11")
    root = pathlib.Path(__file__).resolve().parents[1]
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert {"torch", "transformers"} <= set(extras["hf"])
    assert "vllm" in extras["vllm"] and "sglang" in extras["sglang"]
