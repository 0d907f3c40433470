"""vLLM checks for check_engines.py.

* ``vllm-classes``: the adapter against vLLM's own classes from the
  installed wheel (``LogitsProcessor``, ``BatchUpdate``,
  ``MoveDirectionality``, ``SamplingParams``) instead of the test doubles:
  a batch of 8 (JSON Schema, regex, Lark and unconstrained rows mixed),
  requests added, swapped, moved and removed mid-batch, a malformed
  ``vllm_xargs`` refused by ``validate_params`` and a constraint that does
  not compile ending its request alone; torch logits, as vLLM hands them.
* ``vllm-llm-tiny``: ``vllm.LLM`` in-process on the CPU with
  ``logits_processors=[ConstrainLogitsProcessor]`` on the tiny random-weight
  Qwen2 folder, 8 requests mixed; outputs validate. Run in a child process
  with a time limit (vLLM starts its engine core in processes of its own).
"""

import json
import os
import subprocess
import sys

SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 0, "maximum": 99}},
    "required": ["ok", "n"],
}


class _ModelConfig:
    """The one part of vLLM's ``ModelConfig`` the adapter reads (a real one
    needs a whole engine configuration)."""

    def __init__(self, model_dir, vocab_size):
        self.tokenizer = self.model = str(model_dir)
        self._vocab = vocab_size

    def get_vocab_size(self):
        return self._vocab


class _VllmConfig:
    def __init__(self, model_dir, vocab_size):
        self.model_config = _ModelConfig(model_dir, vocab_size)


def classes(need, Skip, tiny_model_dir, root):
    torch = need("torch")
    need("vllm")
    import jsonschema

    lp = need("vllm.v1.sample.logits_processor")
    from vllm import SamplingParams

    import constrain
    from constrain.vllm import ConstrainLogitsProcessor

    assert issubclass(ConstrainLogitsProcessor, lp.LogitsProcessor)
    assert lp.BatchUpdate.__module__.startswith("vllm"), "the real BatchUpdate, not the double"
    d = tiny_model_dir(root)
    V = 151936
    P = ConstrainLogitsProcessor
    P.validate_params(SamplingParams(extra_args={"constrain_json": json.dumps(SCHEMA)}))
    for bad, msg in [({"constrain_json": "{"}, "not valid JSON"), ({"constrain_json": "{}", "constrain_regex": "a"}, "one of")]:
        try:
            P.validate_params(SamplingParams(extra_args=bad))
        except ValueError as e:
            assert msg in str(e), e
        else:
            raise AssertionError(f"validate_params took {bad}")
    proc = P(_VllmConfig(d, V), device=torch.device("cpu"), is_pin_memory=False)
    info = proc.info
    stops = set(info.stop_token_ids)

    def text(ids):
        return b"".join(info.token_bytes(t) or b"" for t in ids).decode()

    kinds = [
        {"constrain_json": SCHEMA},
        None,
        {"constrain_regex": "(yes|no|maybe)"},
        {"constrain_grammar": 'start: "x" DIGIT DIGIT\n%import common.DIGIT'},
        {"constrain_json": json.dumps({"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 999}, "maxItems": 3})},
        None,
        {"constrain_regex": "[a-c]{2,4}"},
        {"constrain_json": SCHEMA},
    ]
    outs = [[] for _ in kinds]
    params = [SamplingParams(extra_args=k) for k in kinds]
    order = list(range(8))  # request at each row
    proc.update_state(lp.BatchUpdate(batch_size=8, removed=[], added=[(i, params[i], [1, 2], outs[i]) for i in range(8)], moved=[]))
    gen = torch.Generator().manual_seed(5)
    done = set()
    for step in range(200):
        live = [r for r in range(len(order)) if order[r] is not None and order[r] not in done]
        if not live:
            break
        logits = torch.randn(len(order), V, generator=gen)
        for s in stops:
            logits[:, s] += 2.0
        proc.apply(logits)
        for row, req in enumerate(order):
            if req is None or req in done:
                continue
            if kinds[req] is None:
                assert torch.isfinite(logits[row]).all(), "an unconstrained row is untouched"
                outs[req].append(int(torch.argmax(logits[row])))
                if len(outs[req]) >= 5:
                    done.add(req)
                continue
            t = int(torch.argmax(logits[row]))
            outs[req].append(t)
            if t in stops:
                done.add(req)
        update = None
        if step == 2:  # rows 0 and 7 swap
            update = lp.BatchUpdate(8, removed=[], added=[], moved=[(0, 7, lp.MoveDirectionality.SWAP)])
            order[0], order[7] = order[7], order[0]
        elif step == 4:  # row 5 (unconstrained) finishes; the last row moves into its place
            update = lp.BatchUpdate(
                7, removed=[5], added=[], moved=[(7, 5, lp.MoveDirectionality.UNIDIRECTIONAL)]
            )
            done.add(order[5])
            order[5] = order.pop(7)
        proc.update_state(update)
    checked = 0
    for req, k in enumerate(kinds):
        if k is None:
            continue
        assert req in done, f"request {req} did not finish"
        body = text(outs[req][:-1])
        if "constrain_json" in k:
            s = k["constrain_json"]
            jsonschema.validate(json.loads(body), json.loads(s) if isinstance(s, str) else s)
        elif "constrain_regex" in k:
            import re

            assert re.fullmatch(k["constrain_regex"], body), body
        else:
            assert len(body) == 3 and body[0] == "x" and body[1:].isdigit(), body
        checked += 1
    # A request added mid-batch whose constraint does not compile ends alone.
    bad = []
    proc.update_state(lp.BatchUpdate(len(order), removed=[0], added=[(0, SamplingParams(extra_args={"constrain_regex": "(unclosed"}), [], bad)], moved=[]))
    logits = torch.zeros(len(order), V)
    proc.apply(logits)
    assert torch.isfinite(logits[0]).nonzero().flatten().tolist() == sorted(stops)
    import vllm

    return f"vllm {vllm.__version__} classes: {checked} constrained rows of 8 valid across swap/move/remove"


CHILD = r"""
import json, os, re, sys
import jsonschema
from vllm import LLM, SamplingParams
from constrain.vllm import ConstrainLogitsProcessor
schema = json.loads(sys.argv[2])
llm = LLM(model=sys.argv[1], logits_processors=[ConstrainLogitsProcessor], dtype="float32",
          max_model_len=512, enforce_eager=True, seed=0)
kinds = [{"constrain_json": json.dumps(schema)}, None, {"constrain_regex": "(yes|no)"},
         {"constrain_grammar": 'start: "id-" /[0-9]{3}/'}] * 2
ps = [SamplingParams(max_tokens=120, temperature=0.8, seed=i, extra_args=k) for i, k in enumerate(kinds)]
outs = llm.generate(["Answer in JSON:", "Hello", "Yes or no?", "An id:"] * 2, ps)
n = 0
for k, o in zip(kinds, outs):
    text = o.outputs[0].text
    if k is None:
        continue
    if o.outputs[0].finish_reason != "stop":
        raise SystemExit(f"not finished: {o.outputs[0].finish_reason} {text!r}")
    if "constrain_json" in k:
        jsonschema.validate(json.loads(text), schema)
    elif "constrain_regex" in k:
        assert re.fullmatch("(yes|no)", text), text
    else:
        assert re.fullmatch("id-[0-9]{3}", text), text
    n += 1
print("OK", n)
"""


def llm_tiny(need, Skip, tiny_model_dir, root):
    need("vllm")
    d = tiny_model_dir(root)
    env = dict(os.environ, VLLM_TARGET_DEVICE="cpu", VLLM_CPU_KVCACHE_SPACE="1", CONSTRAIN_TOKENIZER_JSON=str(d / "tokenizer.json"))
    try:
        p = subprocess.run(
            [sys.executable, "-c", CHILD, str(d), json.dumps(SCHEMA)],
            capture_output=True, text=True, timeout=int(os.environ.get("CONSTRAIN_VLLM_TIMEOUT", "420")), env=env,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError("vllm.LLM did not finish in time") from None
    if p.returncode != 0 or "OK" not in p.stdout:
        lines = [l for l in (p.stderr + p.stdout).strip().splitlines() if l.strip()]
        err = [l for l in lines if "Error" in l or "error" in l]
        msg = (err[-1] if err else lines[-1] if lines else f"exit {p.returncode}")[:400]
        raise Skip(f"vllm.LLM did not run: {msg}")
    return f"vllm.LLM on CPU, 8 requests mixed: {p.stdout.split()[-1]} constrained outputs valid"


def run(check, Skip, need, root, tiny_model_dir):
    check("vllm-classes", classes, need, Skip, tiny_model_dir, root)
    check("vllm-llm-tiny", llm_tiny, need, Skip, tiny_model_dir, root)
