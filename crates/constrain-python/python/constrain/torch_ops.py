"""Bitmask application for torch tensors on any device (imported only when
torch is present; the package itself never depends on torch).

The bitmask is filled on the CPU (numpy int32 or a CPU int32 tensor), copied
to the logits' device, unpacked there (bit t % 32 of word t // 32) and
applied with ``masked_fill_``: no per-token Python loop, no sync beyond the
copy. Columns of the logits past the bitmask's ids are masked too.
"""

import torch


def unpack(bitmask, device, width):
    """A bool tensor (rows, width) on ``device``: True where allowed."""
    bm = torch.as_tensor(bitmask)
    if bm.dtype != torch.int32:
        raise TypeError(f"the bitmask must be int32, not {bm.dtype}")
    if bm.dim() == 1:
        bm = bm.unsqueeze(0)
    bm = bm.to(device, non_blocking=True)
    shifts = torch.arange(32, device=device, dtype=torch.int32)
    bits = ((bm.unsqueeze(-1) >> shifts) & 1).bool().flatten(-2)
    if bits.shape[-1] < width:
        pad = torch.zeros(bits.shape[0], width - bits.shape[-1], dtype=torch.bool, device=device)
        bits = torch.cat([bits, pad], dim=-1)
    return bits[:, :width]


def apply_token_bitmask_inplace(logits, bitmask, indices=None):
    """Sets disallowed logits to -inf in place: row ``r`` of ``logits`` with
    row ``r`` of ``bitmask``, for every ``r`` in ``indices`` (default: all)."""
    one_row = logits.dim() == 1
    lg = logits.unsqueeze(0) if one_row else logits
    allowed = unpack(bitmask, lg.device, lg.shape[-1])
    if indices is None:
        lg.masked_fill_(~allowed[: lg.shape[0]], float("-inf"))
    else:
        rows = torch.as_tensor(list(indices), dtype=torch.long, device=lg.device)
        lg[rows] = lg[rows].masked_fill(~allowed[rows], float("-inf"))
    return logits
