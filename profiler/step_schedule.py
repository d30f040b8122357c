"""Which steps a profiler records: ``schedule(wait, warmup, active, repeat, skip_first)``.

Same meaning as PyTorch's ``torch.profiler.schedule``: after ``skip_first`` steps, cycles of
``wait`` idle steps, ``warmup`` steps with the profiler running but results discarded, and
``active`` recorded steps; the last active step of a cycle is ``RECORD_AND_SAVE`` (the cycle's
profile is handed to ``on_trace_ready``). ``repeat=0`` repeats until profiling stops.
"""
from __future__ import annotations

import enum
from typing import Callable

__all__ = ["ProfilerAction", "schedule"]


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(wait: int, warmup: int, active: int, repeat: int = 0,
             skip_first: int = 0) -> Callable[[int], ProfilerAction]:
    """Return ``fn(step) -> ProfilerAction`` for steps numbered from 0."""
    for name, value in (("wait", wait), ("warmup", warmup), ("repeat", repeat), ("skip_first", skip_first)):
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"schedule: {name} must be an int >= 0, got {value!r}")
    if not isinstance(active, int) or active < 1:
        raise ValueError(f"schedule: active must be an int >= 1, got {active!r}")
    cycle = wait + warmup + active

    def action(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if repeat > 0 and step >= repeat * cycle:
            return ProfilerAction.NONE
        in_cycle = step % cycle
        if in_cycle < wait:
            return ProfilerAction.NONE
        if in_cycle < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if in_cycle < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    action.__doc__ = (f"schedule(wait={wait}, warmup={warmup}, active={active}, repeat={repeat}, "
                      f"skip_first={skip_first})")
    return action
