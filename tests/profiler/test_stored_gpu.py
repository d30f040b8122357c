"""The GPU summary a version-5 file keeps (``analysis.gpu_summary``): equal to the recomputed one,
used instead of recomputing it, recomputed for files without it (version 4, version 5 written
before it, another summary version), and refused in one line when it is malformed."""
from __future__ import annotations

import json
import re

import pytest

from gradtrace import profiler
from gradtrace.profiler import ProfileFormatError, gpu
from gradtrace.profiler.synthetic_trace import write_torch_trace

from .fuzzing import edited_mapped, split_mapped


@pytest.fixture(scope="module")
def trace_profile(tmp_path_factory):
    """A torch trace of a few steps (kernels, memcpys, runtime calls), imported."""
    path = tmp_path_factory.mktemp("trace") / "t.json"
    write_torch_trace(path, 6_000)
    return profiler.load(path)


def _fresh(data) -> dict:
    """The summary computed from the columns, as JSON gives it back."""
    return json.loads(json.dumps(data.gpu_summary()))



def _replace_blob(footer, body, text: bytes):
    """Overwrite the stored summary's bytes with ``text`` (padded with JSON whitespace)."""
    info = footer["analysis"]["gpu_summary"]
    assert len(text) <= info["length"]
    body[info["offset"]:info["offset"] + info["length"]] = text.ljust(info["length"])


def test_stored_summary_equals_the_recomputed_one_and_is_used(tmp_path, trace_profile, monkeypatch):
    expected = _fresh(trace_profile)
    assert gpu.has_shape(expected, gpu.SUMMARY_SHAPE)
    assert len(expected["steps"]) > 3 and expected["devices"]
    path = tmp_path / "p.gtprof"
    trace_profile.save(path)
    assert "gpu_summary" in split_mapped(path.read_bytes())[0]["analysis"]

    def refuse(*args, **kwargs):
        raise AssertionError("the GPU summary was recomputed")

    monkeypatch.setattr(gpu, "gpu_summary", refuse)
    for defer in (False, True):
        assert profiler.load(path, defer_checks=defer).gpu_summary() == expected


def test_a_profile_without_device_time_stores_none(tmp_path):
    from gradtrace.profiler.synthetic import training_profile

    path = tmp_path / "p.gtprof"
    training_profile(2_000).save(path)
    assert "gpu_summary" not in split_mapped(path.read_bytes())[0]["analysis"]


@pytest.mark.parametrize("how", ["version 4", "version 5 without it", "another summary version"])
def test_files_without_a_usable_summary_compute_it(tmp_path, trace_profile, how):
    expected = _fresh(trace_profile)
    if how == "version 4":
        path = tmp_path / "p.gtprof"
        trace_profile.save(path, version=4)
    elif how == "version 5 without it":
        path = edited_mapped(tmp_path, trace_profile, lambda f, b: f["analysis"].pop("gpu_summary"))
    else:
        path = edited_mapped(tmp_path, trace_profile,
                       lambda f, b: f["analysis"]["gpu_summary"].update(version=gpu.SUMMARY_VERSION + 1))
    back = profiler.load(path)
    assert back._stored_gpu_summary is None
    assert _fresh(back) == expected


CASES = [
    ("not JSON", lambda f, b: _replace_blob(f, b, b"{\"steps\": [1, "), r"unreadable GPU summary"),
    ("deep JSON", lambda f, b: _replace_blob(f, b, b"[" * 5_000), r"unreadable GPU summary"),
    ("wrong shape", lambda f, b: _replace_blob(f, b, b'{"steps": [], "devices": {}}'), r"malformed GPU summary"),
    ("a figure not a number", lambda f, b: _replace_blob(
        f, b, json.dumps(_with(f, b, ("steps_us",), "x"), separators=(",", ":")).encode()), r"malformed GPU summary"),
    ("an infinite figure", lambda f, b: _replace_blob(
        f, b, json.dumps(_with(f, b, ("steps_us",), float("inf")), separators=(",", ":")).encode()), r"malformed GPU summary"),
    ("a huge integer", lambda f, b: _replace_blob(
        f, b, json.dumps(_with(f, b, ("steps_us",), 10**400), separators=(",", ":")).encode()), r"malformed GPU summary"),
    ("a step figure not a number", lambda f, b: _replace_blob(
        f, b, json.dumps(_with(f, b, ("steps", 2, "step_us"), True), separators=(",", ":")).encode()),
     r"malformed GPU summary"),
    ("entry not an object", lambda f, b: f["analysis"].update(gpu_summary=[1]), r"malformed GPU summary entry"),
    ("version not a number", lambda f, b: f["analysis"]["gpu_summary"].update(version="1"),
     r"malformed GPU summary entry"),
    ("offset beyond the file", lambda f, b: f["analysis"]["gpu_summary"].update(offset=1 << 40), r"beyond the end"),
    ("length lie", lambda f, b: f["analysis"]["gpu_summary"].update(raw_length=1), r"raw length unlike"),
]


def _with(footer, body, keys, value) -> dict:
    info = footer["analysis"]["gpu_summary"]
    summary = json.loads(bytes(body[info["offset"]:info["offset"] + info["length"]]))
    target = summary
    for k in keys[:-1]:
        target = target[k]
    target[keys[-1]] = value
    return summary


@pytest.mark.parametrize("what, edit, problem", CASES, ids=[c[0] for c in CASES])
def test_hostile_summaries_are_one_line_errors(tmp_path, trace_profile, what, edit, problem):
    path = edited_mapped(tmp_path, trace_profile, edit)
    # Checked on open, or (the CLI's defer_checks) on the first use of the summary.
    for load, use in ((lambda: profiler.load(path), lambda d: None),
                      (lambda: profiler.load(path, defer_checks=True), lambda d: d.gpu_summary())):
        with pytest.raises(ProfileFormatError) as info:
            use(load())
        message = str(info.value)
        assert message.startswith(f"{path}: ") and "\n" not in message
        assert re.search(problem, message), message


@pytest.mark.parametrize("bad", ["1", float("inf"), 10 ** 400, None, True])
def test_shape_check_of_columns_finds_one_bad_value_among_many(bad):
    """has_shape checks a summary's per-step objects column by column (objects of any keys,
    alternatives, nulls); one wrong value among thousands still fails it."""
    by_kind = [{"kernel": float(k), "memcpy": 1} for k in range(3000)]
    figures = [{"x": None if k % 2 else float(k)} for k in range(3000)]
    shape = [{"by_kind": ({gpu._STR: gpu._NUM},), "figures": (None, {"x": gpu._OPT})}]
    rows = [{"by_kind": b, "figures": f} for b, f in zip(by_kind, figures)]
    assert gpu.has_shape(rows, shape)
    rows[1234]["by_kind"]["memcpy"] = bad
    assert not gpu.has_shape(rows, shape)
    rows[1234]["by_kind"]["memcpy"] = 2
    rows[2000]["figures"] = {"x": "slow"}
    assert not gpu.has_shape(rows, shape)
    rows[2000]["figures"] = None
    assert gpu.has_shape(rows, shape)
