"""``gradtrace``: the command line (``gradtrace`` console script, or ``python -m gradtrace.cli``).

Parsing only; each subcommand's work is in :mod:`cli.commands` (tables, export, view, diff),
:mod:`cli.demo`, :mod:`cli.runscript`, :mod:`cli.bench` and :mod:`cli.runs` (the run history). Those modules are imported when
their command runs, so ``gradtrace --help`` and ``gradtrace table`` never import the engine.

Bad input gives one line on stderr (``gradtrace <command>: error: ...``) and exit status 2;
so does running out of memory. A bad profile file is one: ``profiler.load`` refuses it with
a one-line ``ProfileFormatError`` (see :mod:`profiler.validate`).
"""
from __future__ import annotations

import argparse
import sys

from .commands import GROUPS
from .errors import EXIT_INTERRUPTED, EXIT_USAGE, CLIError
from .launch import add_launch_flags

__all__ = ["main", "build_parser"]

WORKLOAD_NAMES = ("mlp", "cnn", "gpt")
_PROFILE_HELP = "a .gtprof profile, or a torch.profiler trace (.json, .json.gz)"


def _version() -> str:
    try:
        from importlib.metadata import version  # noqa: PLC0415

        return version("gradtrace")
    except Exception:  # pragma: no cover - not installed: running from a checkout
        return "0.1.0+checkout"


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors on one line and exit status 2."""

    def error(self, message):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}; see {self.prog} --help\n")


def _limit(text: str) -> int:
    """``--limit N``: a count of rows, 0 for all; a negative count is a usage error."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of rows, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 (all rows) or more, got {value}")
    return value


def _sort_help() -> str:
    """``table --sort``'s keys: the sortable metrics (profiler.metrics), in table order."""
    from gradtrace.profiler.metrics import METRICS  # noqa: PLC0415 - the profiler, never the engine

    names = [m.name for m in METRICS if m.sortable]
    return (f"{names[0]} (default; self_cuda_time_total with GPU times), {', '.join(names[1:])}; "
            "CUDA spelled 'device' as newer PyTorch does (self_device_time_total)")


class _Help(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog):
        super().__init__(prog, max_help_position=30, width=100)


def _add_profiling_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("profiling")
    g.add_argument("--out", "-o", metavar="FILE",
                   help="profile file to write (default: ./gradtrace-runs/NAME-TIME.gtprof)")
    g.add_argument("--record-shapes", action="store_true", help="record input shapes and dtypes")
    g.add_argument("--with-stack", action="store_true", help="record the Python call site of each op")
    g.add_argument("--memory", action="store_true", help="record tensor allocations and frees")
    g.add_argument("--with-modules", action="store_true", help="keep nn.Module ranges (table --group-by module)")
    g.add_argument("--with-flops", action="store_true", help="estimate FLOPs (implies --record-shapes)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="gradtrace", formatter_class=_Help,
        description="Profile gradtrace training: every forward op and backward node, timed and linked.",
        epilog="examples:\n"
               "  gradtrace demo mlp                     train a small MLP under the profiler\n"
               "  gradtrace run train.py --epochs 1      profile your own script\n"
               "  gradtrace run --nproc 2 train.py       two ranks through mpirun, one profile each\n"
               "  gradtrace table run.gtprof --sort cpu_time_total --limit 15\n"
               "  gradtrace export run.gtprof --chrome trace.json.gz\n"
               "  gradtrace view run.gtprof              dashboard on http://127.0.0.1:8050\n"
               "  gradtrace diff before.gtprof after.gtprof\n"
               "  gradtrace table trace.json.gz          a torch.profiler trace works too\n"
               "  gradtrace import trace.json -o run.gtprof\n"
               "  gradtrace gpu trace.json.gz             GPU utilization, idle time, kernels\n"
               "\nrun 'gradtrace COMMAND --help' for a command's options.")
    parser.add_argument("--version", action="version", version=f"gradtrace {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("demo", formatter_class=_Help, help="train a reference workload under the profiler",
                       description="Train a reference workload (MLP, CNN or tiny GPT) for a few steps under "
                                   "the profiler, print the operator table and the forward+backward "
                                   "summary, and save the profile.",
                       epilog="example:\n  gradtrace demo gpt --steps 5 --record-shapes --with-stack")
    p.add_argument("workload", nargs="?", default="mlp", metavar="{mlp,cnn,gpt}",
                   help="workload to train (default: mlp)")
    p.add_argument("--device", help="cpu or cuda (default: cuda when a GPU is usable, else cpu)")
    p.add_argument("--steps", type=int, default=None, help="training steps (default: the workload's, a few)")
    p.add_argument("--limit", type=_limit, default=15, help="rows of the operator table (default 15)")
    _add_profiling_flags(p)
    p.set_defaults(handler="gradtrace.cli.demo:cmd_demo")

    p = sub.add_parser("run", formatter_class=_Help, help="run a Python script under the profiler",
                       description="Run SCRIPT as __main__ (sys.argv = [SCRIPT, ARGS...]) under the "
                                   "profiler, like python -m cProfile. The script's exit status is "
                                   "kept; if it raises or is interrupted, the partial profile is still "
                                   "saved.\n\nIn the script, profiler.current() is the running profile "
                                   "(None outside gradtrace run) and profiler.current().step() marks a "
                                   "training step (ProfilerStep#N, drives --schedule). cli.step() does "
                                   "the same and is a no-op when no profile runs.",
                       epilog="example:\n  gradtrace run --schedule 1,1,3 --record-shapes train.py --lr 0.1")
    _add_profiling_flags(p)
    p.add_argument("--schedule", metavar="W,U,A[,R[,S]]",
                   help="record by step: wait, warmup, active[, repeat[, skip_first]] "
                        "(like profiler.schedule; the script calls profiler.current().step())")
    p.add_argument("--quiet", "-q", action="store_true", help="do not print the table at the end")
    add_launch_flags(p)       # --nproc, --hostfile, --mpirun-args (cli/launch.py)
    p.add_argument("script", metavar="SCRIPT", help="the Python script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS", help="arguments for the script")
    p.set_defaults(handler="gradtrace.cli.runscript:cmd_run")

    p = sub.add_parser("table", formatter_class=_Help, help="print the operator table of a profile",
                       description="Print key_averages() of a saved profile as a table.",
                       epilog="examples:\n  gradtrace table run.gtprof --sort self_cpu_time_total --limit 20\n"
                              "  gradtrace table run.gtprof --group-by forward-op\n"
                              "  gradtrace table run.gtprof --memory          bytes by kind and op\n"
                              "  gradtrace table run.gtprof --json | jq '.[0]'")
    p.add_argument("file", metavar="FILE", help=_PROFILE_HELP)
    p.add_argument("--sort", metavar="KEY", default=None, help=_sort_help())
    p.add_argument("--limit", type=_limit, default=20, help="at most N rows (0: all; default 20)")
    p.add_argument("--group-by", default="name", metavar="{" + ",".join(GROUPS) + "}",
                   help="rows per op name (default), name+input shape, name+call site, "
                        "nn.Module class, or forward op with its backward cost")
    p.add_argument("--stack-n", type=int, default=3, help="frames kept for --group-by stack (default 3)")
    p.add_argument("--device-rows", action="store_true", help="one row per op and device (cpu, cuda:0)")
    p.add_argument("--per-step", action="store_true",
                   help="one row per ProfilerStep#N (default: one ProfilerStep#* row for all steps)")
    p.add_argument("--memory", action="store_true",
                   help="memory instead of time: bytes by kind (parameter, gradient, optimizer state, "
                        "activation, temporary) and the peak, per device and per op (or --group-by module)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON (times in microseconds)")
    p.set_defaults(handler="gradtrace.cli.commands:cmd_table")

    p = sub.add_parser("export", formatter_class=_Help, help="write a Chrome trace, folded stacks or speedscope",
                       description="Export a saved profile for other tools.",
                       epilog="examples:\n  gradtrace export run.gtprof --chrome trace.json.gz   (Perfetto, chrome://tracing)\n"
                              "  gradtrace export run.gtprof --stacks run.folded --metric self_cpu_time_total\n"
                              "  gradtrace export run.gtprof --speedscope run.speedscope.json")
    p.add_argument("file", metavar="FILE", help=_PROFILE_HELP)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--chrome", metavar="OUT", help="Chrome trace JSON (gzip when OUT ends in .gz)")
    what.add_argument("--stacks", metavar="OUT", help="folded stacks for flame graphs")
    what.add_argument("--speedscope", metavar="OUT", help="speedscope JSON")
    p.add_argument("--metric", default=None, help="with --stacks: the metric, e.g. self_cpu_time_total")
    p.set_defaults(handler="gradtrace.cli.commands:cmd_export")

    p = sub.add_parser("view", formatter_class=_Help, help="open the dashboard for a profile",
                       description="Serve the Dash dashboard for a saved profile.",
                       epilog="example:\n  gradtrace view run.gtprof --port 8051 --no-browser")
    p.add_argument("file", metavar="FILE", help=_PROFILE_HELP)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8050, help="port (default 8050)")
    p.add_argument("--no-browser", action="store_true", help="do not open a web browser")
    p.add_argument("--compare", metavar="B", help="a second profile (or torch trace) for the Compare page")
    p.add_argument("--store", metavar="PATH", help="the run store of the History page "
                   "(default: ./gradtrace-runs/runs.sqlite when it exists; see gradtrace runs)")
    p.add_argument("--verbose", "-v", action="store_true", help="log every HTTP request to stderr")
    p.set_defaults(handler="gradtrace.cli.commands:cmd_view")

    p = sub.add_parser("diff", formatter_class=_Help, help="compare two profiles",
                       description="Per op, the time in A and in B: regressions in red, improvements in green.\n"
                                   "With ProfilerStep ranges, each step is a sample: per op, phase, module,\n"
                                   "kernel and the step time, the ratio of medians B/A with a 95% interval,\n"
                                   "an adjusted p-value and a verdict (slower, faster, unchanged, too few steps).",
                       epilog="examples:\n  gradtrace diff before.gtprof after.gtprof --limit 15\n"
                              "  gradtrace diff main.gtprof pr.gtprof --fail-on-regression 5   (CI gate)")
    p.add_argument("a", metavar="A", help="the baseline profile (.gtprof or torch trace)")
    p.add_argument("b", metavar="B", help="the new profile (.gtprof or torch trace)")
    p.add_argument("--limit", type=_limit, default=20, help="at most N rows (0: all; default 20)")
    p.add_argument("--by", choices=("name", "forward-op"), default="name",
                   help="rows per op name (default) or per forward op with its backward cost")
    p.add_argument("--sort", metavar="METRIC", default=None,
                   help="order by the size of the change in: self_cpu_time_total (default), "
                        "cpu_time_total, self_cuda_time_total, cuda_time_total, count; with "
                        "--by forward-op: forward_backward_cpu_time_total (default), backward_cpu_time_total, ...")
    p.add_argument("--per-step", action="store_true",
                   help="one row per ProfilerStep#N (default: one ProfilerStep#* row for all steps)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.add_argument("--min-share", type=float, default=1.0, metavar="PCT",
                   help="rows under PCT%% of the step are shown but not tested (default 1)")
    p.add_argument("--fail-on-regression", type=float, default=None, metavar="PCT",
                   help="exit 1 when a tested row (or the step time) is slower with its interval's "
                        "lower end above 1 + PCT/100 (a CI gate); 0 otherwise, 2 on bad input")
    p.set_defaults(handler="gradtrace.cli.commands:cmd_diff")

    p = sub.add_parser("gpu", formatter_class=_Help, help="where the GPU time went: utilization, idle, kernels",
                       description="GPU figures of a profile or torch.profiler trace, per device, over all\n"
                                   "steps and per step: GPU utilization, SM efficiency, occupancy, Tensor Cores\n"
                                   "and the step time by priority (TensorBoard plugin's definitions); temporal and\n"
                                   "idle-time breakdowns, communication overlap, launch delay (HTA's); and\n"
                                   "recommendations. A run folder gives one summary per rank.\n"
                                   "Definitions: docs/gpu-analysis.md.",
                       epilog="examples:\n  gradtrace gpu trace.json.gz\n  gradtrace gpu trace.json.gz --kernels --by-op\n"
                              "  gradtrace gpu run_dir/ --json")
    p.add_argument("file", metavar="FILE", help=_PROFILE_HELP + ", or a run folder of ranks")
    p.add_argument("--kernels", action="store_true",
                   help="the kernel view: per kernel name, memcpys by kind, NCCL collectives")
    p.add_argument("--by-op", action="store_true", help="with --kernels: one row per kernel and launching op")
    p.add_argument("--by-launch", action="store_true", help="with --kernels: one row per kernel, grid and block")
    p.add_argument("--limit", type=_limit, default=20, help="with --kernels: at most N kernels (0: all; default 20)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON (full kernel names)")
    p.set_defaults(handler="gradtrace.cli.gpu:cmd_gpu")
    _add_runs_parser(sub)

    p = sub.add_parser("import", formatter_class=_Help, help="save a torch.profiler trace as a gradtrace profile",
                       description="Read a PyTorch profiler trace (prof.export_chrome_trace, JSON or "
                                   ".json.gz) and save it as a .gtprof profile. Every command also "
                                   "reads the trace itself; the profile loads faster.",
                       epilog="examples:\n  gradtrace import trace.json.gz -o run.gtprof\n"
                              "  gradtrace import traces/ -o run/ --nproc 4\n"
                              "  mpirun --hostfile hosts -n 8 gradtrace import traces/ -o run/")
    p.add_argument("trace", metavar="TRACE", help="a torch.profiler Chrome trace (.json or .json.gz), or a "
                                                  "folder of them, one per rank")
    p.add_argument("--out", "-o", metavar="FILE", help="profile to write (default: TRACE with .gtprof); for "
                                                       "a folder, the folder that gets rank0.gtprof ... "
                                                       "(default: the folder itself)")
    p.add_argument("--nproc", type=int, default=1, metavar="N",
                   help="a folder: import its traces in N processes (under mpirun, on each MPI rank, "
                        "which share the traces)")
    p.add_argument("--compress", action="store_true",
                   help="zlib the profile (smaller to move; it is then read by inflating, not mapped)")
    p.set_defaults(handler="gradtrace.cli.importcmd:cmd_import")

    p = sub.add_parser("bench", formatter_class=_Help, help="run the benchmark scripts",
                       description="Run the scripts in benchmarks/ and print their tables.",
                       epilog="example:\n  gradtrace bench --quick --only engine_overhead")
    p.add_argument("--quick", action="store_true", help="small sizes and repeats")
    p.add_argument("--save", action="store_true",
                   help="write each benchmark's JSON results to benchmarks/results/ (default: not kept)")
    p.add_argument("--only", action="append", metavar="NAME", help="run only this benchmark (repeatable)")
    p.add_argument("--dir", default=None, help="benchmarks directory (default: the checkout's benchmarks/)")
    p.set_defaults(handler="gradtrace.cli.bench:cmd_bench")
    return parser


def _add_runs_parser(sub) -> None:
    """``gradtrace runs add|list|trend|compare`` (:mod:`cli.runs`)."""
    store_help = "the run store (default: ./gradtrace-runs/runs.sqlite)"
    runs = sub.add_parser("runs", formatter_class=_Help, help="a history of runs: add, list, trend, compare",
                          description="Keep each run's per-step summaries in a SQLite store: trends "
                                      "with change points, and the statistical diff of any two runs.",
                          epilog="examples:\n  gradtrace runs add run.gtprof --tag commit=abc123\n"
                                 "  gradtrace runs trend --op aten::mm\n"
                                 "  gradtrace runs compare commit=abc123 commit=def456")
    rsub = runs.add_subparsers(dest="runs_command", metavar="ACTION", parser_class=_Parser, required=True)
    p = rsub.add_parser("add", formatter_class=_Help, help="store runs' per-step summaries",
                        description="Store each profile's per-step totals (step, phases, ops, modules, "
                                    "kernels), not the trace.")
    p.add_argument("files", nargs="+", metavar="FILE", help=_PROFILE_HELP)
    p.add_argument("--store", default=None, metavar="PATH", help=store_help)
    p.add_argument("--tag", action="append", metavar="KEY=VALUE", help="label the runs (repeatable)")
    p.set_defaults(handler="gradtrace.cli.runs:cmd_runs_add")
    p = rsub.add_parser("list", formatter_class=_Help, help="the stored runs")
    p.add_argument("--store", default=None, metavar="PATH", help=store_help)
    p.add_argument("--json", action="store_true", help="print the runs as JSON")
    p.set_defaults(handler="gradtrace.cli.runs:cmd_runs_list")
    p = rsub.add_parser("trend", formatter_class=_Help, help="one series across the runs, with change points",
                        description="The median per-step time of the step (default), an op, a module or a "
                                    "kernel in each stored run, and where its level changes.")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--step", action="store_true", help="the step time (default)")
    what.add_argument("--op", metavar="NAME", help="an op's self time")
    what.add_argument("--module", metavar="NAME", help="an nn.Module range's time (nn.Module: ...)")
    what.add_argument("--kernel", metavar="NAME", help="a GPU kernel's device time")
    what.add_argument("--phase", choices=("forward", "backward", "optimizer", "other"), help="a phase's time")
    p.add_argument("--clock", choices=("cpu", "cuda"), default="cpu", help="self CPU (default) or CUDA time")
    p.add_argument("--store", default=None, metavar="PATH", help=store_help)
    p.add_argument("--json", action="store_true", help='print {"runs": [...], "change_points": [...]}')
    p.set_defaults(handler="gradtrace.cli.runs:cmd_runs_trend")
    p = rsub.add_parser("compare", formatter_class=_Help, help="the statistical diff of two stored runs",
                        description="Per step, phase, op, module and kernel: ratio of medians B/A, 95% "
                                    "interval, adjusted p-value and verdict, as gradtrace diff.")
    p.add_argument("a", metavar="A", help="a run: its id (3), a tag (commit=abc123) or a tag's value")
    p.add_argument("b", metavar="B", help="the run to compare with A")
    p.add_argument("--clock", choices=("cpu", "cuda"), default="cpu", help="self CPU (default) or CUDA time")
    p.add_argument("--limit", type=_limit, default=20, help="at most N op/module/kernel rows (0: all; default 20)")
    p.add_argument("--min-share", type=float, default=1.0, metavar="PCT",
                   help="rows under PCT%% of the step are shown but not tested (default 1)")
    p.add_argument("--fail-on-regression", type=float, default=None, metavar="PCT",
                   help="exit 1 when a tested row is slower with its interval above 1 + PCT/100")
    p.add_argument("--store", default=None, metavar="PATH", help=store_help)
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(handler="gradtrace.cli.runs:cmd_runs_compare")


def _resolve(handler: str):
    import importlib  # noqa: PLC0415

    module, func = handler.split(":")
    return getattr(importlib.import_module(module), func)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_USAGE
    prog = f"gradtrace {args.command}"
    try:
        return int(_resolve(args.handler)(args) or 0)
    except CLIError as exc:
        sys.stdout.flush()
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as exc:
        # A profile's stored analysis is checked when first used (profiler.load's
        # defer_checks): a failed check is a bad file, one line like any other.
        from gradtrace.profiler import ProfileFormatError  # noqa: PLC0415

        if not isinstance(exc, ProfileFormatError):
            raise
        sys.stdout.flush()
        print(f"{prog}: error: {exc}; re-record it with gradtrace run or gradtrace demo", file=sys.stderr)
        return EXIT_USAGE
    except MemoryError:
        # A profile too big for this machine is bad input too: one line, not a traceback.
        sys.stdout.flush()
        print(f"{prog}: error: not enough memory; try a smaller profile or a machine with more memory",
              file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # e.g. `gradtrace table x | head`
        import os  # noqa: PLC0415

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
