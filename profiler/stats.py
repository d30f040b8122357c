"""Is B really slower than A? Per-step samples of two profiles, and the statistics that decide.

One run of a training loop is many repetitions of one step, so a profile with
``ProfilerStep#N`` ranges holds a sample per step of every quantity: the step time itself, the
time of each phase (forward, backward, optimizer, other — as the Overview splits a step), of
each op (self time, so nested ops never count twice), of each ``nn.Module`` (its range's total)
and of each GPU kernel (its device time). :func:`step_samples` computes them all at once: each
event is assigned to the step its start falls in, then one ``bincount`` over (step, key).
:data:`ProfileData.step_ranges` is the only source of step boundaries, so steps aligned to the
device (GPU traces) are picked up wherever that method provides them.

:func:`compare` then treats the per-step values of A and of B as two independent samples, per
row:

* **ratio** — median(B) / median(A): medians, because a step now and then is slowed by
  something else (a GC pause, another process), and one such step must not move the verdict;
* **interval** — a bootstrap confidence interval of that ratio (``scipy.stats.bootstrap``,
  percentile method, a fixed seed so that a diff is reproducible);
* **p-value** — Mann–Whitney U, two-sided (no assumption of normal step times), then
  Benjamini–Hochberg over all the rows tested (``scipy.stats.false_discovery_control``), so
  that testing a hundred ops does not produce five false alarms;
* **verdict** — ``slower`` / ``faster`` when the adjusted p-value is under alpha *and* the
  interval excludes 1, else ``unchanged``; ``too few steps`` when no outcome at all could be
  significant (:func:`min_steps`). Rows under ``min_share`` of the step are shown, not tested
  (verdict None): their changes are noise next to the step, and every extra test costs power.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from .device import activity_mask
from .phases import BACKWARD, FORWARD, NO_PHASE, OPTIMIZER, PHASES, phase_of_events
from .records import Scope

__all__ = ["StepSamples", "RowStats", "KINDS", "VERDICTS", "step_samples", "forward_op_key", "compare",
           "regressions", "for_display", "significance_possible", "min_steps", "N_RESAMPLES", "SEED"]

KINDS = ("step", "phase", "op", "module", "kernel")
VERDICTS = ("slower", "faster", "unchanged", "too few steps")
STEP_ROW = "step time"
# 999 percentile-bootstrap resamples. Measured on 300 A/A pairs of log-normal steps (5% noise):
# the 95% interval covered the true ratio in 97% (20 steps) and 95% (50 steps) of pairs, and
# its lower end moved by a median 0.1-0.2% of the ratio between seeds. BCa covered the same
# (96%, 94%) at up to 1.5x the time, so the simpler method stays. 500 rows x 50 steps take
# about 1 s on an idle core (benchmarks/regression_power.py prints the time).
N_RESAMPLES = 999
# Fewer resamples only when the draws would exceed this (rows x steps of A and B x resamples):
# a profile of thousands of steps has a narrow interval anyway, and a diff must stay a matter of
# seconds. 5e7 draws keep 999 resamples for 500 rows x 50 steps; 7,000 steps x 18 rows get 199.
DRAW_BUDGET = 50_000_000
MIN_RESAMPLES = 199
SEED = 20240529
_BATCH = 100   # resamples held in memory at once: 100 x rows x steps floats


# --------------------------------------------------------------------------- samples


@dataclass(frozen=True)
class StepSamples:
    """Per-step totals of one profile.

    Attributes:
        clock: "cpu" or "cuda": which self time the op, phase and module samples hold.
        step_names: the ``ProfilerStep#N`` names, in order.
        names: kind (:data:`KINDS`) -> row names.
        values: kind -> (steps, rows) float array of nanoseconds.
    """

    clock: str
    step_names: list[str]
    names: dict[str, list[str]]
    values: dict[str, np.ndarray]

    @property
    def n_steps(self) -> int:
        return len(self.step_names)

    @property
    def step_ns(self) -> np.ndarray:
        return self.values["step"][:, 0]


def _per_step(step: np.ndarray, key_names: list[str], key: np.ndarray, weight: np.ndarray,
              n_steps: int) -> tuple[list[str], np.ndarray]:
    """Σ weight per (step, distinct name): one bincount. Names (not string ids) are the keys,
    so two ids of one name (a merged profile) are one row."""
    distinct = sorted(set(key_names))
    column = {name: j for j, name in enumerate(distinct)}
    key_column = np.array([column[n] for n in key_names], dtype=np.int64)
    flat = step * len(distinct) + key_column[key]
    totals = np.bincount(flat, weights=weight.astype(np.float64), minlength=n_steps * len(distinct))
    return distinct, totals.reshape(n_steps, len(distinct))


def forward_op_key(name: str, call_site: str | None) -> str:
    """The op-row name of a forward op and call site in ``step_samples(..., by="forward_backward")``."""
    return name if call_site is None else f"{name} @ {call_site}"


def step_samples(data, clock: str = "cpu", by: str = "name") -> StepSamples:
    """Per-step totals of every step-time component of a profile.

    Args:
        data: a :class:`~profiler.data.ProfileData`.
        clock: "cpu" (self CPU time) or "cuda" (self CUDA time) for ops, phases and modules;
            kernels always count their device time, the step its wall time.
        by: "name": op rows are op names (self time); "forward_backward": forward ops and
            their call sites, each with the self time of the backward nodes it created (the
            "Fwd+Bwd Self" of :meth:`ProfileData.forward_backward_summary`), named by
            :func:`forward_op_key`; a backward node counts in the step it ran in.
    Returns:
        A :class:`StepSamples`; with no ``ProfilerStep#N`` range, every kind has 0 steps.
    """
    if clock not in ("cpu", "cuda"):
        raise ValueError(f"clock={clock!r}: expected 'cpu' or 'cuda'")
    if by not in ("name", "forward_backward"):
        raise ValueError(f"by={by!r}: expected 'name' or 'forward_backward'")
    steps = data.step_ranges()
    n = len(steps)
    starts = np.array([s for _, s, _ in steps], dtype=np.int64)
    ends = np.array([e for _, _, e in steps], dtype=np.int64)
    cols, a, strings = data.event_columns, data.analysis, data.strings
    ev_start = cols["start_ns"]
    step = np.searchsorted(starts, ev_start, side="right") - 1
    inside = (step >= 0) & (ev_start < ends[np.maximum(step, 0)]) if n else np.zeros(len(ev_start), bool)
    step = np.maximum(step, 0)

    self_ns = a.self_cpu_ns if clock == "cpu" else a.self_cuda_ns
    total_ns = a.cpu_total_ns if clock == "cpu" else a.cuda_total_ns
    scope, name_id = cols["scope"], cols["name_id"]
    user = scope == Scope.USER_SCOPE
    is_step = user & np.isin(name_id, [i for i, s in enumerate(strings) if s.startswith("ProfilerStep#")])
    # A step with nothing in it is no sample: the profiler opens ProfilerStep#N+1 at the last
    # prof.step() and closes it, empty, when profiling stops.
    occupied = np.bincount(step[inside & ~is_step], minlength=n) > 0 if n else np.zeros(0, bool)
    if not occupied.all():
        renumber = np.cumsum(occupied) - 1
        inside &= occupied[step]
        step = np.where(inside, renumber[step], 0)
        steps = [s for s, keep in zip(steps, occupied) if keep]
        n, starts, ends = len(steps), starts[occupied], ends[occupied]
    is_module = user & np.isin(name_id, [i for i, s in enumerate(strings) if s.startswith("nn.Module:")])
    # A kernel (memcpy, memset) of a torch trace (profiler.device): device time only, placed at
    # its launch. A gradtrace profile's device work is its ops, sampled as ops.
    is_kernel = activity_mask(len(ev_start), data.gpu_columns)

    names: dict[str, list[str]] = {}
    values: dict[str, np.ndarray] = {}
    names["step"], values["step"] = [STEP_ROW], (ends - starts).astype(np.float64).reshape(n, 1)

    def group(kind: str, pick: np.ndarray, weight: np.ndarray) -> None:
        idx = np.flatnonzero(inside & pick)
        ids, inverse = np.unique(name_id[idx], return_inverse=True)
        names[kind], values[kind] = _per_step(step[idx], [strings[i] for i in ids], inverse,
                                              weight[idx], n)

    if by == "forward_backward":
        names["op"], values["op"] = _forward_op_samples(data, inside, step, self_ns, n)
    else:
        group("op", ~is_step & ~is_kernel, self_ns)
    group("module", is_module, total_ns)
    group("kernel", is_kernel, a.self_cuda_ns)

    phase = phase_of_events(data)
    per_phase = np.zeros((n, len(PHASES)))
    for j, code in enumerate((FORWARD, BACKWARD, OPTIMIZER)):
        pick = np.flatnonzero(inside & (phase == code))
        per_phase[:, j] = np.bincount(step[pick], weights=self_ns[pick].astype(np.float64), minlength=n)
    if clock == "cpu":   # "other": the rest of the step's wall time (data loading, Python between ops)
        per_phase[:, 3] = np.maximum(0.0, values["step"][:, 0] - per_phase[:, :3].sum(axis=1))
    else:                # on the device: time of work that no phase claims
        pick = np.flatnonzero(inside & (phase == NO_PHASE))
        per_phase[:, 3] = np.bincount(step[pick], weights=self_ns[pick].astype(np.float64), minlength=n)
    names["phase"], values["phase"] = list(PHASES), per_phase
    return StepSamples(clock, [name for name, _, _ in steps], names, values)


def _forward_op_samples(data, inside, step, self_ns, n) -> tuple[list[str], np.ndarray]:
    """Per step, each forward op's (and call site's) self time plus that of the backward
    nodes it created itself — so, as in the summary, no time counts for two rows."""
    cols, a = data.event_columns, data.analysis
    is_forward = (cols["scope"] == Scope.FUNCTION) & (a.backward_ancestor < 0)
    owner = a.forward_event
    created = (owner >= 0) & is_forward[np.maximum(owner, 0)]
    idx = np.flatnonzero(inside & (is_forward | created))
    source = np.where(is_forward[idx], idx, owner[idx])          # the forward op behind each event
    pair = (cols["name_id"][source].astype(np.int64) << 32) | (a.stack_id[source].astype(np.int64) + 1)
    uniq, inverse = np.unique(pair, return_inverse=True)
    labels = []
    for p in uniq.tolist():
        sid = (p & 0xFFFFFFFF) - 1
        site = data.stack_of(sid)[0] if sid >= 0 and data.stack_of(sid) else None
        labels.append(forward_op_key(data.strings[p >> 32], site))
    return _per_step(step[idx], labels, inverse, self_ns[idx], n)


# --------------------------------------------------------------------------- tests


def significance_possible(n_a: int, n_b: int, alpha: float = 0.05) -> bool:
    """Whether a two-sided Mann–Whitney U test of n_a against n_b values can reach ``alpha``.

    Its smallest p-value, when every value of one sample is above every value of the other,
    is 2 / C(n_a + n_b, n_a) under the exact null distribution; with fewer steps than that
    allows, no slowdown however large is significant. (The bootstrap needs 2 values a side.)
    """
    return min(n_a, n_b) >= 2 and math.comb(n_a + n_b, n_a) >= 2.0 / alpha   # int vs float: no overflow


def min_steps(alpha: float = 0.05) -> int:
    """Fewest steps per run (the same in A and B) for which a verdict is possible at all:
    4 at alpha 0.05 (2 / C(8, 4) = 0.029; with 3 a side, 2 / C(6, 3) = 0.1)."""
    n = 2
    while not significance_possible(n, n, alpha):
        n += 1
    return n


@dataclass
class RowStats:
    """One row of a statistical diff: a step-time component in A and in B.

    Attributes:
        kind: one of :data:`KINDS`; name: the op, module, kernel or phase name.
        steps_a, steps_b: samples (steps) in each run.
        median_a, median_b: median per-step time, microseconds.
        share: the larger median over the larger median step time (0..1+).
        tested: whether the row was tested (share at least ``min_share``, present in both).
        ratio: median_b / median_a (None when median_a is 0).
        ci_low, ci_high: the bootstrap confidence interval of the ratio (tested rows).
        p_value: Mann–Whitney U two-sided; q_value: after Benjamini–Hochberg.
        verdict: "slower", "faster", "unchanged", "too few steps", or None (not tested).
    """

    kind: str
    name: str
    steps_a: int
    steps_b: int
    median_a: float
    median_b: float
    share: float
    tested: bool = False
    ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    q_value: float | None = None
    verdict: str | None = None

    @property
    def ci(self) -> tuple[float | None, float | None]:
        """(ci_low, ci_high), the cell of the "95% CI" column."""
        return self.ci_low, self.ci_high

    def stat_fields(self) -> dict:
        """The fields a diff row gains: ratio, ci_low, ci_high, p_value, q_value, verdict."""
        return {"ratio": self.ratio, "ci_low": self.ci_low, "ci_high": self.ci_high,
                "p_value": self.p_value, "q_value": self.q_value, "verdict": self.verdict}

    def to_dict(self) -> dict:
        return {"kind": self.kind, "name": self.name, "steps_a": self.steps_a, "steps_b": self.steps_b,
                "median_a": self.median_a, "median_b": self.median_b, "share": self.share,
                "tested": self.tested, **self.stat_fields()}


def _ratio_of_medians(a, b, axis=-1):
    # A resample of an op absent in most steps can have a median of 0 on both sides: no
    # change (1), not NaN, which would leave the whole interval undefined.
    ma, mb = np.median(a, axis=axis), np.median(b, axis=axis)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((ma == 0) & (mb == 0), 1.0, mb / ma)


def _aligned(sa: StepSamples, sb: StepSamples, kind: str):
    """Names in A then B's new ones, and both sides' (steps, rows) arrays over them (0 where absent)."""
    names = list(sa.names[kind]) + [n for n in sb.names[kind] if n not in set(sa.names[kind])]
    out = []
    for s in (sa, sb):
        col = {n: j for j, n in enumerate(s.names[kind])}
        m = np.zeros((s.n_steps, len(names)))
        have = [j for j, n in enumerate(names) if n in col]
        if have:
            m[:, have] = s.values[kind][:, [col[names[j]] for j in have]]
        out.append(m)
    return names, out[0], out[1]


def compare(sa: StepSamples, sb: StepSamples, *, min_share: float = 0.01, confidence: float = 0.95,
            alpha: float = 0.05, n_resamples: int | None = None, seed: int = SEED,
            kinds: tuple[str, ...] = KINDS) -> list[RowStats]:
    """Test every row of ``kinds`` in B against A (see the module docstring).

    Args:
        sa, sb: the two runs' :func:`step_samples` (same clock).
        min_share: rows whose median is under this fraction of the median step are not tested.
        confidence: of the bootstrap interval. alpha: for the adjusted p-value.
        n_resamples, seed: of the bootstrap (default: :data:`N_RESAMPLES`, fewer when the
            draws would exceed :data:`DRAW_BUDGET`).
    Returns:
        RowStats in ``kinds`` order, each kind's rows by A's order then B's new names.
    """
    from scipy import stats as sps  # noqa: PLC0415 - scipy is loaded only when a diff is tested

    step_median = max(float(np.median(sa.step_ns)) if sa.n_steps else 0.0,
                      float(np.median(sb.step_ns)) if sb.n_steps else 0.0)
    possible = significance_possible(sa.n_steps, sb.n_steps, alpha)
    rows: list[RowStats] = []
    samples_a, samples_b = [], []
    for kind in kinds:
        names, ma, mb = _aligned(sa, sb, kind)
        med_a = np.median(ma, axis=0) if sa.n_steps else np.zeros(len(names))
        med_b = np.median(mb, axis=0) if sb.n_steps else np.zeros(len(names))
        for j, name in enumerate(names):
            share = max(med_a[j], med_b[j]) / step_median if step_median else 0.0
            row = RowStats(kind, name, sa.n_steps, sb.n_steps, float(med_a[j]) / 1e3, float(med_b[j]) / 1e3,
                           float(share))
            row.ratio = float(med_b[j] / med_a[j]) if med_a[j] > 0 else None
            big = kind == "step" or share >= min_share
            if big and not possible:
                row.verdict = "too few steps"
            elif big and med_a[j] > 0 and med_b[j] > 0:
                row.tested = True
                samples_a.append(ma[:, j])
                samples_b.append(mb[:, j])
            rows.append(row)
    tested = [r for r in rows if r.tested]
    if not tested:
        return rows
    xa, xb = np.array(samples_a), np.array(samples_b)
    if n_resamples is None:
        draws = len(tested) * (xa.shape[1] + xb.shape[1])
        n_resamples = max(MIN_RESAMPLES, min(N_RESAMPLES, DRAW_BUDGET // draws))
    with warnings.catch_warnings(), np.errstate(invalid="ignore"):
        # An op absent in some steps can have resamples with a median of 0 in A: a ratio of
        # inf, which scipy's spread check warns about; the percentiles are still right (an
        # upper end of inf is reported as none).
        warnings.simplefilter("ignore", sps.DegenerateDataWarning)
        ci = sps.bootstrap((xa, xb), _ratio_of_medians, vectorized=True, paired=False, axis=-1,
                           confidence_level=confidence, n_resamples=n_resamples, method="percentile",
                           batch=_BATCH, random_state=np.random.default_rng(seed)).confidence_interval
    p = np.atleast_1d(sps.mannwhitneyu(xa, xb, alternative="two-sided", axis=-1).pvalue)
    p = np.where(np.isfinite(p), p, 1.0)    # identical constant samples: no evidence at all
    q = sps.false_discovery_control(p, method="bh")
    for k, r in enumerate(tested):
        lo, hi = float(np.atleast_1d(ci.low)[k]), float(np.atleast_1d(ci.high)[k])
        r.ci_low = lo if math.isfinite(lo) else None
        r.ci_high = hi if math.isfinite(hi) else None
        r.p_value, r.q_value = float(p[k]), float(q[k])
        excludes_one = (r.ci_low is not None and r.ci_low > 1.0) or (r.ci_high is not None and r.ci_high < 1.0)
        if r.q_value < alpha and excludes_one:
            r.verdict = "slower" if r.ratio > 1.0 else "faster"
        else:
            r.verdict = "unchanged"
    return rows


def regressions(rows: list[RowStats], threshold_pct: float = 0.0) -> list[RowStats]:
    """Rows judged ``slower`` whose interval's lower end is above 1 + threshold/100: slower
    by more than ``threshold_pct`` percent, with confidence (the CI gate's question)."""
    bound = 1.0 + threshold_pct / 100.0
    return [r for r in rows if r.verdict == "slower" and r.ci_low is not None and r.ci_low > bound]


def for_display(rows: list[RowStats], limit: int = 0) -> list[RowStats]:
    """Rows in the order tables show them: the step and the phases, then the rest (ops,
    modules, kernels) flagged first and by the size of the change, at most ``limit`` of those
    (0: all)."""
    head = [r for r in rows if r.kind in ("step", "phase")]
    rest = sorted((r for r in rows if r.kind not in ("step", "phase")),
                  key=lambda r: (r.verdict not in ("slower", "faster"), -abs(r.median_b - r.median_a), r.name))
    return head + (rest[:limit] if limit and limit > 0 else rest)
