"""Compare page data: ``profiler.diff(a, b)`` as grid rows and columns.

The diff itself (matching ops by name, or forward ops by name and call site with their
backward cost) is the profiler's (issue 6), and so is the per-step test (issue 29: ratio of
medians, interval, adjusted p-value, verdict, :mod:`profiler.stats`); this module only shapes
their rows for the grids. The History page shows its run-to-run diffs with the same columns.
"""
from __future__ import annotations

import math

from gradtrace import profiler
from gradtrace.profiler import ProfileData
from gradtrace.profiler.columns import COLUMNS, STAT_COLUMNS
from gradtrace.profiler.format import format_interval

__all__ = ["VIEWS", "diff_table", "compare_tables", "metric_options", "stat_rows", "stat_columns"]

VIEWS = {"name": "op name", "forward_backward": "forward op + its backward"}


def metric_options(by: str, has_cuda: bool) -> dict[str, str]:
    """Metric attribute -> label for one diff view (CUDA metrics only when a profile has them)."""
    metrics = _metrics(by)
    return {m: label for m, label in metrics.items() if has_cuda or COLUMNS[m].clock != "cuda"}


def _metrics(by: str) -> dict[str, str]:
    from gradtrace.profiler.profile_diff import FORWARD_BACKWARD_METRICS, NAME_METRICS  # noqa: PLC0415

    return NAME_METRICS if by == "name" else FORWARD_BACKWARD_METRICS


def diff_table(a: ProfileData, b: ProfileData, by: str = "name", sort_by: str | None = None,
               merge_steps: bool = True) -> tuple[list[dict], list[dict], str]:
    """Rows (with an ``id``), grid columns, and the metric the rows are sorted by;
    ``ProfilerStep#N`` rows merged into ``ProfilerStep#*`` unless ``merge_steps`` is False."""
    return compare_tables(a, b, by, sort_by, merge_steps)[:3]


def compare_tables(a: ProfileData, b: ProfileData, by: str = "name", sort_by: str | None = None,
                   merge_steps: bool = True) -> tuple[list[dict], list[dict], str, list[dict], list[dict]]:
    """:func:`diff_table`'s rows, columns and sort metric, then the step/phase/module/kernel
    rows of the per-step test and their columns (both empty without ``ProfilerStep`` ranges)."""
    result = profiler.diff(a, b, by=by, sort_by=sort_by, merge_steps=merge_steps)
    comp_rows = stat_rows(result.components)
    rows = []
    for k, r in enumerate(result.rows()):
        clean = {key: (None if isinstance(v, float) and not math.isfinite(v) else v) for key, v in r.items()}
        clean["id"] = k
        for key in list(clean):
            if key.endswith("_rel") and clean[key] is not None:
                clean[key] = 100.0 * clean[key]  # shown as a percentage
        clean["ci"] = format_interval((clean.get("ci_low"), clean.get("ci_high")))
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
    if result.steps_a and result.steps_b:
        cols += [c for c in stat_columns() if c["field"] in ("ratio", "ci", "q_value", "verdict")]
    return rows, cols, result.sort_by, comp_rows, (stat_columns() if comp_rows else [])


def stat_rows(rows) -> list[dict]:
    """:class:`profiler.stats.RowStats` as grid rows: their fields, the interval as text, an ``id``."""
    out = []
    for k, r in enumerate(rows):
        d = r.to_dict()
        d.update(id=k, ci=format_interval(r.ci), share_percent=100.0 * r.share)
        out.append(d)
    return out


def stat_columns() -> list[dict]:
    """Grid columns of the per-step test (:data:`profiler.columns.STAT_COLUMNS`)."""
    fmt = {"time": "gtTime", "percent": "gtPct", "ratio": "gtNum", "p_value": "gtNum"}
    cols = []
    for spec in (COLUMNS[c] for c in STAT_COLUMNS):
        if spec.kind in fmt:
            cols.append(_num(spec.id, spec.header, fmt[spec.kind]))
        else:   # text, and the interval as its text
            cols.append({"field": spec.id, "headerName": spec.header, "minWidth": 110,
                         "flex": 2 if spec.id == "name" else 1, "tooltipField": spec.id})
    return cols


def _num(field: str, header: str, fmt: str, **kw) -> dict:
    col = {"field": field, "headerName": header, "type": "numericColumn", "filter": "agNumberColumnFilter",
           "valueFormatter": {"function": f"{fmt}(params.value)"}, "width": 125}
    col.update(kw)
    return col
