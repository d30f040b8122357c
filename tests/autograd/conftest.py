"""Fixtures shared by the engine's tests."""
import pytest

from gradtrace.autograd import record_function as rf


@pytest.fixture
def records_made(monkeypatch) -> list:
    """A list that grows by one for every RecordFunction object the engine makes."""
    made = []

    class Counting(rf.RecordFunction):
        __slots__ = ()

        def __new__(cls):
            made.append(1)
            return super().__new__(cls)

    monkeypatch.setattr(rf, "RecordFunction", Counting)
    return made
