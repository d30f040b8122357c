"""Kernels by name: readable names, kernel types, Tensor Core use, and the kernel, memcpy and
collective tables (``gradtrace gpu --kernels``, the dashboard's Kernels page).

Definitions, each from its anchor (see ``docs/gpu-analysis.md``):

* **kernel type** (HTA's ``get_kernel_type``): COMMUNICATION for a kernel named
  ``nccl…Kernel…``; MEMORY for a memcpy or memset; COMPUTATION for the rest. In a gradtrace
  profile (no kernel names, only the ops' device intervals) communication is an op whose name
  says so (:data:`profiler.ranks.COMMUNICATION`).
* **Tensor Cores** (TensorBoard plugin, ``tensor_core.py``): a kernel whose name contains one
  of :data:`TENSOR_CORE_KERNEL_PATTERNS`; an op is Tensor-Core eligible when its name is one of
  :data:`TENSOR_CORE_ELIGIBLE_OPS`.
* **readable names** (:func:`readable_kernel_name`): the demangled name without its return
  type and parameter list, template arguments kept; :func:`short_kernel_names` then fits a
  column and keeps distinct names distinct.

Pure functions over a :class:`~profiler.data.ProfileData`; nothing here imports the engine.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .format import shorten

if TYPE_CHECKING:  # pragma: no cover
    from .data import ProfileData

__all__ = ["COMPUTATION", "COMMUNICATION", "MEMORY", "TENSOR_CORE_KERNEL_PATTERNS", "TENSOR_CORE_ELIGIBLE_OPS",
           "readable_kernel_name", "short_kernel_names", "kernel_type", "uses_tensor_cores",
           "memcpy_kind", "nccl_algorithm", "BUS_BANDWIDTH_FACTORS", "collective_of", "KernelRow", "kernel_table",
           "memcpy_table", "collective_table"]

COMPUTATION, COMMUNICATION, MEMORY = "COMPUTATION", "COMMUNICATION", "MEMORY"

# HTA (hta/utils/utils.py): a communication kernel is named ``nccl…Kernel``; a memory one starts
# with Memcpy, Memset or dma.
_NCCL_KERNEL = re.compile(r"^nccl.*Kernel")
_MEMORY_KERNEL = re.compile(r"^(Memcpy|Memset|dma)")

# TensorBoard profiler plugin (tb_plugin/torch_tb_profiler/profiler/tensor_core.py, after NVIDIA
# PyProf's tc.py): a kernel runs on Tensor Cores when its name contains one of these.
TENSOR_CORE_KERNEL_PATTERNS = ("h884", "s884", "h1688", "s1688", "hmma", "i8816", "16816",
                               "dgrad_1x1_stride_2x2", "first_layer_wgrad_kernel", "conv1x1",
                               "conv2d_c1_k1", "direct_group", "xmma_implicit_gemm", "xmma_sparse_conv",
                               "xmma_warp_specialized_implicit_gemm", "xmma_gemm", "xmma_sparse_gemm",
                               "c1688")
# ...and an op is Tensor-Core eligible when its name is one of these (the same file).
TENSOR_CORE_ELIGIBLE_OPS = frozenset((
    "aten::_convolution", "aten::_convolution_nogroup", "aten::conv1d", "aten::conv2d", "aten::conv3d",
    "aten::conv_tbc", "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d",
    "aten::convolution", "aten::cudnn_convolution", "aten::cudnn_convolution_transpose", "aten::prelu",
    "aten::addmm", "aten::addmv", "aten::addr", "aten::matmul", "aten::mm", "aten::mv", "aten::linear",
    "aten::addbmm", "aten::baddbmm", "aten::bmm", "aten::chain_matmul", "aten::linalg_multi_dot",
    "aten::_thnn_fused_lstm_cell", "aten::_thnn_fused_gru_cell", "aten::lstm_cell", "aten::gru_cell",
    "aten::rnn_tanh_cell", "aten::rnn_relu_cell", "CudnnConvolutionBackward", "BmmBackward0",
    "aten::cudnn_convolution_transpose_backward", "CudnnConvolutionTransposeBackward", "MmBackward",
    "aten::cudnn_convolution_backward_weight", "aten::addmm_", "AddmvBackward", "MvBackward",
    "aten::cudnn_convolution_transpose_backward_weight", "aten::cudnn_convolution_transpose_backward_input",
    "AddmmBackward", "aten::cudnn_convolution_backward_input", "AddbmmBackward",
    "aten::cudnn_convolution_backward"))


def kernel_type(name: str, is_memory: bool = False) -> str:
    """HTA's kernel type of a device activity: COMMUNICATION, MEMORY or COMPUTATION.

    Args:
        name: the kernel's name.
        is_memory: the activity is a memcpy or memset (the trace's category says so).
    """
    if _NCCL_KERNEL.match(name):
        return COMMUNICATION
    if is_memory or _MEMORY_KERNEL.match(name):
        return MEMORY
    return COMPUTATION


def uses_tensor_cores(name: str) -> bool:
    """True when a kernel's name says it runs on Tensor Cores (TensorBoard plugin's allow-list)."""
    return any(p in name for p in TENSOR_CORE_KERNEL_PATTERNS)


# ---------------------------------------------------------------- readable names

def _matching_open(name: str, close: int) -> int:
    """Index of the ``(`` matching the ``)`` at ``close``, -1 when unbalanced."""
    depth = 0
    for i in range(close, -1, -1):
        c = name[i]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                return i
    return -1


def readable_kernel_name(name: str) -> str:
    """A demangled kernel name without its return type and parameter list.

    ``void at::native::vectorized_elementwise_kernel<4, Functor<float>, Array<char*, 3> >(int,
    Functor<float>, Array<char*, 3>)`` becomes ``at::native::vectorized_elementwise_kernel<4,
    Functor<float>, Array<char*, 3> >``: the template arguments stay (they tell kernels of one
    template apart: ``bn_bw_1C11_kernel_new<…, 128, …>`` from ``<…, 32, …>``). Only the outermost
    trailing ``(...)`` is dropped, matched with the parentheses nested in it, so ``(anonymous
    namespace)`` and lambdas ``{lambda(int)#1}`` inside the name are kept. Memcpy and memset
    names (``Memcpy HtoD (Pageable -> Device)``) and names without a parameter list are
    returned as they are.
    """
    if _MEMORY_KERNEL.match(name):
        return name
    text = name.strip()
    if text.startswith("void "):
        text = text[len("void "):]
    if text.endswith(")"):
        open_at = _matching_open(text, len(text) - 1)
        # A name that is only a parenthesised group is kept whole.
        if open_at > 0:
            text = text[:open_at].rstrip()
    return text


def short_kernel_names(names: list[str], width: int, plain: bool = False) -> list[str]:
    """Readable names (:func:`readable_kernel_name`) cut to ``width`` characters, distinct names
    kept distinct.

    Each name is cut by :func:`profiler.format.shorten` (an ellipsis in the middle). Names that
    would then read the same (``vectorized_elementwise_kernel<4, …Array<char*, 3> >`` of two
    functors) show instead their start, the part around the first character where they differ,
    and their end, with an ellipsis at each cut: so that kernels of one template that differ
    in one argument never share a row label.

    Args:
        names: full kernel names (as in the trace).
        width: characters available.
        plain: ASCII ``...`` instead of ``…``.
    Returns:
        One label per name, each at most ``width`` characters.
    """
    readable = [readable_kernel_name(n) for n in names]
    out = [shorten(r, width, plain) for r in readable]
    mark = "..." if plain else "…"
    for _ in range(4):  # a group told apart at one place may still clash at a later one
        by_label: dict[str, list[int]] = {}
        for i, label in enumerate(out):
            by_label.setdefault(label, []).append(i)
        clashes = [ix for ix in by_label.values() if len({readable[i] for i in ix}) > 1]
        if not clashes:
            break
        for ix in clashes:
            fulls = [readable[i] for i in ix]
            same = len(_common_prefix(fulls))
            for i in ix:
                out[i] = _around(readable[i], same, width, mark)
            # Equal labels of different names differ after the common prefix found so far.
            readable_group = {readable[i] for i in ix}
            if len({out[i] for i in ix}) < len(readable_group):
                for i in ix:
                    out[i] = _around(readable[i], same, width, mark, tail=False)
    return out


def _common_prefix(texts: list[str]) -> str:
    lo, hi = min(texts), max(texts)
    n = 0
    while n < min(len(lo), len(hi)) and lo[n] == hi[n]:
        n += 1
    return lo[:n]


def _around(text: str, at: int, width: int, mark: str, tail: bool = True) -> str:
    """``text`` in ``width`` characters: its start, the part from just before ``at``, its end
    (without its end when ``tail`` is False), an ellipsis at each cut."""
    if len(text) <= width:
        return text
    budget = width - 2 * len(mark)
    if budget < 6:
        return shorten(text, width, mark == "...")
    head = budget // 4
    end = budget // 4 if tail else 0
    mid = budget - head - end
    start = max(head, min(at - mid // 4, len(text) - end - mid))
    middle = text[start:start + mid]
    left = text[:head] + (mark if start > head else "")
    right = (mark if start + mid < len(text) - end else "") + (text[len(text) - end:] if end else "")
    if not end and start + mid < len(text):
        right = mark
    label = left + middle + right
    return label if len(label) <= width else label[:width]


# ---------------------------------------------------------------- memcpy and collectives

_MEMCPY = re.compile(r"^Memcpy (\w+)(?: \((\w+) -> (\w+)\))?")


def memcpy_kind(name: str) -> tuple[str, str | None]:
    """(direction, host memory) of a memcpy from its name: ``Memcpy HtoD (Pageable -> Device)``
    -> ("HtoD", "pageable"); ``Memcpy DtoD (Device -> Device)`` -> ("DtoD", None); a memset ->
    ("Memset", None)."""
    if name.startswith("Memset"):
        return "Memset", None
    m = _MEMCPY.match(name)
    if not m:
        return "Memcpy", None
    direction, src, dst = m.groups()
    host = next((side.lower() for side in (src, dst) if side in ("Pageable", "Pinned")), None)
    return direction, host


# nccl-tests (doc/PERFORMANCE.md): bus bandwidth = algorithm bandwidth (bytes / time) × a factor
# of the rank count n that makes it comparable with the links' peak.
BUS_BANDWIDTH_FACTORS = {
    "AllReduce": lambda n: 2 * (n - 1) / n,
    "ReduceScatter": lambda n: (n - 1) / n,
    "AllGather": lambda n: (n - 1) / n,
    "AllToAll": lambda n: (n - 1) / n,
    "Broadcast": lambda n: 1.0,
    "Reduce": lambda n: 1.0,
    "SendRecv": lambda n: 1.0,
}
_COLLECTIVE = re.compile(r"(AllReduce|ReduceScatter|AllGather|AllToAll|Broadcast|Reduce|SendRecv|Send|Recv)")
_ALGORITHM = re.compile(r"_(RING|TREE|COLLNET\w*?|NVLS\w*?|PAT)_(LL128|LL|SIMPLE)")


def collective_of(name: str) -> str | None:
    """The collective an NCCL kernel runs, from its name (``ncclDevKernel_AllReduce_Sum_f32_RING_LL``
    -> "AllReduce"); None for a name that does not say."""
    m = _COLLECTIVE.search(name)
    if not m:
        return None
    found = m.group(1)
    return "SendRecv" if found in ("Send", "Recv") else found


def nccl_algorithm(name: str) -> tuple[str | None, str | None]:
    """(algorithm, protocol) from an NCCL kernel's name: ``…_RING_LL(…)`` -> ("RING", "LL");
    (None, None) where the name does not say (``ncclKernel_SendRecv…`` has no algorithm)."""
    m = _ALGORITHM.search(name)
    return (m.group(1), m.group(2)) if m else (None, None)


# ---------------------------------------------------------------- the tables

_DTYPE_BYTES = {"float": 4, "float32": 4, "double": 8, "float64": 8, "c10::Half": 2, "c10::BFloat16": 2,
                "half": 2, "bfloat16": 2, "int": 4, "long int": 8, "int64": 8, "signed char": 1,
                "unsigned char": 1, "bool": 1, "short int": 2}


@dataclass(frozen=True)
class KernelRow:
    """One row of the kernel view: the device activities of one name (and launching op, grid
    and block when grouped by them). Times in microseconds; None where the trace does not say.

    Attributes:
        name: the full (demangled) kernel name; ``readable_kernel_name`` for display.
        device: "cuda:0"...
        op: the launching op's name (grouped by op), else None.
        grid, block: "x,y,z" (grouped by launch shape), else None.
        count: calls.
        kernel_time_total, kernel_time_avg, kernel_time_min, kernel_time_max, kernel_time_std:
            device time (std with one degree of freedom, 0 for one call, as HTA's).
        kernel_time_total_percent: share of the device's total activity time.
        blocks_per_sm, occupancy_pct: means weighted by duration (TB's kernel table), over the
            calls that have them.
        tensor_cores: the name is on TB's Tensor Core allow-list (None for memcpys/memsets).
        kind: HTA's kernel type (COMMUNICATION, COMPUTATION, MEMORY).
    """

    name: str
    device: str
    op: str | None
    grid: str | None
    block: str | None
    count: int
    kernel_time_total: float
    kernel_time_avg: float
    kernel_time_min: float
    kernel_time_max: float
    kernel_time_std: float
    kernel_time_total_percent: float
    blocks_per_sm: float | None
    occupancy_pct: float | None
    tensor_cores: bool | None
    kind: str


def _groups(keys: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(first row of each group, group of each row) for rows keyed by integer columns."""
    if len(keys[0]) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    _, first, inverse = np.unique(np.stack(keys), axis=1, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


def _weighted(values: np.ndarray, weight: np.ndarray, group: np.ndarray, n: int) -> np.ndarray:
    ok = np.isfinite(values)
    w = np.bincount(group[ok], weights=weight[ok], minlength=n)
    s = np.bincount(group[ok], weights=(values * weight)[ok], minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(w > 0, s / w, np.nan)


def kernel_table(data: "ProfileData", by_op: bool = False, by_launch: bool = False) -> list[KernelRow]:
    """The kernel view: per device and kernel name (optionally also per launching op, and per
    grid and block), heaviest first.

    Args:
        by_op: one row per (name, launching op).
        by_launch: one row per (name, grid, block).
    Returns:
        :class:`KernelRow` rows sorted by total time, descending.
    """
    from .gpu import device_work  # noqa: PLC0415 - gpu imports this module

    g = data.gpu_columns
    gpu_row = np.full(data.n_events, -1, dtype=np.int64)
    gpu_row[g["event"]] = np.arange(len(g["event"]))
    rows: list[KernelRow] = []
    for device, work in device_work(data).items():
        dur = (work.end - work.start).astype(np.float64) / 1000.0
        op_name = np.where(work.op >= 0, data.event_columns["name_id"][np.maximum(work.op, 0)], -1)
        gr = gpu_row[work.event]
        # A gradtrace profile has no gpu table (its kernels are ops' device intervals): -1, unknown.
        launch = [np.where(gr >= 0, g[c][np.maximum(gr, 0)] if len(g[c]) else -1, -1).astype(np.int64)
                  for c in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")]
        keys = [work.name_id.astype(np.int64)] + ([op_name.astype(np.int64)] if by_op else []) + \
            (launch if by_launch else [])
        first, group = _groups(keys)
        n = len(first)
        count = np.bincount(group, minlength=n)
        total = np.bincount(group, weights=dur, minlength=n)
        mean = total / np.maximum(count, 1)
        lo = np.full(n, np.inf)
        hi = np.full(n, -np.inf)
        np.minimum.at(lo, group, dur)
        np.maximum.at(hi, group, dur)
        sq = np.bincount(group, weights=(dur - mean[group]) ** 2, minlength=n)
        std = np.where(count > 1, np.sqrt(sq / np.maximum(count - 1, 1)), 0.0)
        blocks = _weighted(work.blocks_per_sm, dur, group, n)
        occupancy = _weighted(work.occupancy_pct, dur, group, n)
        whole = float(dur.sum()) or 1.0
        for i in np.argsort(-total, kind="stable").tolist():
            r = first[i]
            name = data.strings[int(work.name_id[r])]
            memory = work.type[r] == MEMORY
            shape = (",".join(str(int(c[r])) for c in launch[:3]), ",".join(str(int(c[r])) for c in launch[3:])) \
                if by_launch and gr[r] >= 0 and launch[0][r] >= 0 else (None, None)
            rows.append(KernelRow(
                name=name, device=device, op=data.strings[int(op_name[r])] if by_op and op_name[r] >= 0 else None,
                grid=shape[0], block=shape[1], count=int(count[i]), kernel_time_total=float(total[i]),
                kernel_time_avg=float(mean[i]), kernel_time_min=float(lo[i]), kernel_time_max=float(hi[i]),
                kernel_time_std=float(std[i]), kernel_time_total_percent=100.0 * float(total[i]) / whole,
                blocks_per_sm=None if not np.isfinite(blocks[i]) else float(blocks[i]),
                occupancy_pct=None if not np.isfinite(occupancy[i]) else float(occupancy[i]),
                tensor_cores=None if memory or not work.has_launch_args else uses_tensor_cores(name),
                kind=str(work.type[r])))
    return rows


def memcpy_table(data: "ProfileData") -> list[dict]:
    """Memcpys and memsets per device, direction and host memory (``HtoD`` from pageable
    memory...): count, time, bytes and bandwidth (bytes / time, GB/s = 1e9 bytes/s); bytes and
    bandwidth None where the trace gives no sizes."""
    from .gpu import device_work  # noqa: PLC0415

    g = data.gpu_columns
    gpu_row = np.full(data.n_events, -1, dtype=np.int64)
    gpu_row[g["event"]] = np.arange(len(g["event"]))
    out = []
    for device, work in device_work(data).items():
        m = work.type == MEMORY
        if not m.any():
            continue
        kinds: dict = {}
        for i, s, e, ev in zip(work.name_id[m].tolist(), work.start[m].tolist(), work.end[m].tolist(),
                               work.event[m].tolist()):
            key = memcpy_kind(data.strings[i])
            size = int(g["bytes"][gpu_row[ev]]) if gpu_row[ev] >= 0 else -1
            row = kinds.setdefault(key, {"count": 0, "ns": 0, "bytes": 0, "sized_ns": 0, "unsized": 0})
            row["count"] += 1
            row["ns"] += e - s
            if size >= 0:
                row["bytes"] += size
                row["sized_ns"] += e - s
            else:
                row["unsized"] += 1
        for (direction, host), r in sorted(kinds.items(), key=lambda kv: -kv[1]["ns"]):
            sized = r["unsized"] < r["count"]
            out.append({"device": device, "kind": direction, "host_memory": host, "count": r["count"],
                        "time_total_us": r["ns"] / 1000.0, "bytes": r["bytes"] if sized else None,
                        "bandwidth_gbps": r["bytes"] / r["sized_ns"] if sized and r["sized_ns"] > 0 else None})
    return out


def _op_bytes(data: "ProfileData", op: int) -> int | None:
    """Bytes of an op's first input, from its recorded shape and dtype; None when unknown."""
    cols = data.event_columns
    shapes = data.input_shapes_of(int(cols["shapes_id"][op]))
    if not shapes or cols["dtypes_id"][op] < 0:
        return None
    import json  # noqa: PLC0415

    try:
        dtypes = json.loads(data.strings[int(cols["dtypes_id"][op])])
    except ValueError:
        return None
    size = _DTYPE_BYTES.get(dtypes[0]) if dtypes else None
    if size is None or not isinstance(shapes[0], list):
        return None
    return int(np.prod(shapes[0], dtype=np.int64)) * size


def collective_table(data: "ProfileData") -> list[dict]:
    """NCCL kernels per device and name: the collective, NCCL's algorithm and protocol (from
    the name), calls, latency, bytes and bus bandwidth.

    Bytes come from the launching op's first input (shape × dtype size) when the trace
    recorded them, else None; bus bandwidth is bytes / mean latency × nccl-tests' factor for the
    collective and the run's world size (``distributedInfo``), None where either is unknown.
    """
    from .gpu import device_work  # noqa: PLC0415

    info = data.metadata.get("distributed_info") or {}
    world = info.get("world_size") if isinstance(info.get("world_size"), int) else None
    out = []
    for device, work in device_work(data).items():
        m = np.flatnonzero(work.type == COMMUNICATION)
        groups: dict = {}
        for k in m.tolist():
            groups.setdefault(int(work.name_id[k]), []).append(k)
        for name_id, ks in groups.items():
            name = data.strings[name_id]
            dur = (work.end[ks] - work.start[ks]) / 1000.0
            sizes = [_op_bytes(data, int(work.op[k])) if work.op[k] >= 0 else None for k in ks]
            nbytes = None if any(s is None for s in sizes) else int(sum(sizes))
            collective = collective_of(name)
            algorithm, protocol = nccl_algorithm(name)
            bus = None
            if nbytes is not None and world and collective in BUS_BANDWIDTH_FACTORS and dur.sum() > 0:
                bus = nbytes / (dur.sum() * 1000.0) * BUS_BANDWIDTH_FACTORS[collective](world)
            out.append({"device": device, "name": name, "collective": collective, "algorithm": algorithm,
                        "protocol": protocol, "count": len(ks), "latency_total_us": float(dur.sum()),
                        "latency_avg_us": float(dur.mean()), "latency_max_us": float(dur.max()),
                        "bytes": nbytes, "bus_bandwidth_gbps": bus})
    out.sort(key=lambda r: -r["latency_total_us"])
    return out
