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


def apply_token_bitmask_inplace(logits, bitmask, indices=None, vocab_size=None):
    """Sets disallowed logits to -inf in place: row ``r`` of ``logits`` with
    row ``r`` of ``bitmask``, for every ``r`` in ``indices`` (default: all,
    and then the bitmask has as many rows as the logits). Columns at or past
    ``vocab_size`` are masked too. Raises ``ValueError`` where the bitmask
    does not fit the logits (``constrain.check_bitmask_fits``)."""
    from . import check_bitmask_fits

    one_row = logits.dim() == 1
    lg = logits.unsqueeze(0) if one_row else logits
    bm = torch.as_tensor(bitmask)
    bm = bm.unsqueeze(0) if bm.dim() == 1 else bm
    width = lg.shape[-1]
    check_bitmask_fits(lg.shape[0], width, bm.shape[0], bm.shape[-1], vocab_size, indices)
    allowed = unpack(bm, lg.device, width)
    if vocab_size is not None and vocab_size < width:
        allowed[:, vocab_size:] = False
    if indices is None:
        lg.masked_fill_(~allowed[: lg.shape[0]], float("-inf"))
    else:
        rows = torch.as_tensor(list(indices), dtype=torch.long, device=lg.device)
        if len(rows) and (int(rows.min()) < 0 or int(rows.max()) >= min(bm.shape[0], lg.shape[0])):
            raise ValueError(f"row {list(indices)} is out of range for a bitmask of {bm.shape[0]} rows")
        lg[rows] = lg[rows].masked_fill(~allowed[rows], float("-inf"))
    return logits
