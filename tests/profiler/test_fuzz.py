"""Seeded mutations of real profiles (flips, truncations, splices, garbage, edits of the header,
metadata, columns and strings that keep the container valid, zlib bombs): each is rejected
with a one-line ProfileFormatError or works in every consumer (analysis, table, JSON, Chrome
trace, stacks, re-save, the CLI, the dashboard's Overview and Operators pages)."""
from __future__ import annotations

import collections
import random
import traceback

import pytest

from . import needs_dashboard
from .fuzzing import exercise, mutate, seed_files

N_FILES = 2000
# The CLI and the dashboard pages are slower than the library calls; every 10th loaded file
# goes through them too (they share the library's code, which runs on every loaded file).
THROUGH_CLI_AND_VIEWER = 10


def test_mutated_profiles_are_rejected_cleanly_or_work(tmp_path):
    needs_dashboard()
    seeds = seed_files(tmp_path)
    rng = random.Random(15)
    outcomes: collections.Counter = collections.Counter()
    crashes = []
    for i in range(N_FILES):
        kind, blob = mutate(rng, seeds)
        path = tmp_path / f"mutant{i}.gtprof"
        path.write_bytes(blob)
        full = i % THROUGH_CLI_AND_VIEWER == 0
        try:
            outcomes[exercise(path, cli=full, viewer=full)] += 1
        except Exception as exc:  # noqa: BLE001 - every failure is a finding, listed below
            crashes.append(f"#{i} ({kind}): {type(exc).__name__}: {exc} "
                           f"at {traceback.extract_tb(exc.__traceback__)[-1]}")
        path.unlink()
    assert not crashes, f"{len(crashes)} of {N_FILES} files crashed:\n" + "\n".join(crashes[:20])
    # Both outcomes are exercised: the mutations are neither all fatal nor all harmless.
    assert outcomes["rejected"] > N_FILES // 4 and outcomes["loaded"] > N_FILES // 20, outcomes


@pytest.mark.parametrize("kind", ["bomb"])
def test_bombs_never_inflate_past_their_declared_size(tmp_path, kind):
    import tracemalloc

    from .fuzzing import is_mapped

    seeds = [s for s in seed_files(tmp_path) if not is_mapped(s)]   # zlib blobs: the version-4 layout
    rng = random.Random(3)
    tracemalloc.start()
    try:
        for i in range(20):
            from .fuzzing import MUTATORS

            path = tmp_path / f"bomb{i}.gtprof"
            path.write_bytes(MUTATORS[kind](rng, rng.choice(seeds)))
            assert exercise(path, cli=False, viewer=False) == "rejected"
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"a bomb made the loader allocate {peak / 2**20:.0f} MiB"
