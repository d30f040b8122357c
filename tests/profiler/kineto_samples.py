"""Where the tests find real torch.profiler (Kineto) traces.

Every trace a test needs is kept in ``tests/profiler/data`` (``data/KINETO_SAMPLES.md``: what
each is, and their licence), so no test skips for want of ``../shared/kineto-samples``. The one
sample too large to keep, ``gpu_5steps_rank0.json.gz`` (1.4 MB), is kept as its first step,
``gpu_1step.json.gz`` (``data/cut_trace.py``); where the shared folder is there, the tests that
take a list of traces add the five-step original to it (:func:`gpu_traces`).
"""
from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).parent / "data"
SHARED = Path(__file__).parents[2].parent / "shared" / "kineto-samples"

GPU_1STEP = DATA / "gpu_1step.json.gz"
AMD = DATA / "amd_mi250_minitoy_train.json.gz"
CUPTI = DATA / "cupti_profiler_trace.json.gz"
SIMPLE_ADD = DATA / "simple_add_trace.json.gz"
ALEXNET = DATA / "alexnet_cuda_sync.json.gz"
KEPT = (GPU_1STEP, AMD, CUPTI, SIMPLE_ADD, ALEXNET)

FIVE_STEPS = SHARED / "gpu_5steps_rank0.json.gz"


def gpu_traces() -> list[Path]:
    """The real GPU traces kept here, and the five-step original when ``../shared`` has it."""
    return list(KEPT) + ([FIVE_STEPS] if FIVE_STEPS.exists() else [])
