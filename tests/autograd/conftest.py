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


@pytest.fixture(autouse=True)
def _restore_backend_switches():
    """A ported program sets ``torch.backends`` switches as the real one does (nanoGPT turns
    on TF32); they are process-wide, so each test starts from PyTorch's defaults again."""
    from gradtrace.autograd.backends import cuda, cudnn  # noqa: PLC0415

    saved = (dict(vars(cuda.matmul)), {k: getattr(cudnn, k) for k in ("enabled", "benchmark", "deterministic",
                                                                       "allow_tf32")}, dict(cuda._sdp))
    yield
    vars(cuda.matmul).update(saved[0])
    for k, v in saved[1].items():
        setattr(cudnn, k, v)
    cuda._sdp.update(saved[2])
