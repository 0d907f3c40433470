"""constrain against llama.cpp on the same GGUF (scripts/bench-vs-llamacpp).

Both engines run the same raw ChatML prompt on the same model file with the
same thread count, greedy, in turn (never at once): prefill tok/s, decode
tok/s unconstrained and under one JSON Schema (llama.cpp: its
``json_schema_to_grammar`` + GBNF sampler, through llama-cpp-python's
``LlamaGrammar.from_json_schema``; constrain: ``constrain
--schema``), and the time to the first token. llama.cpp's prefill and decode
rates come from its own perf counters (``llama_perf_context``), its time to
the first token from the first streamed chunk; constrain's rates from the
figures ``constrain`` prints, its time to the first token from the
first byte of ``--stream`` output after the model is loaded (the load line).
Free text is constrain under the regex ``(?s).*`` (any text). Jump-forward is off for constrain (``--no-jump-forward``): every token is a
decoded token, as in llama.cpp.

Then the servers (``bench_servers.py``): ``llama-server --parallel 4``
(``LLAMA_SERVER``, built by the script from the same llama.cpp source)
against ``constrain serve --parallel 4``, one request alone and 4 at once
under the same JSON Schema; ``SERVERS=0`` leaves them out, and they are
skipped with a message when ``LLAMA_SERVER`` is not an executable.
"""

import json
import os
import pathlib
import re
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

ROOT = pathlib.Path(__file__).resolve().parents[3]
CACHE = pathlib.Path(os.environ.get("CONSTRAIN_CACHE", pathlib.Path.home() / ".cache" / "constrain"))
GGUF = pathlib.Path(os.environ.get("GGUF", CACHE / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"))
THREADS = int(os.environ.get("THREADS", "2"))
MAX_TOKENS = int(os.environ.get("MAX_TOKENS", "96"))
RUNS = int(os.environ.get("RUNS", "2"))
BIN = pathlib.Path(os.environ.get("CONSTRAIN_BIN", ROOT / "target" / "release" / "constrain"))
LLAMA_CPP_PYTHON = "0.3.36"  # the pin in scripts/bench-vs-llamacpp
LLAMA_SERVER = os.environ.get("LLAMA_SERVER", "")
SERVERS = os.environ.get("SERVERS", "1") != "0"
SERVER_MAX_TOKENS = int(os.environ.get("SERVER_MAX_TOKENS", "160"))
CONCURRENCY = int(os.environ.get("CONCURRENCY", "4"))

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "email": {"type": "string"},
        "hobbies": {"type": "array", "items": {"type": "string"}},
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
            "required": ["street", "city"],
        },
    },
    "required": ["name", "age", "email", "hobbies", "address"],
}
USER = (
    "Describe a fictional person who lives in Lisbon: their name, age, email, three hobbies and "
    "their street address. Answer with one JSON object with the keys name, age, email, hobbies and "
    "address (street, city)."
)
PROMPT = (
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    f"<|im_start|>user\n{USER}<|im_end|>\n<|im_start|>assistant\n"
)


def constrain_run(schema_file):
    cmd = [
        str(BIN), "--raw", "--prompt", PROMPT, "--model", str(GGUF), "--threads", str(THREADS),
        "--greedy", "--max-tokens", str(MAX_TOKENS), "--stream", "--no-jump-forward",
    ]
    # Free text: the regex of any text (constrain always runs a constraint).
    cmd += ["--schema", str(schema_file)] if schema_file else ["--regex", "(?s).*"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # The load line comes on stderr before generation starts.
    loaded_at = None
    err_lines = []
    while True:
        line = p.stderr.readline()
        if not line:
            break
        err_lines.append(line.decode(errors="replace"))
        if line.startswith(b"loaded "):
            loaded_at = time.perf_counter()
            break
    first = p.stdout.read(1)
    t_first = time.perf_counter()
    out = first + p.stdout.read()
    err = "".join(err_lines) + p.stderr.read().decode(errors="replace")
    if p.wait() != 0 or loaded_at is None:
        raise SystemExit(f"constrain failed ({p.returncode}): {err.strip()[-600:]}")
    m = re.search(r"(\d+) tokens \((\d+) forced.*prompt (\d+) tokens, prefill ([\d.]+) tok/s, decode ([\d.]+) tok/s", err)
    if not m:
        raise SystemExit(f"no figures in constrain's output: {err.strip()[-600:]}")
    n, _forced, prompt, prefill, decode = m.groups()
    text = out.decode(errors="replace").strip()
    if schema_file:
        json.loads(text)
    return dict(prompt=int(prompt), tokens=int(n), prefill=float(prefill), decode=float(decode), ttft=t_first - loaded_at, text=text)


def llama_load():
    from llama_cpp import Llama

    return Llama(model_path=str(GGUF), n_threads=THREADS, n_threads_batch=THREADS, n_ctx=1024, n_batch=512, verbose=False, seed=0)


def llama_run(llm, schema):
    import llama_cpp
    from llama_cpp import LlamaGrammar

    grammar = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False) if schema else None
    llm.reset()
    llama_cpp.llama_perf_context_reset(llm.ctx)
    t0 = time.perf_counter()
    ttft = None
    text = []
    for chunk in llm.create_completion(PROMPT, max_tokens=MAX_TOKENS, temperature=0.0, top_k=1, grammar=grammar, stream=True):
        if ttft is None:
            ttft = time.perf_counter() - t0
        text.append(chunk["choices"][0]["text"])
    perf = llama_cpp.llama_perf_context(llm.ctx)
    text = "".join(text).strip()
    if schema:
        json.loads(text)
    return dict(
        prompt=perf.n_p_eval,
        tokens=perf.n_eval + 1,
        prefill=1000.0 * perf.n_p_eval / perf.t_p_eval_ms,
        decode=1000.0 * perf.n_eval / perf.t_eval_ms if perf.n_eval else float("nan"),
        ttft=ttft,
        text=text,
    )


def best(runs):
    """The median run by decode rate (RUNS runs each)."""
    runs = sorted(runs, key=lambda r: r["decode"])
    return runs[len(runs) // 2]


def servers(out_dir):
    """The server rows, or None with the reason printed."""
    if not SERVERS:
        return None
    if not (LLAMA_SERVER and os.access(LLAMA_SERVER, os.X_OK)):
        print(f"skipping the servers: no llama-server binary ({LLAMA_SERVER or 'LLAMA_SERVER unset'}); "
              "its build log is target/llama-server-build.log", file=sys.stderr)
        return None
    import bench_servers

    try:
        return bench_servers.run_both(LLAMA_SERVER, BIN, GGUF, THREADS, SCHEMA, SERVER_MAX_TOKENS, out_dir,
                                      runs=RUNS, concurrency=CONCURRENCY)
    except Exception as e:  # noqa: BLE001 -- a server that fails is reported, the rest kept
        print(f"skipping the servers: {e}", file=sys.stderr)
        return None


def main(servers_only=False):
    if not GGUF.is_file():
        print(f"skipping: {GGUF} is absent (scripts/fetch-assets fetches it)")
        return 0
    schema_file = ROOT / "target" / "engines" / "bench-schema.json"
    schema_file.parent.mkdir(parents=True, exist_ok=True)
    schema_file.write_text(json.dumps(SCHEMA))
    rows = {}
    if not servers_only:
        llm = llama_load()
        for label, schema in (("free text", None), ("JSON Schema", SCHEMA)):
            c, l = [], []
            for _ in range(RUNS):  # alternate, so drift on a shared machine hits both
                l.append(llama_run(llm, schema))
                c.append(constrain_run(schema_file if schema else None))
            rows[label] = (best(c), best(l))
        del llm
    served = servers(schema_file.parent)
    if rows:
        import llama_cpp

        print(f"model {GGUF.name}, {THREADS} threads, greedy, max {MAX_TOKENS} tokens, median of {RUNS} runs; "
              f"llama.cpp via llama-cpp-python {llama_cpp.__version__}")
    if served:
        print(f"servers: model {GGUF.name}, {THREADS} threads, {CONCURRENCY} slots each, greedy, max "
              f"{SERVER_MAX_TOKENS} tokens, median of {RUNS} runs; llama-server built from the llama.cpp "
              f"that llama-cpp-python {LLAMA_CPP_PYTHON} vendors")
    print("| | constrain | llama.cpp | constrain ÷ llama.cpp |")
    print("|---|---|---|---|")
    if rows:
        c, l = rows["free text"]
        print(f"| prompt tokens | {c['prompt']} | {l['prompt']} | |")
        print(f"| prefill tok/s | {c['prefill']:.1f} | {l['prefill']:.1f} | {c['prefill'] / l['prefill']:.2f}× |")
    for label in rows:
        c, l = rows[label]
        print(f"| decode tok/s, {label} ({c['tokens']} / {l['tokens']} tokens) | {c['decode']:.1f} | {l['decode']:.1f} | {c['decode'] / l['decode']:.2f}× |")
        print(f"| time to first token, {label} | {1000 * c['ttft']:.0f} ms | {1000 * l['ttft']:.0f} ms | {c['ttft'] / l['ttft']:.2f}× |")
    if served:
        import bench_servers

        for cells in bench_servers.rows(*served, concurrency=CONCURRENCY):
            print("| " + " | ".join(cells) + " |")
    for label in rows:
        c, l = rows[label]
        print(f"{label}: constrain {c['text'][:70]!r}")
        print(f"{label}: llama.cpp {l['text'][:70]!r}")
    if served:
        for name, r in zip(("constrain serve", "llama-server", "constrain serve, jump-forward"), served):
            for text in r["many"]["texts"]:
                print(f"serve: {name} {text[:70]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
