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
from typing import TYPE_CHECKING

import numpy as np

from .format import shorten

if TYPE_CHECKING:  # pragma: no cover
    from .data import ProfileData

__all__ = ["COMPUTATION", "COMMUNICATION", "MEMORY", "TENSOR_CORE_KERNEL_PATTERNS", "TENSOR_CORE_ELIGIBLE_OPS",
           "readable_kernel_name", "short_kernel_names", "kernel_type", "uses_tensor_cores",
           "memcpy_kind", "nccl_algorithm", "BUS_BANDWIDTH_FACTORS", "collective_of"]

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

    Each name is cut by :func:`profiler.format.shorten` (an ellipsis in the middle). Where two
    different names would read the same, the ellipsis of those names moves (more of the end
    kept, then more of the start) until they differ, so that kernels of one template that differ
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
    room = width - len(mark)
    if room <= 1:
        return out
    for _ in range(2):  # a moved ellipsis may collide with another label: one more pass
        clash: dict[str, set[str]] = {}
        for label, full in zip(out, readable):
            clash.setdefault(label, set()).add(full)
        for label, fulls in clash.items():
            if len(fulls) < 2:
                continue
            group = sorted(fulls)
            for head in sorted(range(1, room), key=lambda h: abs(h - room // 3)):
                cut = {f: (f if len(f) <= width else f[:head] + mark + f[len(f) - (room - head):]) for f in group}
                if len(set(cut.values())) == len(group):
                    out = [cut.get(full, o) if o == label else o for o, full in zip(out, readable)]
                    break
    return out


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
