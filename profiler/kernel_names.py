"""Kernel names: what a kernel is (HTA's kernel types), whether it runs on Tensor Cores (TB's
allow-list), what a memcpy or NCCL kernel's name says, and names made readable for tables.

Pure functions of strings, imported by every GPU module (:mod:`profiler.gpu`,
:mod:`profiler.kernels`, :mod:`profiler.advice`, :mod:`profiler.ranks`); they import nothing of
ours. Definitions, each from its anchor (see ``docs/gpu-analysis.md``):

* **kernel type** (HTA's ``get_kernel_type``): COMMUNICATION for a kernel named
  ``nccl…Kernel…``; MEMORY for a memcpy or memset; COMPUTATION for the rest. In a gradtrace
  profile (no kernel names, only the ops' device intervals) communication is an op whose name
  says so (:data:`COMMUNICATION_OP`).
* **Tensor Cores** (TensorBoard plugin, ``tensor_core.py``): a kernel whose name contains one
  of :data:`TENSOR_CORE_KERNEL_PATTERNS`; an op is Tensor-Core eligible when its name is one of
  :data:`TENSOR_CORE_ELIGIBLE_OPS`.
* **readable names** (:func:`readable_kernel_name`): the demangled name without its return
  type and parameter list, template arguments kept; :func:`short_kernel_names` then fits a
  column and keeps distinct names distinct.
"""
from __future__ import annotations

import re

from .format import shorten

__all__ = ["COMPUTATION", "COMMUNICATION", "MEMORY", "COMMUNICATION_OP", "TENSOR_CORE_KERNEL_PATTERNS",
           "TENSOR_CORE_ELIGIBLE_OPS", "readable_kernel_name", "short_kernel_names", "kernel_type",
           "uses_tensor_cores", "memcpy_kind", "nccl_algorithm", "BUS_BANDWIDTH_FACTORS", "collective_of",
           "collective_of_op"]

# A communication range or op, by its name: nccl, all_reduce, reduce_scatter, all_gather,
# broadcast of a backend, all_to_all, ``record_param_comms``, ``{backend}:wait``.
COMMUNICATION_OP = re.compile(r"nccl|all_?reduce|reduce_?scatter|all_?gather|all_?to_?all|"
                              r"(gloo|mpi|c10d)\S*broadcast|record_param_comms|:wait$", re.IGNORECASE)

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


def kernel_type(name: str) -> str:
    """HTA's kernel type of a device activity, from its name: COMMUNICATION, MEMORY or
    COMPUTATION (a memcpy or memset of the trace's gpu table is MEMORY whatever its name)."""
    if _NCCL_KERNEL.match(name):
        return COMMUNICATION
    if _MEMORY_KERNEL.match(name):
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
    (None, None) where the name does not say (``ncclDevKernel_Generic``)."""
    m = _ALGORITHM.search(name)
    return (m.group(1), m.group(2)) if m else (None, None)


# A communication op or range by what it calls (``nccl:_reduce_scatter_base``, ``c10d::allreduce_``,
# ``all_to_all``): its letters, lowercase, searched longest collective first ("reduce" last).
_OP_COLLECTIVES = (("allreduce", "AllReduce"), ("reducescatter", "ReduceScatter"), ("allgather", "AllGather"),
                   ("alltoall", "AllToAll"), ("broadcast", "Broadcast"), ("send", "SendRecv"),
                   ("recv", "SendRecv"), ("reduce", "Reduce"))


def collective_of_op(name: str) -> str | None:
    """The collective a communication op or range calls (``nccl:_reduce_scatter_base`` ->
    "ReduceScatter", ``c10d::allreduce_`` -> "AllReduce"); None for one that does not say
    (``record_param_comms``)."""
    letters = re.sub(r"[^a-z]", "", name.lower())
    return next((found for key, found in _OP_COLLECTIVES if key in letters), None)
