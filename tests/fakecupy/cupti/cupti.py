"""A NumPy-era stand-in for the part of cupti-python's ``cupti.cupti`` that gradtrace uses.

Why: kernel recording (``profiler/cupti_activity.py``) is Python logic around CUPTI's
Activity API: buffer callbacks, record kinds and fields, correlation ids shared by an API call
and the kernels it launched, OS thread ids, CUPTI's own clock. On a machine without a GPU it
would never run. With ``tests/fakecupy`` first on ``sys.path`` (``GRADTRACE_FAKE_CUPY=1``),
``from cupti import cupti`` loads this module, and the fake CuPy beside it reports what it
"launches" here.

What it checks, the way CUPTI behaves:

- records are delivered only through the callbacks registered with
  ``activity_register_callbacks``: ``buffer_requested()`` must return ``(size, max_records)``
  and ``buffer_completed(activities)`` receives a list of record objects with a ``.kind``;
  a buffer is delivered when "full" (every :data:`BUFFER_RECORDS` records, on the launching
  thread) and at ``activity_flush_all``; nothing is delivered for a kind not enabled;
- record classes and field names are cupti-python's (``ActivityKernel10``, ``ActivityAPI``,
  ``ActivityMemcpy6``, ``ActivityMemset4``), enum names are its (``ActivityKind``,
  ``CallbackDomain``, ``RuntimeApiTraceCbid``, ``DriverApiTraceCbid``,
  ``ActivityMemcpyKind``, ``ActivityMemoryKind``);
- every kernel/memcpy/memset shares its correlation id with the runtime or driver API record
  that launched it (CuPy's own kernels: ``cuLaunchKernel``, a driver call; matmuls: cuBLAS's
  ``cudaLaunchKernel``; copies: ``cudaMemcpyAsync``); all kernels of a CUDA-graph launch share
  the ``cudaGraphLaunch`` call's; API records carry the thread's pthread_self truncated to 32
  bits (``threading.get_ident() & 0xFFFFFFFF``), as the real CUPTI does on Linux (seen on an
  H200), not the kernel's thread id;
- timestamps are on a clock of CUPTI's own that is *not* ``time.perf_counter_ns``: offset by
  :data:`CLOCK_OFFSET_NS` and running :data:`CLOCK_RATE` times as fast, so a profile whose
  kernels land inside their launching calls proves the clock alignment works;
- kernel names are mangled C++ names (``_Z9cupy_add...``), cuBLAS's are plain, as on a GPU;
  stream ids are CUPTI's small ids, which ``get_stream_id_ex`` maps from stream handles.

What it does not do: it is not CUPTI. Device times are host times of NumPy work (inside
the launching call, where a GPU's would be after it), grids, blocks, registers and shared
memory are plausible made-up numbers, and no overhead, buffer sizing, dropped record or
multi-device behaviour of the real library is reproduced. It never stands in for a run on a
GPU (``benchmarks/gpu_check.sh`` does that).
"""
from __future__ import annotations

import enum
import itertools
import threading
import time

__version__ = "13.0.0+gradtrace.fake"
_IS_FAKE = True

CLOCK_OFFSET_NS = 7_300_000_000_000     # CUPTI's clock reads this much more...
CLOCK_RATE = 1.0001                      # ...and runs 100 ppm fast
BUFFER_RECORDS = 256


class cuptiError(RuntimeError):
    """What cupti-python raises for a failing CUPTI call."""


class ActivityKind(enum.IntEnum):       # CUpti_ActivityKind values
    INVALID = 0
    MEMCPY = 1
    MEMSET = 2
    KERNEL = 3
    DRIVER = 4
    RUNTIME = 5
    CONCURRENT_KERNEL = 10
    SYNCHRONIZATION = 38


class CallbackDomain(enum.IntEnum):
    INVALID = 0
    DRIVER_API = 1
    RUNTIME_API = 2


class RuntimeApiTraceCbid(enum.IntEnum):
    cudaGetDevice_v3020 = 10
    cudaMemcpyAsync_v3020 = 41
    cudaStreamSynchronize_v3020 = 131
    cudaDeviceSynchronize_v3020 = 165
    cudaLaunchKernel_v7000 = 211
    cudaGraphLaunch_v10000 = 311


class DriverApiTraceCbid(enum.IntEnum):
    cuCtxGetCurrent = 7
    cuDeviceGetAttribute = 9      # one the per-API switch refuses, as CUPTI 13.4 refuses some
    cuLaunchKernel = 307


class ActivityMemcpyKind(enum.IntEnum):
    UNKNOWN = 0
    HTOD = 1
    DTOH = 2
    DTOD = 8


class ActivityMemoryKind(enum.IntEnum):
    UNKNOWN = 0
    PAGEABLE = 1
    PINNED = 2
    DEVICE = 3


class _Record:
    """A record object as cupti-python hands them: attributes named as its fields."""

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def __repr__(self):
        return f"{type(self).__name__}({self.__dict__})"


class ActivityKernel10(_Record):
    pass


class ActivityAPI(_Record):
    pass


class ActivityMemcpy6(_Record):
    pass


class ActivityMemset4(_Record):
    pass


_lock = threading.Lock()
_enabled: set = set()
_callbacks = None
_pending: list = []
_correlation = itertools.count(1).__next__
_stream_ids: dict[int, int] = {}
_next_stream_id = itertools.count(7).__next__       # CUPTI's first stream id is often 7


def get_timestamp() -> int:
    """CUPTI's clock (see the module docstring)."""
    return CLOCK_OFFSET_NS + int(time.perf_counter_ns() * CLOCK_RATE)


def activity_register_callbacks(func_buffer_requested, func_buffer_completed):
    global _callbacks
    _callbacks = (func_buffer_requested, func_buffer_completed)


_api_off: set = set()       # (kind, cbid) whose records activity_enable_*_api turned off


def activity_enable_runtime_api(cbid: int, enable: int):
    (_api_off.discard if enable else _api_off.add)((ActivityKind.RUNTIME, int(cbid)))


def activity_enable_driver_api(cbid: int, enable: int):
    if int(cbid) == DriverApiTraceCbid.cuDeviceGetAttribute:
        raise cuptiError("ERROR_INVALID_PARAMETER (1)")
    (_api_off.discard if enable else _api_off.add)((ActivityKind.DRIVER, int(cbid)))


def activity_enable(kind: int):
    if _callbacks is None:
        raise cuptiError("CUPTI_ERROR_INVALID_OPERATION: no buffer callbacks registered")
    _enabled.add(ActivityKind(kind))


def activity_disable(kind: int):
    _enabled.discard(ActivityKind(kind))


def _deliver(records: list) -> None:
    requested, completed = _callbacks
    size, max_records = requested()
    if not (isinstance(size, int) and size > 0 and isinstance(max_records, int) and max_records >= 0):
        raise cuptiError(f"buffer_requested returned {size!r}, {max_records!r}: expected (bytes > 0, records >= 0)")
    completed(list(records))


def activity_flush_all(flag: int):
    with _lock:
        records = _pending[:]
        _pending.clear()
    if records and _callbacks is not None:
        _deliver(records)


def get_callback_name(domain: int, cbid: int) -> str:
    enum_ = RuntimeApiTraceCbid if domain == CallbackDomain.RUNTIME_API else DriverApiTraceCbid
    try:
        return enum_(cbid).name
    except ValueError:
        raise cuptiError("CUPTI_ERROR_INVALID_PARAMETER: unknown callback id") from None


class InvalidStreamHandle(BaseException):
    """What the real ``get_stream_id_ex`` does with a handle that is no CUDA stream: it
    dereferences it, and the process dies (seen on an H200 with a CPU stream's id). A
    BaseException, so that no ``except Exception`` hides it from the test that made it."""


def get_stream_id_ex(context: int, stream: int, per_thread_stream: int) -> int:
    import cupy
    if stream != 0 and (stream < cupy.STREAM_PTR_BASE or (stream - cupy.STREAM_PTR_BASE) % cupy.STREAM_PTR_STEP):
        raise InvalidStreamHandle(f"{stream:#x} is not a CUDA stream handle: the real CUPTI crashes here")
    with _lock:
        sid = _stream_ids.get(stream)
        if sid is None:
            sid = _stream_ids[stream] = _next_stream_id()
        return sid


# ----------------------------------------------------------------------------- the fake GPU's side


def _recording() -> bool:
    return bool(_enabled)


def _add(record) -> None:
    if record.kind not in _enabled:
        return
    with _lock:
        _pending.append(record)
        full = len(_pending) >= BUFFER_RECORDS
        records = _pending[:] if full else None
        if full:
            _pending.clear()
    if records:
        _deliver(records)


class _Call:
    """One API call of the fake GPU: ``with _Call(...) as call:`` around the work; records
    the API record on exit and hands its correlation id to the activities it launched."""

    def __init__(self, domain: int, cbid: int):
        self.domain, self.cbid = domain, cbid
        self.correlation = _correlation()

    def __enter__(self):
        self.start = get_timestamp()
        return self

    def __exit__(self, *exc):
        kind = ActivityKind.RUNTIME if self.domain == CallbackDomain.RUNTIME_API else ActivityKind.DRIVER
        if (kind, int(self.cbid)) in _api_off:
            return False
        _add(ActivityAPI(kind=kind, cbid=int(self.cbid), correlation_id=self.correlation, start=self.start,
                         end=get_timestamp(), thread_id=threading.get_ident() & 0xFFFF_FFFF, process_id=0, return_value=0))
        return False

    def kernel(self, name: str, stream_ptr: int, grid, block, registers: int, static_smem: int, dynamic_smem: int,
               start: int, end: int, graph_id: int = 0) -> None:
        _add(ActivityKernel10(kind=ActivityKind.CONCURRENT_KERNEL, name=name, start=start, end=end,
                              correlation_id=self.correlation, device_id=0, context_id=1,
                              stream_id=get_stream_id_ex(0, stream_ptr, 0),
                              grid_x=grid[0], grid_y=grid[1], grid_z=grid[2],
                              block_x=block[0], block_y=block[1], block_z=block[2],
                              registers_per_thread=registers, static_shared_memory=static_smem,
                              dynamic_shared_memory=dynamic_smem, graph_id=graph_id))

    def memcpy(self, copy_kind: int, src_kind: int, dst_kind: int, nbytes: int, stream_ptr: int, start: int,
               end: int) -> None:
        _add(ActivityMemcpy6(kind=ActivityKind.MEMCPY, copy_kind=copy_kind, src_kind=src_kind, dst_kind=dst_kind,
                             bytes=nbytes, start=start, end=end, correlation_id=self.correlation, device_id=0,
                             context_id=1, stream_id=get_stream_id_ex(0, stream_ptr, 0), graph_id=0))

    def memset(self, memory_kind: int, nbytes: int, stream_ptr: int, start: int, end: int) -> None:
        _add(ActivityMemset4(kind=ActivityKind.MEMSET, memory_kind=memory_kind, bytes=nbytes, start=start, end=end,
                             correlation_id=self.correlation, device_id=0, context_id=1,
                             stream_id=get_stream_id_ex(0, stream_ptr, 0), value=0, graph_id=0))


_BLAS = ("matmul", "dot", "einsum", "tensordot", "inner", "vdot")
_REDUCTIONS = ("sum", "prod", "max", "min", "amax", "amin", "mean", "var", "std", "argmax", "argmin", "any",
               "all", "cumsum", "logsumexp")


def launch(name: str, stream_ptr: int, n_out: int, work):
    """Run ``work()`` as one kernel launch named after the NumPy function ``name``, on the
    stream ``stream_ptr``, writing ``n_out`` elements; records the API call and the kernel.

    Returns:
        What ``work()`` returns.
    """
    n = max(int(n_out), 1)
    # CuPy asks the runtime for the current device around every launch, as on an H200, and
    # the driver for the context: records a profile leaves out.
    with _Call(CallbackDomain.RUNTIME_API, RuntimeApiTraceCbid.cudaGetDevice_v3020):
        pass
    with _Call(CallbackDomain.DRIVER_API, DriverApiTraceCbid.cuCtxGetCurrent):
        pass
    if name in _BLAS:
        call, kname = _Call(CallbackDomain.RUNTIME_API, RuntimeApiTraceCbid.cudaLaunchKernel_v7000), \
            "ampere_sgemm_64x32_sliced1x4_nn"
        grid, block, regs, smem, dyn = (-(-n // 2048), 1, 1), (128, 1, 1), 120, 0, 32768
    else:
        reduction = name in _REDUCTIONS
        ident = f"cupy_{name}"
        kname = f"_Z{len(ident)}{ident}PKfPfi"      # cupy_sum(float const*, float*, int)
        call = _Call(CallbackDomain.DRIVER_API, DriverApiTraceCbid.cuLaunchKernel)
        if reduction:
            grid, block, regs, smem, dyn = (max(1, min(n, 1024)), 1, 1), (512, 1, 1), 32, 4096, 0
        else:
            grid, block, regs, smem, dyn = (-(-n // 128), 1, 1), (128, 1, 1), 16, 0, 0
    with call:
        start = get_timestamp()
        result = work()
        call.kernel(kname, stream_ptr, grid, block, regs, smem, dyn, start, get_timestamp())
    return result


def copy(kind: str, nbytes: int, stream_ptr: int, work):
    """Run ``work()`` as a ``cudaMemcpyAsync`` of ``nbytes`` between pageable host memory and
    the device (``kind``: ``"HtoD"`` or ``"DtoH"``)."""
    with _Call(CallbackDomain.RUNTIME_API, RuntimeApiTraceCbid.cudaMemcpyAsync_v3020) as call:
        start = get_timestamp()
        result = work()
        if kind == "HtoD":
            call.memcpy(ActivityMemcpyKind.HTOD, ActivityMemoryKind.PAGEABLE, ActivityMemoryKind.DEVICE, nbytes,
                        stream_ptr, start, get_timestamp())
        else:
            call.memcpy(ActivityMemcpyKind.DTOH, ActivityMemoryKind.DEVICE, ActivityMemoryKind.PAGEABLE, nbytes,
                        stream_ptr, start, get_timestamp())
    return result


def graph_launch(stream_ptr: int, kernels: list, graph_id: int) -> None:
    """Replay a captured graph's kernels as one ``cudaGraphLaunch``: every kernel a record
    with that call's correlation id."""
    with _Call(CallbackDomain.RUNTIME_API, RuntimeApiTraceCbid.cudaGraphLaunch_v10000) as call:
        for kernel in kernels:
            start = get_timestamp()
            kernel()
            ident = f"cupy_{getattr(kernel, '_kernel_name', 'graph_node')}"
            call.kernel(f"_Z{len(ident)}{ident}PKfPfi", stream_ptr, (8, 1, 1), (128, 1, 1), 16, 0, 0, start,
                        get_timestamp(), graph_id=graph_id)


def synchronize(cbid: int) -> None:
    """A ``cudaDeviceSynchronize``/``cudaStreamSynchronize`` call (no device work)."""
    with _Call(CallbackDomain.RUNTIME_API, cbid):
        pass
