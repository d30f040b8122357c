"""The op library: primitives registered in the table, composites, and their public names.

Importing this package registers every op. Each submodule holds one family; an op is one
``defop`` entry there: its forward, one reverse rule per input, its forward-mode rule (or a
declared property: ``SELF_ADJOINT``, ``linear_in``), and the public function and Tensor
methods that call it, which are generated from the forward's signature. A function that must
check or normalise its arguments first is written once in ``api.py`` with ``@expose``, and a
composite declares its names on ``@defcomposite``. Adding an op is that entry plus one case in
``tests/autograd/op_cases.py``.

This module then attaches every declared name, in one loop: the public functions become its
attributes (``gradtrace.autograd.exp``), the methods Tensor's (``Tensor.exp``).
"""
from __future__ import annotations

import warnings

from ..dispatch import FUNCTIONS, METHODS, OPS, apply_op
from .._tensor import Tensor
# _linalg and _special hold the linalg and special families: the names ``linalg`` and
# ``special`` are the torch.linalg and torch.special namespaces this package exports.
from . import _linalg, decompositions, elementwise, indexing, losses, nn, reduction, shape  # noqa: F401 - registers ops
from . import api
from . import counting, elman, factories, gru, layout, products, rnn  # noqa: F401 - composites over api's functions
from . import _special  # noqa: F401 - after api: its namespace names api's functions too
from . import pooling  # noqa: F401 - max_pool2d_with_indices, avg_pool2d (issue 28)
from .api import _call, index_put_  # noqa: F401 - used by nn.functional and tests

# PyTorch's forward arithmetic is silent where it gives inf or NaN (log(0), x / 0, sqrt(-1),
# exp overflow), and so are these ops: NumPy's floating-point RuntimeWarnings raised from this
# package's own code are filtered out (by module and message, so nothing else is hidden; the
# user's own NumPy calls still warn). The backward runs under numpy.errstate instead
# (engine.backward_scope); a per-op errstate would cost every op about 0.8 us.
warnings.filterwarnings(
    "ignore", r"(divide by zero|invalid value|overflow|underflow) encountered",
    RuntimeWarning, r"gradtrace\.autograd\.ops\.")

globals().update(FUNCTIONS)
__all__ = sorted(FUNCTIONS) + ["OPS"]

for _name, _fn in METHODS.items():
    setattr(Tensor, _name, _fn)
del _name, _fn
