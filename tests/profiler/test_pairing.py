"""Forward/backward pairing (profiler.pairing): one implementation for the analysis and the
torch-trace importer's report, checked on hand-written columns."""
from pathlib import Path

import numpy as np

from gradtrace.profiler import Scope, load
from gradtrace.profiler.pairing import pair_backward
from gradtrace.profiler.torch_trace import forward_backward_pairing

F, B, U = int(Scope.FUNCTION), int(Scope.BACKWARD_FUNCTION), int(Scope.USER_SCOPE)


def _cols(rows):
    """rows: (scope, sequence_nr, thread_id, fwd_thread_id), in start order."""
    scope, seq, thread, fwd_thread = (np.array(c) for c in zip(*rows))
    return {"scope": scope.astype(np.int8), "sequence_nr": seq.astype(np.int64),
            "thread_id": thread.astype(np.int32), "fwd_thread_id": fwd_thread.astype(np.int32)}


def test_latest_starting_candidate_chosen_and_threads_kept_apart():
    cols = _cols([
        (U, -1, 1, 0),   # 0 a step: never paired
        (F, 5, 1, 0),    # 1 linear (reads seq 5)...
        (F, 5, 1, 0),    # 2 ...around t, which created the node: the latest-starting one
        (F, 5, 2, 0),    # 3 seq 5 on another thread: another key
        (F, 6, 1, 0),    # 4
        (B, 5, 3, 1),    # 5 -> 2 (of 1, 2)
        (B, 5, 3, 2),    # 6 -> 3
        (B, 6, 3, 1),    # 7 -> 4
        (B, 9, 3, 1),    # 8 no forward op: it ran before profiling started
        (B, -1, 3, 0),   # 9 no sequence number: not a pairing question
    ])
    p = pair_backward(cols)
    assert p.backward.tolist() == [5, 6, 7, 8]
    assert p.chosen.tolist() == [2, 3, 4, -1]
    assert p.n_candidates.tolist() == [2, 1, 1, 0]
    assert (p.matched_one, p.matched_several, p.matched_none) == (2, 1, 1)
    assert p.candidates(0).tolist() == [1, 2] and p.candidates(3).tolist() == []
    assert p.forward_event(10).tolist() == [-1, -1, -1, -1, -1, 2, 3, 4, -1, -1]


def test_no_forward_or_no_backward_ops():
    only_bwd = pair_backward(_cols([(B, 1, 2, 1), (B, 2, 2, 1)]))
    assert only_bwd.chosen.tolist() == [-1, -1] and only_bwd.matched_none == 2
    only_fwd = pair_backward(_cols([(F, 1, 1, 0)]))
    assert len(only_fwd.backward) == 0 and only_fwd.forward_event(1).tolist() == [-1]


def test_analysis_and_importer_report_agree():
    """The analysis' forward_event is the importer's chosen pairing (one implementation)."""
    data = load(Path(__file__).parent / "data" / "torch_mlp_cpu.json.gz")
    p = forward_backward_pairing(data)
    assert np.array_equal(data.analysis.forward_event, p.forward_event(data.n_events))
    assert data.analysis.unlinked_backward == p.matched_none
