"""The metric registry: one entry per per-op metric, from which the row fields, the sums, the
tables, the sort keys, the JSON and the dashboard grid are made (issue 30).

The proof that a metric is one place: a test adds an entry (a per-op maximum of self CPU time)
and finds it everywhere a metric shows, without touching any other site.
"""
import contextlib
import dataclasses
import io
import json

import numpy as np
import pytest

from . import needs_dashboard
from gradtrace.profiler import Scope, columns, load, metrics
from gradtrace.profiler.analysis import EventAnalysis
from gradtrace.profiler.metrics import METRICS, NEEDS, Metric
from gradtrace.profiler.synthetic import from_events

F, B, U = Scope.FUNCTION, Scope.BACKWARD_FUNCTION, Scope.USER_SCOPE

# Not a PyTorch column: the longest single call's self time, aggregated by max.
LONGEST = Metric("max_self_cpu_time", "Self CPU max", "time", clock="cpu", source="self_cpu_ns",
                 aggregate="max")


def _profile():
    return from_events([
        {"name": "linear", "start": 0, "end": 3_000, "sequence_nr": 0},
        {"name": "relu", "start": 4_000, "end": 5_000, "sequence_nr": 1},
        {"name": "linear", "start": 6_000, "end": 13_000, "sequence_nr": 2},
        {"name": "ReluBackward0", "start": 14_000, "end": 15_000, "scope": B, "sequence_nr": 1,
         "fwd_thread_id": 1},
    ])


@pytest.fixture
def longest(monkeypatch):
    """The registry with LONGEST appended: the only change a new metric makes."""
    monkeypatch.setattr(metrics, "METRICS", METRICS + (LONGEST,))
    return LONGEST


def _cli(argv, width=200):
    from gradtrace.cli.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.MonkeyPatch.context() as mp:
        mp.setenv("COLUMNS", str(width))
        assert main(argv) == 0
    return out.getvalue()


def test_a_new_metric_is_one_entry(longest, tmp_path):
    needs_dashboard()
    data = _profile()
    # Rows and events carry it, aggregated as the entry says (max), in microseconds.
    rows = {r.key: r for r in data.key_averages()}
    assert rows["linear"].max_self_cpu_time == 7.0
    assert rows["linear"].to_dict()["max_self_cpu_time"] == 7.0
    assert data.total_average().max_self_cpu_time == 7.0
    first = data.events()[0]
    assert first.max_self_cpu_time == 3.0 and first.to_dict()["max_self_cpu_time"] == 3.0
    # The Python table: its column, and sort_by.
    table = data.key_averages().table(sort_by="max_self_cpu_time")
    assert "Self CPU max" in table
    assert table.index("linear") < table.index("relu")
    # The column spec, with the clock the entry gives (not guessed from the name).
    spec = columns.COLUMNS["max_self_cpu_time"]
    assert (spec.header, spec.kind, spec.clock) == ("Self CPU max", "time", "cpu")
    assert "max_self_cpu_time" in columns.OPERATOR_COLUMNS
    # A saved profile keeps it in its stored tables and reads it back.
    path = tmp_path / "p.gtprof"
    data.save(path)
    loaded = load(path)
    assert loaded._stored_summaries, "the stored tables should answer"
    assert {r.key: r for r in loaded.key_averages()}["linear"].max_self_cpu_time == 7.0
    # The CLI: table, --sort, --json and the --sort help.
    text = _cli(["table", str(path), "--sort", "max_self_cpu_time"])
    assert "Self CPU max" in text
    rows = json.loads(_cli(["table", str(path), "--json"]))
    assert {r["name"]: r["max_self_cpu_time"] for r in rows}["linear"] == 7.0
    from gradtrace.cli.main import build_parser

    assert "max_self_cpu_time" in build_parser().format_help() + _table_help()
    # The dashboard's operator grid.
    from gradtrace.viewer import operators_page as pages
    from gradtrace.viewer.model import ProfileView

    grid = pages.operator_columns(ProfileView(loaded), "name", "both", "self")
    assert {"field": "max_self_cpu_time", "headerName": "Self CPU max"}.items() <= next(
        c for c in grid if c["field"] == "max_self_cpu_time").items()
    assert next(c for c in grid if c["field"] == "max_self_cpu_time")["hide"] is False
    cuda_only = pages.operator_columns(ProfileView(loaded), "name", "cuda", "self")
    assert next(c for c in cuda_only if c["field"] == "max_self_cpu_time")["hide"] is True


def _table_help() -> str:
    from gradtrace.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sub.choices["table"].format_help()


def test_a_file_written_before_a_metric_existed_still_loads(tmp_path):
    data = _profile()
    path = tmp_path / "old.gtprof"
    data.save(path)        # the registry without LONGEST
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(metrics, "METRICS", METRICS + (LONGEST,))
        loaded = load(path)
        # Its stored tables lack the new field: the rows are computed from the stored analysis.
        assert not loaded._stored_summaries
        assert {r.key: r for r in loaded.key_averages()}["linear"].max_self_cpu_time == 7.0
        assert loaded.table() == data.table()


def test_stored_tables_without_field_names_are_version_5_tables(tmp_path):
    """Files written before the tables named their fields hold FIELD_ORDER_V5."""
    from gradtrace.profiler import stored

    data = _profile()
    path = tmp_path / "p.gtprof"
    entry = stored.write_analysis

    def unnamed(d, writer, **kwargs):
        e = entry(d, writer, **kwargs)
        for s in e["summaries"].values():
            assert s.pop("fields") == list(metrics.FIELD_ORDER_V5)
        e.pop("forward_backward_fields")
        return e

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(stored, "write_analysis", unnamed)     # the writer calls stored.write_analysis
        data.save(path)
    loaded = load(path)
    assert loaded._stored_summaries and loaded._stored_forward_backward is not None
    assert loaded.table() == data.table()
    assert loaded.forward_backward_summary().to_dicts() == data.forward_backward_summary().to_dicts()


def test_every_metric_names_a_known_clock_need_and_source():
    sources = {f.name for f in dataclasses.fields(EventAnalysis)}
    for m in METRICS:
        assert m.clock in ("cpu", "cuda", None), m.name
        assert m.needs == "" or m.needs in NEEDS, m.name
        assert m.source is None or m.source in sources, m.name
        assert (m.aggregate in ("count", "share")) == (m.source is None), m.name
        if m.aggregate == "share":
            assert metrics.metric(m.of).kind == "time" and metrics.metric(m.whole).kind == "time"
    # Every need a column or a sort check names is one the registry describes.
    assert {c.needs for c in columns.COLUMNS.values() if c.id in metrics.sort_keys()} <= set(NEEDS) | {""}


def test_the_clock_is_the_entry_s_not_the_name_s(monkeypatch):
    """A CUDA metric whose name says nothing of CUDA is still hidden from a CPU-only view,
    shown only with device time, and refused as a sort key without it."""
    from gradtrace.cli.commands import check_sort_data
    from gradtrace.cli.errors import CLIError

    gpu = Metric("launches", "Launches", "count", clock="cuda", needs="cuda", source="self_cuda_ns",
                 aggregate="max")
    monkeypatch.setattr(metrics, "METRICS", METRICS + (gpu,))
    assert columns.COLUMNS["launches"].clock == "cuda"
    cpu_only = _profile()
    assert "launches" not in [c.id for c in cpu_only.key_averages().columns()]
    with pytest.raises(CLIError, match="no GPU \\(CUDA\\) times"):
        check_sort_data(cpu_only, "launches")


def test_sort_keys_are_the_sortable_metrics_and_their_device_spellings():
    keys = metrics.sort_keys()
    assert keys["self_device_time_total"] == "self_cuda_time_total"
    assert keys["device_memory_usage"] == "cuda_memory_usage"
    assert set(keys.values()) == {m.name for m in METRICS if m.sortable}
    assert not any(k.endswith("_percent") for k in keys)


def test_percentages_have_one_total():
    """The 100% of a share column is the same in KeyAverages.totals and the plain table."""
    data = _profile()
    ka = data.key_averages()
    assert ka.totals == metrics.percent_totals(ka.self_cpu_time_total, ka.self_cuda_time_total)
    shares = [float(line.split()[1].rstrip("%")) for line in ka.table().splitlines()
              if line.split() and line.split()[0] in ("linear", "relu", "ReluBackward0")]
    assert sum(shares) == pytest.approx(100.0, abs=0.05)


def test_max_is_per_group_and_zero_for_a_group_without_events():
    group = np.array([0, 0, 2])
    assert metrics.group_reduce("max", group, 3, np.array([5, 9, 4])).tolist() == [9, 0, 4]
