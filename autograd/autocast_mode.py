"""Autocast (automatic mixed precision): the per-op policy table and the ``autocast`` region.

Inside ``autocast(device_type)``, an op on that device type's tensors runs in the dtype its
policy names, as PyTorch's autocast (aten/src/ATen/autocast_mode.cpp):

- ``lower``: floating inputs are cast to the region's dtype (float16): matmul, linear, convs;
- ``fp32``: floating inputs are cast to float32: exp, log, pow, norms, losses;
- ``fp32_opt``: as ``fp32`` unless the call names a ``dtype`` (PyTorch's
  ``fp32_set_opt_dtype``: softmax, sum, cumsum...);
- ``promote``: floating inputs are cast to the widest floating dtype among them (float32 if
  any is float32, else the region's dtype): cat, stack, addcmul...

Only floating tensors on the region's device type are cast, never float64 ones (PyTorch's
``is_eligible``); integers, booleans and Python numbers pass as they are. Ops not in the
table run as they are, and a composite's primitives then meet the table one by one. The op
itself runs with autocast off in its thread, as PyTorch's ``ExcludeDispatchKeyGuard``.

The casts are the engine's ``to_dtype`` op (a ``ToCopyBackward0`` node), so gradients flow
back to each input in its own dtype. With ``cache_enabled``, the float16 copy of a float32
leaf that requires grad (a parameter) is made once per outermost region, as PyTorch's
``cached_cast``.

This module holds the table and the thread's autocast state; the dispatcher
(:mod:`.dispatch`) applies it, reading ``STATE.ops.autocast`` (None while autocast is off for
every device type in this thread: apply_op's one extra test).

``autocast("cpu")`` casts to bfloat16 by default, as PyTorch's (through ml_dtypes, see
dtypes.py), or to float16; ``autocast("cuda")`` to float16 only (CuPy has no bfloat16).
"""
from __future__ import annotations

import functools
import warnings

import numpy as np

from .dtypes import BFLOAT16, ERR_BFLOAT16_CUDA

from . import backend
from .grad_mode import STATE

__all__ = ["autocast", "is_autocast_enabled", "set_autocast_enabled", "get_autocast_dtype",
           "set_autocast_dtype", "is_autocast_cache_enabled", "set_autocast_cache_enabled",
           "clear_autocast_cache", "is_autocast_available", "POLICY", "LISTED"]

LOWER, FP32, FP32_OPT, PROMOTE = "lower", "fp32", "fp32_opt", "promote"

# The one table: op name (a primitive's overload name, a composite's name) -> its policy on
# CUDA and on CPU ("-": runs as it is). From PyTorch's autocast_mode.cpp lists
# (AT_FORALL_LOWER_PRECISION_FP, AT_FORALL_FP32, AT_FORALL_FP32_SET_OPT_DTYPE,
# AT_FORALL_PROMOTE and the KERNEL_CPU lists); PyTorch's CPU lists are shorter (exp or
# softmax run as they are there). Ops named differently here: mm/matmul/bmm/mv are
# matmul(.bmm/.mv), dot is matmul.dot, cross is linalg_cross, nll_loss's kernel is
# nll_loss_forward. einsum and cross_entropy are single ops here where PyTorch decomposes
# them into listed ones (bmm; log_softmax and nll_loss): the result dtypes agree.
_TABLE = """
matmul                        lower     lower
matmul.bmm                    lower     lower
matmul.mv                     lower     -
linear                        lower     lower
linear.mm                     lower     lower
addmm                         lower     lower
baddbmm                       lower     lower
einsum                        lower     lower
conv1d                        lower     lower
conv2d                        lower     lower
conv_transpose2d              lower     lower
prelu                         lower     lower
scaled_dot_product_attention  lower     lower
acos                          fp32      -
asin                          fp32      -
cosh                          fp32      -
erfinv                        fp32      -
exp                           fp32      -
expm1                         fp32      -
log                           fp32      -
log10                         fp32      -
log2                          fp32      -
log1p                         fp32      -
reciprocal                    fp32      -
rsqrt                         fp32      -
sinh                          fp32      -
tan                           fp32      -
pow                           fp32      -
pow.Scalar                    fp32      -
pow.Tensor_Tensor             fp32      -
softplus                      fp32      -
layer_norm                    fp32      -
group_norm                    fp32      -
cosine_similarity             fp32      -
dist                          fp32      -
cdist                         fp32      fp32
logsumexp                     fp32      -
nll_loss                      fp32      fp32
nll_loss_forward              fp32      fp32
cross_entropy                 fp32      fp32
kl_div                        fp32      fp32
l1_loss                       fp32      fp32
mse_loss                      fp32      fp32
soft_margin_loss              fp32      fp32
binary_cross_entropy_with_logits  fp32  fp32
binary_cross_entropy          -         fp32
quantile                      -         fp32
nanquantile                   -         fp32
trace                         -         fp32
cholesky_solve                -         fp32
linalg_cholesky               -         fp32
linalg_det                    -         fp32
linalg_slogdet                -         fp32
linalg_eigh                   -         fp32
linalg_inv                    -         fp32
linalg_lstsq                  -         fp32
linalg_matrix_exp             -         fp32
linalg_pinv                   -         fp32
linalg_qr                     -         fp32
linalg_solve                  -         fp32
linalg_solve_triangular       -         fp32
linalg_svd                    -         fp32
prod                          fp32_opt  fp32
prod.dim                      fp32_opt  fp32
softmax                       fp32_opt  -
log_softmax                   fp32_opt  -
cumprod                       fp32_opt  -
cumsum                        fp32_opt  -
sum                           fp32_opt  -
sum.dim                       fp32_opt  -
linalg_vector_norm            fp32_opt  -
norm                          fp32_opt  -
addcmul                       promote   -
atan2                         promote   -
linalg_cross                  promote   -
matmul.dot                    promote   -
tensordot                     promote   -
index_put                     promote   -
scatter_add                   promote   -
cat                           promote   promote
stack                         promote   promote
"""


def _parse(table: str) -> dict:
    policy = {"cuda": {}, "cpu": {}}
    for line in table.strip().splitlines():
        name, cuda, cpu = line.split()
        for device_type, p in (("cuda", cuda), ("cpu", cpu)):
            if p != "-":
                policy[device_type][name] = p
    return policy


#: {device type: {op name: policy}}.
POLICY = _parse(_TABLE)

#: Ops PyTorch refuses under CUDA autocast (its ``banned`` list), with its message.
BANNED = {"cpu": {}, "cuda": {"binary_cross_entropy": (
    "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
    "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
    "In this case, combine the two layers using torch.nn.functional."
    "binary_cross_entropy_with_logits\nor torch.nn.BCEWithLogitsLoss.  "
    "binary_cross_entropy_with_logits and BCEWithLogits are\nsafe to autocast.")}}

#: The op names the table or the banned list mentions, per device type and for any: the
#: dispatcher lets any other op through with one lookup (in the names of the device types
#: autocast is on for, ``AutocastState.names``; composites test LISTED once, when defined).
LISTED_BY_DEVICE = {d: frozenset((*POLICY[d], *BANNED[d])) for d in POLICY}
LISTED = frozenset().union(*LISTED_BY_DEVICE.values())

FLOAT16 = np.dtype("float16")
FLOAT32 = np.dtype("float32")
FLOAT64 = np.dtype("float64")

_DEVICE_TYPES = ("cuda", "cpu")

# The lower dtypes an autocast region may cast to, per device type.
SUPPORTED = {"cpu": (BFLOAT16, FLOAT16), "cuda": (FLOAT16,)}


class AutocastState:
    """This thread's autocast settings: PyTorch's thread-local autocast flags and cache.

    ``enabled`` and ``dtype`` are per device type (CPU and CUDA autocast are independent, and
    may be on together); ``active`` maps each enabled device type to its dtype and ``names``
    holds the op names their tables mention: what the dispatcher reads.
    ``STATE.ops.autocast`` is this object while ``active`` is not empty, else None.
    """

    __slots__ = ("enabled", "dtype", "active", "names", "cache_enabled", "nesting", "cache")

    def __init__(self):
        self.enabled = {"cuda": False, "cpu": False}
        self.dtype = {"cuda": FLOAT16, "cpu": BFLOAT16}   # PyTorch's defaults
        self.active: dict = {}
        self.names = frozenset()
        self.cache_enabled = True
        self.nesting = 0
        # id(float32 leaf) -> (the leaf, its cast): PyTorch's cached_casts. Holding the leaf
        # keeps its id from being reused while the entry lives; cleared on the outermost exit.
        self.cache: dict = {}

    def refresh(self) -> None:
        self.active = {d: self.dtype[d] for d in _DEVICE_TYPES if self.enabled[d]}
        self.names = frozenset().union(*(LISTED_BY_DEVICE[d] for d in self.active))
        STATE.ops.autocast = self if self.active else None


def _state() -> AutocastState:
    st = getattr(STATE, "autocast", None)
    if st is None:
        st = STATE.autocast = AutocastState()
    return st


def _device_type(device_type) -> str:
    name = str(device_type).split(":")[0]
    if name not in _DEVICE_TYPES:
        raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'")
    return name


def _as_dtype(dtype):
    if str(dtype) in ("bfloat16", "torch.bfloat16"):
        return BFLOAT16
    return np.dtype(dtype)


def is_autocast_available(device_type: str) -> bool:
    """``torch.amp.is_autocast_available``: True for ``"cuda"`` and ``"cpu"``."""
    return str(device_type).split(":")[0] in _DEVICE_TYPES


def is_autocast_enabled(device_type: str = "cuda") -> bool:
    """Whether autocast is on for ``device_type`` in this thread (``torch.is_autocast_enabled``;
    without an argument, CUDA's)."""
    return _state().enabled[_device_type(device_type)]


def set_autocast_enabled(device_type, enabled=None) -> None:
    """``torch.set_autocast_enabled(device_type, enabled)`` (or ``(enabled)``: CUDA's)."""
    if enabled is None:
        device_type, enabled = "cuda", device_type
    st = _state()
    st.enabled[_device_type(device_type)] = bool(enabled)
    st.refresh()


def get_autocast_dtype(device_type: str):
    """The dtype autocast casts to on ``device_type`` in this thread (PyTorch's defaults:
    bfloat16 on CPU, float16 on CUDA)."""
    return _state().dtype[_device_type(device_type)]


def set_autocast_dtype(device_type: str, dtype) -> None:
    st = _state()
    st.dtype[_device_type(device_type)] = _as_dtype(dtype)
    st.refresh()


def is_autocast_cache_enabled() -> bool:
    return _state().cache_enabled


def set_autocast_cache_enabled(enabled: bool) -> None:
    _state().cache_enabled = bool(enabled)


def clear_autocast_cache() -> None:
    """Drop this thread's cached casts (done when the outermost region exits)."""
    _state().cache.clear()


class autocast:
    """``torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None)``: ops in
    the region run in the dtype the policy table (:data:`POLICY`) gives them. A context
    manager and a decorator; regions nest, and the settings are this thread's only.

    Args:
        device_type: ``"cuda"`` or ``"cpu"``.
        dtype: the lower-precision dtype; default bfloat16 on CPU and float16 on CUDA, as
            PyTorch's. CPU takes bfloat16 or float16, CUDA float16 (CuPy has no bfloat16).
        enabled: False makes a region where autocast is off (inside an enabled one too).
        cache_enabled: cache the casts of float32 parameters within the region (default True).
    """

    def __init__(self, device_type: str, dtype=None, enabled: bool = True,
                 cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        self.device = _device_type(device_type)
        self._args = (device_type, dtype, enabled, cache_enabled)
        self._enabled = bool(enabled)
        self._cache_enabled = True if cache_enabled is None else bool(cache_enabled)
        st = _state()
        if dtype is None:
            dtype = st.dtype[self.device]
        self.fast_dtype = _as_dtype(dtype)
        if self._enabled and self.device == "cuda" and not backend.cuda_is_available():
            warnings.warn("User provided device_type of 'cuda', but CUDA is not available. "
                          "Disabling", stacklevel=2)
            self._enabled = False
        if self._enabled and self.fast_dtype not in SUPPORTED[self.device]:
            # PyTorch's warning; CUDA's bfloat16 is the one PyTorch has and CuPy lacks.
            why = (ERR_BFLOAT16_CUDA if self.fast_dtype is BFLOAT16 else
                   f"{self.device.upper()} Autocast only supports dtypes of "
                   f"{', '.join('torch.' + d.name for d in SUPPORTED[self.device])} currently.")
            warnings.warn(f"In {self.device.upper()} autocast, but the target dtype is not "
                          f"supported. Disabling autocast.\n{why}", stacklevel=2)
            self._enabled = False

    def __enter__(self):
        st = _state()
        self._prev = (st.enabled[self.device], st.dtype[self.device], st.cache_enabled)
        st.enabled[self.device] = self._enabled
        if self.fast_dtype is not None:
            st.dtype[self.device] = self.fast_dtype
        st.cache_enabled = self._cache_enabled
        st.nesting += 1
        st.refresh()
        return self

    def __exit__(self, *exc):
        st = _state()
        st.nesting -= 1
        if st.nesting == 0:
            st.cache.clear()
        st.enabled[self.device], st.dtype[self.device], st.cache_enabled = self._prev
        st.refresh()
        return False

    def __call__(self, fn):
        args = self._args

        @functools.wraps(fn)
        def decorate_autocast(*a, **k):
            with autocast(*args):
                return fn(*a, **k)

        return decorate_autocast


def target_dtype(policy: str, lower, dtypes, attrs) -> "np.dtype | None":
    """The dtype the eligible inputs (floating, not float64, on the region's device type) of
    an op with ``policy`` are cast to, or None to run the op as it is.

    Args:
        policy: one of LOWER, FP32, FP32_OPT, PROMOTE.
        lower: the region's dtype for the op's device type.
        dtypes: the dtypes of the eligible inputs.
        attrs: the op's keyword attributes (FP32_OPT leaves a call naming ``dtype`` alone).
    """
    if not dtypes:
        return None
    if policy == LOWER:
        return lower
    if policy == FP32:
        return FLOAT32
    if policy == FP32_OPT:
        return None if attrs and attrs.get("dtype") is not None else FLOAT32
    # PROMOTE: float32 wins over the lower dtype (PyTorch's autocast::prioritize).
    return FLOAT32 if any(d == FLOAT32 for d in dtypes) else lower


def eligible(array, device_type: str, dev_type_of_tensor: str) -> bool:
    """PyTorch's ``is_eligible``: a floating tensor on the region's device type, not float64."""
    dt = array.dtype
    return ((dt.kind == "f" and dt != FLOAT64) or dt is BFLOAT16) and \
        dev_type_of_tensor == device_type
