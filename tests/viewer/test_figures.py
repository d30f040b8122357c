"""Figure builders are pure functions from plain data to plotly figures."""
from __future__ import annotations

import numpy as np
import pytest
import plotly.graph_objects as go

from gradtrace.viewer import figures
from gradtrace.viewer.timeline_figure import fitted_names

XSS = "<img src=x onerror=alert(1)>"


def test_esc():
    assert figures.esc(XSS) == "&lt;img src=x onerror=alert(1)&gt;"
    assert figures.esc('a & "b"') == "a &amp; &quot;b&quot;"


def test_phase_split_figure():
    fig = figures.phase_split_figure({"CPU": {"forward": 3_000_000, "backward": 1_000_000, "optimizer": 0,
                                               "other": 0}})
    assert isinstance(fig, go.Figure)
    assert [t.name for t in fig.data] == ["forward", "backward", "optimizer", "other"]
    assert fig.data[0].x == (3.0,) and fig.layout.barmode == "stack"
    assert fig.data[0].text == ("forward 75%",)


def _row(name, self_cpu, count=1):
    return {"name": name, "self_cpu_time_total": self_cpu, "self_cpu_time_total_percent": 10.0,
            "self_cuda_time_total": 0.0, "self_cuda_time_total_percent": 0.0,
            "count": count}


def test_top_ops_figure_escapes_names():
    fig = figures.top_ops_figure([_row(XSS, 2000.0), _row("mul", 1000.0)])
    bar = fig.data[0]
    assert bar.y == ("mul", figures.esc(XSS))  # largest at the top of a horizontal bar chart
    assert bar.x == (1.0, 2.0)
    assert all("<img" not in h for h in bar.hovertemplate)


def test_fwdbwd_figure_top_n():
    rows = [{"name": f"op{k}", "call_site": "", "cpu_time_total": 1000.0 * k, "backward_cpu_time_total": 500.0,
             "forward_backward_cpu_time_total": 1000.0 * k + 500}
            for k in range(30)]
    fig = figures.fwdbwd_figure(rows, top_n=5)
    assert [t.name for t in fig.data] == ["forward", "backward it caused"]
    assert fig.data[0].x == ("op29", "op28", "op27", "op26", "op25")
    assert fig.data[1].y == (0.5,) * 5


def test_downsample_keeps_peaks():
    t = np.arange(100_000, dtype=float)
    y = np.sin(t / 1000) * 100
    y[54_321] = 1e6
    tt, yy = figures.downsample_steps(t, y, max_points=2000)
    assert len(tt) <= 2000 and yy.max() == 1e6 and tt[np.argmax(yy)] == 54_321
    small_t, small_y = figures.downsample_steps(t[:10], y[:10])
    assert len(small_t) == 10


def test_memory_figures():
    fig = figures.memory_figure({"cpu": (np.array([0.0, 1.0]), np.array([0.0, 2.0 * (1 << 20)]))},
                                {"cpu": (1.0, 2 << 20, XSS)})
    assert [t.name for t in fig.data] == ["cpu", "peak cpu"]
    assert fig.data[1].text == ("peak 2.00 MB",) and "<img" not in fig.data[1].hovertemplate
    bars = figures.memory_by_op_figure([{"name": "mul", "allocated": 1 << 20, "freed": 0, "allocations": 1}])
    assert bars.data[0].x == (1.0,)


def test_diff_figure():
    rows = [{"name": "a", "d": 2000.0}, {"name": "b", "d": -5000.0}, {"name": "c", "d": 0.0}]
    fig = figures.diff_figure(rows, "d", "name", top_n=2)
    assert fig.data[0].y == ("a", "b") and fig.data[0].x == (2.0, -5.0)
    assert fig.data[0].marker.color == ("#dc2626", "#16a34a")



@pytest.mark.parametrize("name, duration_ms, span_ms, label", [
    ("gelu", 1.0, 10.0, "gelu"),                                   # 110 px: 14 characters
    ("NativeLayerNormBackward0", 1.0, 10.0, "NativeL…kward0"),     # cut in the middle to 14
    ("NativeLayerNormBackward0", 3.0, 10.0, "NativeLayerNormBackward0"),
    ("scaled_softmax", 0.4, 10.0, "sc…ax"),                        # 44 px: 5 characters
    ("scaled_softmax", 0.3, 10.0, ""),                             # 33 px: 3, nothing drawn
    ("ProfilerStep#1", 40.0, 10.0, "ProfilerStep#1"),              # wider than the view
])
def test_timeline_labels_fit_their_bars(name, duration_ms, span_ms, label):
    # The full name when it fits the bar at the label font (7 px a character, 8 px of
    # padding, on a 1100 px plot), shortened in the middle as the tables do when 4 or more
    # characters fit, else nothing; the hover keeps the full name.
    assert fitted_names([name], np.array([duration_ms]), span_ms) == [label]


def test_per_step_chart_of_many_steps_draws_at_most_max_step_bars():
    """Beyond MAX_STEP_BARS steps, consecutive steps share a bar: their mean, per phase."""
    steps = [{"step": f"ProfilerStep#{k}", "duration": 10_000_000, "forward": 2_000_000 + k, "backward": 3_000_000,
              "optimizer": 1_000_000, "other": 4_000_000 - k} for k in range(2_500)]
    fig = figures.step_phase_figure(steps)
    per_bar = -(-2_500 // figures.MAX_STEP_BARS)              # 13 steps a bar at 200 bars
    assert all(len(t.x) == -(-2_500 // per_bar) <= figures.MAX_STEP_BARS for t in fig.data)
    assert fig.data[0].x[0] == f"0–{per_bar - 1}" and fig.data[0].x[-1].endswith("–2499")
    assert fig.data[0].y[0] == pytest.approx((2_000_000 + (per_bar - 1) / 2) / 1e6)
    total = sum(t.y[5] for t in fig.data)
    assert total == pytest.approx(10.0)
    small = figures.step_phase_figure(steps[:3])
    assert list(small.data[0].x) == ["0", "1", "2"]
