"""Tensor: an array (NumPy or CuPy) plus the autograd state that PyTorch users know, and the
factories that make one.

The class sits below everything that makes or runs ops (node, dispatch, engine): the
dispatcher imports it to build its results, and the methods that call an op (``to``,
``clone``, ``exp``...) are attached by the ops package with the rest of the op table's
methods (``dispatch.METHODS``). Named ``_tensor`` as PyTorch's module is: ``tensor`` is the
factory function that ``gradtrace.autograd`` exports, and a submodule of that name would
replace it on the package whenever it was imported again.
"""
from __future__ import annotations

import numbers
import threading

import numpy

from . import backend, memory
from . import record_function as _rf
from .backend import CPU
from .dtypes import BFLOAT16, ERR_BFLOAT16_CUDA
from .generator import draw_normal, draw_uniform
from .hooks import GRAPH_EPOCH, register
from .promotion import get_default_dtype, set_default_dtype

# What Tensor.backward calls: [engine.backward, compiled_autograd.run_backward], each put here
# by its module as it loads (both import this one, which cannot import them back; an import
# inside Tensor.backward would also cost a microsecond per call).
BACKWARD: list = [None, None]

__all__ = ["Tensor", "tensor", "as_tensor", "from_numpy", "from_dlpack", "zeros", "ones",
           "empty", "full", "arange", "linspace", "eye", "randn", "rand", "randint",
           "zeros_like", "ones_like", "empty_like", "full_like", "randn_like", "rand_like",
           "manual_seed", "get_default_dtype", "set_default_dtype"]

_MEM = _rf.STATE


def _is_float(dtype) -> bool:
    return dtype.kind in "fc" or dtype is BFLOAT16


class Tensor:
    """An n-dimensional array on a device with autograd history.

    Attributes:
        data: a tensor sharing the array, without history (PyTorch's ``.data``); the engine
            reads the NumPy or CuPy array itself from ``_data``.
        requires_grad: whether gradients are computed for this tensor.
        grad: accumulated gradient (a Tensor) of a leaf, or of a non-leaf after retain_grad().
        grad_fn: the Node that made this tensor (None for leaves).
    """

    __slots__ = ("_data", "requires_grad", "grad", "grad_fn", "_output_nr", "_vc", "_device",
                 "_acc", "_base", "_extra", "__weakref__")

    # ------------------------------------------------------------------ construction
    def __init__(self, data, requires_grad: bool = False, device=None, dtype=None):
        dev = backend.device(device) if device is not None else None
        arr = _to_array(data, dtype, dev)
        dev = dev or backend.device_of_array(arr)
        Tensor._init(self, arr, False, None, 0, [0], dev)
        if requires_grad:
            self.requires_grad_(True)

    @staticmethod
    def _init(t, data, requires_grad, grad_fn, output_nr, vc, dev):
        """Set every field of a new tensor ``t`` (the one place that knows them all)."""
        t._data = data
        t.requires_grad = requires_grad
        t.grad = None
        t.grad_fn = grad_fn
        t._output_nr = output_nr
        t._vc = vc
        t._device = dev
        t._acc = None
        t._base = None
        t._extra = None
        if _MEM.memory:
            memory.track(data, dev)
        return t

    @staticmethod
    def _make(data, requires_grad, grad_fn, output_nr, vc, dev=None):
        """Fast constructor used by the dispatcher (no conversions, no checks)."""
        return _init_tensor(_new_tensor(Tensor), data, requires_grad, grad_fn, output_nr, vc,
                            dev if dev is not None else backend.device_of_array(data))

    # ------------------------------------------------------------------ basic properties
    @property
    def data(self):
        """PyTorch's ``.data``: a tensor sharing this one's storage, without history and with
        a version counter of its own, so ``p.data.mul_(0.5)`` changes ``p`` with no autograd
        check seeing it. (The array itself is ``_data`` inside the engine.)"""
        return Tensor._make(self._data, False, None, 0, [0], self._device)

    @data.setter
    def data(self, value):
        if not isinstance(value, Tensor):
            raise TypeError(f"data must be a Tensor, got {type(value).__name__}")
        self._data = value._data
        self._device = value._device

    @property
    def shape(self) -> tuple:
        return self._data.shape

    def size(self, dim: int | None = None):
        return self._data.shape if dim is None else self._data.shape[dim]

    @property
    def dtype(self):
        return self._data.dtype

    @property
    def device(self):
        return self._device

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    def numel(self) -> int:
        return int(self._data.size)

    @property
    def nbytes(self) -> int:
        """Bytes of the elements (torch's ``Tensor.nbytes``)."""
        return int(self._data.nbytes)

    def element_size(self) -> int:
        return int(self._data.itemsize)

    @property
    def itemsize(self) -> int:
        """Bytes per element (torch's ``Tensor.itemsize``)."""
        return int(self._data.itemsize)

    def ndimension(self) -> int:
        return self._data.ndim

    def nelement(self) -> int:
        return int(self._data.size)

    # ------------------------------------------------------------------ memory layout
    def stride(self, dim: int | None = None):
        """Strides in elements, as torch's (NumPy and CuPy keep them in bytes).

        A size-1 dim made by NumPy's newaxis has stride 0, where torch's unsqueeze gives the
        next dim's ``size * stride`` (1 for the last): that is reported, so
        ``x.unsqueeze(1).stride()`` is torch's. (A size-1 dim's stride never moves an element.)
        An empty row-major array, all zero strides in NumPy, gets torch's contiguous ones.
        """
        if dim is not None:
            ndim = self._data.ndim
            if not -max(ndim, 1) <= dim < max(ndim, 1):
                lo, hi = -max(ndim, 1), max(ndim, 1) - 1
                raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, "
                                 f"{hi}], but got {dim})")
            return self.stride()[dim % max(ndim, 1)] if ndim else 1
        shape, item = self._data.shape, self._data.itemsize
        if self._data.size == 0 and self._data.flags.c_contiguous:
            # NumPy gives an empty array zero strides; torch its contiguous ones.
            strides, step = [], 1
            for size in reversed(shape):
                strides.insert(0, step)
                step *= max(size, 1)
            return tuple(strides)
        strides = [s // item for s in self._data.strides]
        for d in range(len(shape) - 1, -1, -1):
            if shape[d] == 1 and strides[d] == 0:
                strides[d] = strides[d + 1] * shape[d + 1] if d + 1 < len(shape) else 1
        return tuple(strides)

    def is_contiguous(self, memory_format=None) -> bool:
        """Whether the elements lie in row-major order with no gaps (torch's rule: a size-1
        dim's stride does not matter; an empty tensor is contiguous). ``memory_format``:
        only torch's ``contiguous_format`` (the only layout here)."""
        if memory_format is not None and not str(memory_format).endswith("contiguous_format"):
            raise NotImplementedError(f"is_contiguous: memory_format={memory_format} is not "
                                      "supported (only contiguous_format)")
        if self._data.size == 0:
            return True
        expected = 1
        for size, stride in zip(reversed(self._data.shape), reversed(self.stride())):
            if size != 1:
                if stride != expected:
                    return False
                expected *= size
        return True

    def data_ptr(self) -> int:
        """The address of the first element (CuPy: a device address)."""
        return _address(self._data)

    def storage_offset(self) -> int:
        """Elements from the start of the allocation the array lives in to its first element
        (0 for a fresh tensor; a view's, or its detached copy's, offset into its base)."""
        arr = root = self._data
        # NumPy's and CuPy's views keep the array they view as ``base`` (NumPy's chain may
        # end in a buffer that is no array: bytes, an mmap).
        while getattr(root, "base", None) is not None and hasattr(root.base, "shape"):
            root = root.base
        return (_address(arr) - _address(root)) // arr.itemsize

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    @property
    def is_cuda(self) -> bool:
        return self._device.type == "cuda"

    @property
    def _version(self) -> int:
        return self._vc[0]

    @property
    def output_nr(self) -> int:
        return self._output_nr

    @property
    def T(self):
        return self.permute(*reversed(range(self.ndim)))

    @property
    def mT(self):
        return self.transpose(-2, -1)

    @property
    def mH(self):
        """The conjugate transpose of the last two dims (real tensors: :attr:`mT`)."""
        return self._adjoint("tensor.mH")

    @property
    def H(self):
        """The conjugate transpose of a matrix (2-D tensors only, as PyTorch's)."""
        if self._data.ndim != 2 and self._data.ndim != 0:
            raise RuntimeError("tensor.H is only supported on matrices (2-D tensors). Got "
                               f"{self._data.ndim}-D tensor." + (
                                   " For batches of matrices, consider using tensor.mH"
                                   if self._data.ndim > 2 else ""))
        return self._adjoint("tensor.H")

    def adjoint(self):
        """The conjugate transpose of the last two dims (as :attr:`mH`)."""
        return self._adjoint("tensor.adjoint()")

    def _adjoint(self, what):
        if self._data.dtype.kind == "c":
            raise NotImplementedError(f"{what}: complex tensors are not supported (no conj op)")
        if self._data.ndim == 0:   # PyTorch: deprecated, the tensor itself
            return self
        if self._data.ndim < 2:
            raise RuntimeError(f"{what} is only supported on matrices or batches of matrices. "
                               f"Got {self._data.ndim}-D tensor.")
        return self.transpose(-2, -1)

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._data.shape[0]))

    __hash__ = object.__hash__

    # ------------------------------------------------------------------ autograd state
    def requires_grad_(self, requires_grad: bool = True):
        if requires_grad and not _is_float(self._data.dtype):
            raise RuntimeError(
                f"only Tensors of floating point dtype can require gradients, got {self._data.dtype}")
        if not requires_grad and self.grad_fn is not None:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables; use detach() to "
                "get a tensor without history")
        self.requires_grad = bool(requires_grad)
        return self

    def detach(self):
        """A tensor sharing storage and version counter, with no history."""
        return Tensor._make(self._data, False, None, 0, self._vc, self._device)

    def detach_(self):
        self.grad_fn = None
        self.requires_grad = False
        self._output_nr = 0
        return self

    def retain_grad(self) -> None:
        """Keep ``.grad`` for this non-leaf tensor after backward."""
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self.grad_fn is None:
            return  # leaves keep their grad anyway
        self.grad_fn._add_retains_grad_hook(self._output_nr, self)

    @property
    def retains_grad(self) -> bool:
        fn = self.grad_fn
        hooks = fn._extra.retains_grad_hooks if fn is not None and fn._extra else None
        return bool(hooks and hooks.get(self._output_nr) is self)

    def _extras(self) -> dict:
        if self._extra is None:
            self._extra = {}
        return self._extra

    def register_hook(self, hook):
        """``hook(grad) -> Tensor or None`` runs when this tensor's gradient is computed;
        a returned tensor replaces the gradient. Returns a removable handle."""
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is not None:
            return self.grad_fn._register_tensor_pre_hook(self._output_nr, hook)
        GRAPH_EPOCH[0] += 1   # a leaf's hooks changed (see hooks.GRAPH_EPOCH)
        return register(self._extras().setdefault("hooks", {}), hook)

    def register_post_accumulate_grad_hook(self, hook):
        """``hook(tensor)`` runs after this leaf's ``.grad`` has been updated."""
        if self.grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        GRAPH_EPOCH[0] += 1
        return register(self._extras().setdefault("post_acc_hooks", {}), hook)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None,
                 compiled=False):
        """Accumulate the gradient of this tensor w.r.t. the graph leaves into their ``.grad``.

        ``compiled=True`` runs it through compiled autograd (``autograd.compiled_autograd``).
        """
        backward = BACKWARD[1] if compiled else BACKWARD[0]
        backward([self], None if gradient is None else [gradient], retain_graph, create_graph,
                 inputs=inputs)

    # ------------------------------------------------------------------ devices and interop
    # (``to`` and ``clone`` run ops: the ops package attaches them, see ops/elementwise.py.)
    def is_floating_point(self) -> bool:
        return _is_float(self._data.dtype)

    # ------------------------------------------------------------------ new_* (PyTorch's)
    # Factories taking this tensor's dtype and device unless told otherwise.
    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
        return zeros(*size, dtype=dtype or self._data.dtype, device=device or self._device,
                     requires_grad=requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
        return ones(*size, dtype=dtype or self._data.dtype, device=device or self._device,
                    requires_grad=requires_grad)

    def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
        return empty(*size, dtype=dtype or self._data.dtype, device=device or self._device,
                     requires_grad=requires_grad)

    def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
        return full(size, fill_value, dtype=dtype or self._data.dtype,
                    device=device or self._device, requires_grad=requires_grad)

    def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
        """A copy of ``data`` with this tensor's dtype and device by default."""
        return tensor(data, dtype=dtype or self._data.dtype, device=device or self._device,
                      requires_grad=requires_grad)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to(device if device is not None else "cuda")

    def numpy(self):
        """The values as a NumPy array (a copy from the GPU; shared memory on the CPU)."""
        if self.requires_grad:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. "
                               "Use tensor.detach().numpy() instead.")
        return self._data if self._device is CPU else self._data.get()

    def __array__(self, dtype=None, copy=None):
        """NumPy's protocol with NumPy 2's ``copy``: None copies only when needed, True
        always, False never (ValueError where a copy is needed: from the GPU, or to another
        dtype)."""
        arr = self.numpy()
        on_host = self._device is CPU
        if dtype is not None and numpy.dtype(dtype) != arr.dtype:
            if copy is False:
                raise ValueError(f"Unable to avoid copy while creating an array as requested: "
                                 f"the tensor is {arr.dtype}, {numpy.dtype(dtype)} was asked for")
            return arr.astype(dtype)
        if copy is False and not on_host:
            raise ValueError(f"Unable to avoid copy while creating an array as requested: the "
                             f"tensor is on {self._device}")
        return arr.copy() if copy and on_host else arr

    def __dlpack__(self, *args, **kwargs):
        return self._data.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._data.__dlpack_device__()

    def item(self):
        if self._data.size != 1:
            raise RuntimeError(
                f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
        return self._data.reshape(()).item()

    def tolist(self):
        return (self._data if self._device is CPU else self._data.get()).tolist()

    def contiguous(self, memory_format=None):
        """``self`` when :meth:`is_contiguous`, else a row-major copy (CloneBackward0, as
        torch's)."""
        if self.is_contiguous(memory_format):
            return self
        return self.clone()

    def view_as(self, other):
        """``self.view(other.size())``."""
        return self.view(other.shape)

    def __pos__(self):
        # torch.positive: the tensor itself, refused for bool.
        if self._data.dtype == numpy.bool_:
            raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
        return self

    def __contains__(self, element) -> bool:
        """``element in t``: torch's ``(element == t).any()``."""
        if not isinstance(element, (Tensor, numbers.Number)):
            raise RuntimeError("Tensor.__contains__ only supports Tensor or scalar, but you "
                               f"passed in a {type(element)}.")
        return bool((self == element).any().item())

    def __format__(self, format_spec):
        """PyTorch's: a 0-d tensor formats its number (``f"{loss:.4f}"``); any other tensor
        formats as ``str`` with an empty spec and refuses any other spec (object's rule)."""
        if self._data.ndim == 0:
            return self.item().__format__(format_spec)
        return object.__format__(self, format_spec)

    def __repr__(self):
        arr = self._data if self._device is CPU else self._data.get()
        if arr.dtype is BFLOAT16:   # printed by its values, as PyTorch's (ml_dtypes prints 6
            arr = arr.astype(numpy.float32)   # digits); the dtype= below still says bfloat16
        body = numpy.array2string(arr, separator=", ", prefix="tensor(", precision=4,
                                  threshold=200)
        extras = []
        if self._device is not CPU:
            extras.append(f"device='{self._device}'")
        if self._data.dtype not in (get_default_dtype(), numpy.int64, numpy.bool_):
            extras.append(f"dtype={self._data.dtype}")
        if self.grad_fn is not None:
            extras.append(f"grad_fn=<{self.grad_fn.name()}>")
        elif self.requires_grad:
            extras.append("requires_grad=True")
        return "tensor(" + body + "".join(", " + e for e in extras) + ")"

    def __bool__(self):
        if self._data.size != 1:
            raise RuntimeError(
                f"Boolean value of Tensor with {self._data.size} values is ambiguous")
        return bool(self.item())

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self._data.dtype.kind not in "iu" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())


def _address(arr) -> int:
    """An array's data pointer: CuPy's device pointer, NumPy's host one."""
    if isinstance(arr, numpy.ndarray):
        return int(arr.__array_interface__["data"][0])
    return int(arr.data.ptr)


def _is_dtype(value) -> bool:
    """Whether a positional argument of ``Tensor.to`` names a dtype (not a device)."""
    if isinstance(value, numpy.dtype) or (isinstance(value, type) and issubclass(value, numpy.generic)):
        return True
    if isinstance(value, str) and not value.split(":")[0] in ("cpu", "cuda"):
        try:
            numpy.dtype(value)
        except TypeError:
            return False
        return True
    return False


def _to_array(data, dtype, dev):
    """Turn Python data, NumPy/CuPy arrays or tensors into an array on ``dev``."""
    if isinstance(data, Tensor):
        data = data._data
    target = numpy.dtype(dtype) if dtype is not None else None
    if backend.is_device_array(data):
        arr = data
        if target is not None and arr.dtype != target:
            arr = arr.astype(target)
    else:
        if isinstance(data, (list, tuple)) and any(isinstance(x, Tensor) for x in _flatten(data)):
            data = [_as_host(x) for x in data]
        arr = numpy.asarray(data, dtype=target)
        if target is None and arr.dtype == numpy.float64 and not isinstance(data, numpy.generic):
            arr = arr.astype(get_default_dtype())   # Python floats become the default dtype
        if arr.dtype == object:
            raise TypeError(f"cannot make a tensor from {type(data).__name__} holding objects")
    if dev is not None:
        arr = backend.to_device(arr, dev)
    return arr


def _flatten(seq):
    for x in seq:
        if isinstance(x, (list, tuple)):
            yield from _flatten(x)
        else:
            yield x


def _as_host(x):
    if isinstance(x, Tensor):
        return x.detach().numpy() if x._device is CPU else x._data.get()
    if isinstance(x, (list, tuple)):
        return [_as_host(v) for v in x]
    return x


# --------------------------------------------------------------------------- factories


def tensor(data, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new leaf tensor holding a copy of ``data``."""
    dev = backend.device(device) if device is not None else None
    _refuse_cuda_bfloat16(dtype, dev)
    arr = _to_array(data, dtype, dev)
    if isinstance(data, Tensor) or backend.is_device_array(data):
        # (an ndarray's own ``.data`` is a memoryview, so look inside Tensors only)
        arr = arr.copy() if arr is (data._data if isinstance(data, Tensor) else data) else arr
    t = Tensor._make(arr, False, None, 0, [0], dev or backend.device_of_array(arr))
    if requires_grad:
        t.requires_grad_(True)
    return t


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """Like :func:`tensor` but shares memory with an array when it can."""
    if isinstance(data, Tensor) and dtype is None and device is None:
        return data
    dev = backend.device(device) if device is not None else None
    _refuse_cuda_bfloat16(dtype, dev)
    arr = _to_array(data, dtype, dev)
    return Tensor._make(arr, False, None, 0, [0], dev or backend.device_of_array(arr))


def from_numpy(arr) -> Tensor:
    if not isinstance(arr, numpy.ndarray):
        raise TypeError(f"from_numpy expects a numpy.ndarray, got {type(arr).__name__}")
    return Tensor._make(arr, False, None, 0, [0], CPU)


def from_dlpack(obj) -> Tensor:
    """A tensor sharing memory with any DLPack producer (NumPy, CuPy, PyTorch, JAX...)."""
    kind, index = obj.__dlpack_device__()
    if int(kind) == 1:  # kDLCPU
        arr = numpy.from_dlpack(obj)
        return Tensor._make(arr, False, None, 0, [0], CPU)
    dev = backend.device(f"cuda:{index}")
    return Tensor._make(dev.xp.from_dlpack(obj), False, None, 0, [0], dev)


def _factory(dev_spec, make, requires_grad):
    dev = backend.device(dev_spec)
    if dev.type == "cuda":
        with dev.xp.cuda.Device(dev.index):
            arr = make(dev.xp)
        _refuse_cuda_bfloat16(arr, dev)
    else:
        arr = make(dev.xp)
    t = Tensor._make(arr, False, None, 0, [0], dev)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _refuse_cuda_bfloat16(dtype_or_array, dev) -> None:
    """CuPy has no bfloat16: say so where a bfloat16 tensor would be made on a GPU (a dtype
    asked for, or an array the GPU stand-in made)."""
    if dev is None or dev.type != "cuda" or dtype_or_array is None:
        return
    dt = getattr(dtype_or_array, "dtype", dtype_or_array)
    try:
        dt = numpy.dtype(dt)
    except TypeError:
        return   # not a dtype: the factory's own error will say so
    if dt is BFLOAT16:
        raise RuntimeError(ERR_BFLOAT16_CUDA)


def _shape(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    for s in size:
        if not isinstance(s, numbers.Integral) or s < 0:
            raise ValueError(f"sizes must be non-negative integers, got {tuple(size)}")
    return tuple(int(s) for s in size)


def _dt(dtype, default=None):
    return numpy.dtype(dtype) if dtype is not None else (default or get_default_dtype())


def zeros(*size, dtype=None, device=None, requires_grad=False) -> Tensor:
    shape = _shape(size)
    return _factory(device, lambda xp: xp.zeros(shape, _dt(dtype)), requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False) -> Tensor:
    shape = _shape(size)
    return _factory(device, lambda xp: xp.ones(shape, _dt(dtype)), requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False) -> Tensor:
    shape = _shape(size)
    return _factory(device, lambda xp: xp.empty(shape, _dt(dtype)), requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad=False) -> Tensor:
    shape = _shape((size,) if isinstance(size, int) else tuple(size))
    if dtype is None:
        dtype = (numpy.bool_ if isinstance(fill_value, bool) else
                 numpy.int64 if isinstance(fill_value, int) else get_default_dtype())
    return _factory(device, lambda xp: xp.full(shape, fill_value, numpy.dtype(dtype)), requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False) -> Tensor:
    if end is None:
        start, end = 0, start
    if dtype is None:
        is_int = all(isinstance(v, int) for v in (start, end, step))
        dtype = numpy.int64 if is_int else get_default_dtype()
    dt = numpy.dtype(dtype)
    if dt is BFLOAT16:   # the values in float32, then rounded, as PyTorch's (not bfloat16 sums)
        return _factory(device, lambda xp: xp.arange(start, end, step, dtype=numpy.float32)
                        .astype(dt), requires_grad)
    return _factory(device, lambda xp: xp.arange(start, end, step, dtype=dt), requires_grad)


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False) -> Tensor:
    dt = _dt(dtype)
    if dt is BFLOAT16:
        return _factory(device, lambda xp: xp.linspace(start, end, steps, dtype=numpy.float32)
                        .astype(dt), requires_grad)
    return _factory(device, lambda xp: xp.linspace(start, end, steps, dtype=dt), requires_grad)


def eye(n, m=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _factory(device, lambda xp: xp.eye(n, m, dtype=_dt(dtype)), requires_grad)


def _like(t, make, dtype, device, requires_grad):
    dev = device if device is not None else t._device
    return _factory(dev, lambda xp: make(xp, t._data.shape, _dt(dtype, t._data.dtype)), requires_grad)


def zeros_like(t, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _like(t, lambda xp, s, d: xp.zeros(s, d), dtype, device, requires_grad)


def ones_like(t, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _like(t, lambda xp, s, d: xp.ones(s, d), dtype, device, requires_grad)


def empty_like(t, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _like(t, lambda xp, s, d: xp.empty(s, d), dtype, device, requires_grad)


def full_like(t, fill_value, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _like(t, lambda xp, s, d: xp.full(s, fill_value, d), dtype, device, requires_grad)


# --------------------------------------------------------------------------- random numbers


class _Generators(threading.local):
    """A seeded generator per device; ``manual_seed`` reseeds them all."""

    seed = 0
    _by_device: dict | None = None

    def get(self, dev):
        if self._by_device is None:
            self._by_device = {}
        gen = self._by_device.get(dev)
        if gen is None:
            if dev.type == "cpu":
                gen = numpy.random.default_rng(self.seed)
            else:
                with dev.xp.cuda.Device(dev.index):
                    gen = dev.xp.random.default_rng(self.seed)
            self._by_device[dev] = gen
        return gen


_generators = _Generators()


def manual_seed(seed: int) -> None:
    """Seed the random number generators of every device (for this thread)."""
    _generators.seed = int(seed)
    _generators._by_device = {}


def default_generator(device=None):
    return _generators.get(backend.device(device))


def randn(*size, dtype=None, device=None, requires_grad=False, generator=None) -> Tensor:
    shape = _shape(size)
    dev = backend.device(device)
    gen = generator or _generators.get(dev)
    return _factory(dev, lambda xp: draw_normal(gen, shape, _dt(dtype)), requires_grad)


def rand(*size, dtype=None, device=None, requires_grad=False, generator=None) -> Tensor:
    shape = _shape(size)
    dev = backend.device(device)
    gen = generator or _generators.get(dev)
    return _factory(dev, lambda xp: draw_uniform(gen, shape, _dt(dtype)), requires_grad)


def randint(*args, low=None, high=None, size=None, generator=None, dtype=None, device=None,
            requires_grad=False) -> Tensor:
    """Integers drawn uniformly from ``[low, high)``, PyTorch's forms:
    ``randint(high, size)``, ``randint(low, high, size)``, and the same with ``low=``,
    ``high=``, ``size=`` as keywords; ``generator``, ``dtype`` (int64 by default; a float
    dtype holds the integers), ``device``, ``requires_grad`` (floating dtypes only)."""
    args = list(args)
    if size is None:
        if not args:
            raise TypeError("randint() missing required argument 'size'")
        size = args.pop()
    if len(args) > 2:
        raise TypeError(f"randint() takes at most 3 positional arguments ({len(args) + 1} "
                        "given)")
    if len(args) == 2:
        low, high = args
    elif len(args) == 1:
        if high is None:
            high = args[0]
        else:
            low = args[0]
    if high is None:
        raise TypeError("randint() missing required argument 'high'")
    low = 0 if low is None else low
    if isinstance(size, numbers.Integral) or not hasattr(size, "__iter__"):
        raise TypeError(f"randint(): argument 'size' must be tuple of ints, not "
                        f"{type(size).__name__}")
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} "
                           f">= to={high}")
    dt = numpy.dtype(dtype) if dtype is not None else numpy.dtype(numpy.int64)
    if requires_grad and not _is_float(dt):
        raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                           "gradients")
    dev = backend.device(device)
    gen = generator or _generators.get(dev)
    shape = tuple(int(s) for s in size)
    return _factory(dev, lambda xp: gen.integers(low, high, size=shape).astype(dt),
                    requires_grad)


def randn_like(t, dtype=None, device=None, requires_grad=False) -> Tensor:
    return randn(*t.shape, dtype=dtype or t.dtype, device=device or t.device,
                 requires_grad=requires_grad)


def rand_like(t, dtype=None, device=None, requires_grad=False) -> Tensor:
    return rand(*t.shape, dtype=dtype or t.dtype, device=device or t.device,
                requires_grad=requires_grad)


_new_tensor = object.__new__
_init_tensor = Tensor._init
