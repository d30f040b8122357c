"""The phase of each event — forward, backward, optimizer or none — as the Overview splits a step.

Moved here from the viewer so that the dashboard's Overview and the statistical diff
(:mod:`profiler.stats`) split a step by one definition.
"""
from __future__ import annotations

import numpy as np

from .analysis import depth_levels
from .records import Scope

__all__ = ["PHASES", "NO_PHASE", "FORWARD", "BACKWARD", "OPTIMIZER", "phase_of_events"]

PHASES = ("forward", "backward", "optimizer", "other")
NO_PHASE, FORWARD, BACKWARD, OPTIMIZER = -1, 0, 1, 2


def _user_scope_phase(strings: list[str]) -> np.ndarray:
    """Phase that a USER_SCOPE range of each string name opens (-1: none)."""
    out = np.full(len(strings), NO_PHASE, dtype=np.int8)
    for i, s in enumerate(strings):
        low = s.lower()
        if low == "forward" or low.startswith("forward#") or low.startswith("nn.module:"):
            out[i] = FORWARD
        elif low == "backward" or low.startswith("backward#") or low.startswith("autograd::engine"):
            out[i] = BACKWARD
        elif low.startswith("optimizer") or low.startswith("optim."):
            out[i] = OPTIMIZER
    return out


def phase_of_events(data) -> np.ndarray:
    """Phase of each event: 0 forward, 1 backward, 2 optimizer, -1 none (e.g. ProfilerStep).

    The innermost range that names a phase decides: a backward node (BACKWARD_FUNCTION) is
    backward; a ``forward``/``backward``/``Optimizer.step...`` user scope opens that phase; a
    forward op (FUNCTION) outside any phase is forward; anything else inherits its parent's.

    Args:
        data: a :class:`~profiler.data.ProfileData`.
    Returns:
        int8 array, one entry per event.
    """
    cols, a = data.event_columns, data.analysis
    n = data.n_events
    own = np.full(n, NO_PHASE, dtype=np.int8)
    scope = cols["scope"]
    user = scope == Scope.USER_SCOPE
    own[user] = _user_scope_phase(data.strings)[cols["name_id"][user]]
    own[scope == Scope.BACKWARD_FUNCTION] = BACKWARD
    phase = own.copy()
    is_fn = scope == Scope.FUNCTION
    for idx in depth_levels(a.depth):
        par = a.parent[idx]
        inherited = np.where(par >= 0, phase[np.maximum(par, 0)], NO_PHASE)
        mine = own[idx]
        # A forward op under no phase starts the forward phase; otherwise inherit.
        mine = np.where((mine < 0) & is_fn[idx] & (inherited < 0), FORWARD, mine)
        phase[idx] = np.where(mine >= 0, mine, inherited)
    return phase
