"""The ``gradtrace`` command line: parse, load, call the library, render with rich.

For scripts run with ``gradtrace run``:

* :func:`current_profile` returns the running :class:`profiler.profile` (None outside
  ``gradtrace run``/``gradtrace demo``);
* :func:`step` calls its ``step()`` (marks ``ProfilerStep#N`` and drives ``--schedule``) and does
  nothing when no gradtrace profile is running, so a script can call it unconditionally.

Importing ``cli`` imports neither rich nor the engine.
"""
from __future__ import annotations

__all__ = ["current_profile", "step"]


def current_profile():
    """The profile ``gradtrace run`` is recording, or None."""
    from .session import current_profile as _current  # noqa: PLC0415

    return _current()


def step() -> None:
    """``current_profile().step()`` when a gradtrace profile is running; else nothing."""
    prof = current_profile()
    if prof is not None:
        prof.step()
