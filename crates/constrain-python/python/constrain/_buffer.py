"""Writable int32 rows of any buffer-protocol object, for the Rust side.

The C buffer API is only in CPython's limited API from 3.11, and this wheel
is abi3 for 3.9+, so the buffer is opened here with ``memoryview`` and its
address read with ``ctypes`` (``from_buffer`` needs a writable buffer). The
returned memoryview holds the export: while the Rust side keeps it, the
memory can neither move nor be freed.
"""

import ctypes

_INT32 = frozenset(("i", "@i", "=i", "<i", "l", "@l", "=l", "<l"))


def _as_buffer(obj, what):
    """(memoryview, pinned): pinned when the object itself exports the buffer,
    so that holding the export keeps its memory where it is. A view reached
    through DLPack or ``.numpy()`` does not stop the tensor from moving its
    data (``resize_``, ``set_``), so it must be looked up again every time."""
    try:
        return memoryview(obj), True
    except TypeError:
        pass
    # DLPack (torch, jax, cupy, ...): CPU memory only, opened by numpy
    # without a copy.
    dlpack_device = getattr(obj, "__dlpack_device__", None)
    if dlpack_device is not None and hasattr(obj, "__dlpack__"):
        kind = dlpack_device()[0]
        if kind != 1:  # kDLCPU
            raise ValueError(
                f"the {what} is not in CPU memory (DLPack device type {kind}); fill a CPU "
                "tensor and copy it to the device (non_blocking=True), as XGrammar does"
            )
        try:
            import numpy as np
        except ImportError:
            raise TypeError(f"reading a DLPack {what} needs numpy") from None
        return memoryview(np.from_dlpack(obj)), False
    # A torch-like tensor without DLPack: CPU only, shared through .numpy().
    dev = getattr(obj, "device", None)
    if dev is not None and hasattr(obj, "numpy"):
        if getattr(dev, "type", "cpu") != "cpu":
            raise ValueError(
                f"the {what} is on device {dev}; fill a CPU tensor and copy it to the "
                "device (non_blocking=True), as XGrammar does"
            )
        return memoryview(obj.numpy()), False
    raise TypeError(
        f"the {what} must support the buffer protocol (a numpy int32 array, a CPU "
        f"torch tensor, array.array('i')), not {type(obj).__name__}"
    )


def int32_rows(obj, what="bitmask"):
    """(memoryview, address, rows, words per row, pinned) of a C-contiguous,
    writable int32 buffer of one or two dimensions; pinned as in _as_buffer."""
    mv, pinned = _as_buffer(obj, what)
    if mv.itemsize != 4 or mv.format not in _INT32:
        raise TypeError(
            f"the {what} must hold int32 (format 'i'), not format {mv.format!r} of "
            f"{mv.itemsize}-byte items"
        )
    if mv.readonly:
        raise ValueError(f"the {what} is read-only")
    if not mv.c_contiguous:
        raise ValueError(f"the {what} must be C-contiguous")
    if mv.ndim == 1:
        rows, words = 1, mv.shape[0]
    elif mv.ndim == 2:
        rows, words = mv.shape
    else:
        raise ValueError(
            f"the {what} must have shape (batch, words) or (words,), not {tuple(mv.shape)}"
        )
    if rows == 0 or words == 0:
        raise ValueError(f"the {what} is empty: shape {tuple(mv.shape)}")
    addr = ctypes.addressof(ctypes.c_char.from_buffer(mv))
    return mv, addr, rows, words, pinned
