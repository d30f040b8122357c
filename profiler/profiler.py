"""``profiler.profile``: the context manager users hold (``start``/``step``/``stop``).

It owns the schedule state machine and hands collection to :class:`profiler.collector.Collector`
(imported only when profiling starts, so ``import profiler`` does not import the engine). The
result of each recorded cycle is a :class:`~profiler.data.ProfileData`, exactly the class
:func:`profiler.load` returns; every public attribute of it (``key_averages``, ``table``,
``module_summary``, ``save``...) is reached on ``prof`` itself, with the same signature.
"""
from __future__ import annotations

import enum
import os
import socket
import threading
import time
import warnings
from pathlib import Path
from typing import Callable, Iterable

from .data import ProfileData
from .fileformat import FILE_SUFFIX
from .step_schedule import ProfilerAction

__all__ = ["profile", "ProfilerActivity", "save_profile_handler"]


class ProfilerActivity(str, enum.Enum):
    """What to record; plain strings "cpu" and "cuda" work as well."""

    CPU = "cpu"
    CUDA = "cuda"


_active_lock = threading.Lock()
_active: "profile | None" = None
_RUNNING = (ProfilerAction.WARMUP, ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
_RECORDING = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


def _always_record(step: int) -> ProfilerAction:
    return ProfilerAction.RECORD


def _default_activities() -> set[str]:
    from .collector import gpu_available  # noqa: PLC0415 - the engine only when profiling starts

    return {"cpu", "cuda"} if gpu_available() else {"cpu"}


def _parse_activities(activities) -> set[str] | None:
    if activities is None:
        return None
    out = set()
    for a in activities:
        value = a.value if isinstance(a, ProfilerActivity) else str(a).lower()
        if value not in ("cpu", "cuda"):
            raise ValueError(f"unknown profiler activity {a!r}: expected 'cpu' or 'cuda'")
        out.add(value)
    if not out:
        raise ValueError("activities is empty: give at least 'cpu' or 'cuda'")
    return out


class profile:
    """Profile the forward ops, backward nodes and user ranges run inside it.

    Args:
        activities: iterable of "cpu" / "cuda" (or :class:`ProfilerActivity`); default "cpu",
            plus "cuda" when a GPU is usable.
        record_shapes: record input shapes and dtypes of each op.
        profile_memory: record every tensor storage allocation and free.
        with_stack: record the Python call site of forward ops and user ranges (backward
            events inherit their forward op's).
        with_flops: estimate FLOPs from input shapes (implies record_shapes).
        with_modules: keep ``nn.Module: ...`` ranges.
        schedule: ``fn(step) -> ProfilerAction``, e.g. :func:`profiler.schedule`; default:
            record everything between start and stop.
        on_trace_ready: ``fn(prof)`` called at the end of each recorded cycle (and at stop
            when no schedule is given).
        record_kernels: record every kernel, memcpy and memset with its launch (CUPTI, through
            cupti-python: see ``docs/gpu-analysis.md``) instead of one device interval per op.
            None: when "cuda" is recorded on a usable GPU and cupti-python imports; True:
            required (an error says how to install it when it cannot run); False: off.

    Example::

        with profiler.profile(record_shapes=True) as prof:
            loss = model(x).sum(); loss.backward()
        print(prof.key_averages().table(sort_by="self_cpu_time_total"))
    """

    def __init__(self, activities: Iterable | None = None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False, with_flops: bool = False,
                 with_modules: bool = False, schedule: Callable[[int], ProfilerAction] | None = None,
                 on_trace_ready: Callable[["profile"], object] | None = None,
                 record_kernels: bool | None = None):
        if record_kernels not in (None, True, False):
            raise ValueError(f"record_kernels must be None, True or False, not {record_kernels!r}")
        self.record_kernels = record_kernels
        self.activities = _parse_activities(activities)
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.with_flops = with_flops
        self.with_modules = with_modules
        self.schedule = schedule if schedule is not None else _always_record
        # Unlike torch (which marks steps only under a schedule), every step() marks a
        # ProfilerStep#N range, so the time between ops (data loading, Python) is part of a
        # step. Without a schedule, the range opened at start is kept only once step() is
        # called: a profile of code that never calls step() has no ProfilerStep#0.
        self.record_steps = True
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self._profile_data: ProfileData | None = None
        self._finished = None   # the collector of the last cycle, until its profile is read
        self._collector = None
        self._action: ProfilerAction | None = None
        self._cycle_first_step = 0
        self._step_range = None
        self._journal = None

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        self.stop()
        return False

    def start(self) -> None:
        """Start profiling (step 0). Raises RuntimeError if a profiler is already running."""
        global _active
        with _active_lock:
            if _active is not None:
                raise RuntimeError(
                    "profiler.profile is already running: profilers cannot be nested or run "
                    "twice at once; stop the running one first")
            _active = self
        try:
            if self.activities is None:
                self.activities = _default_activities()
            self.step_num = 0
            self._action = self.schedule(self.step_num)
            self._transit(ProfilerAction.NONE, self._action)
            self._open_step_range()
        except BaseException:
            self._release()
            raise

    def step(self) -> None:
        """Mark the end of a training step: closes ``ProfilerStep#N``, applies the schedule."""
        if _active is not self:
            raise RuntimeError("profiler.profile.step() called while this profiler is not running")
        self._close_step_range()
        if self._journal is not None and self._collector is not None:
            # The step just completed goes to the file now: a process killed later keeps it.
            self._collector.journal_step(self._journal, [self._cycle_first_step, self.step_num])
        previous = self._action
        self.step_num += 1
        self._action = self.schedule(self.step_num)
        self._transit(previous, self._action)
        self._open_step_range()

    def stop(self) -> None:
        """Stop profiling; a cycle still recording is finished and handed to on_trace_ready."""
        if _active is not self:
            raise RuntimeError("profiler.profile.stop() called while this profiler is not running")
        try:
            if self.step_num == 0 and self.schedule is _always_record:
                self._step_range = None     # never closed, so never recorded (see __init__)
            self._close_step_range()
            self._transit(self._action, ProfilerAction.NONE, stopping=True)
        finally:
            self._release()

    def journal(self, path) -> None:
        """Write the recording to ``path`` step by step: each :meth:`step` appends the step's
        records (see :mod:`profiler.journal`), so that a process killed before :meth:`stop`
        leaves a loadable profile of its completed steps. Without a schedule only (one
        recording, one file); whoever saves the profile at the end writes over the journal.
        """
        from .journal import Journal  # noqa: PLC0415

        if self.schedule is not _always_record:
            raise ValueError("profile.journal(): not with a schedule (each cycle is its own profile)")
        self._journal = Journal(path)

    def _release(self) -> None:
        global _active
        if self._journal is not None:
            self._journal.close()
            self._journal = None
        if self._collector is not None:
            self._collector.remove_callbacks()
            self._collector = None
        with _active_lock:
            if _active is self:
                _active = None

    # ------------------------------------------------------------------ schedule machinery

    def _transit(self, previous: ProfilerAction, current: ProfilerAction, stopping: bool = False) -> None:
        if previous in _RECORDING and (previous is ProfilerAction.RECORD_AND_SAVE or current not in _RECORDING):
            if previous is ProfilerAction.RECORD and not stopping and self.schedule is not _always_record:
                warnings.warn("profiler schedule: incomplete cycle (RECORD followed by "
                              f"{current.name}); saving what was recorded", stacklevel=3)
            # From step() the step counter has already moved on to the next step.
            self._finish_cycle(self.step_num if stopping else self.step_num - 1)
        elif previous is ProfilerAction.WARMUP and current not in _RUNNING:
            self._collector.remove_callbacks()
            self._collector = None
        if current in _RUNNING:
            if self._collector is None:
                self._new_collector()
            elif previous is ProfilerAction.WARMUP and current in _RECORDING:
                self._collector.clear()         # warm-up records are not part of the cycle
            if current in _RECORDING and previous not in _RECORDING:
                self._cycle_first_step = self.step_num
        if current is ProfilerAction.WARMUP and previous in (ProfilerAction.NONE, ProfilerAction.RECORD_AND_SAVE):
            self._cycle_first_step = self.step_num

    def _new_collector(self) -> None:
        from .collector import Collector  # noqa: PLC0415 - the engine is imported only here

        self._collector = Collector(self.activities, self.record_shapes, self.profile_memory,
                                    self.with_stack, self.with_flops, self.with_modules,
                                    record_kernels=self.record_kernels)
        self._collector.start()
        if self._action is ProfilerAction.RECORD or self._action is ProfilerAction.RECORD_AND_SAVE:
            self._cycle_first_step = self.step_num

    def _finish_cycle(self, last_step: int) -> None:
        collector, self._collector = self._collector, None
        collector.finish({"steps": [self._cycle_first_step, last_step]})
        self._finished, self._profile_data = collector, None
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def _open_step_range(self) -> None:
        if self.record_steps and self._collector is not None:
            from .collector import record_function  # noqa: PLC0415

            self._step_range = record_function(f"ProfilerStep#{self.step_num}")
            self._step_range.__enter__()

    def _close_step_range(self) -> None:
        if self._step_range is not None:
            step_range, self._step_range = self._step_range, None
            step_range.__exit__(None, None, None)

    # ------------------------------------------------------------------ results

    @property
    def profile_data(self) -> ProfileData | None:
        """The last recorded cycle (None before one ends), built from its records when first
        read: a cycle's end costs only what the recording did, as in torch.profiler."""
        finished = self._finished
        if finished is not None:
            self._profile_data = finished.profile_data()
            self._finished = None
        return self._profile_data

    def _data(self) -> ProfileData:
        if self.profile_data is None:
            raise RuntimeError("no profile yet: results exist after stop() or after a schedule's "
                               "RECORD_AND_SAVE step")
        return self.profile_data

    def __getattr__(self, name: str):
        # Every analysis of the last recorded cycle is ProfileData's, reached through this one
        # door so the two never drift: prof.key_averages(group_by_module=True), prof.table(),
        # prof.module_summary(), prof.save(path)... take the saved profile's arguments.
        if name.startswith("_") or not hasattr(ProfileData, name):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(self._data(), name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | {n for n in dir(ProfileData) if not n.startswith("_")})


def save_profile_handler(dir_name, worker_name: str | None = None) -> Callable[[profile], str]:
    """An ``on_trace_ready`` handler writing one profile file per cycle into ``dir_name``.

    Files are named ``{worker_name}.step{N}.{milliseconds}.gtprof`` where N is the cycle's last
    recorded step (worker name defaults to ``{hostname}_{pid}``). The handler returns the path it wrote.
    """
    directory = Path(dir_name)
    worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"

    def handler(prof: profile) -> str:
        directory.mkdir(parents=True, exist_ok=True)
        last_step = prof.profile_data.metadata.get("steps", [0, prof.step_num])[1]
        path = directory / f"{worker}.step{last_step}.{int(time.time() * 1000)}{FILE_SUFFIX}"
        prof.save(path)
        return str(path)

    return handler


def current() -> "profile | None":
    """The profiler running now (in any thread), or None: lets a script run under
    ``gradtrace run`` call ``profiler.current().step()``."""
    return _active
