"""The engine adapters against test doubles of the engines' documented
interfaces (tests/doubles; torch, vLLM and SGLang are not installed here):
generation loops with random logits whose outputs must parse and validate."""

import json
import pathlib
import sys

import numpy as np
import pytest

import constrain
from conftest import sglang_backend, TINY_EOS, TINY_WIDTH

sys.path.insert(0, str(pathlib.Path(__file__).parent / "doubles"))

SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 0, "maximum": 99}},
    "required": ["ok", "n"],
}


def text_of(info, ids):
    return b"".join(info.token_bytes(t) or b"" for t in ids).decode()


def argmax_row(row):
    assert np.isfinite(row).any(), "every row keeps an allowed token"
    return int(np.argmax(row))


def test_hf_logits_processor(tiny_info, tiny_compiler):
    from constrain.hf import LogitsProcessor

    compiled = tiny_compiler.compile_json_schema(SCHEMA)
    rng = np.random.default_rng(7)
    for trial in range(5):
        proc = LogitsProcessor(compiled)
        prompt = rng.integers(0, 256, size=(3, 4))
        input_ids = prompt.copy()
        done = [False] * 3
        for _ in range(60):
            scores = rng.normal(size=(3, TINY_WIDTH)).astype(np.float32)
            scores[:, TINY_EOS] += 2.0  # a model eager to stop
            out = proc(input_ids, scores)
            assert out is scores
            nxt = []
            for i in range(3):
                if done[i]:
                    nxt.append(0)  # transformers' padding of finished rows
                    continue
                t = argmax_row(scores[i])
                done[i] = t == TINY_EOS
                nxt.append(t)
            input_ids = np.concatenate([input_ids, np.array(nxt)[:, None]], axis=1)
            if all(done):
                break
        assert all(done), "every row stopped within the budget"
        for i in range(3):
            gen = [int(t) for t in input_ids[i, 4:]]
            body = gen[: gen.index(TINY_EOS)]
            doc = json.loads(text_of(tiny_info, body))
            assert set(doc) == {"ok", "n"} and isinstance(doc["ok"], bool) and 0 <= doc["n"] <= 99
    with pytest.raises(ValueError, match="batch size changed"):
        proc(input_ids[:2], np.zeros((2, TINY_WIDTH), dtype=np.float32))


class SamplingParams:  # vLLM's, as far as the adapter reads it
    def __init__(self, extra_args=None, eos_token_id=None, stop_token_ids=None):
        self.extra_args = extra_args
        self.eos_token_id = eos_token_id  # vLLM leaves it None under ignore_eos
        self.stop_token_ids = stop_token_ids or []


class ModelConfig:
    def __init__(self, tokenizer_dir):
        self.tokenizer = str(tokenizer_dir)
        self.model = str(tokenizer_dir)

    def get_vocab_size(self):
        return TINY_WIDTH


class VllmConfig:
    def __init__(self, tokenizer_dir):
        self.model_config = ModelConfig(tokenizer_dir)


def test_vllm_logits_processor(tiny_info, tiny_path):
    from vllm.v1.sample.logits_processor import BatchUpdate, MoveDirectionality

    from constrain.vllm import ConstrainLogitsProcessor

    P = ConstrainLogitsProcessor
    P.validate_params(SamplingParams({"constrain_json": json.dumps(SCHEMA)}))
    P.validate_params(SamplingParams(None))
    with pytest.raises(ValueError, match="not valid JSON"):
        P.validate_params(SamplingParams({"constrain_json": "{"}))
    with pytest.raises(ValueError, match="one of"):
        P.validate_params(SamplingParams({"constrain_json": "{}", "constrain_regex": "a"}))
    with pytest.raises(ValueError, match="must be a string"):
        P.validate_params(SamplingParams({"constrain_regex": 3}))

    proc = P(VllmConfig(tiny_path.parent), device="cpu", is_pin_memory=False)
    assert not proc.is_argmax_invariant()
    rng = np.random.default_rng(3)
    # Row 0: a schema; row 1: unconstrained; row 2: a regex.
    outs = {0: [], 1: [], 2: []}
    proc.update_state(
        BatchUpdate(
            batch_size=3,
            removed=[],
            added=[
                (0, SamplingParams({"constrain_json": SCHEMA}), [1, 2], outs[0]),
                (1, SamplingParams(None), [3], outs[1]),
                (2, SamplingParams({"constrain_regex": "(yes|no)"}), [4], outs[2]),
            ],
            moved=[],
        )
    )
    order = [0, 1, 2]  # request at each row
    finished = set()
    for step in range(60):
        logits = rng.normal(size=(3, TINY_WIDTH)).astype(np.float32)
        logits[:, TINY_EOS] += 1.5
        proc.apply(logits)
        assert np.isfinite(logits[order.index(1)]).all(), "the unconstrained row is untouched"
        for row, req in enumerate(order):
            if req in finished:
                continue
            t = argmax_row(logits[row])
            outs[req].append(t)
            if t == TINY_EOS and req != 1:
                finished.add(req)
        update = None
        if step == 3:  # rows 0 and 2 swap places
            update = BatchUpdate(3, removed=[], added=[], moved=[(0, 2, MoveDirectionality.SWAP)])
            order[0], order[2] = order[2], order[0]
        proc.update_state(update)
        if {0, 2} <= finished:
            break
    assert {0, 2} <= finished
    doc = json.loads(text_of(tiny_info, outs[0][: outs[0].index(TINY_EOS)]))
    assert set(doc) == {"ok", "n"}
    assert text_of(tiny_info, outs[2][: outs[2].index(TINY_EOS)]) in ("yes", "no")
    # Removing a request forgets it; a new one at the same row starts fresh.
    fresh = []
    proc.update_state(
        BatchUpdate(3, removed=[order.index(2)], added=[(order.index(2), SamplingParams({"constrain_regex": "no"}), [], fresh)], moved=[])
    )
    logits = np.zeros((3, TINY_WIDTH), dtype=np.float32)
    proc.apply(logits)
    allowed = np.flatnonzero(np.isfinite(logits[order.index(2)]))
    assert list(allowed) == [ord("n"), 256 + 1], "only 'n' and 'no' start the new request"
    # A constraint that does not compile (found only here: validate_params has
    # no tokenizer) ends its request at once and leaves the others alone.
    bad = []
    row = order.index(0)
    proc.update_state(
        BatchUpdate(3, removed=[row], added=[(row, SamplingParams({"constrain_regex": "(unclosed"}), [], bad)], moved=[])
    )
    logits = np.zeros((3, TINY_WIDTH), dtype=np.float32)
    proc.apply(logits)
    allowed = np.flatnonzero(np.isfinite(logits[row]))
    assert list(allowed) == sorted(tiny_info.stop_token_ids), "only the stop tokens"
    assert np.isfinite(logits[order.index(1)]).all(), "the unconstrained row is untouched"
    assert list(np.flatnonzero(np.isfinite(logits[order.index(2)]))) == [ord("n"), 256 + 1]


def test_sglang_grammar_backend(tiny_info, tiny_path, tiny_tok):
    base, backend = sglang_backend(tiny_path, TINY_WIDTH)
    assert not isinstance(backend._init_value_dispatch(("ebnf", 'root ::= "a"'), False), base.InvalidGrammarObject)
    assert isinstance(backend._init_value_dispatch(("ebnf", 'root ::= ("a"'), False), base.InvalidGrammarObject)
    assert isinstance(backend._init_value_dispatch(("json", '{"type": "nope"}'), False), base.InvalidGrammarObject)
    grammar = backend._init_value_dispatch(("json", json.dumps(SCHEMA)), False)
    assert not isinstance(grammar, base.InvalidGrammarObject)
    assert not isinstance(backend._init_value_dispatch(("json", "$$ANY$$"), False), base.InvalidGrammarObject)

    # The scheduler's loop: jump forward where the text is forced, else
    # allocate / fill / move / apply the mask, sample, accept.
    rng = np.random.default_rng(11)
    out = []
    mask = grammar.allocate_vocab_mask(TINY_WIDTH, 2, "cpu")
    jumps = 0
    for _ in range(80):
        if grammar.is_terminated():
            break
        helper = grammar.try_jump_forward(None)
        if helper is not None:
            s, state = grammar.jump_forward_str_state(helper)
            # SGLang re-tokenizes the decoded text plus the forced string.
            old = list(out)
            prefix = b"".join(tiny_info.token_bytes(t) for t in out)
            new = tiny_tok.encode(prefix + s.encode())
            grammar.jump_and_retokenize(old, new, state)
            out = new
            jumps += 1
            continue
        grammar.fill_vocab_mask(mask, 1)
        dev_mask = grammar.move_vocab_mask(mask, "cpu")
        logits = rng.normal(size=(2, TINY_WIDTH)).astype(np.float32)
        logits[:, TINY_EOS] += 1.0
        grammar.apply_vocab_mask(logits[1:], dev_mask[1:])
        t = argmax_row(logits[1])
        grammar.accept_token(t)
        if t != TINY_EOS:
            out.append(t)
    assert grammar.is_terminated() and jumps > 0
    doc = json.loads(text_of(tiny_info, out))
    assert set(doc) == {"ok", "n"}

    # Rollback (speculative decoding) and copy (a cached grammar, fresh state).
    g2 = grammar.copy()
    first = tiny_tok.encode('{"ok":true')
    for t in first:
        g2.accept_token(t)
    g2.rollback(2)
    g2.accept_token(first[-2])
    g2.accept_token(first[-1])
    with pytest.raises(ValueError, match="not allowed"):
        g2.accept_token(ord("{"))


def test_vllm_ends_on_the_requests_own_stop_tokens(tiny_info, tiny_path):
    """vLLM ends a request on its EOS and stop_token_ids only (the model's,
    which can be fewer than the tokenizer's stop tokens): where the document
    may end, the row allows those; a finished document whose request vLLM
    goes on with allows only stop tokens, never everything."""
    from vllm.v1.sample.logits_processor import BatchUpdate

    from constrain.vllm import ConstrainLogitsProcessor

    proc = ConstrainLogitsProcessor(VllmConfig(tiny_path.parent), device="cpu", is_pin_memory=False)
    own = 200  # a token the request's vLLM stops on, not a stop token of the tokenizer
    a, b = [], []
    proc.update_state(
        BatchUpdate(
            2,
            removed=[],
            added=[
                (0, SamplingParams({"constrain_regex": "no"}, stop_token_ids=[own]), [], a),
                (1, SamplingParams({"constrain_regex": "no"}), [], b),  # ignore_eos: no EOS
            ],
            moved=[],
        )
    )

    def allowed():
        logits = np.zeros((2, TINY_WIDTH), dtype=np.float32)
        proc.apply(logits)
        return [list(np.flatnonzero(np.isfinite(row))) for row in logits]

    a.append(256 + 1)  # "no"
    b.append(256 + 1)
    proc.update_state(None)
    ends = allowed()
    assert ends[0] == [own], "the request's own stop token, not the tokenizer's"
    assert ends[1] == sorted(tiny_info.stop_token_ids)
    a.append(own)
    b.append(TINY_EOS)  # vLLM does not stop here; the row must stay closed
    proc.update_state(None)
    assert proc.requests[0].matcher.is_terminated() and not proc.requests[0].failed
    after = allowed()
    assert after[0] == [own] and after[1] == sorted(tiny_info.stop_token_ids)
