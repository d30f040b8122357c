"""``gradtrace import TRACE -o run.gtprof``: save a torch.profiler trace as a gradtrace profile.

Every command reads torch traces directly; importing once saves the parsing on each later
read (a gradtrace profile loads in a fraction of the time) and keeps a compact copy.
"""
from __future__ import annotations

from pathlib import Path

from .errors import CLIError, check_output_path, load_profile

__all__ = ["cmd_import", "default_output"]


def default_output(trace: str) -> Path:
    """``run.pt.trace.json.gz`` -> ``run.pt.trace.gtprof`` (beside the trace)."""
    from gradtrace.profiler import FILE_SUFFIX  # noqa: PLC0415

    p = Path(trace)
    name = p.name
    for suffix in (".gz", ".json"):
        if name.endswith(suffix):
            name = name[:-len(suffix)]
    return p.with_name((name or "trace") + FILE_SUFFIX)


def cmd_import(args) -> int:
    from gradtrace.profiler.torch_trace import forward_backward_pairing, is_torch_trace  # noqa: PLC0415

    if Path(args.trace).is_file() and not is_torch_trace(args.trace):
        raise CLIError(f"{args.trace}: not a torch trace (JSON or gzip JSON); a .gtprof profile "
                       "needs no import")
    out = check_output_path(args.out) if args.out else default_output(args.trace)
    data = load_profile(args.trace)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        data.save(out)
    except OSError as exc:
        raise CLIError(f"{out}: cannot write ({exc.strerror or exc})") from None
    counts = data.metadata["torch_trace"]
    print(f"wrote {out}: {data.n_events:,} events, {data.n_memory_records:,} memory records "
          f"(from {counts['events_in_file']:,} trace events)")
    pairing = forward_backward_pairing(data)
    if len(pairing.backward):
        print(pairing.summary())
    return 0
