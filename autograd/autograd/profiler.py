"""``torch.autograd.profiler``'s ``record_function``: the engine's USER_SCOPE range.

``torch.autograd.profiler.profile`` is not here: the profiler is the ``gradtrace.profiler``
package, which the engine does not import (``from gradtrace.profiler import profile``).
"""
from __future__ import annotations

from ..record_function import record_function

__all__ = ["record_function"]
