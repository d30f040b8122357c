"""The one place that chooses between NumPy (``cpu``) and CuPy (``cuda``).

Every other module asks a :class:`Device` for its array module (``device.xp``) and never
imports CuPy itself. Streams and events exist on the CPU as no-op objects so that the engine
has a single code path: a CPU op runs on :data:`CPU_STREAM`, and recording or waiting on a
CPU event does nothing.
"""
from __future__ import annotations

import contextlib
import itertools
import threading

import numpy

from . import host_malloc

__all__ = [
    "Device", "device", "cuda_is_available", "device_count", "Stream", "Event",
    "current_stream", "set_current_stream", "elapsed_ns", "synchronize", "CPU_STREAM",
    "array_module", "DeviceError", "get_rng_state", "set_rng_state", "special", "matmul",
    "graph_capture",
]


class DeviceError(RuntimeError):
    """A device string is malformed or names a device that cannot be used here."""


_cupy = None          # the cupy module once imported successfully
_cupy_error = None    # why it could not be used, for the error message


def _load_cupy():
    """Import CuPy once and check that a GPU answers; remember why when it does not."""
    global _cupy, _cupy_error
    if _cupy is not None or _cupy_error is not None:
        return _cupy
    try:
        import cupy  # noqa: PLC0415 - the single import of CuPy in the project

        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("CUDA runtime reports 0 devices")
        _cupy = cupy
    except Exception as exc:  # ImportError, CUDARuntimeError, missing driver...
        _cupy_error = f"{type(exc).__name__}: {exc}"
    return _cupy


def cuda_is_available() -> bool:
    """True when CuPy imports and at least one CUDA device answers."""
    return _load_cupy() is not None


def device_count() -> int:
    cp = _load_cupy()
    return cp.cuda.runtime.getDeviceCount() if cp is not None else 0


# --------------------------------------------------------------------------- streams and events


_cpu_stream_ids = itertools.count(1)


class Stream:
    """A CUDA stream (wrapping ``cupy.cuda.Stream``) or, on the CPU, a no-op stand-in.

    ``ptr`` is the raw stream handle (0 for the default/legacy stream and for the CPU), which
    is what a profiler shows as the stream id.
    """

    __slots__ = ("device", "native", "ptr", "_saved")

    def __init__(self, device: "Device | str | None" = None, native=None):
        dev = _as_device(device) if device is not None else CPU
        self.device = dev
        if dev.type == "cuda" and native is None:
            cp = _require_cupy(str(dev))
            with cp.cuda.Device(dev.index):
                native = cp.cuda.Stream(non_blocking=True)
        self.native = native
        # A CPU stream is a no-op stand-in; distinct ones get distinct ids so the engine's
        # stream decisions can be exercised (and counted) without a GPU.
        self.ptr = int(native.ptr) if native is not None else next(_cpu_stream_ids)

    def wait_event(self, event: "Event") -> None:
        if self.native is not None and event.native is not None:
            self.native.wait_event(event.native)

    def record_event(self, event: "Event | None" = None) -> "Event":
        event = event if event is not None else Event(self.device)
        event.record(self)
        return event

    def synchronize(self) -> None:
        if self.native is not None:
            self.native.synchronize()

    def __enter__(self):
        self._saved = current_stream(self.device)
        set_current_stream(self)
        return self

    def __exit__(self, *exc):
        set_current_stream(self._saved)
        return False

    def __eq__(self, other):
        return isinstance(other, Stream) and other.device == self.device and other.ptr == self.ptr

    def __hash__(self):
        return hash((self.device, self.ptr))

    def __repr__(self):
        return f"Stream(device={self.device}, ptr={self.ptr:#x})"


class Event:
    """A CUDA event with timing enabled, or a no-op on the CPU."""

    __slots__ = ("device", "native")

    def __init__(self, device: "Device | str | None" = None):
        dev = _as_device(device) if device is not None else CPU
        self.device = dev
        self.native = None
        if dev.type == "cuda":
            cp = _require_cupy(str(dev))
            with cp.cuda.Device(dev.index):
                self.native = cp.cuda.Event(block=False, disable_timing=False)

    def record(self, stream: Stream | None = None) -> "Event":
        if self.native is not None:
            stream = stream if stream is not None else current_stream(self.device)
            self.native.record(stream.native)
        return self

    def synchronize(self) -> None:
        if self.native is not None:
            self.native.synchronize()

    def query(self) -> bool:
        return True if self.native is None else bool(self.native.done)


def elapsed_ns(start: Event, end: Event) -> int:
    """Device time between two recorded events in nanoseconds (0 on the CPU)."""
    if start.native is None or end.native is None:
        return 0
    cp = _cupy
    return int(round(cp.cuda.get_elapsed_time(start.native, end.native) * 1e6))


# --------------------------------------------------------------------------- devices


class Device:
    """``cpu`` or ``cuda:N``. Interned: there is one object per device, compared by identity.

    Attributes:
        type: ``"cpu"`` or ``"cuda"``.
        index: GPU ordinal (0 for the CPU).
        xp: the array module for this device (numpy or cupy).
        ndarray: that module's array type (results of other types, such as NumPy scalars,
            are converted to it).
    """

    __slots__ = ("type", "index", "xp", "ndarray", "_name")

    def __init__(self, type_: str, index: int, xp):
        self.type = type_
        self.index = index
        self.xp = xp
        self.ndarray = xp.ndarray
        self._name = "cpu" if type_ == "cpu" else f"cuda:{index}"

    def __str__(self):
        return self._name

    def __repr__(self):
        return f"device(type='{self.type}', index={self.index})" if self.type == "cuda" else "device(type='cpu')"

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = device(other)
            except DeviceError:
                return False
        return self is other

    def __hash__(self):
        return hash(self._name)

    def current_stream(self) -> Stream:
        return current_stream(self)


CPU = Device("cpu", 0, numpy)
# NumPy's temporaries come from malloc: keep freed blocks for reuse (see host_malloc).
host_malloc.tune_unless_disabled()
_devices: dict[str, Device] = {"cpu": CPU}
_devices_lock = threading.Lock()


def _require_cupy(what: str):
    cp = _load_cupy()
    if cp is None:
        raise DeviceError(
            f"device '{what}' needs a usable CUDA GPU with CuPy, but none is available "
            f"({_cupy_error}); use device='cpu' or install the 'cuda12' extra on a GPU machine"
        )
    return cp


def device(spec: "str | Device | None" = None) -> Device:
    """Parse ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` (or pass a Device through)."""
    if spec is None:
        return CPU
    if isinstance(spec, Device):
        return spec
    if not isinstance(spec, str):
        raise DeviceError(f"device must be a string like 'cpu' or 'cuda:0', got {type(spec).__name__}")
    found = _devices.get(spec)
    if found is not None:
        return found
    name = spec.strip().lower()
    if name == "cuda":
        name = "cuda:0"
    kind, _, idx = name.partition(":")
    if kind != "cuda" or not idx.isdigit():
        raise DeviceError(f"unknown device '{spec}': expected 'cpu', 'cuda' or 'cuda:N'")
    cp = _require_cupy(spec)
    index = int(idx)
    n = cp.cuda.runtime.getDeviceCount()
    if index >= n:
        raise DeviceError(f"device '{spec}' does not exist: this machine has {n} CUDA device(s)")
    with _devices_lock:
        dev = _devices.get(name)
        if dev is None:
            dev = Device("cuda", index, cp)
            _devices[name] = dev
        _devices[spec] = dev
    return dev


_as_device = device


def array_module(arr):
    """numpy for a NumPy array or scalar, cupy for a CuPy array."""
    if isinstance(arr, numpy.ndarray) or _cupy is None:
        return numpy
    return _cupy if isinstance(arr, _cupy.ndarray) else numpy


def device_of_array(arr) -> Device:
    """The Device an array lives on."""
    if isinstance(arr, numpy.ndarray) or _cupy is None or not isinstance(arr, _cupy.ndarray):
        return CPU
    return device(f"cuda:{arr.device.id}")


def is_device_array(obj) -> bool:
    """True for a NumPy or CuPy ndarray."""
    if isinstance(obj, numpy.ndarray):
        return True
    return _cupy is not None and isinstance(obj, _cupy.ndarray)


def to_device(arr, dev: Device):
    """Copy an array onto ``dev`` (no copy when it is already there)."""
    src = device_of_array(arr)
    if src is dev:
        return arr
    if dev.type == "cpu":
        return arr.get()
    cp = dev.xp
    with cp.cuda.Device(dev.index):
        return cp.asarray(arr)


# --------------------------------------------------------------------------- current stream (thread-local)

CPU_STREAM = Stream.__new__(Stream)
CPU_STREAM.device, CPU_STREAM.native, CPU_STREAM.ptr = CPU, None, 0

_stream_tls = threading.local()


class CpuStreamSlot:
    """This thread's current CPU stream, ``current`` (:data:`CPU_STREAM` unless set).

    One per thread (:func:`cpu_stream_slot`). The ops read it on their hot path through their
    thread's op state, which keeps this object (``grad_mode.OpState.cpu_stream``): two slot
    reads there, no thread-local lookup; the state lives here, so that this module needs no
    other of ours.
    """

    __slots__ = ("current",)


def cpu_stream_slot() -> CpuStreamSlot:
    """This thread's :class:`CpuStreamSlot`, made on first use."""
    slot = getattr(_stream_tls, "cpu", None)
    if slot is None:
        slot = _stream_tls.cpu = CpuStreamSlot()
        slot.current = CPU_STREAM
    return slot


def current_stream(dev: "Device | str | None" = None) -> Stream:
    """The stream ops on ``dev`` run on in this thread (the device's default stream unless set)."""
    dev = device(dev)
    if dev.type == "cpu":
        return cpu_stream_slot().current
    table = getattr(_stream_tls, "streams", None)
    if table is not None and dev in table:
        return table[dev]
    cp = dev.xp
    with cp.cuda.Device(dev.index):
        native = cp.cuda.get_current_stream()
    s = Stream.__new__(Stream)
    s.device, s.native, s.ptr = dev, native, int(native.ptr)
    return s


def set_current_stream(stream: Stream) -> None:
    """Make ``stream`` the one ops on its device run on, in this thread."""
    dev = stream.device
    if dev.type == "cpu":
        cpu_stream_slot().current = stream
        return
    table = getattr(_stream_tls, "streams", None)
    if table is None:
        table = _stream_tls.streams = {}
    table[dev] = stream
    stream.native.use()


def synchronize(dev: "Device | str | None" = None) -> None:
    dev = device(dev)
    if dev.type == "cuda":
        with dev.xp.cuda.Device(dev.index):
            dev.xp.cuda.Device(dev.index).synchronize()


# --------------------------------------------------------------------------- GPU memory pool


def current_device_index() -> int:
    """The index of the current CUDA device (CuPy's)."""
    return int(_require_cupy("the current CUDA device").cuda.runtime.getDevice())


def memory_pool_bytes(dev: "Device") -> tuple[int, int]:
    """(bytes in use, bytes held from the driver) by CuPy's default pool on ``dev``."""
    with dev.xp.cuda.Device(dev.index):
        pool = dev.xp.get_default_memory_pool()
        return int(pool.used_bytes()), int(pool.total_bytes())


def free_cached_blocks(dev: "Device") -> None:
    """Give the cached, unused blocks of CuPy's default pool on ``dev`` back to the driver."""
    with dev.xp.cuda.Device(dev.index):
        dev.xp.get_default_memory_pool().free_all_blocks()


# --------------------------------------------------------------------------- GPU memory hook


_hook_ids = itertools.count(1)


def install_cuda_memory_hook(on_malloc, on_free):
    """Install a CuPy memory-pool hook calling ``on_malloc(device_index, ptr, nbytes)`` and
    ``on_free(device_index, ptr, nbytes)``; returns a callable that removes it. No-op on CPU."""
    cp = _load_cupy()
    if cp is None:
        return lambda: None
    from cupy.cuda import memory_hook  # noqa: PLC0415 - part of the one CuPy module

    class _Hook(memory_hook.MemoryHook):
        # CuPy keys a thread's hooks by name and refuses a second one of the same name, so
        # each hook gets its own (a profiler and a benchmark's peak counter can overlap).
        name = f"gradtrace-{next(_hook_ids)}"

        def malloc_postprocess(self, device_id, size, mem_size, mem_ptr, pmem_id):
            on_malloc(device_id, mem_ptr, mem_size)

        def free_postprocess(self, device_id, mem_size, mem_ptr, pmem_id):
            on_free(device_id, mem_ptr, mem_size)

    hook = _Hook()
    hook.__enter__()
    return lambda: hook.__exit__(None, None, None)


def scatter_add(xp, target, index, values) -> None:
    """``target[index] += values`` with repeated indices summed (NumPy ``add.at``)."""
    if xp is numpy:
        if (index.__class__ is numpy.ndarray and index.ndim == 1 and index.size
                and index.dtype.kind in "iu" and getattr(values, "ndim", 0) == target.ndim
                and values.shape[0] == index.size):
            _add_rows(target, index, values)
        else:
            numpy.add.at(target, index, values)
    else:
        import cupyx  # noqa: PLC0415 - part of the one CuPy module

        cupyx.scatter_add(target, index, values)


def _add_rows(target, index, values) -> None:
    """``target[index] += values`` for a 1-D index over rows, repeats summed: the rows sorted
    by index once and each run summed by ``add.reduceat`` (5x faster than ``add.at`` for an
    embedding's (1024, 128) gradient; each run sums in the original order, as add.at does)."""
    if index.dtype.kind == "i" and index.min() < 0:   # -1 and n-1 are one row: one run
        index = numpy.where(index < 0, index + target.shape[0], index)
    order = numpy.argsort(index, kind="stable")
    rows = index[order]
    starts = numpy.flatnonzero(numpy.concatenate(([True], rows[1:] != rows[:-1])))
    target[rows[starts]] += numpy.add.reduceat(values[order], starts, axis=0)


_special_modules: dict = {}   # array module -> its special-function module, once imported


# Whether this thread is capturing a CUDA graph (compiled autograd's warm-up and capture).
_capture = threading.local()


@contextlib.contextmanager
def graph_capture():
    """While on, in this thread, matrix products on a GPU go through cuBLAS directly
    (autograd/graph_matmul.py), which CUDA graphs can capture, instead of CuPy's matmul,
    which refuses every cuBLAS call while a stream captures."""
    before = getattr(_capture, "on", False)
    _capture.on = True
    try:
        yield
    finally:
        _capture.on = before


def matmul(xp, a, b, out=None):
    """``xp.matmul(a, b, out=out)``, or inside :func:`graph_capture` on a GPU, the same product
    through cuBLAS's own handle. Every matmul of an op's arrays is this call."""
    if xp is not numpy and getattr(_capture, "on", False):
        from . import graph_matmul  # noqa: PLC0415 - ctypes and cuBLAS only where captured
        return graph_matmul.matmul(xp, a, b, out)
    return xp.matmul(a, b, out=out)


def special(xp):
    """The special-function library for an array module: ``scipy.special`` for NumPy,
    ``cupyx.scipy.special`` for CuPy (same names: ``erf``, ``erfc``, ``erfinv``,
    ``gammaln`` for lgamma, ``digamma``...). Their ufuncs keep float32 float32.

    Imported on first use, not with this module: SciPy's special functions take a noticeable
    part of a second to import, which every ``gradtrace`` command would otherwise pay.
    """
    mod = _special_modules.get(xp)
    if mod is None:
        if xp is numpy:
            import scipy.special as mod  # noqa: PLC0415 - deferred: import cost, see above
        else:
            import cupyx.scipy.special as mod  # noqa: PLC0415 - part of the one CuPy module
        _special_modules[xp] = mod
    return mod


def get_rng_state(generator):
    """A copy of a random generator's state, for :func:`set_rng_state` to restore.

    NumPy's ``Generator`` keeps its state as a dict on the host. CuPy's keeps the cuRAND
    states of all its threads in a device buffer (``bit_generator._state``; its
    ``bit_generator.state()`` is a method returning that buffer's address, not a settable
    state), so the copy is a device-to-device copy of that buffer (a few MB on a large GPU).
    """
    bitgen = generator.bit_generator
    if isinstance(generator, numpy.random.Generator):
        return bitgen.state
    buf = getattr(bitgen, "_state", None)
    if _cupy is None or not isinstance(buf, _cupy.ndarray):
        raise RuntimeError(
            f"cannot save the state of random generator {type(generator).__name__}: this CuPy "
            "keeps no device state buffer in bit_generator._state; use "
            "checkpoint(..., preserve_rng_state=False)")
    return buf.copy()


def set_rng_state(generator, state) -> None:
    """Put back a state taken by :func:`get_rng_state` (in place: CuPy's kernels hold the
    state buffer's address)."""
    if isinstance(generator, numpy.random.Generator):
        generator.bit_generator.state = state
    else:
        generator.bit_generator._state[...] = state


def pinned_copy(array):
    """A NumPy copy of ``array`` (host or device) in page-locked host memory, which copies to
    a GPU faster; a plain copy when no GPU is usable."""
    cp = _load_cupy()
    if cp is None:
        return numpy.array(array, copy=True)
    mem = cp.cuda.alloc_pinned_memory(array.nbytes)
    out = numpy.frombuffer(mem, array.dtype, array.size).reshape(array.shape)
    if isinstance(array, numpy.ndarray):
        out[...] = array
    else:
        array.get(out=out)
    return out


def device_properties(dev) -> dict:
    """What a trace viewer shows of a GPU: name, memory, compute capability, SM count."""
    dev = device(dev)
    if dev.type != "cuda":
        return {"id": 0, "name": "cpu"}
    props = dev.xp.cuda.runtime.getDeviceProperties(dev.index)
    name = props.get("name", b"")
    return {
        "id": dev.index,
        "name": name.decode() if isinstance(name, bytes) else str(name),
        "totalGlobalMem": int(props.get("totalGlobalMem", 0)),
        "computeMajor": int(props.get("major", 0)),
        "computeMinor": int(props.get("minor", 0)),
        "numSms": int(props.get("multiProcessorCount", 0)),
        "maxThreadsPerBlock": int(props.get("maxThreadsPerBlock", 0)),
        "regsPerBlock": int(props.get("regsPerBlock", 0)),
        "sharedMemPerBlock": int(props.get("sharedMemPerBlock", 0)),
        "warpSize": int(props.get("warpSize", 32)),
        # What the occupancy calculator needs besides (profiler/occupancy.py), under the
        # names Kineto writes in a trace's deviceProperties.
        "maxThreadsPerMultiprocessor": int(props.get("maxThreadsPerMultiProcessor", 0)),
        "regsPerMultiprocessor": int(props.get("regsPerMultiprocessor", 0)),
        "sharedMemPerMultiprocessor": int(props.get("sharedMemPerMultiprocessor", 0)),
        "sharedMemPerBlockOptin": int(props.get("sharedMemPerBlockOptin", 0)),
        **{key: int(props[key]) for key in ("maxBlocksPerMultiProcessor", "reservedSharedMemPerBlock")
           if key in props},
    }


def nccl_communicator(world_size: int, rank: int, host: str, port: int):
    """An NCCL communicator for this process's GPU: ``cupyx.distributed.NCCLBackend``, which
    meets the other ranks at ``host:port`` (rank 0 serves the rendezvous there).

    Args:
        world_size: number of ranks (one GPU each).
        rank: this process's rank, ``0 <= rank < world_size``.
        host, port: the rendezvous address (``MASTER_ADDR``/``MASTER_PORT``).
    Returns:
        The ``NCCLBackend`` (``all_reduce``, ``broadcast``, ``all_gather``, ``reduce_scatter``,
        ``barrier``, each taking a ``stream=``).
    """
    _require_cupy("cuda")
    from cupyx import distributed  # noqa: PLC0415 - part of the one CuPy module

    return distributed.NCCLBackend(world_size, rank, host=host, port=port)
