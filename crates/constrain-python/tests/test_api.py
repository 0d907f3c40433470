"""The Python API on a tiny hand-checkable vocabulary (see conftest.py): masks,
stop tokens, rollback, batch fill, numpy helpers, and bad inputs raising."""

import array
import json

import numpy as np
import pytest

import constrain
from conftest import TINY_EOS, TINY_TOOL, TINY_WIDTH, TINY_WORDS, allowed_ids

YES, NO = 256 + TINY_WORDS.index(b"yes"), 256 + TINY_WORDS.index(b"no")


def mask(matcher, width=TINY_WIDTH):
    bm = constrain.allocate_token_bitmask(1, width)
    bm[:] = 0x5A5A5A5A  # garbage: the fill must overwrite every word
    matcher.fill_next_token_bitmask(bm)
    return allowed_ids(bm[0], width)


def test_tokenizer_info(tiny_info):
    assert tiny_info.vocab_size == TINY_WIDTH
    assert tiny_info.num_ids == TINY_TOOL + 1
    assert tiny_info.stop_token_ids == [TINY_EOS]
    assert tiny_info.token_bytes(ord("a")) == b"a"
    assert tiny_info.token_bytes(YES) == b"yes"
    assert tiny_info.token_bytes(TINY_EOS) is None
    assert tiny_info.token_bytes(TINY_WIDTH - 1) is None


def test_regex_masks_by_hand(tiny_compiler):
    m = constrain.Matcher(tiny_compiler.compile_regex("(yes|no)"))
    assert mask(m) == [ord("n"), ord("y"), YES, NO]
    assert not m.is_accepting() and not m.is_terminated()
    assert m.accept_token(ord("y"))
    assert mask(m) == [ord("e")]
    assert not m.accept_token(ord("x")), "a refused token changes nothing"
    assert m.accept_tokens([ord("e"), ord("s")])
    # Complete: only the stop token; never the added <tool_call>, never padding.
    assert mask(m) == [TINY_EOS]
    assert m.is_accepting() and not m.is_terminated()
    assert m.accept_token(TINY_EOS) and m.is_terminated()
    assert mask(m) == []
    assert not m.accept_token(ord("y"))
    m.reset()
    assert mask(m) == [ord("n"), ord("y"), YES, NO] and m.num_tokens == 0


def test_jump_forward_string(tiny_compiler):
    m = constrain.Matcher(
        tiny_compiler.compile_json_schema(
            {"type": "object", "properties": {"name": {"type": "boolean"}}, "required": ["name"]}
        )
    )
    assert m.find_jump_forward_string() == '{"name":'
    assert m.accept_tokens([ord(c) for c in '{"name":'])
    assert m.find_jump_forward_string() == ""
    assert m.accept_token(256 + TINY_WORDS.index(b"true"))
    assert m.find_jump_forward_string() == "}"


def test_validate_tokens(tiny_compiler):
    m = constrain.Matcher(tiny_compiler.compile_regex("(yes|no)"))
    assert m.validate_tokens([YES, TINY_EOS, ord("x")]) == 2
    assert m.validate_tokens([ord("n"), ord("x")]) == 1
    assert m.validate_tokens([]) == 0
    assert m.num_tokens == 0, "validate takes nothing"
    assert not m.accept_tokens([ord("n"), ord("x")])
    assert m.num_tokens == 0, "accept_tokens is all or nothing"


def test_override_stop_tokens(tiny_compiler):
    compiled = tiny_compiler.compile_regex("(yes|no)")
    m = constrain.Matcher(compiled, override_stop_tokens=[TINY_TOOL])
    assert m.stop_token_ids == [TINY_TOOL]
    assert m.accept_token(NO)
    assert mask(m) == [TINY_TOOL]
    assert not m.accept_token(TINY_EOS), "the tokenizer's EOS no longer stops"
    assert m.accept_token(TINY_TOOL) and m.is_terminated()
    with pytest.raises(ValueError, match="out of range"):
        constrain.Matcher(compiled, override_stop_tokens=[TINY_WIDTH])
    with pytest.raises(ValueError, match="empty"):
        constrain.Matcher(compiled, override_stop_tokens=[])


def test_terminate_without_stop_token(tiny_compiler):
    compiled = tiny_compiler.compile_regex("(yes|no)")
    m = constrain.Matcher(compiled, terminate_without_stop_token=True)
    assert not m.is_terminated()
    assert m.accept_token(YES)
    assert m.is_terminated(), "complete and nothing can follow"
    plain = constrain.Matcher(compiled)
    assert plain.accept_token(YES) and not plain.is_terminated()
    # A text that could go on is not terminated before its stop token.
    digits = constrain.Matcher(tiny_compiler.compile_regex("[0-9]+"), terminate_without_stop_token=True)
    assert digits.accept_token(ord("1")) and digits.is_accepting() and not digits.is_terminated()


def test_rollback(tiny_compiler):
    compiled = tiny_compiler.compile_regex("(yes|no|ab[0-9]{2})")
    m = constrain.Matcher(compiled, max_rollback_tokens=4)
    masks = [mask(m)]
    for t in [256 + TINY_WORDS.index(b"ab"), ord("1"), ord("2"), TINY_EOS]:
        assert m.accept_token(t)
        masks.append(mask(m))
    assert m.is_terminated()
    m.rollback(3)
    assert not m.is_terminated() and mask(m) == masks[1]
    for i, t in enumerate([ord("1"), ord("2"), TINY_EOS]):
        assert m.accept_token(t)
        assert mask(m) == masks[i + 2]
    with pytest.raises(ValueError, match=r"only 4 can be undone \(max_rollback_tokens=4\)"):
        m.rollback(5)
    with pytest.raises(ValueError):
        m.rollback(-1)
    none = constrain.Matcher(compiled)
    assert none.accept_token(ord("y"))
    with pytest.raises(ValueError, match="max_rollback_tokens=0"):
        none.rollback(1)
    unbounded = constrain.Matcher(compiled, max_rollback_tokens=-1)
    assert unbounded.accept_tokens([ord("y"), ord("e"), ord("s")])
    unbounded.rollback(3)
    assert unbounded.num_tokens == 0


def test_compile_is_cached_and_options_key_it(tiny_compiler):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    a = tiny_compiler.compile_json_schema(schema)
    b = tiny_compiler.compile_json_schema(json.dumps(schema))
    assert a.same_as(b), "dict and its JSON text are one cache entry"
    c = tiny_compiler.compile_json_schema(schema, whitespace="flexible")
    assert not a.same_as(c)
    d = tiny_compiler.compile_json_schema(schema, strict=False)
    assert not a.same_as(d)
    # Strict: no extra keys; compliant (strict=False): extra keys allowed.
    ms, mc = constrain.Matcher(a), constrain.Matcher(d)
    assert ms.accept_tokens([ord(c) for c in '{"'])
    assert mc.accept_tokens([ord(c) for c in '{"'])
    assert not ms.accept_token(ord("b")) and mc.accept_token(ord("b"))


def test_whitespace_policies(tiny_compiler):
    schema = {"type": "array", "items": {"type": "integer"}}
    compact = constrain.Matcher(tiny_compiler.compile_json_schema(schema))
    flexible = constrain.Matcher(tiny_compiler.compile_json_schema(schema, whitespace="flexible"))
    python = constrain.Matcher(tiny_compiler.compile_json_schema(schema, whitespace="python"))
    text = [ord(c) for c in "[1, 2]"]
    assert compact.validate_tokens(text) == 3, "no space after the comma"
    assert flexible.validate_tokens(text) == len(text)
    assert python.validate_tokens(text) == len(text)


def test_compile_tools_and_grammar(tiny_compiler):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
    m = constrain.Matcher(tiny_compiler.compile_tools(tools))
    assert m.find_jump_forward_string().startswith('{"name":"f"')
    g = constrain.Matcher(tiny_compiler.compile_grammar("# yes or no\n(yes|\nno)\n"))
    assert g.accept_token(NO) and g.is_accepting()
    # GBNF text (a rule defined with ::=), as XGrammar's compile_grammar takes EBNF.
    g = constrain.Matcher(tiny_compiler.compile_grammar('root ::= "yes" | "no"\n'))
    assert g.accept_token(NO) and g.is_accepting()
    g = constrain.Matcher(tiny_compiler.compile_grammar('root ::= item ("," item)*\nitem ::= [a-c]\n'))
    assert g.accept_tokens([ord(c) for c in "a,b,c"]) and g.is_accepting()
    assert not constrain.Matcher(tiny_compiler.compile_grammar('root ::= [a-c]+\n')).accept_token(ord(","))


def test_batch_fill_matches_single_fills(tiny_compiler):
    compiled = tiny_compiler.compile_regex("[a-c]{1,3}(yes|no)")
    matchers = []
    for prefix in ["", "a", "ab", "abc", "abcn", "ay", "b", "bye", "c", "cno", "aa"]:
        m = constrain.Matcher(compiled)
        assert m.accept_tokens([ord(c) for c in prefix])
        matchers.append(m)
    n = len(matchers)
    batch = constrain.allocate_token_bitmask(n + 2, TINY_WIDTH)
    constrain.fill_next_token_bitmask_batch(matchers, batch)
    for i, m in enumerate(matchers):
        single = constrain.allocate_token_bitmask(1, TINY_WIDTH)
        m.fill_next_token_bitmask(single)
        assert (batch[i] == single[0]).all(), f"row {i}"
    assert (batch[n:] == -1).all(), "rows past the matchers are left alone"
    rev = constrain.allocate_token_bitmask(n, TINY_WIDTH)
    constrain.fill_next_token_bitmask_batch(matchers, rev, indices=list(range(n - 1, -1, -1)))
    assert (rev[::-1] == batch[:n]).all()
    with pytest.raises(ValueError, match="same bitmask row"):
        constrain.fill_next_token_bitmask_batch(matchers[:2], batch, indices=[0, 0])
    with pytest.raises(ValueError, match="out of range"):
        constrain.fill_next_token_bitmask_batch(matchers, constrain.allocate_token_bitmask(2, TINY_WIDTH))
    constrain.fill_next_token_bitmask_batch([], batch)


def test_buffers_beyond_numpy(tiny_compiler):
    m = constrain.Matcher(tiny_compiler.compile_regex("(yes|no)"))
    words = (TINY_WIDTH + 31) // 32
    buf = array.array("i", [0] * words)
    m.fill_next_token_bitmask(buf)
    assert allowed_ids(buf, TINY_WIDTH) == [ord("n"), ord("y"), YES, NO]
    one_row = np.zeros(words, dtype=np.int32)
    m.fill_next_token_bitmask(one_row)
    assert allowed_ids(one_row, TINY_WIDTH) == [ord("n"), ord("y"), YES, NO]
    two = np.zeros((3, words), dtype=np.int32)
    m.fill_next_token_bitmask(two, -1)
    assert (two[:2] == 0).all() and allowed_ids(two[2], TINY_WIDTH) == [ord("n"), ord("y"), YES, NO]


def test_apply_token_bitmask_inplace(tiny_compiler):
    m = constrain.Matcher(tiny_compiler.compile_regex("(yes|no)"))
    bm = constrain.allocate_token_bitmask(2, TINY_WIDTH)
    m.fill_next_token_bitmask(bm, 1)
    logits = np.zeros((2, TINY_WIDTH + 4), dtype=np.float32)
    constrain.apply_token_bitmask_inplace(logits, bm, vocab_size=TINY_WIDTH)
    assert np.isfinite(logits[0, :TINY_WIDTH]).all(), "row 0 allows everything"
    assert np.isinf(logits[:, TINY_WIDTH:]).all(), "columns past vocab_size are masked"
    assert sorted(np.flatnonzero(np.isfinite(logits[1]))) == [ord("n"), ord("y"), YES, NO]
    one = np.zeros(TINY_WIDTH, dtype=np.float64)
    constrain.apply_token_bitmask_inplace(one, bm[1])
    assert sorted(np.flatnonzero(np.isfinite(one))) == [ord("n"), ord("y"), YES, NO]
    # Logits wider than the bitmask's ids: the extra columns are padding.
    wide = np.zeros((1, ((TINY_WIDTH + 31) // 32) * 32 + 7), dtype=np.float32)
    constrain.apply_token_bitmask_inplace(wide, bm[1])
    assert sorted(np.flatnonzero(np.isfinite(wide[0]))) == [ord("n"), ord("y"), YES, NO]
    with pytest.raises(ValueError, match="out of range"):
        constrain.apply_token_bitmask_inplace(logits, bm, indices=[2])
    with pytest.raises(TypeError):
        constrain.apply_token_bitmask_inplace(logits, bm.astype(np.int64))
    with pytest.raises(TypeError):
        constrain.apply_token_bitmask_inplace([0.0] * TINY_WIDTH, bm)


def test_bad_bitmasks_raise(tiny_compiler):
    m = constrain.Matcher(tiny_compiler.compile_regex("(yes|no)"))
    words = (TINY_WIDTH + 31) // 32
    with pytest.raises(TypeError, match="int32"):
        m.fill_next_token_bitmask(np.zeros((1, words), dtype=np.int64))
    with pytest.raises(TypeError, match="int32"):
        m.fill_next_token_bitmask(np.zeros((1, words), dtype=np.float32))
    with pytest.raises(ValueError, match="needs 10"):
        m.fill_next_token_bitmask(np.zeros((1, words + 1), dtype=np.int32))
    with pytest.raises(ValueError, match="needs 10"):
        m.fill_next_token_bitmask(np.zeros((1, words - 1), dtype=np.int32))
    with pytest.raises(ValueError, match="shape"):
        m.fill_next_token_bitmask(np.zeros((1, 1, words), dtype=np.int32))
    ro = np.zeros((1, words), dtype=np.int32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        m.fill_next_token_bitmask(ro)
    with pytest.raises(ValueError, match="contiguous"):
        m.fill_next_token_bitmask(np.zeros((words, 2), dtype=np.int32).T)
    with pytest.raises(ValueError, match="out of range"):
        m.fill_next_token_bitmask(np.zeros((2, words), dtype=np.int32), 2)
    with pytest.raises(ValueError, match="empty"):
        m.fill_next_token_bitmask(np.zeros((0, words), dtype=np.int32))
    with pytest.raises(TypeError, match="buffer protocol"):
        m.fill_next_token_bitmask([0] * words)

    class Device:
        def __init__(self, type):
            self.type = type

        def __str__(self):
            return self.type

    class TensorDouble:  # torch.Tensor as far as the buffer helper reads it
        def __init__(self, device):
            self.device = Device(device)
            self.array = np.zeros((1, words), dtype=np.int32)

        def numpy(self):
            return self.array

    with pytest.raises(ValueError, match="on device cuda"):
        m.fill_next_token_bitmask(TensorDouble("cuda"))
    class DLPackDouble:  # the DLPack protocol, over a numpy array
        def __init__(self, kind):
            self.kind = kind
            self.array = np.zeros((2, words), dtype=np.int32)

        def __dlpack__(self, **kwargs):
            return self.array.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return (self.kind, 0)

    with pytest.raises(ValueError, match="DLPack device type 2"):
        m.fill_next_token_bitmask(DLPackDouble(2))
    dl = DLPackDouble(1)
    m.fill_next_token_bitmask(dl, 1)
    assert (dl.array[0] == 0).all()
    assert allowed_ids(dl.array[1], TINY_WIDTH) == [ord("n"), ord("y"), YES, NO]
    cpu = TensorDouble("cpu")
    m.fill_next_token_bitmask(cpu)
    assert allowed_ids(cpu.array[0], TINY_WIDTH) == [ord("n"), ord("y"), YES, NO]
    with pytest.raises(TypeError, match="int32"):
        m.fill_next_token_bitmask(bytearray(words * 4))


def test_bad_tokens_raise(tiny_compiler):
    m = constrain.Matcher(tiny_compiler.compile_regex("(yes|no)"))
    for bad in (-1, TINY_WIDTH, 2**40):
        with pytest.raises(ValueError, match="out of range"):
            m.accept_token(bad)
        with pytest.raises(ValueError, match="out of range"):
            m.validate_tokens([ord("y"), bad])
    with pytest.raises(TypeError):
        m.accept_token("y")
    assert m.num_tokens == 0
    # A padding id inside the logits width is a token, never allowed.
    assert not m.accept_token(TINY_WIDTH - 1)


def test_bad_sources_raise(tiny_compiler):
    with pytest.raises(constrain.CompileError) as e:
        tiny_compiler.compile_json_schema({"type": "object", "properties": {"a": {"type": "integer", "minimun": 1}}})
    assert isinstance(e.value, ValueError)
    assert e.value.keyword == "minimun" and e.value.pointer == "/properties/a" and e.value.kind == "schema"
    with pytest.raises(constrain.CompileError) as e:
        tiny_compiler.compile_json_schema({"$ref": "http://example.com/x.json"})
    assert e.value.keyword == "$ref" and e.value.pointer == ""
    with pytest.raises(constrain.CompileError, match="not valid JSON") as e:
        tiny_compiler.compile_json_schema('{"type": ')
    assert e.value.pointer is None
    with pytest.raises(TypeError, match="JSON-serializable"):
        tiny_compiler.compile_json_schema({"type": object()})
    with pytest.raises(constrain.CompileError) as e:
        tiny_compiler.compile_regex("(unclosed")
    assert e.value.kind == "regex"
    with pytest.raises(constrain.CompileError):
        tiny_compiler.compile_tools({"not": "a list"})
    with pytest.raises(constrain.CompileError, match="no pattern"):
        tiny_compiler.compile_grammar("# only a header\n")
    with pytest.raises(constrain.CompileError, match=r"line \d+, column \d+") as e:
        tiny_compiler.compile_grammar('root ::= item\nitem ::= ("a"\n')
    assert e.value.kind == "grammar"
    with pytest.raises(ValueError, match="whitespace"):
        tiny_compiler.compile_json_schema({"type": "integer"}, whitespace="wide")


def test_bad_tokenizers_raise(tmp_path, tiny_path):
    with pytest.raises(OSError, match="cannot read tokenizer"):
        constrain.TokenizerInfo.from_tokenizer_json(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="malformed tokenizer.json"):
        constrain.TokenizerInfo.from_tokenizer_json(str(bad))
    with pytest.raises(ValueError, match="smaller than"):
        constrain.TokenizerInfo.from_tokenizer_json(str(tiny_path), vocab_size=10)
    with pytest.raises(ValueError, match="empty"):
        constrain.TokenizerInfo.from_tokenizer_json(str(tiny_path), stop_token_ids=[])
    with pytest.raises(ValueError, match="not in the vocabulary"):
        constrain.TokenizerInfo.from_tokenizer_json(str(tiny_path), stop_token_ids=[10**6])
    with pytest.raises(TypeError, match="from_huggingface takes"):
        constrain.TokenizerInfo.from_huggingface(42)


def test_from_huggingface(tiny_path):
    text = tiny_path.read_text()
    a = constrain.TokenizerInfo.from_huggingface(text, vocab_size=TINY_WIDTH)
    assert a.vocab_size == TINY_WIDTH and a.stop_token_ids == [TINY_EOS]

    class Backend:  # tokenizers.Tokenizer's documented to_str()
        def to_str(self):
            return text

    class HFTokenizer:  # transformers' PreTrainedTokenizerFast, as far as used
        backend_tokenizer = Backend()
        eos_token_id = TINY_TOOL

    b = constrain.TokenizerInfo.from_huggingface(HFTokenizer())
    assert b.vocab_size == TINY_TOOL + 1
    assert b.stop_token_ids == [TINY_EOS, TINY_TOOL], "eos_token_id joins the EOS-named tokens"
    c = constrain.TokenizerInfo.from_huggingface(Backend(), stop_token_ids=[TINY_TOOL])
    assert c.stop_token_ids == [TINY_TOOL]


def test_garbage_never_crashes_the_interpreter(tiny_path):
    """Every public call fed ill-typed and out-of-range arguments, and one
    matcher used from eight threads at once, in a child interpreter: each call
    raises a Python exception or succeeds, and the child exits normally (a
    crash would end it with a signal)."""
    import subprocess
    import sys
    import textwrap

    child = textwrap.dedent(
        f"""
        import itertools, threading
        import numpy as np
        import constrain

        path = {str(tiny_path)!r}
        garbage = [None, -1, 2**70, -(2**70), 1.5, float("nan"), "x", b"\\xff", [], [None], [2**40],
                   {{}}, {{"type": 5}}, object(), np.zeros(3, dtype=np.int8),
                   np.zeros((2, 2, 2), dtype=np.int32), np.zeros((1, 10), dtype=np.int32)[:, ::2]]
        calls = 0

        def attempt(f, *args, **kw):
            global calls
            calls += 1
            try:
                f(*args, **kw)
            except Exception:
                pass

        info = constrain.TokenizerInfo.from_tokenizer_json(path, vocab_size=300)
        comp = constrain.Compiler(info)
        compiled = comp.compile_regex("(yes|no)[0-9]{{1,3}}")
        for g in garbage:
            attempt(constrain.TokenizerInfo.from_tokenizer_json, g)
            attempt(constrain.TokenizerInfo.from_tokenizer_json, path, vocab_size=g)
            attempt(constrain.TokenizerInfo.from_tokenizer_json, path, stop_token_ids=g)
            attempt(constrain.TokenizerInfo.from_huggingface, g)
            attempt(constrain.Compiler, g)
            attempt(constrain.Compiler, info, cache_bytes=g)
            attempt(comp.compile_json_schema, g)
            attempt(comp.compile_json_schema, {{"type": "string"}}, whitespace=g)
            attempt(comp.compile_json_schema, {{"type": "string"}}, strict=g)
            attempt(comp.compile_regex, g)
            attempt(comp.compile_grammar, g)
            attempt(comp.compile_tools, g)
            attempt(constrain.Matcher, g)
            attempt(constrain.Matcher, compiled, override_stop_tokens=g)
            attempt(constrain.Matcher, compiled, max_rollback_tokens=g)
            m = constrain.Matcher(compiled, max_rollback_tokens=-1)
            for name in ("accept_token", "accept_tokens", "validate_tokens", "rollback",
                         "fill_next_token_bitmask"):
                attempt(getattr(m, name), g)
            attempt(m.fill_next_token_bitmask, constrain.allocate_token_bitmask(1, 300), g)
            attempt(constrain.fill_next_token_bitmask_batch, g, constrain.allocate_token_bitmask(1, 300))
            attempt(constrain.fill_next_token_bitmask_batch, [m], g)
            attempt(constrain.fill_next_token_bitmask_batch, [m, m], constrain.allocate_token_bitmask(2, 300), indices=g)
            attempt(constrain.apply_token_bitmask_inplace, g, constrain.allocate_token_bitmask(1, 300))
            attempt(constrain.apply_token_bitmask_inplace, np.zeros(300, dtype=np.float32), g)
            attempt(constrain.allocate_token_bitmask, g, 300)
            attempt(constrain.allocate_token_bitmask, 1, g)

        # One matcher from eight threads: calls raise or succeed, never corrupt.
        m = constrain.Matcher(compiled, max_rollback_tokens=-1)
        y, e, s = ord("y"), ord("e"), ord("s")

        def hammer():
            bm = constrain.allocate_token_bitmask(1, 300)
            for _ in range(300):
                attempt(m.accept_tokens, [y, e, s])
                attempt(m.fill_next_token_bitmask, bm)
                attempt(m.rollback, 3)
                attempt(constrain.fill_next_token_bitmask_batch, [m], bm)
                attempt(m.reset)

        ts = [threading.Thread(target=hammer) for _ in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        m.reset()
        assert m.accept_tokens([y, e, s, ord("1")]) and m.is_terminated() is False
        print("calls", calls)
        """
    )
    r = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"the child interpreter ended with {r.returncode}: {r.stderr[-2000:]}"
    assert int(r.stdout.split()[-1]) > 400


def test_stop_tokens_from_the_configs_beside_the_file(tmp_path, tiny_path):
    """As the CLI does: a generation_config.json / tokenizer_config.json next to
    tokenizer.json adds the stop tokens it names; a config naming a token the
    tokenizer lacks is an error, not a silent default."""
    d = tmp_path / "model"
    d.mkdir()
    (d / "tokenizer.json").write_text(tiny_path.read_text())
    plain = constrain.TokenizerInfo.from_tokenizer_json(str(d / "tokenizer.json"))
    assert plain.stop_token_ids == [TINY_EOS]
    (d / "generation_config.json").write_text(json.dumps({"eos_token_id": [TINY_EOS, TINY_TOOL]}))
    info = constrain.TokenizerInfo.from_tokenizer_json(str(d / "tokenizer.json"), vocab_size=TINY_WIDTH)
    assert info.stop_token_ids == [TINY_EOS, TINY_TOOL]
    m = constrain.Matcher(constrain.Compiler(info).compile_regex("(yes|no)"))
    assert m.accept_token(YES) and m.accept_token(TINY_TOOL) and m.is_terminated()
    (d / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|no_such_token|>"}))
    with pytest.raises(ValueError, match="no_such_token"):
        constrain.TokenizerInfo.from_tokenizer_json(str(d / "tokenizer.json"))


def test_eager_and_lazy_compiles_agree(tiny_info, tiny_tok):
    """Compiler(lazy_states=None) builds every mask up front; the default
    builds big automata on demand: the masks are the same."""
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}},
              "required": ["a"]}
    eager = constrain.Compiler(tiny_info, lazy_states=None).compile_json_schema(schema)
    lazy = constrain.Compiler(tiny_info, lazy_states=1).compile_json_schema(schema)
    assert lazy.is_lazy and not eager.is_lazy
    text = tiny_tok.encode('{"a":12,"b":true}')
    me, ml = constrain.Matcher(eager), constrain.Matcher(lazy)
    for t in text:
        assert mask(me) == mask(ml)
        assert me.accept_token(t) and ml.accept_token(t)
    assert mask(me) == mask(ml) == [TINY_EOS]
    with pytest.raises((OverflowError, TypeError)):
        constrain.Compiler(tiny_info, lazy_states=-1)
