"""gradtrace profiler: collect RecordFunction ranges, analyse them, save and load profiles.

``import profiler`` does not import the engine: analysis and file I/O (``profiler.load``,
``ProfileData``) work on a saved profile alone. Only :mod:`profiler.collector` imports the
engine; it is loaded when profiling starts or ``profiler.record_function`` is first used.
"""
from __future__ import annotations

from .aggregate import (EventList, ForwardBackwardRow, ForwardBackwardSummary, FunctionEvent,
                        FunctionEventAvg, KeyAverages)
from .data import ProfileData, load
from .profile_diff import ProfileDiff, diff
from .fileformat import FILE_SUFFIX, SCHEMA_VERSION, ProfileFormatError
from .profiler import ProfilerActivity, current, profile, save_profile_handler
from .records import Scope
from .step_schedule import ProfilerAction, schedule

__all__ = [
    "profile", "schedule", "ProfilerAction", "ProfilerActivity", "record_function",
    "save_profile_handler", "load", "ProfileData",
    "ProfileFormatError", "EventList", "FunctionEvent", "FunctionEventAvg", "KeyAverages",
    "ForwardBackwardRow", "ForwardBackwardSummary", "Scope", "SCHEMA_VERSION", "FILE_SUFFIX",
    "diff", "ProfileDiff", "current",
]


def __getattr__(name: str):
    # record_function is the engine's USER_SCOPE range; importing it lazily keeps
    # `import profiler` free of the engine.
    if name == "record_function":
        from .collector import record_function  # noqa: PLC0415

        return record_function
    raise AttributeError(f"module 'gradtrace.profiler' has no attribute {name!r}")
