"""Batch fill against single fills: ``fill_next_token_bitmask_batch`` of
``--rows`` matchers (default 64) into one bitmask, against the same rows
filled one ``fill_next_token_bitmask`` call at a time (Qwen vocabulary,
logits width 151,936). The target: batch <= rows x single / cores.

    python bench/batch_fill.py [--rows 64] [--reps 400] [--gap-us N] [--tokenizer PATH] [--corpus DIR]

The matchers stand at different points of valid instances of a few
MaskBench dev schemas (so their masks differ, some sparse, some dense, as in
a serving batch). Prints the p50 and p10 (ns) of both over ``--reps``
alternating repetitions, the ratio, the target, the number of CPUs this
process may run on and the 1-minute load average (on a shared machine the
parallel fill can only be as fast as the idle cores allow), and the worker
pool's counters (how many batches a worker joined, how many rows it filled,
how often it went to sleep). ``--gap-us N`` sleeps N µs before every batch
fill, as a serving loop waits for the model's forward pass between two fills:
past the workers' spin window (``CONSTRAIN_FILL_SPIN_US``, default 200) they
are asleep when a batch comes, and each batch pays a wake-up. ``--batch-only``
times batch fills back to back (the single fills run once, for the check;
compare runs with ``CONSTRAIN_FILL_THREADS=1`` and without). Set ``CONSTRAIN_FILL_THREADS`` to
pin the batch fill's thread count (1: the calling thread alone).
"""

import argparse
import json
import os
import pathlib
import sys
import time

import constrain

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
from conftest import QWEN_LOGITS, QWEN_TOKENIZER, SHARED, GreedyTokenizer  # noqa: E402

FILES = [
    "Github_easy---o10012.json",
    "MCPspec---JSONRPCNotification.json",
    "Kubernetes---kb_61_Normalized.json",
    "WashingtonPost---wp_88_Normalized.json",
]


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--reps", type=int, default=400)
    ap.add_argument("--gap-us", type=float, default=0.0)
    ap.add_argument("--batch-only", action="store_true")
    ap.add_argument("--corpus", default=str(SHARED / "maskbench-dev"))
    ap.add_argument("--tokenizer", default=str(QWEN_TOKENIZER))
    a = ap.parse_args()
    info = constrain.TokenizerInfo.from_tokenizer_json(a.tokenizer, vocab_size=QWEN_LOGITS)
    compiler = constrain.Compiler(info)
    tok = GreedyTokenizer(info)
    runs = []
    for name in FILES:
        doc = json.load(open(os.path.join(a.corpus, name)))
        compiled = compiler.compile_json_schema(doc["schema"], whitespace="flexible", strict=False)
        for case in doc["tests"]:
            if case["valid"]:
                runs.append((compiled, tok.encode(json.dumps(case["data"]))))
    matchers = []
    for i in range(a.rows):
        compiled, tokens = runs[i % len(runs)]
        m = constrain.Matcher(compiled)
        assert m.accept_tokens(tokens[: (i * 7) % (len(tokens) + 1)])
        matchers.append(m)
    bitmask = constrain.allocate_token_bitmask(a.rows, QWEN_LOGITS)
    check = constrain.allocate_token_bitmask(a.rows, QWEN_LOGITS)
    singles, batches = [], []
    clock = time.perf_counter_ns
    fill_batch = constrain.fill_next_token_bitmask_batch
    gap = a.gap_us / 1e6
    before = constrain._core._fill_stats()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for _ in range(a.reps):
        if gap:
            time.sleep(gap)
        run_singles = not a.batch_only or not singles
        t0 = clock()
        if run_singles:
            for i, m in enumerate(matchers):
                m.fill_next_token_bitmask(check, i)
        t1 = clock()
        if gap:
            time.sleep(gap)
        t2 = clock()
        fill_batch(matchers, bitmask)
        t3 = clock()
        if run_singles:
            singles.append(t1 - t0)
        batches.append(t3 - t2)
    after = constrain._core._fill_stats()
    got = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
    if bytes(memoryview(bitmask)) != bytes(memoryview(check)):
        sys.exit("error: the batch fill and the single fills differ")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    s50, b50 = pct(singles, 50), pct(batches, 50)
    s10, b10 = pct(singles, 10), pct(batches, 10)
    print(
        f"{a.rows} rows, width {QWEN_LOGITS}, {cores} CPUs, load average {os.getloadavg()[0]:.1f}"
        + (f", {a.gap_us:g} us before each fill" if gap else "")
    )
    print(f"single fills: p50 {s50} ns  p10 {s10} ns  ({s50 / a.rows:.0f} ns a row)")
    print(f"batch fill:   p50 {b50} ns  p10 {b10} ns  ({b50 / a.rows:.0f} ns a row)")
    d = {k: after[k] - before[k] for k in after}
    print(
        f"workers: joined {d['joined']} of {d['published']} batches offered, filled "
        f"{d['rows'] / max(1, a.reps):.1f} rows a batch; parked {d['parks']} times, woken {d['wakes']}; "
        f"this process ran on {got:.2f} CPUs on average (CPU time / wall time, workers included)"
    )
    print(
        f"batch / singles: p50 {b50 / s50:.2f}  p10 {b10 / s10:.2f}; "
        f"target <= 1/{cores} = {1 / cores:.2f}: p50 {'met' if b50 * cores <= s50 else 'missed'}"
    )


if __name__ == "__main__":
    main()
