"""ProfileData: one profile's columns, string table and metadata, plus its analysis methods.

The collector builds one when profiling stops and :func:`profiler.load` builds one from a file,
so everything — ``events()``, ``key_averages()``, ``table()``, ``forward_backward_summary()``,
``total_average()``, ``rows()``, ``save()`` — works the same on both. Importing this module does
not import the engine.
"""
from __future__ import annotations

import functools

import numpy as np

from . import aggregate, fileformat, torch_trace
from .analysis import EventAnalysis, analyze
from .memory import allocation_of_records, record_kinds
from .records import (COLUMN_DEFAULTS, EDGE_COLUMNS, EVENT_COLUMNS, GPU_COLUMNS, MEMORY_COLUMNS, NODE_COLUMNS, Scope,
                      empty_columns)
from .validate import parse_shapes, valid_text

__all__ = ["ProfileData", "load"]


class ProfileData:
    """A profile: integer event and memory columns (numpy), strings and metadata.

    Attributes:
        event_columns: dict column name -> numpy array (see ``records.EVENT_COLUMNS``), in
            start-time order.
        memory_columns: dict column name -> numpy array (see ``records.MEMORY_COLUMNS``), in
            time order.
        strings: the string table; ``*_id`` columns index into it.
        metadata: dict (schema_version, gradtrace_version, activities, devices, options,
            start_time_ns, wall_clock_base_ns...).
        node_columns, edge_columns: the backward graph (``records.NODE_COLUMNS`` /
            ``EDGE_COLUMNS``): which node each backward event ran, and the nodes' edges;
            empty for a profile without it (schema 1, a torch trace).
        gpu_columns: device activities (``records.GPU_COLUMNS``): the kernels, memcpys and
            memsets that are events of their own (torch traces), with their launch arguments.
    """

    def __init__(self, event_columns: dict, memory_columns: dict, strings: list, metadata: dict,
                 *, input_shapes: dict[int, list] | None = None, node_columns: dict | None = None,
                 edge_columns: dict | None = None, gpu_columns: dict | None = None, stored=None):
        """Args:
            event_columns, memory_columns, strings, metadata, node_columns, edge_columns,
            gpu_columns:
                the attributes below.
            input_shapes: shapes_id -> parsed shapes, when a reader has parsed them already
                (``profiler.load`` does, as part of validating the file); else parsed on use.
            stored: the analyses a version-5 file kept (:class:`.stored.StoredAnalysis`,
                checked against these columns by the loader): used instead of computing them.
        """
        self.event_columns = _as_table(event_columns, EVENT_COLUMNS, "event")
        self.memory_columns = _as_table(memory_columns, MEMORY_COLUMNS, "memory")
        self.node_columns = _as_table(node_columns or empty_columns(NODE_COLUMNS), NODE_COLUMNS, "node")
        self.edge_columns = _as_table(edge_columns or empty_columns(EDGE_COLUMNS), EDGE_COLUMNS, "edge")
        self.gpu_columns = _as_table(gpu_columns or empty_columns(GPU_COLUMNS), GPU_COLUMNS, "gpu")
        # Lone surrogates (a non-UTF-8 file name in a stack) could not be saved or printed.
        self.strings = [valid_text(s) for s in strings]
        self.metadata = dict(metadata)
        self._shapes_cache: dict[int, list | None] = dict(input_shapes or {})
        self._stack_cache: dict[int, list] = {}
        self._step_ranges: dict[bool, list] = {}
        self._stored_summaries: dict = {}
        self._stored_forward_backward = None
        self._stored_gpu_summary = None
        self._release = None
        if stored is not None:
            # The cached properties below, filled from the file instead of computed.
            self.__dict__.update(analysis=stored.analysis, **stored.flags)
            self._stored_summaries = stored.summaries
            self._stored_forward_backward = stored.forward_backward
            self._stored_gpu_summary = stored.gpu_summary
            self._release = stored.release

    # ------------------------------------------------------------------ basics

    @property
    def n_events(self) -> int:
        return len(self.event_columns["start_ns"])

    @property
    def n_memory_records(self) -> int:
        return len(self.memory_columns["time_ns"])

    def release_pages(self) -> None:
        """Hand the pages of a memory-mapped file that analyses have read back to the kernel.

        They stay in the page cache and come back on the next read, but stop counting in this
        process's resident memory: a long-lived reader (the dashboard) calls it after each
        analysis, so that its memory is what the analyses keep, not the file they read. A
        no-op for a profile that is not mapped.
        """
        if self._release is not None:
            self._release()

    @functools.cached_property
    def analysis(self) -> EventAnalysis:
        """Parents, self/total times, links, memory attribution (computed once, on first use)."""
        return analyze(self.event_columns, self.memory_columns, self.strings,
                       with_flops=bool(self.metadata.get("with_flops")), gpu_events=self.gpu_columns["event"])

    @functools.cached_property
    def memory_allocation(self) -> np.ndarray:
        """For each memory record, the row of its allocation (-1: allocated before the profile)."""
        return allocation_of_records(self.memory_columns)

    @functools.cached_property
    def memory_kinds(self) -> np.ndarray:
        """For each memory record, the kind (``records.MemoryCategory``) of its allocation; all
        NONE ("unknown") in a profile recorded without kinds (older files, torch traces)."""
        return record_kinds(self.memory_columns, bool(self.metadata.get("memory_categories")),
                            self.memory_allocation)

    @functools.cached_property
    def has_device_time(self) -> bool:
        """True when some event has a device (CUDA) interval."""
        return bool(np.any(self.event_columns["device_start_ns"] >= 0))

    @functools.cached_property
    def has_cuda_memory(self) -> bool:
        dev = self.memory_columns["device_id"]
        return any(self.strings[int(d)].startswith("cuda") for d in np.unique(dev))

    def name_of(self, index: int) -> str:
        return self.strings[int(self.event_columns["name_id"][index])]

    def input_shapes_of(self, shapes_id: int) -> list[list[int]] | None:
        """The input shapes behind a ``shapes_id``, as lists of ints (None for -1).

        Parsed once (by the loader, which refuses malformed shapes, or here on first use).
        """
        if shapes_id < 0:
            return None
        if shapes_id not in self._shapes_cache:
            self._shapes_cache[shapes_id] = parse_shapes(self.strings[shapes_id])
        return self._shapes_cache[shapes_id]

    def stack_of(self, stack_id: int) -> list[str]:
        """Frames ("file(line): function", innermost first) behind a ``stack_id`` ([] for -1)."""
        if stack_id < 0:
            return []
        if stack_id not in self._stack_cache:
            self._stack_cache[stack_id] = self.strings[stack_id].split("\n")
        return self._stack_cache[stack_id]

    @functools.cached_property
    def _children(self) -> tuple[np.ndarray, np.ndarray]:
        parent = self.analysis.parent
        order = np.argsort(parent, kind="stable")
        bounds = np.searchsorted(parent[order], np.arange(-1, self.n_events + 1))
        return order, bounds

    def children_of(self, index: int) -> np.ndarray:
        """Indices of the direct children of an event, in start order."""
        order, bounds = self._children
        return order[bounds[index + 1]:bounds[index + 2]]

    def partial_overlaps(self) -> list[tuple[aggregate.FunctionEvent, aggregate.FunctionEvent]]:
        """Pairs of ranges of one thread that overlap without nesting (first starts first).

        Such ranges are kept (each is nested where it fits) and listed here instead of being
        dropped; the table footer counts them.
        """
        return [(aggregate.FunctionEvent(self, int(a)), aggregate.FunctionEvent(self, int(b)))
                for a, b in self.analysis.partial_overlaps]

    def step_ranges(self, device_aligned: bool = True) -> list[tuple[str, int, int]]:
        """(name, start_ns, end_ns) of the ``ProfilerStep#N`` ranges, in order.

        Args:
            device_aligned: steps as the TensorBoard profiler plugin aligns them: a step ends at
                the later of its host end and the device end of the work launched in it (the
                events with a device interval that start inside its host range), and the next
                starts at the later of its host start and that end. The device work a step
                queued is then counted in it, the tail after its host range included. False:
                the host ranges as recorded. Without device time the two are the same.
        """
        # Kept per profile: the Overview, the GPU figures and the ranks each ask (a scan of
        # every event, a third of a second at 10M events).
        if device_aligned not in self._step_ranges:
            self._step_ranges[device_aligned] = self._find_step_ranges(device_aligned)
        return list(self._step_ranges[device_aligned])

    def _find_step_ranges(self, device_aligned: bool) -> list[tuple[str, int, int]]:
        is_step = np.array([s.startswith(aggregate.STEP_PREFIX) for s in self.strings] or [False])
        cols = self.event_columns
        # A table lookup, not np.isin (a sort of every event: a third of a second at 10M).
        pick = np.flatnonzero(is_step[cols["name_id"]] & (cols["scope"] == Scope.USER_SCOPE))
        names = [self.strings[i] for i in cols["name_id"][pick].tolist()]
        host = list(zip(names, cols["start_ns"][pick].tolist(), cols["end_ns"][pick].tolist()))
        if not device_aligned or not host or not self.has_device_time:
            return host
        return _device_aligned(host, cols)

    # ------------------------------------------------------------------ analysis API

    def events(self) -> aggregate.EventList:
        """All events in start order (PyTorch's ``prof.events()``)."""
        return aggregate.EventList(self)

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_module: bool = False, group_by_device: bool = False,
                     merge_steps: bool = False) -> aggregate.KeyAverages:
        """Events grouped by name (optionally also by input shapes, top-N stack frames, ...).

        Args:
            group_by_input_shape: separate rows per distinct input shapes (needs record_shapes).
            group_by_stack_n: separate rows per distinct top-N frames (needs with_stack).
            group_by_module: separate rows per nn.Module class (needs with_modules; see
                :mod:`profiler.modules` for how events are attributed).
            group_by_device: separate rows per device ("cpu", "cuda:0").
            merge_steps: one "ProfilerStep#*" row instead of one per step.
        Returns:
            A :class:`~profiler.aggregate.KeyAverages` (a list of FunctionEventAvg rows).
        """
        if self._stored_summaries and not (group_by_stack_n or group_by_module):
            from .stored import stored_key_averages, summary_name  # noqa: PLC0415 - stored imports aggregate

            name = summary_name(group_by_input_shape, group_by_device, merge_steps)
            if name in self._stored_summaries:
                return stored_key_averages(self, self._stored_summaries[name], name)
        return aggregate.key_averages(self, group_by_input_shape, group_by_stack_n,
                                      group_by_module=group_by_module, group_by_device=group_by_device,
                                      merge_steps=merge_steps)

    def table(self, sort_by: str | None = None, row_limit: int = 100, max_name_column_width: int = 55,
              header: str | None = None, top_level_events_only: bool = False,
              time_unit: str | None = None, group_by_input_shape: bool = False,
              group_by_stack_n: int = 0) -> str:
        """Shortcut for ``key_averages(...).table(...)``."""
        return self.key_averages(group_by_input_shape, group_by_stack_n).table(
            sort_by=sort_by, row_limit=row_limit, max_name_column_width=max_name_column_width,
            header=header, top_level_events_only=top_level_events_only, time_unit=time_unit)

    def module_summary(self) -> list:
        """Time per nn.Module class, forward and backward (see :func:`profiler.modules.module_summary`)."""
        from .modules import module_summary  # noqa: PLC0415 - modules imports this module's analysis

        return module_summary(self)

    def forward_backward_summary(self) -> aggregate.ForwardBackwardSummary:
        """Per forward op (and call site): forward cost, cost of the backward nodes it caused, sum."""
        if self._stored_forward_backward is not None:
            from .stored import stored_forward_backward  # noqa: PLC0415

            return stored_forward_backward(self, self._stored_forward_backward)
        return aggregate.forward_backward_summary(self)

    def gpu_summary(self) -> dict:
        """Every GPU figure per device, over all steps and per step, with recommendations
        (see :func:`profiler.gpu.gpu_summary` and ``docs/gpu-analysis.md``); a version-5 file
        keeps it (read, not recomputed)."""
        if self._stored_gpu_summary is not None:
            return self._stored_gpu_summary.get()
        from .advice import recommendations  # noqa: PLC0415 - lazy: tables and files need no GPU analysis
        from .gpu import gpu_summary  # noqa: PLC0415

        summary = gpu_summary(self)
        summary["recommendations"] = recommendations(self, summary)
        return summary

    def total_average(self) -> aggregate.FunctionEventAvg:
        """Sums over every event (key "Total")."""
        return aggregate.total_average(self)

    def rows(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0) -> list[dict]:
        """``key_averages()`` rows as plain dicts (times in microseconds)."""
        return self.key_averages(group_by_input_shape, group_by_stack_n).to_dicts()

    def save(self, path, *, compress: bool = False, version: int | None = None,
             release_memory: bool = False) -> None:
        """Write this profile to ``path`` in the gradtrace profile format (see
        :func:`.fileformat.save` for ``compress``, ``version`` and ``release_memory``)."""
        fileformat.save(self, path, compress=compress, version=version, release_memory=release_memory)

    # ------------------------------------------------------------------ exports (issue 6)

    def export_chrome_trace(self, path, distributed_info: dict | None = None,
                            trace_name: str | None = None):
        """Write a Chrome trace (``.json`` or ``.json.gz``); see :mod:`profiler.chrome_trace`."""
        from .chrome_trace import export_chrome_trace  # noqa: PLC0415

        return export_chrome_trace(self, path, distributed_info=distributed_info, trace_name=trace_name)

    def export_stacks(self, path, metric: str = "self_cpu_time_total") -> None:
        """Write folded stacks for flame graphs; see :mod:`profiler.stacks`."""
        from .stacks import export_stacks  # noqa: PLC0415

        export_stacks(self, path, metric)

    def export_speedscope(self, path) -> None:
        """Write a speedscope (evented) JSON file; see :mod:`profiler.stacks`."""
        from .stacks import export_speedscope  # noqa: PLC0415

        export_speedscope(self, path)

    def __repr__(self):
        return (f"<ProfileData events={self.n_events} memory_records={self.n_memory_records} "
                f"strings={len(self.strings)} activities={self.metadata.get('activities')}>")


def _device_aligned(host: list, cols: dict) -> list[tuple[str, int, int]]:
    """Host step ranges extended to the device end of the work launched in each (see
    ``ProfileData.step_ranges``); steps stay in order and never overlap."""
    dev = np.flatnonzero(cols["device_end_ns"] >= 0)
    launch = cols["start_ns"][dev]          # in start order, as every event column
    dev_end = cols["device_end_ns"][dev]
    starts = np.array([s for _, s, _ in host], dtype=np.int64)
    ends = np.array([e for _, _, e in host], dtype=np.int64)
    # The latest device end of each step's launches (s <= launch < e), every step at once (tens
    # of thousands of steps: a search per step took seconds): reduceat over [lo, hi) pairs,
    # with a sentinel after the last launch so that hi may point past it.
    lo = np.searchsorted(launch, starts, side="left")
    hi = np.searchsorted(launch, ends, side="left")
    device_end = ends.copy()                # a step that launched nothing ends where it ends
    launched = hi > lo
    if launched.any():
        bounds = np.stack([lo[launched], hi[launched]], axis=1).reshape(-1)
        padded = np.append(dev_end, np.iinfo(np.int64).min)
        device_end[launched] = np.maximum.reduceat(padded, bounds)[::2]
    # A step ends at its host end, its device end or its start, whichever is last; it starts
    # at its host start or where the step before it ended: end_i = max(this step's, end_i-1).
    end = np.maximum.accumulate(np.maximum(np.maximum(ends, device_end), starts))
    start = starts.copy()
    start[1:] = np.maximum(starts[1:], end[:-1])
    return [(name, s, e) for (name, _, _), s, e in zip(host, start.tolist(), end.tolist())]


def _as_table(columns: dict, schema: dict, what: str) -> dict[str, np.ndarray]:
    table = what if what != "event" else "events"
    defaults = {name: value for (t, name), (_, value) in COLUMN_DEFAULTS.items() if t == table}
    if any(name not in columns for name in defaults):
        rows = len(next((columns[n] for n in schema if n in columns), ()))
        columns = {**{n: np.full(rows, v) for n, v in defaults.items()}, **columns}
    missing = [name for name in schema if name not in columns]
    if missing:
        raise ValueError(f"{what} columns missing: {', '.join(missing)}")
    out = {name: np.ascontiguousarray(columns[name], dtype=dt).reshape(-1) for name, dt in schema.items()}
    lengths = {len(v) for v in out.values()}
    if len(lengths) > 1:
        raise ValueError(f"{what} columns have different lengths: {sorted(lengths)}")
    return out


def load(path, *, max_raw_bytes: int | None = None, defer_checks: bool = False) -> ProfileData:
    """Read a profile file written by ``prof.save`` (:func:`.fileformat.read`), or a
    torch.profiler Chrome trace, told apart by its content (:func:`.torch_trace.read_torch_trace`).

    Any bytes at all give either a profile that every analysis, table, export and dashboard
    page handles, or a :class:`~.validate.ProfileFormatError` (see :mod:`.validate`).

    Args:
        path: the file.
        max_raw_bytes: refuse files whose columns and strings inflate to more than this
            (the dashboard bounds uploads with it); the file-size bound applies regardless.
        defer_checks: a version-5 file's stored per-event analysis is checked on its first
            use (``data.analysis``), which may then raise ProfileFormatError, instead of here:
            a table the file stores opens without reading those arrays (the CLI's choice).
    Raises:
        ProfileFormatError: the file is not a profile, is truncated or corrupted, was
            written by a newer gradtrace, or holds values no profile can have. The message is
            one line: path and problem.
    """
    stored = None
    if torch_trace.is_torch_trace(path):
        parts = torch_trace.read_torch_trace(path)
    else:
        parts, stored = fileformat.read(path, max_raw_bytes=max_raw_bytes, defer_checks=defer_checks)
    return ProfileData(**parts._asdict(), stored=stored)
