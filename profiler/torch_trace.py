"""Import PyTorch profiler (Kineto) Chrome traces as gradtrace profiles.

``torch.profiler`` writes its traces with ``prof.export_chrome_trace("trace.json")`` (or
``tensorboard_trace_handler``). :func:`read_torch_trace` reads one (plain or gzip) into a
:class:`~profiler.data.ProfileData`, so every analysis, table, diff, export and the dashboard
work on it unchanged; :func:`is_torch_trace` tells one from a gradtrace file by its content.

How the trace's events become profile events:

* ``cpu_op`` → forward op (FUNCTION) with its ``Sequence number``; backward ops (a
  ``Fwd thread id`` above 0, ``autograd::engine::evaluate_function: ...``, ``XBackward0``,
  ``AccumulateGrad``) → BACKWARD_FUNCTION. PyTorch records a node twice, the engine's
  ``evaluate_function`` range around the node's own range, both with the node's sequence
  number: the inner one keeps it (it is the node), so a node is not counted twice.
* ``user_annotation`` (``ProfilerStep#N``, ``record_function`` ranges) and module ranges
  (``python_function`` named ``nn.Module: Linear_0``: the instance, kept as named, so the
  module tree of :mod:`profiler.module_tree` tells ``Linear_0`` from ``Linear_1``) →
  USER_SCOPE. Other ``python_function`` events are Python frames: an op's stack is the chain
  of frames around it (``Python parent id``), torch's own frames left out.
* ``cuda_runtime``/``cuda_driver`` → ops of their thread (``cudaLaunchKernel`` rows, as in
  PyTorch's table).
* ``kernel``/``gpu_memcpy``/``gpu_memset`` → an event with the device interval, placed (zero
  CPU time) at the start of the runtime call with the same ``correlation``, else of the op with
  the same ``External id``; so an op's CUDA time is the sum of its kernels', never more than
  the device was busy. GPU work whose launch is not in the trace is kept on a thread of its
  own and counted.
* ``[memory]`` instants → memory records (``Bytes`` negative on free).

Real traces are not perfectly nested. A range that overruns the range it started in by at
most :data:`OVERRUN_TOLERANCE_NS` is clamped into it; one that overruns by more is set aside.
Both are counted in ``metadata["torch_trace"]`` together with events of other categories,
and :func:`import_warnings` turns the counts into lines for the CLI.

Threads: the trace names OS threads, backward ops name their forward thread by PyTorch's
RecordFunction thread id (1, 2... in order of first use). Threads are numbered 1, 2... in
order of their first event, which is that order in practice; see :func:`_thread_ids`.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from typing import TYPE_CHECKING

from .fileformat import MAGIC
from .gpu_events import activity_events, device_name_ids, gpu_table, lookup
from .nesting import PIECE, innermost_containing, nest_in_pieces, nest_intervals
from .pairing import Pairing, pair_backward
from .records import EVENT_COLUMNS, NO_DEVICE_TIME, Scope
from .torch_trace_reader import CPU_OP, PYTHON_FUNCTION, RUNTIME, USER_ANNOTATION, read_trace
from .validate import ProfileFormatError, ValidProfile, validate_profile

if TYPE_CHECKING:  # pragma: no cover
    from .data import ProfileData

__all__ = ["is_torch_trace", "read_torch_trace", "forward_backward_pairing", "Pairing",
           "import_warnings", "OVERRUN_TOLERANCE_NS"]

OVERRUN_TOLERANCE_NS = 1_000
MODULE_PREFIX = "nn.Module: "
_BACKWARD_NAME = re.compile(r"(^autograd::engine::evaluate_function: )|(Backwards?\d*$)|(AccumulateGrad$)")
# Frames of torch itself and of C functions say nothing about the user's call site.
_HIDDEN_FRAMES = ("torch/", "<built-in", MODULE_PREFIX)
_REPAIR_ROUNDS = 4


def is_torch_trace(path) -> bool:
    """True when ``path`` looks like a Chrome trace (JSON, or gzip) rather than a gradtrace file.

    Only the first bytes are read: gzip magic, or JSON text starting with ``{`` or ``[``.
    """
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError:
        return False
    if head.startswith(MAGIC[:len(head)]) and head:
        return False
    if head[:2] == b"\x1f\x8b":
        return True
    return head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"[")


def read_torch_trace(path) -> ValidProfile:
    """Read a torch.profiler Chrome trace (``.json`` or ``.json.gz``) as a profile's parts,
    checked by the same contract as a gradtrace file (:func:`.validate.validate_profile`);
    :func:`profiler.load` makes the ProfileData.

    Args:
        path: the trace file.
    Returns:
        A :class:`~.validate.ValidProfile`; ``metadata["torch_trace"]`` holds the import counts.
    Raises:
        ProfileFormatError: the file is not a torch trace, is truncated, or holds no events.
    """
    raw = read_trace(path)
    if len(raw.cpu["cat"]) + len(raw.gpu["cat"]) + len(raw.memory["time_ns"]) == 0:
        raise ProfileFormatError(path, "not a gradtrace profile, nor a torch trace with profiler events "
                                       "(no cpu_op, kernel or [memory] events in traceEvents)")
    try:
        return validate_profile(path, *_Builder(raw, Path(path).name).build())
    except ProfileFormatError:
        raise
    except ValueError as exc:   # e.g. times too far apart to nest
        raise ProfileFormatError(path, f"not a usable torch trace: {exc}") from None


# --------------------------------------------------------------------------- building


class _Builder:
    def __init__(self, raw, trace_name: str):
        self.raw = raw
        self.trace_name = trace_name
        self.strings = list(raw.strings)
        self.ids = {s: i for i, s in enumerate(self.strings)}
        self.counts: dict = {}

    def intern(self, s: str) -> int:
        sid = self.ids.get(s)
        if sid is None:
            sid = self.ids[s] = len(self.strings)
            self.strings.append(s)
        return sid

    def build(self) -> tuple:
        # Memory: the raw columns are the import's largest object besides the result, so each
        # is dropped (``_take``) once consumed, and each output column is made at its schema
        # dtype and put in order on its own: at the peak, the raw columns left, the ones made
        # and one column in the making.
        cpu = self.raw.cpu
        thread_of = self.thread_of = self._thread_ids().astype(np.int32)
        cat = cpu["cat"]
        is_frame, scope = self._scopes(cat, cpu["name_id"], cpu["fwd_tid"])
        rows = np.flatnonzero(~is_frame)
        del is_frame
        frames = np.flatnonzero(cat == PYTHON_FUNCTION)
        frame_columns = {name: cpu[name][frames] for name in ("start_ns", "dur_ns", "thread", "name_id", "py_id",
                                                               "py_parent")}
        start = self._take(cpu, "start_ns", rows)
        end = start + self._take(cpu, "dur_ns", rows)
        thread = thread_of[self._take(cpu, "thread", rows)]
        del cpu["py_id"], cpu["py_parent"]
        keep, end, parent = self._repair_nesting(start, end, thread)
        rows, start, end, thread = rows[keep], start[keep], end[keep], thread[keep]
        del keep
        scope = scope[rows]
        seq = cpu["seq"][rows]
        fwd_tid = np.where(scope == Scope.BACKWARD_FUNCTION, cpu["fwd_tid"][rows], 0)
        self._keep_node_sequence_numbers(scope, seq, fwd_tid, parent)
        del parent
        stack_id = self._stacks(frame_columns, start, thread, scope, thread_of)
        del frame_columns
        cpu_device = self.intern("cpu")    # interned before the GPUs' names: the string order is kept
        gpu_events = self._gpu_events(rows, cat[rows], start, thread, thread_of)
        for name in ("cat", "seq", "fwd_tid", "ext_id", "correlation"):
            del cpu[name]
        n, n_gpu = len(rows), len(gpu_events["start_ns"])
        # Start order; of ranges starting together the longer (the parent) first, and a
        # runtime call before the zero-length GPU event placed at its start.
        all_end = np.concatenate([end, gpu_events["end_ns"]])
        np.negative(all_end, out=all_end)
        order = np.lexsort((np.arange(n + n_gpu), all_end, np.concatenate([start, gpu_events["start_ns"]])))
        del all_end
        # The CPU rows' parts: arrays made above (held only here, so each is freed once its
        # column is made), or how to make them.
        cpu_events = {"start_ns": start, "end_ns": end, "thread_id": thread, "scope": scope, "sequence_nr": seq,
                      "fwd_thread_id": fwd_tid, "stack_id": stack_id}
        del start, end, thread, scope, seq, fwd_tid, stack_id
        make = {"name_id": lambda: self._take(cpu, "name_id", rows), "device_id": lambda: np.full(n, cpu_device),
                "stream": lambda: np.zeros(n, np.int64), "device_start_ns": lambda: np.full(n, NO_DEVICE_TIME),
                "device_end_ns": lambda: np.full(n, NO_DEVICE_TIME),
                "shapes_id": lambda: self._take(cpu, "shapes_id", rows),
                "dtypes_id": lambda: self._take(cpu, "dtypes_id", rows)}
        events = {}
        for name, dtype in EVENT_COLUMNS.items():
            part = cpu_events.pop(name) if name in cpu_events else make[name]()
            column = np.concatenate([part, gpu_events.pop(name)]).astype(dtype, copy=False)
            del part
            events[name] = column.take(order)
            del column
        gpu = self._gpu_table(order, n)
        del order
        memory = self._memory(thread_of)
        return events, memory, self.strings, self._metadata(events, memory), None, None, gpu

    @staticmethod
    def _take(table: dict, name: str, rows) -> np.ndarray:
        """``table[name][rows]``, the raw column dropped."""
        return table.pop(name)[rows]

    # ---- threads and scopes

    def _thread_ids(self) -> np.ndarray:
        """Logical thread id (from 1) per raw thread index.

        Backward ops carry their forward thread as PyTorch's RecordFunction thread id, which
        numbers threads in order of first use; the trace only has OS thread ids. Numbering
        threads by their first event reproduces that order; when the trace has a single
        thread running forward ops and a single forward thread id, that thread gets the id
        whatever its rank (its first op may predate the trace).
        """
        raw = self.raw
        n = len(raw.threads)
        first = np.full(n, np.iinfo(np.int64).max)
        for col, t in ((raw.cpu["start_ns"], raw.cpu["thread"]), (raw.memory["time_ns"], raw.memory["thread"])):
            if len(t):
                np.minimum.at(first, t, col)
        ids = np.empty(n, dtype=np.int64)
        ids[np.lexsort((np.arange(n), first))] = np.arange(1, n + 1)
        cpu = raw.cpu
        fwd_rows = (cpu["cat"] == CPU_OP) & (cpu["seq"] >= 0) & (cpu["fwd_tid"] == 0)
        fwd_threads = np.unique(cpu["thread"][fwd_rows])
        wanted = np.unique(cpu["fwd_tid"][cpu["fwd_tid"] > 0])
        if len(fwd_threads) == 1 and len(wanted) == 1 and ids[fwd_threads[0]] != wanted[0]:
            t, v = int(fwd_threads[0]), int(wanted[0])
            holder = np.flatnonzero(ids == v)
            if len(holder):
                ids[holder] = ids[t]
            ids[t] = v
        return ids

    def _scopes(self, cat, name_id, fwd_tid):
        """(is_frame, scope) per raw CPU row."""
        n_names = len(self.strings)
        used = np.unique(name_id)
        backward_name = np.zeros(n_names, dtype=bool)
        module_name = np.zeros(n_names, dtype=bool)
        for sid in used.tolist():
            s = self.strings[sid]
            backward_name[sid] = _BACKWARD_NAME.search(s) is not None
            module_name[sid] = s.startswith(MODULE_PREFIX)
        is_python = cat == PYTHON_FUNCTION
        is_module = is_python & module_name[name_id]
        is_backward = (cat == CPU_OP) & ((fwd_tid > 0) | backward_name[name_id])
        scope = np.full(len(cat), int(Scope.FUNCTION), dtype=np.int8)
        scope[(cat == USER_ANNOTATION) | is_module] = Scope.USER_SCOPE
        scope[is_backward] = Scope.BACKWARD_FUNCTION
        return is_python & ~is_module, scope

    # ---- nesting

    def _repair_nesting(self, start, end, thread):
        """(kept mask, ends after clamping, parent of each kept event among the kept ones).

        Each round nests the kept ranges and repairs the partial overlaps found; a repair can
        expose another (the clamped range's own children), hence a few rounds. The last round
        only sets aside.
        """
        end = end.copy()
        keep = np.ones(len(start), dtype=bool)
        clamped = set_aside = 0
        for round_ in range(_REPAIR_ROUNDS + 1):
            kept = np.flatnonzero(keep)
            nest = nest_in_pieces(start[kept], end[kept], thread[kept])
            parent, overlaps = nest.parent, nest.partial_overlaps
            if len(overlaps) == 0:
                break
            a, b = kept[overlaps[:, 0]], kept[overlaps[:, 1]]
            small = (end[b] - end[a] <= OVERRUN_TOLERANCE_NS) & (round_ < _REPAIR_ROUNDS)
            np.minimum.at(end, b[small], end[a[small]])
            drop = np.unique(b[~small])
            keep[drop] = False
            clamped += len(np.unique(b[small]))
            set_aside += len(drop)
        self.counts["clamped_into_parent"] = int(clamped)
        self.counts["set_aside_overlapping"] = int(set_aside)
        return keep, end, parent

    @staticmethod
    def _keep_node_sequence_numbers(scope, seq, fwd_tid, parent) -> None:
        """Drop the sequence number of ``evaluate_function`` ranges around their node's range."""
        inner = np.flatnonzero((scope == Scope.BACKWARD_FUNCTION) & (seq >= 0) & (parent >= 0))
        outer = parent[inner]
        same = ((scope[outer] == Scope.BACKWARD_FUNCTION) & (seq[outer] == seq[inner])
                & (fwd_tid[outer] == fwd_tid[inner]))
        seq[outer[same]] = -1

    # ---- stacks

    def _stacks(self, frames: dict, start, thread, scope, thread_of) -> np.ndarray:
        """stack_id per event: the Python frames (``frames``: their raw columns) around it,
        innermost first.

        Module ranges are links of the chain too (a module's ``forward`` has the module range as
        its Python parent) but are not shown as frames.
        """
        stack_id = np.full(len(start), -1, dtype=np.int32)
        if len(frames["start_ns"]) == 0:
            return stack_id
        f_start = frames["start_ns"]
        f_end = f_start + frames["dur_ns"]
        f_thread = thread_of[frames["thread"]]
        frame_stack = self._frame_stacks(frames)
        nest = nest_intervals(f_start, f_end, f_thread)
        wants = np.flatnonzero(scope != Scope.BACKWARD_FUNCTION)
        # Queries are independent: a piece at a time bounds the lookup's temporaries.
        for at in range(0, len(wants), PIECE):
            some = wants[at:at + PIECE]
            inner = innermost_containing(nest, f_start, f_end, f_thread, start[some], thread[some])
            found = inner >= 0
            stack_id[some[found]] = frame_stack[inner[found]]
        self.counts["python_frames"] = int(len(f_start))
        return stack_id

    def _frame_stacks(self, frames: dict) -> np.ndarray:
        """stack string id per frame event, following ``Python parent id`` links."""
        names = [self.strings[i] for i in frames["name_id"].tolist()]
        index = {p: k for k, p in enumerate(frames["py_id"].tolist()) if p >= 0}
        parent_of = [index.get(p, -1) for p in frames["py_parent"].tolist()]
        chains: list = [None] * len(names)
        for k in range(len(names)):
            # Walk up to a frame whose chain is known, then fill the path in downwards. A frame
            # is marked () while on the path, so a cycle of parent ids ends the walk.
            path = []
            j = k
            while j >= 0 and chains[j] is None:
                path.append(j)
                chains[j] = ()
                j = parent_of[j]
            below = chains[j] if j >= 0 else ()
            for j in reversed(path):
                if not names[j].startswith(_HIDDEN_FRAMES):
                    below = (names[j],) + below
                chains[j] = below
        stack_ids: dict[tuple, int] = {(): -1}
        out = np.empty(len(names), dtype=np.int64)
        for k, chain in enumerate(chains):
            sid = stack_ids.get(chain)
            if sid is None:
                sid = stack_ids[chain] = self.intern("\n".join(chain))
            out[k] = sid
        return out

    # ---- GPU activity and memory

    def _gpu_events(self, rows, cat, start, thread, thread_of) -> dict:
        """Kernels, memcpys and memsets as zero-CPU-time events at the start of their launch
        (:func:`.gpu_events.activity_events`)."""
        g = self.raw.gpu
        cpu = self.raw.cpu
        n = len(g["cat"])
        launcher = np.full(n, -1, dtype=np.int64)
        if n:
            launcher = lookup(cpu["correlation"][rows], (cat == RUNTIME), g["correlation"])
            by_op = lookup(cpu["ext_id"][rows], (cat == CPU_OP), g["ext_id"])
            launcher = np.where(launcher >= 0, launcher, by_op)
        orphan = launcher < 0
        orphan_thread = int(thread_of.max()) + 1 if len(thread_of) else 1
        self.counts["gpu_events"] = int(n)
        self.counts["gpu_events_without_launch"] = int(np.count_nonzero(orphan))
        if orphan.any():
            self.counts["orphan_gpu_thread"] = orphan_thread
        return activity_events(g, launcher, start, thread, orphan_thread, device_name_ids(g["device"], self.intern))

    def _gpu_table(self, order, n_cpu: int) -> dict:
        """The GPU activities' launch arguments (``records.GPU_COLUMNS``), each row pointing at
        its event after the events were put in start order (the activities were appended
        after the ``n_cpu`` CPU events), in event order."""
        position = np.empty(len(order), dtype=np.int64)
        position[order] = np.arange(len(order))
        return gpu_table(self.raw.gpu, position[n_cpu:])

    def _memory(self, thread_of) -> dict:
        m = self.raw.memory
        order = np.argsort(m["time_ns"], kind="stable")
        return {"time_ns": m["time_ns"][order], "bytes": m["bytes"][order],
                "total_allocated": m["total_allocated"][order], "device_id": m["device_id"][order],
                "addr": m["addr"][order], "thread_id": thread_of[m["thread"][order]]}

    # ---- metadata

    def _metadata(self, events, memory) -> dict:
        raw, header = self.raw, self.raw.header
        has_gpu = bool(len(raw.gpu["cat"]))
        devices = sorted({self.strings[int(d)] for d in np.unique(events["device_id"])}
                         | {self.strings[int(d)] for d in np.unique(memory["device_id"])})
        base = header.get("baseTimeNanoseconds")
        starts = events["start_ns"]
        threads = {}
        for (pid, tid), logical in zip(raw.threads, self.thread_of.tolist()):
            threads[str(logical)] = {"pid": pid, "tid": tid, "name": raw.thread_names.get((pid, tid))}
        counts = dict(self.counts)
        counts.update(events_in_file=raw.n_events, events=len(starts), memory_records=len(memory["time_ns"]),
                      skipped_categories=raw.skipped, threads=threads)
        pids = {pid for pid, _ in raw.threads if isinstance(pid, int)}
        meta = {
            "source": "torch_trace", "trace_name": header.get("traceName") or self.trace_name,
            "activities": ["cpu", "cuda"] if has_gpu else ["cpu"], "devices": devices,
            "record_shapes": bool(np.any(events["shapes_id"] >= 0)),
            "with_stack": bool(np.any(events["stack_id"] >= 0)),
            "with_modules": any(s.startswith(MODULE_PREFIX) for s in self.strings),
            "profile_memory": bool(len(memory["time_ns"])), "with_flops": False,
            "start_time_ns": int(starts.min()) if len(starts) else 0,
            "end_time_ns": int(events["end_ns"].max()) if len(starts) else 0,
            "torch_trace": counts,
        }
        if len(pids) == 1:
            meta["pid"] = pids.pop()
        # Kineto writes ts relative to baseTimeNanoseconds (a wall-clock time); older traces
        # have none and absolute epoch microseconds.
        t0 = meta["start_time_ns"]
        wall = base + t0 if isinstance(base, int) else (t0 if t0 > 10**18 else None)
        if wall is not None and 0 < wall < 2**63:
            meta["wall_clock_base_ns"] = wall
        if isinstance(header.get("distributedInfo"), dict):
            meta["distributed_info"] = header["distributedInfo"]
        if isinstance(header.get("deviceProperties"), list) and header["deviceProperties"]:
            meta["device_properties"] = [p for p in header["deviceProperties"] if isinstance(p, dict)]
        return meta


# --------------------------------------------------------------------------- pairing


def forward_backward_pairing(data: ProfileData) -> Pairing:
    """Candidates and choice of forward op for every backward event with a sequence number
    (:func:`.pairing.pair_backward`, the analysis' own pairing)."""
    return pair_backward(data.event_columns)


def import_warnings(data: ProfileData) -> list[str]:
    """One line per thing the import of a torch trace set aside or repaired (empty otherwise)."""
    counts = data.metadata.get("torch_trace")
    if not isinstance(counts, dict):
        return []
    lines = []
    if counts.get("set_aside_overlapping"):
        lines.append(f"{counts['set_aside_overlapping']} events set aside: they overran the range they "
                     f"started in by more than {OVERRUN_TOLERANCE_NS // 1000} us")
    if counts.get("clamped_into_parent"):
        lines.append(f"{counts['clamped_into_parent']} events ended up to {OVERRUN_TOLERANCE_NS // 1000} us "
                     f"after the range they started in and were clamped into it")
    if counts.get("gpu_events_without_launch"):
        lines.append(f"{counts['gpu_events_without_launch']} of {counts.get('gpu_events')} GPU events have no "
                     f"launching op in the trace; they are kept on a thread of their own")
    return lines
