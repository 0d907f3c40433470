"""Per-step cost from Python: ``fill_next_token_bitmask`` + ``accept_token``
over MaskBench instances (Qwen vocabulary, logits width 151,936), and the
batch fill of 64 rows against 64 single fills.

    python bench/step_cost.py [--files N] [--every K] [--passes P] [--eager] [--corpus DIR] [--tokenizer PATH]

Prints p50/p90/p99 and the mean of the per-step time (ns) over every token
of every valid instance of the first N files (sorted by name; with
``--every K``, of every K-th file, so the sample spans all of MaskBench's
sources instead of the first one alphabetically, BFCL) whose schema compiles
with compliant semantics and flexible whitespace. Instances are tokenized by
longest match over the vocabulary (tests/conftest.py's GreedyTokenizer).

Pass 1 is every instance's first walk: with the default lazy compile
(``Compiler(lazy_states=128)``) a state's first visit computes its mask, so
its steps include that. ``--passes 2`` walks every instance again with new
matchers over the same compiled objects (the masks now computed: a step is a
mask copy plus the transition) and prints each pass. ``--eager`` compiles with
``lazy_states=None`` (every mask built up front, as XGrammar does).
"""

import argparse
import glob
import json
import os
import pathlib
import sys
import time

import constrain

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
from conftest import QWEN_LOGITS, QWEN_TOKENIZER, SHARED, GreedyTokenizer  # noqa: E402


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=100)
    ap.add_argument("--every", type=int, default=1, help="take every K-th file (sorted by name)")
    ap.add_argument("--passes", type=int, default=1)
    ap.add_argument("--eager", action="store_true")
    ap.add_argument("--corpus", default=str(SHARED / "maskbench-dev"))
    ap.add_argument("--tokenizer", default=str(QWEN_TOKENIZER))
    a = ap.parse_args()
    info = constrain.TokenizerInfo.from_tokenizer_json(a.tokenizer, vocab_size=QWEN_LOGITS)
    compiler = constrain.Compiler(info, lazy_states=None) if a.eager else constrain.Compiler(info)
    tok = GreedyTokenizer(info)
    bitmask = constrain.allocate_token_bitmask(1, QWEN_LOGITS)
    runs, files, skipped = [], 0, 0
    t0 = time.perf_counter()
    for path in sorted(glob.glob(os.path.join(a.corpus, "*.json")))[:: a.every]:
        if files >= a.files:
            break
        doc = json.load(open(path))
        valid = [t for t in doc["tests"] if t["valid"]]
        if not valid:
            continue
        try:
            compiled = compiler.compile_json_schema(doc["schema"], whitespace="flexible", strict=False)
        except constrain.CompileError:
            skipped += 1
            continue
        files += 1
        runs += [(compiled, tok.encode(json.dumps(case["data"]))) for case in valid]
    print(
        f"files {files} (schemas not compiled: {skipped}), compiled in {time.perf_counter() - t0:.1f} s"
        + (" (eager)" if a.eager else " (lazy_states=128)")
    )
    for p in range(1, a.passes + 1):
        steps, fill_only = [], []
        for compiled, tokens in runs:
            m = constrain.Matcher(compiled)
            fill, accept, clock = m.fill_next_token_bitmask, m.accept_token, time.perf_counter_ns
            for t in tokens:
                t0 = clock()
                fill(bitmask)
                t1 = clock()
                ok = accept(t)
                t2 = clock()
                if not ok:
                    break
                steps.append(t2 - t0)
                fill_only.append(t1 - t0)
        print(f"pass {p}: steps {len(steps)}")
        print(
            "  fill+accept ns: p50 %d  p90 %d  p99 %d  mean %d (total %.1f ms)"
            % (pct(steps, 50), pct(steps, 90), pct(steps, 99), sum(steps) // max(1, len(steps)), sum(steps) / 1e6)
        )
        print("  fill only ns:   p50 %d  p90 %d  p99 %d" % (pct(fill_only, 50), pct(fill_only, 90), pct(fill_only, 99)))

    # Batch: 64 matchers at different points of one instance.
    doc = json.load(open(os.path.join(a.corpus, "Github_easy---o10012.json")))
    compiled = compiler.compile_json_schema(doc["schema"], whitespace="flexible", strict=False)
    tokens = tok.encode(json.dumps(next(c for c in doc["tests"] if c["valid"])["data"]))
    matchers = []
    for i in range(64):
        m = constrain.Matcher(compiled)
        m.accept_tokens(tokens[: i % (len(tokens) + 1)])
        matchers.append(m)
    big = constrain.allocate_token_bitmask(64, QWEN_LOGITS)
    singles, batches = [], []
    for _ in range(200):
        t0 = time.perf_counter_ns()
        for i, m in enumerate(matchers):
            m.fill_next_token_bitmask(big, i)
        t1 = time.perf_counter_ns()
        constrain.fill_next_token_bitmask_batch(matchers, big)
        t2 = time.perf_counter_ns()
        singles.append(t1 - t0)
        batches.append(t2 - t1)
    print(
        "64 rows: single fills p50 %d ns, batch fill p50 %d ns (%d cores)"
        % (pct(singles, 50), pct(batches, 50), os.cpu_count())
    )


if __name__ == "__main__":
    main()
