"""Compare page data: the diff of two profiles as grid rows.

``profiler.diff(a, b)`` (issue 6) is the source of truth once it exists; until then, and for
profiles it cannot handle, :func:`fallback_diff` joins the two ``key_averages`` by op name.
"""
from __future__ import annotations

import math

from profiler import ProfileData

from .model import group_rows

__all__ = ["diff_rows", "fallback_diff"]


def diff_rows(a: ProfileData, b: ProfileData) -> tuple[list[dict], str]:
    """Rows of the A→B diff and a line saying where they come from."""
    try:
        import profiler  # noqa: PLC0415

        diff = getattr(profiler, "diff", None)
        if diff is None:
            from profiler import diff as diff_module  # noqa: PLC0415

            diff = getattr(diff_module, "diff")
    except ImportError:
        diff = None
    if callable(diff):
        result = diff(a, b)
        rows = _rows_of(result)
        if rows is not None:
            return rows, "profiler.diff(A, B)"
    return fallback_diff(a, b), "ops joined by name (key_averages of A and B)"


def _rows_of(result) -> list[dict] | None:
    """Turn whatever profiler.diff returns (rows with to_dict/to_dicts, or dicts) into dicts."""
    if hasattr(result, "to_dicts"):
        rows = result.to_dicts()
    elif hasattr(result, "rows"):
        rows = result.rows() if callable(result.rows) else result.rows
        rows = [r.to_dict() if hasattr(r, "to_dict") else dict(r) for r in rows]
    elif isinstance(result, list):
        rows = [r.to_dict() if hasattr(r, "to_dict") else dict(r) for r in result]
    else:
        return None
    out = []
    for k, r in enumerate(rows):
        clean = {key: _plain(v) for key, v in r.items()}
        clean["id"] = k
        out.append(clean)
    return out


def _plain(v):
    if isinstance(v, (list, tuple, set)):
        return ", ".join(str(x) for x in v)
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if v is None or isinstance(v, (int, float, str, bool)):
        return v
    return str(v)


def fallback_diff(a: ProfileData, b: ProfileData) -> list[dict]:
    """Per op name: calls and self/total CPU (and CUDA) time in A and B, and B − A."""
    ra = {r["name"]: r for r in group_rows(a, "name")}
    rb = {r["name"]: r for r in group_rows(b, "name")}
    cuda = a.has_device_time or b.has_device_time
    rows = []
    for k, name in enumerate(sorted(set(ra) | set(rb))):
        x, y = ra.get(name, {}), rb.get(name, {})
        row = {"id": k, "name": name, "status": "both" if x and y else ("only in A" if x else "only in B"),
               "count_a": x.get("count", 0), "count_b": y.get("count", 0),
               "self_cpu_a": x.get("self_cpu", 0.0), "self_cpu_b": y.get("self_cpu", 0.0),
               "cpu_total_a": x.get("cpu_total", 0.0), "cpu_total_b": y.get("cpu_total", 0.0)}
        row["delta_self_cpu"] = row["self_cpu_b"] - row["self_cpu_a"]
        row["self_cpu_ratio"] = (row["self_cpu_b"] / row["self_cpu_a"]) if row["self_cpu_a"] else None
        if cuda:
            row["self_cuda_a"] = x.get("self_cuda", 0.0)
            row["self_cuda_b"] = y.get("self_cuda", 0.0)
            row["delta_self_cuda"] = row["self_cuda_b"] - row["self_cuda_a"]
        rows.append(row)
    rows.sort(key=lambda r: -abs(r["delta_self_cpu"]))
    return rows
