"""The ``gradtrace`` command line: parse, load, call the library, render with rich.

A script run with ``gradtrace run`` reaches the running profile the public way, through
:func:`profiler.current` (``profiler.current().step()`` marks ``ProfilerStep#N`` and drives
``--schedule``). Two thin aliases stay for scripts written against the CLI:

* :func:`current_profile` is :func:`profiler.current`: the running :class:`profiler.profile`,
  None when none runs (outside ``gradtrace run``/``gradtrace demo`` and the script's own);
* :func:`step` calls its ``step()`` and does nothing when no profile is running, so a script can
  call it unconditionally.

Importing ``cli`` imports neither rich nor the engine.
"""
from __future__ import annotations

__all__ = ["current_profile", "step"]


def current_profile():
    """The running profile (``profiler.current()``), or None."""
    from gradtrace.profiler import current  # noqa: PLC0415 - profiler does not import the engine

    return current()


def step() -> None:
    """``profiler.current().step()`` when a profile is running; else nothing."""
    prof = current_profile()
    if prof is not None:
        prof.step()
