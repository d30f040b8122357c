"""Passes over a captured program. Capture runs the engine itself, so hooks, unpacks and
accumulations are already where the eager engine runs them; what is left is to drop work
nobody reads."""
from __future__ import annotations

from .program import Program, Step, StepKind

__all__ = ["dead_step_elimination", "PASSES", "run_passes"]


def dead_step_elimination(steps):
    """Drop pure steps whose results nobody reads (a dead node call keeps its release)."""
    live = set()
    out = []
    for s in reversed(steps):
        if not s.pure or any(r in live for r in s.writes):
            out.append(s)
            live.update(r for r in s.reads if r is not None)
        elif s.kind is StepKind.CALL:
            out.append(Step(StepKind.RELEASE, s.node))
    out.reverse()
    return out


PASSES = (dead_step_elimination,)


def run_passes(program: Program) -> Program:
    steps = program.steps
    for p in PASSES:
        steps = p(steps)
    program.steps = steps
    return program
