"""constrain: structured-output decoding whose output always parses.

An API close to XGrammar's::

    import constrain, numpy as np
    info = constrain.TokenizerInfo.from_tokenizer_json("tokenizer.json", vocab_size=151936)
    compiler = constrain.Compiler(info)
    compiled = compiler.compile_json_schema({"type": "object", "properties": {"a": {"type": "integer"}}})
    matcher = constrain.Matcher(compiled)
    bitmask = constrain.allocate_token_bitmask(1, info.vocab_size)
    matcher.fill_next_token_bitmask(bitmask)
    constrain.apply_token_bitmask_inplace(logits, bitmask)   # numpy or torch logits
    matcher.accept_token(next_token)

Adapters: ``constrain.hf`` (transformers), ``constrain.vllm``, ``constrain.sglang``.
"""

from ._core import (
    CompileError,
    Compiled,
    Compiler,
    Matcher,
    TokenizerInfo,
    __version__,
    fill_next_token_bitmask_batch,
)

# XGrammar's names, for code written against it.
CompiledGrammar = Compiled
GrammarCompiler = Compiler
GrammarMatcher = Matcher

__all__ = [
    "CompileError",
    "Compiled",
    "CompiledGrammar",
    "Compiler",
    "GrammarCompiler",
    "GrammarMatcher",
    "Matcher",
    "TokenizerInfo",
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "fill_next_token_bitmask_batch",
    "get_bitmask_shape",
    "grammar_syntax",
    "reset_token_bitmask",
]


def grammar_syntax(text):
    """``"gbnf"`` when the grammar text defines a rule with ``::=``,
    ``"lark"`` otherwise: the detection vLLM applies to a request's
    grammar, for ``Compiler.compile_grammar(text, syntax=...)``."""
    return "gbnf" if "::=" in text else "lark"


def get_bitmask_shape(batch_size, vocab_size):
    """(batch_size, ceil(vocab_size / 32)): the shape of a bitmask."""
    return (batch_size, (vocab_size + 31) // 32)


def allocate_token_bitmask(batch_size, vocab_size):
    """A numpy int32 bitmask of ``batch_size`` rows, every token allowed."""
    import numpy as np

    return np.full(get_bitmask_shape(batch_size, vocab_size), -1, dtype=np.int32)


def reset_token_bitmask(bitmask):
    """Allows every token again (all bits set)."""
    bitmask[...] = -1


def unpack_bitmask(bitmask, vocab_size):
    """The bitmask as a numpy bool array of shape (rows, vocab_size); ids
    past the bitmask's words are disallowed."""
    import numpy as np

    bm = np.ascontiguousarray(bitmask, dtype=np.int32)
    if bm.ndim == 1:
        bm = bm[None, :]
    bits = np.unpackbits(bm.view(np.uint8), axis=-1, bitorder="little").astype(bool)
    if bits.shape[-1] < vocab_size:
        pad = np.zeros((bits.shape[0], vocab_size - bits.shape[-1]), dtype=bool)
        bits = np.concatenate([bits, pad], axis=-1)
    return bits[:, :vocab_size]


def check_bitmask_fits(rows, width, bm_rows, bm_words, vocab_size=None, indices=None):
    """Raises ValueError where a bitmask does not fit the logits: a batch of
    another size (no ``indices``), a bitmask covering ids past the logits'
    width, or one narrower than an explicit ``vocab_size``."""
    if indices is None and bm_rows != rows:
        raise ValueError(
            f"batch size mismatch: the logits have {rows} rows, the bitmask {bm_rows}"
        )
    if bm_words > (width + 31) // 32:
        raise ValueError(
            f"width mismatch: the bitmask's {bm_words} words cover {bm_words * 32} ids, "
            f"the logits have {width} columns"
        )
    if vocab_size is not None and bm_words * 32 < vocab_size:
        raise ValueError(
            f"width mismatch: vocab_size={vocab_size} needs {(vocab_size + 31) // 32} "
            f"bitmask words, the bitmask has {bm_words}"
        )


def apply_token_bitmask_inplace(logits, bitmask, vocab_size=None, indices=None):
    """Sets the logits of disallowed tokens to -inf, in place.

    ``logits``: a float numpy array or torch tensor (any device) of shape
    (batch, V) or (V,); ``bitmask``: int32 of shape (batch, words) or
    (words,); ``indices``: the rows to mask (row ``r`` of the logits with
    row ``r`` of the bitmask), default all, and then the bitmask has as many
    rows as the logits. Columns at or past ``vocab_size`` (default: V), and
    past the bitmask's ``words * 32`` ids (padding), are masked too. Raises
    ``ValueError`` on a batch-size mismatch, a bitmask wider than the logits
    or narrower than ``vocab_size``.
    """
    if type(logits).__module__.startswith("torch"):
        from . import torch_ops

        return torch_ops.apply_token_bitmask_inplace(
            logits, bitmask, indices=indices, vocab_size=vocab_size
        )
    import numpy as np

    if not isinstance(logits, np.ndarray):
        raise TypeError(
            "apply_token_bitmask_inplace takes numpy logits or torch tensors, "
            f"not {type(logits).__name__}"
        )
    if not np.issubdtype(logits.dtype, np.floating):
        raise TypeError(f"logits must be floating point, not {logits.dtype}")
    bm = np.asarray(bitmask)
    if bm.dtype != np.int32:
        raise TypeError(f"the bitmask must be int32, not {bm.dtype}")
    lg = logits[None, :] if logits.ndim == 1 else logits
    bm = bm[None, :] if bm.ndim == 1 else bm
    if lg.ndim != 2 or bm.ndim != 2:
        raise ValueError("logits and bitmask must have one or two dimensions")
    width = lg.shape[-1]
    check_bitmask_fits(lg.shape[0], width, bm.shape[0], bm.shape[1], vocab_size, indices)
    vocab_size = width if vocab_size is None else min(vocab_size, width)
    rows = range(lg.shape[0]) if indices is None else list(indices)
    for r in rows:
        if not 0 <= r < min(bm.shape[0], lg.shape[0]):
            raise ValueError(f"row {r} is out of range for a bitmask of {bm.shape[0]} rows")
        allowed = unpack_bitmask(bm[r], vocab_size)[0]
        row = lg[r]
        row[:vocab_size][~allowed] = -np.inf
        row[vocab_size:] = -np.inf
