"""Compare page data: ``profiler.diff(a, b)`` as grid rows and columns.

The diff itself (matching ops by name, or forward ops by name and call site with their
backward cost) is the profiler's (issue 6); this module only shapes its rows for the grid.
"""
from __future__ import annotations

import math

from gradtrace import profiler
from gradtrace.profiler import ProfileData
from gradtrace.profiler.columns import COLUMNS

__all__ = ["VIEWS", "diff_table", "metric_options"]

VIEWS = {"name": "op name", "forward_backward": "forward op + its backward"}


def metric_options(by: str, has_cuda: bool) -> dict[str, str]:
    """Metric attribute -> label for one diff view (CUDA metrics only when a profile has them)."""
    metrics = _metrics(by)
    return {m: label for m, label in metrics.items() if has_cuda or "cuda" not in m}


def _metrics(by: str) -> dict[str, str]:
    from gradtrace.profiler.diff import FORWARD_BACKWARD_METRICS, NAME_METRICS  # noqa: PLC0415

    return NAME_METRICS if by == "name" else FORWARD_BACKWARD_METRICS


def diff_table(a: ProfileData, b: ProfileData, by: str = "name", sort_by: str | None = None,
               merge_steps: bool = True) -> tuple[list[dict], list[dict], str]:
    """Rows (with an ``id``), grid columns, and the metric the rows are sorted by;
    ``ProfilerStep#N`` rows merged into ``ProfilerStep#*`` unless ``merge_steps`` is False."""
    result = profiler.diff(a, b, by=by, sort_by=sort_by, merge_steps=merge_steps)
    rows = []
    for k, r in enumerate(result.rows()):
        clean = {key: (None if isinstance(v, float) and not math.isfinite(v) else v) for key, v in r.items()}
        clean["id"] = k
        for key in list(clean):
            if key.endswith("_rel") and clean[key] is not None:
                clean[key] = 100.0 * clean[key]  # shown as a percentage
        rows.append(clean)
    cols = [{"field": "name", "headerName": "Name", "pinned": "left", "minWidth": 180, "flex": 2,
             "tooltipField": "name"}]
    if by == "forward_backward":
        cols.append({"field": "call_site", "headerName": COLUMNS["call_site"].header, "minWidth": 200, "flex": 2,
                     "tooltipField": "call_site"})
    calls = COLUMNS["count"].header
    cols += [{"field": "status", "headerName": "Status", "width": 100},
             _num("count_a", f"{calls} A", "gtInt"), _num("count_b", f"{calls} B", "gtInt"),
             _num("count_delta", f"{calls} Δ", "gtInt")]
    for metric, label in metric_options(by, result.has_cuda).items():
        shown = metric == result.sort_by
        cols += [_num(f"{metric}_a", f"{label} A", "gtTime", hide=not shown),
                 _num(f"{metric}_b", f"{label} B", "gtTime", hide=not shown),
                 _num(f"{metric}_delta", f"{label} Δ", "gtTime", cellClass="gt-sorted" if shown else ""),
                 _num(f"{metric}_rel", f"{label} Δ%", "gtPct", hide=not shown)]
    return rows, cols, result.sort_by


def _num(field: str, header: str, fmt: str, **kw) -> dict:
    col = {"field": field, "headerName": header, "type": "numericColumn", "filter": "agNumberColumnFilter",
           "valueFormatter": {"function": f"{fmt}(params.value)"}, "width": 125}
    col.update(kw)
    return col
