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


def rank_tables(summary: dict, plain: bool = False) -> Group:
    """Two tables: per rank (means over steps, milliseconds) and the slowest rank per step."""
    # The profiler is imported when a command runs, not when the CLI starts.
    from gradtrace.profiler.ranks import rank_table, step_table  # noqa: PLC0415

    table_box = None if plain else box.SIMPLE
    t, s = (_table(title, *build(summary), table_box) for title, build in (
        ("Ranks (mean per step, ms)", rank_table), ("Slowest rank per step", step_table)))
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


def _table(title: str, columns, rows, table_box) -> Table:
    table = Table(title=title, box=table_box)
    for col in columns:
        table.add_column(col.header, justify="right")
    for row in rows:
        table.add_row(*row)
    return table


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
