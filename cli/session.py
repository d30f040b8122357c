"""A profiling session for ``demo`` and ``run``: start, hand the profile to user code, save.

The session owns one :class:`profiler.profile`. Every recorded cycle (one, or one per
``schedule`` cycle) is kept and written when the session ends — also when the code under it
raised or was interrupted, so a crash or a Ctrl-C still leaves a profile behind.

User scripts reach the running profile the public way, :func:`profiler.current` (the session
starts its profile, so that is the one returned); a script that calls
``profiler.current().step()`` drives the profiler's schedule. :func:`cli.current_profile` and
:func:`cli.step` are aliases of it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ProfileOptions", "Session", "default_out", "parse_schedule"]


@dataclass
class ProfileOptions:
    """The profiling flags shared by ``demo`` and ``run``."""

    record_shapes: bool = False
    with_stack: bool = False
    memory: bool = False
    with_modules: bool = False
    with_flops: bool = False
    activities: list[str] | None = None
    schedule: tuple[int, ...] | None = None      # wait, warmup, active[, repeat[, skip_first]]

    def make_schedule(self):
        if self.schedule is None:
            return None
        from gradtrace import profiler  # noqa: PLC0415

        return profiler.schedule(*self.schedule)


def parse_schedule(text: str) -> tuple[int, ...]:
    """``"1,1,3"`` -> (1, 1, 3): wait, warmup, active[, repeat[, skip_first]]."""
    parts = [p.strip() for p in text.split(",")]
    try:
        values = tuple(int(p) for p in parts)
    except ValueError:
        raise ValueError(f"--schedule {text!r}: expected integers WAIT,WARMUP,ACTIVE[,REPEAT[,SKIP_FIRST]]")
    if not 3 <= len(values) <= 5 or any(v < 0 for v in values) or values[2] < 1:
        raise ValueError(f"--schedule {text!r}: expected WAIT,WARMUP,ACTIVE[,REPEAT[,SKIP_FIRST]] "
                         "with ACTIVE >= 1 and no negative value, e.g. 1,1,3")
    return values


def default_out(stem: str, directory: str | Path = "gradtrace-runs") -> Path:
    """``./gradtrace-runs/{stem}-{YYYYmmdd-HHMMSS}.gtprof`` (a counter is added on a clash)."""
    from gradtrace.profiler import FILE_SUFFIX  # noqa: PLC0415

    base = Path(directory) / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    path = base.with_suffix(FILE_SUFFIX)
    k = 1
    while path.exists():
        path = Path(f"{base}-{k}{FILE_SUFFIX}")
        k += 1
    return path


@dataclass
class Session:
    """Run code under :class:`profiler.profile` and save every recorded cycle.

    Args:
        options: the profiling flags.
        out: the profile file to write; with several schedule cycles the earlier ones go
            next to it as ``{stem}.cycle{K}.gtprof`` and the last one to ``out``.
    """

    options: ProfileOptions
    out: Path
    # Write ``out`` step by step while profiling (profiler.journal): a process killed
    # mid-run (a rank stopped by MPI_Abort, SIGKILL, the OOM killer) keeps its completed
    # steps. Without a schedule only; the complete profile replaces the journal at the end.
    journal: bool = False
    cycles: list = field(default_factory=list)
    prof: object = None
    stopping: bool = False
    dropped_at_stop: list | None = None     # steps of a cut-short cycle not saved

    def start(self):
        from gradtrace import profiler  # noqa: PLC0415

        o = self.options
        self.prof = profiler.profile(activities=o.activities, record_shapes=o.record_shapes,
                                     profile_memory=o.memory, with_stack=o.with_stack,
                                     with_flops=o.with_flops, with_modules=o.with_modules,
                                     schedule=o.make_schedule(), on_trace_ready=self._keep)
        self.prof.start()          # from here on, profiler.current() is self.prof
        if self.journal and o.schedule is None:
            self.prof.journal(self.out)
        return self.prof

    def _keep(self, prof) -> None:
        # A schedule cycle cut short by stop() (the script ended mid-cycle, e.g. the range
        # after the last step()) is dropped when a complete cycle exists: one run, one file.
        if self.stopping and self.options.schedule is not None and self.cycles:
            self.dropped_at_stop = prof.profile_data.metadata.get("steps")
            return
        self.cycles.append(prof.profile_data)

    def stop(self) -> list[Path]:
        """Stop profiling (if running) and write the cycles; returns the paths written."""
        if self.prof is not None:
            self.stopping = True
            try:
                self.prof.stop()
            except RuntimeError:
                pass            # already stopped (the script stopped it itself)
        return self.save()

    def save(self) -> list[Path]:
        if not self.cycles:
            if self.journal and self.out.exists():
                self.out.unlink()       # a journal of nothing
            return []
        self.out.parent.mkdir(parents=True, exist_ok=True)
        paths = []
        for k, data in enumerate(self.cycles[:-1]):
            path = self.out.with_name(f"{self.out.stem}.cycle{k}{self.out.suffix}")
            data.save(path)
            paths.append(path)
        self.cycles[-1].save(self.out)
        paths.append(self.out)
        return paths

    @property
    def main_data(self):
        """The profile written to ``out`` (the last complete cycle)."""
        return self.cycles[-1]
