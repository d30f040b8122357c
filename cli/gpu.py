"""``gradtrace gpu FILE``: where the GPU's time went (``profiler.gpu_summary()``), the kernel
view (``--kernels``), and for a run folder one summary per rank.

Pure functions build the rich renderables (:func:`summary_tables`, :func:`kernel_tables`,
:func:`rank_gpu_table`); :func:`cmd_gpu` loads, calls the library and prints. ``--json``
prints the library's dicts as they are (full kernel names, every figure, None as null).
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict
from types import SimpleNamespace

from rich.console import Group
from rich.table import Table  # noqa: TC002 - the builders' return type
from rich.text import Text

from gradtrace.profiler.columns import COLUMNS, ColumnSpec
from gradtrace.profiler.format import format_bytes, format_percent, format_time, pick_time_unit
from gradtrace.profiler.kernels import (collective_table, kernel_table, memcpy_table, readable_kernel_name,
                                        short_kernel_names)
from gradtrace.profiler.ranks import is_run_dir, load_run

from .errors import CLIError, load_profile
from .render import WIDTH, _column_cells, _natural, _table, emit, fit_columns, make_console, spec_table

__all__ = ["cmd_gpu", "summary_tables", "kernel_tables", "rank_gpu_table", "kernel_name_width",
           "kernel_recording_note"]

_LABELS = {
    "gpu_utilization_pct": "GPU utilization",
    "sm_efficiency_pct": "Est. SM efficiency",
    "achieved_occupancy_pct": "Est. achieved occupancy",
    "tensor_core_pct": "Kernel time on Tensor Cores",
    "comm_comp_overlap_pct": "Communication overlapped with computation",
}
_CATEGORY_LABELS = {"kernel": "Kernel", "memcpy": "Memcpy", "memset": "Memset", "communication": "Comm",
                    "runtime": "Runtime", "dataloader": "Loader", "cpu_exec": "CPU exec", "other": "Other"}


def _pct(v) -> str:
    return "-" if v is None else format_percent(v, 100.0)


def _time_cells(values_us: list) -> tuple[str, list[str]]:
    """One unit for a column (header suffix) and its cells; "-" for None."""
    unit = pick_time_unit(v for v in values_us if v is not None)
    return unit, ["-" if v is None else format_time(v, unit, suffix=False) for v in values_us]


def summary_tables(summary: dict, plain: bool = False, title: str = "") -> Group:
    """Per device: the figures over all steps, the temporal and idle breakdowns, the priority
    step breakdown per step, the launch figures; then the recommendations."""
    parts: list = []
    steps = summary["steps"]
    span = summary["steps_us"]
    for device, d in summary["devices"].items():
        head = f"{title}{device}: {len(steps)} step{'s' if len(steps) != 1 else ''}, " \
               f"{format_time(span)} (first step's start to last step's end)"
        t = _table(head, plain)
        t.add_column("Figure")
        t.add_column("Value", justify="right")
        t.add_column("Anchor")
        for key, label in _LABELS.items():
            t.add_row(label, _pct(d[key]), "HTA" if key == "comm_comp_overlap_pct" else "TensorBoard plugin")
        temporal = d["temporal"]
        unit, cells = _time_cells([temporal["compute_us"], temporal["non_compute_us"], temporal["idle_us"],
                                   d["idle_breakdown"]["host_wait_us"], d["idle_breakdown"]["kernel_wait_us"],
                                   d["idle_breakdown"]["other_us"], d["exposed_communication_us"],
                                   d["self_cuda_total_us"]])
        for label, cell in zip(("Compute", "Non-compute (memcpy, memset, communication)", "Idle",
                                "Idle by cause, Σ streams: host wait", "  kernel wait (< 30 us)", "  other",
                                "Exposed communication", "Σ self CUDA"), cells):
            t.add_row(f"{label} ({unit})", cell, "HTA" if "CUDA" not in label else "")
        parts.append(t)
        parts.append(_breakdown_table(d, plain))
        parts.append(_step_figures_table(d, plain))
        if d["launch"] is not None:
            parts.append(_launch_table(d, plain))
    recs = summary.get("recommendations") or []
    if recs:
        lines = [f"- {r['rule']}{' (' + r['device'] + ')' if r.get('device') else ''}: {r['figure']} = "
                 f"{r['value']:.1f} (threshold {r['threshold']:g}). {r['advice']}" for r in recs]
        parts.append(Text("Recommendations", style="" if plain else "bold"))
        parts.append(Text("\n".join(lines)))
    elif summary["devices"]:
        parts.append(Text("No recommendation: no rule of profiler/advice.py fired.", style="" if plain else "dim"))
    parts.append(Text("Definitions and anchors: docs/gpu-analysis.md; --json has every figure, per step too.",
                      style="" if plain else "dim"))
    return Group(*parts)


# Per-step tables show at most this many steps, the longest (a long run has tens of thousands,
# which no one reads in a terminal and rich takes minutes to lay out); --json has every step.
STEP_ROWS = 20


def shown_steps(steps: list) -> list:
    """The steps the per-step tables show: all of them up to :data:`STEP_ROWS`, else the
    :data:`STEP_ROWS` longest, in step order.

    Args:
        steps: a device's ``steps`` of ``gpu_summary()``.
    Returns:
        The steps kept, in their order.
    """
    if len(steps) <= STEP_ROWS:
        return steps
    longest = sorted(range(len(steps)), key=lambda i: steps[i]["step_us"], reverse=True)[:STEP_ROWS]
    return [steps[i] for i in sorted(longest)]


def _steps_note(d: dict) -> str:
    hidden = len(d["steps"]) - len(shown_steps(d["steps"]))
    return f" — the {STEP_ROWS} longest of {len(d['steps']):,} steps; --json has all" if hidden else ""


def _breakdown_table(d: dict, plain: bool) -> Table:
    """TB's priority breakdown, one row per step shown (:func:`shown_steps`) and one for all
    steps."""
    total = {"step": "All steps", "step_us": sum(s["step_us"] for s in d["steps"]),
             "step_breakdown_us": d["step_breakdown_us"]}
    rows = shown_steps(d["steps"]) + [total]
    cats = list(_CATEGORY_LABELS)
    unit = pick_time_unit([r["step_us"] for r in rows])
    t = _table(f"Step time by priority (TensorBoard plugin; {unit}){_steps_note(d)}", plain)
    t.add_column("Step", no_wrap=True, min_width=max(len(r["step"]) for r in rows))
    for col in ["Time", *(_CATEGORY_LABELS[c] for c in cats)]:
        t.add_column(col, justify="right", no_wrap=True)
    for r in rows:
        t.add_row(r["step"], format_time(r["step_us"], unit, suffix=False),
                  *(format_time(r["step_breakdown_us"][c], unit, suffix=False) for c in cats))
    return t


def _step_figures_table(d: dict, plain: bool) -> Table:
    """Each step's GPU utilization, SM efficiency, occupancy and idle time (the steps of
    :func:`shown_steps`)."""
    steps = shown_steps(d["steps"])
    unit = pick_time_unit([s["temporal"]["idle_us"] for s in steps])
    t = _table(f"Per step (TensorBoard plugin's figures, then HTA's){_steps_note(d)}", plain)
    t.add_column("Step", no_wrap=True, min_width=max(len(s["step"]) for s in steps))
    for col in ("GPU util", "SM eff.", "Occup.", "TC", "Overlap", f"Idle ({unit})", f"Host wait ({unit})"):
        t.add_column(col, justify="right", no_wrap=True)
    for s in steps:
        t.add_row(s["step"], _pct(s["gpu_utilization_pct"]), _pct(s["sm_efficiency_pct"]),
                  _pct(s["achieved_occupancy_pct"]), _pct(s["tensor_core_pct"]), _pct(s["comm_comp_overlap_pct"]),
                  format_time(s["temporal"]["idle_us"], unit, suffix=False),
                  format_time(s["idle_breakdown"]["host_wait_us"], unit, suffix=False))
    return t


def _launch_table(d: dict, plain: bool) -> Table:
    launch = d["launch"]
    t = _table("Launches (HTA: kernel start − runtime call end)", plain)
    for col in ("Launched", "Delay mean", "median", "p95", "max", "Short kernels", "Max queue (stream)"):
        t.add_column(col, justify="right", no_wrap=True)
    delay = launch["launch_delay_us"]
    unit, cells = _time_cells([delay["mean"], delay["median"], delay["p95"], delay["max"]])
    queues = d["queue_length"]
    deepest = max(queues.items(), key=lambda kv: kv[1]["max"]) if queues else None
    t.add_row(str(launch["launched"]), *(f"{c} {unit}" for c in cells),
              f"{launch['short_kernels']} ({launch['short_kernels_pct']:.1f}%)",
              f"{deepest[1]['max']} ({deepest[0]})" if deepest else "-")
    return t


# ---------------------------------------------------------------- the kernel view

def _kernel_specs(by_op: bool, by_launch: bool) -> list:

    specs = [COLUMNS["name"]]
    if by_op:
        specs.append(ColumnSpec("op", "Launched by", "text"))
    if by_launch:
        specs += [ColumnSpec("grid", "Grid", "text"), ColumnSpec("block", "Block", "text")]
    specs += [COLUMNS["count"], ColumnSpec("kernel_time_total", "Total", "time"),
              ColumnSpec("kernel_time_total_percent", "Total %", "percent"),
              ColumnSpec("kernel_time_avg", "Mean", "time"),
              ColumnSpec("occupancy", "Occ. %", "text"), ColumnSpec("tc", "TC", "text"),
              ColumnSpec("kind", "Kind", "text")]
    return specs


def _display_rows(rows) -> list:
    kinds = {"COMPUTATION": "COMP", "COMMUNICATION": "COMM", "MEMORY": "MEMORY"}
    return [SimpleNamespace(**{**vars(r), "occupancy": "-" if r.occupancy_pct is None else f"{r.occupancy_pct:.1f}",
                               "tc": "-" if r.tensor_cores is None else ("yes" if r.tensor_cores else "no"),
                               "kind": kinds.get(r.kind, r.kind)}) for r in rows]


def kernel_name_width(rows, by_op: bool = False, by_launch: bool = False, width: int = WIDTH) -> int:
    """The width the kernel table gives its name column in ``width`` characters."""

    shown = [SimpleNamespace(**{**vars(r), "name": readable_kernel_name(r.name)}) for r in _display_rows(rows)]
    totals = {"kernel_time_total": sum(r.kernel_time_total for r in rows) or 1.0}
    columns = []
    for spec in _kernel_specs(by_op, by_launch):
        header, texts = _column_cells(spec, shown, totals)
        columns.append((spec, header, texts, _natural(header, texts)))
    _, _, widths = fit_columns(columns, width)
    return widths.get("name", 8)


def kernel_tables(rows, memcpys: list, collectives: list, *, by_op: bool = False, by_launch: bool = False,
                  limit: int = 20, plain: bool = False, width: int = WIDTH) -> Group:
    """The kernel table (readable names, distinct at the column's width), memcpys by kind and
    collectives."""

    shown = rows[:limit] if limit else rows
    name_w = kernel_name_width(shown, by_op, by_launch, width)
    labels = short_kernel_names([r.name for r in shown], name_w, plain)
    display = [SimpleNamespace(**{**vars(r), "name": label}) for r, label in zip(_display_rows(shown), labels)]
    # The share column reads each row's total against all kernels' (every row, not only those shown).
    whole = sum(r.kernel_time_total for r in rows)
    parts = [spec_table(display, _kernel_specs(by_op, by_launch), {"kernel_time_total": whole},
                        title=f"Kernels ({len(shown)} of {len(rows)}, heaviest first; Total % of device time)",
                        plain=plain, highlight="kernel_time_total", width=width)]
    if memcpys:
        t = _table("Memcpy and memset", plain)
        for col in ("Device", "Kind", "Host memory", "Count", "Time", "Bytes", "GB/s"):
            t.add_column(col, justify="left" if col in ("Device", "Kind", "Host memory") else "right")
        for m in memcpys:
            t.add_row(m["device"], m["kind"], m["host_memory"] or "-", str(m["count"]),
                      format_time(m["time_total_us"]), "-" if m["bytes"] is None else format_bytes(m["bytes"]),
                      "-" if m["bandwidth_gbps"] is None else f"{m['bandwidth_gbps']:.2f}")
        parts.append(t)
    if collectives:
        t = _table("Collectives (NCCL kernels)", plain)
        for col in ("Device", "Collective", "Algorithm", "Protocol", "Calls", "Latency mean", "Latency total",
                    "Bytes", "Bus GB/s"):
            t.add_column(col, justify="left" if col in ("Device", "Collective", "Algorithm", "Protocol") else "right")
        for c in collectives:
            t.add_row(c["device"], c["collective"] or "-", c["algorithm"] or "-", c["protocol"] or "-",
                      str(c["count"]), format_time(c["latency_avg_us"]), format_time(c["latency_total_us"]),
                      _collective_bytes(c),
                      "-" if c["bus_bandwidth_gbps"] is None else f"{c['bus_bandwidth_gbps']:.2f}")
        parts.append(t)
    return Group(*parts)


def _collective_bytes(row: dict) -> str:
    """The bytes of a collective row, with how many calls they cover when not all are sized."""
    if row["bytes"] is None:
        return "-"
    text = format_bytes(row["bytes"])
    return text if row["sized"] == row["count"] else f"{text} ({row['sized']}/{row['count']} calls)"


# ---------------------------------------------------------------- run folders

def rank_gpu_table(summaries: dict, plain: bool = False) -> Table:
    """One row per rank and device: the figures over all steps."""
    t = _table("GPU per rank (over all steps)", plain)
    for col in ("Rank", "Device", "GPU util", "SM eff.", "Occupancy", "Tensor Cores", "Compute", "Non-compute",
                "Idle", "Comm overlap"):
        t.add_column(col, justify="right", no_wrap=True)
    for rank, s in summaries.items():
        for device, d in s["devices"].items():
            temporal = d["temporal"]
            unit, cells = _time_cells([temporal["compute_us"], temporal["non_compute_us"], temporal["idle_us"]])
            t.add_row(str(rank), device, _pct(d["gpu_utilization_pct"]), _pct(d["sm_efficiency_pct"]),
                      _pct(d["achieved_occupancy_pct"]), _pct(d["tensor_core_pct"]),
                      *(f"{c} {unit}" for c in cells), _pct(d["comm_comp_overlap_pct"]))
    return t


def kernel_recording_note(metadata: dict) -> Text | None:
    """The one line saying why a gradtrace CUDA profile's launch figures (occupancy, SM
    efficiency, Tensor Cores, launch delay, copy kinds) are null: its kernels were not
    recorded (``metadata["kernel_recording_reason"]``); None when they were, or for a trace."""
    if metadata.get("kernel_recording") is not False:
        return None
    reason = metadata.get("kernel_recording_reason") or "unknown"
    return Text(f"Launch figures are null: kernels were not recorded ({reason}); the device times are "
                "per op (docs/gpu-analysis.md, kernel recording).")


def _json(obj) -> None:
    sys.stdout.write(json.dumps(obj, indent=1, default=lambda o: o.item() if hasattr(o, "item") else str(o)) + "\n")


def _kernel_json(data, by_op: bool, by_launch: bool, limit: int) -> dict:


    rows = kernel_table(data, by_op=by_op, by_launch=by_launch)
    return {"kernels": [asdict(r) for r in (rows[:limit] if limit else rows)], "memcpy": memcpy_table(data),
            "collectives": collective_table(data)}


def cmd_gpu(args) -> int:
    if is_run_dir(args.file):
        try:
            profiles = load_run(args.file)
        except (FileNotFoundError, ValueError) as exc:
            raise CLIError(str(exc)) from None
        if args.kernels:
            out = {str(r): _kernel_json(d, args.by_op, args.by_launch, args.limit) for r, d in profiles.items()}
            if args.json:
                _json(out)
                return 0
            raise CLIError("--kernels of a run folder: give one rank's file, or add --json for every rank")
        summaries = {r: d.gpu_summary() for r, d in profiles.items()}
        if not any(s["devices"] for s in summaries.values()):
            raise CLIError(f"{args.file}: no GPU work in any rank's profile (no kernels, memcpys or device "
                           "intervals); record them on GPUs with the cuda activity")
        if args.json:
            _json({str(r): s for r, s in summaries.items()})
            return 0
        console, plain = make_console()
        parts = [rank_gpu_table(summaries, plain)]
        parts += [summary_tables(s, plain, title=f"rank {r}, ") for r, s in summaries.items()]
        emit(console, Group(*parts), plain)
        return 0
    data = load_profile(args.file)
    # Device work exists where some event has a device interval (asking device_work itself
    # would compute it, seconds at 10M events, when the summary is stored).
    if not data.has_device_time:
        raise CLIError(f"{args.file}: no GPU work in this profile (no kernels, memcpys or device intervals); "
                       "record it on a GPU with the cuda activity")
    if args.kernels:
        if args.json:
            _json(_kernel_json(data, args.by_op, args.by_launch, args.limit))
            return 0

        console, plain = make_console()
        tables = kernel_tables(kernel_table(data, by_op=args.by_op, by_launch=args.by_launch),
                               memcpy_table(data), collective_table(data), by_op=args.by_op,
                               by_launch=args.by_launch, limit=args.limit, plain=plain, width=console.width)
        note = kernel_recording_note(data.metadata)
        emit(console, Group(tables, note) if note is not None else tables, plain)
        return 0
    summary = data.gpu_summary()
    if args.json:
        _json(summary)
        return 0
    console, plain = make_console()
    note = kernel_recording_note(data.metadata)
    tables = summary_tables(summary, plain)
    emit(console, Group(tables, note) if note is not None else tables, plain)
    return 0
