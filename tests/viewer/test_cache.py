"""The analysis cache: once per profile, even under concurrent requests; errors not kept."""
from __future__ import annotations

import threading

import pytest

from gradtrace import viewer
from gradtrace.profiler import synthetic
from gradtrace.viewer.app import MAIN, warm_up
from gradtrace.viewer.cache import AnalysisCache
from gradtrace.viewer.model import ProfileView

THREADS = 16


def _together(n: int, work) -> list:
    """Run ``work()`` in ``n`` threads released at once; their results in thread order."""
    barrier = threading.Barrier(n)
    results = [None] * n

    def run(k):
        barrier.wait()
        results[k] = work()

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_sixteen_requests_compute_the_operator_table_once():
    data = synthetic.training_profile(20_000)
    view = ProfileView(data)
    calls = []
    original = data.key_averages

    def counting(**kwargs):
        calls.append(kwargs)
        return original(**kwargs)

    data.key_averages = counting
    rows = _together(THREADS, lambda: view.rows("name"))
    assert len(calls) == 1
    assert all(r is rows[0] for r in rows) and len(rows[0]) > 0


def test_one_key_waits_for_the_first_computation():
    cache = AnalysisCache()
    started, release = threading.Event(), threading.Event()
    builds = []

    def slow():
        builds.append(1)
        started.set()
        release.wait()
        return "value"

    first = threading.Thread(target=lambda: cache.get("k", slow))
    first.start()
    started.wait()
    others = []
    waiters = [threading.Thread(target=lambda: others.append(cache.get("k", slow))) for _ in range(THREADS - 1)]
    for t in waiters:
        t.start()
    assert cache.get("other", lambda: 1) == 1       # another key is not held up
    release.set()
    first.join()
    for t in waiters:
        t.join()
    assert builds == [1] and others == ["value"] * (THREADS - 1)


def test_an_error_is_not_cached():
    cache = AnalysisCache()
    attempts = []

    def flaky():
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("first try fails")
        return 42

    with pytest.raises(RuntimeError):
        cache.get("k", flaky)
    assert "k" not in cache
    assert cache.get("k", flaky) == 42 and cache.get("k", flaky) == 42 and len(attempts) == 2


def test_warm_up_computes_the_overview_operators_and_timeline():
    app = viewer.create_app(synthetic.training_profile(20_000))
    warm_up(app).join()
    cache = app.gradtrace_registry.get(MAIN).cache
    for key in ("summary", ("rows", "name", False), ("rows", "shape", False), "timeline_index", "step_phases"):
        assert key in cache, key
    # One profile's Ranks page (a table of its own steps) waits until someone opens it.
    assert "rank_summary" not in cache and ("layout", "/ranks") not in cache


def test_a_dropped_upload_takes_its_analyses_with_it():
    import gc
    import weakref

    from gradtrace.viewer.registry import Registry

    registry = Registry(capacity=1)
    first = ProfileView(synthetic.training_profile(2_000))
    first.rows("name")
    gone = weakref.ref(first.cache)
    key = registry.add(first)
    del first
    registry.add(ProfileView(synthetic.from_events([])))
    gc.collect()
    assert registry.get(key) is None and gone() is None
