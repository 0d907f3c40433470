"""constrain: structured-output decoding whose output always parses.

An API close to XGrammar's::

    import constrain, numpy as np
    info = constrain.TokenizerInfo.from_tokenizer_json("tokenizer.json", vocab_size=151936)
    compiler = constrain.Compiler(info)
    compiled = compiler.compile_json_schema({"type": "object", "properties": {"a": {"type": "integer"}}})
    matcher = constrain.Matcher(compiled)
    bitmask = constrain.allocate_token_bitmask(1, info.vocab_size)
    matcher.fill_next_token_bitmask(bitmask)
    constrain.apply_token_bitmask_inplace(logits, bitmask)   # numpy logits
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
    "reset_token_bitmask",
]


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
    """The bitmask as a numpy bool array of shape (rows, vocab_size)."""
    import numpy as np

    bm = np.ascontiguousarray(bitmask, dtype=np.int32)
    if bm.ndim == 1:
        bm = bm[None, :]
    bits = np.unpackbits(bm.view(np.uint8), axis=-1, bitorder="little")
    if bits.shape[-1] < vocab_size:
        raise ValueError(
            f"the bitmask covers {bits.shape[-1]} ids, fewer than vocab_size {vocab_size}"
        )
    return bits[:, :vocab_size].astype(bool)


def apply_token_bitmask_inplace(logits, bitmask, vocab_size=None, indices=None):
    """Sets the logits of disallowed tokens to -inf, in place (numpy).

    ``logits``: float array of shape (batch, vocab) or (vocab,); ``bitmask``:
    int32 of shape (batch, ceil(vocab / 32)); ``indices``: the logits rows to
    mask (row ``indices[i]`` with bitmask row ``indices[i]``), default all.
    Columns of ``logits`` past ``vocab_size`` (default: the logits width) are
    masked too. For torch tensors, see ``constrain.torch_ops``.
    """
    import numpy as np

    if not isinstance(logits, np.ndarray):
        raise TypeError(
            f"apply_token_bitmask_inplace takes numpy logits here, not {type(logits).__name__}"
        )
    if not np.issubdtype(logits.dtype, np.floating):
        raise TypeError(f"logits must be floating point, not {logits.dtype}")
    bm = np.asarray(bitmask)
    if bm.dtype != np.int32:
        raise TypeError(f"the bitmask must be int32, not {bm.dtype}")
    one_row = logits.ndim == 1
    lg = logits[None, :] if one_row else logits
    bm = bm[None, :] if bm.ndim == 1 else bm
    if lg.ndim != 2 or bm.ndim != 2:
        raise ValueError("logits and bitmask must have one or two dimensions")
    width = lg.shape[-1]
    vocab_size = width if vocab_size is None else min(vocab_size, width)
    if bm.shape[-1] * 32 < vocab_size:
        raise ValueError(
            f"bitmask rows have {bm.shape[-1]} words, too few for {vocab_size} logits"
        )
    rows = range(lg.shape[0]) if indices is None else list(indices)
    for r in rows:
        allowed = unpack_bitmask(bm[r], vocab_size)[0]
        row = lg[r]
        row[:vocab_size][~allowed] = -np.inf
        row[vocab_size:] = -np.inf
