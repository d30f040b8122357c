"""The live ``profiler.profile`` answers every analysis of the saved profile, with its
arguments: it reaches its ProfileData through one door, so the two cannot drift (issue 30:
``prof.key_averages(group_by_module=True)`` raised TypeError)."""
import inspect

import pytest

import gradtrace.autograd as ag
from gradtrace import profiler
from gradtrace.autograd import nn
from gradtrace.profiler import ProfileData


def _public(cls) -> list[str]:
    return sorted(n for n in dir(cls) if not n.startswith("_"))


def _run():
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    with profiler.profile(activities=["cpu"], with_modules=True) as prof:
        model(ag.randn(2, 8)).sum().backward()
    return prof


def test_the_live_profile_answers_every_analysis_with_the_same_signature():
    prof = _run()
    data = prof.profile_data
    for name in _public(ProfileData):
        live, saved = getattr(prof, name), getattr(data, name)
        if callable(saved):
            assert inspect.signature(live) == inspect.signature(saved), name
        else:
            assert live is saved or live == saved, name
    assert set(_public(ProfileData)) <= set(dir(prof))


def test_the_readme_s_group_by_module_works_live():
    prof = _run()
    rows = prof.key_averages(group_by_module=True)
    assert rows.group_by_module and any(r.module for r in rows)
    assert prof.module_summary() and prof.table(row_limit=3)


def test_before_stop_an_analysis_says_there_is_no_profile_yet():
    prof = profiler.profile(activities=["cpu"])
    with pytest.raises(RuntimeError, match="no profile yet"):
        prof.key_averages()
    with pytest.raises(AttributeError):
        prof.no_such_analysis     # noqa: B018 - not a ProfileData attribute: a plain AttributeError
    assert not hasattr(prof, "_private")
