"""The batch fill's worker pool and the bitmask's buffer handling, on the tiny
vocabulary: rows the workers fill equal single fills (a test hook leaves
every row to them), no reference to a bitmask outlives the call, the Python
buffer helper (CPython < 3.11, or forced) behaves as the native path, and
bad batch arguments raise.

The pool and buffer paths are chosen once per process from the environment
(``CONSTRAIN_FILL_THREADS``, ``CONSTRAIN_FILL_TEST_WORKERS_ONLY``,
``CONSTRAIN_BUFFER_HELPER``), so those cases run in child interpreters."""

import gc
import os
import subprocess
import sys
import textwrap
import weakref

import numpy as np
import pytest

import constrain
from conftest import TINY_WIDTH

PREFIXES = ["", "a", "ab", "abc", "abcn", "ay", "b", "bye", "c", "cno", "aa", "ba", "cc", "abn"]


def matchers_at(compiled, n):
    out = []
    for i in range(n):
        m = constrain.Matcher(compiled)
        assert m.accept_tokens([ord(c) for c in PREFIXES[i % len(PREFIXES)]])
        out.append(m)
    return out


def singles(matchers, width=TINY_WIDTH):
    bm = constrain.allocate_token_bitmask(len(matchers), width)
    for i, m in enumerate(matchers):
        m.fill_next_token_bitmask(bm, i)
    return bm


def run_child(body, tiny_path, **env):
    """Runs ``body`` in a child interpreter with ``env`` added; it prints
    "ok" last. ``path`` is the tiny tokenizer's path there."""
    code = f"path = {str(tiny_path)!r}\n" + textwrap.dedent(body) + "\nprint('ok')\n"
    full = dict(os.environ, **{k: str(v) for k, v in env.items()})
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=full,
                       cwd=os.path.dirname(__file__))
    assert r.returncode == 0 and r.stdout.split()[-1:] == ["ok"], (
        f"child ended with {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    )
    return r.stdout


def test_batch_fill_keeps_no_reference_to_the_bitmask(tiny_compiler):
    ms = matchers_at(tiny_compiler.compile_regex("[a-c]{1,3}(yes|no)"), 40)
    bm = constrain.allocate_token_bitmask(40, TINY_WIDTH)
    ref = weakref.ref(bm)
    for _ in range(3):
        constrain.fill_next_token_bitmask_batch(ms, bm)
    assert (bm == singles(ms)).all()
    del bm
    gc.collect()
    assert ref() is None, "the batch fill kept the bitmask alive"
    # The same with explicit indices and a one-dimensional bitmask.
    one = np.zeros((TINY_WIDTH + 31) // 32, dtype=np.int32)
    ref = weakref.ref(one)
    constrain.fill_next_token_bitmask_batch(ms[:1], one, indices=[-1])
    del one
    gc.collect()
    assert ref() is None


@pytest.mark.skipif(sys.version_info < (3, 11) or "CONSTRAIN_BUFFER_HELPER" in os.environ,
                    reason="skipping: before CPython 3.11 a matcher keeps its last bitmask "
                           "(see test_buffer_helper_path)")
def test_single_fill_keeps_no_reference_to_the_bitmask(tiny_compiler):
    m = constrain.Matcher(tiny_compiler.compile_regex("(yes|no)"))
    bm = constrain.allocate_token_bitmask(2, TINY_WIDTH)
    ref = weakref.ref(bm)
    m.fill_next_token_bitmask(bm, 1)
    m.fill_next_token_bitmask(bm, 0)
    del bm
    gc.collect()
    assert ref() is None, "the matcher kept the bitmask alive"


def test_workers_fill_rows_equal_to_single_fills(tiny_path):
    """Every row of every batch filled by a pool worker (the caller leaves
    them all), from one thread, then from four threads at once (batches that
    find the pool busy are filled by their caller): equal to single fills."""
    out = run_child(
        """
        import threading
        import numpy as np
        import constrain
        from test_batch import matchers_at, singles

        info = constrain.TokenizerInfo.from_tokenizer_json(path, vocab_size=300)
        compiled = constrain.Compiler(info).compile_regex("[a-c]{1,3}(yes|no)")
        before = constrain._core._fill_stats()
        ms = matchers_at(compiled, 64)
        want = singles(ms, 300)
        bm = constrain.allocate_token_bitmask(64, 300)
        for r in range(50):
            bm[:] = 0x5A5A5A5A
            constrain.fill_next_token_bitmask_batch(ms, bm)
            assert (bm == want).all(), f"round {r}"
        rev = constrain.allocate_token_bitmask(70, 300)
        constrain.fill_next_token_bitmask_batch(ms, rev, indices=list(range(69, 5, -1)))
        assert (rev[6:][::-1] == want).all() and (rev[:6] == -1).all()
        after = constrain._core._fill_stats()
        d = {k: after[k] - before[k] for k in after}
        assert d["published"] == 51 and d["joined"] >= 51, d
        assert d["rows"] == 51 * 64, d

        errors = []
        def worker(w):
            try:
                mine = matchers_at(compiled, 32 + 8 * w)
                want = singles(mine, 300)
                bm = constrain.allocate_token_bitmask(len(mine), 300)
                for r in range(100):
                    bm[:] = 0
                    constrain.fill_next_token_bitmask_batch(mine, bm)
                    assert (bm == want).all(), f"thread {w} round {r}"
            except Exception as e:
                errors.append(e)
        ts = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
        for t in ts: t.start()
        for t in ts: t.join()
        assert not errors, errors
        """,
        tiny_path,
        CONSTRAIN_FILL_THREADS=3,
        CONSTRAIN_FILL_TEST_WORKERS_ONLY=1,
    )
    assert out.strip().endswith("ok")


def test_buffer_helper_path(tiny_path):
    """The Python buffer helper (what CPython < 3.11 uses) forced: the same
    rows, the same errors, the batch fill keeps nothing, and a matcher keeps
    its last bitmask only until it fills another one."""
    run_child(
        """
        import array, gc, weakref
        import numpy as np
        import constrain
        from test_batch import matchers_at, singles

        info = constrain.TokenizerInfo.from_tokenizer_json(path, vocab_size=300)
        compiled = constrain.Compiler(info).compile_regex("[a-c]{1,3}(yes|no)")
        ms = matchers_at(compiled, 40)
        want = singles(ms, 300)
        bm = constrain.allocate_token_bitmask(40, 300)
        constrain.fill_next_token_bitmask_batch(ms, bm)
        assert (bm == want).all()
        ref = weakref.ref(bm)
        del bm
        gc.collect()
        assert ref() is None, "the batch fill kept the bitmask"

        m = ms[3]
        a = constrain.allocate_token_bitmask(1, 300)
        ref = weakref.ref(a)
        for _ in range(2):
            m.fill_next_token_bitmask(a)  # the second fill reuses the kept view
        assert (a[0] == want[3]).all()
        del a
        gc.collect()
        assert ref() is not None, "kept until the matcher fills another bitmask"
        buf = array.array("i", [0] * 10)
        m.fill_next_token_bitmask(buf)
        gc.collect()
        assert ref() is None
        assert list(buf) == list(want[3])

        ro = np.zeros((1, 10), dtype=np.int32)
        ro.flags.writeable = False
        for bad, kind, text in [(ro, ValueError, "read-only"),
                                (np.zeros((1, 10), dtype=np.float32), TypeError, "int32"),
                                (np.zeros((10, 2), dtype=np.int32).T, ValueError, "contiguous"),
                                (np.zeros((1, 11), dtype=np.int32), ValueError, "needs 10")]:
            for call in (lambda: m.fill_next_token_bitmask(bad),
                         lambda: constrain.fill_next_token_bitmask_batch([m], bad)):
                try:
                    call()
                except kind as e:
                    assert text in str(e), (text, e)
                else:
                    raise AssertionError(f"no {kind.__name__} for {text}")
        """,
        tiny_path,
        CONSTRAIN_BUFFER_HELPER=1,
    )


def test_batch_fill_bad_arguments_raise(tiny_path, tiny_compiler):
    compiled = tiny_compiler.compile_regex("(yes|no)")
    ms = matchers_at(tiny_compiler.compile_regex("[a-c]{1,3}(yes|no)"), 3)
    bm = constrain.allocate_token_bitmask(3, TINY_WIDTH)
    with pytest.raises(ValueError, match="2 indices for 3 matchers"):
        constrain.fill_next_token_bitmask_batch(ms, bm, indices=[0, 1])
    with pytest.raises(ValueError, match="out of range"):
        constrain.fill_next_token_bitmask_batch(ms, bm, indices=[0, 1, 3])
    with pytest.raises(ValueError, match="same bitmask row"):
        constrain.fill_next_token_bitmask_batch(ms, bm, indices=[0, 1, -3])
    with pytest.raises(TypeError):
        constrain.fill_next_token_bitmask_batch([ms[0], "not a matcher"], bm)
    wide = constrain.TokenizerInfo.from_tokenizer_json(str(tiny_path), vocab_size=TINY_WIDTH + 64)
    other = constrain.Matcher(constrain.Compiler(wide).compile_regex("(yes|no)"))
    with pytest.raises(ValueError, match="different sizes"):
        constrain.fill_next_token_bitmask_batch([ms[0], other], bm)
    with pytest.raises(ValueError, match="needs 12"):
        constrain.fill_next_token_bitmask_batch([other], bm)
    # A refused call writes nothing.
    bm[:] = 7
    with pytest.raises(ValueError):
        constrain.fill_next_token_bitmask_batch(ms + [constrain.Matcher(compiled)], bm)
    assert (bm == 7).all()
    # Negative indices count from the end, as in numpy.
    constrain.fill_next_token_bitmask_batch(ms, bm, indices=[-1, -2, -3])
    assert (bm[::-1] == singles(ms)).all()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="skipping: no os.fork on this platform")
def test_batch_fill_after_fork(tiny_path):
    """A child made by fork has none of the parent's worker threads: its
    batch fills are filled by the caller alone (not offered to workers that
    do not exist there), and are right."""
    run_child(
        """
        import os
        import constrain
        from test_batch import matchers_at, singles

        info = constrain.TokenizerInfo.from_tokenizer_json(path, vocab_size=300)
        compiled = constrain.Compiler(info).compile_regex("[a-c]{1,3}(yes|no)")
        ms = matchers_at(compiled, 64)
        want = singles(ms, 300)
        bm = constrain.allocate_token_bitmask(64, 300)
        constrain.fill_next_token_bitmask_batch(ms, bm)  # starts the pool here
        assert (bm == want).all()
        pid = os.fork()
        if pid == 0:
            ok = False
            try:
                before = constrain._core._fill_stats()["published"]
                for _ in range(20):
                    bm[:] = 0
                    constrain.fill_next_token_bitmask_batch(ms, bm)
                    assert (bm == want).all()
                ok = constrain._core._fill_stats()["published"] == before
            finally:
                os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
        """,
        tiny_path,
        CONSTRAIN_FILL_THREADS=2,
        CONSTRAIN_FILL_TEST_WORKERS_ONLY=1,
    )
