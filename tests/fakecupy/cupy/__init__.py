"""A NumPy-backed stand-in for the part of CuPy's API that gradtrace uses.

Why: the project's GPU code paths (device placement, streams and events, the memory-pool hook,
pinned copies, CUDA-event timing in the profiler, CUDA-graph capture in compiled autograd) are
Python logic around CuPy calls. On a machine without a GPU they would never run, so a typo, a
host array mixed into device math or a host sync inside a graph capture would only show up on
real hardware. Putting this directory first on ``sys.path`` (``GRADTRACE_FAKE_CUPY=1`` in the
test suite) makes ``import cupy`` load this module, one "GPU" appears, and the ``cuda`` tests
run against it.

It is a test double, not a GPU: kernels run synchronously on the host through NumPy, so CUDA
times are host times and nothing about speed or numerics on real hardware can be learnt from
it. What it does enforce, the way CuPy does:

- a device array is its own type, not a NumPy array: ``numpy.asarray(device_array)`` raises
  CuPy's "Implicit conversion to a NumPy array is not allowed", and a NumPy array mixed into
  device arithmetic raises ``TypeError``; ``.get()`` / ``cupy.asnumpy`` copy to the host,
  ``cupy.asarray(host)`` copies to the "device";
- reductions, indexing and ufuncs give 0-d device arrays, never NumPy scalars;
- streams have distinct non-zero handles, the current stream is per thread and per ``with``;
  events must be recorded before their elapsed time is read;
- memory hooks are registered per thread and called with keyword arguments on every pool
  allocation and free;
- stream capture: work issued on a capturing stream is *recorded, not run* (its outputs hold
  garbage until the graph is launched, as on a GPU); a host sync on the capturing stream
  (``.get()``, ``.item()``, ``float()``, ``stream.synchronize()``...) raises; the legacy
  default stream cannot capture; ``Graph.launch`` replays the recorded kernels on the buffers
  they were captured with (their addresses are baked in, as in a CUDA graph);
- kernel recording: while the stand-in CUPTI beside it (``tests/fakecupy/cupti``) records,
  each kernel, device-to-host / host-to-device copy, graph launch and synchronize is reported
  to it, as a GPU reports them to CUPTI (see that module for what it checks).
"""
from __future__ import annotations

import itertools
import sys
import threading
import time
import types
import weakref

import numpy as _np

from . import _gemm

__version__ = "13.0.0+gradtrace.fake"
_IS_FAKE = True

_IMPLICIT = ("Implicit conversion to a NumPy array is not allowed. "
             "Please use `.get()` to construct a NumPy array explicitly.")


class CUDARuntimeError(RuntimeError):
    """What CuPy raises for a failing CUDA runtime call."""


def _capture_violation(what):
    return CUDARuntimeError(f"cudaErrorStreamCaptureUnsupported: operation not permitted when "
                            f"stream is capturing ({what})")


# --------------------------------------------------------------------------- streams and capture

_tls = threading.local()
# Stream handles: from STREAM_PTR_BASE in steps of 0x100 (the stand-in CUPTI refuses others).
STREAM_PTR_BASE, STREAM_PTR_STEP = 0x7F0000001000, 0x100
_stream_ptrs = itertools.count(STREAM_PTR_BASE, STREAM_PTR_STEP)
_capturing: dict = {}       # stream ptr -> list of recorded kernels (while that stream captures)


def _current():
    s = getattr(_tls, "stream", None)
    return s if s is not None else Stream.null


def _recorder():
    """The kernel list of the current stream when it is capturing, else None."""
    if not _capturing:
        return None
    return _capturing.get(_current().ptr)


def _cupti():
    """The fake CUPTI (``tests/fakecupy/cupti``) while it records, else None: each kernel,
    copy and graph launch is then reported to it, as a GPU reports them to CUPTI."""
    m = sys.modules.get("cupti.cupti")
    return m if m is not None and getattr(m, "_IS_FAKE", False) and m._recording() else None


def _host_sync(what):
    if _capturing and _current().ptr in _capturing:
        raise _capture_violation(what)


class Event:
    def __init__(self, block=False, disable_timing=False, interprocess=False):
        if interprocess and not disable_timing:
            raise ValueError("Timing must be disabled for interprocess events")
        self.disable_timing = disable_timing
        self.ptr = next(_stream_ptrs)
        self._t = None

    @property
    def done(self):
        return True

    def record(self, stream=None):
        stream = stream if stream is not None else _current()
        if stream.ptr in _capturing:
            return                                  # captured as a graph node; no time
        self._t = time.perf_counter_ns()            # kernels ran synchronously: host time

    def synchronize(self):
        pass


def get_elapsed_time(start_event, end_event):
    for e in (start_event, end_event):
        if e.disable_timing:
            raise CUDARuntimeError("cudaErrorInvalidResourceHandle: event has timing disabled")
        if e._t is None:
            raise CUDARuntimeError("cudaErrorInvalidResourceHandle: event was never recorded")
    return (end_event._t - start_event._t) / 1e6


class Stream:
    def __init__(self, null=False, non_blocking=False, ptds=False, priority=None):
        self.ptr = 0 if null else next(_stream_ptrs)
        self.device_id = 0 if not null else -1
        self._saved = []

    def __eq__(self, other):
        return isinstance(other, Stream) and other.ptr == self.ptr

    def __hash__(self):
        return self.ptr

    def __repr__(self):
        return f"<Stream {self.ptr} (device {self.device_id})>"

    def use(self):
        _tls.stream = self
        return self

    def __enter__(self):
        self._saved.append(_current())
        _tls.stream = self
        return self

    def __exit__(self, *exc):
        _tls.stream = self._saved.pop()

    @property
    def done(self):
        return True

    def synchronize(self):
        if self.ptr in _capturing:
            raise _capture_violation("stream synchronize")
        c = _cupti()
        if c is not None:
            c.synchronize(c.RuntimeApiTraceCbid.cudaStreamSynchronize_v3020)

    def record(self, event=None):
        event = event if event is not None else Event()
        event.record(self)
        return event

    def wait_event(self, event):
        pass                                         # kernels already ran in host order

    def begin_capture(self, mode=None):
        if self.ptr in (0, 1):
            raise RuntimeError("cannot capture on the default (legacy) stream")
        if self.ptr in _capturing:
            raise CUDARuntimeError("cudaErrorIllegalState: stream is already capturing")
        _capturing[self.ptr] = []

    def end_capture(self):
        kernels = _capturing.pop(self.ptr, None)
        if kernels is None:
            raise CUDARuntimeError("cudaErrorIllegalState: stream is not capturing")
        return Graph(kernels)

    def is_capturing(self):
        return self.ptr in _capturing


Stream.null = Stream(null=True)


def get_current_stream(device_id=-1):
    return _current()


class Graph:
    """The kernels recorded on a capturing stream; ``launch`` runs them in order."""

    def __init__(self, kernels):
        self._kernels = kernels

    def launch(self, stream=None):
        c = _cupti()
        if c is not None:
            c.graph_launch((stream if stream is not None else _current()).ptr, self._kernels, id(self) & 0xFFFF)
            return
        for kernel in self._kernels:
            kernel()

    def upload(self, stream=None):
        pass


class Device:
    def __init__(self, device=None):
        self.id = 0 if device is None else int(device)
        if not 0 <= self.id < _N_DEVICES:
            raise CUDARuntimeError("cudaErrorInvalidDevice: invalid device ordinal")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def use(self):
        pass

    def synchronize(self):
        if _capturing:
            raise _capture_violation("device synchronize")
        c = _cupti()
        if c is not None:
            c.synchronize(c.RuntimeApiTraceCbid.cudaDeviceSynchronize_v3020)

    @property
    def compute_capability(self):
        return "90"


_N_DEVICES = 1


# --------------------------------------------------------------------------- memory hooks


def _hooks():
    hooks = getattr(_tls, "memory_hooks", None)
    if hooks is None:
        hooks = _tls.memory_hooks = {}
    return hooks


class MemoryHook:
    name = "MemoryHook"

    def __enter__(self):
        hooks = _hooks()
        if self.name in hooks:
            raise KeyError(f"memory hook {self.name} already exists")
        hooks[self.name] = self
        return self

    def __exit__(self, *exc):
        del _hooks()[self.name]

    def alloc_preprocess(self, **kwargs): pass
    def alloc_postprocess(self, **kwargs): pass
    def malloc_preprocess(self, **kwargs): pass
    def malloc_postprocess(self, **kwargs): pass
    def free_preprocess(self, **kwargs): pass
    def free_postprocess(self, **kwargs): pass


def _rounded(nbytes):
    return max(512, (nbytes + 511) // 512 * 512)


def _on_free(hooks, ptr, mem_size):
    for hook in list(hooks.values()):
        hook.free_postprocess(device_id=0, mem_size=mem_size, mem_ptr=ptr, pmem_id=ptr)


class MemoryPool:
    """CuPy's default pool, as counts: bytes of live device buffers (rounded to 512 as CuPy
    rounds) and bytes freed but kept cached until ``free_all_blocks``."""

    def __init__(self):
        self._used = self._cached = 0
        self._lock = threading.Lock()

    def used_bytes(self):
        return self._used

    def total_bytes(self):
        return self._used + self._cached

    def free_all_blocks(self):
        self._cached = 0

    def _malloc(self, size):
        with self._lock:
            taken = min(size, self._cached)      # a cached block is reused first
            self._cached -= taken
            self._used += size

    def _free(self, size):
        with self._lock:
            self._used -= size
            self._cached += size


_POOL = MemoryPool()


def get_default_memory_pool():
    return _POOL


def _allocated(arr):
    """Count a new device buffer in the pool, and tell this thread's hooks about it and about
    its release later."""
    if arr.nbytes == 0:
        return
    size = _rounded(arr.nbytes)
    _POOL._malloc(size)
    weakref.finalize(arr, _POOL._free, size)
    hooks = getattr(_tls, "memory_hooks", None)
    if not hooks:
        return
    ptr = arr.__array_interface__["data"][0]
    for hook in list(hooks.values()):
        hook.malloc_postprocess(device_id=0, size=arr.nbytes, mem_size=size, mem_ptr=ptr,
                                pmem_id=ptr)
    weakref.finalize(arr, _on_free, hooks, ptr, size)


def alloc_pinned_memory(size):
    return bytearray(size)


# --------------------------------------------------------------------------- device arrays


def _garbage(arr):
    """What a buffer holds when the kernel that should fill it was captured, not run."""
    if arr.dtype.kind in "fc":
        arr.fill(_np.nan)
    elif arr.dtype.kind != "O":
        arr.fill(0)


class _Sentinel:
    pass


_NO_DEFAULT = _Sentinel()


def _host(x, strict):
    """Device array -> its NumPy buffer. With ``strict``, a NumPy array is an error (CuPy
    refuses host arrays in device math); NumPy and Python scalars pass."""
    if type(x) is ndarray:
        return x._a
    if isinstance(x, _np.ndarray):
        if strict:
            raise TypeError(f"Unsupported type {type(x)}")
        return x
    if isinstance(x, (list, tuple)):
        return type(x)(_host(v, strict) for v in x)
    return x


def _owned_buffers(x, found):
    if type(x) is ndarray:
        found.append(x._a)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _owned_buffers(v, found)
    return found


def _shares(result, inputs):
    """Whether ``result`` is (a view of) one of the input buffers rather than a new one."""
    return any(result is a or _np.may_share_memory(result, a) for a in inputs)


# NumPy callables that write into an existing buffer instead of returning a new one.
_INPLACE = frozenset({"at", "fill", "sort", "partition", "put", "__setitem__", "copyto",
                      "cublasGemmStridedBatchedEx"})
# What CuPy runs through cuBLAS, which it refuses while a stream captures (seen on an H200).
_CUBLAS = frozenset({_np.matmul, _np.dot, _np.tensordot, _np.inner, _np.vdot})


def _refuse_cublas_in_capture(fn):
    if fn in _CUBLAS and _recorder() is not None:
        raise NotImplementedError("calling cuBLAS API during stream capture is currently unsupported")


def _wrap(r, inputs=(), fresh=True):
    if isinstance(r, _np.ndarray):
        view = not fresh or _shares(r, inputs)
        out = ndarray.__new__(ndarray)
        out._a = r
        if not view and r.base is None:
            _allocated(r)
        return out
    if isinstance(r, _np.generic):
        return _wrap(_np.asarray(r))
    if isinstance(r, tuple):
        return tuple(_wrap(v, inputs, fresh) for v in r)
    if isinstance(r, list):
        return [_wrap(v, inputs, fresh) for v in r]
    return r


def _launch(fn, args, kwargs, device_args):
    """Run one "kernel" on the current stream, or record it when the stream is capturing."""
    rec = _recorder()
    if rec is None:
        c = _cupti()
        if c is None:
            return fn(*args, **kwargs)
        size = max((a.size for a in args if isinstance(a, _np.ndarray)), default=1)
        return c.launch(getattr(fn, "__name__", "kernel"), _current().ptr, size, lambda: fn(*args, **kwargs))
    if "out" in kwargs or getattr(fn, "__name__", "") in _INPLACE:
        rec.append(lambda: fn(*args, **kwargs))   # writes an existing buffer: not run yet
        return kwargs.get("out")
    inputs = _owned_buffers(device_args, [])
    result = fn(*args, **kwargs)                 # for the output's shape, dtype and buffer
    # A reduction's NumPy scalar is a 0-d buffer on the device, which the kernel rewrites at
    # each launch: a buffer here too (else the capture-time value would be baked in).
    if isinstance(result, _np.generic):
        result = _np.asarray(result)
    elif isinstance(result, tuple):
        result = tuple(_np.asarray(o) if isinstance(o, _np.generic) else o for o in result)
    outs = result if isinstance(result, tuple) else (result,)
    fresh = [o for o in outs if isinstance(o, _np.ndarray) and not _shares(o, inputs)]

    def kernel():
        again = fn(*args, **kwargs)
        again = again if isinstance(again, tuple) else (again,)
        for buf, val in zip(outs, again):
            if any(buf is f for f in fresh):
                _np.copyto(buf, val)

    kernel._kernel_name = getattr(fn, "__name__", "kernel")
    rec.append(kernel)
    for buf in fresh:
        _garbage(buf)                             # not run yet: nothing valid in it
    return result


def _synced(read, what):
    """A method that reads the buffer on the host: a device sync, refused inside a capture."""

    def method(self, *args):
        _host_sync(what)
        c = _cupti()
        if c is not None:        # the value comes to the host by a device-to-host copy
            return c.copy("DtoH", self._a.nbytes, _current().ptr, lambda: read(self._a, *args))
        return read(self._a, *args)

    method.__name__ = what
    return method


class ndarray(_np.lib.mixins.NDArrayOperatorsMixin):
    """A device array: a NumPy buffer that only device code may read."""

    __slots__ = ("_a", "__weakref__")
    __array_priority__ = 100
    __hash__ = None

    def __init__(self, shape, dtype=float, memptr=None, strides=None, order="C"):
        self._a = _np.empty(shape, dtype, order=order)
        _allocated(self._a)

    # ---- protocols
    def __array__(self, *args, **kwargs):
        raise TypeError(_IMPLICIT)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        _refuse_cublas_in_capture(ufunc)
        args = _host(inputs, True)
        out = kwargs.get("out")
        if out is not None:
            kwargs["out"] = tuple(_host(o, True) for o in out)
        device_args = (inputs, out)
        result = _launch(getattr(ufunc, method), args, kwargs, device_args)
        if out is not None:
            return out[0] if len(out) == 1 else out
        if method == "at":
            return None
        return _wrap(result, _owned_buffers(inputs, []))

    def __array_function__(self, func, types_, args, kwargs):
        return _call(func, args, kwargs)

    def __dlpack_device__(self):
        return (2, 0)                                # kDLCUDA, device 0

    def __dlpack__(self, stream=None, **kwargs):
        return self._a.__dlpack__()

    # ---- host access (each is a device->host sync)
    def get(self, stream=None, order="C", out=None, blocking=True):
        _host_sync("ndarray.get")
        c = _cupti()
        if c is not None:
            return c.copy("DtoH", self._a.nbytes, _current().ptr, lambda: self._get(out, order))
        return self._get(out, order)

    def _get(self, out, order):
        if out is not None:
            out[...] = self._a
            return out
        return _np.array(self._a, order=order, copy=True)

    item = _synced(lambda a, *args: a.item(*args), "ndarray.item")
    tolist = _synced(lambda a: a.tolist(), "ndarray.tolist")
    __float__ = _synced(float, "float(ndarray)")
    __int__ = _synced(int, "int(ndarray)")
    __bool__ = _synced(bool, "bool(ndarray)")
    __complex__ = _synced(complex, "complex(ndarray)")

    # ---- metadata
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    itemsize = property(lambda self: self._a.itemsize)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: self._a.flags)
    T = property(lambda self: _wrap(self._a.T, fresh=False))
    real = property(lambda self: _wrap(self._a.real, fresh=False))
    imag = property(lambda self: _wrap(self._a.imag, (self._a,)))
    device = property(lambda self: Device(0))

    @property
    def data(self):
        return types.SimpleNamespace(ptr=self._a.__array_interface__["data"][0], device_id=0)

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        for i in range(len(self._a)):
            yield self[i]

    def __repr__(self):
        return repr(self._a)

    def __str__(self):
        return str(self._a)

    def __reduce__(self):
        return (_from_host, (self.get(),))

    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    # ---- indexing
    def __getitem__(self, key):
        key = _host(key, False)
        return _wrap(_launch(self._a.__getitem__, (key,), {}, ()), (self._a,))

    def __setitem__(self, key, value):
        _launch(self._a.__setitem__, (_host(key, False), _host(value, False)), {}, ())

    # ---- everything else: NumPy's method on the buffer, as a kernel
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        attr = getattr(self._a, name)
        if not callable(attr):
            return _wrap(attr, (self._a,))

        def method(*args, **kwargs):
            host_args = _host(args, False)
            host_kwargs = {k: _host(v, False) for k, v in kwargs.items()}
            out = kwargs.get("out")
            r = _launch(attr, host_args, host_kwargs, (args, out))
            if out is not None:
                return out
            return _wrap(r, (self._a,))

        method.__name__ = name
        return method


def _from_host(host):
    c = _cupti()
    if c is not None:
        host = _np.asarray(host)
        return c.copy("HtoD", host.nbytes, _current().ptr, lambda: _wrap(_np.array(host, copy=True)))
    return _wrap(_np.array(host, copy=True))


def _call(func, args, kwargs):
    _refuse_cublas_in_capture(func)
    host_args = _host(args, True)
    host_kwargs = {k: _host(v, True) for k, v in kwargs.items()}
    out = kwargs.get("out")
    r = _launch(func, host_args, host_kwargs, (args, out))
    if out is not None:
        return out
    return _wrap(r, _owned_buffers(args, []))


# --------------------------------------------------------------------------- the namespace


def asarray(a, dtype=None, order=None):
    if type(a) is ndarray:
        return a if dtype is None or a.dtype == _np.dtype(dtype) else a.astype(dtype)
    _host_sync("host-to-device copy")
    return _from_host(_np.asarray(a, dtype=dtype, order=order))


def array(obj, dtype=None, copy=True, order="K", ndmin=0):
    if type(obj) is ndarray:
        return _wrap(_np.array(obj._a, dtype=dtype, copy=True, order=order, ndmin=ndmin))
    _host_sync("host-to-device copy")
    return _from_host(_np.array(obj, dtype=dtype, order=order, ndmin=ndmin))


def ascontiguousarray(a, dtype=None):
    return _call(_np.ascontiguousarray, (asarray(a),), {} if dtype is None else {"dtype": dtype})


def asnumpy(a, stream=None, order="C", out=None, blocking=True):
    if type(a) is ndarray:
        return a.get(stream, order, out)
    return _np.asarray(a, order=order)


def from_dlpack(obj):
    return _from_host(_np.from_dlpack(obj))


def get_array_module(*args):
    return sys.modules[__name__] if any(type(a) is ndarray for a in args) else _np


def _device_function(name):
    func = getattr(_np, name)

    def wrapper(*args, **kwargs):
        return _call(func, args, kwargs)

    wrapper.__name__ = name
    wrapper.__qualname__ = name
    wrapper.__doc__ = f"cupy.{name} (NumPy on the host, in the gradtrace stand-in)"
    return wrapper


class _ufunc:
    """``cupy.exp`` etc.: calls with Python scalars give device arrays too."""

    def __init__(self, uf):
        self._uf = uf
        self.__name__ = uf.__name__
        self.nin, self.nout = uf.nin, uf.nout

    def __call__(self, *args, **kwargs):
        return _call(self._uf, args, kwargs)

    def __getattr__(self, name):
        method = getattr(self._uf, name)
        return lambda *args, **kwargs: _call(method, args, kwargs)


_DTYPES = ("bool_ int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 float32 float64 "
           "complex64 complex128 intp dtype finfo iinfo newaxis pi e inf nan "
           "result_type promote_types can_cast issubdtype integer floating number "
           "signedinteger unsignedinteger complexfloating inexact generic").split()


_namespace: dict = {}     # wrapped NumPy callables, kept apart from this module's globals
                         # (caching ``max`` there would shadow the builtin in this module)


def __getattr__(name):
    found = _namespace.get(name)
    if found is not None:
        return found
    if name in _DTYPES:
        return getattr(_np, name)
    attr = getattr(_np, name, _NO_DEFAULT)
    if attr is _NO_DEFAULT or name.startswith("_"):
        raise AttributeError(f"module 'cupy' has no attribute '{name}'")
    if isinstance(attr, _np.ufunc):
        wrapped = _ufunc(attr)
    elif callable(attr) and not isinstance(attr, type):
        wrapped = _device_function(name)
    else:
        raise AttributeError(f"module 'cupy' has no attribute '{name}' (stand-in)")
    _namespace[name] = wrapped
    return wrapped


# --------------------------------------------------------------------------- submodules


def _submodule(name, **attrs):
    mod = types.ModuleType(f"{__name__}.{name}")
    mod.__dict__.update(attrs)
    sys.modules[mod.__name__] = mod
    return mod


class _BitGenerator:
    """Like CuPy's cuRAND bit generators, the state lives in a device buffer (``_state``) and
    ``state()`` is a method giving its address. Each draw reads the buffer and writes the
    advanced state back, so copying and restoring the buffer restores the random stream."""

    def __init__(self, seed):
        self._np = _np.random.PCG64(seed)
        self._state = _from_host(self._pack())

    def _pack(self):
        st = self._np.state
        words = (st["state"]["state"].to_bytes(16, "little") + st["state"]["inc"].to_bytes(16, "little")
                 + st["has_uint32"].to_bytes(4, "little") + st["uinteger"].to_bytes(4, "little"))
        return _np.frombuffer(words, _np.int8).copy()

    def _load(self):
        raw = self._state._a.tobytes()
        self._np.state = {"bit_generator": "PCG64",
                          "state": {"state": int.from_bytes(raw[:16], "little"),
                                    "inc": int.from_bytes(raw[16:32], "little")},
                          "has_uint32": int.from_bytes(raw[32:36], "little"),
                          "uinteger": int.from_bytes(raw[36:40], "little")}

    def state(self):
        return self._state.data.ptr


class _Generator:
    """``cupy.random.Generator``: NumPy's generator with device results and device state."""

    def __init__(self, seed=None):
        self.bit_generator = _BitGenerator(seed)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        bitgen = self.bit_generator
        method = getattr(_np.random.Generator, name)

        def draw(*args, **kwargs):
            bitgen._load()
            result = _call(method, (_np.random.Generator(bitgen._np),) + args, kwargs)
            bitgen._state._a[...] = bitgen._pack()
            return result

        return draw


def _properties(device):
    Device(device)
    return {"name": b"gradtrace fake GPU (NumPy)", "totalGlobalMem": 80 * 2**30, "major": 9,
            "minor": 0, "multiProcessorCount": 132, "maxThreadsPerBlock": 1024,
            "regsPerBlock": 65536, "sharedMemPerBlock": 49152, "warpSize": 32,
            # An H100's, for the occupancy calculator (profiler/occupancy.py).
            "maxThreadsPerMultiProcessor": 2048, "regsPerMultiprocessor": 65536,
            "sharedMemPerMultiprocessor": 233472, "sharedMemPerBlockOptin": 232448,
            "maxBlocksPerMultiProcessor": 32, "reservedSharedMemPerBlock": 1024}


runtime = _submodule(
    "cuda.runtime", getDeviceCount=lambda: _N_DEVICES, getDevice=lambda: 0,
    getDeviceProperties=_properties, CUDARuntimeError=CUDARuntimeError,
    streamCaptureModeRelaxed=2, streamCaptureModeGlobal=0, is_hip=False,
    runtimeGetVersion=lambda: 12040, driverGetVersion=lambda: 12040)
memory_hook = _submodule("cuda.memory_hook", MemoryHook=MemoryHook)
graph = _submodule("cuda.graph", Graph=Graph)
def _gemm_kernel(fn):
    """One cuBLAS product of autograd/graph_matmul.py as a kernel: run, or recorded in a capture."""
    fn.__name__ = "cublasGemmStridedBatchedEx"
    _launch(fn, (), {}, ())


cuda = _submodule(
    "cuda", Device=Device, Stream=Stream, Event=Event, Graph=Graph,
    get_current_stream=get_current_stream, get_elapsed_time=get_elapsed_time,
    alloc_pinned_memory=alloc_pinned_memory, runtime=runtime, memory_hook=memory_hook,
    graph=graph, MemoryHook=MemoryHook, is_available=lambda: True,
    # libcublas for autograd/graph_matmul.py, which calls cuBLAS itself inside a capture.
    _gradtrace_cublas=_gemm.CtypesCublas(_gemm_kernel))
random = _submodule("random", default_rng=_Generator, Generator=_Generator)
_stride_tricks = _submodule(
    "lib.stride_tricks",
    as_strided=lambda x, shape=None, strides=None: _wrap(
        _np.lib.stride_tricks.as_strided(x._a, shape, strides), fresh=False))
lib = _submodule("lib", stride_tricks=_stride_tricks)
# cupy.linalg: NumPy's functions on device arrays (CuPy's raise NumPy's LinAlgError too).
def _solve(a, b):
    """CuPy's solve does not broadcast batch dims as NumPy's does (seen on an H200): b is
    (..., M) or (..., M, K) with a's own batch dims, else a ValueError as CuPy's."""
    if not (b.shape[:-1] == a.shape[:-1] if b.ndim == a.ndim - 1 else
            b.ndim == a.ndim and b.shape[:-2] == a.shape[:-2] and b.shape[-2] == a.shape[-1]):
        raise ValueError("a must have (..., M, M) shape and b must have (..., M) or (..., M, K)")
    return _call(_np.linalg.solve, (a, b), {})


linalg = _submodule("linalg", LinAlgError=_np.linalg.LinAlgError, solve=_solve, **{
    name: (lambda f: lambda *args, **kwargs: _call(f, args, kwargs))(getattr(_np.linalg, name))
    for name in ("inv", "det", "slogdet", "svd", "cholesky", "qr", "eigh")})
