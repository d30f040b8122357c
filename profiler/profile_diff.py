"""Compare two profiles: per op name (or per forward op with its backward cost), A against B.

``profiler.diff(a, b)`` takes two profiles — :class:`~profiler.data.ProfileData`, a live
``profiler.profile`` or a path to a saved profile — and returns a :class:`ProfileDiff`: one
:class:`DiffRow` per op name with calls and self/total CPU and CUDA time in A and B, the
absolute change (B - A) and the relative change ((B - A) / A, ``None`` when A is 0), sorted by
the largest absolute change. Ops present on one side only are marked (``status`` "only_a" /
"only_b"). ``by="forward_backward"`` compares the forward+backward view instead (one row per
forward op and call site, as :meth:`ProfileData.forward_backward_summary`).

Whether a change is real is decided per step (:mod:`profiler.stats`): when both profiles
have ``ProfilerStep#N`` ranges, each op row (an op's self time, or in the forward_backward
view a forward op's with its own backward nodes') carries the ratio of the per-step medians
B/A, its bootstrap confidence interval, a Mann–Whitney U p-value adjusted by
Benjamini–Hochberg, and a verdict; ``.components`` holds the same for the step time, the
phases, the modules and the kernels; :meth:`ProfileDiff.regressions` is the CI gate's question.

This is the library half of ``gradtrace diff``: ``.rows()`` gives plain dicts and ``.table()``
the text rendering. Times are microseconds, as in ``key_averages()``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from . import metrics as _metrics
from . import stats
from .columns import COLUMNS, STAT_OP_COLUMNS, cells
from .data import ProfileData, load
from .format import format_time
from .table import Column, render, truncate

__all__ = ["diff", "ProfileDiff", "DiffRow", "NAME_METRICS", "FORWARD_BACKWARD_METRICS"]

# metric (a column id of profiler.columns, the row field) -> its header there: the times the
# forward+backward rows carry (profiler.metrics), per op name and per forward op with its
# backward nodes.
NAME_METRICS = {m.name: COLUMNS[m.name].header for m in _metrics.forward_backward_metrics()}
FORWARD_BACKWARD_METRICS = {f: COLUMNS[f].header for f in _metrics.forward_backward_fields()}
_TABLE_METRICS = {  # shown by default (all are in rows())
    "name": ["self_cpu_time_total", "cpu_time_total", "self_cuda_time_total", "cuda_time_total"],
    "forward_backward": ["forward_backward_cpu_time_total", "backward_cpu_time_total",
                         "forward_backward_cuda_time_total"],
}
_VIEWS = {"name": NAME_METRICS, "forward_backward": FORWARD_BACKWARD_METRICS}
_DEFAULT_SORT = {"name": "self_cpu_time_total", "forward_backward": "forward_backward_cpu_time_total"}
STATUSES = ("both", "only_a", "only_b")


@dataclass
class DiffRow:
    """One op (or forward op and call site) in A and B.

    Attributes:
        name: op name; call_site: first stack frame (forward_backward view with stacks) or None.
        status: "both", "only_a" or "only_b".
        count_a, count_b: calls.
        a, b: metric name -> microseconds (0 on the side where the op is absent).
        stats: the op's per-step test (:class:`profiler.stats.RowStats`; in the
            forward_backward view, of its Fwd+Bwd self time); None for ``ProfilerStep#N``
            rows.
    """

    name: str
    call_site: str | None
    status: str
    count_a: int
    count_b: int
    a: dict = field(default_factory=dict)
    b: dict = field(default_factory=dict)
    stats: stats.RowStats | None = None

    # The statistical columns (profiler.columns.STAT_OP_COLUMNS) read these.
    ratio = property(lambda self: self.stats.ratio if self.stats else None)
    ci = property(lambda self: self.stats.ci if self.stats else None)
    q_value = property(lambda self: self.stats.q_value if self.stats else None)
    verdict = property(lambda self: self.stats.verdict if self.stats else None)

    def delta(self, metric: str) -> float:
        """B - A, microseconds."""
        return self.b.get(metric, 0.0) - self.a.get(metric, 0.0)

    def relative(self, metric: str) -> float | None:
        """(B - A) / A; None when A is 0."""
        base = self.a.get(metric, 0.0)
        return self.delta(metric) / base if base else None

    def relative_text(self, metric: str) -> str:
        """The relative change as text: ``+12.50%``, ``new`` / ``gone`` (one side only), ``n/a``."""
        if self.status == "only_b":
            return "new"
        if self.status == "only_a":
            return "gone"
        r = self.relative(metric)
        return "n/a" if r is None else f"{r * 100:+.2f}%"

    def to_dict(self) -> dict:
        d = {"name": self.name, "call_site": self.call_site, "status": self.status,
             "count_a": self.count_a, "count_b": self.count_b, "count_delta": self.count_b - self.count_a}
        for metric in self.a:
            d[f"{metric}_a"] = self.a[metric]
            d[f"{metric}_b"] = self.b[metric]
            d[f"{metric}_delta"] = self.delta(metric)
            d[f"{metric}_rel"] = self.relative(metric)
        d["kind"] = "op"
        d.update(self.stats.stat_fields() if self.stats else dict.fromkeys(_STAT_FIELDS))
        return d


_STAT_FIELDS = ("ratio", "ci_low", "ci_high", "p_value", "q_value", "verdict")


class ProfileDiff:
    """Result of :func:`diff`: rows sorted by the largest absolute change of ``sort_by``.

    Attributes:
        by: "name" or "forward_backward".
        sort_by: the metric the rows are sorted by.
        metrics: the metrics compared (attribute -> header).
        has_cuda: either profile has device time.
        self_cpu_a, self_cpu_b, self_cuda_a, self_cuda_b: totals (us) of the two profiles.
        components: the step time, phases, modules and kernels, tested per step
            (:class:`profiler.stats.RowStats`, in that order).
        steps_a, steps_b: ``ProfilerStep#N`` ranges (samples) in each profile.
        clock: "cpu" or "cuda", the self time that was tested (the sort metric's).
        min_share: rows under this share of the step were not tested.
    """

    def __init__(self, rows: list[DiffRow], by: str, sort_by: str, has_cuda: bool, totals: dict,
                 components: list | None = None, steps: tuple[int, int] = (0, 0), clock: str = "cpu",
                 min_share: float = 0.01):
        self._rows = rows
        self.by = by
        self.sort_by = sort_by
        self.metrics = _VIEWS[by]
        self.has_cuda = has_cuda
        self.self_cpu_a = totals["self_cpu_a"]
        self.self_cpu_b = totals["self_cpu_b"]
        self.self_cuda_a = totals["self_cuda_a"]
        self.self_cuda_b = totals["self_cuda_b"]
        self.components = list(components or [])
        self.steps_a, self.steps_b = steps
        self.clock = clock
        self.min_share = min_share

    def __iter__(self):
        return iter(self._rows)

    def __len__(self):
        return len(self._rows)

    def __getitem__(self, i):
        return self._rows[i]

    def rows(self) -> list[dict]:
        """Rows as plain dicts: name, call_site, status, count_a/b/delta and, per metric,
        ``<metric>_a``, ``_b``, ``_delta`` (us) and ``_rel`` (fraction or None)."""
        return [r.to_dict() for r in self._rows]

    def component_rows(self) -> list[dict]:
        """The step, phase, module and kernel rows as plain dicts (:meth:`RowStats.to_dict`:
        kind, name, steps, per-step medians in us, share, ratio, interval, p-values, verdict)."""
        return [c.to_dict() for c in self.components]

    def tested(self) -> list[stats.RowStats]:
        """Every row that carries a verdict: the op rows', then the components'."""
        return [r.stats for r in self._rows if r.stats and r.stats.verdict] + [
            c for c in self.components if c.verdict]

    def regressions(self, threshold_pct: float = 0.0) -> list[stats.RowStats]:
        """Tested rows judged ``slower`` whose interval's lower end is above 1 + threshold/100:
        B is slower by more than ``threshold_pct`` percent, with confidence (the CI gate)."""
        return stats.regressions(self.tested(), threshold_pct)

    def stats_note(self) -> str:
        """One line saying what was tested and how, or why nothing was."""
        need = stats.min_steps()
        if min(self.steps_a, self.steps_b) == 0:
            return (f"no verdicts: A has {self.steps_a} and B {self.steps_b} ProfilerStep ranges; call "
                    f"prof.step() once per training step (at least {need} steps per run)")
        text = (f"per step: A {self.steps_a} steps, B {self.steps_b}; ratio of medians B/A with a 95% "
                f"bootstrap interval, Mann-Whitney U p-value adjusted by Benjamini-Hochberg; "
                + ("forward op + its backward nodes, " if self.by == "forward_backward" else "")
                + f"self {self.clock.upper()} time; rows under {100 * self.min_share:g}% of the step are not tested")
        if not stats.significance_possible(self.steps_a, self.steps_b):
            text += f"; too few steps: at least {need} per run are needed for any verdict"
        return text

    def table(self, row_limit: int = 100, max_name_column_width: int = 55,
              time_unit: str | None = None, metrics: list[str] | None = None,
              header: str | None = None) -> str:
        """Text table: name, status, calls, then A, B, Δ and Δ% for each metric.

        Args:
            row_limit: at most this many rows (<= 0: all).
            max_name_column_width: longer names are cut with ``...``.
            time_unit: "s", "ms", "us" or None (per cell).
            metrics: metrics to show (default: self and total time; CUDA only when present).
            header: a title line above the table.
        """
        rows = self._rows[:row_limit] if row_limit and row_limit > 0 else list(self._rows)
        if metrics is None:
            metrics = [m for m in _TABLE_METRICS[self.by] if self.has_cuda or COLUMNS[m].clock != "cuda"]
        unknown = [m for m in metrics if m not in self.metrics]
        if unknown:
            raise ValueError(f"unknown metrics {unknown}: expected some of {list(self.metrics)}")

        def t(us: float) -> str:
            return format_time(us, time_unit)

        def signed(us: float) -> str:
            return ("+" if us > 0 else "-" if us < 0 else "") + t(abs(us))

        name_width = max(4, min(max_name_column_width, max((len(r.name) for r in rows), default=0)))
        cols = [Column("Name", [truncate(r.name, max_name_column_width) for r in rows], min_width=name_width)]
        if any(r.call_site for r in rows):
            cols.append(Column("Call Site", [r.call_site or "" for r in rows]))
        marks = {"both": "", "only_a": "A only", "only_b": "B only"}
        calls = COLUMNS["count"].header
        cols += [Column("Status", [marks[r.status] for r in rows], min_width=6),
                 Column(f"{calls} A", [str(r.count_a) for r in rows], min_width=7),
                 Column(f"{calls} B", [str(r.count_b) for r in rows], min_width=7)]
        for m in metrics:
            title = self.metrics[m]
            cols += [Column(f"{title} A", [t(r.a[m]) for r in rows]),
                     Column(f"{title} B", [t(r.b[m]) for r in rows]),
                     Column(f"{title} Δ", [signed(r.delta(m)) for r in rows]),
                     Column(f"{title} Δ%", [r.relative_text(m) for r in rows], min_width=9)]
        if self.steps_a and self.steps_b:
            for spec in STAT_OP_COLUMNS:
                head, texts = cells(COLUMNS[spec], rows, {})
                cols.append(Column(head, texts, min_width=len(head)))
        footer = self.footer(time_unit)
        return render(cols, header=header, footer=footer)

    def footer(self, time_unit: str | None = None) -> list[str]:
        """The lines under a diff table: both totals with their change, then the sort."""
        def total(what: str, a: float, b: float) -> str:
            change = f"{(b - a) / a * 100:+.2f}%" if a else "n/a"
            return f"Self {what} time total: A {format_time(a, time_unit)}, B {format_time(b, time_unit)} ({change})"

        lines = [total("CPU", self.self_cpu_a, self.self_cpu_b)]
        if self.has_cuda:
            lines.append(total("CUDA", self.self_cuda_a, self.self_cuda_b))
        if self.steps_a or self.steps_b:     # (neither: a profile without steps, nothing to say)
            lines.append(self.stats_note())
        lines.append(f"Sorted by absolute change of {self.sort_by}")
        return lines

    def __repr__(self):
        return f"<ProfileDiff by={self.by} rows={len(self._rows)} sort_by={self.sort_by}>"


def _as_data(profile) -> ProfileData:
    if isinstance(profile, ProfileData):
        return profile
    if isinstance(profile, (str, os.PathLike)):
        return load(profile)
    data = getattr(profile, "profile_data", None)
    if isinstance(data, ProfileData):
        return data
    raise TypeError(f"diff() needs a ProfileData, a profiler.profile or a profile path, got {type(profile).__name__}")


def _side(data: ProfileData, by: str, merge_steps: bool) -> dict:
    """key -> (name, call_site, count, {metric: us}) for one profile."""
    metrics = _VIEWS[by]
    out: dict = {}
    if by == "name":
        for r in data.key_averages(merge_steps=merge_steps):
            out[(r.key, None)] = (r.key, None, r.count, {m: float(getattr(r, m)) for m in metrics})
    else:
        for r in data.forward_backward_summary():
            out[(r.name, r.call_site)] = (r.name, r.call_site, r.count,
                                          {m: float(getattr(r, m)) for m in metrics})
    return out


def diff(profile_a, profile_b, by: str = "name", sort_by: str | None = None,
         merge_steps: bool = True, min_share: float = 0.01, alpha: float = 0.05) -> ProfileDiff:
    """Compare profile B against profile A.

    Args:
        profile_a, profile_b: ProfileData, live ``profiler.profile`` or path to a saved profile.
        by: "name" (one row per op name) or "forward_backward" (one row per forward op and
            call site, with the cost of the backward nodes it caused).
        sort_by: metric whose absolute change orders the rows (default ``self_cpu_time_total``
            by name, ``forward_backward_cpu_time_total`` for forward_backward); the table's
            spellings (:func:`profiler.metrics.sort_keys`, e.g. ``self_device_time_total``).
        merge_steps: one "ProfilerStep#*" row for all ``ProfilerStep#N`` ranges, as the
            tables show them (False: a row per step).
        min_share: rows whose per-step median is under this fraction of the step are shown
            but not tested (:func:`profiler.stats.compare`).
        alpha: the false discovery rate of the verdicts (Benjamini-Hochberg).
    Returns:
        A :class:`ProfileDiff`.
    """
    if by not in _VIEWS:
        raise ValueError(f"by={by!r}: expected one of {list(_VIEWS)}")
    sort_by = _metrics.sort_keys().get(sort_by, sort_by) if sort_by else _DEFAULT_SORT[by]
    if sort_by not in _VIEWS[by] and sort_by != "count":
        raise ValueError(f"sort_by={sort_by!r}: expected 'count' or one of {list(_VIEWS[by])}")
    if not 0.0 <= min_share < 1.0:
        raise ValueError(f"min_share={min_share!r}: expected a fraction of the step, 0 <= min_share < 1")
    a, b = _as_data(profile_a), _as_data(profile_b)
    side_a, side_b = _side(a, by, merge_steps), _side(b, by, merge_steps)
    zeros = {m: 0.0 for m in _VIEWS[by]}
    rows = []
    for key in list(side_a) + [k for k in side_b if k not in side_a]:
        in_a, in_b = key in side_a, key in side_b
        name, site, count_a, va = side_a[key] if in_a else (*key, 0, dict(zeros))
        _, _, count_b, vb = side_b[key] if in_b else (*key, 0, dict(zeros))
        status = "both" if in_a and in_b else "only_a" if in_a else "only_b"
        rows.append(DiffRow(name, site, status, count_a, count_b, va, vb))
    # The per-step test, on the sort metric's clock (self time: nested ops never count twice).
    clock = COLUMNS[sort_by].clock or "cpu"
    sa, sb = stats.step_samples(a, clock, by), stats.step_samples(b, clock, by)
    tested = stats.compare(sa, sb, min_share=min_share, alpha=alpha)
    per_op = {t.name: t for t in tested if t.kind == "op"}
    for r in rows:
        r.stats = per_op.get(r.name if by == "name" else stats.forward_op_key(r.name, r.call_site))

    def change(r: DiffRow) -> float:
        return abs(r.count_b - r.count_a) if sort_by == "count" else abs(r.delta(sort_by))

    rows.sort(key=lambda r: (-change(r), r.name, r.call_site or ""))
    ta, tb = a.total_average(), b.total_average()
    totals = {"self_cpu_a": ta.self_cpu_time_total, "self_cpu_b": tb.self_cpu_time_total,
              "self_cuda_a": ta.self_cuda_time_total, "self_cuda_b": tb.self_cuda_time_total}
    return ProfileDiff(rows, by, sort_by, a.has_device_time or b.has_device_time, totals,
                       components=[t for t in tested if t.kind != "op"] if sa.n_steps and sb.n_steps else [],
                       steps=(sa.n_steps, sb.n_steps),
                       clock=clock, min_share=min_share)
