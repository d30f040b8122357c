"""Kineto's launch estimates (blocks per SM, warps per SM, est. achieved occupancy %),
recomputed by profiler/occupancy.py from each kernel's launch configuration and the trace's
device properties, against what Kineto wrote in real traces."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from gradtrace.profiler.occupancy import active_blocks_per_sm, launch_estimates

from . import kineto_samples as ks

# Real torch.profiler traces of A100s with Kineto's per-kernel launch estimates (KINETO_SAMPLES.md).
# The five-step original is checked when ../shared has it (the two kept here always are).
TRACES = [ks.GPU_1STEP, ks.ALEXNET] + ([ks.FIVE_STEPS] if ks.FIVE_STEPS.exists() else [])

A100 = {"computeMajor": 8, "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
        "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "warpSize": 32, "sharedMemPerBlock": 49152,
        "sharedMemPerMultiprocessor": 167936, "numSms": 108, "sharedMemPerBlockOptin": 166912}


def _kernels(path: Path):
    trace = json.load(gzip.open(path))
    props = {p["id"]: p for p in trace["deviceProperties"]}
    return props, [e["args"] for e in trace["traceEvents"] if e.get("cat") == "kernel"]


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_every_kernel_of_a_kineto_trace_gets_kinetos_figures(path):
    props, kernels = _kernels(path)
    assert kernels
    for device in sorted({k["device"] for k in kernels}):
        ks = [k for k in kernels if k["device"] == device]
        blocks, warps, occupancy = launch_estimates(
            props[device], np.array([k["grid"] for k in ks]), np.array([k["block"] for k in ks]),
            np.array([k["registers per thread"] for k in ks]), np.array([k["shared memory"] for k in ks]))
        np.testing.assert_allclose(blocks, [float(k["blocks per SM"]) for k in ks], rtol=1e-6)
        np.testing.assert_allclose(warps, [float(k["warps per SM"]) for k in ks], rtol=1e-6)
        np.testing.assert_array_equal(occupancy, [k["est. achieved occupancy %"] for k in ks])


@pytest.mark.parametrize("grid, block, regs, smem, kineto", [
    # What Kineto wrote for these A100 launches (gpu_1step.json.gz / alexnet_cuda_sync.json.gz):
    # 47 registers: 1536 per warp, 10 warps per sub-partition, 40 per SM -> 5 blocks of 8 warps.
    ((864, 1, 1), (256, 1, 1), 47, 0, (8.0, 64.0, 63)),
    # 240 registers x 256 threads and 144 KiB of shared memory (over the 48 KiB default per-block
    # limit, without opt-in in Kineto's calculation): no block fits, occupancy 0.
    ((256, 2, 1), (256, 1, 1), 240, 147456, (4.740741, 37.925926, 0)),
    # One block of 128 threads on 108 SMs: blocks per SM a fraction.
    ((1, 1, 1), (128, 1, 1), 48, 0, (0.009259259, 0.037037037, 0)),
])
def test_known_answers(grid, block, regs, smem, kineto):
    blocks, warps, occupancy = launch_estimates(A100, np.array([grid]), np.array([block]), np.array([regs]),
                                                np.array([smem]))
    assert blocks[0] == pytest.approx(kineto[0], rel=1e-6)
    assert warps[0] == pytest.approx(kineto[1], rel=1e-6)
    assert occupancy[0] == kineto[2]


def test_the_limits_by_hand():
    # Warp slots: 1024-thread blocks, 64 warps per SM -> 2 blocks.
    assert active_blocks_per_sm(A100, 1024, 16, 0) == 2
    # Block slots: 32-thread blocks, few registers -> the A100's 32 blocks per SM.
    assert active_blocks_per_sm(A100, 32, 16, 0) == 32
    # Shared memory: 40 KiB + 1 KiB reserved per block in a 164 KiB carveout -> 4 blocks.
    assert active_blocks_per_sm(A100, 128, 16, 40 * 1024) == 4
    # Registers over the per-thread limit: nothing runs.
    assert active_blocks_per_sm(A100, 128, 300, 0) == 0
    # A device the calculator does not know, or without properties: None / NaN, never a guess.
    assert active_blocks_per_sm({"computeMajor": 2, **{k: v for k, v in A100.items() if k != "computeMajor"}},
                                128, 16, 0) is None
    blocks, warps, occupancy = launch_estimates({}, np.array([[1, 1, 1]]), np.array([[128, 1, 1]]), np.array([16]),
                                                np.array([0]))
    assert np.isnan(blocks).all() and np.isnan(warps).all() and np.isnan(occupancy).all()
