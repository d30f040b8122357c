"""Kernel launch estimates as Kineto writes them: blocks per SM, warps per SM and the
estimated achieved occupancy of a kernel, from its launch configuration and the device's
properties.

torch.profiler's traces carry these three figures in each kernel's args (``blocks per SM``,
``warps per SM``, ``est. achieved occupancy %``); gradtrace's own CUDA profiles get the
kernels' launch configurations from CUPTI (:mod:`.cupti_activity`) and compute the same
figures here, so that the GPU analyses (achieved occupancy, SM efficiency) read them from
the gpu table the same way for both.

Kineto's definitions (libkineto ``DeviceProperties.cpp``, ``CudaDeviceProperties.cpp``):

* blocks per SM = grid size (x·y·z) / number of SMs (a float: a grid smaller than the device
  gives a fraction);
* warps per SM = blocks per SM × threads per block / 32;
* occupancy = min(blocks per SM, the occupancy calculator's active blocks per SM) × threads
  per block / max threads per SM; the figure is ``int(0.5 + 100 × occupancy)``. The
  calculator is CUDA's ``cuda_occupancy.h`` ``cudaOccMaxActiveBlocksPerMultiprocessor`` with
  Kineto's arguments: the registers per thread and shared memory the launch reports, the
  default shared-memory limit per block (no opt-in) and the default carveout.

The calculator's active blocks per SM is the least of four limits (:func:`active_blocks_per_sm`):
warp slots, the hardware's block slots, registers (allocated per warp in units of 256, in
each of the SM's sub-partitions) and shared memory (allocated per block in units of the
architecture's granularity, plus the driver's reserved bytes per block from Ampere on,
within the carveout the block needs). Per-architecture constants below follow the
calculator's tables; a device it does not know gives NaN, never a guess.
"""
from __future__ import annotations

import numpy as np

__all__ = ["active_blocks_per_sm", "launch_estimates", "THREADS_PER_WARP"]

THREADS_PER_WARP = 32           # Kineto's constant for warps per SM
_REG_GRANULARITY = 256          # registers are allocated per warp in units of 256 (all archs)
_KB = 1024
# Shared-memory carveouts (bytes per SM) an SM can be configured with, by (major, minor) or
# major: the calculator rounds the shared memory a block needs up to the next of these.
_CARVEOUTS = {
    (7, 5): (32, 64),
    7: (0, 8, 16, 32, 64, 96),
    (8, 0): (0, 8, 16, 32, 64, 100, 132, 164),
    (8, 7): (0, 8, 16, 32, 64, 100, 132, 164),
    8: (0, 8, 16, 32, 64, 100),
    9: (0, 8, 16, 32, 64, 100, 132, 164, 196, 228),
    10: (0, 8, 16, 32, 64, 100, 132, 164, 196, 228),
    12: (0, 8, 16, 32, 64, 100),
}
# Hardware block slots per SM where the device does not report maxBlocksPerMultiProcessor.
_MAX_BLOCKS = {3: 16, 5: 32, 6: 32, (7, 5): 16, 7: 32, (8, 0): 32, (8, 9): 24, 8: 16, 9: 32, 10: 32, 12: 24}


def _by_arch(table: dict, major: int, minor: int):
    return table.get((major, minor), table.get(major))


def _shared_granularity(major: int) -> int | None:
    return 256 if major in (3, 5, 6, 7) else 128 if major >= 8 else None


def _max_registers_per_thread(major: int) -> int:
    return 255 if major in (3, 5, 6) else 256


def _sub_partitions(major: int, minor: int) -> int:
    return 2 if (major, minor) == (6, 0) else 4


def _prop(props: dict, *names):
    for name in names:
        value = props.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return int(value)
    return None


def _carveout(major: int, minor: int, size: int) -> int | None:
    """The smallest carveout of the architecture holding ``size`` bytes (None: too large)."""
    sizes = _by_arch(_CARVEOUTS, major, minor)
    if sizes is None:                       # before Volta: the SM's whole shared memory
        return None
    for kb in sizes:
        if size <= kb * _KB:
            return kb * _KB
    return None


def active_blocks_per_sm(props: dict, threads_per_block: int, registers_per_thread: int,
                         shared_memory: int) -> int | None:
    """Blocks of one launch that fit on an SM at once: CUDA's occupancy calculator
    (``cudaOccMaxActiveBlocksPerMultiprocessor``) with the arguments Kineto gives it.

    Args:
        props: the device's properties with Kineto's ``deviceProperties`` names
            (``computeMajor``, ``computeMinor``, ``maxThreadsPerBlock``,
            ``maxThreadsPerMultiprocessor``, ``regsPerBlock``, ``regsPerMultiprocessor``,
            ``warpSize``, ``sharedMemPerBlock``, ``sharedMemPerMultiprocessor``; optionally
            ``maxBlocksPerMultiProcessor`` and ``reservedSharedMemPerBlock``).
        threads_per_block: block x·y·z.
        registers_per_thread: as the launch reports it.
        shared_memory: static + dynamic shared memory per block, bytes.
    Returns:
        The active blocks per SM (0: the launch cannot run with these limits), or None when
        the properties do not describe a device the calculator knows.
    """
    major, minor = _prop(props, "computeMajor", "major"), props.get("computeMinor", props.get("minor", 0))
    if major is None or not isinstance(minor, int):
        return None
    warp = _prop(props, "warpSize") or 32
    max_threads_block = _prop(props, "maxThreadsPerBlock")
    max_threads_sm = _prop(props, "maxThreadsPerMultiprocessor", "maxThreadsPerMultiProcessor")
    regs_block = _prop(props, "regsPerBlock")
    regs_sm = _prop(props, "regsPerMultiprocessor")
    smem_block = _prop(props, "sharedMemPerBlock")
    smem_sm = _prop(props, "sharedMemPerMultiprocessor")
    granularity = _shared_granularity(major)
    max_blocks = _prop(props, "maxBlocksPerMultiProcessor", "maxBlocksPerMultiprocessor") \
        or _by_arch(_MAX_BLOCKS, major, minor)
    if None in (max_threads_block, max_threads_sm, regs_block, regs_sm, smem_block, smem_sm, granularity,
                max_blocks) or threads_per_block <= 0:
        return None
    warps_per_block = -(-threads_per_block // warp)
    # Warp slots.
    limit_warps = 0 if threads_per_block > max_threads_block else (max_threads_sm // warp) // warps_per_block
    # Registers: allocated per warp in each sub-partition; the per-block check assumes the
    # block's warps are spread over all sub-partitions at once (the hardware's check).
    if registers_per_thread <= 0:
        limit_regs = max_blocks
    else:
        regs_per_warp = -(-registers_per_thread * warp // _REG_GRANULARITY) * _REG_GRANULARITY
        parts = _sub_partitions(major, minor)
        assumed = regs_per_warp * (-(-warps_per_block // parts) * parts)
        if regs_block < assumed or regs_block < regs_per_warp * warps_per_block \
                or registers_per_thread > _max_registers_per_thread(major):
            limit_regs = 0
        else:
            limit_regs = ((regs_sm // parts) // regs_per_warp) * parts // warps_per_block
    # Shared memory: the driver reserves bytes per block from Ampere on (1 KiB where the
    # device does not say); the default per-block limit (no opt-in) applies.
    reserved = props.get("reservedSharedMemPerBlock")
    if not isinstance(reserved, int):
        reserved = 1024 if major >= 8 else 0
    allocated = -(-(max(shared_memory, 0) + reserved) // granularity) * granularity
    if allocated > smem_block + (reserved if major >= 8 else 0):
        limit_smem = 0
    elif allocated == 0:
        limit_smem = max_blocks
    else:
        # The default carveout is the SM's whole shared memory (rounded to a carveout size).
        preference = _carveout(major, minor, smem_sm) if major >= 7 else smem_sm
        if preference is None:
            return None
        per_sm = preference if preference >= allocated else _carveout(major, minor, allocated)
        if per_sm is None:
            return None
        limit_smem = per_sm // allocated
    return int(min(limit_warps, max_blocks, limit_regs, limit_smem))


def launch_estimates(props: dict | None, grid: np.ndarray, block: np.ndarray, registers_per_thread: np.ndarray,
                     shared_memory: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Kineto's ``blocks per SM``, ``warps per SM`` and ``est. achieved occupancy %`` of each
    kernel launch (see the module docstring).

    Args:
        props: the device's properties (:func:`active_blocks_per_sm`); None: unknown.
        grid, block: (n, 3) launch dimensions.
        registers_per_thread: (n,) registers per thread.
        shared_memory: (n,) static + dynamic shared memory per block, bytes.
    Returns:
        float64 arrays (blocks per SM, warps per SM, occupancy %), NaN where the device's
        properties do not give them (no SM count; a device the calculator does not know).
    """
    grid = np.asarray(grid, dtype=np.float64).reshape(-1, 3)
    block = np.asarray(block, dtype=np.int64).reshape(-1, 3)
    n = len(grid)
    blocks = np.full(n, np.nan)
    warps = np.full(n, np.nan)
    occupancy = np.full(n, np.nan)
    props = props or {}
    sms = _prop(props, "numSms", "multiProcessorCount")
    if not n or sms is None:
        return blocks, warps, occupancy
    threads = block.prod(axis=1)
    # Kineto computes these in float (32-bit) arithmetic; so does the stored column.
    blocks = (grid.prod(axis=1) / sms).astype(np.float32).astype(np.float64)
    warps = (blocks * threads / THREADS_PER_WARP).astype(np.float32).astype(np.float64)
    max_threads_sm = _prop(props, "maxThreadsPerMultiprocessor", "maxThreadsPerMultiProcessor")
    keys = np.stack([threads, np.asarray(registers_per_thread, np.int64).reshape(-1),
                     np.asarray(shared_memory, np.int64).reshape(-1)], axis=1)
    distinct, which = np.unique(keys, axis=0, return_inverse=True)
    active = np.array([np.nan if (a := active_blocks_per_sm(props, *map(int, k))) is None else a
                       for k in distinct], dtype=np.float64)[which.reshape(-1)]
    if max_threads_sm is None:
        return blocks, warps, occupancy
    achieved = np.minimum(blocks, active) * threads / max_threads_sm
    occupancy = np.where(np.isnan(achieved), np.nan, np.floor(0.5 + achieved * 100.0))
    return blocks, warps, occupancy
