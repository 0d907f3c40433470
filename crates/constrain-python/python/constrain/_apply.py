"""One ``apply`` for the adapters: numpy logits through
``constrain.apply_token_bitmask_inplace``, anything else (torch tensors on
any device) through ``constrain.torch_ops``."""


def apply_bitmask(logits, bitmask, indices=None):
    try:
        import numpy as np

        if isinstance(logits, np.ndarray):
            from . import apply_token_bitmask_inplace

            apply_token_bitmask_inplace(logits, bitmask, indices=indices)
            return logits
    except ImportError:
        pass
    from . import torch_ops

    return torch_ops.apply_token_bitmask_inplace(logits, bitmask, indices=indices)
