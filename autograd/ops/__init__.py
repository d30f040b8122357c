"""The op library: primitives registered in the table, composites, and their public names.

Importing this package registers every op. Each submodule holds one family; an op is one
``defop`` entry there: its forward, one reverse rule per input, its forward-mode rule (or a
declared property: ``SELF_ADJOINT``, ``linear_in``), and the public function and Tensor
methods that call it, which are generated from the forward's signature. A function that must
check or normalise its arguments first is written once, with ``@expose``, in the wrappers
module beside its family (``shape_api``, ``elementwise_api``, ``indexing_api``,
``reduction_api``, ``linalg_api``, ``casts``), and a composite declares its names on
``@defcomposite``. Adding an op is that entry plus one case in
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
from . import (_linalg, activation, decompositions, elementwise, indexing, losses, nn,  # noqa: F401 - registers ops
               reduction, scans, shape)
# The wrappers, each beside its family; in this order because each imports those before it.
from . import shape_api, elementwise_api, indexing_api, reduction_api, linalg_api, casts  # noqa: F401
from . import counting, elman, factories, gru, layout, products, rnn  # noqa: F401 - composites over the wrappers
from . import _special  # noqa: F401 - after the wrappers: its namespace names their functions too
from . import pooling  # noqa: F401 - max_pool2d_with_indices, avg_pool2d (issue 28)
from .arguments import _call  # noqa: F401 - used by nn.functional
from .indexing_api import index_put_  # noqa: F401 - used by tests

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
