"""On the real Qwen vocabulary and MaskBench dev files: the bitmasks the
Python API fills are the Rust core's masks (decoded independently), valid
instances are accepted and invalid ones rejected (``jsonschema`` from PyPI is
the oracle), rollback then re-accept reproduces the masks, and one compiled
object serves matchers on four threads."""

import json
import threading

import numpy as np
import pytest

import constrain
from conftest import QWEN_LOGITS, SHARED, allowed_ids

jsonschema = pytest.importorskip("jsonschema", reason="skipping: jsonschema is not installed")

# Small MaskBench dev files with valid and invalid instances, chosen once
# (the first Github_easy files with both kinds of instance whose schema
# compiles under compliant semantics and flexible whitespace, and one file of
# each other family).
FILES = [
    "Github_easy---o10011.json",
    "Github_easy---o10012.json",
    "Github_easy---o10014.json",
    "Github_easy---o10065.json",
    "Github_easy---o10086.json",
    "BFCL_java_0.json",
    "Glaiveai2K---calculate_area_00ff2c76.json",
    "BFCL_simple_10.json",
    "JME_0.json",
]
MAX_CHECKED_STEPS = 80  # mask comparisons per instance (each decodes ~150k bits)


def load(name):
    path = SHARED / "maskbench-dev" / name
    if not path.exists():
        pytest.skip(f"skipping: {path} is absent (the MaskBench dev half lives in ../shared)")
    return json.loads(path.read_text())


def compile_file(qwen_compiler, doc):
    return qwen_compiler.compile_json_schema(doc["schema"], whitespace="flexible", strict=False)


def walk(compiled, tokens, check_masks, stop_ids):
    """Feeds `tokens` then a stop token; returns (accepted, steps checked).
    At every checked step the filled bitmask must equal the core's mask and
    contain the next token exactly when it is accepted."""
    m = constrain.Matcher(compiled)
    bm = constrain.allocate_token_bitmask(2, QWEN_LOGITS)
    checked = 0
    every = max(1, len(tokens) // MAX_CHECKED_STEPS)
    for i, t in enumerate(tokens + [None]):
        if check_masks and (i % every == 0 or t is None):
            m.fill_next_token_bitmask(bm, 1)
            got = allowed_ids(bm[1], QWEN_LOGITS)
            assert got == compiled._core_allowed(tokens[:i]), f"mask differs at step {i}"
            assert all(g < 151_669 or g in stop_ids for g in got), "padding ids never allowed"
            checked += 1
            if t is not None:
                in_mask = (int(bm[1, t // 32]) >> (t % 32)) & 1 == 1
                assert in_mask == (m.validate_tokens([t]) == 1)
        if t is None:
            break
        if not m.accept_token(t):
            return False, checked
    stop_ok = m.accept_token(stop_ids[0])
    return stop_ok and m.is_terminated(), checked


@pytest.mark.parametrize("name", FILES)
def test_maskbench_masks_and_oracle(name, qwen_info, qwen_compiler, qwen_tok):
    doc = load(name)
    compiled = compile_file(qwen_compiler, doc)
    validator = jsonschema.validators.validator_for(doc["schema"])(doc["schema"])
    assert doc["tests"], name
    stop_ids = qwen_info.stop_token_ids
    for case in doc["tests"]:
        text = json.dumps(case["data"])
        valid = validator.is_valid(case["data"])
        assert valid == case["valid"], f"{name}: the oracle disagrees with MaskBench on {text}"
        tokens = qwen_tok.encode(text)
        accepted, checked = walk(compiled, tokens, case["valid"], stop_ids)
        assert accepted == valid, f"{name}: {'valid' if valid else 'invalid'} {text} was {'accepted' if accepted else 'rejected'}"
        if valid:
            assert checked > 0


def test_rollback_then_reaccept_reproduces_masks(qwen_compiler, qwen_tok):
    doc = load("Github_easy---o10011.json")
    compiled = compile_file(qwen_compiler, doc)
    case = next(c for c in doc["tests"] if c["valid"])
    tokens = qwen_tok.encode(json.dumps(case["data"]))
    m = constrain.Matcher(compiled, max_rollback_tokens=len(tokens))
    bm = constrain.allocate_token_bitmask(1, QWEN_LOGITS)
    masks = []
    for t in tokens:
        m.fill_next_token_bitmask(bm)
        masks.append(bm.copy())
        assert m.accept_token(t)
    for k in (1, 3, len(tokens) // 2, len(tokens)):
        m.rollback(k)
        for i in range(len(tokens) - k, len(tokens)):
            m.fill_next_token_bitmask(bm)
            assert (bm == masks[i]).all(), f"rollback {k}: mask {i} differs"
            assert m.accept_token(tokens[i])


def test_one_compiled_matchers_on_four_threads(qwen_compiler, qwen_tok):
    docs = [load(n) for n in FILES[:4]]
    jobs = []
    for doc in docs:
        compiled = compile_file(qwen_compiler, doc)
        for case in doc["tests"]:
            jobs.append((compiled, qwen_tok.encode(json.dumps(case["data"]))))

    def masks_of(compiled, tokens):
        m = constrain.Matcher(compiled)
        bm = constrain.allocate_token_bitmask(1, QWEN_LOGITS)
        out = []
        for t in tokens:
            m.fill_next_token_bitmask(bm)
            out.append(hash(bm.tobytes()))
            if not m.accept_token(t):
                break
        return out

    expected = [masks_of(c, t) for c, t in jobs]
    results, errors = {}, []

    def worker(w):
        try:
            for rep in range(3):
                for j, (c, t) in enumerate(jobs):
                    results[(w, rep, j)] = masks_of(c, t)
        except Exception as e:  # reported below: a thread's failure fails the test
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert len(results) == 4 * 3 * len(jobs)
    for (w, rep, j), got in results.items():
        assert got == expected[j], f"thread {w} round {rep} job {j}"


def test_batch_fill_of_many_rows_equals_single_fills(qwen_compiler, qwen_tok):
    doc = load("Github_easy---o10012.json")
    compiled = compile_file(qwen_compiler, doc)
    tokens = qwen_tok.encode(json.dumps(next(c for c in doc["tests"] if c["valid"])["data"]))
    matchers = []
    for i in range(64):
        m = constrain.Matcher(compiled)
        assert m.accept_tokens(tokens[: i % (len(tokens) + 1)])
        matchers.append(m)
    batch = constrain.allocate_token_bitmask(64, QWEN_LOGITS)
    constrain.fill_next_token_bitmask_batch(matchers, batch)
    single = constrain.allocate_token_bitmask(1, QWEN_LOGITS)
    for i, m in enumerate(matchers):
        m.fill_next_token_bitmask(single)
        assert np.array_equal(batch[i], single[0]), f"row {i}"


def test_batch_fills_on_four_threads(qwen_compiler, qwen_tok):
    """Batch fills from four threads at once, each thread's matchers advancing
    between fills, into one shared bitmask (disjoint rows via ``indices``) and
    into a bitmask of each thread's own (the same array again every step, so
    its cached view is reused): every row equals the matcher's single fill."""
    jobs = []
    for name in FILES[:4]:
        doc = load(name)
        compiled = compile_file(qwen_compiler, doc)
        for case in doc["tests"]:
            if case["valid"]:
                jobs.append((compiled, qwen_tok.encode(json.dumps(case["data"]))))
    rows = 16
    shared = constrain.allocate_token_bitmask(4 * rows, QWEN_LOGITS)
    errors = []
    barrier = threading.Barrier(4)

    def worker(w):
        try:
            matchers = [constrain.Matcher(jobs[(w * rows + i) % len(jobs)][0]) for i in range(rows)]
            feeds = [jobs[(w * rows + i) % len(jobs)][1] for i in range(rows)]
            own = constrain.allocate_token_bitmask(rows, QWEN_LOGITS)
            single = constrain.allocate_token_bitmask(1, QWEN_LOGITS)
            mine = list(range(w * rows, (w + 1) * rows))
            barrier.wait()
            for step in range(12):
                constrain.fill_next_token_bitmask_batch(matchers, shared, indices=mine)
                constrain.fill_next_token_bitmask_batch(matchers, own)
                for i, m in enumerate(matchers):
                    m.fill_next_token_bitmask(single)
                    assert np.array_equal(own[i], single[0]), f"thread {w} step {step} row {i}"
                    assert np.array_equal(shared[mine[i]], single[0]), f"thread {w} step {step} shared row {i}"
                    if step < len(feeds[i]):
                        assert m.accept_token(feeds[i][step])
        except Exception as e:  # reported below: a thread's failure fails the test
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors


@pytest.mark.parametrize("name", ["BFCL_java_79.json", "BFCL_java_0.json"])
def test_lazy_first_walk_fills_equal_eager(name, qwen_info, qwen_tok):
    """A lazily compiled schema's first walk (every mask computed by the fill
    itself; small ones written from id lists, never made into bitsets) fills
    the same bitmasks as the eager compile of the same schema."""
    doc = load(name)
    opts = dict(whitespace="flexible", strict=False)
    eager = constrain.Compiler(qwen_info, lazy_states=None, cache_bytes=0).compile_json_schema(doc["schema"], **opts)
    lazy = constrain.Compiler(qwen_info, cache_bytes=0).compile_json_schema(doc["schema"], **opts)
    assert lazy.is_lazy and not eager.is_lazy
    bm = constrain.allocate_token_bitmask(2, QWEN_LOGITS)
    steps = 0
    for case in (c for c in doc["tests"] if c["valid"]):
        ml, me = constrain.Matcher(lazy), constrain.Matcher(eager)
        for t in qwen_tok.encode(json.dumps(case["data"])):
            bm[0] = -1
            ml.fill_next_token_bitmask(bm, 0)
            me.fill_next_token_bitmask(bm, 1)
            assert (bm[0] == bm[1]).all(), f"{name}: step {steps}"
            assert ml.accept_token(t) and me.accept_token(t)
            steps += 1
    assert steps > 0
