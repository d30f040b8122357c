"""Which ``nn.Module`` each event belongs to, and the time per module class.

One attribution, used by every view that groups by module (``key_averages(group_by_module=
True)``, ``module_summary()``, ``gradtrace table --group-by module`` and the dashboard):

* a forward event belongs to the innermost ``nn.Module: X`` range that encloses it (a module
  range belongs to itself);
* a backward node belongs to the module of the forward op that created it (matched on
  sequence_nr and thread), and ops run inside a backward node go with the node; a backward
  node whose forward op is not in the profile belongs to no module — it ran outside every
  module's forward, so its enclosing ranges say nothing. A backward range without a link of
  its own around a linked one (torch's ``evaluate_function: X`` around the node ``X``) goes
  with the node it wraps.

Torch traces name module *instances* (``nn.Module: Linear_0``, ``Linear_1``: a counter per
class); the class is the name without that suffix. The per-instance tree is
:mod:`profiler.module_tree`.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from .analysis import depth_levels

if TYPE_CHECKING:  # pragma: no cover
    from .data import ProfileData

__all__ = ["MODULE_PREFIX", "NO_MODULE", "module_of_events", "module_owner", "module_label",
           "ModuleRow", "module_summary"]

MODULE_PREFIX = "nn.Module:"
NO_MODULE = "(no module)"
_INSTANCE_SUFFIX = re.compile(r"_\d+$")


def module_label(name: str) -> str:
    """The module named by a range: ``"nn.Module: Linear_0"`` -> ``"Linear_0"``."""
    return name[len(MODULE_PREFIX):].strip()


def _class_label(data: "ProfileData", name: str) -> str:
    label = module_label(name)
    if data.metadata.get("source") == "torch_trace":
        label = _INSTANCE_SUFFIX.sub("", label)
    return label


def module_event_mask(data: "ProfileData") -> np.ndarray:
    """Boolean mask of the events that are ``nn.Module: X`` ranges."""
    is_module_string = np.array([s.startswith(MODULE_PREFIX) for s in data.strings] or [False])
    return is_module_string[data.event_columns["name_id"]] if data.n_events else np.zeros(0, bool)


def module_owner(data: "ProfileData") -> np.ndarray:
    """For each event, the index of the module range it is charged to (-1: none)."""
    a = data.analysis
    n = data.n_events
    is_module = module_event_mask(data)
    owner = np.where(is_module, np.arange(n), -1)
    if not is_module.any():
        return owner
    # Top-down: each event takes its parent's owner unless it is a module range itself.
    for idx in depth_levels(a.depth)[1:]:
        owner[idx] = np.where(is_module[idx], idx, owner[a.parent[idx]])
    bwd_root = a.backward_ancestor
    in_bwd = np.flatnonzero(bwd_root >= 0)
    fwd_of = _wrapped_links(data)[bwd_root[in_bwd]]
    owner[in_bwd] = np.where(fwd_of >= 0, owner[np.maximum(fwd_of, 0)], -1)
    return owner


def _wrapped_links(data: "ProfileData") -> np.ndarray:
    """``analysis.forward_event``, with an unlinked backward range that directly wraps a linked
    one taking that one's forward op (a torch node inside its ``evaluate_function`` range)."""
    a = data.analysis
    link = a.forward_event.astype(np.int64).copy()
    child = np.flatnonzero((link >= 0) & (a.parent >= 0))
    wrapper = a.parent[child]
    pick = (link[wrapper] < 0) & (a.backward_ancestor[wrapper] == wrapper)
    link[wrapper[pick]] = link[child[pick]]
    return link


def module_of_events(data: "ProfileData") -> tuple[np.ndarray, list[str]]:
    """Module class of each event.

    Returns:
        (label index per event; labels), where label 0 is :data:`NO_MODULE` and the others
        are module class names ("Linear") in sorted order.
    """
    owner = module_owner(data)
    name_id = data.event_columns["name_id"]
    names_of = np.where(owner >= 0, name_id[np.maximum(owner, 0)], -1)
    uniq, inv = np.unique(names_of, return_inverse=True)
    labels = [_class_label(data, data.strings[int(u)]) if u >= 0 else NO_MODULE for u in uniq.tolist()]
    # Two string ids can name one class ("nn.Module: Linear" and "nn.Module:Linear").
    classes = [NO_MODULE] + sorted(set(labels) - {NO_MODULE})
    class_of_label = np.array([classes.index(lab) for lab in labels], dtype=np.int64)
    return class_of_label[inv.reshape(-1)], classes


class ModuleRow:
    """Time charged to one module class (times in microseconds).

    Attributes:
        key (also ``module``): the class name, or "(no module)".
        count: calls of the class's module ranges.
        self_cpu_time_total, self_cuda_time_total: Σ self time of the events charged to it.
        forward_self_cpu_time_total, backward_self_cpu_time_total: that self CPU time split
            into forward and backward.
        cpu_time_total, cuda_time_total: self time plus that of the modules of other classes
            nested inside it (the top-level module's total is its whole subtree).
    """

    __slots__ = ("key", "count", "self_cpu_time_total", "cpu_time_total", "self_cuda_time_total",
                 "cuda_time_total", "forward_self_cpu_time_total", "backward_self_cpu_time_total")

    def __init__(self, **values):
        for name, v in values.items():
            setattr(self, name, v)

    module = property(lambda self: self.key)

    def to_dict(self) -> dict:
        d = {name: getattr(self, name) for name in self.__slots__}
        d["module"] = d.pop("key")
        return d

    def __repr__(self):
        return f"<ModuleRow {self.key!r} self_cpu_time_total={self.self_cpu_time_total:.3f}us>"


def module_summary(data: "ProfileData") -> list[ModuleRow]:
    """One row per module class, forward and backward, heaviest self CPU first.

    Returns:
        Rows (times in microseconds); empty when the profile has no module ranges (it was
        recorded without ``with_modules``). Events outside every module are one row,
        "(no module)".
    """
    a = data.analysis
    is_module = module_event_mask(data)
    if not is_module.any():
        return []
    group, classes = module_of_events(data)
    owner = module_owner(data)
    n_groups = len(classes)
    in_bwd = a.backward_ancestor >= 0

    def gsum(values, mask=None):
        g, v = (group, values) if mask is None else (group[mask], values[mask])
        return np.bincount(g, weights=v, minlength=n_groups)

    self_cpu, self_cuda = gsum(a.self_cpu_ns), gsum(a.self_cuda_ns)
    fwd_self, bwd_self = gsum(a.self_cpu_ns, ~in_bwd), gsum(a.self_cpu_ns, in_bwd)
    count = np.bincount(group[is_module], minlength=n_groups)
    # Inclusive totals: each module range's charged self time also counts for every module
    # of another class that encloses it (once per class, so recursion does not double count).
    total_cpu, total_cuda = self_cpu.copy(), self_cuda.copy()
    owned = owner >= 0
    owned_cpu = np.bincount(owner[owned], weights=a.self_cpu_ns[owned], minlength=data.n_events)
    owned_cuda = np.bincount(owner[owned], weights=a.self_cuda_ns[owned], minlength=data.n_events)
    parent = a.parent
    for ev in np.flatnonzero(is_module).tolist():
        seen = {int(group[ev])}
        p = int(parent[ev])
        while p >= 0:
            if is_module[p] and int(group[p]) not in seen:
                seen.add(int(group[p]))
                total_cpu[group[p]] += owned_cpu[ev]
                total_cuda[group[p]] += owned_cuda[ev]
            p = int(parent[p])
    rows = [ModuleRow(key=label, count=int(count[k]),
                      self_cpu_time_total=float(self_cpu[k]) / 1e3, cpu_time_total=float(total_cpu[k]) / 1e3,
                      self_cuda_time_total=float(self_cuda[k]) / 1e3, cuda_time_total=float(total_cuda[k]) / 1e3,
                      forward_self_cpu_time_total=float(fwd_self[k]) / 1e3,
                      backward_self_cpu_time_total=float(bwd_self[k]) / 1e3)
            for k, label in enumerate(classes) if k or np.any(group == 0)]
    rows.sort(key=lambda r: r.self_cpu_time_total, reverse=True)
    return rows
