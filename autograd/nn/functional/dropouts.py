"""``dropout``: a mask drawn from the input's device generator (or the one given).
"""
from __future__ import annotations

import numpy

from ... import backend
from ...dispatch import defcomposite
from ..._tensor import Tensor, default_generator


@defcomposite("dropout")
def dropout(input, p: float = 0.5, training: bool = True, inplace: bool = False,  # noqa: A002
            generator=None):
    """Zero each element with probability ``p`` and scale the rest by 1/(1-p); identity when
    not training. The mask comes from ``generator`` or the device's seeded default."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: probability has to be between 0 and 1, got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    gen = generator if generator is not None else default_generator(input.device)
    keep = gen.random(input.shape, dtype=numpy.float32 if input.dtype.itemsize <= 4
                      else numpy.float64) >= p
    scale = (keep * (1.0 / (1.0 - p))).astype(input.dtype)
    # A host generator (numpy's) for a GPU input draws on the host: move the mask over.
    scale = backend.to_device(scale, input.device)
    out = input * Tensor._make(scale, False, None, 0, [0], input.device)
    if inplace:
        return input.copy_(out)
    return out
