"""Profiles with fixed times for exact-text table tests."""
from gradtrace.profiler import Scope
from gradtrace.profiler.synthetic import from_events


def hand_made(scale: int = 1):
    """One step: linear(matmul) and relu forward, their backward nodes (times in ns * scale)."""
    s = scale
    events = [
        dict(name="ProfilerStep#1", start=0, end=10_000_000 * s, scope=Scope.USER_SCOPE),
        dict(name="linear", start=100_000 * s, end=4_100_000 * s, sequence_nr=0, shapes=[[64, 32], [32, 8]]),
        dict(name="matmul", start=200_000 * s, end=3_200_000 * s, shapes=[[64, 32], [32, 8]]),
        dict(name="relu", start=4_200_000 * s, end=4_700_000 * s, sequence_nr=1, shapes=[[64, 8]]),
        dict(name="ReluBackward0", start=5_000_000 * s, end=5_800_000 * s,
             scope=Scope.BACKWARD_FUNCTION, sequence_nr=1, fwd_thread_id=1),
        dict(name="AddmmBackward0", start=6_000_000 * s, end=8_500_000 * s,
             scope=Scope.BACKWARD_FUNCTION, sequence_nr=0, fwd_thread_id=1),
    ]
    return from_events(events, metadata={"record_shapes": True})
