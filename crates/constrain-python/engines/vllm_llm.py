"""``vllm.LLM`` on the CPU with constrain's logits processor, run by
``engines_vllm.py`` in a child process (``python vllm_llm.py MODEL_DIR
DTYPE``) under the vLLM venv; prints ``OK <detail>`` on success, else the
failure on stderr and a nonzero exit.

The engine core runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``),
so the check can count the processor instances the engine built: the wheel's
``vllm.logits_processors`` entry point loads ``ConstrainLogitsProcessor``
into every engine, no ``logits_processors=`` needed (giving it as well would
load a second copy doing the same work).

1. ``LLM.generate``: a batch of 8 requests, JSON Schema, regex, Lark, a
   structural tag and unconstrained ones mixed, each within its
   ``max_tokens``; every constrained output ends with ``finish_reason ==
   "stop"`` and validates.
2. ``LLMEngine`` stepped by hand: requests added while others decode, one
   aborted mid-batch, others ending at different steps; a malformed
   ``vllm_xargs`` refused by ``add_request`` for that request alone; a regex
   that does not compile ending its own request at once (empty output) while
   the rest go on and validate.
"""

import json
import re
import sys

import jsonschema

from engine_schemas import FLAGS, PERSON

TAG = {
    "type": "structural_tag",
    "format": {"type": "tag", "begin": "<n>", "content": {"type": "json_schema", "json_schema": {"type": "integer", "minimum": 0, "maximum": 999}}, "end": "</n>"},
}


def tag_ok(text):
    m = re.fullmatch(r"<n>(.*)</n>", text, re.S)
    assert m, text
    assert 0 <= json.loads(m.group(1)) <= 999, text


# (extra_args or None, prompt, max_tokens, validate(text))
CASES = [
    ({"constrain_json": json.dumps(PERSON)}, "A person as JSON:", 96, lambda t: jsonschema.validate(json.loads(t), PERSON)),
    (None, "Tell me a story.", 12, None),
    ({"constrain_regex": "(yes|no)-[0-9]{2}"}, "Yes or no, and a number?", 16, lambda t: re.fullmatch("(yes|no)-[0-9]{2}", t) or 1 / 0),
    ({"constrain_grammar": 'start: "id-" /[0-9]{3}/ ("," "id-" /[0-9]{3}/)?'}, "Some ids:", 32, lambda t: re.fullmatch(r"id-\d{3}(,id-\d{3})?", t) or 1 / 0),
    ({"constrain_json": json.dumps(FLAGS)}, "Flags as JSON:", 64, lambda t: jsonschema.validate(json.loads(t), FLAGS)),
    (None, "Hello", 5, None),
    ({"constrain_structural_tag": json.dumps(TAG)}, "A number in a tag:", 32, tag_ok),
    ({"constrain_regex": "[a-c]{2,4}"}, "Letters:", 16, lambda t: re.fullmatch("[a-c]{2,4}", t) or 1 / 0),
]


def params(SamplingParams, case, i, greedy):
    xargs, _, max_tokens, _ = case
    t = 0.0 if greedy and i % 2 == 0 else 0.8
    return SamplingParams(max_tokens=max_tokens, temperature=t, seed=100 + i, extra_args=dict(xargs) if xargs else None)


def check(case, out, where):
    xargs, _, max_tokens, validate = case
    o = out.outputs[0]
    assert len(o.token_ids) <= max_tokens, (where, len(o.token_ids))
    if xargs is None:
        return 0
    assert o.finish_reason == "stop", f"{where}: {o.finish_reason} after {len(o.token_ids)} tokens: {o.text!r}"
    try:
        validate(o.text)
    except Exception as e:
        raise AssertionError(f"{where}: {o.text!r} does not validate: {e}") from None
    return 1


def main():
    model, dtype, greedy = sys.argv[1], sys.argv[2], sys.argv[3] == "greedy"
    from vllm import LLM, SamplingParams
    from vllm.exceptions import VLLMValidationError

    from constrain.vllm import ConstrainLogitsProcessor

    llm = LLM(model=model, dtype=dtype, max_model_len=512, enforce_eager=True, seed=0, max_num_seqs=8)
    # The in-process engine's persistent batch and its logits processors.
    worker = llm.llm_engine.engine_core.engine_core.model_executor.driver_worker
    batch = getattr(worker, "worker", worker).model_runner.input_batch
    procs = [p for p in batch.logitsprocs.all if isinstance(p, ConstrainLogitsProcessor)]
    assert len(procs) == 1, f"{len(procs)} ConstrainLogitsProcessor instances in the engine"

    # 1. a batch of 8, constraints mixed
    outs = llm.generate([c[1] for c in CASES], [params(SamplingParams, c, i, greedy) for i, c in enumerate(CASES)], use_tqdm=False)
    valid = sum(check(c, o, f"batch row {i}") for i, (c, o) in enumerate(zip(CASES, outs)))
    samples = [o.outputs[0].text for c, o in zip(CASES, outs) if c[0]][:3]

    # 2. the engine stepped by hand
    engine = llm.llm_engine
    first, later = CASES[:5], CASES[5:]
    for i, c in enumerate(first):
        engine.add_request(f"s{i}", c[1], params(SamplingParams, c, i, greedy))
    done, steps, refused = {}, 0, None
    while engine.has_unfinished_requests() and steps < 400:
        for out in engine.step():
            if out.finished:
                done[out.request_id] = out
        steps += 1
        if steps == 2:
            for i, c in enumerate(later, start=len(first)):
                engine.add_request(f"s{i}", c[1], params(SamplingParams, c, i, greedy))
            try:
                engine.add_request("bad", "x", SamplingParams(max_tokens=8, extra_args={"constrain_json": "{not json"}))
            except (ValueError, VLLMValidationError) as e:
                refused = f"{type(e).__name__}: {e}"
            engine.add_request("nocompile", "x", SamplingParams(max_tokens=8, extra_args={"constrain_regex": "(unclosed"}))
        if steps == 3:
            engine.abort_request(["s1"])  # an unconstrained request leaves mid-batch
    assert refused and "not valid JSON" in refused, f"the malformed vllm_xargs was not refused: {refused!r}"
    assert "bad" not in done
    nc = done["nocompile"].outputs[0]
    assert nc.token_ids == [] or nc.text == "", f"the request whose regex does not compile produced {nc.text!r}"
    stepped = 0
    for i, c in enumerate(CASES):
        if i == 1:
            continue  # aborted
        stepped += check(c, done[f"s{i}"], f"stepped request {i}")
    print(
        f"OK {valid}/6 in a batch of 8 and {stepped}/6 stepped ({steps} steps, 3 added mid-batch, 1 aborted,"
        f" malformed vllm_xargs refused alone ({refused.split(':')[0]}), a regex that does not compile ended alone); e.g. "
        + " | ".join(s[:30] for s in samples)
    )


if __name__ == "__main__":
    main()
