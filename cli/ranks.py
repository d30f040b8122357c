"""``gradtrace table RUN_DIR``: the per-rank summary of a run folder (profiler/ranks.py): the
``rank*.gtprof`` files of ``gradtrace run --nproc``, or one torch.profiler trace per rank."""
from __future__ import annotations

import json
import sys

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from .errors import CLIError

__all__ = ["cmd_rank_table", "rank_tables"]


def _ms(ns) -> str:
    return f"{ns / 1e6:.3f}"


def rank_tables(summary: dict, plain: bool = False) -> Group:
    """Two tables: per rank (means over steps, milliseconds) and the slowest rank per step."""
    table_box = None if plain else box.SIMPLE
    t = Table(title="Ranks (mean per step, ms)", box=table_box)
    for col in ("Rank", "Steps", "Step", "Compute", "Communication", "Exposed comm", "Hidden comm",
                "Hidden %", "Idle", "Slowest in"):
        t.add_column(col, justify="right")
    for r in summary["ranks"]:
        share = "-" if r["hidden_share"] is None else f"{100 * r['hidden_share']:.1f}"
        t.add_row(str(r["rank"]), str(r["steps"]), _ms(r["step_ns"]), _ms(r["compute_ns"]),
                  _ms(r["communication_ns"]), _ms(r["exposed_ns"]), _ms(r["hidden_ns"]), share,
                  _ms(r["idle_ns"]), str(r["slowest_in"]))
    s = Table(title="Slowest rank per step", box=table_box)
    for col in ("Step", "Slowest rank", "Its step (ms)", "Spread (ms)"):
        s.add_column(col, justify="right")
    for row in summary["steps"]:
        s.add_row(row["step"], str(row["slowest_rank"]), _ms(row["step_ns"]), _ms(row["spread_ns"]))
    basis = set(summary.get("basis", {}).values())
    notes = []
    if "device" in basis:
        notes.append("compute, communication and idle of torch traces with GPU work: the device's kernels, "
                     "as HTA defines them (communication: NCCL kernels; memcpy/memset time is neither "
                     "compute nor idle: memory_ns in --json; docs/gpu-analysis.md)")
    if "host" in basis:
        notes.append("compute, communication and idle of the others: the host's ops and communication ranges")
    if summary.get("clock"):
        notes.append(f"common clock: {summary['clock']}")
    return Group(t, s, Text("\n".join(notes), style="" if plain else "dim"))


def cmd_rank_table(args) -> int:
    from gradtrace.profiler.ranks import load_run, summarize_run  # noqa: PLC0415

    from .render import emit, make_console  # noqa: PLC0415

    try:
        summary = summarize_run(load_run(args.file))
    except (FileNotFoundError, ValueError) as exc:
        raise CLIError(str(exc)) from None
    if args.json:
        sys.stdout.write(json.dumps(summary, indent=1) + "\n")
        return 0
    console, plain = make_console()
    emit(console, rank_tables(summary, plain=plain), plain)
    return 0
