"""``constrain serve`` against ``llama-server`` (the server half of scripts/bench-vs-llamacpp).

Each server runs alone on loopback, on the same GGUF with the same thread
count and 4 slots (``llama-server -m GGUF --parallel 4 -t 2 -c 4096``;
``constrain serve --model GGUF --parallel 4 --threads 2``), and gets the same
streamed chat requests: the system and user messages of the in-process bench
(one city per request, so the prompts differ after their common head), the
same JSON Schema as ``response_format`` (``json_schema``), temperature 0,
``max_tokens`` ``SERVER_MAX_TOKENS`` (default: ``MAX_TOKENS``). One warm-up
request first (page cache, the schema's compile or grammar, the prompt
head's cache), then one request alone, then 4 at once (started together
behind a barrier). Every answer must parse as JSON and validate against the
schema (a small validator for the keywords the schema uses); the count of
valid answers is printed with the figures.

The client is the Python standard library (``urllib``, one thread per
request). Definitions, as ``constrain bench-serve`` has them:

* time to first token (TTFT): from sending a request to its first chunk
  with content;
* aggregate decode tok/s: all requests' completion tokens after their
  first, over the decode wall time (the time during which at least one
  request was between its first chunk and its end);
* end-to-end tok/s: all completion tokens over the time from the first
  send to the last end.

Completion tokens are the ``usage`` each server reports (``stream_options``
``include_usage``). llama-server samples every token; so does ``constrain
serve --no-jump-forward``, which gives the compared rows. By default
constrain feeds the text the schema forces (its keys, its punctuation) in
multi-token passes before it samples (jump-forward): its first chunk then
comes before the prompt is even read, so its TTFT means nothing, and its
token rates count the forced tokens; the rows marked "jump-forward" are that
default, measured the same way, for what it buys. Each server runs with its
defaults otherwise. Nothing here depends on the crates: only the two binaries.
"""

import json
import math
import os
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

CITIES = ("Lisbon", "Porto", "Madrid", "Paris", "Rome", "Berlin", "Vienna", "Prague")
SYSTEM = "You are a helpful assistant."


def user_message(city):
    return (
        f"Describe a fictional person who lives in {city}: their name, age, email, three hobbies and "
        "their street address. Answer with one JSON object with the keys name, age, email, hobbies and "
        "address (street, city)."
    )


def valid(value, schema):
    """Whether ``value`` satisfies ``schema`` (type, properties, required, items)."""
    t = schema.get("type")
    kinds = {
        "object": lambda v: isinstance(v, dict),
        "array": lambda v: isinstance(v, list),
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
        "null": lambda v: v is None,
    }
    if t is not None and not kinds[t](value):
        return False
    if isinstance(value, dict):
        if any(k not in value for k in schema.get("required", [])):
            return False
        for k, sub in schema.get("properties", {}).items():
            if k in value and not valid(value[k], sub):
                return False
    if isinstance(value, list) and "items" in schema:
        return all(valid(v, schema["items"]) for v in value)
    return True


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A server process on loopback, its output in a log file."""

    def __init__(self, name, cmd, port, log):
        self.name, self.port, self.log = name, port, log
        self.out = open(log, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self.out, stderr=subprocess.STDOUT)
        deadline = time.time() + 600
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{name} exited ({self.proc.returncode}) before it was ready; see {log}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            if time.time() > deadline:
                self.close()
                raise RuntimeError(f"{name} not ready after 600 s; see {log}")
            time.sleep(0.5)

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.out.close()


def chat(port, city, schema, max_tokens):
    """One streamed request; its times, text and completion tokens."""
    body = {
        "model": "qwen",
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user_message(city)}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "person", "schema": schema, "strict": True}},
        "temperature": 0,
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    sent = time.perf_counter()
    first = None
    text, chunks, usage = [], 0, None
    with urllib.request.urlopen(req, timeout=1200) as r:
        for raw in r:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            ev = json.loads(data)
            if ev.get("usage"):
                usage = ev["usage"]
            for ch in ev.get("choices") or []:
                piece = (ch.get("delta") or {}).get("content")
                if piece:
                    if first is None:
                        first = time.perf_counter()
                    text.append(piece)
                    chunks += 1
    end = time.perf_counter()
    text = "".join(text)
    tokens = usage["completion_tokens"] if usage else chunks
    try:
        ok = valid(json.loads(text), schema)
    except ValueError:
        ok = False
    return dict(sent=sent, first=first or end, end=end, tokens=tokens, text=text, valid=ok)


def batch(port, cities, schema, max_tokens):
    """Sends one request per city at once; the results and their figures."""
    results = [None] * len(cities)
    errors = []
    gate = threading.Barrier(len(cities))

    def one(i):
        gate.wait()
        try:
            results[i] = chat(port, cities[i], schema, max_tokens)
        except Exception as e:  # noqa: BLE001 -- reported below
            errors.append(f"{cities[i]}: {e}")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(cities))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError("; ".join(errors))
    return figures(results)


def nearest_rank(values, p):
    values = sorted(values)
    return values[max(0, math.ceil(p * len(values)) - 1)]


def figures(results):
    # Decode wall time: the union of the [first chunk, end] intervals.
    spans = sorted((r["first"], r["end"]) for r in results)
    wall, cur_s, cur_e = 0.0, None, None
    for s, e in spans:
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                wall += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    wall += cur_e - cur_s
    ttft = [r["first"] - r["sent"] for r in results]
    total = sum(r["tokens"] for r in results)
    return dict(
        n=len(results),
        tokens=total,
        decode=sum(r["tokens"] - 1 for r in results) / max(wall, 1e-9),
        e2e=total / max(max(r["end"] for r in results) - min(r["sent"] for r in results), 1e-9),
        ttft50=nearest_rank(ttft, 0.5),
        ttft99=nearest_rank(ttft, 0.99),
        valid=sum(r["valid"] for r in results),
        texts=[r["text"] for r in results],
    )


def measure(name, cmd, port, log, schema, max_tokens, concurrency=4):
    """Starts the server, warms it, then one request alone and `concurrency` at once."""
    server = Server(name, cmd, port, log)
    try:
        batch(port, [CITIES[-1]], schema, max_tokens)  # warm-up
        single = batch(port, [CITIES[0]], schema, max_tokens)
        many = batch(port, list(CITIES[:concurrency]), schema, max_tokens)
    finally:
        server.close()
    return dict(single=single, many=many)


def run_both(llama_server, constrain_bin, gguf, threads, schema, max_tokens, log_dir, runs=1, concurrency=4):
    """The servers in turn (llama-server, constrain serve --no-jump-forward,
    constrain serve), `runs` times alternating; the median run of each by
    aggregate decode rate at `concurrency`."""
    runs_of = {"llama": [], "constrain": [], "constrain-jf": []}
    for _ in range(runs):
        port = free_port()
        runs_of["llama"].append(measure(
            "llama-server",
            [str(llama_server), "-m", str(gguf), "--parallel", str(concurrency), "-t", str(threads),
             "-tb", str(threads), "-c", "4096", "--host", "127.0.0.1", "--port", str(port)],
            port, log_dir / "llama-server.log", schema, max_tokens, concurrency,
        ))
        for key, extra in (("constrain", ["--no-jump-forward"]), ("constrain-jf", [])):
            port = free_port()
            runs_of[key].append(measure(
                "constrain serve",
                [str(constrain_bin), "serve", "--model", str(gguf), "--parallel", str(concurrency),
                 "--threads", str(threads), "--host", "127.0.0.1", "--port", str(port)] + extra,
                port, log_dir / f"{key}-serve.log", schema, max_tokens, concurrency,
            ))

    def median(rs):
        rs = sorted(rs, key=lambda r: r["many"]["decode"])
        return rs[len(rs) // 2]

    return median(runs_of["constrain"]), median(runs_of["llama"]), median(runs_of["constrain-jf"])


def rows(c, l, jf, concurrency=4):
    """The table rows: (label, constrain, llama.cpp, ratio or ''); `jf` is
    constrain with jump-forward (its default)."""
    out = []
    cs, cm, ls, lm = c["single"], c["many"], l["single"], l["many"]
    ratio = lambda a, b: f"{a / b:.2f}×" if b else ""  # noqa: E731
    out.append((f"serve, 1 request: decode tok/s ({cs['tokens']} / {ls['tokens']} tokens)",
                f"{cs['decode']:.1f}", f"{ls['decode']:.1f}", ratio(cs["decode"], ls["decode"])))
    out.append((f"serve, {concurrency} concurrent: aggregate decode tok/s ({cm['tokens']} / {lm['tokens']} tokens)",
                f"{cm['decode']:.1f}", f"{lm['decode']:.1f}", ratio(cm["decode"], lm["decode"])))
    out.append((f"serve, {concurrency} concurrent ÷ 1 request, decode",
                f"{cm['decode'] / cs['decode']:.2f}×", f"{lm['decode'] / ls['decode']:.2f}×", ""))
    out.append((f"serve, {concurrency} concurrent: end-to-end tok/s",
                f"{cm['e2e']:.1f}", f"{lm['e2e']:.1f}", ratio(cm["e2e"], lm["e2e"])))
    out.append((f"serve, {concurrency} concurrent ÷ 1 request, end-to-end",
                f"{cm['e2e'] / cs['e2e']:.2f}×", f"{lm['e2e'] / ls['e2e']:.2f}×", ""))
    out.append(("serve, 1 request: time to first token",
                f"{1000 * cs['ttft50']:.0f} ms", f"{1000 * ls['ttft50']:.0f} ms", ratio(cs["ttft50"], ls["ttft50"])))
    out.append((f"serve, {concurrency} concurrent: time to first token p50",
                f"{1000 * cm['ttft50']:.0f} ms", f"{1000 * lm['ttft50']:.0f} ms", ratio(cm["ttft50"], lm["ttft50"])))
    out.append((f"serve, {concurrency} concurrent: time to first token p99",
                f"{1000 * cm['ttft99']:.0f} ms", f"{1000 * lm['ttft99']:.0f} ms", ratio(cm["ttft99"], lm["ttft99"])))
    js, jm = jf["single"], jf["many"]
    out.append((f"serve, jump-forward, 1 request: end-to-end tok/s ({js['tokens']} tokens)",
                f"{js['e2e']:.1f}", f"{ls['e2e']:.1f}", ratio(js["e2e"], ls["e2e"])))
    out.append((f"serve, jump-forward, {concurrency} concurrent: end-to-end tok/s ({jm['tokens']} tokens)",
                f"{jm['e2e']:.1f}", f"{lm['e2e']:.1f}", ratio(jm["e2e"], lm["e2e"])))
    out.append(("serve: answers valid under the schema",
                f"{cs['valid'] + cm['valid'] + js['valid'] + jm['valid']} / {cs['n'] + cm['n'] + js['n'] + jm['n']}",
                f"{ls['valid'] + lm['valid']} / {ls['n'] + lm['n']}", ""))
    return out


if __name__ == "__main__":
    # Standalone: the server half alone (LLAMA_SERVER and the bench's settings).
    import pathlib
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).parent))
    import bench_llamacpp as b

    sys.exit(b.main(servers_only=True))
