"""The launcher's environment for ``gradtrace run --nproc N``: each rank's BLAS threads."""
from __future__ import annotations

import pytest

from gradtrace.cli import launch

# (nproc, cores, several machines, environment) -> BLAS threads per rank (None: left alone)
BLAS_THREAD_CASES = [
    (1, 8, False, {}, None),                                # one rank keeps every core
    (2, 2, False, {}, 1),
    (3, 2, False, {}, 1),                                   # oversubscribed: still at least 1
    (2, 16, False, {}, 8),
    (3, 16, False, {}, 5),
    (4, 16, True, {}, 1),                                   # a hostfile: torchrun's one thread
    (2, 16, False, {"OMP_NUM_THREADS": "4"}, None),         # the user's count wins
    (2, 16, False, {"OPENBLAS_NUM_THREADS": "2"}, None),
    (2, 16, False, {"MKL_NUM_THREADS": "3"}, None),
    (2, 16, False, {"OMP_NUM_THREADS": " "}, 8),            # blank counts as unset
]


@pytest.mark.parametrize("nproc, cores, several, environ, expected", BLAS_THREAD_CASES)
def test_rank_blas_threads(nproc, cores, several, environ, expected):
    assert launch.rank_blas_threads(nproc, cores, several, environ) == expected


def test_mpirun_env_exports_the_thread_count_to_every_rank(monkeypatch):
    for name in launch.BLAS_THREAD_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(launch, "_usable_cores", lambda: 4)
    env, args, threads = launch.mpirun_env(2)
    assert (threads, env["OMP_NUM_THREADS"], args) == (2, "2", ["-x", "OMP_NUM_THREADS"])
    env, args, threads = launch.mpirun_env(2, several_machines=True)
    assert (threads, env["OMP_NUM_THREADS"], args) == (1, "1", ["-x", "OMP_NUM_THREADS"])


def test_mpirun_env_leaves_a_set_thread_count_alone(monkeypatch):
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "3")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    env, args, threads = launch.mpirun_env(2)
    assert threads is None and args == [] and "OMP_NUM_THREADS" not in env
    assert env["OPENBLAS_NUM_THREADS"] == "3"
